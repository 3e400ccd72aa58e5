//! One client connection, served by hyper's HTTP/1.1 connection with the limits
//! Oka sets itself:
//!
//! - **header-read timeout**: a request head (request line and headers) must arrive
//!   within `header_read` of its first byte, and a new connection must send its first
//!   head within `header_read` of being accepted;
//! - **keep-alive idle timeout**: between requests a connection may sit idle for
//!   `idle`, then it is closed (keep it longer than the load balancer's own idle
//!   timeout, so that the balancer closes first and never sends a request on a
//!   connection the server is closing);
//! - the body-read deadline is the handler's (`oka_server::guard::read_body`);
//! - on a TLS listener ([`super::Tls`]) the handshake is read under the same
//!   header-read deadline (a client that never finishes it is closed), a
//!   client that speaks plain HTTP is answered 400 in plain HTTP, and ALPN
//!   picks HTTP/2 or HTTP/1.1.
//!
//! hyper's own header timer also runs between requests, so one timer would be
//! both; the split is kept here: [`Clocked`] wraps the socket and fails a read
//! with `TimedOut` when the deadline of the connection's current phase passes,
//! and `Tracked` tells it when a request is being served (no connection
//! deadline then).
//!
//! Shutdown comes in two steps (in `oka serve`: `oka_server::runtime::Running`). While the server
//! drains, every answer carries `connection: close`, so keep-alive clients move
//! to a new connection (through the load balancer, to another instance). Once it
//! stops, a connection with no complete request head received closes at once
//! (part of a head gets no answer: a client cannot hold the shutdown for the
//! header-read timeout); a request whose head has arrived (in hyper's buffer or
//! waiting in the socket) is read within its usual timeouts, served, and
//! answered with `connection: close`. hyper's own graceful shutdown is not used: it would close a connection
//! whose request head is received but not yet parsed. Complete requests a client
//! pipelined behind the last one answered cannot be answered any more: they are
//! reported, so the shutdown does not claim a clean finish. An HTTP/2 connection
//! gets a GOAWAY instead (when the server drains or stops): the streams it has
//! begun are served, and the client knows which it must send again.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::response::Response;
use futures::task::AtomicWaker;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tracing::debug;

use super::app::App;
use super::{ClientIdentity, ConnEvents, ConnTimeout, TlsFailure};

mod h2;
mod handshake;

use h2::serve_http2;
use handshake::handshake;

/// How long a connection may take between and before requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnTimeouts {
    /// A request head must arrive within this of its first byte (a new
    /// connection: of being accepted).
    pub header_read: Duration,
    /// A keep-alive connection may sit this long between requests.
    pub idle: Duration,
}

impl Default for ConnTimeouts {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(10),
            // Longer than an AWS ALB's default idle timeout (60 s): the balancer
            // closes an idle connection first, never the server under it.
            idle: Duration::from_secs(75),
        }
    }
}

/// Waiting for the next request (nothing of it received yet).
const WAITING: u8 = 0;
/// Some of a request head has arrived.
const HEAD: u8 = 1;
/// A request is being served (as `Clocked::armed`: no deadline armed; the
/// connection's phase is then `Phase::in_flight` > 0).
const SERVING: u8 = 2;

/// What the socket wrapper and the service share about one connection.
#[derive(Debug)]
struct Phase {
    /// `WAITING` or `HEAD` while nothing is being served.
    now: AtomicU8,
    /// Requests being served (HTTP/1.1: at most one; HTTP/2: one per stream).
    in_flight: AtomicU32,
    /// The connection speaks HTTP/2: arriving bytes (frames, pings) do not
    /// start a request head's deadline; between requests the idle one runs.
    http2: AtomicBool,
    /// Responses produced so far; a change re-arms the idle deadline.
    served: AtomicU64,
    /// The server stopped: a connection with nothing of a next request received
    /// ends (its reads see the end of the stream).
    stopping: AtomicBool,
    /// The server's drain ([`Shutdown::draining`]), held here so that a
    /// request clones only this connection's `Arc`, not one every core shares.
    draining: Arc<super::Drain>,
    /// The connection's read, waiting while requests are served: woken when
    /// the last of them is dropped unanswered (an HTTP/2 stream the client
    /// reset), so that it arms the idle deadline. An answer wakes it anyway
    /// (the connection writes it).
    reader: AtomicWaker,
}

/// A socket whose reads fail with `TimedOut` once the current phase's deadline
/// passes: the header-read deadline while a head arrives, the idle deadline
/// between requests, none while a request is served.
#[derive(Debug)]
pub struct Clocked {
    inner: TcpStream,
    phase: Arc<Phase>,
    timeouts: ConnTimeouts,
    /// Fires at or before `due`; re-armed only when it fires early or must fire
    /// sooner (a timer reset on every request cost more than the rest of this
    /// wrapper).
    deadline: Pin<Box<Sleep>>,
    /// The current phase's deadline.
    due: Instant,
    /// The phase the deadline was armed for (`SERVING`: none armed).
    armed: u8,
    /// `served` when the idle deadline was armed.
    armed_at: u64,
    events: Arc<dyn ConnEvents>,
}

impl Clocked {
    /// `due`: when the first request head (and, on a TLS listener, the
    /// handshake before it) must have arrived.
    fn new(
        inner: TcpStream,
        phase: Arc<Phase>,
        timeouts: ConnTimeouts,
        due: Instant,
        events: Arc<dyn ConnEvents>,
    ) -> Self {
        Self {
            inner,
            phase,
            deadline: Box::pin(tokio::time::sleep_until(due)),
            due,
            timeouts,
            armed: HEAD,
            armed_at: 0,
            events,
        }
    }

    /// Whether the socket holds bytes not read yet. Asked of the kernel: the
    /// runtime learns of them only when its reactor next runs, which a busy
    /// worker may not have let it do since they arrived.
    fn bytes_waiting(&self) -> bool {
        let mut byte = [std::mem::MaybeUninit::uninit(); 1];
        socket2::SockRef::from(&self.inner)
            .peek(&mut byte)
            .is_ok_and(|n| n > 0)
    }

    fn arm(&mut self, phase: u8, after: Duration) {
        self.armed = phase;
        self.due = Instant::now() + after;
        if self.deadline.deadline() > self.due {
            self.deadline.as_mut().reset(self.due);
        }
    }

    /// Whether the current phase's deadline has passed; a timer that fired early
    /// is re-armed for the deadline (and registers this task's waker).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        while self.deadline.as_mut().poll(cx).is_ready() {
            if Instant::now() >= self.due {
                return true;
            }
            self.deadline.as_mut().reset(self.due);
        }
        false
    }
}

impl AsyncRead for Clocked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let pending = match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                // The first bytes of a request: its head's deadline is armed if
                // the head does not arrive whole (the next read waits, below).
                if buf.filled().len() > before && !this.phase.http2.load(Ordering::Relaxed) {
                    let _ = this.phase.now.compare_exchange(
                        WAITING,
                        HEAD,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                return Poll::Ready(result);
            }
            Poll::Pending => Poll::Pending,
        };
        let now = if this.phase.in_flight.load(Ordering::Acquire) > 0 {
            SERVING
        } else {
            this.phase.now.load(Ordering::Acquire)
        };
        if now != SERVING && this.phase.stopping.load(Ordering::Acquire) && !this.bytes_waiting() {
            // Stopped, and no complete request head to read: end of stream.
            // hyper takes it as the client closing an idle connection, or one
            // that sent part of a head (which gets no answer: a client holding
            // a head half-sent must not hold the shutdown for the header-read
            // timeout).
            return Poll::Ready(Ok(()));
        }
        match now {
            SERVING => {
                this.armed = SERVING;
                this.phase.reader.register(cx.waker());
                return pending;
            }
            WAITING => {
                let served = this.phase.served.load(Ordering::Acquire);
                if this.armed != WAITING || this.armed_at != served {
                    this.armed_at = served;
                    this.arm(WAITING, this.timeouts.idle);
                }
            }
            _ => {
                if this.armed != HEAD {
                    this.arm(HEAD, this.timeouts.header_read);
                }
            }
        }
        if this.expired(cx) {
            let (which, what) = if this.armed == WAITING {
                (ConnTimeout::Idle, "the connection was idle too long")
            } else {
                (
                    ConnTimeout::HeaderRead,
                    "the request head did not arrive in time",
                )
            };
            this.events.connection_timed_out(which);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)));
        }
        pending
    }
}

impl AsyncWrite for Clocked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The app as a hyper service that marks when a request is being served, and
/// closes the connection after its answer once the server drains.
#[derive(Debug, Clone)]
struct Tracked {
    app: App,
    phase: Arc<Phase>,
    /// The client certificate's identity (mutual TLS), given to every request.
    identity: Option<ClientIdentity>,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let serving = Serving::new(&self.phase);
        let phase = Arc::clone(&self.phase);
        let mut req = req.map(Body::new);
        if let Some(identity) = &self.identity {
            req.extensions_mut().insert(identity.clone());
        }
        let direct = match &self.app.direct {
            Some(direct) => direct.serve(req),
            None => Err(req),
        };
        let response = match direct {
            Ok(direct) => futures::future::Either::Left(direct),
            Err(req) => {
                let routed = tower::ServiceExt::oneshot(self.app.router.clone(), req);
                futures::future::Either::Right(routed)
            }
        };
        Box::pin(async move {
            let mut response = match response {
                futures::future::Either::Left(direct) => Ok(direct.await),
                futures::future::Either::Right(routed) => routed.await,
            };
            if let Ok(r) = &mut response
                && phase.draining.is_started()
                && !phase.http2.load(Ordering::Relaxed)
            {
                // hyper closes the connection after an answer that says so.
                // (HTTP/2 has no such header: its connection gets a GOAWAY.)
                r.headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            phase.now.store(WAITING, Ordering::Release);
            phase.served.fetch_add(1, Ordering::AcqRel);
            serving.answered();
            response
        })
    }
}

/// One request in flight on a connection, counted until answered or dropped
/// (an HTTP/2 stream the client resets drops its request, and the connection
/// goes on: its idle deadline must not stay disarmed).
struct Serving(Option<Arc<Phase>>);

impl Serving {
    fn new(phase: &Arc<Phase>) -> Self {
        phase.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(Some(Arc::clone(phase)))
    }

    /// The request is answered: the connection, writing the answer, re-arms
    /// its deadline itself.
    fn answered(mut self) {
        if let Some(phase) = self.0.take() {
            phase.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Serving {
    /// Dropped unanswered: the connection waits for a next request, and if this
    /// was the last in flight its read (which nothing else may wake: the client
    /// sends nothing more) must arm the idle deadline now.
    fn drop(&mut self) {
        if let Some(phase) = self.0.take() {
            phase.now.store(WAITING, Ordering::Release);
            if phase.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
                phase.reader.wake();
            }
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    /// It was closed by a shutdown with complete requests still unanswered.
    pub unanswered: bool,
}

/// How the server's shutdown reaches a connection.
#[derive(Debug, Clone)]
pub struct Shutdown {
    /// Started when the server drains: answers carry `connection: close`,
    /// HTTP/2 connections get a GOAWAY.
    pub draining: Arc<super::Drain>,
    /// Turns true when the server stops: the connection finishes the request
    /// that has begun to arrive, if any, and closes.
    pub stop: watch::Receiver<bool>,
}

/// Serves one connection until the client closes it, a timeout closes it, or
/// the server stops and it finishes ([`Shutdown`]). With `tls`, the connection
/// is a TLS one made with that configuration.
pub async fn serve(
    stream: TcpStream,
    app: App,
    timeouts: ConnTimeouts,
    events: Arc<dyn ConnEvents>,
    shutdown: Shutdown,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Ended {
    let due = Instant::now() + timeouts.header_read;
    let phase = Arc::new(Phase {
        now: AtomicU8::new(HEAD),
        in_flight: AtomicU32::new(0),
        http2: AtomicBool::new(false),
        served: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        draining: shutdown.draining,
        reader: AtomicWaker::new(),
    });
    let Some(config) = tls else {
        let h2c = app.h2c && h2::prior_knowledge(&stream, due, &shutdown.stop).await;
        let io = Clocked::new(stream, Arc::clone(&phase), timeouts, due, events);
        let service = Tracked {
            app,
            phase,
            identity: None,
        };
        if h2c {
            service.phase.http2.store(true, Ordering::Relaxed);
            return serve_http2(io, service, shutdown.stop).await;
        }
        return serve_http1(io, service, shutdown.stop).await;
    };
    let Some(stream) = handshake(
        stream,
        config,
        Arc::clone(&phase),
        timeouts,
        due,
        events,
        &shutdown.stop,
    )
    .await
    else {
        return Ended::default();
    };
    let session = stream.get_ref().1;
    let identity = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| ClientIdentity::of(leaf));
    let http2 = session.alpn_protocol() == Some(b"h2");
    let service = Tracked {
        app,
        phase,
        identity,
    };
    if http2 {
        service.phase.http2.store(true, Ordering::Relaxed);
        serve_http2(stream, service, shutdown.stop).await
    } else {
        serve_http1(stream, service, shutdown.stop).await
    }
}

/// What a connection is served over: the clocked socket, or TLS over it.
trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The client's socket.
    fn tcp(&self) -> &TcpStream;
    /// Whether what arrives on the socket is encrypted (not a request to read).
    fn encrypted(&self) -> bool;
}

impl Transport for Clocked {
    fn tcp(&self) -> &TcpStream {
        &self.inner
    }

    fn encrypted(&self) -> bool {
        false
    }
}

impl Transport for tokio_rustls::server::TlsStream<Clocked> {
    fn tcp(&self) -> &TcpStream {
        &self.get_ref().0.inner
    }

    fn encrypted(&self) -> bool {
        true
    }
}

/// Serves HTTP/1.1 on `io` (see the module's notes on shutdown).
async fn serve_http1<T: Transport>(io: T, service: Tracked, stop: watch::Receiver<bool>) -> Ended {
    let phase = Arc::clone(&service.phase);
    let mut conn = hyper::server::conn::http1::Builder::new()
        // Oka's own timers (above) replace hyper's, which would also close
        // keep-alive connections after the header timeout.
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(io), service);
    let mut stop = pin!(super::stopped(stop));
    let mut stopping = false;
    let result = std::future::poll_fn(|cx| {
        if !stopping && stop.as_mut().poll(cx).is_ready() {
            stopping = true;
            // Polled right after: an idle read sees the end of the stream now.
            phase.stopping.store(true, Ordering::Release);
        }
        conn.poll_without_shutdown(cx)
    })
    .await;
    match result {
        Ok(()) => {
            let parts = conn.into_parts();
            let mut io = parts.io.into_inner();
            let unanswered = stopping && holds_a_request(&parts.read_buf, io.tcp(), io.encrypted());
            if unanswered {
                debug!("a connection closed by shutdown had requests it did not answer");
            }
            let _ = io.shutdown().await;
            Ended { unanswered }
        }
        Err(e) => {
            debug!(error = %e, "connection ended with an error");
            Ended::default()
        }
    }
}

/// Whether `buffered` plus what is waiting on the socket holds a complete request
/// head (a request the client sent and will not get an answer to).
/// What is waiting on an encrypted socket cannot be read here: only what was
/// decrypted into `buffered` counts.
fn holds_a_request(buffered: &[u8], stream: &TcpStream, encrypted: bool) -> bool {
    let mut bytes = buffered.to_vec();
    let mut chunk = [0u8; 8192];
    while !encrypted && bytes.len() < 64 * 1024 {
        match stream.try_read(&mut chunk) {
            Ok(n) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    bytes.windows(4).any(|w| w == b"\r\n\r\n")
}
