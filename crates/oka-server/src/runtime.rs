//! Worker threads: each has its own single-threaded tokio runtime, optionally pinned
//! to a core, and accepts on its own `SO_REUSEPORT` listener on the shared port, so
//! the kernel spreads connections and workers share nothing on the hot path but the
//! store client and atomic metrics. The admin server runs on a thread of its own.
//!
//! Each accept loop caps its open connections (beyond the cap a new connection
//! gets a 503 and is closed), survives running out of file descriptors (it logs,
//! counts, answers the waiting connection 503 with a spare descriptor, and goes on
//! once descriptors free up), and on shutdown closes its listener and waits for its
//! connections to finish ([`crate::conn`]).
//!
//! Shutdown is a drain ([`Running::drain`], then [`Running::shutdown`]): first
//! `/readyz` fails and answers say `connection: close` while everything is still
//! served, so load balancers take the instance out; then the listeners close and
//! every request whose head has arrived is served within the grace period.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use oka_telemetry::http::{ConnTimeouts, Tls, TlsError, TlsFiles};
use oka_telemetry::http::{Listener, Served, bind, check_fd_limit};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::metrics::{Metrics, WorkerCounters};

mod grpc_port;
use crate::router::{Direct, admin_router, router};
use crate::state::{AppState, Shared};

/// How workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeMode {
    /// One thread per worker, each with its own single-threaded runtime and
    /// `SO_REUSEPORT` listener, optionally pinned.
    #[default]
    PerCore,
    /// One multi-threaded runtime with `workers` threads on one listener (for
    /// comparison in benchmarks).
    Shared,
}

/// How to run the servers.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Serving address (port 0 picks one).
    pub listen: SocketAddr,
    /// Admin address.
    pub admin_listen: SocketAddr,
    /// Worker threads.
    pub workers: usize,
    /// Pin worker `i` to core `i` (when there are at least as many cores).
    pub pin: bool,
    /// Per-core workers or one shared runtime.
    pub runtime: RuntimeMode,
    /// Header-read and keep-alive idle timeouts of client connections.
    pub timeouts: ConnTimeouts,
    /// Client connections one worker holds open; beyond, new ones are answered
    /// 503 and closed (on the gRPC port: closed).
    pub max_connections: usize,
    /// Feast's gRPC services' address (`--grpc-listen`, with a Feast
    /// repository), if any.
    pub grpc_listen: Option<SocketAddr>,
    /// TLS on the serving port (`--tls-cert`, `--tls-key`), or plain HTTP.
    pub tls: Option<Arc<Tls>>,
    /// TLS on the admin port (`--admin-tls-cert`, `--admin-tls-key`).
    pub admin_tls: Option<Arc<Tls>>,
}

impl ServerConfig {
    /// Defaults for everything but the addresses.
    pub fn new(listen: SocketAddr, admin_listen: SocketAddr) -> Self {
        Self {
            listen,
            admin_listen,
            workers: available_cpus(),
            pin: true,
            runtime: RuntimeMode::PerCore,
            timeouts: ConnTimeouts::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            grpc_listen: None,
            tls: None,
            admin_tls: None,
        }
    }
}

/// Client connections one worker holds open by default (each costs 25–40 KB
/// while idle, so 4096 is ~160 MB per worker at worst).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// CPUs this process may run on (cgroup- and affinity-aware, as the standard
/// library reports them).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Running servers.
#[derive(Debug)]
pub struct Running {
    /// The bound serving address.
    pub addr: SocketAddr,
    /// The bound admin address.
    pub admin_addr: SocketAddr,
    /// The bound gRPC address, if gRPC is served.
    pub grpc_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    stop_workers: watch::Sender<bool>,
    stop_admin: watch::Sender<bool>,
    workers: Vec<JoinHandle<Served>>,
    admin: JoinHandle<Served>,
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shutdown {
    /// Every worker finished within the grace period.
    pub in_time: bool,
    /// Connections still serving a request at the end of the grace period (cut
    /// when the process exits).
    pub cut: u64,
    /// Connections closed with complete requests on them unanswered.
    pub unanswered: u64,
    /// Queued ingest batches were all written.
    pub flushed: bool,
}

impl Shutdown {
    /// Nothing was cut short: every request received was answered and every
    /// acknowledged write is stored.
    pub fn clean(&self) -> bool {
        self.in_time && self.unanswered == 0 && self.flushed
    }
}

impl std::fmt::Display for Shutdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut problems = Vec::new();
        if !self.in_time {
            problems.push(format!(
                "{} connection(s) still serving a request at the end of the grace period were cut",
                self.cut
            ));
        }
        if self.unanswered > 0 {
            problems.push(format!(
                "{} connection(s) were closed with requests they had sent unanswered",
                self.unanswered
            ));
        }
        if !self.flushed {
            problems.push("queued ingest batches were not all written".to_owned());
        }
        if problems.is_empty() {
            f.write_str("clean")
        } else {
            f.write_str(&problems.join("; "))
        }
    }
}

impl Running {
    /// The first step of a shutdown: `/readyz` answers 503 (load balancers stop
    /// sending) and every answer carries `connection: close` (keep-alive clients
    /// reconnect, through the balancer, elsewhere), while everything is served as
    /// before. Call [`Self::shutdown`] after the deregistration delay.
    pub fn drain(&self) {
        self.shared.start_draining();
    }

    /// Graceful shutdown (draining first if [`Self::drain`] was not called): the
    /// workers stop accepting and close connections with no complete request
    /// head received; every request whose head has arrived is read, served
    /// and answered with `connection: close`, for up to `grace`; what is still
    /// being served then is counted and logged as cut. Queued ingest batches are
    /// written; then the admin server stops.
    pub fn shutdown(self, grace: Duration) -> Shutdown {
        let deadline = Instant::now() + grace;
        self.drain();
        let _ = self.stop_workers.send(true);
        let mut report = Shutdown {
            in_time: true,
            cut: 0,
            unanswered: 0,
            flushed: false,
        };
        for t in self.workers {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                if let Ok(served) = t.join() {
                    report.unanswered += served.unanswered;
                }
            } else {
                report.in_time = false;
            }
        }
        if !report.in_time {
            report.cut = self
                .shared
                .workers()
                .iter()
                .map(|w| {
                    let http = w.connections.load(Ordering::Acquire);
                    (http + w.grpc_connections.load(Ordering::Acquire)) as u64
                })
                .sum();
            warn!(
                grace_ms = grace.as_millis() as u64,
                connections = report.cut,
                "connections still serving a request at the end of the grace period are cut"
            );
        }
        if report.unanswered > 0 {
            warn!(
                connections = report.unanswered,
                "shutdown closed connections with requests they had sent unanswered"
            );
        }
        // Flush the write path on a small runtime of its own.
        let writer = self.shared.writer.clone();
        report.flushed = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| {
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_secs(1));
                rt.block_on(async move { tokio::time::timeout(left, writer.flush()).await })
                    .is_ok()
            })
            .unwrap_or(false);
        if !report.flushed {
            warn!("pending ingest batches were not all written before shutdown");
        }
        let _ = self.stop_admin.send(true);
        let _ = self.admin.join();
        report
    }
}

/// What a server thread serves.
enum App {
    /// A worker: its router is built on its runtime, after it opened its own store
    /// handle.
    Worker(AppState),
    /// A ready router (the admin server).
    Ready(axum::Router, Arc<WorkerCounters>),
}

struct Thread {
    name: String,
    listener: TcpListener,
    app: App,
    /// The shared draining flag (serving workers), or one never set (admin: its
    /// scrapers and probes keep their connections).
    draining: Arc<oka_telemetry::http::Drain>,
    core: Option<core_affinity::CoreId>,
    timeouts: ConnTimeouts,
    max_connections: usize,
    metrics: Arc<Metrics>,
    /// The worker's gRPC listener, if gRPC is served.
    grpc: Option<TcpListener>,
    /// TLS on this listener, or plain HTTP.
    tls: Option<Arc<Tls>>,
}

fn spawn_server(
    thread: Thread,
    stop: watch::Receiver<bool>,
    multi_threaded: Option<usize>,
) -> io::Result<JoinHandle<Served>> {
    std::thread::Builder::new()
        .name(thread.name.clone())
        .spawn(move || {
            let name = &thread.name;
            if let Some(core) = thread.core
                && !core_affinity::set_for_current(core)
            {
                error!(thread = %name, core = core.id, "could not pin thread");
            }
            let rt = match multi_threaded {
                None => tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build(),
                Some(n) => tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(n)
                    .enable_all()
                    .build(),
            };
            match rt {
                Ok(rt) => rt.block_on(serve_thread(thread, stop)),
                Err(e) => {
                    error!(thread = %name, error = %e, "could not build runtime");
                    Served::default()
                }
            }
        })
}

/// A server thread's accept loop (and a worker's gRPC server), on its runtime.
async fn serve_thread(thread: Thread, stop: watch::Receiver<bool>) -> Served {
    let Thread {
        name,
        listener,
        app,
        draining,
        timeouts,
        max_connections,
        metrics,
        grpc,
        tls,
        ..
    } = thread;
    let mut grpc_server = None;
    let (app, counters) = match app {
        App::Worker(state) => {
            let state = state.with_worker_store().await;
            let counters = Arc::clone(&state.worker);
            if let Some(l) = grpc {
                let port = grpc_port::GrpcPort {
                    name: format!("{name}-grpc"),
                    timeouts,
                    max_connections,
                    draining: Arc::clone(&draining),
                    events: metrics.clone(),
                    tls: tls.clone(),
                    open: Arc::clone(&counters.grpc_connections),
                };
                grpc_server = spawn_grpc(l, state.clone(), port, stop.clone());
            }
            let direct: Arc<dyn oka_telemetry::http::Direct> = Arc::new(Direct::new(state.clone()));
            let app = oka_telemetry::http::App {
                router: router(state),
                direct: Some(direct),
                h2c: false,
            };
            (app, counters)
        }
        App::Ready(app, counters) => (app.into(), counters),
    };
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            error!(thread = %name, error = %e, "could not register listener");
            return Served::default();
        }
    };
    let server = Listener {
        name,
        app,
        draining,
        open: Arc::clone(&counters.connections),
        events: metrics,
        timeouts,
        max_connections,
        tls,
    };
    let mut served = server.run(listener, stop).await;
    if let Some(grpc) = grpc_server
        && let Ok(grpc) = grpc.await
    {
        served.unanswered += grpc.unanswered;
    }
    served
}

/// Starts serving Feast's gRPC services on a worker's runtime.
fn spawn_grpc(
    listener: TcpListener,
    state: AppState,
    port: grpc_port::GrpcPort,
    stop: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<Served>> {
    match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => Some(tokio::spawn(grpc_port::serve(state, l, port, stop))),
        Err(e) => {
            error!(thread = %port.name, error = %e, "could not register the gRPC listener");
            None
        }
    }
}

/// The start's last line: where each port listens, and which speak TLS.
fn log_serving(
    config: &ServerConfig,
    addr: SocketAddr,
    admin_addr: SocketAddr,
    grpc_addr: Option<SocketAddr>,
) {
    let (tls, admin_tls) = (config.tls.is_some(), config.admin_tls.is_some());
    match grpc_addr {
        Some(grpc_addr) => info!(%addr, %admin_addr, %grpc_addr, tls, admin_tls, "serving"),
        None => info!(%addr, %admin_addr, tls, admin_tls, "serving"),
    }
}

/// Binds and starts `config.workers` workers and the admin server.
pub fn start(config: &ServerConfig, shared: Arc<Shared>) -> io::Result<Running> {
    let workers = config.workers.max(1);
    let max_connections = config.max_connections.max(1);
    let admin = bind(config.admin_listen, false)?;
    let admin_addr = admin.local_addr()?;
    let (stop_workers, rx) = watch::channel(false);
    let (stop_admin, admin_rx) = watch::channel(false);
    let thread = |name: String, listener, app, core| Thread {
        name,
        listener,
        app,
        draining: shared.draining_flag(),
        core,
        timeouts: config.timeouts,
        max_connections,
        metrics: Arc::clone(&shared.metrics),
        grpc: None,
        tls: config.tls.clone(),
    };
    let (grpc_addr, mut grpc_listeners) = grpc_listeners(config, workers)?;

    let (addr, threads) = match config.runtime {
        RuntimeMode::PerCore => {
            let (addr, listeners) = reuseport_listeners(config.listen, workers)?;
            let cores = core_affinity::get_core_ids().unwrap_or_default();
            let pin = config.pin && !cores.is_empty() && workers <= cores.len();
            let mut threads = Vec::with_capacity(workers);
            let mut pinned = Vec::new();
            for (i, listener) in listeners.into_iter().enumerate() {
                let core = pin.then(|| cores[i]);
                if let Some(c) = core {
                    pinned.push(c.id);
                }
                let app = App::Worker(AppState::new(Arc::clone(&shared), i));
                let mut t = thread(format!("oka-worker-{i}"), listener, app, core);
                t.grpc = grpc_listeners.pop();
                threads.push(spawn_server(t, rx.clone(), None)?);
            }
            info!(%addr, workers, runtime = "per-core", pinned = ?pinned, "workers started");
            (addr, threads)
        }
        RuntimeMode::Shared => {
            let listener = bind(config.listen, false)?;
            let addr = listener.local_addr()?;
            // One router, and the shared store, for every thread of the runtime.
            let state = AppState::new(Arc::clone(&shared), 0);
            let counters = Arc::clone(&state.worker);
            let app = App::Ready(router(state), counters);
            let mut t = thread("oka-shared".to_owned(), listener, app, None);
            t.max_connections = max_connections.saturating_mul(workers);
            let handle = spawn_server(t, rx.clone(), Some(workers))?;
            info!(%addr, threads = workers, runtime = "shared", "workers started");
            (addr, vec![handle])
        }
    };
    check_fd_limit(workers.saturating_mul(max_connections));
    let _ = shared.serving_addr.set(addr);
    let admin_state = AppState::admin(Arc::clone(&shared));
    let admin_counters = Arc::clone(&admin_state.worker);
    let admin_app = App::Ready(admin_router(admin_state), admin_counters);
    let admin_thread = Thread {
        // The admin port's probes and scrapers keep their connections while draining.
        draining: Arc::new(oka_telemetry::http::Drain::new()),
        tls: config.admin_tls.clone(),
        ..thread("oka-admin".to_owned(), admin, admin_app, None)
    };
    let admin = spawn_server(admin_thread, admin_rx, None)?;
    log_serving(config, addr, admin_addr, grpc_addr);
    Ok(Running {
        addr,
        admin_addr,
        grpc_addr,
        shared,
        stop_workers,
        stop_admin,
        workers: threads,
        admin,
    })
}

/// The gRPC port's listeners, one per worker, when gRPC is served.
fn grpc_listeners(
    config: &ServerConfig,
    workers: usize,
) -> io::Result<(Option<SocketAddr>, Vec<TcpListener>)> {
    match config.grpc_listen {
        Some(_) if config.runtime == RuntimeMode::Shared => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "gRPC is served by per-core workers only (leave the runtime at per-core)",
        )),
        Some(listen) => {
            let (addr, listeners) = reuseport_listeners(listen, workers)?;
            Ok((Some(addr), listeners))
        }
        None => Ok((None, Vec::new())),
    }
}

/// One listener per worker on the same port (SO_REUSEPORT, so the kernel spreads
/// connections over them); the first resolves port 0, the others join its port.
fn reuseport_listeners(
    listen: SocketAddr,
    workers: usize,
) -> io::Result<(SocketAddr, Vec<TcpListener>)> {
    // SO_REUSEPORT would let a second server join a port already in use: check
    // with a plain bind first.
    if listen.port() != 0 {
        drop(TcpListener::bind(listen)?);
    }
    let first = bind(listen, true)?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind(addr, true)?);
    }
    Ok((addr, listeners))
}
