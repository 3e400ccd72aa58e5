//! Oka's feature model, with no I/O.
//!
//! - [`value`]: typed values, timestamps, rows (records of an entity).
//! - [`key`]: canonical entity keys.
//! - [`spec`]: the YAML feature spec as written.
//! - [`entity`]: entity schemas; [`feature`]: features and their kinds.
//! - [`loader`]: spec → registry, every problem reported with its place.
//! - [`registry`]: the validated spec — entities, features, UDFs — built once at load.
//! - [`plan`]: which pipeline reads and which UDFs a set of targets needs.
//! - [`request`]: the feature request and its validation into executable groups.
//! - [`query`]: storage queries (`latest`, `range`, `last_n`).
//! - [`execute`]: runs UDFs over fetched records (sans-IO; the server does the reads).
//! - [`encode`]: the response body.
//! - [`udf`] and [`cel_udf`]: the UDF interface, native registration, CEL UDFs.
//! - [`error`]: spec errors and request error codes.

pub mod cel_udf;
pub mod encode;
pub mod entity;
pub mod error;
pub mod execute;
pub mod feature;
pub mod key;
pub mod loader;
pub mod plan;
pub mod query;
pub mod registry;
pub mod request;
pub mod spec;
pub mod udf;
pub mod value;

pub use error::{ErrorCode, RequestError, SpecError, SpecErrors};
pub use key::EntityKey;
pub use query::Query;
pub use registry::{Entity, Feature, FeatureId, Registry};
pub use request::{FeatureRequest, Prepared};
pub use udf::{NativeUdfs, UdfCall, UdfError};
pub use value::{FieldType, Row, Timestamp, Value};
