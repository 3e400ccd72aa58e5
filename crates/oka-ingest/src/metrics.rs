//! What the write path reports, as a small trait the caller implements: the server
//! feeds its Prometheus metrics from it; `oka ingest` needs none of it.

use std::time::Duration;

/// Receives the write path's measurements. Every method has a no-op default.
pub trait IngestMetrics: Send + Sync + std::fmt::Debug {
    /// One store write of a batch took `elapsed`; `ok` when it succeeded.
    fn store_write(&self, elapsed: Duration, ok: bool) {
        let _ = (elapsed, ok);
    }

    /// `rows` were written; `lags` are now minus each one's event time, seconds.
    fn rows_written(&self, rows: u64, lags: &mut dyn Iterator<Item = f64>) {
        let _ = (rows, lags);
    }

    /// `rows` records were rejected before reaching the store.
    fn rows_rejected(&self, rows: u64) {
        let _ = rows;
    }

    /// A batch of `rows` was handed to the store.
    fn batch(&self, rows: usize) {
        let _ = rows;
    }

    /// A batch write is retried after a transient store error.
    fn retry(&self) {}
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMetrics;

impl IngestMetrics for NoMetrics {}
