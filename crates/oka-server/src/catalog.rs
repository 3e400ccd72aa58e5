//! `GET /v1/features`: the registry as JSON, encoded once per load.

use oka_core::Registry;
use oka_core::registry::{FeatureKind, QueryKind, UdfImpl};
use serde_json::{Value as Json, json};

/// The catalog body.
pub fn encode(registry: &Registry) -> bytes::Bytes {
    let entities: serde_json::Map<String, Json> = registry
        .entities()
        .map(|e| (e.name.to_string(), entity_json(e)))
        .collect();
    let features: Vec<Json> = registry
        .features()
        .iter()
        .map(|f| {
            let mut obj = json!({
                "name": &*f.name,
                "entity": &*f.entity.name,
                "description": f.description,
            });
            match &f.kind {
                FeatureKind::Pipeline { history, ttl, source } => {
                    obj["kind"] = json!("pipeline");
                    obj["history"] = json!(history);
                    obj["ttl_s"] = json!(ttl.map(|t| t.as_secs_f64()));
                    obj["source"] = json!(source.as_ref().map(|_| "mock"));
                }
                FeatureKind::OnDemand {
                    dependencies,
                    args,
                    udf,
                    ..
                } => {
                    obj["kind"] = json!("on_demand");
                    obj["dependencies"] = dependencies
                        .iter()
                        .map(|d| {
                            let mut dep = json!({
                                "feature": &*registry.feature(d.feature).name,
                                "query": d.query.name(),
                            });
                            match d.query {
                                QueryKind::Range { lookback_s: Some(l) } => dep["lookback_s"] = json!(l),
                                QueryKind::LastN { n: Some(n) } => dep["n"] = json!(n),
                                _ => {}
                            }
                            dep
                        })
                        .collect();
                    obj["args"] = args
                        .iter()
                        .map(|a| {
                            (
                                a.name.to_string(),
                                json!({"type": a.ty.to_string(), "default": a.default.as_ref().map(|v| v.to_json())}),
                            )
                        })
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                    obj["udf"] = udf_json(registry, &f.name, udf);
                    // An output declared in place has no entry under `entities`.
                    if !registry.entities().any(|e| std::sync::Arc::ptr_eq(e, &f.entity)) {
                        obj["output"] = entity_json(&f.entity);
                    }
                }
            }
            obj
        })
        .collect();
    let body = json!({"entities": entities, "features": features});
    bytes::Bytes::from(body.to_string())
}

/// An entity's keys, timestamp and columns.
fn entity_json(e: &oka_core::Entity) -> Json {
    let keys: Vec<&str> = e.keys().map(|c| &*c.name).collect();
    let columns: serde_json::Map<String, Json> = e
        .answer_order()
        .iter()
        .map(|&i| &e.columns[i])
        .map(|c| (c.name.to_string(), Json::String(c.ty.to_string())))
        .collect();
    json!({"keys": keys, "timestamp": e.timestamp_name(), "columns": columns})
}

/// How on-demand feature `name` is computed, as the spec says it.
fn udf_json(registry: &Registry, name: &str, udf: &UdfImpl) -> Json {
    let spec = registry.spec().features.get(name);
    match udf {
        UdfImpl::Cel(_) => {
            json!({"expr": spec.and_then(|s| s.udf.as_ref()).and_then(|u| u.expr.clone())})
        }
        UdfImpl::Aggregate(_) => json!({"aggregate": spec.and_then(|s| s.aggregate.as_ref())}),
        UdfImpl::Native { name, .. } => json!({"native": &**name}),
    }
}
