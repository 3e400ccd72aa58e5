//! Oka's write path, shared by `oka ingest`, `POST /v1/ingest` and the mock
//! source. It never imports the server: it takes a store, a registry and a
//! metrics sink ([`IngestMetrics`]) that the caller implements.
//!
//! - [`writer`]: the batched writer (size/time batching, bounded in flight,
//!   retries with backoff, acknowledgements).
//! - [`source`]: the mock periodic source.
//! - [`record`]: one record (a JSON object or CSV cells) → key and row, with
//!   time bounds; [`printable`](record::printable) for echoing user data.
//! - [`lines`]: streaming JSON Lines and CSV readers with true line numbers and
//!   bounded memory.
//! - [`load`]: a file or stream into a feature, read on a thread of its own,
//!   with every rejected record and every failed batch reported by line.
//! - [`body`]: the `POST /v1/ingest` body, written a batch at a time.
//! - [`metrics`]: the sink the write path reports to.

pub mod body;
pub mod lines;
pub mod load;
pub mod metrics;
pub mod record;
pub mod reject;
pub mod source;
pub mod writer;

pub use lines::{Format, ReadError, ReaderLimits, Record, RecordReader};
pub use metrics::{IngestMetrics, NoMetrics};
pub use record::{RecordParser, TimeBounds};
pub use writer::{WritePath, WriterConfig};
