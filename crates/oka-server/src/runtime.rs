//! Worker threads: each has its own single-threaded tokio runtime, optionally pinned
//! to a core, and accepts on its own `SO_REUSEPORT` listener on the shared port, so
//! the kernel spreads connections and workers share nothing on the hot path but the
//! store client and atomic metrics. The admin server runs on a thread of its own.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::router::{admin_router, router};
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
}

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
    shared: Arc<Shared>,
    stop_workers: watch::Sender<bool>,
    stop_admin: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    admin: JoinHandle<()>,
}

impl Running {
    /// Graceful shutdown: `/readyz` turns false, the workers stop accepting and
    /// finish their in-flight requests for up to `grace`, queued ingest batches are
    /// written, then the admin server stops. Returns whether everything finished
    /// within the grace period.
    pub fn shutdown(self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        self.shared.draining.store(true, Ordering::Release);
        let _ = self.stop_workers.send(true);
        let mut clean = true;
        for t in self.workers {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                clean = false;
            }
        }
        if !clean {
            warn!(
                grace_ms = grace.as_millis() as u64,
                "in-flight requests outlived the grace period"
            );
        }
        // Flush the write path on a small runtime of its own.
        let writer = self.shared.writer.clone();
        let flushed = tokio::runtime::Builder::new_current_thread()
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
        if !flushed {
            warn!("pending ingest batches were not all written before shutdown");
        }
        let _ = self.stop_admin.send(true);
        let _ = self.admin.join();
        clean && flushed
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    #[cfg(unix)]
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// What a server thread serves.
enum App {
    /// A worker: its router is built on its runtime, after it opened its own store
    /// handle.
    Worker(AppState),
    /// A ready router (the admin server).
    Ready(axum::Router),
}

fn spawn_server(
    name: String,
    listener: TcpListener,
    app: App,
    core: Option<core_affinity::CoreId>,
    stop: watch::Receiver<bool>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Some(core) = core
                && !core_affinity::set_for_current(core)
            {
                error!(thread = %name, core = core.id, "could not pin thread");
            }
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    error!(thread = %name, error = %e, "could not build runtime");
                    return;
                }
            };
            rt.block_on(async move {
                let app = match app {
                    App::Worker(state) => router(state.with_worker_store().await),
                    App::Ready(app) => app,
                };
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        error!(thread = %name, error = %e, "could not register listener");
                        return;
                    }
                };
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(stopped(stop))
                    .await
                {
                    error!(thread = %name, error = %e, "server failed");
                }
            });
        })
}

/// Binds and starts `config.workers` workers and the admin server.
pub fn start(config: &ServerConfig, shared: Arc<Shared>) -> io::Result<Running> {
    let workers = config.workers.max(1);
    let admin = bind(config.admin_listen)?;
    let admin_addr = admin.local_addr()?;
    let (stop_workers, rx) = watch::channel(false);
    let (stop_admin, admin_rx) = watch::channel(false);

    let (addr, threads) = match config.runtime {
        RuntimeMode::PerCore => {
            // SO_REUSEPORT would let a second server join a port already in use:
            // check with a plain bind first.
            if config.listen.port() != 0 {
                drop(TcpListener::bind(config.listen)?);
            }
            // The first bind resolves port 0; the others join that port.
            let first = bind(config.listen)?;
            let addr = first.local_addr()?;
            let mut listeners = vec![first];
            for _ in 1..workers {
                listeners.push(bind(addr)?);
            }
            let cores = core_affinity::get_core_ids().unwrap_or_default();
            let pin = config.pin && !cores.is_empty() && workers <= cores.len();
            let mut threads = Vec::with_capacity(workers);
            let mut pinned = Vec::new();
            for (i, listener) in listeners.into_iter().enumerate() {
                let core = pin.then(|| cores[i]);
                if let Some(c) = core {
                    pinned.push(c.id);
                }
                threads.push(spawn_server(
                    format!("oka-worker-{i}"),
                    listener,
                    App::Worker(AppState::new(Arc::clone(&shared), i)),
                    core,
                    rx.clone(),
                )?);
            }
            info!(%addr, workers, runtime = "per-core", pinned = ?pinned, "workers started");
            (addr, threads)
        }
        RuntimeMode::Shared => {
            let listener = bind(config.listen)?;
            let addr = listener.local_addr()?;
            let app = router(AppState::new(Arc::clone(&shared), 0));
            let rx = rx.clone();
            let thread = std::thread::Builder::new()
                .name("oka-shared".to_owned())
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(workers)
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            error!(error = %e, "could not build the shared runtime");
                            return;
                        }
                    };
                    rt.block_on(async move {
                        match tokio::net::TcpListener::from_std(listener) {
                            Ok(l) => {
                                if let Err(e) = axum::serve(l, app)
                                    .with_graceful_shutdown(stopped(rx))
                                    .await
                                {
                                    error!(error = %e, "server failed");
                                }
                            }
                            Err(e) => error!(error = %e, "could not register listener"),
                        }
                    });
                })?;
            info!(%addr, threads = workers, runtime = "shared", "workers started");
            (addr, vec![thread])
        }
    };
    let admin_app = admin_router(AppState::admin(Arc::clone(&shared)));
    let admin = spawn_server(
        "oka-admin".to_owned(),
        admin,
        App::Ready(admin_app),
        None,
        admin_rx,
    )?;
    info!(%addr, %admin_addr, "serving");
    Ok(Running {
        addr,
        admin_addr,
        shared,
        stop_workers,
        stop_admin,
        workers: threads,
        admin,
    })
}
