//! HTTP/2 on a connection whose ALPN chose it (TLS), or that began with
//! HTTP/2's preface where plain HTTP/2 is allowed ([`crate::http::App::h2c`]).

use std::pin::pin;
use std::sync::Arc;

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

/// Serves HTTP/2 on `io`. When the server drains (idle or not: the connection
/// waits on the drain) or stops, the connection gets a GOAWAY: the streams it
/// has begun are served, then it closes.
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
    // An idle connection gets its GOAWAY when the server drains, not at its
    // next frame: the drain wakes it.
    let draining = Arc::clone(&phase.draining);
    let mut drained = pin!(draining.started());
    let mut closing = false;
    let result = std::future::poll_fn(|cx| {
        if !closing && (drained.as_mut().poll(cx).is_ready() || stop.as_mut().poll(cx).is_ready()) {
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
/// read): its first four bytes, `PRI ` (no HTTP/1.1 request begins so; hyper
/// checks the rest). False as soon as they differ, at `due` (the header-read
/// deadline: HTTP/1.1 then times the connection out), or once the server
/// stops. A client that sends them a byte at a time is looked at again after
/// a growing pause (1 ms, doubling to 64 ms): a trickle cannot make it spin.
pub(super) async fn prior_knowledge(
    stream: &TcpStream,
    due: Instant,
    stop: &watch::Receiver<bool>,
) -> bool {
    const DECIDES: usize = 4;
    let mut stopped = pin!(crate::http::stopped(stop.clone()));
    let mut seen = [0u8; DECIDES];
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if Instant::now() >= due {
            return false;
        }
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
        if n == DECIDES {
            return true;
        }
        tokio::select! {
            biased;
            () = &mut stopped => return false,
            () = tokio::time::sleep_until(due.min(Instant::now() + pause)) => {}
        }
        pause = (pause * 2).min(std::time::Duration::from_millis(64));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// What `prior_knowledge` says of a connection whose client sent `sent`,
    /// within `within`.
    async fn says(sent: &[u8], within: Duration) -> bool {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(sent).await.unwrap();
        let (_keep, stop) = watch::channel(false);
        prior_knowledge(&server, Instant::now() + within, &stop).await
    }

    #[tokio::test]
    async fn the_preface_is_http2_and_anything_else_is_not() {
        let long = Duration::from_secs(5);
        assert!(says(PREFACE, long).await);
        assert!(says(b"PRI * HTTP/2.0\r\n", long).await);
        assert!(!says(b"POST /v1/features HTTP/1.1\r\n", long).await);
        assert!(!says(b"GET / HTTP/1.1\r\n\r\n", long).await);
        // Part of the preface, then nothing: undecided until the deadline.
        let started = std::time::Instant::now();
        assert!(!says(b"PR", Duration::from_millis(200)).await);
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert!(!says(b"", Duration::from_millis(50)).await);
    }
}
