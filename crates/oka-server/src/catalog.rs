//! `GET /v1/features`: the registry as JSON, encoded once per load. The body's
//! types are its OpenAPI schema as well.

use indexmap::IndexMap;
use oka_core::Registry;
use oka_core::registry::{FeatureKind, QueryKind, UdfImpl};
use serde::Serialize;
use serde_json::{Value as Json, json};

/// The registry: the answer of `GET /v1/features`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Catalog {
    /// The spec's entities by name (an output entity declared in place, inside a
    /// feature, is that feature's `output` instead).
    pub entities: IndexMap<String, EntityInfo>,
    /// The features, in the spec's order.
    pub features: Vec<FeatureInfo>,
}

/// An entity's keys, timestamp and columns.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct EntityInfo {
    /// The key fields, in key order.
    pub keys: Vec<String>,
    /// The timestamp field.
    pub timestamp: String,
    /// Column name → type (`string`, `int`, `float`, `bool`, `timestamp`, a list
    /// type…), in the order records are answered.
    pub columns: IndexMap<String, String>,
}

/// A feature.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FeatureInfo {
    /// Its name.
    pub name: String,
    /// The entity it holds or returns.
    pub entity: String,
    /// The spec's description, or `null`.
    #[schema(required = true)]
    pub description: Option<String>,
    /// Pipeline or on-demand, and what that kind has.
    #[serde(flatten)]
    pub kind: KindInfo,
}

/// What a feature of each kind has.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // built once per load, then encoded
pub enum KindInfo {
    /// Stored, written by ingest or a source, read with a query.
    Pipeline {
        /// Records of history kept per key.
        history: usize,
        /// Seconds after its last write a key expires, or `null`.
        #[schema(required = true)]
        ttl_s: Option<f64>,
        /// The kind of source that writes it (`mock` or `kafka`), else `null`.
        #[schema(value_type = Option<String>, required = true)]
        source: Option<&'static str>,
    },
    /// Computed at request time.
    OnDemand {
        /// Its inputs, in spec order.
        dependencies: Vec<DependencyInfo>,
        /// Its arguments (`udf_args`) by name.
        args: IndexMap<String, ArgInfo>,
        /// How it is computed.
        udf: UdfInfo,
        /// Its output entity, when the spec declares it in place.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(required = false, value_type = EntityInfo)]
        output: Option<EntityInfo>,
    },
}

/// An input of an on-demand feature.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DependencyInfo {
    /// The feature read or computed.
    pub feature: String,
    /// How a pipeline input is read: `latest`, `range` or `last_n` (`latest` for an
    /// on-demand input).
    pub query: &'static str,
    /// A `range` read's default lookback in seconds, when the spec sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false, value_type = f64)]
    pub lookback_s: Option<f64>,
    /// A `last_n` read's default `n`, when the spec sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false, value_type = usize)]
    pub n: Option<usize>,
}

/// An argument of an on-demand feature.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ArgInfo {
    /// Its type.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its default (a value of its type), or `null` when it has none (then it is
    /// required).
    #[schema(schema_with = arg_default, required = true)]
    pub default: Option<Json>,
}

/// How an on-demand feature is computed, as the spec says it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UdfInfo {
    /// CEL expressions: output field → expression.
    #[schema(value_type = Object)]
    Expr(Json),
    /// A declared aggregation over a window, as in the spec.
    #[schema(value_type = Object)]
    Aggregate(Json),
    /// A native Rust function, by its registered name.
    Native(String),
    /// A Python function: its file (as the spec gives it), function and time limit.
    #[schema(value_type = Object)]
    Python(Json),
}

/// The schema of [`ArgInfo::default`]: any JSON value.
fn arg_default() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
        .description(Some(
            "Its default (a value of its type), or `null` when it has none (then it is required).",
        ))
        .build()
}

/// The catalog body.
pub fn encode(registry: &Registry) -> bytes::Bytes {
    let entities = registry
        .entities()
        .map(|e| (e.name.to_string(), entity_info(e)))
        .collect();
    let features = registry
        .features()
        .iter()
        .map(|f| FeatureInfo {
            name: f.name.to_string(),
            entity: f.entity.name.to_string(),
            description: f.description.clone(),
            kind: kind_info(registry, f),
        })
        .collect();
    let body = serde_json::to_vec(&Catalog { entities, features }).unwrap_or_default();
    bytes::Bytes::from(body)
}

fn kind_info(registry: &Registry, f: &oka_core::Feature) -> KindInfo {
    match &f.kind {
        FeatureKind::Pipeline {
            history,
            ttl,
            source,
        } => KindInfo::Pipeline {
            history: *history,
            ttl_s: ttl.map(|t| t.as_secs_f64()),
            source: source.as_ref().map(oka_core::feature::Source::name),
        },
        FeatureKind::OnDemand {
            dependencies,
            args,
            udf,
            ..
        } => KindInfo::OnDemand {
            dependencies: dependencies
                .iter()
                .map(|d| DependencyInfo {
                    feature: registry.feature(d.feature).name.to_string(),
                    query: d.query.name(),
                    lookback_s: match d.query {
                        QueryKind::Range { lookback_s } => lookback_s,
                        _ => None,
                    },
                    n: match d.query {
                        QueryKind::LastN { n } => n,
                        _ => None,
                    },
                })
                .collect(),
            args: args
                .iter()
                .map(|a| {
                    let info = ArgInfo {
                        ty: a.ty.to_string(),
                        default: a.default.as_ref().map(|v| v.to_json()),
                    };
                    (a.name.to_string(), info)
                })
                .collect(),
            udf: udf_info(registry, &f.name, udf),
            // An output declared in place has no entry under `entities`.
            output: (!registry
                .entities()
                .any(|e| std::sync::Arc::ptr_eq(e, &f.entity)))
            .then(|| entity_info(&f.entity)),
        },
    }
}

/// An entity's keys, timestamp and columns.
fn entity_info(e: &oka_core::Entity) -> EntityInfo {
    EntityInfo {
        keys: e.keys().map(|c| c.name.to_string()).collect(),
        timestamp: e.timestamp_name().to_string(),
        columns: e
            .answer_order()
            .iter()
            .map(|&i| &e.columns[i])
            .map(|c| (c.name.to_string(), c.ty.to_string()))
            .collect(),
    }
}

/// How on-demand feature `name` is computed, as the spec says it.
fn udf_info(registry: &Registry, name: &str, udf: &UdfImpl) -> UdfInfo {
    let spec = registry.spec().features.get(name);
    match udf {
        UdfImpl::Cel(_) => UdfInfo::Expr(json!(
            spec.and_then(|s| s.udf.as_ref())
                .and_then(|u| u.expr.clone())
        )),
        UdfImpl::Aggregate(_) => UdfInfo::Aggregate(json!(spec.and_then(|s| s.aggregate.as_ref()))),
        UdfImpl::Native { name, .. } => UdfInfo::Native(name.to_string()),
        UdfImpl::Batch(_) => UdfInfo::Python(json!(
            spec.and_then(|s| s.udf.as_ref())
                .and_then(|u| u.python.clone())
        )),
    }
}
