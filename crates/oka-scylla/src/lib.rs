//! Oka's ScyllaDB/Cassandra backend (`scylla://`, `cassandra://`), on the `scylla`
//! driver.
//!
//! - [`schema`]: store URLs, replication, and the CQL schema (`oka schema` prints it).
//! - [`store`]: [`ScyllaStore`]: prepared idempotent statements, bounded concurrent
//!   single-partition reads, per-partition batched writes.
//! - [`failure`]: driver errors as store errors (kinds, causes in words).
//! - [`volga_reader`]: a Volga deployment's `hot_features` table page by page (`oka migrate volga`).
//!
//! Records use [`oka_storage::codec`], the same encoding as the Redis backend. The
//! layout and the consistency/replication guidance are in `docs/storage.md`.

pub mod failure;
pub mod schema;
pub mod store;
pub mod volga_reader;

pub use schema::{Replication, ReplicationError, StoreUrl, UrlError};
pub use store::{Consistency, ScyllaOptions, ScyllaStore, UnknownConsistency, parse_consistency};
