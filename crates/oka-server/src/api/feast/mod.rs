//! Feast's API (under `oka serve --feast-repo`): its HTTP routes on the serving
//! port ([`routes`]) and its gRPC services ([`grpc`]), Feast's writes
//! ([`write`]), and `get-online-features`, where Feast's request becomes Oka's (one target per feature view,
//! the view's join keys from the entity columns), runs through the same reads
//! and executor as every request, and is answered in Feast's shape:
//! `{"results": [{"values", "statuses", "event_timestamps"}…], "metadata":
//! {"feature_names": […]}}`, the entity columns first, then the features in
//! request order, each value as Feast's JSON writes it (int64 as a number, bytes
//! in base64, unix timestamps in seconds). What differs from `feast serve` is in
//! `docs/migrating-from-feast.md`.

use oka_core::encode::answers;
use oka_core::entity::position_near;
use oka_core::execute::{Outcome, Outputs};
use oka_core::request::{ArgMap, KeyList, KeyValue};
use oka_core::{ErrorCode, FeatureRequest, Prepared, Registry, Value};
use oka_feast::registry::{Column, FeastRegistry, FeastType, OnDemandView};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::ApiError;

mod answer;
mod compute;
pub(crate) mod grpc;
mod routes;
mod write;
pub use answer::write_response;
pub(crate) use routes::{post_online, routes};
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
    /// A feature of a view: the target's index, the feature's column in the
    /// target's records and its type, and whether the view is on-demand (its
    /// values carry no event time).
    Feature {
        target: usize,
        column: Option<usize>,
        ty: FeastType,
        on_demand: bool,
    },
}

/// What the answer is made of, decided when the request is parsed.
#[derive(Debug)]
pub struct Plan {
    pub(crate) names: Vec<String>,
    pub(crate) columns: Vec<Out>,
    /// The request's rows.
    pub(crate) rows: usize,
    /// The rows of each Oka request, in order: one group of every row, unless
    /// the rows give on-demand views different request data (Oka's arguments
    /// are per request, Feast's request data per row): then one group per
    /// distinct set of values.
    pub(crate) groups: Vec<Vec<usize>>,
}

/// What each group's Oka request computed, in the order of [`Plan::groups`].
pub type Computed = [(Prepared, Outputs)];

impl Plan {
    /// Each target's (view's) outcome for each row of the request, gathered
    /// from the groups' answers once for all of the view's features.
    pub(crate) fn outcomes<'o>(&self, computed: &'o Computed) -> Vec<Vec<Option<&'o Outcome>>> {
        let targets = self.columns.iter().filter_map(|c| match c {
            Out::Feature { target, .. } => Some(*target + 1),
            Out::Entity(..) => None,
        });
        let mut out = vec![vec![None; self.rows]; targets.max().unwrap_or(0)];
        for (rows, (prepared, outputs)) in self.groups.iter().zip(computed) {
            for (t, by_row) in prepared.targets.iter().zip(&mut out) {
                for (row, o) in rows.iter().zip(answers(prepared, outputs, t)) {
                    by_row[*row] = o;
                }
            }
        }
        out
    }
}

impl Plan {
    /// Each target's outcome for each row ([`Self::outcomes`]), or an error
    /// naming the first feature whose UDF failed for a row: Feast's answer has no
    /// per-value error, and a failure is not a null.
    pub(crate) fn checked_outcomes<'o>(
        &self,
        computed: &'o Computed,
    ) -> Result<Vec<Vec<Option<&'o Outcome>>>, ApiError> {
        let views = self.outcomes(computed);
        for (name, column) in self.names.iter().zip(&self.columns) {
            let Out::Feature {
                target,
                on_demand: true,
                ..
            } = column
            else {
                continue;
            };
            let failed = views[*target]
                .iter()
                .enumerate()
                .find_map(|(row, o)| match o {
                    Some(Outcome::Error(why)) => Some((row, why)),
                    _ => None,
                });
            if let Some((row, why)) = failed {
                return Err(bad(
                    ErrorCode::UdfFailed,
                    format!(
                        "on-demand feature `{name}` failed for entity row {} of the request: {why}",
                        row + 1
                    ),
                ));
            }
        }
        Ok(views)
    }
}

fn bad(code: ErrorCode, message: String) -> ApiError {
    ApiError::new(code, message)
}

/// Feast's request as Oka's (one per row group), and the plan of its answer.
pub fn parse(
    feast: &FeastRegistry,
    registry: &Registry,
    body: &[u8],
) -> Result<(Vec<FeatureRequest>, Plan), ApiError> {
    let request: Request = oka_core::json::from_slice(body).map_err(|e| {
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

/// Feast's request (from JSON or gRPC) as Oka's (one per row group), and the
/// plan of its answer.
pub(crate) fn plan(
    feast: &FeastRegistry,
    registry: &Registry,
    request: &Request,
) -> Result<(Vec<FeatureRequest>, Plan), ApiError> {
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
    let refs = feature_refs(feast, registry, request)?;
    let Columns {
        views,
        names,
        columns,
        mut typed,
    } = columns(feast, registry, request, refs, rows)?;
    // The entity columns first, in the order the request gave them.
    let mut plan = Plan {
        names: Vec::new(),
        columns: Vec::new(),
        rows,
        groups: Vec::new(),
    };
    plan.groups = row_groups(feast, &views, request, rows);
    let oka = plan
        .groups
        .iter()
        .map(|g| oka_request(feast, &views, &typed, request, g))
        .collect();
    for name in request.entities.keys() {
        if let Some((values, ty)) = typed.shift_remove(name.as_str()) {
            plan.names.push(name.clone());
            plan.columns.push(Out::Entity(values, ty));
        }
    }
    plan.names.extend(names);
    plan.columns.extend(columns);
    Ok((oka, plan))
}

/// The join keys' columns of a request, each value typed as its key is
/// ([`entity_column`]), with the keys' types.
type Typed<'r> = indexmap::IndexMap<&'r str, (Vec<Value>, FeastType)>;

/// What the features of a request read and answer.
struct Columns<'r> {
    /// The views read, in first-use order: the targets of Oka's request.
    views: Vec<&'r str>,
    /// The features' names in the answer.
    names: Vec<String>,
    /// The features' columns.
    columns: Vec<Out>,
    /// The join keys' columns, typed, with the keys' types.
    typed: Typed<'r>,
}

fn columns<'r>(
    feast: &'r FeastRegistry,
    registry: &Registry,
    request: &Request,
    refs: Vec<Ref<'r>>,
    rows: usize,
) -> Result<Columns<'r>, ApiError> {
    let mut out = Columns {
        views: Vec::new(),
        names: Vec::new(),
        columns: Vec::new(),
        typed: indexmap::IndexMap::new(),
    };
    // The view of the previous reference and its target: a request's features
    // come mostly view by view, and a view is checked once per run of them;
    // within a view, mostly in its order (`next`: where the previous feature's
    // successor would be, in the view and in its entity's columns).
    let mut last = None;
    let mut next = (0, 0);
    for Ref {
        view: view_name,
        feature,
        shown,
    } in refs
    {
        let has = |view: Named<'_>, hint: usize| {
            let features = view.features();
            let at = position_near(features, hint, |f| f.name == feature);
            at.map(|i| (i, features[i].ty))
        };
        let no_feature = || {
            bad(
                ErrorCode::UnknownFeature,
                format!("feature view `{view_name}` has no feature `{feature}`"),
            )
        };
        let (view, target, id) = match last {
            Some((name, view, target, id)) if name == view_name => (view, target, id),
            _ => {
                let view = known_view(feast, registry, view_name)?;
                has(view, 0).ok_or_else(no_feature)?;
                next = (0, 0);
                let Some(id) = registry.feature_id(view_name) else {
                    return Err(bad(
                        ErrorCode::UnknownFeature,
                        format!("feature view `{view_name}` is not served (it is not online)"),
                    ));
                };
                for key in view.join_keys(feast) {
                    if !out.typed.contains_key(key.name.as_str()) {
                        out.typed
                            .insert(&key.name, (entity_column(request, key, rows)?, key.ty));
                    }
                }
                let target = match out.views.iter().position(|v| *v == view_name) {
                    Some(i) => i,
                    None => {
                        out.views.push(view_name);
                        out.views.len() - 1
                    }
                };
                last = Some((view_name, view, target, id));
                (view, target, id)
            }
        };
        let (at, ty) = has(view, next.0).ok_or_else(no_feature)?;
        let column = (registry.feature(id).entity).column_index_near(feature, next.1);
        next = (at + 1, column.map_or(0, |c| c + 1));
        out.names.push(shown);
        out.columns.push(Out::Feature {
            target,
            column,
            ty,
            on_demand: matches!(view, Named::OnDemand(_)),
        });
    }
    Ok(out)
}

/// A requested feature: its view, its name in the view and in the answer.
struct Ref<'r> {
    view: &'r str,
    feature: &'r str,
    shown: String,
}

/// The requested features, borrowed from the request or the registry.
fn feature_refs<'r>(
    feast: &'r FeastRegistry,
    registry: &Registry,
    request: &'r Request,
) -> Result<Vec<Ref<'r>>, ApiError> {
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
            let view = known_view(feast, registry, &p.view)?;
            let features: Vec<&str> = if p.features.is_empty() {
                view.features().iter().map(|f| f.name.as_str()).collect()
            } else {
                p.features.iter().map(String::as_str).collect()
            };
            for feature in features {
                let shown = if full {
                    format!("{shown_view}__{feature}")
                } else {
                    feature.to_owned()
                };
                refs.push(Ref {
                    view: &p.view,
                    feature,
                    shown,
                });
            }
        }
    } else {
        // Each view is looked up once per run of its features.
        let mut checked = None;
        for r in &request.features {
            let Some((view, feature)) = r.split_once(':') else {
                return Err(bad(
                    ErrorCode::InvalidRequest,
                    format!("feature reference `{r}` is not `<feature view>:<feature>`"),
                ));
            };
            if checked != Some(view) {
                known_view(feast, registry, view)?;
                checked = Some(view);
            }
            let shown = if full {
                format!("{view}__{feature}")
            } else {
                feature.to_owned()
            };
            refs.push(Ref {
                view,
                feature,
                shown,
            });
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

/// A view a request names: a feature view, or an on-demand view the overlay
/// gives a feature.
#[derive(Clone, Copy)]
enum Named<'r> {
    View(&'r oka_feast::registry::FeatureView),
    OnDemand(&'r OnDemandView),
}

impl<'r> Named<'r> {
    fn features(self) -> &'r [Column] {
        match self {
            Self::View(v) => &v.features,
            Self::OnDemand(v) => &v.features,
        }
    }

    /// The join keys its rows need: a view's, or those of every view an
    /// on-demand view reads.
    fn join_keys(self, feast: &'r FeastRegistry) -> Vec<&'r Column> {
        match self {
            Self::View(v) => v.join_keys.iter().collect(),
            Self::OnDemand(od) => {
                let mut keys: Vec<&Column> = Vec::new();
                for (view, _) in &od.views {
                    for k in feast.views.get(view).map_or(&[][..], |v| &v.join_keys) {
                        if !keys.iter().any(|have| have.name == k.name) {
                            keys.push(k);
                        }
                    }
                }
                keys
            }
        }
    }
}

fn known_view<'r>(
    feast: &'r FeastRegistry,
    registry: &Registry,
    view: &str,
) -> Result<Named<'r>, ApiError> {
    if let Some(v) = feast.views.get(view) {
        return Ok(Named::View(v));
    }
    let message = match feast.on_demand.get(view) {
        Some(od) if registry.feature_id(view).is_some() => return Ok(Named::OnDemand(od)),
        Some(od) => format!(
            "on-demand feature view {} is not served: Oka's Python workers cannot run it and it has no overlay giving its CEL (serve with --spec overlay.yaml; `oka feast scaffold` prints a skeleton)",
            oka_feast::overlay::describe(od)
        ),
        None => format!(
            "feature view `{view}` does not exist in project `{}`",
            feast.project
        ),
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

/// The join keys of a target of Oka's request.
fn target_keys<'r>(feast: &'r FeastRegistry, view: &str) -> Vec<&'r Column> {
    match (feast.views.get(view), feast.on_demand.get(view)) {
        (Some(v), _) => Named::View(v).join_keys(feast),
        (None, Some(od)) => Named::OnDemand(od).join_keys(feast),
        (None, None) => Vec::new(),
    }
}

/// The request-data columns the on-demand views among `views` read.
fn request_columns<'r>(feast: &'r FeastRegistry, views: &[&str]) -> Vec<&'r str> {
    let mut names: Vec<&str> = Vec::new();
    for view in views {
        for c in feast.on_demand.get(*view).map_or(&[][..], |od| &od.request) {
            if !names.contains(&c.name.as_str()) {
                names.push(&c.name);
            }
        }
    }
    names
}

/// The rows in groups of equal request data (one group of all rows when no
/// on-demand view reads any, or all rows give the same), in first-seen order.
fn row_groups(
    feast: &FeastRegistry,
    views: &[&str],
    request: &Request,
    rows: usize,
) -> Vec<Vec<usize>> {
    let columns = request_columns(feast, views);
    if columns.is_empty() {
        return vec![(0..rows).collect()];
    }
    let mut groups: indexmap::IndexMap<String, Vec<usize>> = indexmap::IndexMap::new();
    for i in 0..rows {
        let values: Vec<Option<&Json>> = columns
            .iter()
            .map(|c| request.entities.get(*c).and_then(|v| v.get(i)))
            .collect();
        let id = serde_json::to_string(&values).unwrap_or_default();
        groups.entry(id).or_default().push(i);
    }
    if groups.is_empty() {
        return vec![Vec::new()];
    }
    groups.into_values().collect()
}

/// Oka's request for the rows of one group, built in place (no JSON in between):
/// one target per view, its key list from the typed entity columns (each key
/// string shared, not copied), the on-demand views' arguments from the group's
/// request data.
fn oka_request(
    feast: &FeastRegistry,
    views: &[&str],
    typed: &Typed<'_>,
    request: &Request,
    rows: &[usize],
) -> FeatureRequest {
    let mut keys = indexmap::IndexMap::with_capacity(views.len());
    let mut args = Vec::new();
    for view in views {
        let join_keys = target_keys(feast, view);
        let columns: Vec<Option<&Vec<Value>>> = join_keys
            .iter()
            .map(|k| typed.get(k.name.as_str()).map(|(values, _)| values))
            .collect();
        let mut list = KeyList::new();
        for &i in rows {
            list.push(join_keys.iter().zip(&columns).map(|(k, column)| {
                // Every join key's column was typed (or the request refused)
                // before this: only ints and strings are here.
                let value = match column.and_then(|c| c.get(i)) {
                    Some(Value::Int(n)) => KeyValue::Int(*n),
                    Some(Value::String(s)) => KeyValue::String(s.clone()),
                    _ => KeyValue::Other(Json::Null),
                };
                (k.name.as_str(), value)
            }));
        }
        keys.insert((*view).to_owned(), list);
        if let (Some(od), Some(&first)) = (feast.on_demand.get(*view), rows.first()) {
            let given: ArgMap = od
                .request
                .iter()
                .filter_map(|c| {
                    let v = request.entities.get(&c.name)?.get(first)?;
                    (!v.is_null()).then(|| (c.name.clone(), v.clone()))
                })
                .collect();
            args.push(((*view).to_owned(), Some(given)));
        }
    }
    FeatureRequest {
        target_features: views.iter().map(|v| (*v).to_owned()).collect(),
        keys: None,
        feature_keys: Some(keys),
        query_args: None,
        udf_args: Some(args.into_iter().collect()),
        deadline_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_keys_are_taken_as_feast_takes_them() {
        assert_eq!(int_key(&serde_json::json!(1001)), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!(1001.0)), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!("1001")), Some(Value::Int(1001)));
        assert_eq!(int_key(&serde_json::json!(1.5)), None);
        assert_eq!(int_key(&serde_json::json!("x")), None);
    }
}
