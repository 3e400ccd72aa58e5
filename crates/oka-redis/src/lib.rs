//! Oka's Redis backend (`redis://`, `rediss://`, `redis-cluster://`), on `fred`.
//!
//! - [`store`]: [`RedisStore`], the key layout, batched reads and writes, error kinds.
//! - [`codec`]: the versioned MessagePack record encoding.
//!
//! The layout is documented in `docs/storage.md`.

pub mod codec;
pub mod store;

pub use store::{RedisOptions, RedisStore};
