//! Feast as Oka reads it, without I/O:
//!
//! - [`config`]: a feature repository's `feature_store.yaml`, and the settings
//!   Oka can honour (a file registry, a Redis online store, entity keys serialized
//!   as version 3);
//! - [`registry`]: Feast's file registry (`registry.db`, its `Registry` protobuf)
//!   as the entities, feature views, on-demand views, feature services and push
//!   sources of one project;
//! - [`layout`]: the bytes of Feast's Redis online store: the serialized entity
//!   key, the hash field of a feature (`mmh3("<view>:<feature>")`), the event
//!   time, and `ValueProto` values to and from Oka's;
//! - [`spec`]: the registry as Oka's spec (a pipeline feature per online view,
//!   an on-demand feature per on-demand view), and an overlay skeleton for its
//!   on-demand views ([`simple`]: which look simple enough to write in CEL);
//! - [`overlay`]: the overlay merged into that spec, and the on-demand views it
//!   maps checked (or reported unmapped);
//! - [`proto`]: Feast's messages, generated from its vendored `.proto` files;
//!   [`wire`]: a message's raw fields, as Feast wrote them.

pub mod config;
pub mod layout;
pub mod overlay;
pub mod proto;
pub mod registry;
pub mod simple;
pub mod spec;
pub mod wire;

pub use config::{FeastConfig, RepoError};
pub use registry::{FeastRegistry, FeastType};

/// The registry a running server reads, swapped whole by a reload.
pub type SharedRegistry = std::sync::Arc<arc_swap::ArcSwap<FeastRegistry>>;

/// A [`SharedRegistry`] holding `registry`.
pub fn shared(registry: FeastRegistry) -> SharedRegistry {
    std::sync::Arc::new(arc_swap::ArcSwap::from_pointee(registry))
}
