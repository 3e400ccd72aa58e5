//! One accept loop: a listening socket, its router and its limits.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::accept::{AcceptErrors, is_connection_error};
use super::conn::{self, ConnTimeouts};
use super::{ConnEvents, ConnRefusal, Tls, stopped};

/// One accept loop: a listener, its router and its limits.
pub struct Listener {
    /// Named in logs (`oka-worker-0`, `oka-admin`).
    pub name: String,
    /// What it serves.
    pub app: super::App,
    /// Started when the process drains: answers carry `connection: close`. A
    /// listener whose clients should keep their connections (an admin port's
    /// probes and scrapers) is given one never started.
    pub draining: Arc<super::Drain>,
    /// Connections open now (kept up to date by the loop; read by metrics and
    /// by a shutdown that reports what it cut).
    pub open: Arc<AtomicUsize>,
    /// What the loop reports.
    pub events: Arc<dyn ConnEvents>,
    /// Header-read and idle timeouts.
    pub timeouts: ConnTimeouts,
    /// Connections held at once; beyond, a new one is answered 503 and closed
    /// (on a TLS port: closed).
    pub max_connections: usize,
    /// Serve TLS with this configuration (re-read on reload), or plain HTTP.
    pub tls: Option<Arc<Tls>>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name)
            .field("timeouts", &self.timeouts)
            .field("max_connections", &self.max_connections)
            .field("tls", &self.tls.as_ref().map(|t| t.files()))
            .finish_non_exhaustive()
    }
}

/// What an accept loop reports when it ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    /// Connections closed by the shutdown with requests unanswered.
    pub unanswered: u64,
}

/// At most this many refused connections linger (reading what their client sent
/// so the 503 is not lost to a reset); beyond, they are answered and closed at once.
const MAX_LINGERING_REFUSALS: usize = 64;

impl Listener {
    /// Accepts until `stop`, then stops accepting, lets every connection finish
    /// (each sees `stop` and finishes the request whose head has arrived) and
    /// reports.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        stop: watch::Receiver<bool>,
    ) -> Served {
        let mut connections = JoinSet::new();
        let mut lingering = JoinSet::new();
        let mut accept_errors = AcceptErrors::new();
        let mut stopping = std::pin::pin!(stopped(stop.clone()));
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut stopping => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                Some(_) = lingering.join_next(), if !lingering.is_empty() => continue,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    accept_errors
                        .handle(
                            &self.name,
                            &*self.events,
                            &listener,
                            (&e, self.tls.is_some()),
                        )
                        .await;
                    continue;
                }
            };
            self.admit(stream, &mut connections, &mut lingering, &stop);
        }
        // Stop accepting. Connections the kernel has completed but this loop not
        // yet taken would be reset when the listening socket closes, with the
        // requests their clients may already have sent: they are taken first.
        for stream in backlog(listener) {
            self.admit(stream, &mut connections, &mut lingering, &stop);
        }
        lingering.abort_all();
        let mut served = Served::default();
        while let Some(ended) = connections.join_next().await {
            if ended.is_ok_and(|e| e.unanswered) {
                served.unanswered += 1;
            }
        }
        self.events.unanswered_connections(served.unanswered);
        served
    }

    /// Serves a new connection, or refuses it at the connection cap.
    fn admit(
        &self,
        stream: tokio::net::TcpStream,
        connections: &mut JoinSet<conn::Ended>,
        lingering: &mut JoinSet<()>,
        stop: &watch::Receiver<bool>,
    ) {
        self.events.connection_accepted();
        if self.open.load(Ordering::Acquire) >= self.max_connections {
            self.events.connection_refused(ConnRefusal::ConnectionCap);
            if self.tls.is_some() {
                // A plain-text 503 would break the client's handshake: closed.
                drop(stream);
            } else if lingering.len() < MAX_LINGERING_REFUSALS {
                lingering.spawn(super::refuse::refuse(stream));
            } else {
                super::refuse::refuse_now(&stream);
            }
            return;
        }
        let _ = stream.set_nodelay(true);
        let open = OpenConnection::new(Arc::clone(&self.open));
        let serving = conn::serve(
            stream,
            self.app.clone(),
            self.timeouts,
            Arc::clone(&self.events),
            conn::Shutdown {
                draining: Arc::clone(&self.draining),
                stop: stop.clone(),
            },
            self.tls.as_ref().map(|t| t.config()),
        );
        connections.spawn(async move {
            let ended = serving.await;
            drop(open);
            ended
        });
    }
}

/// A listening socket for a [`Listener`] (non-blocking, `TCP_NODELAY`; with
/// `SO_REUSEPORT` when `reuse_port`, so several loops share one port).
pub fn bind(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    #[cfg(unix)]
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_tcp_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Closes `listener`, returning the connections waiting in its backlog (asked
/// of the kernel, not the runtime, which may not have seen them yet).
fn backlog(listener: tokio::net::TcpListener) -> Vec<tokio::net::TcpStream> {
    let Ok(listener) = listener.into_std() else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    while taken.len() < MAX_BACKLOG_TAKEN {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Ok(stream) = stream
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpStream::from_std(stream))
                {
                    taken.push(stream);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    taken
}

/// The most connections taken from a closing listener's backlog (it holds at
/// most the `listen` backlog of 1024).
const MAX_BACKLOG_TAKEN: usize = 1024;

/// Counts an open connection while alive.
struct OpenConnection(Arc<AtomicUsize>);

impl OpenConnection {
    fn new(open: Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::AcqRel);
        Self(open)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
