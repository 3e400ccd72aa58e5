//! Oka's Redis backend (`redis://`, `rediss://`, `redis-cluster://`), on `fred`.
//!
//! - [`store`]: [`RedisStore`], the key layout, batched reads and writes, error kinds.
//! - records are encoded with [`oka_storage::codec`] (versioned MessagePack).
//!
//! The layout is documented in `docs/storage.md`.

pub mod store;

pub use store::{RedisOptions, RedisStore};
