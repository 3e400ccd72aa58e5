//! Worker threads: each has its own single-threaded tokio runtime, optionally pinned
//! to a core, and accepts on its own `SO_REUSEPORT` listener on the shared port, so
//! the kernel spreads connections and workers share nothing on the hot path but the
//! store client and atomic metrics. The admin server runs on a thread of its own.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;
use tracing::{error, info};

use crate::router::{admin_router, router};
use crate::state::{AppState, Shared};

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
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting, lets in-flight requests finish, and joins the threads.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.threads {
            let _ = t.join();
        }
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

fn spawn_server(
    name: String,
    listener: TcpListener,
    app: axum::Router,
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
    // The first bind resolves port 0; the others join that port.
    let first = bind(config.listen)?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind(addr)?);
    }
    let admin = bind(config.admin_listen)?;
    let admin_addr = admin.local_addr()?;

    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let pin = config.pin && !cores.is_empty() && workers <= cores.len();
    let (stop, rx) = watch::channel(false);
    let mut threads = Vec::with_capacity(workers + 1);
    let mut pinned = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let core = pin.then(|| cores[i]);
        if let Some(c) = core {
            pinned.push(c.id);
        }
        let app = router(AppState::new(Arc::clone(&shared), i));
        threads.push(spawn_server(
            format!("oka-worker-{i}"),
            listener,
            app,
            core,
            rx.clone(),
        )?);
    }
    let app = admin_router(AppState::new(Arc::clone(&shared), workers));
    threads.push(spawn_server("oka-admin".to_owned(), admin, app, None, rx)?);
    info!(%addr, %admin_addr, workers, pinned = ?pinned, "serving");
    Ok(Running {
        addr,
        admin_addr,
        stop,
        threads,
    })
}
