//! Feast's `POST /get-online-features` (on the serving port under `oka serve
//! --feast-repo`): Feast's request becomes Oka's (one target per feature view,
//! the view's join keys from the entity columns), runs through the same reads
//! and executor as every request, and is answered in Feast's shape:
//! `{"results": [{"values", "statuses", "event_timestamps"}…], "metadata":
//! {"feature_names": […]}}`, the entity columns first, then the features in
//! request order, each value as Feast's JSON writes it (int64 as a number, bytes
//! in base64, unix timestamps in seconds). What differs from `feast serve` is in
//! `docs/migrating-from-feast.md`.

use std::fmt::Write as _;

use oka_core::encode::answers;
use oka_core::execute::{Outcome, Outputs};
use oka_core::value::write_json_str;
use oka_core::{ErrorCode, FeatureRequest, Prepared, Registry, Timestamp, Value};
use oka_feast::registry::{Column, FeastRegistry, FeastType};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::ApiError;

mod write;
pub use write::{push, write_to_online_store};

/// Feast's request body (fields Feast's server does not know are ignored, as
/// its pydantic model ignores them).
#[derive(Debug, Deserialize)]
pub(crate) struct Request {
    pub(crate) entities: indexmap::IndexMap<String, Vec<Json>>,
    #[serde(default)]
    pub(crate) feature_service: Option<String>,
    #[serde(default)]
    pub(crate) features: Vec<String>,
    #[serde(default)]
    pub(crate) full_feature_names: bool,
    #[serde(default)]
    pub(crate) include_feature_view_version_metadata: bool,
}

/// One output column of the answer.
#[derive(Debug)]
pub(crate) enum Out {
    /// An entity column, its values as given (typed by the join key), and the
    /// key's Feast type.
    Entity(Vec<Value>, FeastType),
    /// A feature of a view: the target's index, the feature's name and type.
    Feature {
        target: usize,
        feature: String,
        ty: FeastType,
    },
}

/// What the answer is made of, decided when the request is parsed.
#[derive(Debug)]
pub struct Plan {
    pub(crate) names: Vec<String>,
    pub(crate) columns: Vec<Out>,
}

fn bad(code: ErrorCode, message: String) -> ApiError {
    ApiError::new(code, message)
}

/// Feast's request as Oka's, and the plan of its answer.
pub fn parse(
    feast: &FeastRegistry,
    registry: &Registry,
    body: &[u8],
) -> Result<(FeatureRequest, Plan), ApiError> {
    let request: Request = serde_json::from_slice(body).map_err(|e| {
        let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let why = if object || e.is_syntax() || e.is_eof() {
            e.to_string()
        } else {
            "the body is not a JSON object (Feast's request: `entities` and `features` or `feature_service`)".to_owned()
        };
        bad(ErrorCode::MalformedRequest, format!("invalid request body: {why}"))
    })?;
    plan(feast, registry, &request)
}

/// Feast's request (from JSON or gRPC) as Oka's, and the plan of its answer.
pub(crate) fn plan(
    feast: &FeastRegistry,
    registry: &Registry,
    request: &Request,
) -> Result<(FeatureRequest, Plan), ApiError> {
    if request.include_feature_view_version_metadata {
        return Err(bad(
            ErrorCode::InvalidRequest,
            "`include_feature_view_version_metadata` is not supported (Oka serves no feature view versions)".to_owned(),
        ));
    }
    let rows = request.entities.values().map(Vec::len).next().unwrap_or(0);
    if request.entities.values().any(|v| v.len() != rows) {
        return Err(bad(
            ErrorCode::InvalidRequest,
            "every column of `entities` must have as many values (one per entity row)".to_owned(),
        ));
    }
    let refs = feature_refs(feast, request)?;
    let Columns {
        views,
        names,
        columns,
        mut typed,
    } = columns(feast, registry, request, &refs, rows)?;
    // The entity columns first, in the order the request gave them.
    let mut plan = Plan {
        names: Vec::new(),
        columns: Vec::new(),
    };
    for name in request.entities.keys() {
        if let Some((values, ty)) = typed.shift_remove(name.as_str()) {
            plan.names.push(name.clone());
            plan.columns.push(Out::Entity(values, ty));
        }
    }
    plan.names.extend(names);
    plan.columns.extend(columns);
    let oka = oka_request(feast, &views, request, rows)?;
    Ok((oka, plan))
}

/// What the features of a request read and answer.
struct Columns<'r> {
    /// The views read, in first-use order: the targets of Oka's request.
    views: Vec<&'r str>,
    /// The features' names in the answer.
    names: Vec<String>,
    /// The features' columns.
    columns: Vec<Out>,
    /// The join keys' columns, typed, with the keys' types.
    typed: indexmap::IndexMap<&'r str, (Vec<Value>, FeastType)>,
}

fn columns<'r>(
    feast: &'r FeastRegistry,
    registry: &Registry,
    request: &Request,
    refs: &'r [(String, String, String)],
    rows: usize,
) -> Result<Columns<'r>, ApiError> {
    let mut out = Columns {
        views: Vec::new(),
        names: Vec::new(),
        columns: Vec::new(),
        typed: indexmap::IndexMap::new(),
    };
    for (view_name, feature, shown) in refs {
        let view = &feast.views[view_name.as_str()];
        let Some(column) = view.features.iter().find(|f| f.name == *feature) else {
            return Err(bad(
                ErrorCode::UnknownFeature,
                format!("feature view `{view_name}` has no feature `{feature}`"),
            ));
        };
        if registry.feature_id(view_name).is_none() {
            return Err(bad(
                ErrorCode::UnknownFeature,
                format!("feature view `{view_name}` is not served (it is not online)"),
            ));
        }
        for key in &view.join_keys {
            if !out.typed.contains_key(key.name.as_str()) {
                out.typed
                    .insert(&key.name, (entity_column(request, key, rows)?, key.ty));
            }
        }
        let target = match out.views.iter().position(|v| v == view_name) {
            Some(i) => i,
            None => {
                out.views.push(view_name);
                out.views.len() - 1
            }
        };
        out.names.push(shown.clone());
        out.columns.push(Out::Feature {
            target,
            feature: feature.clone(),
            ty: column.ty,
        });
    }
    Ok(out)
}

/// The requested features as (view, feature, name in the answer).
fn feature_refs(
    feast: &FeastRegistry,
    request: &Request,
) -> Result<Vec<(String, String, String)>, ApiError> {
    let full = request.full_feature_names;
    let mut refs = Vec::new();
    if let Some(service) = &request.feature_service {
        let s = feast.services.get(service).ok_or_else(|| {
            bad(
                ErrorCode::UnknownFeature,
                format!(
                    "feature service `{service}` does not exist in project `{}`",
                    feast.project
                ),
            )
        })?;
        for p in &s.projections {
            let shown_view = p.alias.as_deref().unwrap_or(&p.view);
            let view = known_view(feast, &p.view)?;
            let features: Vec<String> = if p.features.is_empty() {
                view.features.iter().map(|f| f.name.clone()).collect()
            } else {
                p.features.clone()
            };
            for f in features {
                let shown = if full {
                    format!("{shown_view}__{f}")
                } else {
                    f.clone()
                };
                refs.push((p.view.clone(), f, shown));
            }
        }
    } else {
        for r in &request.features {
            let Some((view, feature)) = r.split_once(':') else {
                return Err(bad(
                    ErrorCode::InvalidRequest,
                    format!("feature reference `{r}` is not `<feature view>:<feature>`"),
                ));
            };
            known_view(feast, view)?;
            let shown = if full {
                format!("{view}__{feature}")
            } else {
                feature.to_owned()
            };
            refs.push((view.to_owned(), feature.to_owned(), shown));
        }
    }
    if refs.is_empty() {
        return Err(bad(
            ErrorCode::InvalidRequest,
            "no features requested: give `features` or `feature_service`".to_owned(),
        ));
    }
    Ok(refs)
}

fn known_view<'r>(
    feast: &'r FeastRegistry,
    view: &str,
) -> Result<&'r oka_feast::registry::FeatureView, ApiError> {
    if let Some(v) = feast.views.get(view) {
        return Ok(v);
    }
    let message = if feast.on_demand.contains_key(view) {
        format!(
            "on-demand feature view `{view}` is not served yet: Feast's on-demand views are Python, and the overlay that gives them CEL is still to come"
        )
    } else {
        format!(
            "feature view `{view}` does not exist in project `{}`",
            feast.project
        )
    };
    Err(bad(ErrorCode::UnknownFeature, message))
}

/// A join key's column of `entities`, each value typed as the key is (an int64
/// key takes `1001`, `1001.0` and `"1001"`, as Feast's server does).
fn entity_column(request: &Request, key: &Column, rows: usize) -> Result<Vec<Value>, ApiError> {
    let given = request.entities.get(&key.name).ok_or_else(|| {
        bad(
            ErrorCode::MissingKeys,
            format!("`entities` has no column for join key `{}`", key.name),
        )
    })?;
    let mut out = Vec::with_capacity(rows);
    for (i, v) in given.iter().enumerate() {
        let value = match key.ty {
            FeastType::Int64 | FeastType::Int32 => int_key(v),
            FeastType::String => v.as_str().map(|s| Value::String(s.into())),
            _ => None,
        };
        out.push(value.ok_or_else(|| {
            bad(
                ErrorCode::InvalidKey,
                format!(
                    "`entities.{}[{i}]`: {v} is not a {:?} join key value",
                    key.name, key.ty
                ),
            )
        })?);
    }
    Ok(out)
}

fn int_key(v: &Json) -> Option<Value> {
    match v {
        Json::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                    .map(|f| f as i64)
            })
            .map(Value::Int),
        Json::String(s) => s.trim().parse().ok().map(Value::Int),
        _ => None,
    }
}

/// Oka's request: one target per view, its key list from the entity rows.
fn oka_request(
    feast: &FeastRegistry,
    views: &[&str],
    request: &Request,
    rows: usize,
) -> Result<FeatureRequest, ApiError> {
    let mut keys = serde_json::Map::new();
    for view in views {
        let join_keys = &feast.views[*view].join_keys;
        let list: Vec<Json> = (0..rows)
            .map(|i| {
                let mut key = serde_json::Map::new();
                for k in join_keys {
                    let v = request.entities.get(&k.name).and_then(|c| c.get(i));
                    let v = v.and_then(|v| match k.ty {
                        FeastType::Int64 | FeastType::Int32 => int_key(v).map(|v| v.to_json()),
                        _ => Some(v.clone()),
                    });
                    key.insert(k.name.clone(), v.unwrap_or(Json::Null));
                }
                Json::Object(key)
            })
            .collect();
        keys.insert((*view).to_owned(), Json::Array(list));
    }
    let body = serde_json::json!({"target_features": views, "feature_keys": keys});
    serde_json::from_value(body)
        .map_err(|e| bad(ErrorCode::InvalidRequest, format!("invalid request: {e}")))
}

/// Writes the answer in Feast's shape.
pub fn write_response(
    registry: &Registry,
    prepared: &Prepared,
    outputs: &Outputs,
    plan: &Plan,
    out: &mut Vec<u8>,
) {
    let rows: Vec<Vec<Option<&Outcome>>> = prepared
        .targets
        .iter()
        .map(|t| answers(prepared, outputs, t).collect())
        .collect();
    out.extend_from_slice(b"{\"results\":[");
    for (c, column) in plan.columns.iter().enumerate() {
        if c > 0 {
            out.push(b',');
        }
        match column {
            Out::Entity(values, _) => write_entity(values, out),
            Out::Feature {
                target, feature, ..
            } => {
                let t = &prepared.targets[*target];
                let entity = &registry.feature(t.feature).entity;
                let at = entity.column_index(feature);
                write_feature(&rows[*target], at, out);
            }
        }
    }
    out.extend_from_slice(b"],\"metadata\":{\"feature_names\":[");
    for (i, name) in plan.names.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, name);
    }
    out.extend_from_slice(b"]}}");
}

const EPOCH: &str = "1970-01-01T00:00:00Z";

fn write_entity(values: &[Value], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"values\":[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(v, out);
    }
    write_statuses(values.len(), out);
    out.extend_from_slice(b",\"event_timestamps\":[");
    for i in 0..values.len() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, EPOCH);
    }
    out.extend_from_slice(b"]}");
}

/// Feast (0.67, Redis) answers `PRESENT` for every value it looked up, found or
/// not; a key without the view's record has null values and the epoch as time.
fn write_statuses(n: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(b"],\"statuses\":[");
    for i in 0..n {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"PRESENT\"");
    }
    out.push(b']');
}

fn write_feature(outcomes: &[Option<&Outcome>], at: Option<usize>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"values\":[");
    let record = |o: &Option<&Outcome>| match o {
        Some(Outcome::Present(rows)) => rows.first().cloned(),
        _ => None,
    };
    for (i, o) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match (record(o), at) {
            (Some(row), Some(at)) => write_value(row.columns.get(at).unwrap_or(&Value::Null), out),
            _ => out.extend_from_slice(b"null"),
        }
    }
    write_statuses(outcomes.len(), out);
    out.extend_from_slice(b",\"event_timestamps\":[");
    for (i, o) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match record(o) {
            Some(row) => write_json_str(out, &feast_time(row.event_time)),
            None => write_json_str(out, EPOCH),
        }
    }
    out.extend_from_slice(b"]}");
}

/// A value as Feast's JSON writes it: unix timestamps as whole seconds,
/// non-finite floats as protobuf JSON's strings, the rest as JSON.
fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Timestamp(t) => {
            let _ = write!(Bytes(out), "{}", t.0.div_euclid(1_000_000));
        }
        Value::Float(f) if !f.is_finite() => {
            let s = if f.is_nan() {
                "NaN"
            } else if *f > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            };
            write_json_str(out, s);
        }
        Value::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, &other.to_json());
        }
    }
}

/// An event time as Feast writes it: RFC 3339 in UTC with `Z`, fractions only as
/// long as needed (none, milliseconds or microseconds).
fn feast_time(t: Timestamp) -> String {
    let Some(dt) = t.to_datetime() else {
        return EPOCH.to_owned();
    };
    let micros = t.0.rem_euclid(1_000_000);
    let base = dt.format("%Y-%m-%dT%H:%M:%S");
    if micros == 0 {
        format!("{base}Z")
    } else if micros % 1000 == 0 {
        format!("{base}.{:03}Z", micros / 1000)
    } else {
        format!("{base}.{micros:06}Z")
    }
}

/// `fmt::Write` into a byte buffer.
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_times_are_feasts() {
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_000_000)),
            "2025-12-04T17:40:00Z"
        );
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_250_000)),
            "2025-12-04T17:40:00.250Z"
        );
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_000_001)),
            "2025-12-04T17:40:00.000001Z"
        );
    }

    #[test]
    fn values_are_feasts_json() {
        let mut out = Vec::new();
        write_value(
            &Value::Timestamp(Timestamp(1_600_000_000_000_000)),
            &mut out,
        );
        out.push(b' ');
        write_value(&Value::Float(f64::NAN), &mut out);
        out.push(b' ');
        write_value(&Value::Int(-(1 << 62)), &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "1600000000 \"NaN\" -4611686018427387904"
        );
    }

    #[test]
    fn int_keys_are_taken_as_feast_takes_them() {
        assert_eq!(int_key(&serde_json::json!(1001)), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!(1001.0)), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!("1001")), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!(1.5)), None);
        assert_eq!(int_key(&serde_json::json!("x")), None);
    }
}
