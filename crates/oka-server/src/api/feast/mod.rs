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

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use oka_core::encode::answers;
use oka_core::execute::{Outcome, Outputs};
use oka_core::json::Text;
use oka_core::json::template::{self, Templates};
use oka_core::request::SharedRequest;
use oka_core::{ErrorCode, Prepared, Registry, Value};
use oka_feast::registry::{FeastRegistry, FeastType};
use serde::Deserialize;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use crate::error::ApiError;

mod answer;
mod compute;
pub(crate) mod grpc;
mod plan;
mod routes;
mod write;
pub use answer::write_response;
pub(crate) use plan::plan;
pub(crate) use routes::{post_online, routes};
pub use write::{push, write_to_online_store};

/// Feast's request body (fields Feast's server does not know are ignored, as
/// its pydantic model ignores them).
#[derive(Debug, Deserialize)]
pub(crate) struct Request<'a> {
    #[serde(borrow)]
    pub(crate) entities: Columns<'a>,
    #[serde(default)]
    pub(crate) feature_service: Option<String>,
    #[serde(default, borrow, deserialize_with = "Features::json")]
    pub(crate) features: Features<'a>,
    #[serde(default)]
    pub(crate) full_feature_names: bool,
    #[serde(default)]
    pub(crate) include_feature_view_version_metadata: bool,
}

/// A request's entity columns (and request data), by name (borrowed from the
/// body when it has no escapes): hashed with foldhash, as the house's other maps.
pub(crate) type Columns<'a> = indexmap::IndexMap<Text<'a>, Vec<Json>, foldhash::fast::RandomState>;

/// A request's feature references.
#[derive(Debug)]
pub(crate) enum Features<'a> {
    /// The JSON body's array as written, parsed only when no shape is kept
    /// for it ([`plan`]): a model server sends the same bytes every time.
    Json(&'a str),
    /// The same array, from the body kept as the template this body fits
    /// (the same bytes: [`from_kept`]).
    Kept(Arc<str>),
    /// A list of names (gRPC's, or none).
    List(Vec<String>),
}

impl Default for Features<'_> {
    fn default() -> Self {
        Self::List(Vec::new())
    }
}

impl<'a> Features<'a> {
    fn json<'de: 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Self::Json(raw.get()))
    }

    /// The array as the body wrote it (`None`: a list of names).
    pub(crate) fn array(&self) -> Option<&str> {
        match self {
            Self::Json(raw) => Some(raw),
            Self::Kept(raw) => Some(raw),
            Self::List(_) => None,
        }
    }

    /// The names, borrowed from the body when they have no escapes; an error
    /// when the JSON is not an array of strings.
    pub(crate) fn names(&self) -> Result<Vec<Text<'_>>, ApiError> {
        match (self, self.array()) {
            (Self::List(names), _) => Ok(names.iter().map(|n| Text(n.as_str().into())).collect()),
            (_, raw) => serde_json::from_str(raw.unwrap_or_default()).map_err(|e| {
                // The error's line and column are within the array, not the body.
                let e = e.to_string();
                let e = e.rsplit_once(" at line ").map_or(e.as_str(), |(e, _)| e);
                let why = format!("invalid request body: `features` must be a list of feature references (`<feature view>:<feature>`): {e}");
                bad(ErrorCode::MalformedRequest, why)
            }),
        }
    }
}

/// One output column of the answer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Out<'p> {
    /// An entity column, its values as given (typed by the join key), and the
    /// key's Feast type.
    Entity(&'p [Value], FeastType),
    /// A feature of a view.
    Feature(&'p plan::Feature),
}

/// What the answer is made of, decided when the request is parsed: the
/// feature list's [`plan::Shape`] (shared by every request with that list) and
/// this request's entity columns and rows.
#[derive(Debug)]
pub struct Plan {
    shape: Arc<plan::Shape>,
    /// The entity columns, in the request's order: the join key (its index in
    /// the shape's keys) and its values.
    entities: Vec<(usize, Vec<Value>)>,
    /// The request's rows.
    pub(crate) rows: usize,
    /// The rows of each Oka request, in order: `None` for one group of every
    /// row, unless the rows give on-demand views different request data (Oka's
    /// arguments are per request, Feast's request data per row): then one
    /// group per distinct set of values.
    pub(crate) groups: Option<Vec<Vec<usize>>>,
}

/// What each group's Oka request computed, in the order of [`Plan::groups`].
pub type Computed = [(Prepared, Outputs)];

impl Plan {
    /// The answer's columns: the entity columns, then the features.
    pub(crate) fn columns(&self) -> impl Iterator<Item = Out<'_>> {
        let keys = &self.shape.keys;
        let entities = (self.entities.iter()).map(|(k, values)| Out::Entity(values, keys[*k].ty));
        entities.chain(self.shape.features.iter().map(Out::Feature))
    }

    /// The answer's column names, in [`Self::columns`]'s order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        let keys = &self.shape.keys;
        let entities = self.entities.iter().map(|(k, _)| keys[*k].name.as_str());
        entities.chain(self.shape.names.iter().map(String::as_str))
    }

    /// How many columns the answer has.
    pub(crate) fn width(&self) -> usize {
        self.entities.len() + self.shape.features.len()
    }

    /// About how long the JSON answer is (for its buffer: a column's framing
    /// is about 60 bytes, a value with its status and time about 48).
    pub(crate) fn answer_bytes(&self) -> usize {
        let names = self.shape.names_json.len() + 32 * self.entities.len();
        256 + names + self.width() * (64 + 48 * self.rows)
    }

    /// Each target's (view's) outcome for each row of the request, gathered
    /// from the groups' answers once for all of the view's features.
    pub(crate) fn outcomes<'o>(&self, computed: &'o Computed) -> Vec<Vec<Option<&'o Outcome>>> {
        let targets = self.shape.features.iter().map(|f| f.target + 1);
        let targets = targets.max().unwrap_or(0);
        let Some(groups) = &self.groups else {
            // One group of every row, in order (the usual request): each
            // target's answers are its column as they come.
            let Some((prepared, outputs)) = computed.first() else {
                return vec![vec![None; self.rows]; targets];
            };
            return (0..targets)
                .map(|t| {
                    let mut column: Vec<_> = prepared.targets.get(t).map_or_else(Vec::new, |t| {
                        answers(prepared, outputs, t).take(self.rows).collect()
                    });
                    column.resize(self.rows, None);
                    column
                })
                .collect();
        };
        let mut out = vec![vec![None; self.rows]; targets];
        for (rows, (prepared, outputs)) in groups.iter().zip(computed) {
            for (t, by_row) in prepared.targets.iter().zip(&mut out) {
                for (row, o) in rows.iter().zip(answers(prepared, outputs, t)) {
                    by_row[*row] = o;
                }
            }
        }
        out
    }

    /// Each target's outcome for each row ([`Self::outcomes`]), or an error
    /// naming the first feature whose UDF failed for a row: Feast's answer has no
    /// per-value error, and a failure is not a null.
    pub(crate) fn checked_outcomes<'o>(
        &self,
        computed: &'o Computed,
    ) -> Result<Vec<Vec<Option<&'o Outcome>>>, ApiError> {
        let views = self.outcomes(computed);
        for (name, feature) in self.shape.names.iter().zip(&self.shape.features) {
            if !feature.on_demand {
                continue;
            }
            let failed = views[feature.target]
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
/// A body equal to one this worker kept but for its `entities` parses only
/// its entities ([`oka_core::json::template`]).
pub fn parse(
    feast: &Arc<FeastRegistry>,
    registry: &Arc<Registry>,
    body: &[u8],
) -> Result<(Vec<SharedRequest>, Plan), ApiError> {
    plan(feast, registry, &parse_request(body)?)
}

/// Feast's request body: through a kept template, or parsed whole (and kept).
fn parse_request(body: &[u8]) -> Result<Request<'_>, ApiError> {
    if let Some(request) = KEPT.with_borrow(|kept| from_kept(kept, body)) {
        return Ok(request);
    }
    let request = parse_whole(body)?;
    keep(body, &request);
    Ok(request)
}

/// Feast's request body, all of it.
fn parse_whole(body: &[u8]) -> Result<Request<'_>, ApiError> {
    oka_core::json::from_slice(body).map_err(|e| {
        let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let why = if object || e.is_syntax() || e.is_eof() {
            e.to_string()
        } else {
            "the body is not a JSON object (Feast's request: `entities` and `features` or `feature_service`)".to_owned()
        };
        bad(ErrorCode::MalformedRequest, format!("invalid request body: {why}"))
    })
}

thread_local! {
    /// The request bodies this worker has parsed, kept around their entities.
    static KEPT: RefCell<Templates<Kept>> = const { RefCell::new(Templates::new()) };
}

/// What a kept body parsed to, but for its entities.
#[derive(Debug)]
struct Kept {
    feature_service: Option<String>,
    /// Its `features` array as written: the same bytes in every body it fits.
    features: Option<Arc<str>>,
    full_feature_names: bool,
    include_feature_view_version_metadata: bool,
    /// The bytes around its entities' values, when they are one column.
    column: Option<ColumnTemplate>,
}

/// The bytes of a kept body's entities around its one column's values
/// (`{"id":` and `}` for `{"id":["a","b"]}`), and where the column's name
/// lies in them: entities of that column parse only its values, as the
/// kept body's key objects do on Oka's route
/// ([`ObjectTemplate`](oka_core::request::ObjectTemplate), the same rule).
#[derive(Debug)]
struct ColumnTemplate {
    before: Box<str>,
    after: Box<str>,
    /// The column's name in `before` (a name without escapes, so its bytes).
    name: Range<usize>,
}

impl ColumnTemplate {
    /// A template of more bytes than this (around the column's list) is not
    /// kept.
    const MAX_BYTES: usize = 256;

    /// The template of `entities` (its text), which parsed to `columns`:
    /// one column, its name without escapes (or none).
    fn learn(entities: &str, columns: &Columns<'_>) -> Option<Self> {
        if columns.len() != 1 {
            return None;
        }
        // One field as sent: a repeated name keeps its last value.
        let (name, value) = template::only_field(entities)?;
        let Cow::Borrowed(name) = name.0 else {
            return None;
        };
        let at = name.as_ptr().addr().checked_sub(entities.as_ptr().addr())?;
        let (before, after) = (entities.get(..value.start)?, entities.get(value.end..)?);
        if before.len() + after.len() > Self::MAX_BYTES {
            return None;
        }
        let template = Self {
            before: before.into(),
            after: after.into(),
            name: at..at + name.len(),
        };
        let back = template.parse(entities)?;
        (back.len() == 1 && back.first() == columns.first()).then_some(template)
    }

    /// `entities` parsed as this template's column; `None` when they are not
    /// its bytes around one JSON list (the caller parses them whole).
    fn parse<'b>(&self, entities: &'b str) -> Option<Columns<'b>> {
        let (values, rest) = template::between::<Vec<Json>>(entities, &self.before, &self.after)?;
        if !rest.is_empty() {
            return None;
        }
        let mut columns = Columns::with_capacity_and_hasher(1, Default::default());
        columns.insert(
            Text(Cow::Borrowed(entities.get(self.name.clone())?)),
            values,
        );
        Some(columns)
    }
}

/// `body` as the kept request whose bytes surround its entities, those parsed
/// in place of the kept ones; `None` (parse it whole) when no kept body fits
/// or the entities are not one JSON object of columns.
fn from_kept<'b>(kept: &Templates<Kept>, body: &'b [u8]) -> Option<Request<'b>> {
    let (kept, entities) = kept.find(body)?;
    let features = match &kept.features {
        Some(features) => Features::Kept(Arc::clone(features)),
        None => Features::default(),
    };
    let entities = std::str::from_utf8(entities).ok()?;
    let entities: Columns<'b> = match kept.column.as_ref().and_then(|c| c.parse(entities)) {
        Some(columns) => columns,
        None => serde_json::from_str(entities).ok()?,
    };
    // A value that nests arrays or objects is parsed within its body, where
    // serde_json's nesting limit counts the body's own level too.
    let nested = |v: &Json| matches!(v, Json::Array(_) | Json::Object(_));
    if entities.values().flatten().any(nested) {
        return None;
    }
    Some(Request {
        entities,
        feature_service: kept.feature_service.clone(),
        features,
        full_feature_names: kept.full_feature_names,
        include_feature_view_version_metadata: kept.include_feature_view_version_metadata,
    })
}

/// Keeps `request`'s parse, but for its entities, for the bodies equal to
/// `body` outside them.
fn keep(body: &[u8], request: &Request<'_>) {
    let Some(text) = std::str::from_utf8(body).ok() else {
        return;
    };
    let Some([Some(entities)]) = template::locate(text, ["entities"]) else {
        return;
    };
    let column = (text.get(entities.clone()))
        .and_then(|text| ColumnTemplate::learn(text, &request.entities));
    let features = match &request.features {
        Features::List(names) if names.is_empty() => None,
        Features::List(_) => return,
        features => features.array().map(Arc::from),
    };
    let parsed = Kept {
        feature_service: request.feature_service.clone(),
        features,
        full_feature_names: request.full_feature_names,
        include_feature_view_version_metadata: request.include_feature_view_version_metadata,
        column,
    };
    KEPT.with_borrow_mut(|kept| kept.keep(body, entities, parsed));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A request's fields (its features array as text, kept or borrowed), or
    /// its error's code and message.
    fn outcome(parsed: Result<Request<'_>, ApiError>) -> String {
        match parsed {
            Ok(r) => format!(
                "{:?} {:?} {:?} {} {}",
                r.entities,
                r.feature_service,
                r.features
                    .array()
                    .map_or_else(|| format!("{:?}", r.features), str::to_owned),
                r.full_feature_names,
                r.include_feature_view_version_metadata
            ),
            Err(e) => format!("{:?}: {}", e.code, e.message),
        }
    }

    /// A column template is bounded: an entity column with a long name keeps
    /// none (its bodies still parse through the body's template).
    #[test]
    fn a_long_column_name_keeps_no_column_template() {
        let name = "n".repeat(ColumnTemplate::MAX_BYTES);
        let body = |v: u32| format!(r#"{{"features":["v:a"],"entities":{{"{name}":[{v}]}}}}"#);
        let (first, next) = (body(1), body(2));
        assert_eq!(
            outcome(parse_request(first.as_bytes())),
            outcome(parse_whole(first.as_bytes()))
        );
        let kept = KEPT.with_borrow(|k| k.find(next.as_bytes()).map(|(t, _)| t.column.is_some()));
        assert_eq!(kept, Some(false));
        assert_eq!(
            outcome(parse_request(next.as_bytes())),
            outcome(parse_whole(next.as_bytes()))
        );
    }

    /// A body parsed through a kept template reads exactly as it does parsed
    /// whole: the same request, or the same error; with its features before
    /// its entities or after them.
    #[test]
    fn a_kept_body_parses_as_a_whole_one() {
        let forms = [
            r#"{"features":["v:a","v:b"],"entities":ENTITIES,"full_feature_names":true}"#,
            r#"{"entities":ENTITIES, "features": ["v:a", "v:\u0062"] }"#,
            r#"{"feature_service":"s","entities":ENTITIES}"#,
        ];
        let variants = [
            r#"{"id":[1,2]}"#,
            r#"{"id":["x"],"other":[true]}"#,
            r#" { "id" : [ ] } "#,
            "{}",
            "null",
            "",
            r#"{"id":[1]},"features":["v:c"]"#,
            r#"{"id":[1]},"entities":{"id":[2]}"#,
            r#"{"id":[1]"#,
            r#"{"id":[1]}}"#,
            r#"{"id":["a\"b",null,1.5,"x"]}"#,
            r#"{"id":[1],"id":[2]}"#,
            r#"{"id":[1] }"#,
            r#"{"id":[1],}"#,
            r#"{"ID":[1]}"#,
            r#"{"id":"x"}"#,
            r#"{"id":[{"a":1}]}"#,
        ]
        .map(str::to_owned)
        .into_iter()
        // A value nesting arrays at and around serde_json's nesting limit.
        .chain(
            [124, 125, 126].map(|n| format!(r#"{{"id":[{}1{}]}}"#, "[".repeat(n), "]".repeat(n))),
        )
        .collect::<Vec<_>>();
        for form in forms {
            let kept = form.replace("ENTITIES", r#"{"id":[0]}"#);
            assert_eq!(
                outcome(parse_request(kept.as_bytes())),
                outcome(parse_whole(kept.as_bytes()))
            );
            let column = KEPT.with_borrow(|k| {
                k.find(kept.as_bytes())
                    .is_some_and(|(t, _)| t.column.is_some())
            });
            assert!(column, "its entity column's template is kept with it");
            for variant in &variants {
                let body = form.replace("ENTITIES", variant);
                assert!(
                    KEPT.with_borrow(|k| k.find(body.as_bytes()).is_some()),
                    "{body}"
                );
                assert_eq!(
                    outcome(parse_request(body.as_bytes())),
                    outcome(parse_whole(body.as_bytes())),
                    "{body}"
                );
            }
        }
    }
}
