//! What handlers share: the loaded registry, the store, metrics, limits, and the
//! worker's identity.

use std::sync::Arc;

use oka_core::Registry;
use oka_storage::FeatureStore;

use crate::catalog;
use crate::metrics::{Metrics, RegistryMetrics};
use crate::stats::Stats;
use crate::writer::{WritePath, WriterConfig};

/// Request limits.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted request body, bytes (413 beyond).
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 * 1024 * 1024,
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
}

impl Loaded {
    /// Derives metrics and the catalog from `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        Self {
            metrics: RegistryMetrics::new(&registry),
            catalog_json: catalog::encode(&registry),
            registry,
        }
    }
}

/// State shared by every worker.
#[derive(Debug)]
pub struct Shared {
    /// The spec being served.
    pub loaded: Arc<Loaded>,
    /// The store.
    pub store: Arc<dyn FeatureStore>,
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
}

impl Shared {
    /// Shared state for `registry` over `store`, with the default write path.
    /// Starts the write path's task, so it must run inside a tokio runtime.
    pub fn new(registry: Arc<Registry>, store: Arc<dyn FeatureStore>, limits: Limits) -> Arc<Self> {
        Self::with_writer(registry, store, limits, WriterConfig::default())
    }

    /// Shared state with a configured write path.
    pub fn with_writer(
        registry: Arc<Registry>,
        store: Arc<dyn FeatureStore>,
        limits: Limits,
        writer: WriterConfig,
    ) -> Arc<Self> {
        let metrics = Arc::new(Metrics::new(store.backend()));
        let writer = WritePath::spawn(Arc::clone(&store), Arc::clone(&metrics), writer);
        Arc::new(Self {
            loaded: Arc::new(Loaded::new(registry)),
            store,
            metrics,
            writer,
            stats: Stats::default(),
            limits,
            host: host_name(),
        })
    }
}

/// One worker's handle on the shared state.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// `"host/worker"` as a JSON string (native API).
    pub server_id: Arc<str>,
    /// The worker number, 1-based, as a JSON integer (Volga's routes: Volga's
    /// client parses `server_id` as an int).
    pub volga_server_id: Arc<str>,
}

impl AppState {
    /// State for worker `worker` (0-based).
    pub fn new(shared: Arc<Shared>, worker: usize) -> Self {
        let server_id = serde_json::Value::String(format!("{}/{worker}", shared.host)).to_string();
        Self {
            shared,
            server_id: server_id.into(),
            volga_server_id: (worker + 1).to_string().into(),
        }
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
