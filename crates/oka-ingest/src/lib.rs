//! Oka's write path, shared by `oka ingest`, `POST /v1/ingest` and the mock
//! source. It never imports the server: it takes a store, a registry and a
//! metrics sink ([`IngestMetrics`]) that the caller implements.
//!
//! - [`writer`]: the batched writer (size/time batching, bounded in flight,
//!   retries with backoff, acknowledgements).
//! - [`source`]: the mock periodic source.
//! - [`metrics`]: the sink the write path reports to.

pub mod metrics;
pub mod source;
pub mod writer;

pub use metrics::{IngestMetrics, NoMetrics};
pub use writer::{WritePath, WriterConfig};
