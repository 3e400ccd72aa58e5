//! Storage for pipeline features.
//!
//! - [`store`]: the [`FeatureStore`] trait every backend implements, and its errors.
//! - [`cache`]: a bounded in-process read cache in front of any store (TTL or
//!   invalidated by the store).
//! - [`coalesce`]: a wrapper that merges concurrent reads of the same feature and
//!   query into one store call.
//! - [`codec`]: the versioned MessagePack record encoding networked backends store.
//! - [`memory`]: the embedded default, a sharded concurrent map with bounded history.
//! - [`conformance`]: the suite every backend must pass (run by each backend's tests).
//! - [`fit`]: whether a spec fits a store (a latest-only store serves no history).
//! - [`probe`]: why a store's address cannot be reached, in words.
//! - [`watch`]: a store's state (available, or out and why), each change logged once.

pub mod cache;
pub mod coalesce;
pub mod codec;
pub mod conformance;
pub mod fit;
pub mod history;
pub mod memory;
pub mod probe;
pub mod store;
pub mod watch;

pub use cache::{Caching, RecordCache};
pub use coalesce::Coalescing;
pub use fit::{DoesNotFit, check_registry};
pub use memory::MemoryStore;
pub use store::{CacheStats, Capabilities, FeatureStore, StoreError, StoreErrorKind};
pub use watch::{Outage, StoreWatch};
