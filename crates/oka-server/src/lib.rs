//! Oka's HTTP serving. The server never names a concrete store backend.
//!
//! - [`router`](mod@router): the serving router (`/v1/features`, Volga's `/on_demand_compute`,
//!   `/v1/ingest`) and the admin router (`/healthz`, `/readyz`, `/metrics`, `/stats`,
//!   `/admin/reload`, `/openapi.json`); `router::docs`: the OpenAPI documents of both
//!   ports, from the handlers' `#[utoipa::path]` attributes; [`openapi`]: their
//!   parts (each route's error answers, the security schemes, the rendering).
//! - [`serve`]: the feature request path — parse, prepare, batched reads, UDFs, encode.
//! - [`feast`]: Feast's `POST /get-online-features` as a dialect of the request
//!   path (under `oka serve --feast-repo`).
//! - [`ingest`]: `POST /v1/ingest` (the write path itself is the `oka-ingest` crate).
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
