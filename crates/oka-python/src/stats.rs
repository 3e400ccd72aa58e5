//! The pool's metrics and health: atomics written by the pool, written out at
//! scrape time by [`encode`] for a `prometheus-client` collector.
//! Every family is in `docs/metrics.md`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::decl::UdfEntry;

/// Why a worker was replaced (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// It died (a signal, `os._exit`, a closed socket).
    Crashed,
    /// A row ran past its UDF's limit: it was killed.
    TimedOut,
    /// A UDF ran out of memory: it was replaced after its batch.
    Memory,
    /// It sent what the protocol does not allow.
    Protocol,
    /// It stopped answering outside any row.
    Hung,
    /// A new worker did not start.
    StartFailed,
}

impl Restart {
    /// Every reason, in label order.
    pub const ALL: [Self; 6] = [
        Self::Crashed,
        Self::TimedOut,
        Self::Memory,
        Self::Protocol,
        Self::Hung,
        Self::StartFailed,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Crashed => "crashed",
            Self::TimedOut => "timeout",
            Self::Memory => "memory",
            Self::Protocol => "protocol",
            Self::Hung => "hung",
            Self::StartFailed => "start_failed",
        }
    }
}

/// Seconds: 10 µs to 10 s.
const SECONDS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Keys per batch.
const KEYS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// A histogram of atomics (per-bucket counts).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Box<[AtomicU64]>,
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn observe_f64(&self, v: f64) {
        let v = if v.is_finite() && v > 0.0 { v } else { 0.0 };
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos
            .fetch_add((v * 1e9) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a duration.
    pub fn observe(&self, d: Duration) {
        self.observe_f64(d.as_secs_f64());
    }

    /// Records a count.
    pub fn observe_count(&self, n: usize) {
        self.observe_f64(n as f64);
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl EncodeMetric for &Histogram {
    fn encode(&self, mut enc: MetricEncoder) -> fmt::Result {
        let buckets: Vec<(f64, u64)> = (self.bounds.iter().copied())
            .chain(std::iter::once(f64::MAX))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        enc.encode_histogram::<NoLabelSet>(sum, self.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The pool's counters and histograms.
#[derive(Debug)]
pub struct Stats {
    restarts: [AtomicU64; 6],
    /// From a call's arrival to its batch's sending.
    pub queue_wait: Histogram,
    /// Keys per batch sent.
    pub batch_keys: Histogram,
    /// Per UDF: its time in Python per batch.
    udf_seconds: Vec<(String, Histogram)>,
}

impl Stats {
    pub(crate) fn new(udfs: &[UdfEntry]) -> Self {
        Self {
            restarts: Default::default(),
            queue_wait: Histogram::new(SECONDS),
            batch_keys: Histogram::new(KEYS),
            udf_seconds: udfs
                .iter()
                .map(|u| (u.feature().to_owned(), Histogram::new(SECONDS)))
                .collect(),
        }
    }

    /// Counts a worker replaced for `reason`.
    pub fn restarted(&self, reason: Restart) {
        if let Some(i) = Restart::ALL.iter().position(|r| *r == reason) {
            self.restarts[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Workers replaced for `reason` so far.
    pub fn restarts(&self, reason: Restart) -> u64 {
        Restart::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.restarts[i].load(Ordering::Relaxed))
    }

    /// UDF `udf`'s time in one batch.
    pub fn udf_time(&self, udf: usize, d: Duration) {
        if let Some((_, h)) = self.udf_seconds.get(udf) {
            h.observe(d);
        }
    }
}

/// The pool's health, for `/readyz` and the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Workers able to run a batch now (idle or busy).
    pub alive: usize,
    /// Workers starting (their modules loading).
    pub starting: usize,
    /// Workers the pool keeps.
    pub workers: usize,
    /// Why the last worker died or did not start, if one did.
    pub last_failure: Option<String>,
}

/// Writes the pool's families: its `stats` and `health`.
pub fn encode(stats: &Stats, health: &Health, enc: &mut DescriptorEncoder) -> fmt::Result {
    let gauge = |v: usize| ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    gauge(health.alive).encode(enc.encode_descriptor(
        "oka_python_workers_alive",
        "Python workers able to run a batch now.",
        None,
        MetricType::Gauge,
    )?)?;
    gauge(health.workers).encode(enc.encode_descriptor(
        "oka_python_workers",
        "Python workers the pool keeps (--python-workers).",
        None,
        MetricType::Gauge,
    )?)?;
    let mut fam = enc.encode_descriptor(
        "oka_python_worker_restarts",
        "Python workers replaced, by reason: crashed, timeout, memory, protocol, hung, start_failed.",
        None,
        MetricType::Counter,
    )?;
    for r in Restart::ALL {
        ConstCounter::new(stats.restarts(r))
            .encode(fam.encode_family(&[("reason", r.label())])?)?;
    }
    (&stats.queue_wait).encode(enc.encode_descriptor(
        "oka_python_queue_wait_seconds",
        "Time a call of a Python UDF waited for a worker, from its arrival to its batch's sending.",
        None,
        MetricType::Histogram,
    )?)?;
    (&stats.batch_keys).encode(enc.encode_descriptor(
        "oka_python_batch_keys",
        "Keys in a batch sent to a Python worker (the calls of concurrent requests together).",
        None,
        MetricType::Histogram,
    )?)?;
    let mut fam = enc.encode_descriptor(
        "oka_python_udf_duration_seconds",
        "Time a Python UDF ran in its worker per batch, by feature.",
        None,
        MetricType::Histogram,
    )?;
    for (feature, h) in &stats.udf_seconds {
        h.encode(fam.encode_family(&[("feature", feature.as_str())])?)?;
    }
    Ok(())
}
