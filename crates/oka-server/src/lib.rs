//! Oka's HTTP serving. The server never names a concrete store backend.
//!
//! - [`router`](mod@router): the serving router (each wire API's routes merged)
//!   and the admin router (`/healthz`, `/readyz`, `/metrics`, `/stats`,
//!   `/admin/reload`, `/openapi.json`); `router::docs`: the OpenAPI documents of both
//!   ports, from the handlers' `#[utoipa::path]` attributes; [`openapi`]: their
//!   parts (each route's error answers, the security schemes, the rendering).
//! - [`api`]: a folder per wire API (`oka`, `volga`, `feast` with its gRPC
//!   services), each with its routes, its request adapter and its answer writer.
//! - [`guard`]: what every request passes on every port (keys, deadline, body,
//!   admission, in-flight gauge, metrics, trace, error → answer).
//! - [`serve`]: the one request path under every API — prepare, batched reads, UDFs.
//! - [`error`]: error codes to HTTP statuses, in one place.
//! - [`metrics`], [`stats`]: Prometheus metrics (atomic handles, exposed through
//!   `prometheus-client` at scrape time) and Volga-style windowed stats.
//! - [`state`]: what handlers share (atomically reloadable), admission control;
//!   [`auth`]: API keys; [`catalog`]: the registry as JSON; [`udf_runtime`]: the
//!   runtimes of UDFs run outside the process (Python's pool) as the server sees
//!   them: readiness, metrics, a summary.
//! - [`console`]: `/ui` on the admin port (the registry, lineage, live health
//!   and a try-it form in the browser).
//! - `spans`: a sampled request's trace (`--otlp-endpoint`), from its route's
//!   bookkeeping through the request path's phases to its export.
//! - [`runtime`]: per-core worker threads on `SO_REUSEPORT` listeners and the
//!   drain on shutdown; each accept loop is `oka_telemetry::http::Listener` (the
//!   one every Oka port is served by: connection cap, timeouts, descriptor limits).

pub mod api;
pub mod auth;
pub mod catalog;
pub mod console;
pub mod error;
pub mod guard;
pub mod metrics;
pub mod openapi;
pub mod router;
pub mod runtime;
pub mod serve;
mod spans;
pub mod state;
pub mod stats;
pub mod udf_runtime;

pub use router::docs::{admin_document, serving_document};
pub use router::{admin_router, router};
pub use state::{AppState, Limits, Shared};
