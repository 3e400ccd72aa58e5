//! What handlers share: the loaded registry (swapped atomically on reload), API
//! keys, the store, metrics, limits, and each worker's identity and counters.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use oka_core::Registry;
use oka_core::request::RequestLimits;
use oka_storage::{FeatureStore, StoreWatch};
use oka_telemetry::http::{Drain, Tls};
use oka_telemetry::trace::Tracer;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use crate::auth::ApiKeys;
use crate::catalog;
use crate::metrics::{Metrics, RegistryMetrics, ReloadResult, WorkerCounters};
use crate::stats::{ReloadEvent, Stats};
use crate::udf_runtime::{SpecLoad, UdfRuntime};
use oka_ingest::{WritePath, WriterConfig};

mod builder;
pub use builder::SharedBuilder;

/// Request limits and admission settings.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted request body, bytes (413 beyond).
    pub max_body_bytes: usize,
    /// A request body must arrive within this of the request head (408 beyond).
    pub body_read_timeout: Duration,
    /// Ingest body bytes held at once over all requests (503 beyond).
    pub max_ingest_bytes: usize,
    /// How far into the future an ingested record's event time may lie.
    pub max_future_skew: Duration,
    /// Requests one worker serves at once; beyond, 503 at once.
    pub max_in_flight: usize,
    /// Deadline of a request that names none.
    pub default_deadline: Duration,
    /// Keys and targets per request.
    pub request: RequestLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(10),
            max_ingest_bytes: 64 * 1024 * 1024,
            max_future_skew: oka_ingest::TimeBounds::default().max_future_skew,
            max_in_flight: 1024,
            default_deadline: Duration::from_secs(2),
            request: RequestLimits::default(),
        }
    }
}

/// A registry with everything derived from it once at load.
#[derive(Debug)]
pub struct Loaded {
    /// The validated spec.
    pub registry: Arc<Registry>,
    /// Its per-feature metrics.
    pub metrics: RegistryMetrics,
    /// `GET /v1/features`, encoded once.
    pub catalog_json: bytes::Bytes,
    /// API keys (empty: authentication off); swapped with the spec, in one step.
    pub keys: ApiKeys,
    /// The runtimes the spec's UDFs run in (the Python pool), kept alive with it.
    pub runtimes: Vec<Arc<dyn UdfRuntime>>,
    /// The transformations of writes, by feature (they run in those runtimes).
    pub transforms: crate::udf_runtime::WriteTransforms,
}

impl Loaded {
    /// Derives metrics and the catalog from the load's registry; the
    /// per-feature metrics of features `previous` also had carry over.
    pub fn new(load: SpecLoad, previous: Option<&Loaded>) -> Self {
        Self {
            metrics: RegistryMetrics::new(&load.registry, previous.map(|p| &p.metrics)),
            catalog_json: catalog::encode(&load.registry),
            registry: load.registry,
            keys: load.keys,
            runtimes: load.runtimes,
            transforms: load.transforms,
        }
    }
}

/// Produces a new registry, API keys and UDF runtimes on reload (re-reading
/// their sources).
pub type Reloader = Box<dyn Fn() -> Result<SpecLoad, ReloadFailure> + Send + Sync>;

/// Why a reloader found no valid spec and keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadFailure {
    /// The whole reason, with file paths as configured (for the log and for
    /// callers authenticated with an `admin` key).
    pub message: String,
    /// The same with file names only, for callers that are not authenticated.
    pub public: String,
}

impl ReloadFailure {
    /// A failure whose message names no file path.
    pub fn new(message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            public: message.clone(),
            message,
        }
    }
}

/// Why a reload did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The server has nothing to reload from.
    Unsupported,
    /// Another reload is running.
    Busy,
    /// The last reload was less than the minimum interval ago; retry after this.
    TooSoon(Duration),
    /// The new spec or keys are invalid; the old ones keep serving.
    Invalid(ReloadFailure),
}

/// Reloads run one at a time, at most one per this interval by default, so a
/// flood of reload requests cannot take CPU from serving.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// State shared by every worker.
pub struct Shared {
    /// The spec and API keys being served; each request loads them once.
    pub loaded: ArcSwap<Loaded>,
    reloader: Option<Reloader>,
    /// Held while a reload runs; the time the last one finished.
    reloading: Mutex<Option<Instant>>,
    reload_interval: Duration,
    /// The store.
    pub store: Arc<dyn FeatureStore>,
    /// The store's state (available, or out and why), fed by the request path
    /// and the readiness probe.
    pub store_watch: StoreWatch,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The batched write path.
    pub writer: WritePath,
    /// `/stats` windows.
    pub stats: Stats,
    /// Request limits.
    pub limits: Limits,
    /// The host name used in server ids.
    pub host: String,
    /// Started once shutdown began: `/readyz` answers 503, every answer carries
    /// `connection: close` and HTTP/2 connections get a GOAWAY (shared with the
    /// connections, which read it per answer and wait on it when idle).
    draining: Arc<Drain>,
    /// Ingest body bytes that may be held at once, over all requests.
    pub ingest_budget: Arc<Semaphore>,
    workers: Mutex<Vec<Arc<WorkerCounters>>>,
    /// The bound serving address, once the workers listen (the console's try-it
    /// form sends its requests there).
    pub serving_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The Feast registry served by Feast's routes (`oka serve --feast-repo`),
    /// swapped by reloads; none without one.
    pub feast: Option<oka_feast::SharedRegistry>,
    /// The TLS ports' certificates, re-read by every reload.
    tls: Vec<Arc<Tls>>,
    /// Where sampled requests' spans go (`--otlp-endpoint`); none: no tracing.
    pub tracer: Option<Arc<Tracer>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("store", &self.store.backend())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Shared state for `registry` over `store`, with the default write path.
    /// Starts the write path's task, so it must run inside a tokio runtime.
    pub fn new(registry: Arc<Registry>, store: Arc<dyn FeatureStore>, limits: Limits) -> Arc<Self> {
        Self::builder(registry, store).limits(limits).build()
    }

    /// Shared state with a configured write path.
    pub fn with_writer(
        registry: Arc<Registry>,
        store: Arc<dyn FeatureStore>,
        limits: Limits,
        writer: WriterConfig,
    ) -> Arc<Self> {
        Self::builder(registry, store)
            .limits(limits)
            .writer(writer)
            .build()
    }

    /// A builder for the less common settings.
    pub fn builder(registry: Arc<Registry>, store: Arc<dyn FeatureStore>) -> SharedBuilder {
        SharedBuilder::new(registry, store)
    }

    /// Loads a new spec and keys from the reloader and swaps them in atomically; on
    /// any error the old ones keep serving. One reload runs at a time, and not
    /// sooner than the reload interval after the last. Returns a summary.
    pub fn reload(&self) -> Result<String, ReloadError> {
        let result = self.try_reload();
        let outcome = match &result {
            Ok(summary) => {
                let event = ReloadEvent::now("ok", summary.clone(), summary.clone());
                self.stats.reloaded(event);
                ReloadResult::Ok
            }
            Err(ReloadError::Invalid(f)) => {
                let event = ReloadEvent::now("invalid", f.message.clone(), f.public.clone());
                self.stats.reloaded(event);
                ReloadResult::Invalid
            }
            Err(_) => ReloadResult::Refused,
        };
        self.metrics.reload(outcome);
        result
    }

    /// Whether a reload would run now, without running one: a cheap check that
    /// answers a flood of reload requests without starting work for each. A refusal
    /// is counted.
    pub fn reload_allowed(&self) -> Result<(), ReloadError> {
        let allowed = match self.reloading.try_lock() {
            Ok(last) => self.reload_wait(*last),
            Err(_) => Err(ReloadError::Busy),
        };
        if let Err(e) = &allowed
            && *e != ReloadError::Unsupported
        {
            self.metrics.reload(ReloadResult::Refused);
        }
        allowed
    }

    /// `TooSoon` while the last reload (finished at `last`) is within the interval.
    fn reload_wait(&self, last: Option<Instant>) -> Result<(), ReloadError> {
        if self.reloader.is_none() {
            return Err(ReloadError::Unsupported);
        }
        match last
            .map(|t| self.reload_interval.saturating_sub(t.elapsed()))
            .filter(|w| !w.is_zero())
        {
            Some(wait) => Err(ReloadError::TooSoon(wait)),
            None => Ok(()),
        }
    }

    fn try_reload(&self) -> Result<String, ReloadError> {
        let Some(reloader) = &self.reloader else {
            return Err(ReloadError::Unsupported);
        };
        let Ok(mut last) = self.reloading.try_lock() else {
            return Err(ReloadError::Busy);
        };
        self.reload_wait(*last)?;
        // Certificates first: read and checked, installed only with the spec.
        let certificates = self
            .tls
            .iter()
            .map(|t| t.prepare())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ReloadFailure {
                message: e.message,
                public: e.public,
            });
        let result = certificates.and_then(|c| reloader().map(|loaded| (loaded, c)));
        *last = Some(Instant::now());
        match result {
            Ok((load, certificates)) => {
                let (registry, keys) = (&load.registry, &load.keys);
                let mut summary = format!(
                    "{} features, {} API keys",
                    registry.features().len(),
                    keys.len()
                );
                if keys.identities() > 0 {
                    summary.push_str(&format!(
                        ", {} client certificate identities",
                        keys.identities()
                    ));
                }
                if !certificates.is_empty() {
                    summary.push_str(&format!(
                        ", TLS certificates of {} port(s) re-read",
                        certificates.len()
                    ));
                }
                let previous = self.loaded.load();
                self.loaded
                    .store(Arc::new(Loaded::new(load, Some(&previous))));
                for (tls, prepared) in self.tls.iter().zip(certificates) {
                    tls.install(prepared);
                }
                info!(summary = %summary, "spec reloaded");
                Ok(summary)
            }
            Err(failure) => {
                warn!(reason = %failure.message, "reload rejected; the previous spec, keys and certificates keep serving");
                Err(ReloadError::Invalid(failure))
            }
        }
    }

    /// Starts shutting down: readiness turns false (so load balancers take the
    /// instance out of rotation) and answers carry `connection: close` (so
    /// keep-alive clients reconnect, elsewhere); serving goes on.
    pub fn start_draining(&self) {
        self.draining.start();
    }

    /// Whether shutdown began.
    pub fn is_draining(&self) -> bool {
        self.draining.is_started()
    }

    /// The drain [`Self::start_draining`] starts, for the connections.
    pub(crate) fn draining_flag(&self) -> Arc<Drain> {
        Arc::clone(&self.draining)
    }

    /// Registers a worker's counters (for metrics).
    pub fn worker(&self, index: usize) -> Arc<WorkerCounters> {
        let counters = Arc::new(WorkerCounters {
            index,
            ..WorkerCounters::default()
        });
        if let Ok(mut w) = self.workers.lock() {
            w.push(Arc::clone(&counters));
        }
        counters
    }

    /// Every registered worker's counters.
    pub fn workers(&self) -> Vec<Arc<WorkerCounters>> {
        self.workers.lock().map(|w| w.clone()).unwrap_or_default()
    }
}

/// One worker's handle on the shared state. Cloned for every request (axum's
/// `State`), so it is one pointer to this worker's own [`WorkerState`]: a clone
/// touches a count only this worker writes, not the counts of [`Shared`] and the
/// store that every worker's requests would write from every core.
#[derive(Debug, Clone)]
pub struct AppState(Arc<WorkerState>);

impl std::ops::Deref for AppState {
    type Target = WorkerState;

    fn deref(&self) -> &WorkerState {
        &self.0
    }
}

/// What [`AppState`] points to.
#[derive(Debug, Clone)]
pub struct WorkerState {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// The store this worker reads from: its own handle
    /// ([`FeatureStore::for_worker`]) or the shared one.
    pub store: Arc<dyn FeatureStore>,
    /// This worker's counters.
    pub worker: Arc<WorkerCounters>,
    /// `"host/worker"` as a JSON string (native API).
    pub server_id: Arc<str>,
    /// The worker number, 1-based, as a JSON integer (Volga's routes: Volga's
    /// client parses `server_id` as an int).
    pub volga_server_id: Arc<str>,
}

/// Releases a worker's in-flight slot when dropped.
#[derive(Debug)]
pub struct Admitted(Arc<WorkerCounters>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl AppState {
    /// State for worker `worker` (0-based).
    pub fn new(shared: Arc<Shared>, worker: usize) -> Self {
        let server_id = serde_json::Value::String(format!("{}/{worker}", shared.host)).to_string();
        Self(Arc::new(WorkerState {
            worker: shared.worker(worker),
            store: Arc::clone(&shared.store),
            shared,
            server_id: server_id.into(),
            volga_server_id: (worker + 1).to_string().into(),
        }))
    }

    /// Switches this worker to a store handle of its own if the backend offers one
    /// (call on the worker's runtime); on failure it keeps the shared store.
    pub async fn with_worker_store(mut self) -> Self {
        match self.shared.store.for_worker().await {
            Ok(Some(store)) => Arc::make_mut(&mut self.0).store = store,
            Ok(None) => {}
            Err(e) => tracing::warn!(
                worker = %self.server_id,
                error = %e,
                "could not open a store client for this worker; it shares the main one"
            ),
        }
        self
    }

    /// State for the admin server: not a worker, so not in the worker metrics.
    pub fn admin(shared: Arc<Shared>) -> Self {
        Self(Arc::new(WorkerState {
            worker: Arc::new(WorkerCounters::default()),
            store: Arc::clone(&shared.store),
            server_id: serde_json::Value::String(format!("{}/admin", shared.host))
                .to_string()
                .into(),
            volga_server_id: "0".into(),
            shared,
        }))
    }

    /// Admission control: a slot if this worker serves fewer than its limit,
    /// else `None` (the caller answers 503 at once).
    pub fn admit(&self) -> Option<Admitted> {
        let limit = self.shared.limits.max_in_flight.max(1);
        let before = self.worker.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= limit {
            self.worker.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.worker.shed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.worker.requests.fetch_add(1, Ordering::Relaxed);
        Some(Admitted(Arc::clone(&self.worker)))
    }
}

/// The host name: `$HOSTNAME`, else the kernel's, else `oka`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "oka".to_owned())
}
