//! The consumer's Prometheus metrics, registered once at start in a
//! `prometheus-client` registry: counters and histograms labelled by feature,
//! and the per-partition lag gauges, read from [`Partitions`] at scrape time.
//! It also implements the write path's [`IngestMetrics`] under the names
//! `oka serve` uses for the same things. Every metric is in `docs/metrics.md`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use oka_ingest::IngestMetrics;
use oka_telemetry::families as F;
use oka_telemetry::http::{ConnEvents, ConnRefusal, ConnTimeout, TlsFailure};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::lag::Partitions;
use crate::message::Reason;

/// The content type of [`KafkaMetrics::render`].
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Produce-to-servable buckets, seconds.
const DELIVERY_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureLabel {
    feature: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    feature: String,
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    feature: String,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    feature: String,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowsLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    feature: String,
    topic: String,
    partition: String,
}

/// The series of `labels` in `family`, cloned (the family's lock is released
/// before the next lookup: two lookups in one expression would deadlock).
fn handle<L, M, C>(family: &Family<L, M, C>, labels: &L) -> M
where
    L: Clone + std::hash::Hash + Eq,
    M: Clone,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    let series = family.get_or_create(labels);
    series.clone()
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn histograms<L: Clone + std::hash::Hash + Eq>(make: fn() -> Histogram) -> HistogramFamily<L> {
    Family::new_with_constructor(make)
}

/// One feature's handles, looked up once.
#[derive(Debug, Clone)]
pub struct FeatureMetrics {
    consumed: Counter,
    written: Counter,
    dead_lettered: Counter,
    dead_letter_errors: Counter,
    store_retries: Counter,
    commits_ok: Counter,
    commits_failed: Counter,
    assigns: Counter,
    revokes: Counter,
    paused: Gauge,
    assigned: Gauge,
    batch: Histogram,
    write: Histogram,
    delivery: Histogram,
    rejected: Family<ReasonLabels, Counter>,
    name: String,
}

impl FeatureMetrics {
    /// Messages received from Kafka.
    pub fn consumed(&self, n: u64) {
        self.consumed.inc_by(n);
    }

    /// A batch of `messages` was acknowledged by the store after `elapsed`
    /// (from its hand-over to the write path), `written` records in it.
    pub fn batch_written(&self, messages: usize, written: usize, elapsed: Duration) {
        self.batch.observe(messages as f64);
        self.write.observe(elapsed.as_secs_f64());
        self.written.inc_by(written as u64);
    }

    /// A written record's produce-to-servable time.
    pub fn delivered(&self, seconds: f64) {
        self.delivery.observe(seconds.max(0.0));
    }

    /// A message that was not a valid record.
    pub fn rejected(&self, reason: Reason) {
        self.rejected
            .get_or_create(&ReasonLabels {
                feature: self.name.clone(),
                reason: reason.label(),
            })
            .inc();
    }

    /// A rejected message produced to the dead-letter topic (`ok`), or not.
    pub fn dead_letter(&self, ok: bool) {
        if ok {
            self.dead_lettered.inc();
        } else {
            self.dead_letter_errors.inc();
        }
    }

    /// A batch is written again after the write path gave up on it.
    pub fn store_retry(&self) {
        self.store_retries.inc();
    }

    /// An offset commit's outcome.
    pub fn commit(&self, ok: bool) {
        if ok {
            self.commits_ok.inc();
        } else {
            self.commits_failed.inc();
        }
    }

    /// Partitions assigned (`true`) or revoked, and how many are held now.
    pub fn rebalance(&self, assign: bool, held: usize) {
        if assign {
            self.assigns.inc();
        } else {
            self.revokes.inc();
        }
        self.assigned.set(i64::try_from(held).unwrap_or(i64::MAX));
    }

    /// Whether fetching is paused for back-pressure.
    pub fn paused(&self, paused: bool) {
        self.paused.set(i64::from(paused));
    }
}

/// Every metric of an `oka source kafka` process.
#[derive(Debug)]
pub struct KafkaMetrics {
    registry: Registry,
    consumed: Family<FeatureLabel, Counter>,
    written: Family<FeatureLabel, Counter>,
    dead_lettered: Family<FeatureLabel, Counter>,
    dead_letter_errors: Family<FeatureLabel, Counter>,
    store_retries: Family<FeatureLabel, Counter>,
    commits: Family<ResultLabels, Counter>,
    rebalances: Family<KindLabels, Counter>,
    paused: Family<FeatureLabel, Gauge>,
    assigned: Family<FeatureLabel, Gauge>,
    batch: HistogramFamily<FeatureLabel>,
    write: HistogramFamily<FeatureLabel>,
    delivery: HistogramFamily<FeatureLabel>,
    rejected: Family<ReasonLabels, Counter>,
    store_write: HistogramFamily<BackendLabel>,
    store_errors: Family<BackendLabel, Counter>,
    rows: Family<RowsLabel, Counter>,
    ingest_lag: Histogram,
    ingest_batch: Histogram,
    ingest_retries: Counter,
    http: HttpCounters,
    backend: &'static str,
}

/// The admin port's connection counters, under the `oka_http_*` families
/// `oka serve` reports its ports' with.
#[derive(Debug, Default)]
struct HttpCounters {
    accepted: Counter,
    timeouts: Family<PhaseLabel, Counter>,
    refused: Family<ReasonLabel, Counter>,
    accept_errors: Family<KindLabel, Counter>,
    unanswered: Counter,
    tls_failures: Family<ReasonLabel, Counter>,
    trace_spans: Family<ResultLabel, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

impl HttpCounters {
    /// Registers the families, each series created at zero (a rate over a
    /// series that appears at its first increment misses that increment).
    fn register(&self, r: &mut Registry) {
        for phase in ConnTimeout::ALL {
            drop(self.timeouts.get_or_create(&PhaseLabel {
                phase: phase.label(),
            }));
        }
        for why in ConnRefusal::ALL {
            drop(self.refused.get_or_create(&ReasonLabel {
                reason: why.label(),
            }));
        }
        for kind in ["fd_limit", "other"] {
            drop(self.accept_errors.get_or_create(&KindLabel { kind }));
        }
        for why in TlsFailure::ALL {
            drop(self.tls_failures.get_or_create(&ReasonLabel {
                reason: why.label(),
            }));
        }
        let f = F::HTTP_CONNECTIONS_ACCEPTED;
        r.register(f.name, f.help, self.accepted.clone());
        let f = F::HTTP_CONNECTION_TIMEOUTS;
        r.register(f.name, f.help, self.timeouts.clone());
        let f = F::HTTP_REFUSED;
        r.register(f.name, f.help, self.refused.clone());
        let f = F::HTTP_ACCEPT_ERRORS;
        r.register(f.name, f.help, self.accept_errors.clone());
        let f = F::HTTP_SHUTDOWN_UNANSWERED;
        r.register(f.name, f.help, self.unanswered.clone());
        let f = F::HTTP_TLS_FAILURES;
        r.register(f.name, f.help, self.tls_failures.clone());
        for result in ["exported", "failed"] {
            drop(self.trace_spans.get_or_create(&ResultLabel { result }));
        }
        let f = F::TRACE_SPANS;
        r.register(f.name, f.help, self.trace_spans.clone());
    }
}

impl oka_telemetry::trace::TraceEvents for KafkaMetrics {
    fn spans_exported(&self, n: u64) {
        let result = "exported";
        self.http
            .trace_spans
            .get_or_create(&ResultLabel { result })
            .inc_by(n);
    }

    fn spans_failed(&self, n: u64) {
        let result = "failed";
        self.http
            .trace_spans
            .get_or_create(&ResultLabel { result })
            .inc_by(n);
    }
}

impl ConnEvents for KafkaMetrics {
    fn connection_accepted(&self) {
        self.http.accepted.inc();
    }

    fn connection_refused(&self, why: ConnRefusal) {
        self.http
            .refused
            .get_or_create(&ReasonLabel {
                reason: why.label(),
            })
            .inc();
    }

    fn accept_failed(&self, fd_limit: bool) {
        let kind = if fd_limit { "fd_limit" } else { "other" };
        self.http
            .accept_errors
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    fn connection_timed_out(&self, phase: ConnTimeout) {
        self.http
            .timeouts
            .get_or_create(&PhaseLabel {
                phase: phase.label(),
            })
            .inc();
    }

    fn unanswered_connections(&self, n: u64) {
        self.http.unanswered.inc_by(n);
    }

    fn tls_failed(&self, why: TlsFailure) {
        self.http
            .tls_failures
            .get_or_create(&ReasonLabel {
                reason: why.label(),
            })
            .inc();
    }
}

impl KafkaMetrics {
    /// The metrics of a process writing to a store of `backend`, with the lag
    /// of `partitions` read at each scrape.
    // long: one registration per family, in exposition order; no logic.
    pub fn new(backend: &'static str, partitions: Arc<Partitions>) -> Self {
        let mut m = Self {
            registry: Registry::default(),
            consumed: Family::default(),
            written: Family::default(),
            dead_lettered: Family::default(),
            dead_letter_errors: Family::default(),
            store_retries: Family::default(),
            commits: Family::default(),
            rebalances: Family::default(),
            paused: Family::default(),
            assigned: Family::default(),
            batch: histograms(|| Histogram::new(F::BATCH_BUCKETS.iter().copied())),
            write: histograms(|| Histogram::new(F::LATENCY_BUCKETS.iter().copied())),
            delivery: histograms(|| Histogram::new(DELIVERY_BUCKETS)),
            rejected: Family::default(),
            store_write: histograms(|| Histogram::new(F::LATENCY_BUCKETS.iter().copied())),
            store_errors: Family::default(),
            rows: Family::default(),
            ingest_lag: Histogram::new(F::LAG_BUCKETS.iter().copied()),
            ingest_batch: Histogram::new(F::BATCH_BUCKETS.iter().copied()),
            ingest_retries: Counter::default(),
            http: HttpCounters::default(),
            backend,
        };
        let r = &mut m.registry;
        r.register(
            "oka_kafka_records_consumed",
            "Messages received from Kafka, valid or not",
            m.consumed.clone(),
        );
        r.register(
            "oka_kafka_records_written",
            "Records the store acknowledged",
            m.written.clone(),
        );
        r.register(
            "oka_kafka_records_rejected",
            "Messages that were not valid records, by reason",
            m.rejected.clone(),
        );
        r.register(
            "oka_kafka_records_dead_lettered",
            "Rejected messages produced to the dead-letter topic",
            m.dead_lettered.clone(),
        );
        r.register(
            "oka_kafka_dead_letter_errors",
            "Rejected messages the dead-letter topic did not take (logged with their offset)",
            m.dead_letter_errors.clone(),
        );
        r.register(
            "oka_kafka_batch_records",
            "Messages per batch handed to the store",
            m.batch.clone(),
        );
        r.register(
            "oka_kafka_write_duration_seconds",
            "From a batch's hand-over to the write path until the store acknowledged it, retries included",
            m.write.clone(),
        );
        r.register(
            "oka_kafka_delivery_seconds",
            "For each written record: the store's acknowledgement minus the message's Kafka timestamp (produce to servable)",
            m.delivery.clone(),
        );
        r.register(
            "oka_kafka_store_retries",
            "Batches written again after the write path gave up on them (the store slow or down)",
            m.store_retries.clone(),
        );
        r.register(
            "oka_kafka_commits",
            "Offset commits by result (ok, failed)",
            m.commits.clone(),
        );
        r.register(
            "oka_kafka_rebalances",
            "Partition assignments and revocations by the consumer group",
            m.rebalances.clone(),
        );
        r.register(
            "oka_kafka_paused",
            "1 while fetching is paused because the store is behind, else 0",
            m.paused.clone(),
        );
        r.register(
            "oka_kafka_assigned_partitions",
            "Partitions this consumer holds now",
            m.assigned.clone(),
        );
        // The families `oka serve` exposes too: defined once, in oka-telemetry.
        let shared = |f: F::Family| (f.name, f.help);
        let (name, help) = shared(F::STORAGE_WRITE_DURATION);
        r.register(name, help, m.store_write.clone());
        let (name, help) = shared(F::STORAGE_ERRORS);
        r.register(name, help, m.store_errors.clone());
        let (name, help) = shared(F::INGEST_ROWS);
        r.register(name, help, m.rows.clone());
        let (name, help) = shared(F::INGEST_LAG);
        r.register(name, help, m.ingest_lag.clone());
        let (name, help) = shared(F::INGEST_BATCH_ROWS);
        r.register(name, help, m.ingest_batch.clone());
        let (name, help) = shared(F::INGEST_RETRIES);
        r.register(name, help, m.ingest_retries.clone());
        m.http.register(r);
        r.register_collector(Box::new(Lag(partitions)));
        m
    }

    /// The handles of feature `name`.
    pub fn feature(&self, name: &str) -> FeatureMetrics {
        let f = FeatureLabel {
            feature: name.to_owned(),
        };
        let result = |result| ResultLabels {
            feature: name.to_owned(),
            result,
        };
        let kind = |kind| KindLabels {
            feature: name.to_owned(),
            kind,
        };
        FeatureMetrics {
            consumed: handle(&self.consumed, &f),
            written: handle(&self.written, &f),
            dead_lettered: handle(&self.dead_lettered, &f),
            dead_letter_errors: handle(&self.dead_letter_errors, &f),
            store_retries: handle(&self.store_retries, &f),
            commits_ok: handle(&self.commits, &result("ok")),
            commits_failed: handle(&self.commits, &result("failed")),
            assigns: handle(&self.rebalances, &kind("assign")),
            revokes: handle(&self.rebalances, &kind("revoke")),
            paused: handle(&self.paused, &f),
            assigned: handle(&self.assigned, &f),
            batch: handle(&self.batch, &f),
            write: handle(&self.write, &f),
            delivery: handle(&self.delivery, &f),
            rejected: self.rejected.clone(),
            name: name.to_owned(),
        }
    }

    /// The OpenMetrics exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl IngestMetrics for KafkaMetrics {
    fn store_write(&self, elapsed: Duration, ok: bool) {
        let backend = BackendLabel {
            backend: self.backend,
        };
        self.store_write
            .get_or_create(&backend)
            .observe(elapsed.as_secs_f64());
        if !ok {
            self.store_errors.get_or_create(&backend).inc();
        }
    }

    fn rows_written(&self, rows: u64, lags: &mut dyn Iterator<Item = f64>) {
        self.rows
            .get_or_create(&RowsLabel { result: "written" })
            .inc_by(rows);
        for l in lags {
            self.ingest_lag.observe(l.max(0.0));
        }
    }

    fn batch(&self, rows: usize) {
        self.ingest_batch.observe(rows as f64);
    }

    fn retry(&self) {
        self.ingest_retries.inc();
    }
}

/// The per-partition lag gauges, computed at scrape time.
#[derive(Debug)]
struct Lag(Arc<Partitions>);

impl Collector for Lag {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let now = oka_core::Timestamp::now();
        let lags = self.0.lags(now);
        let mut fam = enc.encode_descriptor(
            "oka_kafka_consumer_lag_records",
            "Per assigned partition: the high watermark minus the next offset to commit (records produced and not yet written)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for l in &lags {
            ConstGauge::new(l.records).encode(fam.encode_family(&labels(l))?)?;
        }
        let mut fam = enc.encode_descriptor(
            "oka_kafka_consumer_lag_seconds",
            "Per assigned partition: how long the oldest record not yet written has waited since its Kafka timestamp; 0 when caught up",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for l in &lags {
            ConstGauge::new(l.seconds).encode(fam.encode_family(&labels(l))?)?;
        }
        Ok(())
    }
}

fn labels(l: &crate::lag::PartitionLag) -> PartitionLabels {
    PartitionLabels {
        feature: l.feature.to_string(),
        topic: l.topic.to_string(),
        partition: l.partition.to_string(),
    }
}
