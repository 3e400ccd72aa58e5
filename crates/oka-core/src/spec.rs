//! The YAML feature spec as written by users (`version: 1`, strict).
//!
//! These types only mirror the file; [`crate::registry::Registry::load`] validates,
//! type-checks and plans them.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::error::{SpecError, SpecErrors};
use crate::value::FieldType;

/// The spec's only supported version.
pub const SPEC_VERSION: u32 = 1;

/// A whole spec file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Must be `1`.
    pub version: u32,
    /// Entity schemas by name.
    #[serde(default)]
    pub entities: IndexMap<String, EntitySpec>,
    /// Features by name.
    #[serde(default)]
    pub features: IndexMap<String, FeatureSpec>,
}

impl Spec {
    /// Parses YAML; structural errors (unknown fields, wrong shapes) name the path
    /// of the offending item, prefixed by `origin` (usually the file path).
    pub fn from_yaml(origin: &str, yaml: &str) -> Result<Self, SpecErrors> {
        // serde_yaml_ng's messages carry the item's path and its line and column.
        serde_yaml_ng::from_str(yaml)
            .map_err(|e| SpecErrors::one(SpecError::new(origin, "", e.to_string())))
    }
}

/// An entity: key fields, one timestamp field and typed value fields.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntitySpec {
    /// Key fields and their types (`string` or `int`), in key order.
    pub keys: IndexMap<String, FieldType>,
    /// The name of the event-time field.
    pub timestamp: String,
    /// Value fields and their types.
    #[serde(default)]
    pub fields: IndexMap<String, FieldType>,
}

/// Whether a feature is precomputed or computed at request time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKindSpec {
    /// Written by a pipeline (ingest, push API, mock source), read from the store.
    Pipeline,
    /// Computed by a UDF at request time.
    OnDemand,
}

/// A feature. Which fields apply depends on `kind`; the rest must be absent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureSpec {
    /// `pipeline` or `on_demand`.
    pub kind: FeatureKindSpec,
    /// The entity whose records this feature holds (pipeline) or returns (on-demand).
    pub entity: String,
    /// Free-form description, shown by `GET /v1/features`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// On-demand: the features this one reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DependencySpec>,
    /// On-demand: typed request arguments with optional defaults.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub args: IndexMap<String, ArgSpec>,
    /// On-demand: how the value is computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udf: Option<UdfSpec>,
    /// Pipeline: how many records of history the store keeps per key (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// Pipeline: seconds after its last write that a key's records expire (none by
    /// default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<f64>,
    /// Pipeline: a data source that writes into this feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceSpec>,
}

/// A dependency: a feature name, or a name with a storage query.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DependencySpec {
    /// `test_feature` — the latest record.
    Name(String),
    /// `{feature: test_feature, query: last_n, n: 5}`.
    Query(DependencyQuerySpec),
}

impl<'de> Deserialize<'de> for DependencySpec {
    /// A string is a name; a mapping is parsed strictly as a query dependency, so a
    /// typo there is reported as such (not as "no variant matched").
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_yaml_ng::Value::deserialize(d)? {
            serde_yaml_ng::Value::String(s) => Ok(Self::Name(s)),
            v @ serde_yaml_ng::Value::Mapping(_) => serde_yaml_ng::from_value(v)
                .map(Self::Query)
                .map_err(D::Error::custom),
            _ => Err(D::Error::custom(
                "a dependency is a feature name or {feature, query, n, lookback_s}",
            )),
        }
    }
}

/// A dependency with an explicit query.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyQuerySpec {
    /// The feature read.
    pub feature: String,
    /// `latest` (default), `range` or `last_n`.
    #[serde(default)]
    pub query: QueryKindSpec,
    /// `last_n`: how many records when the request gives no `n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    /// `range`: the window, in seconds before the request time, used when the request
    /// gives no `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookback_s: Option<f64>,
}

/// The storage queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryKindSpec {
    /// The newest record.
    #[default]
    Latest,
    /// Records with `start <= event time <= end`, oldest first.
    Range,
    /// The newest `n` records, oldest first.
    LastN,
}

/// A UDF argument.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ArgSpec {
    /// The argument's type.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// Used when the request does not pass the argument; without one the argument
    /// is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// The UDF: CEL expressions, or a native function registered in the binary.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UdfSpec {
    /// One CEL expression per output field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<IndexMap<String, String>>,
    /// The name of a native function registered in the binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
}

/// Where a pipeline feature's data comes from.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// A mock periodic source (Volga's `MockOnlineConnector.with_periodic_items`).
    pub mock: MockSourceSpec,
}

/// A mock source that writes its records every `period_s` with fresh event times.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MockSourceSpec {
    /// Seconds between emissions; absent or 0 writes once at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_s: Option<f64>,
    /// Literal records (every column but the timestamp, which is the emit time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<IndexMap<String, serde_json::Value>>>,
    /// Generated records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<GenerateSpec>,
}

/// `count` records, each column a CEL expression of `i` (the record index, an int)
/// and `tick` (how many emissions came before, an int).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateSpec {
    /// How many records each emission writes.
    pub count: usize,
    /// One CEL expression per column (keys and value fields; not the timestamp).
    pub columns: IndexMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_name_their_path() {
        let yaml =
            "version: 1\nfeatures:\n  f:\n    kind: pipeline\n    entity: E\n    colour: red\n";
        let err = Spec::from_yaml("spec.yaml", yaml).unwrap_err().to_string();
        assert!(err.contains("spec.yaml: features.f"), "{err}");
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn dependencies_take_both_forms() {
        let yaml = r#"
version: 1
features:
  f:
    kind: on_demand
    entity: E
    dependencies: [a, {feature: b, query: last_n, n: 3}]
"#;
        let spec = Spec::from_yaml("s", yaml).unwrap();
        let deps = &spec.features["f"].dependencies;
        assert!(matches!(&deps[0], DependencySpec::Name(n) if n == "a"));
        assert!(matches!(&deps[1], DependencySpec::Query(q) if q.query == QueryKindSpec::LastN));
    }
}
