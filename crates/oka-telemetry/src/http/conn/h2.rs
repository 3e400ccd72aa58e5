//! HTTP/2 on a connection whose ALPN chose it (TLS), or that began with
//! HTTP/2's preface where plain HTTP/2 is allowed ([`crate::http::App::h2c`]).

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::{Ended, Phase, Tracked, Transport};

/// Streams one HTTP/2 connection serves at once (each a request in flight;
/// the per-worker in-flight limit sheds beyond what the worker can take).
const H2_MAX_STREAMS: u32 = 256;

/// The largest request head (decoded header list) an HTTP/2 client may send.
const H2_MAX_HEADER_LIST: u32 = 64 * 1024;

/// Serves HTTP/2 on `io`. When the server drains or stops, the connection gets
/// a GOAWAY: the streams it has begun are served, then it closes.
pub(super) async fn serve_http2<T: Transport>(
    io: T,
    service: Tracked,
    stop: watch::Receiver<bool>,
) -> Ended {
    let phase: Arc<Phase> = Arc::clone(&service.phase);
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(H2_MAX_HEADER_LIST);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service));
    let mut stop = pin!(crate::http::stopped(stop));
    let mut closing = false;
    let result = std::future::poll_fn(|cx| {
        if !closing && (phase.draining.load(Ordering::Acquire) || stop.as_mut().poll(cx).is_ready())
        {
            closing = true;
            conn.as_mut().graceful_shutdown();
        }
        conn.as_mut().poll(cx)
    })
    .await;
    if let Err(e) = result {
        debug!(error = %e, "HTTP/2 connection ended with an error");
    }
    Ended::default()
}

/// What an HTTP/2 client sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether `stream` begins with HTTP/2's connection preface (looked at, not
/// read). False as soon as its first bytes differ, at `due` (the header-read
/// deadline: HTTP/1.1 then times it out), or once the server stops.
pub(super) async fn prior_knowledge(
    stream: &TcpStream,
    due: Instant,
    stop: &watch::Receiver<bool>,
) -> bool {
    let mut stopped = pin!(crate::http::stopped(stop.clone()));
    let mut seen = [0u8; PREFACE.len()];
    loop {
        let peeked = tokio::select! {
            biased;
            () = &mut stopped => return false,
            peeked = tokio::time::timeout_at(due, stream.peek(&mut seen)) => peeked,
        };
        let n = match peeked {
            Ok(Ok(n)) if n > 0 => n,
            _ => return false,
        };
        if seen[..n] != PREFACE[..n] {
            return false;
        }
        if n == PREFACE.len() {
            return true;
        }
        // Part of the preface: the rest is on its way.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}
