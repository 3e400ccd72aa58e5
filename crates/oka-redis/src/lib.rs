//! Oka's Redis backend (`redis://`, `rediss://`, `redis-cluster://`), on `fred`.
//!
//! - [`store`]: [`RedisStore`], the key layout, batched reads and writes.
//! - [`failure`]: fred's errors as store errors: kinds, causes in words, the connection's own failure.
//! - [`tracking`]: the read cache kept exact by Redis's client tracking (`--cache tracking`).
//! - [`url`]: the query options each URL scheme takes, and the `layout` option.
//! - [`volga_layout`]: Volga's hot-feature hashes (`layout=volga`, read-only), mapped onto Oka's records.
//! - [`volga_reader`]: a Volga deployment's hashes page by page (`oka migrate volga`).
//! - records are encoded with [`oka_storage::codec`] (versioned MessagePack).
//!
//! The layout is documented in `docs/storage.md`.

pub mod failure;
pub mod store;
pub mod tracking;
pub mod url;
pub mod volga_layout;
pub mod volga_reader;

pub use store::{RedisOptions, RedisStore};
