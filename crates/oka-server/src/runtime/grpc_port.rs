//! Feast's gRPC services on `--grpc-listen`, one listener per worker on the
//! same port (`SO_REUSEPORT`, as the HTTP port), each serving on its worker's
//! runtime with its worker's store (`crate::api::feast::grpc`).
//!
//! It is the listener every Oka port runs on ([`oka_telemetry::http::Listener`])
//! with the services as its router, so it has the HTTP port's bounds and
//! settings: the connection cap, the header-read and idle timeouts, the
//! descriptor-limit handling, the connection metrics, TLS (`--tls-cert`: ALPN
//! `h2`) or plain HTTP/2 with prior knowledge, at most 256 calls at once on
//! one connection, and the drain: a GOAWAY once the server drains (calls begun
//! are served, new ones go elsewhere), the connections closed once it stops. A
//! message is at most `--max-body-bytes`; each call passes the one guard
//! (`crate::guard::grpc`).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use oka_feast::proto::grpc_server::grpc_feature_server_server::GrpcFeatureServerServer;
use oka_feast::proto::serving::serving_service_server::ServingServiceServer;
use oka_telemetry::http::{App, ConnEvents, Listener, Served, Tls};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::ConnTimeouts;
use crate::api::feast::grpc::FeastGrpc;
use crate::state::AppState;

/// How a worker's gRPC port is served: as its HTTP port is.
pub(super) struct GrpcPort {
    /// Named in logs.
    pub name: String,
    pub timeouts: ConnTimeouts,
    pub max_connections: usize,
    /// The worker's drain (shared with its HTTP port).
    pub draining: Arc<oka_telemetry::http::Drain>,
    pub events: Arc<dyn ConnEvents>,
    pub tls: Option<Arc<Tls>>,
    /// The worker's count of open gRPC connections (a gauge of its own).
    pub open: Arc<AtomicUsize>,
}

/// Serves Feast's gRPC services on `listener` until `stop` turns true, then
/// finishes the calls in flight.
pub(super) async fn serve(
    state: AppState,
    listener: TcpListener,
    port: GrpcPort,
    stop: watch::Receiver<bool>,
) -> Served {
    let max_message = state.shared.limits.max_body_bytes;
    let services = FeastGrpc::new(state);
    let routes = tonic::service::Routes::new(
        ServingServiceServer::new(services.clone()).max_decoding_message_size(max_message),
    )
    .add_service(GrpcFeatureServerServer::new(services).max_decoding_message_size(max_message));
    let server = Listener {
        name: port.name,
        app: App {
            router: routes.into_axum_router(),
            direct: None,
            h2c: true,
        },
        draining: port.draining,
        open: port.open,
        events: port.events,
        timeouts: port.timeouts,
        max_connections: port.max_connections,
        tls: port.tls,
    };
    server.run(listener, stop).await
}
