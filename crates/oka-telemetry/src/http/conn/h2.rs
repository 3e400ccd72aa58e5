//! HTTP/2 on a connection whose ALPN chose it (TLS ports only).

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::watch;
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
