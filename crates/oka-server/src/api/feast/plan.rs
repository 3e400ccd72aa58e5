//! Feast's request as Oka's. What a request's feature list makes — the views
//! read, the answer's feature columns, the join keys needed — is its [`Shape`],
//! worked out once and kept between requests (a model server sends the same list
//! every time); per request, only the entity columns are typed, the rows grouped
//! and one Oka request built per group.

use std::sync::Arc;

use oka_core::entity::position_near;
use oka_core::json::Text;
use oka_core::request::{ArgMap, KeyList, KeyValue, SharedRequest};
use oka_core::{ErrorCode, FeatureRequest, Registry, Value};
use oka_feast::registry::{Column, FeastRegistry, FeastType, OnDemandView};
use serde_json::Value as Json;

use super::{Plan, Request, bad};
use crate::error::ApiError;

mod kept;
use kept::PLANS;

/// What a feature list (or feature service) makes of a request, whatever its
/// entity rows.
#[derive(Debug)]
pub(crate) struct Shape {
    /// The views read, in first-use order: the targets of Oka's request.
    views: Vec<View>,
    /// The features' names in the answer.
    pub(crate) names: Vec<String>,
    /// The same, as JSON strings separated by commas (the end of the JSON
    /// answer's `feature_names`).
    pub(crate) names_json: Vec<u8>,
    /// The features' columns, in the answer's order.
    pub(crate) features: Vec<Feature>,
    /// The join keys whose entity columns the request needs, in first-use
    /// order, with their types.
    pub(crate) keys: Vec<Column>,
    /// The request-data columns the on-demand views read (none: one group).
    request_columns: Vec<String>,
    /// Oka's request of its one view, but for the keys (shared by every
    /// request of this shape); `None` for several views.
    one_view: Option<Arc<FeatureRequest>>,
}

/// A view read by the request: a target of Oka's request.
#[derive(Debug)]
struct View {
    name: String,
    /// Its join keys, as indexes into [`Shape::keys`].
    keys: Vec<usize>,
    /// An on-demand view's request-data columns (`None`: a feature view).
    request: Option<Vec<String>>,
}

/// A feature column of the answer.
#[derive(Debug)]
pub(crate) struct Feature {
    /// The target (view) its values come from.
    pub(crate) target: usize,
    /// Its column in the target's records.
    pub(crate) column: Option<usize>,
    pub(crate) ty: FeastType,
    /// Whether the view is on-demand (its values carry no event time).
    pub(crate) on_demand: bool,
}

/// Feast's request (from JSON or gRPC) as Oka's (one per row group), and the
/// plan of its answer.
pub(crate) fn plan(
    feast: &Arc<FeastRegistry>,
    registry: &Arc<Registry>,
    request: &Request<'_>,
) -> Result<(Vec<SharedRequest>, Plan), ApiError> {
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
    let shape = PLANS.with_borrow_mut(|plans| plans.shape(feast, registry, request))?;
    let mut typed = shape
        .keys
        .iter()
        .map(|key| entity_column(request, key, rows))
        .collect::<Result<Vec<_>, _>>()?;
    let groups = row_groups(&shape, request, rows);
    let oka = match &groups {
        None => vec![oka_request(&shape, &typed, request, Rows::All(rows))],
        Some(groups) => (groups.iter())
            .map(|g| oka_request(&shape, &typed, request, Rows::These(g)))
            .collect(),
    };
    // The entity columns first, in the order the request gave them.
    let entities = request
        .entities
        .keys()
        .filter_map(|name| {
            let at = shape.keys.iter().position(|k| k.name == **name)?;
            Some((at, std::mem::take(&mut typed[at])))
        })
        .collect();
    let plan = Plan {
        shape,
        entities,
        rows,
        groups,
    };
    Ok((oka, plan))
}

impl Shape {
    /// Works out what the request's features read and answer, checking each
    /// against the registries.
    fn new(
        feast: &FeastRegistry,
        registry: &Registry,
        request: &Request<'_>,
    ) -> Result<Self, ApiError> {
        let mut shape = Self {
            views: Vec::new(),
            names: Vec::new(),
            names_json: Vec::new(),
            features: Vec::new(),
            keys: Vec::new(),
            request_columns: Vec::new(),
            one_view: None,
        };
        // The view of the previous reference and its target: a request's
        // features come mostly view by view, and a view is checked once per
        // run of them; within a view, mostly in its order (`next`: where the
        // previous feature's successor would be, in the view and in its
        // entity's columns).
        let mut last: Option<(&str, Named<'_>, usize, _)> = None;
        let mut next = (0, 0);
        let names = request.features.names()?;
        for Ref {
            view: view_name,
            feature,
            shown,
        } in feature_refs(feast, registry, request, &names)?
        {
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
                    view.position(feature, 0).ok_or_else(no_feature)?;
                    next = (0, 0);
                    let Some(id) = registry.feature_id(view_name) else {
                        return Err(bad(
                            ErrorCode::UnknownFeature,
                            format!("feature view `{view_name}` is not served (it is not online)"),
                        ));
                    };
                    let target = shape.target(feast, view_name, view);
                    last = Some((view_name, view, target, id));
                    (view, target, id)
                }
            };
            let at = view.position(feature, next.0).ok_or_else(no_feature)?;
            let column = (registry.feature(id).entity).column_index_near(feature, next.1);
            next = (at + 1, column.map_or(0, |c| c + 1));
            shape.names.push(shown);
            shape.features.push(Feature {
                target,
                column,
                ty: view.features()[at].ty,
                on_demand: matches!(view, Named::OnDemand(_)),
            });
        }
        for (i, name) in shape.names.iter().enumerate() {
            if i > 0 {
                shape.names_json.push(b',');
            }
            oka_core::value::write_json_str(&mut shape.names_json, name);
        }
        if let [view] = &shape.views[..] {
            shape.one_view = Some(Arc::new(FeatureRequest {
                target_features: vec![view.name.clone()],
                ..FeatureRequest::default()
            }));
        }
        Ok(shape)
    }

    /// The target reading `name` (added with its join keys and request data
    /// the first time).
    fn target(&mut self, feast: &FeastRegistry, name: &str, view: Named<'_>) -> usize {
        if let Some(i) = self.views.iter().position(|v| v.name == name) {
            return i;
        }
        let mut keys = Vec::new();
        for key in view.join_keys(feast) {
            let at = match self.keys.iter().position(|k| k.name == key.name) {
                Some(at) => at,
                None => {
                    self.keys.push(key.clone());
                    self.keys.len() - 1
                }
            };
            keys.push(at);
        }
        let request = feast.on_demand.get(name).map(|od| {
            let names: Vec<String> = od.request.iter().map(|c| c.name.clone()).collect();
            for c in &names {
                if !self.request_columns.contains(c) {
                    self.request_columns.push(c.clone());
                }
            }
            names
        });
        self.views.push(View {
            name: name.to_owned(),
            keys,
            request,
        });
        self.views.len() - 1
    }
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
    request: &'r Request<'_>,
    names: &'r [Text<'_>],
) -> Result<Vec<Ref<'r>>, ApiError> {
    let full = request.full_feature_names;
    let shown = |view: &str, feature: &str| {
        if full {
            format!("{view}__{feature}")
        } else {
            feature.to_owned()
        }
    };
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
                refs.push(Ref {
                    view: &p.view,
                    feature,
                    shown: shown(shown_view, feature),
                });
            }
        }
    } else {
        // Each view is looked up once per run of its features.
        let mut checked = None;
        for r in names {
            let Some((view, feature)) = r.split_once(':') else {
                return Err(bad(
                    ErrorCode::InvalidRequest,
                    format!(
                        "feature reference `{}` is not `<feature view>:<feature>`",
                        &**r
                    ),
                ));
            };
            if checked != Some(view) {
                known_view(feast, registry, view)?;
                checked = Some(view);
            }
            refs.push(Ref {
                view,
                feature,
                shown: shown(view, feature),
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

    /// Where `feature` is among the features, looked for from `hint` on.
    fn position(self, feature: &str, hint: usize) -> Option<usize> {
        position_near(self.features(), hint, |f| f.name == feature)
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
fn entity_column(request: &Request<'_>, key: &Column, rows: usize) -> Result<Vec<Value>, ApiError> {
    let given = request.entities.get(key.name.as_str()).ok_or_else(|| {
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

/// The rows in groups of equal request data, in first-seen order; `None`
/// for one group of every row (no on-demand view reads any, or all rows give
/// the same).
fn row_groups(shape: &Shape, request: &Request<'_>, rows: usize) -> Option<Vec<Vec<usize>>> {
    let columns = &shape.request_columns;
    if columns.is_empty() {
        return None;
    }
    let mut groups: indexmap::IndexMap<String, Vec<usize>> = indexmap::IndexMap::new();
    for i in 0..rows {
        let values: Vec<Option<&Json>> = columns
            .iter()
            .map(|c| request.entities.get(c.as_str()).and_then(|v| v.get(i)))
            .collect();
        let id = serde_json::to_string(&values).unwrap_or_default();
        groups.entry(id).or_default().push(i);
    }
    (groups.len() > 1).then(|| groups.into_values().collect())
}

/// The rows of one group: every row of the request, or these.
#[derive(Clone, Copy)]
enum Rows<'g> {
    All(usize),
    These(&'g [usize]),
}

impl Rows<'_> {
    fn iter(self) -> impl Iterator<Item = usize> {
        let (all, these) = match self {
            Self::All(n) => (0..n, &[][..]),
            Self::These(rows) => (0..0, rows),
        };
        all.chain(these.iter().copied())
    }
}

/// Oka's request for the rows of one group, built in place (no JSON in between):
/// one target per view, its key list from the typed entity columns (each key
/// string shared, not copied), the on-demand views' arguments from the group's
/// request data.
fn oka_request(
    shape: &Shape,
    typed: &[Vec<Value>],
    request: &Request<'_>,
    rows: Rows<'_>,
) -> SharedRequest {
    let key_list = |view: &View| {
        let mut list = KeyList::new();
        for i in rows.iter() {
            list.push(view.keys.iter().map(|&k| {
                // Every join key's column was typed (or the request refused)
                // before this: only ints and strings are here.
                let value = match typed[k].get(i) {
                    Some(Value::Int(n)) => KeyValue::Int(*n),
                    Some(Value::String(s)) => KeyValue::String(s.clone()),
                    _ => KeyValue::Other(Json::Null),
                };
                (shape.keys[k].name.as_str(), value)
            }));
        }
        list
    };
    if let ([view], Some(one_view)) = (&shape.views[..], &shape.one_view)
        && (view.request.is_none() || rows.iter().next().is_none())
    {
        // One view, no arguments: Oka's own request form (one key list).
        return SharedRequest {
            rest: Arc::clone(one_view),
            keys: Some(key_list(view)),
        };
    }
    let mut keys = indexmap::IndexMap::with_capacity(shape.views.len());
    let mut args = Vec::new();
    for view in &shape.views {
        keys.insert(view.name.clone(), key_list(view));
        if let (Some(columns), Some(first)) = (&view.request, rows.iter().next()) {
            let given: ArgMap = columns
                .iter()
                .filter_map(|c| {
                    let v = request.entities.get(c.as_str())?.get(first)?;
                    (!v.is_null()).then(|| (c.clone(), v.clone()))
                })
                .collect();
            args.push((view.name.clone(), Some(given)));
        }
    }
    SharedRequest::from(FeatureRequest {
        target_features: shape.views.iter().map(|v| v.name.clone()).collect(),
        keys: None,
        feature_keys: Some(keys),
        query_args: None,
        udf_args: Some(args.into_iter().collect()),
        deadline_ms: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::kept::{List, SHAPES_KEPT};
    use super::*;
    use crate::api::feast::Features;
    use oka_feast::registry::FeatureView;

    /// A Feast project of one view (`stats`: `a`, `b` by `driver_id`), and the
    /// registry Oka serves it with.
    fn registries() -> (Arc<FeastRegistry>, Arc<Registry>) {
        let mut feast = FeastRegistry {
            project: "p".to_owned(),
            ..FeastRegistry::default()
        };
        let features = vec![
            Column::new("a", FeastType::Int64),
            Column::new("b", FeastType::Double),
        ];
        feast.views.insert(
            "stats".to_owned(),
            FeatureView {
                name: "stats".to_owned(),
                join_keys: vec![Column::new("driver_id", FeastType::Int64)],
                features,
                ttl: None,
                online: true,
                timestamp_field: "ts".to_owned(),
                field_mapping: Default::default(),
                on_write: None,
            },
        );
        let spec = oka_feast::spec::pipeline_spec(&feast);
        let natives = oka_core::NativeUdfs::default();
        let registry = Registry::load("test", spec, &natives).unwrap();
        (Arc::new(feast), Arc::new(registry))
    }

    fn request(body: &str) -> Request<'_> {
        oka_core::json::from_slice(body.as_bytes()).unwrap()
    }

    fn names(plan: &Plan) -> Vec<&str> {
        plan.names().collect()
    }

    #[test]
    fn a_feature_list_is_planned_once_per_registry() {
        let (feast, registry) = registries();
        let body = r#"{"features": ["stats:b", "stats:a"], "entities": {"driver_id": [1, 2]}}"#;
        let (_, first) = plan(&feast, &registry, &request(body)).unwrap();
        let (oka, again) = plan(&feast, &registry, &request(body)).unwrap();
        assert!(
            Arc::ptr_eq(&first.shape, &again.shape),
            "kept between requests"
        );
        assert_eq!(names(&again), ["driver_id", "b", "a"]);
        assert_eq!(oka[0].rest.target_features, ["stats"]);
        // Other entities, the same list: the same shape, this request's keys.
        let other = r#"{"features": ["stats:b", "stats:a"], "entities": {"driver_id": [3]}}"#;
        let (_, third) = plan(&feast, &registry, &request(other)).unwrap();
        assert!(Arc::ptr_eq(&first.shape, &third.shape));
        assert_eq!(third.rows, 1);
        // Full names are another shape.
        let full = r#"{"features": ["stats:b", "stats:a"], "entities": {"driver_id": [1]},
            "full_feature_names": true}"#;
        let (_, named) = plan(&feast, &registry, &request(full)).unwrap();
        assert!(!Arc::ptr_eq(&first.shape, &named.shape));
        assert_eq!(names(&named), ["driver_id", "stats__b", "stats__a"]);
        // A reload (new registries) plans again.
        let (feast2, registry2) = registries();
        let (_, reloaded) = plan(&feast2, &registry2, &request(body)).unwrap();
        assert!(!Arc::ptr_eq(&first.shape, &reloaded.shape));
    }

    /// A feature list held by a kept body template finds the shape its text
    /// made, and then by address; another service or `full_feature_names`
    /// with the same text is still another shape.
    #[test]
    fn a_templates_feature_list_finds_its_shape_by_address() {
        let (feast, registry) = registries();
        let body = r#"{"features": ["stats:b", "stats:a"], "entities": {"driver_id": [1, 2]}}"#;
        let (_, first) = plan(&feast, &registry, &request(body)).unwrap();
        let text: Arc<str> = Arc::from(r#"["stats:b", "stats:a"]"#);
        let through = |full: bool| {
            let mut r = request(body);
            r.features = Features::Kept(Arc::clone(&text));
            r.full_feature_names = full;
            plan(&feast, &registry, &r).unwrap().1
        };
        assert!(
            Arc::ptr_eq(&first.shape, &through(false).shape),
            "found by its text"
        );
        let held = |text: &Arc<str>| {
            PLANS.with_borrow(|p| {
                (p.kept.iter())
                    .any(|k| matches!(&k.features, List::Json(t) if Arc::ptr_eq(t, text)))
            })
        };
        assert!(held(&text), "then kept by the template's text");
        assert!(
            Arc::ptr_eq(&first.shape, &through(false).shape),
            "found by address"
        );
        let named = through(true);
        assert!(!Arc::ptr_eq(&first.shape, &named.shape));
        assert_eq!(names(&named), ["driver_id", "stats__b", "stats__a"]);
        assert_eq!(names(&through(false)), ["driver_id", "b", "a"]);
    }

    #[test]
    fn a_kept_shape_still_checks_each_requests_entities() {
        let (feast, registry) = registries();
        let good = r#"{"features": ["stats:a"], "entities": {"driver_id": [1]}}"#;
        plan(&feast, &registry, &request(good)).unwrap();
        let missing = r#"{"features": ["stats:a"], "entities": {"id": [1]}}"#;
        let e = plan(&feast, &registry, &request(missing)).unwrap_err();
        assert!(
            e.message.contains("no column for join key `driver_id`"),
            "{e:?}"
        );
        let bad_key = r#"{"features": ["stats:a"], "entities": {"driver_id": [true]}}"#;
        let e = plan(&feast, &registry, &request(bad_key)).unwrap_err();
        assert!(e.message.contains("`entities.driver_id[0]`"), "{e:?}");
        // Not a list of names: malformed, kept or not.
        for body in [
            r#"{"features": [1], "entities": {"driver_id": [1]}}"#,
            r#"{"features": "stats:a", "entities": {}}"#,
        ] {
            let e = plan(&feast, &registry, &request(body)).unwrap_err();
            assert_eq!(e.code, ErrorCode::MalformedRequest, "{e:?}");
            assert!(e.message.contains("`features` must be a list"), "{e:?}");
            assert!(!e.message.contains(" at line "), "{e:?}");
        }
        // An unknown feature is never kept: refused every time.
        let unknown = r#"{"features": ["stats:zz"], "entities": {"driver_id": [1]}}"#;
        for _ in 0..2 {
            let e = plan(&feast, &registry, &request(unknown)).unwrap_err();
            assert!(e.message.contains("has no feature `zz`"), "{e:?}");
        }
    }

    #[test]
    fn the_kept_shapes_are_bounded() {
        let (feast, registry) = registries();
        for i in 0..(SHAPES_KEPT + 5) {
            let features: Vec<String> = (0..=i % 7).map(|_| "\"stats:a\"".to_owned()).collect();
            let full = i % 2 == 0;
            let body = format!(
                r#"{{"features": [{}], "entities": {{"driver_id": [{i}]}}, "full_feature_names": {full}}}"#,
                features.join(",")
            );
            plan(&feast, &registry, &request(&body)).unwrap();
        }
        PLANS.with_borrow(|plans| assert!(plans.kept.len() <= SHAPES_KEPT));
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
