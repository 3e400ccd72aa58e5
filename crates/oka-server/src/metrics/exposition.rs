//! The `/metrics` exposition through `prometheus-client`: at each scrape a
//! [`Scrape`] collector reads the atomics of [`Metrics`], the loaded registry's
//! per-feature handles and the workers' counters, and the library writes the
//! families (names, escaping, histogram layout, the OpenMetrics text format).
//!
//! The families, their HELP text and their label sets are listed here once, in
//! scrape order; `docs/metrics.md` documents each.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use oka_telemetry::families as F;
use oka_telemetry::http::TlsFailure;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{
    ConnTimeout, Counter, FeatureMetrics, Gauge, Histogram, Leniency, Metrics, QUERIES, Refusal,
    RegistryMetrics, ReloadResult, Route, STATUS_CLASSES, WorkerCounters,
};
use crate::udf_runtime::UdfRuntime;

/// The content type of [`render`]'s output for a scraper that asked for OpenMetrics.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type for everyone else (curl, a browser): the same text, readable as is.
pub const PLAIN: &str = "text/plain; charset=utf-8";

/// The exposition of `metrics`, the loaded registry's per-feature metrics (and
/// its UDF runtimes' families) and the workers' counters; `coalesced` is the store's count of coalesced reads, if it
/// coalesces, and `cache` its read cache's counters, if it has one.
pub fn render(
    metrics: &Arc<Metrics>,
    (registry, runtimes): (&RegistryMetrics, &[Arc<dyn UdfRuntime>]),
    workers: Vec<Arc<WorkerCounters>>,
    coalesced: Option<u64>,
    cache: Option<oka_storage::CacheStats>,
    store: &oka_storage::StoreWatch,
) -> String {
    let mut scrape = Registry::default();
    // The UDF runtimes' families (the Python pool's `oka_python_*`).
    for collector in runtimes.iter().filter_map(|r| r.collector()) {
        scrape.register_collector(collector);
    }
    scrape.register_collector(Box::new(Scrape {
        metrics: Arc::clone(metrics),
        features: registry.features.clone(),
        workers,
        coalesced,
        cache,
        store_available: store.outage().is_none(),
        store_outages: store.outages(),
    }));
    let mut out = String::with_capacity(16 * 1024);
    // Writing into a String cannot fail, and the collector's own errors are the
    // writer's: nothing to report.
    let _ = prometheus_client::encoding::text::encode(&mut out, &scrape);
    out
}

/// One scrape's view of every handle.
#[derive(Debug)]
struct Scrape {
    metrics: Arc<Metrics>,
    features: Vec<Arc<FeatureMetrics>>,
    workers: Vec<Arc<WorkerCounters>>,
    coalesced: Option<u64>,
    cache: Option<oka_storage::CacheStats>,
    store_available: bool,
    store_outages: u64,
}

impl Collector for Scrape {
    // long: the table of every family, one call each in scrape order; no logic.
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let m = &*self.metrics;
        let e = &mut enc;
        let backend = m.backend;
        family(
            e,
            "oka_http_request_duration_seconds",
            "HTTP request latency by route and status class.",
            MetricType::Histogram,
            Route::ALL.iter().enumerate().flat_map(|(ri, route)| {
                STATUS_CLASSES
                    .iter()
                    .enumerate()
                    .filter_map(move |(si, class)| {
                        let h = &m.request_duration[ri * STATUS_CLASSES.len() + si];
                        (h.count() > 0)
                            .then_some(([("route", route.template()), ("status", class)], h))
                    })
            }),
        )?;
        single(
            e,
            "oka_http_requests_in_flight",
            "Requests being served.",
            &m.in_flight,
        )?;
        self.per_worker(
            e,
            "oka_worker_requests",
            "Requests admitted, by worker.",
            MetricType::Counter,
            |w| w.requests.load(Ordering::Relaxed),
        )?;
        self.per_worker(
            e,
            "oka_http_requests_shed",
            "Requests refused with 503 at a worker's in-flight limit, by worker.",
            MetricType::Counter,
            |w| w.shed.load(Ordering::Relaxed),
        )?;
        self.per_worker(
            e,
            "oka_http_connections_open",
            "Open client connections, by worker.",
            MetricType::Gauge,
            |w| w.connections.load(Ordering::Relaxed) as u64,
        )?;
        self.per_worker(
            e,
            "oka_grpc_connections_open",
            "Open client connections on the gRPC port (--grpc-listen), by worker.",
            MetricType::Gauge,
            |w| w.grpc_connections.load(Ordering::Relaxed) as u64,
        )?;
        single(
            e,
            F::HTTP_CONNECTIONS_ACCEPTED.name,
            &F::HTTP_CONNECTIONS_ACCEPTED.help_line(),
            &m.connections_accepted,
        )?;
        family(
            e,
            F::HTTP_CONNECTION_TIMEOUTS.name,
            &F::HTTP_CONNECTION_TIMEOUTS.help_line(),
            MetricType::Counter,
            ConnTimeout::ALL
                .iter()
                .map(|t| ([("phase", t.label())], &m.connection_timeouts[*t as usize])),
        )?;
        family(
            e,
            F::HTTP_REFUSED.name,
            &F::HTTP_REFUSED.help_line(),
            MetricType::Counter,
            Refusal::ALL
                .iter()
                .map(|r| ([("reason", r.label())], &m.refused[*r as usize])),
        )?;
        family(
            e,
            F::HTTP_ACCEPT_ERRORS.name,
            &F::HTTP_ACCEPT_ERRORS.help_line(),
            MetricType::Counter,
            ["fd_limit", "other"]
                .iter()
                .zip(&m.accept_errors)
                .map(|(kind, c)| ([("kind", *kind)], c)),
        )?;
        single(
            e,
            F::HTTP_SHUTDOWN_UNANSWERED.name,
            &F::HTTP_SHUTDOWN_UNANSWERED.help_line(),
            &m.unanswered,
        )?;
        family(
            e,
            F::HTTP_TLS_FAILURES.name,
            &F::HTTP_TLS_FAILURES.help_line(),
            MetricType::Counter,
            TlsFailure::ALL
                .iter()
                .map(|t| ([("reason", t.label())], &m.tls_failures[*t as usize])),
        )?;
        family(
            e,
            F::TRACE_SPANS.name,
            &F::TRACE_SPANS.help_line(),
            MetricType::Counter,
            ["exported", "failed"]
                .iter()
                .zip(&m.trace_spans)
                .map(|(result, c)| ([("result", *result)], c)),
        )?;
        family(
            e,
            "oka_volga_lenient_requests",
            "Requests on Volga's routes served where Oka's API would refuse them, by case (empty_targets, unknown_field: ignored, invalid_key: such keys answered null).",
            MetricType::Counter,
            Leniency::ALL
                .iter()
                .map(|l| ([("case", l.label())], &m.lenient[*l as usize])),
        )?;
        family(
            e,
            "oka_admin_reloads",
            "Reload requests (SIGHUP, POST /admin/reload), by result.",
            MetricType::Counter,
            ReloadResult::ALL
                .iter()
                .map(|r| ([("result", r.label())], &m.reloads[*r as usize])),
        )?;
        single(
            e,
            "oka_http_request_keys",
            "Keys per feature request.",
            &m.keys_per_request,
        )?;
        single(
            e,
            "oka_ondemand_compute_duration_seconds",
            "Successful feature requests, from admission to the encoded answer.",
            &m.compute_duration,
        )?;
        family(
            e,
            "oka_storage_read_duration_seconds",
            "Store read latency by backend and query (one batched call).",
            MetricType::Histogram,
            QUERIES
                .iter()
                .zip(&m.storage_read)
                .map(|(q, h)| ([("backend", backend), ("query", q)], h)),
        )?;
        family(
            e,
            F::STORAGE_WRITE_DURATION.name,
            &F::STORAGE_WRITE_DURATION.help_line(),
            MetricType::Histogram,
            [([("backend", backend)], &m.storage_write)],
        )?;
        family(
            e,
            F::STORAGE_ERRORS.name,
            &F::STORAGE_ERRORS.help_line(),
            MetricType::Counter,
            [([("backend", backend)], &m.storage_errors)],
        )?;
        family(
            e,
            "oka_storage_available",
            "1 while the store answers; 0 during an outage (unreachable, credentials refused, misconfigured, timing out), as logged.",
            MetricType::Gauge,
            [(
                [("backend", backend)],
                ConstGauge::new(i64::from(self.store_available)),
            )],
        )?;
        family(
            e,
            "oka_storage_outages",
            "Outages of the store begun since start (each logged once, with its cause).",
            MetricType::Counter,
            [(
                [("backend", backend)],
                ConstCounter::new(self.store_outages),
            )],
        )?;
        if let Some(n) = self.coalesced {
            family(
                e,
                "oka_storage_coalesced_reads",
                "Store reads answered by a call another concurrent read made (read coalescing).",
                MetricType::Counter,
                [([("backend", backend)], ConstCounter::new(n))],
            )?;
        }
        if let Some(c) = &self.cache {
            cache_families(e, c)?;
        }
        family(
            e,
            "oka_udf_duration_seconds",
            "UDF time per request (all keys) by feature.",
            MetricType::Histogram,
            self.features
                .iter()
                .filter(|f| f.udf_duration.count() > 0)
                .map(|f| ([("feature", &*f.name)], &f.udf_duration)),
        )?;
        family(
            e,
            "oka_udf_errors",
            "Keys whose UDF failed, by feature.",
            MetricType::Counter,
            self.features
                .iter()
                .filter(|f| f.udf_errors.get() > 0)
                .map(|f| ([("feature", &*f.name)], &f.udf_errors)),
        )?;
        family(
            e,
            F::INGEST_ROWS.name,
            &F::INGEST_ROWS.help_line(),
            MetricType::Counter,
            [
                ([("result", "written")], &m.ingest_written),
                ([("result", "rejected")], &m.ingest_rejected),
            ],
        )?;
        // The write path's families, which `oka source kafka` exposes too.
        single(
            e,
            F::INGEST_LAG.name,
            &F::INGEST_LAG.help_line(),
            &m.ingest_lag,
        )?;
        single(
            e,
            F::INGEST_BATCH_ROWS.name,
            &F::INGEST_BATCH_ROWS.help_line(),
            &m.ingest_batch,
        )?;
        single(
            e,
            F::INGEST_RETRIES.name,
            &F::INGEST_RETRIES.help_line(),
            &m.ingest_retries,
        )
    }
}

impl Scrape {
    /// A family with one series per worker, labelled with the worker's number.
    fn per_worker(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        kind: MetricType,
        value: impl Fn(&WorkerCounters) -> u64,
    ) -> fmt::Result {
        let mut fam = enc.encode_descriptor(name, help, None, kind)?;
        for w in &self.workers {
            let labels = [("worker", w.index.to_string())];
            let series = fam.encode_family(&labels)?;
            let v = value(w);
            match kind {
                MetricType::Gauge => ConstGauge::new(v).encode(series)?,
                _ => ConstCounter::new(v).encode(series)?,
            }
        }
        Ok(())
    }
}

/// The read cache's counters and gauges (`--cache`).
fn cache_families(e: &mut DescriptorEncoder, c: &oka_storage::CacheStats) -> fmt::Result {
    let counters = [
        (
            "oka_cache_hits",
            "Keys answered from the read cache.",
            c.hits,
        ),
        (
            "oka_cache_misses",
            "Keys the read cache sent to the store.",
            c.misses,
        ),
        (
            "oka_cache_invalidations",
            "Keys dropped from the read cache because they changed (Redis tracking, or a write through this process).",
            c.invalidations,
        ),
        (
            "oka_cache_evictions",
            "Entries evicted from the read cache to stay under --cache-max-bytes.",
            c.evictions,
        ),
        (
            "oka_cache_resets",
            "Times the whole read cache was dropped (tracking lost or re-established, a flush).",
            c.resets,
        ),
    ];
    for (name, help, v) in counters {
        single(e, name, help, ConstCounter::new(v))?;
    }
    let gauges = [
        (
            "oka_cache_bytes",
            "Bytes the read cache holds (records, keys, bookkeeping).",
            c.bytes,
        ),
        (
            "oka_cache_max_bytes",
            "The read cache's bound (--cache-max-bytes).",
            c.max_bytes,
        ),
        ("oka_cache_entries", "Entries in the read cache.", c.entries),
        (
            "oka_cache_enabled",
            "1 while the read cache serves; 0 while it is off (tracking down).",
            u64::from(c.enabled),
        ),
    ];
    for (name, help, v) in gauges {
        single(
            e,
            name,
            help,
            ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)),
        )?;
    }
    Ok(())
}

/// A family without labels: one series. Counter names are given without the
/// `_total` that the exposition appends to the sample.
fn single<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: M,
) -> fmt::Result {
    let series = enc.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(series)
}

/// A labelled family: its HELP and TYPE lines, then one series per item (none is
/// fine: the family is then just its header).
fn family<L: EncodeLabelSet, M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (L, M)>,
) -> fmt::Result {
    let mut fam = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, metric) in series {
        metric.encode(fam.encode_family(&labels)?)?;
    }
    Ok(())
}

impl EncodeMetric for &Histogram {
    fn encode(&self, mut enc: MetricEncoder) -> fmt::Result {
        // Per-bucket (not cumulative) counts; the library sums them, and an upper
        // bound of f64::MAX is its `+Inf`.
        let buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        enc.encode_histogram::<NoLabelSet>(self.sum(), self.count(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl EncodeMetric for &Counter {
    fn encode(&self, mut enc: MetricEncoder) -> fmt::Result {
        enc.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

impl EncodeMetric for &Gauge {
    fn encode(&self, mut enc: MetricEncoder) -> fmt::Result {
        enc.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(5.0);
        let mut scrape = Registry::default();
        #[derive(Debug)]
        struct One(Histogram);
        impl Collector for One {
            fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
                family(
                    &mut enc,
                    "x",
                    "help",
                    MetricType::Histogram,
                    [([("a", "b")], &self.0)],
                )
            }
        }
        scrape.register_collector(Box::new(One(h)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &scrape).unwrap();
        for line in [
            "x_bucket{le=\"0.1\",a=\"b\"} 1",
            "x_bucket{le=\"1.0\",a=\"b\"} 2",
            "x_bucket{le=\"+Inf\",a=\"b\"} 3",
            "x_count{a=\"b\"} 3",
            "x_sum{a=\"b\"} 5.55",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} not in\n{out}");
        }
    }

    #[test]
    fn every_family_keeps_its_name_help_and_samples() {
        let metrics = Arc::new(Metrics::new("memory"));
        metrics.request(Route::Features, 200, std::time::Duration::from_millis(2));
        metrics.refused(Refusal::BodyTimeout);
        let workers = vec![Arc::new(WorkerCounters {
            index: 1,
            ..WorkerCounters::default()
        })];
        workers[0].requests.fetch_add(7, Ordering::Relaxed);
        let registry = RegistryMetrics {
            features: Vec::new(),
        };
        let cache = oka_storage::CacheStats {
            hits: 9,
            bytes: 1024,
            enabled: true,
            ..Default::default()
        };
        let watch = oka_storage::StoreWatch::new("memory://", "memory");
        watch.failed(&oka_storage::StoreError::new(
            oka_storage::StoreErrorKind::Unauthorized,
            "refused",
        ));
        let out = render(
            &metrics,
            (&registry, &[]),
            workers,
            Some(4),
            Some(cache),
            &watch,
        );
        for line in [
            "# HELP oka_http_request_duration_seconds HTTP request latency by route and status class.",
            "# TYPE oka_http_request_duration_seconds histogram",
            "oka_http_request_duration_seconds_count{route=\"/v1/features\",status=\"2xx\"} 1",
            "# TYPE oka_worker_requests counter",
            "oka_worker_requests_total{worker=\"1\"} 7",
            "oka_http_connections_open{worker=\"1\"} 0",
            "oka_grpc_connections_open{worker=\"1\"} 0",
            "oka_http_refused_total{reason=\"body_timeout\"} 1",
            "oka_http_refused_total{reason=\"fd_limit\"} 0",
            "oka_storage_coalesced_reads_total{backend=\"memory\"} 4",
            "oka_storage_available{backend=\"memory\"} 0",
            "oka_storage_outages_total{backend=\"memory\"} 1",
            "# TYPE oka_cache_hits counter",
            "oka_cache_hits_total 9",
            "oka_cache_misses_total 0",
            "# TYPE oka_cache_bytes gauge",
            "oka_cache_bytes 1024",
            "oka_cache_enabled 1",
            "oka_http_requests_in_flight 0",
            "oka_ingest_retries_total 0",
            "# EOF",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} not in\n{out}");
        }
    }
}
