//! [`SharedBuilder`]: the state shared by every worker, assembled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use oka_core::Registry;
use oka_ingest::{WritePath, WriterConfig};
use oka_storage::{FeatureStore, StoreWatch};
use oka_telemetry::http::{Drain, Tls};
use oka_telemetry::trace::Tracer;
use tokio::sync::Semaphore;

use super::{DEFAULT_RELOAD_INTERVAL, Limits, Loaded, Reloader, Shared, host_name};
use crate::auth::ApiKeys;
use crate::metrics::Metrics;
use crate::stats::Stats;
use crate::udf_runtime::{SpecLoad, UdfRuntime, WriteTransforms};

/// Builds [`Shared`].
pub struct SharedBuilder {
    registry: Arc<Registry>,
    store: Arc<dyn FeatureStore>,
    limits: Limits,
    writer: WriterConfig,
    keys: ApiKeys,
    reloader: Option<Reloader>,
    reload_interval: Duration,
    store_name: Option<String>,
    feast: Option<oka_feast::SharedRegistry>,
    tls: Vec<Arc<Tls>>,
    tracer: Option<Arc<Tracer>>,
    runtimes: Vec<Arc<dyn UdfRuntime>>,
    transforms: WriteTransforms,
}

impl std::fmt::Debug for SharedBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBuilder").finish_non_exhaustive()
    }
}

impl SharedBuilder {
    /// Every setting at its default.
    pub(super) fn new(registry: Arc<Registry>, store: Arc<dyn FeatureStore>) -> Self {
        Self {
            registry,
            store,
            limits: Limits::default(),
            writer: WriterConfig::default(),
            keys: ApiKeys::default(),
            reloader: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            store_name: None,
            feast: None,
            tls: Vec::new(),
            tracer: None,
            runtimes: Vec::new(),
            transforms: WriteTransforms::new(),
        }
    }

    /// How log lines about the store's state name it (its URL, password
    /// redacted; default: the backend's name).
    pub fn store_name(mut self, name: impl Into<String>) -> Self {
        self.store_name = Some(name.into());
        self
    }

    /// The runtimes the spec's UDFs run in (the Python pool).
    pub fn runtimes(mut self, runtimes: Vec<Arc<dyn UdfRuntime>>) -> Self {
        self.runtimes = runtimes;
        self
    }

    /// The transformations of writes, by feature (run in those runtimes).
    pub fn transforms(mut self, transforms: WriteTransforms) -> Self {
        self.transforms = transforms;
        self
    }

    /// Request limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The write path's settings.
    pub fn writer(mut self, writer: WriterConfig) -> Self {
        self.writer = writer;
        self
    }

    /// API keys (authentication is on when there is any).
    pub fn keys(mut self, keys: ApiKeys) -> Self {
        self.keys = keys;
        self
    }

    /// What `reload` (SIGHUP, `POST /admin/reload`) loads.
    pub fn reloader(mut self, reloader: Reloader) -> Self {
        self.reloader = Some(reloader);
        self
    }

    /// The shortest time between two reloads.
    pub fn reload_interval(mut self, interval: Duration) -> Self {
        self.reload_interval = interval;
        self
    }

    /// Serve Feast's routes from this registry (shared with the store and the
    /// reloader), if one is given.
    pub fn feast(mut self, registry: Option<oka_feast::SharedRegistry>) -> Self {
        self.feast = registry;
        self
    }

    /// Certificates a reload re-reads (the TLS ports'): a reload is all or
    /// nothing, so one bad file keeps the old spec, keys and certificates.
    pub fn tls(mut self, tls: Vec<Arc<Tls>>) -> Self {
        self.tls = tls;
        self
    }

    /// Traces sampled requests to `tracer`.
    pub fn tracer(mut self, tracer: Option<Arc<Tracer>>) -> Self {
        self.tracer = tracer;
        self
    }

    /// The shared state; starts the write path on the current tokio runtime.
    pub fn build(self) -> Arc<Shared> {
        let metrics = Arc::new(Metrics::new(self.store.backend()));
        let ingest_budget = self.limits.max_ingest_bytes.min(Semaphore::MAX_PERMITS);
        let writer = WritePath::spawn(Arc::clone(&self.store), metrics.clone(), self.writer);
        if let Some(tracer) = &self.tracer {
            tracer.report_to(metrics.clone());
        }
        Arc::new(Shared {
            loaded: ArcSwap::from_pointee(Loaded::new(
                SpecLoad {
                    registry: self.registry,
                    keys: self.keys,
                    runtimes: self.runtimes,
                    transforms: self.transforms,
                },
                None,
            )),
            reloader: self.reloader,
            reloading: Mutex::new(None),
            reload_interval: self.reload_interval,
            store_watch: StoreWatch::new(
                self.store_name
                    .unwrap_or_else(|| self.store.backend().to_owned()),
                self.store.backend(),
            ),
            store: self.store,
            metrics,
            writer,
            stats: Stats::default(),
            limits: self.limits,
            host: host_name(),
            draining: Arc::new(Drain::new()),
            ingest_budget: Arc::new(Semaphore::new(ingest_budget)),
            workers: Mutex::new(Vec::new()),
            feast: self.feast,
            serving_addr: std::sync::OnceLock::new(),
            tls: self.tls,
            tracer: self.tracer,
        })
    }
}
