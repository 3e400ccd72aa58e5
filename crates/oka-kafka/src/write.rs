//! Writing one batch: its records through the write path until the store takes
//! them (the write path retries transient errors briefly; after that the batch
//! is tried again with a growing wait, for as long as it takes), and its
//! rejected messages to the dead-letter topic, side by side.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use oka_core::{FeatureId, Registry};
use oka_ingest::WritePath;
use oka_storage::{StoreError, StoreWatch};
use oka_telemetry::trace::{self, Attribute, Tracer};
use tokio::time::Instant;
use tracing::debug;

use crate::batch::{Batch, Span, Traced};
use crate::dead_letter::DeadLetters;
use crate::metrics::FeatureMetrics;

/// What a written batch tells the consumer.
#[derive(Debug)]
pub struct Written {
    /// The batch's number.
    pub seq: u64,
    /// Per partition: where its messages end.
    pub spans: BTreeMap<i32, Span>,
    /// Messages in it.
    pub messages: usize,
    /// Records written.
    pub records: usize,
    /// Each record's Kafka timestamp (ms).
    pub kafka_ms: Vec<i64>,
    /// From the hand-over to the store's acknowledgement.
    pub elapsed: Duration,
    /// Why the store will not take the batch, however often it is written
    /// again (credentials refused, misconfigured, …): the source stops.
    pub refused: Option<StoreError>,
}

/// Where and how a batch is written.
#[derive(Debug, Clone)]
pub struct Target {
    /// The write path.
    pub writer: WritePath,
    /// The registry the feature is in.
    pub registry: Arc<Registry>,
    /// The feature.
    pub feature: FeatureId,
    /// Its name, for logs.
    pub name: Arc<str>,
    /// The dead-letter topic's producer, if any.
    pub dead_letters: Option<Arc<DeadLetters>>,
    /// The feature's metrics.
    pub metrics: FeatureMetrics,
    /// The first wait before another attempt.
    pub retry_base: Duration,
    /// The longest wait between attempts.
    pub retry_max: Duration,
    /// The store's state: outages logged once.
    pub store_watch: Arc<StoreWatch>,
    /// Where traced messages' write spans go, if tracing.
    pub tracer: Option<Arc<Tracer>>,
    /// The topic, for those spans.
    pub topic: Arc<str>,
}

/// Writes `batch` and its dead letters; returns once both are done.
pub async fn write(target: Target, batch: Batch) -> Written {
    let started = Instant::now();
    let Batch {
        seq,
        rows,
        kafka_ms,
        rejected,
        spans,
        messages,
        traced,
        ..
    } = batch;
    let records = rows.len();
    let letters = async {
        if let Some(d) = &target.dead_letters {
            // All at once: the producer batches them, in order per partition.
            for ok in futures::future::join_all(rejected.iter().map(|r| d.send(r))).await {
                target.metrics.dead_letter(ok);
            }
        }
    };
    let store = async {
        let mut wait = target.retry_base;
        while !rows.is_empty() {
            let written = target
                .writer
                .write(&target.registry, target.feature, rows.clone())
                .await;
            match target.store_watch.observe(written) {
                Ok(()) => break,
                // Retrying cannot help: the source stops, committing nothing of it.
                Err(e) if !e.kind.is_transient() => return Some(e),
                Err(e) => {
                    target.metrics.store_retry();
                    // The watch logged the outage once; each attempt only here.
                    debug!(
                        feature = %target.name,
                        records,
                        error = %e,
                        retry_in_ms = wait.as_millis() as u64,
                        "the store did not take a batch; writing it again (fetching pauses while batches wait; nothing is committed until the store takes them)"
                    );
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(target.retry_max);
                }
            }
        }
        None
    };
    let (refused, ()) = tokio::join!(store, letters);
    if let Some(tracer) = &target.tracer {
        write_spans(tracer, &target, traced, records, refused.as_ref());
    }
    Written {
        seq,
        spans,
        messages,
        records,
        kafka_ms,
        elapsed: started.elapsed(),
        refused,
    }
}

/// One span per traced message of a written batch, a child of the producer's
/// span: from the message's arrival to the store's acknowledgement (or the
/// store's refusal, as the span's error).
fn write_spans(
    tracer: &Tracer,
    target: &Target,
    traced: Vec<Traced>,
    records: usize,
    refused: Option<&StoreError>,
) {
    let end = std::time::SystemTime::now();
    for t in traced {
        let (context, parent) = tracer.child_of(&t.parent);
        tracer.emit(trace::Span {
            context,
            parent: Some(parent),
            kind: trace::Kind::Consumer,
            name: format!("write {}", target.topic).into(),
            start: t.received,
            end,
            attributes: vec![
                Attribute::new("messaging.system", "kafka"),
                Attribute::new("messaging.operation.type", "process"),
                Attribute::new("messaging.destination.name", target.topic.to_string()),
                Attribute::new(
                    "messaging.destination.partition.id",
                    t.partition.to_string(),
                ),
                Attribute::new("messaging.kafka.offset", t.offset),
                Attribute::new("oka.feature", target.name.to_string()),
                Attribute::new("oka.batch.records", records as i64),
            ],
            status: refused.map_or(trace::Status::Unset, |e| {
                trace::Status::error(e.to_string())
            }),
        });
    }
}
