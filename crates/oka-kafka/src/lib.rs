//! Oka's Kafka source (`source: {kafka: …}` in a spec, run by `oka source
//! kafka`): a consumer group member per source that writes the topic's JSON
//! records into a pipeline feature through the batched write path
//! ([`oka_ingest::WritePath`]), **at least once**.
//!
//! Delivery: records are parsed as `oka ingest` parses them, gathered into
//! batches (`batch.max_records`, `batch.max_wait_ms`), and a batch's offsets
//! (per partition, the offset after its last message) are committed only once
//! the store has acknowledged that batch and every batch before it. Auto-commit
//! is off. A crash re-reads from the last commit; a rebalance commits what was
//! acknowledged before the partitions go; a store that is slow or down pauses
//! fetching (memory stays bounded) and the batch is written again until it is
//! taken. Writes are idempotent (same key and event time, same record), so
//! what is read twice is harmless. Messages that are not valid records are
//! counted, logged with topic, partition and offset, optionally produced to a
//! dead-letter topic, and committed with their batch: they never block a
//! partition.
//!
//! Layout:
//! - [`source`]: a spec's Kafka sources, the run options, librdkafka settings.
//! - [`consumer`]: one source's loop: batches, hand-over, back-pressure,
//!   commits, shutdown.
//! - `context`: librdkafka's callbacks (rebalances, statistics, logs);
//!   `commit`: the thread that commits offsets, in order.
//! - `write`: writing one batch, with retries, and its dead letters.
//! - `batch`, `message`: a batch of messages; one message → record or rejection.
//! - `dead_letter`: the dead-letter producer.
//! - [`lag`], [`metrics`], [`admin`]: the lag per partition, the Prometheus
//!   metrics and the admin port (`/metrics`, `/healthz`, `/readyz`).
//!
//! The client is [`rdkafka`] (librdkafka 2.12, compiled from source by its
//! build script with the system's C compiler; no system package): it is the
//! maintained client with consumer groups, committed offsets, pause/resume,
//! cooperative rebalancing, statistics and every security mechanism Kafka
//! deployments use (SASL/SCRAM, OAUTHBEARER, mTLS). The pure-Rust clients do
//! not fit an at-least-once group consumer: `rskafka` has no consumer groups
//! and no offset commit/fetch at all (offsets would have to live elsewhere, and
//! partitions be divided by hand), and `kafka` (kafka-rust) is unmaintained and
//! speaks only old protocol versions. The cost is a C build (about a minute,
//! once) in this leaf crate, which nothing but `oka-cli` depends on.

pub mod admin;
mod batch;
mod commit;
pub mod consumer;
mod context;
mod dead_letter;
pub mod error;
pub mod lag;
mod log_limit;
mod message;
pub mod metrics;
pub mod source;
mod write;

use std::sync::Arc;
use std::time::Duration;

use oka_core::Registry;
use oka_ingest::{WritePath, WriterConfig};
use tokio::sync::watch;

pub use consumer::Consumer;
pub use context::Context;
pub use error::KafkaSourceError;
pub use lag::Partitions;
pub use message::Reason;
pub use metrics::KafkaMetrics;
pub use source::{KafkaSource, RunOptions};

/// The write path's settings for `sources`: one job per batch, so a store write
/// holds up to the largest `max_records`, and nothing waits for more jobs.
pub fn writer_config(sources: &[KafkaSource], opts: &RunOptions) -> WriterConfig {
    WriterConfig {
        batch_size: sources
            .iter()
            .map(|s| s.spec.max_records())
            .max()
            .unwrap_or(1),
        flush: Duration::from_millis(1),
        max_in_flight: (opts.in_flight.max(1) * sources.len()).max(1),
        ..WriterConfig::default()
    }
}

/// The consumers of a process, started together.
#[derive(Debug)]
pub struct Consumers(Vec<Consumer>);

impl Consumers {
    /// Creates every source's consumer and subscribes it; the first source
    /// whose settings are refused is the error.
    pub fn start(
        sources: &[KafkaSource],
        registry: &Arc<Registry>,
        writer: &WritePath,
        metrics: &KafkaMetrics,
        partitions: &Arc<Partitions>,
        opts: &RunOptions,
    ) -> Result<Self, KafkaSourceError> {
        sources
            .iter()
            .map(|s| Consumer::start(s, registry, writer, metrics, partitions, opts))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Each consumer's shared state (for readiness).
    pub fn contexts(&self) -> Vec<Arc<Context>> {
        self.0.iter().map(Consumer::context).collect()
    }

    /// Runs them all until `stop` turns true; each then writes and commits what
    /// it received and leaves its group.
    pub async fn run(self, stop: watch::Receiver<bool>) -> Result<(), KafkaSourceError> {
        futures::future::try_join_all(self.0.into_iter().map(|c| c.run(stop.clone())))
            .await
            .map(|_| ())
    }
}
