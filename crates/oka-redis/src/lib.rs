//! Oka's Redis backend (`redis://`, `rediss://`, `redis-cluster://`), on `fred`.
//!
//! - [`store`]: [`RedisStore`], the key layout, batched reads and writes, error kinds.
//! - [`url`]: the query options each URL scheme takes.
//! - records are encoded with [`oka_storage::codec`] (versioned MessagePack).
//!
//! The layout is documented in `docs/storage.md`.

pub mod store;
pub mod url;

pub use store::{RedisOptions, RedisStore};
