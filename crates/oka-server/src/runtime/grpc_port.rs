//! Feast's gRPC services on `--grpc-listen`, one listener per worker on the
//! same port (`SO_REUSEPORT`, as the HTTP port), each serving on its worker's
//! runtime with its worker's store (`crate::api::feast::grpc`).
//!
//! The bounds of the HTTP port, as HTTP/2 allows them: at most
//! `max_connections` connections per worker (beyond, a new connection is closed
//! at once: the client sees `UNAVAILABLE` and retries elsewhere); a connection
//! must send its first bytes within the header-read timeout, and a peer that
//! stops answering HTTP/2 pings is closed after the idle timeout; a message is
//! at most `--max-body-bytes`; at most 100 calls at once on one connection, and
//! the worker's in-flight limit over all of them. On shutdown the listener
//! closes, calls in flight finish (HTTP/2 `GOAWAY`), then the connections close.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use oka_feast::proto::grpc_server::grpc_feature_server_server::GrpcFeatureServerServer;
use oka_feast::proto::serving::serving_service_server::ServingServiceServer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::{debug, error, info};

use super::ConnTimeouts;
use crate::api::feast::grpc::FeastGrpc;
use crate::state::AppState;

/// Calls one connection may have open at once.
const MAX_STREAMS: u32 = 100;

/// Serves Feast's gRPC services on `listener` until `stop` turns true, then
/// finishes the calls in flight.
pub(super) async fn serve(
    state: AppState,
    listener: TcpListener,
    timeouts: ConnTimeouts,
    max_connections: usize,
    mut stop: watch::Receiver<bool>,
) {
    let max_message = state.shared.limits.max_body_bytes;
    let services = FeastGrpc::new(state);
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let first_bytes = timeouts.header_read;
    let incoming =
        futures::stream::unfold((listener, slots), move |(listener, slots)| async move {
            let conn = accept(&listener, &slots, first_bytes).await;
            Some((Ok::<_, io::Error>(conn), (listener, slots)))
        });
    let stopped = async move {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    };
    let served = tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS)
        .http2_keepalive_interval(Some(timeouts.idle))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(
            ServingServiceServer::new(services.clone()).max_decoding_message_size(max_message),
        )
        .add_service(GrpcFeatureServerServer::new(services).max_decoding_message_size(max_message))
        .serve_with_incoming_shutdown(incoming, stopped)
        .await;
    if let Err(e) = served {
        error!(error = %e, "the gRPC server failed");
    }
}

/// The next connection within the cap (one beyond it is closed at once).
async fn accept(listener: &TcpListener, slots: &Arc<Semaphore>, first_bytes: Duration) -> Conn {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: wait a little and go on.
                debug!(error = %e, "a gRPC connection could not be accepted");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
            info!("a gRPC connection beyond the connection cap was closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        return Conn {
            stream,
            first_bytes: Some(Box::pin(tokio::time::sleep(first_bytes))),
            _slot: slot,
        };
    }
}

/// A client connection holding a slot of the cap, which must send its first
/// bytes within the header-read timeout.
struct Conn {
    stream: TcpStream,
    /// Until the first bytes arrive.
    first_bytes: Option<Pin<Box<Sleep>>>,
    _slot: OwnedSemaphorePermit,
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if self.first_bytes.is_some() {
            match &read {
                Poll::Ready(Ok(())) if buf.filled().len() > before => self.first_bytes = None,
                Poll::Pending => {
                    if let Some(timer) = self.first_bytes.as_mut()
                        && timer.as_mut().poll(cx).is_ready()
                    {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no bytes within the header-read timeout",
                        )));
                    }
                }
                _ => {}
            }
        }
        read
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
