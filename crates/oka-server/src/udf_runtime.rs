//! UDF runtimes outside the server's process (the pool of Python workers), as
//! the server sees them: whether they can serve (`/readyz`), their metric
//! families (`/metrics`) and a summary (the console). The CLI hands the server
//! the concrete pool (crate `oka-python`) behind this trait; the server never
//! names it, and runs no Python itself.

use std::fmt;
use std::sync::Arc;

use oka_core::Registry;
use oka_core::batch::WriteTransform;
use prometheus_client::collector::Collector;

use crate::auth::ApiKeys;

/// A runtime of a loaded spec's UDFs.
pub trait UdfRuntime: Send + Sync + fmt::Debug {
    /// Why it cannot run its UDFs now (no worker alive, and why), if it cannot.
    fn unready(&self) -> Option<String>;
    /// Its metric families, read at scrape time.
    fn collector(&self) -> Option<Box<dyn Collector>>;
    /// Its state for the console: workers, health, the UDFs it runs.
    fn summary(&self) -> serde_json::Value;
}

/// What loading the spec gives the server: the registry, the API keys, and the
/// runtimes its UDFs run in.
#[derive(Debug)]
pub struct SpecLoad {
    /// The registry.
    pub registry: Arc<Registry>,
    /// The API keys.
    pub keys: ApiKeys,
    /// The runtimes of its UDFs (none for CEL and native UDFs only).
    pub runtimes: Vec<Arc<dyn UdfRuntime>>,
    /// The transformations of what is written to a feature, by feature.
    pub transforms: WriteTransforms,
}

/// The transformations of what is written to a feature, by feature: Feast's
/// on-demand views with `write_to_online_store=True`, run in the Python pool.
pub type WriteTransforms = std::collections::HashMap<String, Arc<dyn WriteTransform>>;

impl SpecLoad {
    /// A load whose UDFs all run in the process (CEL, native, aggregations).
    pub fn new(registry: Arc<Registry>, keys: ApiKeys) -> Self {
        Self {
            registry,
            keys,
            runtimes: Vec::new(),
            transforms: WriteTransforms::new(),
        }
    }
}
