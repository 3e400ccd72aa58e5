//! Oka's feature model, with no I/O. Modules, lowest first (a module imports only
//! the ones above it; `scripts/check-structure` keeps it so):
//!
//! - [`value`]: typed values, timestamps, rows (records of an entity);
//!   [`key`]: canonical entity keys; [`query`]: storage queries (`latest`, `range`,
//!   `last_n`); [`error`]: spec errors and request error codes; [`spec`]: the YAML
//!   feature spec as written.
//! - [`json`]: strict JSON bodies (an unknown field told apart by a typed check).
//! - [`entity`]: entity schemas.
//! - [`kernels`]: aggregation kernels (sum, mean, percentile, …) shared by the CEL
//!   functions and the declarative form.
//! - [`udf`] and [`cel_udf`]: the UDF interface and native registration; CEL UDFs;
//!   [`aggregate`]: declarative window aggregations; [`batch`]: UDFs run
//!   elsewhere a batch of keys at a time (Python, through `oka-python`).
//! - [`feature`]: features and their kinds.
//! - [`plan`]: which pipeline reads and which UDFs a set of targets needs.
//! - [`registry`]: the validated spec — entities, features, plans — built once at load.
//! - `topo` and [`loader`]: the dependency order; spec → registry, every problem
//!   reported with its place.
//! - [`request`]: the feature request, and its preparation into [`Prepared`]: the
//!   reads to perform (by [`request::FetchId`]) and the groups to execute.
//! - [`execute`]: the reads' results by id ([`execute::Fetched`]) → UDFs →
//!   [`execute::Outputs`] (sans-IO; the server does the reads).
//! - [`encode`]: the response body.
//! - [`words`]: failures in words for a person (an I/O error without its OS
//!   number).

pub mod aggregate;
pub mod batch;
pub mod cel_udf;
pub mod encode;
pub mod entity;
pub mod error;
pub mod execute;
pub mod feature;
pub mod json;
pub mod kernels;
pub mod key;
pub mod keyed;
pub mod loader;
pub mod plan;
pub mod query;
pub mod registry;
pub mod request;
pub mod spec;
mod topo;
pub mod udf;
pub mod value;
pub mod words;

pub use error::{ErrorCode, RequestError, SpecError, SpecErrors};
pub use key::EntityKey;
pub use keyed::KeyedRows;
pub use query::Query;
pub use registry::{Entity, Feature, FeatureId, Registry};
pub use request::{FeatureRequest, KeyPolicy, Prepared};
pub use udf::{NativeUdfs, UdfCall, UdfError};
pub use value::{FieldType, Row, Timestamp, Value};
