//! Prometheus metrics: the handles are created once at start-up as fixed arrays of
//! atomics, so recording is a few relaxed atomic adds, with no locks and no label
//! allocation; [`exposition`] hands them to `prometheus-client` at scrape time.
//! Names follow `oka_<subsystem>_<name>_<unit>`; every metric is in `docs/metrics.md`.

mod exposition;

pub use exposition::{OPENMETRICS, PLAIN, render};

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use oka_core::Registry;

use crate::stats::FeatureLive;

/// One worker's counters (read at scrape time).
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// The worker's number.
    pub index: usize,
    /// Requests being served now.
    pub in_flight: AtomicUsize,
    /// Requests admitted.
    pub requests: AtomicU64,
    /// Requests refused by admission control.
    pub shed: AtomicU64,
    /// Client connections open now (kept by the worker's listener).
    pub connections: Arc<AtomicUsize>,
    /// Client connections open now on the worker's gRPC port (`--grpc-listen`).
    pub grpc_connections: Arc<AtomicUsize>,
}

pub use oka_telemetry::families::{BATCH_BUCKETS, LAG_BUCKETS, LATENCY_BUCKETS};

/// Keys-per-request buckets.
pub const KEY_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0,
];
/// A cumulative histogram of atomics.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Box<[AtomicU64]>,
    /// Sum in nanounits (value × 1e9), so integer atomics suffice.
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// A histogram with the given upper bounds (plus `+Inf`).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn observe(&self, v: f64) {
        let v = if v.is_finite() && v > 0.0 { v } else { 0.0 };
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos
            .fetch_add((v * 1e9) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a duration in seconds.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of the recorded values.
    pub fn sum(&self) -> f64 {
        self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9
    }
}

/// A monotonic counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A gauge.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds `n` (may be negative).
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The serving routes, a bounded label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/features`.
    Features,
    /// `POST /on_demand_compute`.
    VolgaPost,
    /// `GET /on_demand_compute/{json}`.
    VolgaGet,
    /// `GET /v1/features`.
    Registry,
    /// `POST /v1/ingest`.
    Ingest,
    /// Feast's `POST /get-online-features` (with `--feast-repo`).
    FeastOnline,
    /// Feast's `POST /push` (with `--feast-repo`).
    FeastPush,
    /// Feast's `POST /write-to-online-store` (with `--feast-repo`).
    FeastWrite,
    /// Feast's gRPC calls (with `--feast-repo --grpc-listen`).
    FeastGrpc,
    /// Anything else (404s, 405s).
    Other,
}

impl Route {
    const ALL: [Route; 10] = [
        Route::Features,
        Route::VolgaPost,
        Route::VolgaGet,
        Route::Registry,
        Route::Ingest,
        Route::FeastOnline,
        Route::FeastPush,
        Route::FeastWrite,
        Route::FeastGrpc,
        Route::Other,
    ];

    /// The route template.
    pub fn template(self) -> &'static str {
        match self {
            Self::Features => "/v1/features",
            Self::VolgaPost => "/on_demand_compute",
            Self::VolgaGet => "/on_demand_compute/{json}",
            Self::Registry => "GET /v1/features",
            Self::Ingest => "/v1/ingest",
            Self::FeastOnline => "/get-online-features",
            Self::FeastPush => "/push",
            Self::FeastWrite => "/write-to-online-store",
            Self::FeastGrpc => "grpc",
            Self::Other => "other",
        }
    }

    /// The route's span name (`{method} {path}`, OpenTelemetry's HTTP
    /// conventions; Feast's gRPC calls: the service's).
    pub fn span_name(self) -> &'static str {
        match self {
            Self::Features => "POST /v1/features",
            Self::VolgaPost => "POST /on_demand_compute",
            Self::VolgaGet => "GET /on_demand_compute/{json}",
            Self::Registry => "GET /v1/features",
            Self::Ingest => "POST /v1/ingest",
            Self::FeastOnline => "POST /get-online-features",
            Self::FeastPush => "POST /push",
            Self::FeastWrite => "POST /write-to-online-store",
            Self::FeastGrpc => "gRPC",
            Self::Other => "HTTP",
        }
    }

    /// The HTTP method and path of the route (`http.request.method`,
    /// `http.route`).
    pub fn method_and_path(self) -> (&'static str, &'static str) {
        self.span_name()
            .split_once(' ')
            .unwrap_or(("", self.span_name()))
    }
}

const STATUS_CLASSES: [&str; 4] = ["2xx", "4xx", "5xx", "other"];

fn status_class(status: u16) -> usize {
    match status {
        200..=299 => 0,
        400..=499 => 1,
        500..=599 => 2,
        _ => 3,
    }
}

pub use oka_telemetry::http::ConnTimeout;

/// What a limit refused, a bounded label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A connection beyond the worker's connection cap (answered 503, closed).
    ConnectionCap,
    /// A connection taken while the process was out of file descriptors
    /// (answered 503, closed).
    FdLimit,
    /// A body over the size limit (413).
    BodyTooLarge,
    /// A body that did not arrive within the body-read timeout (408).
    BodyTimeout,
    /// An ingest body beyond the ingest byte budget (503).
    IngestBudget,
}

impl Refusal {
    const ALL: [Refusal; 5] = [
        Refusal::ConnectionCap,
        Refusal::FdLimit,
        Refusal::BodyTooLarge,
        Refusal::BodyTimeout,
        Refusal::IngestBudget,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::ConnectionCap => "connection_cap",
            Self::FdLimit => "fd_limit",
            Self::BodyTooLarge => "body_too_large",
            Self::BodyTimeout => "body_timeout",
            Self::IngestBudget => "ingest_budget",
        }
    }
}

/// Where Volga's routes were lenient with a request Oka's API refuses, a bounded
/// label: Volga's server answered these with 200, so Volga's clients send them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leniency {
    /// An empty `target_features` (answered with empty results).
    EmptyTargets,
    /// Top-level fields Oka does not know (ignored).
    UnknownField,
    /// Key objects that do not fit their entity (answered `null`, status
    /// `invalid_key`); counted per request.
    InvalidKey,
}

impl Leniency {
    const ALL: [Leniency; 3] = [
        Leniency::EmptyTargets,
        Leniency::UnknownField,
        Leniency::InvalidKey,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::EmptyTargets => "empty_targets",
            Self::UnknownField => "unknown_field",
            Self::InvalidKey => "invalid_key",
        }
    }
}

/// Storage queries, a bounded label.
const QUERIES: [&str; 3] = ["latest", "range", "last_n"];

fn query_index(name: &str) -> usize {
    QUERIES.iter().position(|q| *q == name).unwrap_or(0)
}

/// Per on-demand feature metrics.
#[derive(Debug)]
pub struct FeatureMetrics {
    name: Arc<str>,
    /// UDF time per request (all keys).
    pub udf_duration: Histogram,
    /// Keys whose UDF failed.
    pub udf_errors: Counter,
    /// Live statistics for the console, made the first time one watches.
    live: OnceLock<FeatureLive>,
}

impl FeatureMetrics {
    /// The feature's live statistics, made now if no console watched before.
    pub fn live(&self) -> &FeatureLive {
        self.live.get_or_init(FeatureLive::default)
    }

    /// The feature's live statistics, if a console ever watched.
    pub fn live_if_kept(&self) -> Option<&FeatureLive> {
        self.live.get()
    }
}

/// Metrics for one loaded registry: one entry per feature id.
#[derive(Debug)]
pub struct RegistryMetrics {
    /// Parallel to the registry's features.
    pub features: Vec<Arc<FeatureMetrics>>,
}

impl RegistryMetrics {
    /// Entries for every feature of `registry`; a feature that `previous` (the
    /// registry this one replaces) had by the same name keeps its series, so a
    /// reload does not reset them.
    pub fn new(registry: &Registry, previous: Option<&RegistryMetrics>) -> Self {
        Self {
            features: registry
                .features()
                .iter()
                .map(|f| {
                    previous
                        .and_then(|p| p.features.iter().find(|m| m.name == f.name))
                        .map_or_else(
                            || {
                                Arc::new(FeatureMetrics {
                                    name: Arc::clone(&f.name),
                                    udf_duration: Histogram::new(LATENCY_BUCKETS),
                                    udf_errors: Counter::default(),
                                    live: OnceLock::new(),
                                })
                            },
                            Arc::clone,
                        )
                })
                .collect(),
        }
    }
}

/// Every process-wide metric.
#[derive(Debug)]
pub struct Metrics {
    backend: &'static str,
    request_duration: Vec<Histogram>,
    compute_duration: Histogram,
    keys_per_request: Histogram,
    in_flight: Gauge,
    storage_read: Vec<Histogram>,
    storage_write: Histogram,
    storage_errors: Counter,
    ingest_written: Counter,
    ingest_rejected: Counter,
    ingest_lag: Histogram,
    ingest_batch: Histogram,
    ingest_retries: Counter,
    connections_accepted: Counter,
    connection_timeouts: [Counter; 2],
    refused: [Counter; 6],
    accept_errors: [Counter; 2],
    unanswered: Counter,
    tls_failures: [Counter; 2],
    trace_spans: [Counter; 2],
    reloads: [Counter; 3],
    lenient: [Counter; 3],
}

/// How a reload request ended, a bounded label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// The new spec and keys are serving.
    Ok,
    /// The new spec or keys were invalid; the old ones keep serving.
    Invalid,
    /// Refused: another reload was running, or the last one was too recent.
    Refused,
}

impl ReloadResult {
    const ALL: [ReloadResult; 3] = [
        ReloadResult::Ok,
        ReloadResult::Invalid,
        ReloadResult::Refused,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Invalid => "invalid",
            Self::Refused => "refused",
        }
    }
}

impl Metrics {
    /// All metrics, for a store of `backend`.
    pub fn new(backend: &'static str) -> Self {
        Self {
            backend,
            request_duration: (0..Route::ALL.len() * STATUS_CLASSES.len())
                .map(|_| Histogram::new(LATENCY_BUCKETS))
                .collect(),
            compute_duration: Histogram::new(LATENCY_BUCKETS),
            keys_per_request: Histogram::new(KEY_BUCKETS),
            in_flight: Gauge::default(),
            storage_read: QUERIES
                .iter()
                .map(|_| Histogram::new(LATENCY_BUCKETS))
                .collect(),
            storage_write: Histogram::new(LATENCY_BUCKETS),
            storage_errors: Counter::default(),
            ingest_written: Counter::default(),
            ingest_rejected: Counter::default(),
            ingest_lag: Histogram::new(LAG_BUCKETS),
            ingest_batch: Histogram::new(BATCH_BUCKETS),
            ingest_retries: Counter::default(),
            connections_accepted: Counter::default(),
            connection_timeouts: Default::default(),
            refused: Default::default(),
            accept_errors: Default::default(),
            unanswered: Counter::default(),
            tls_failures: Default::default(),
            trace_spans: Default::default(),
            reloads: Default::default(),
            lenient: Default::default(),
        }
    }

    /// A limit refused a connection or a request.
    pub fn refused(&self, what: Refusal) {
        self.refused[what as usize].add(1);
    }

    /// How many `what` refused so far.
    pub fn refused_count(&self, what: Refusal) -> u64 {
        self.refused[what as usize].get()
    }

    /// A reload request ended.
    pub fn reload(&self, result: ReloadResult) {
        self.reloads[result as usize].add(1);
    }

    /// A Volga route served a request Oka's API would refuse.
    pub fn lenient(&self, what: Leniency) {
        self.lenient[what as usize].add(1);
    }

    /// How many requests were served with leniency `what`.
    pub fn lenient_count(&self, what: Leniency) -> u64 {
        self.lenient[what as usize].get()
    }

    /// A finished HTTP request.
    pub fn request(&self, route: Route, status: u16, elapsed: Duration) {
        let r = Route::ALL.iter().position(|x| *x == route).unwrap_or(0);
        self.request_duration[r * STATUS_CLASSES.len() + status_class(status)]
            .observe_duration(elapsed);
    }

    /// Requests being served now.
    pub fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    /// A finished feature computation (validation, reads and UDFs).
    pub fn compute(&self, elapsed: Duration, keys: usize) {
        self.compute_duration.observe_duration(elapsed);
        self.keys_per_request.observe(keys as f64);
    }

    /// A store read.
    pub fn storage_read(&self, query: &str, elapsed: Duration, ok: bool) {
        self.storage_read[query_index(query)].observe_duration(elapsed);
        if !ok {
            self.storage_errors.add(1);
        }
    }
}

impl oka_ingest::IngestMetrics for Metrics {
    fn store_write(&self, elapsed: Duration, ok: bool) {
        self.storage_write.observe_duration(elapsed);
        if !ok {
            self.storage_errors.add(1);
        }
    }

    fn rows_written(&self, rows: u64, lags: &mut dyn Iterator<Item = f64>) {
        self.ingest_written.add(rows);
        for l in lags {
            self.ingest_lag.observe(l);
        }
    }

    fn rows_rejected(&self, rows: u64) {
        self.ingest_rejected.add(rows);
    }

    fn batch(&self, rows: usize) {
        self.ingest_batch.observe(rows as f64);
    }

    fn retry(&self) {
        self.ingest_retries.add(1);
    }
}

impl oka_telemetry::http::ConnEvents for Metrics {
    fn connection_accepted(&self) {
        self.connections_accepted.add(1);
    }

    fn connection_refused(&self, why: oka_telemetry::http::ConnRefusal) {
        self.refused(match why {
            oka_telemetry::http::ConnRefusal::ConnectionCap => Refusal::ConnectionCap,
            oka_telemetry::http::ConnRefusal::FdLimit => Refusal::FdLimit,
        });
    }

    fn accept_failed(&self, fd_limit: bool) {
        self.accept_errors[usize::from(!fd_limit)].add(1);
    }

    fn connection_timed_out(&self, phase: ConnTimeout) {
        self.connection_timeouts[phase as usize].add(1);
    }

    fn unanswered_connections(&self, n: u64) {
        self.unanswered.add(n);
    }

    fn tls_failed(&self, why: oka_telemetry::http::TlsFailure) {
        self.tls_failures[why as usize].add(1);
    }
}

impl oka_telemetry::trace::TraceEvents for Metrics {
    fn spans_exported(&self, n: u64) {
        self.trace_spans[0].add(n);
    }

    fn spans_failed(&self, n: u64) {
        self.trace_spans[1].add(n);
    }
}
