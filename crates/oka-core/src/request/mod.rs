//! The feature request (Volga's field names) and its validation against a registry.
//!
//! [`Registry::prepare`](crate::Registry::prepare) turns a [`FeatureRequest`] into [`Prepared`]: the targets
//! grouped by key list, each group with its plan, its canonical keys, its resolved
//! storage reads (deduplicated) and its UDF arguments. Every problem is a
//! [`RequestError`] that names the offending value.
//!
//! Layout: the request itself here; [`fields`] the small JSON objects it is made
//! of (key objects, argument maps); [`prepared`] what preparation produces;
//! `prepare` the preparation (`impl Registry`); `keys` the key objects parsed
//! once per entity.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::error::{ErrorCode, RequestError};

pub mod fields;
pub mod key_list;
mod keys;
mod prepare;
pub mod prepared;

pub use fields::{ArgMap, ArgMaps, FieldMap};
pub use key_list::{KeyList, KeyObject, KeyValue, NameId, ObjectTemplate};
pub use prepared::{Fetch, FetchId, Group, KeyValues, Prepared, Target};

/// A feature request, as sent to `POST /v1/features` and Volga's `/on_demand_compute`.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(examples(
    json!({"target_features": ["simple_feature"], "keys": [{"id": "test-id-21"}], "udf_args": {"simple_feature": {"multiplier": 2.0}}}),
    json!({"target_features": ["test_feature"], "keys": [{"id": "test-id-7"}], "query_args": {"test_feature": {"n": 3}}}),
)))]
#[serde(deny_unknown_fields)]
pub struct FeatureRequest {
    /// Features to compute and return, pipeline or on-demand. Duplicates are
    /// dropped; results come back in request order.
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub target_features: Vec<String>,
    /// One key list for every target.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = fields::openapi::keys))]
    pub keys: Option<KeyList>,
    /// Key lists per feature (Volga's form): a target uses its own list, or the list
    /// given for a feature it depends on.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = fields::openapi::feature_keys))]
    pub feature_keys: Option<IndexMap<String, KeyList>>,
    /// Query parameters per feature: `start`/`end` for `range`, `n` for `last_n`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = fields::openapi::query_args))]
    pub query_args: Option<ArgMaps>,
    /// UDF arguments per on-demand feature.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = fields::openapi::udf_args))]
    pub udf_args: Option<ArgMaps>,
    /// This request's deadline in milliseconds (overrides the server's default; the
    /// `X-Oka-Deadline-Ms` header overrides this).
    /// A whole number; JSON Schema counts `250.0` as one, and so does Oka.
    #[serde(default, deserialize_with = "whole_number")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 600_000))]
    pub deadline_ms: Option<u64>,
}

impl FeatureRequest {
    /// The top-level fields of a request body.
    pub const FIELDS: &'static [&'static str] = &[
        "target_features",
        "keys",
        "feature_keys",
        "query_args",
        "udf_args",
        "deadline_ms",
    ];
}

/// A feature request whose key list may be held apart from the rest of it: a
/// body parsed through a template its worker kept shares the kept parse and
/// brings only its own keys (no copy of the targets and arguments per request).
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// The request; its `keys` are not read (`keys` stands for them).
    pub request: &'a FeatureRequest,
    /// Its key list.
    pub keys: Option<&'a KeyList>,
}

impl<'a> From<&'a FeatureRequest> for RequestView<'a> {
    fn from(request: &'a FeatureRequest) -> Self {
        Self {
            request,
            keys: request.keys.as_ref(),
        }
    }
}

/// A feature request with its key list held apart and the rest shared: the
/// parse a serving worker kept for bodies that differ only in their keys, or
/// the targets of a Feast request's shape. Cloning it copies the keys only.
#[derive(Debug, Clone)]
pub struct SharedRequest {
    /// The request; its `keys` are `None` (`keys` holds them).
    pub rest: Arc<FeatureRequest>,
    /// Its key list.
    pub keys: Option<KeyList>,
}

impl SharedRequest {
    /// The request as the request path reads it.
    pub fn view(&self) -> RequestView<'_> {
        RequestView {
            request: &self.rest,
            keys: self.keys.as_ref(),
        }
    }
}

impl From<FeatureRequest> for SharedRequest {
    /// `request` with its key list taken out.
    fn from(mut request: FeatureRequest) -> Self {
        let keys = request.keys.take();
        Self {
            rest: Arc::new(request),
            keys,
        }
    }
}

/// A non-negative whole number, written `250` or `250.0` (JSON does not tell them
/// apart, and JSON Schema's `integer` takes both); `null` is none.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(u) = n.as_u64() {
        return Ok(Some(u));
    }
    match n.as_f64() {
        // Exact below 2^53; beyond that no deadline is meant anyway.
        Some(f) if f.fract() == 0.0 && (0.0..9.0e15).contains(&f) => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!(
            "expected a whole number of milliseconds, got {n}"
        ))),
    }
}

/// What a request does with a key object that does not fit the entities its key
/// list is read against (a field of the wrong type, an unknown field, a key field
/// missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyPolicy {
    /// The request fails with `invalid_key` (Oka's API).
    #[default]
    Strict,
    /// That key is answered `null` with status `invalid_key`, and the other keys are
    /// served (Volga's routes: Volga's server looked such a key up, found nothing
    /// and answered `null`).
    NullForBadKeys,
}

/// The default largest number of keys in one request (over all key lists).
pub const MAX_KEYS: usize = 10_000;
/// The default largest number of targets in one request.
pub const MAX_TARGETS: usize = 256;

/// Per-request size limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Keys over all key lists.
    pub max_keys: usize,
    /// Entries in `target_features`.
    pub max_targets: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_keys: MAX_KEYS,
            max_targets: MAX_TARGETS,
        }
    }
}

fn err(code: ErrorCode, message: impl Into<String>) -> RequestError {
    RequestError::new(code, message)
}

/// Shortens user-supplied names echoed in error messages.
fn truncate(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
