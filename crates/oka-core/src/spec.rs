//! The YAML feature spec as written by users (`version: 1`, strict).
//!
//! These types only mirror the file; [`crate::registry::Registry::load`] validates,
//! type-checks and plans them.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::error::{SpecError, SpecErrors};
use crate::value::FieldType;
use de::{Either, NameOr, unique, unique_opt};
pub use kafka::{
    EventTimeSpec, KafkaBatchSpec, KafkaFormat, KafkaSourceSpec, OptionValue, StartSpec,
};

mod de;
pub mod kafka;

/// The spec's only supported version.
pub const SPEC_VERSION: u32 = 1;

/// A whole spec file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a spec with `version: 1`, `entities:` and `features:`"
)]
pub struct Spec {
    /// Must be `1`.
    pub version: u32,
    /// Entity schemas by name.
    #[serde(default, deserialize_with = "unique")]
    pub entities: IndexMap<String, EntitySpec>,
    /// Features by name.
    #[serde(default, deserialize_with = "unique")]
    pub features: IndexMap<String, FeatureSpec>,
}

impl Spec {
    /// Parses YAML; structural errors (unknown fields, wrong shapes) name the path
    /// of the offending item, prefixed by `origin` (usually the file path).
    pub fn from_yaml(origin: &str, yaml: &str) -> Result<Self, SpecErrors> {
        // serde_yaml_ng's messages carry the item's path and its line and column.
        serde_yaml_ng::from_str(yaml).map_err(|e| {
            let message = e.to_string();
            // The same error from any YAML document: the text is not YAML at all.
            let not_yaml = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(yaml)
                .is_err_and(|v| v.to_string() == message);
            let message = if not_yaml {
                let tab = e
                    .location()
                    .is_some_and(|l| yaml.get(l.index()..).is_some_and(|r| r.starts_with('\t')));
                let hint = if tab {
                    " (a tab: YAML indents with spaces)"
                } else {
                    ""
                };
                format!("not valid YAML: {message}{hint}")
            } else {
                in_spec_words(&message)
            };
            SpecErrors::one(SpecError::new(origin, "", message))
        })
    }

    /// The spec as YAML, what [`Self::from_yaml`] reads back (`oka feast spec`
    /// and `oka volga spec` print a spec built in memory this way).
    pub fn to_yaml(&self, origin: &str) -> Result<String, SpecErrors> {
        serde_yaml_ng::to_string(self).map_err(|e| {
            SpecErrors::one(SpecError::new(
                origin,
                "",
                format!("the spec cannot be written as YAML: {e}"),
            ))
        })
    }
}

/// A YAML parser message with Rust's names for what was expected replaced by the
/// spec's (`a number`, not `f64`), and the closest name suggested for an unknown
/// field or variant.
fn in_spec_words(message: &str) -> String {
    const WORDS: [(&str, &str); 13] = [
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected i64", "expected a whole number"),
        ("expected a sequence", "expected a list such as `[a, b]`"),
        (
            "expected a map",
            "expected a mapping such as `{name: value}`",
        ),
        ("expected a boolean", "expected `true` or `false`"),
        ("invalid type: sequence", "invalid type: a list"),
        ("invalid type: map", "invalid type: a mapping"),
        ("invalid type: unit value", "invalid type: an empty value"),
        (
            "missing field `version`",
            "missing field `version`: a spec starts with `version: 1`",
        ),
    ];
    let mut out = message.to_owned();
    for (rust, spec) in WORDS {
        out = replace_whole(&out, rust, spec);
    }
    with_suggestion(&out)
}

/// `text` with each `from` that is not the start of a longer word (`expected a
/// map`, not `expected a mapping`) replaced by `to`.
fn replace_whole(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let after = &rest[i + from.len()..];
        out.push_str(&rest[..i]);
        if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `unknown field `histroy`, expected one of `kind`, …` with ` (did you mean
/// `history`?)` after the unknown name when one of the names listed is close.
fn with_suggestion(message: &str) -> String {
    let Some(start) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| message.find(p).map(|i| i + p.len()))
    else {
        return message.to_owned();
    };
    let Some(len) = message[start..].find('`') else {
        return message.to_owned();
    };
    let (name, rest) = (&message[start..start + len], &message[start + len + 1..]);
    let listed = rest.split('`').skip(1).step_by(2);
    let suggestion = crate::error::did_you_mean(name, listed);
    format!("{}`{suggestion}{rest}", &message[..start + len])
}

/// An entity: key fields, one timestamp field and typed value fields.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an entity such as `{keys: {id: string}, timestamp: ts, fields: {value: float}}`"
)]
pub struct EntitySpec {
    /// Key fields and their types (`string` or `int`), in key order.
    #[serde(deserialize_with = "unique")]
    pub keys: IndexMap<String, FieldType>,
    /// The name of the event-time field.
    pub timestamp: String,
    /// Value fields and their types.
    #[serde(default, deserialize_with = "unique")]
    pub fields: IndexMap<String, FieldType>,
    /// The order of a record's fields as answered: every key field, the timestamp
    /// and every value field, each once (a Volga entity's declaration order, say).
    /// Default: the keys, the timestamp, then the value fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<String>>,
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
#[serde(
    deny_unknown_fields,
    expecting = "a feature: a mapping with `kind` (`pipeline` or `on_demand`) and `entity`, `output` or `aggregate`"
)]
pub struct FeatureSpec {
    /// `pipeline` or `on_demand`.
    pub kind: FeatureKindSpec,
    /// The entity whose records this feature holds (pipeline) or returns
    /// (on-demand; or give `output` or `aggregate` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// On-demand: the output's value fields, declared in place; its keys and
    /// timestamp are those of the first dependency's entity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSpec>,
    /// On-demand: a window aggregation computed natively (no `udf`, no
    /// `dependencies`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<AggregateSpec>,
    /// Free-form description, shown by `GET /v1/features`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// On-demand: the features this one reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DependencySpec>,
    /// On-demand: typed request arguments with optional defaults.
    #[serde(
        default,
        deserialize_with = "unique",
        skip_serializing_if = "IndexMap::is_empty"
    )]
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

/// An on-demand feature's output fields, declared in place.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an output such as `{fields: {score: float}}`"
)]
pub struct OutputSpec {
    /// Value fields and their types.
    #[serde(deserialize_with = "unique")]
    pub fields: IndexMap<String, FieldType>,
}

/// A declarative window aggregation.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an aggregation such as `{over: {feature: txn, query: range, lookback_s: 3600}, outputs: {n: count}}`"
)]
pub struct AggregateSpec {
    /// The window: a pipeline feature read with `range` or `last_n`.
    pub over: DependencySpec,
    /// Output field → what it aggregates.
    #[serde(deserialize_with = "unique")]
    pub outputs: IndexMap<String, AggOutputSpec>,
}

/// One output of an aggregation: `count` (the records in the window), or a
/// mapping of one aggregation to a field (`{mean: amount}`, with `p` for
/// `percentile` and `half_life_s` for `ewma`).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum AggOutputSpec {
    /// `count`.
    Name(String),
    /// `{sum: amount}`.
    Of(Box<AggOfSpec>),
}

impl<'de> Deserialize<'de> for AggOutputSpec {
    /// A string is a name; a mapping is parsed strictly as `{STAT: field}`, in
    /// place, so that a problem inside it names its path and line.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NameOr::<AggOfSpec>::new(
            "`count` or a mapping such as `{mean: amount}`",
        ))
        .map(|n| match n {
            Either::Name(s) => Self::Name(s),
            Either::Map(of) => Self::Of(Box::new(of)),
        })
    }
}

/// `{STAT: field}` with the stat's parameters; exactly one stat is given (the
/// loader checks).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an aggregation such as `{mean: amount}` or `{percentile: amount, p: 0.9}`"
)]
#[allow(missing_docs)]
pub struct AggOfSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ewma: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
    /// `percentile`: the quantile, in `[0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// `ewma`: the half-life in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_life_s: Option<f64>,
}

impl AggOfSpec {
    /// The stats given, by name, with their fields.
    pub fn given(&self) -> Vec<(&'static str, &str)> {
        [
            ("count", &self.count),
            ("sum", &self.sum),
            ("mean", &self.mean),
            ("min", &self.min),
            ("max", &self.max),
            ("stddev", &self.stddev),
            ("percentile", &self.percentile),
            ("ewma", &self.ewma),
            ("first", &self.first),
            ("last", &self.last),
        ]
        .into_iter()
        .filter_map(|(name, field)| field.as_deref().map(|f| (name, f)))
        .collect()
    }
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
        d.deserialize_any(NameOr::<DependencyQuerySpec>::new(
            "a feature name or a mapping such as `{feature: txn, query: range, lookback_s: 3600}`",
        ))
        .map(|n| match n {
            Either::Name(s) => Self::Name(s),
            Either::Map(q) => Self::Query(q),
        })
    }
}

/// A dependency with an explicit query.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a dependency such as `{feature: txn, query: range, lookback_s: 3600}`"
)]
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
#[serde(
    deny_unknown_fields,
    expecting = "an argument definition such as `{type: float, default: 1.0}`"
)]
pub struct ArgSpec {
    /// The argument's type.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// Used when the request does not pass the argument; without one the argument
    /// is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

/// The UDF: CEL expressions, a native function registered in the binary, or a
/// Python function.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a udf such as `{expr: {score: \"txn.amount * 2.0\"}}`"
)]
pub struct UdfSpec {
    /// One CEL expression per output field.
    #[serde(
        default,
        deserialize_with = "unique_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expr: Option<IndexMap<String, String>>,
    /// The name of a native function registered in the binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<String>,
    /// A Python function, run in Oka's pool of Python worker processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonUdfSpec>,
}

/// A Python function as a UDF: `{file: fraud.py, function: score}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a Python udf such as `{file: features.py, function: score}`"
)]
pub struct PythonUdfSpec {
    /// The module's file, relative to the spec file.
    pub file: String,
    /// The function's name in it.
    pub function: String,
    /// How long one key's call may run before its worker is killed, in
    /// milliseconds (default 1000); never longer than the request's deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How the function is called: `plain` (default: dicts in, a dict out,
    /// datetimes in UTC) or `volga` (as Volga's on-demand layer called it:
    /// `@entity` instances in and out, naive UTC datetimes) or `feast` (a Feast
    /// on-demand view: `file` is the repository's `feature_store.yaml`,
    /// `function` the view's name, run by Feast's SDK a request at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<PythonStyle>,
}

/// How a Python UDF is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PythonStyle {
    /// Each input a dict of its record's columns (a list of them for windows),
    /// the result a dict (or a list of dicts); datetimes in UTC.
    #[default]
    Plain,
    /// As Volga called `@on_demand` functions: each input an instance of its
    /// `@entity` class (or a list of them), the result an instance; datetimes
    /// naive, in UTC.
    Volga,
    /// As `feast serve` runs an on-demand view: rebuilt from the registry by
    /// Feast's SDK, called once per request with its keys' inputs as columns
    /// (python mode: a dict of lists; pandas mode: a DataFrame); `timeout_ms`
    /// bounds the call.
    Feast,
}

impl PythonStyle {
    /// The name as the spec writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Volga => "volga",
            Self::Feast => "feast",
        }
    }
}

/// Where a pipeline feature's data comes from: exactly one of the fields (the
/// loader checks).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a source such as `{mock: {period_s: 1, items: [...]}}` or `{kafka: {brokers: \"kafka:9092\", topic: clicks}}`"
)]
pub struct SourceSpec {
    /// A mock periodic source (Volga's `MockOnlineConnector.with_periodic_items`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<MockSourceSpec>,
    /// A Kafka topic, consumed by `oka source kafka`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaSourceSpec>,
}

/// A mock source that writes its records every `period_s` with fresh event times.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mock source such as `{period_s: 1, items: [{id: a, value: 1.0}]}`"
)]
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
#[serde(
    deny_unknown_fields,
    expecting = "a generator such as `{count: 10, columns: {id: \"string(i)\"}}`"
)]
pub struct GenerateSpec {
    /// How many records each emission writes.
    pub count: usize,
    /// One CEL expression per column (keys and value fields; not the timestamp).
    #[serde(deserialize_with = "unique")]
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
