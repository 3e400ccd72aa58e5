//! Feast's writes on the serving port (under `oka serve --feast-repo`):
//! `POST /push` (to the online store only) and `POST /write-to-online-store`.
//! Their `df` (column name → values, one per row) becomes records of each view
//! written: the view's join keys, its batch source's timestamp field and every
//! feature, renamed by the source's `field_mapping` as Feast renames them. Every
//! row is checked (by the same record parser as `/v1/ingest`, then against the
//! view's Feast types) before anything is written: a request with a bad row
//! writes nothing. The rows then go through the write path, which writes them in
//! Feast's layout as Feast's SDK does (`oka_redis`'s `layout=feast`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use oka_core::batch::{BatchError, TransformError};
use oka_core::{EntityKey, ErrorCode, FeatureId, Registry, Row, Timestamp};
use oka_feast::layout;
use oka_feast::registry::{Column, FeastRegistry, FeastType, FeatureView, Scalar};
use oka_ingest::{RecordParser, TimeBounds};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::ApiError;
use crate::state::Shared;

/// Rows reported by name in a refusal; the rest are counted.
const MAX_REPORTED: usize = 5;

/// Feast's `/push` body (fields its server ignores are ignored).
#[derive(Debug, Deserialize)]
struct PushBody {
    push_source_name: String,
    df: indexmap::IndexMap<String, Json>,
    #[serde(default = "online")]
    to: String,
}

fn online() -> String {
    "online".to_owned()
}

/// Feast's `/write-to-online-store` body.
#[derive(Debug, Deserialize)]
struct WriteBody {
    feature_view_name: String,
    df: indexmap::IndexMap<String, Json>,
    /// For an on-demand view with `write_to_online_store=True`: whether its
    /// transformation runs on `df` (else `df` is stored as given).
    #[serde(default = "yes")]
    transform_on_write: bool,
}

fn yes() -> bool {
    true
}

/// How long a write waits for its transformation, queueing included (the
/// transformation itself has the pool's limit for it, 10 s).
const TRANSFORM_WAIT: Duration = Duration::from_secs(30);

fn bad(code: ErrorCode, message: String) -> ApiError {
    ApiError::new(code, message)
}

fn parse_body<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T, ApiError> {
    oka_core::json::from_slice(body).map_err(|e| {
        bad(
            ErrorCode::MalformedRequest,
            format!("invalid request body: {e} (Feast's {what} request)"),
        )
    })
}

/// `POST /push`: writes `df` to every feature view fed by the push source, as
/// Feast's `FeatureStore.push(..., to=PushMode.ONLINE)` does. Oka has no offline
/// store: `to` other than `online` is refused, and nothing is written.
pub async fn push(shared: &Shared, feast: &FeastRegistry, body: &[u8]) -> Result<(), ApiError> {
    let body: PushBody = parse_body(body, "`push_source_name`, `df` and `to`")?;
    match body.to.as_str() {
        "online" => {}
        "offline" | "online_and_offline" => {
            return Err(bad(
                ErrorCode::InvalidRequest,
                format!(
                    "`to: {}` is not supported: Oka serves the online store only and writes nothing offline; push with `to: online`, and write to the offline store with Feast",
                    body.to
                ),
            ));
        }
        other => {
            return Err(bad(
                ErrorCode::InvalidRequest,
                format!(
                    "`to` must be `online` (Oka writes the online store only), not `{}`",
                    oka_ingest::record::printable(other)
                ),
            ));
        }
    }
    let source = feast
        .push_sources
        .get(&body.push_source_name)
        .ok_or_else(|| {
            bad(
                ErrorCode::UnknownFeature,
                format!(
                    "no push source `{}` feeds a feature view of project `{}`",
                    oka_ingest::record::printable(&body.push_source_name),
                    feast.project
                ),
            )
        })?;
    let views: Vec<&FeatureView> = source
        .views
        .iter()
        .filter_map(|v| feast.views.get(v))
        .collect();
    write(shared, &views, &body.df).await
}

/// `POST /write-to-online-store`: writes `df` to one feature view.
pub async fn write_to_online_store(
    shared: &Shared,
    feast: &FeastRegistry,
    body: &[u8],
) -> Result<(), ApiError> {
    let body: WriteBody = parse_body(body, "`feature_view_name` and `df`")?;
    let view = feast.views.get(&body.feature_view_name).ok_or_else(|| {
        let name = oka_ingest::record::printable(&body.feature_view_name);
        let why = if feast.on_demand.contains_key(&body.feature_view_name) {
            format!("`{name}` is an on-demand feature view, which Oka computes and does not store")
        } else {
            format!("no feature view `{name}` in project `{}`", feast.project)
        };
        bad(ErrorCode::UnknownFeature, why)
    })?;
    if view.on_write.is_some() && body.transform_on_write {
        // `df` is checked (lists of as many values) before it is transformed;
        // an empty one writes nothing, as Feast writes nothing.
        if Frame::of(&body.df)?.rows == 0 {
            return Ok(());
        }
        let stored = transformed(shared, view, &body.df).await?;
        // A result that cannot be stored is the transformation's failure, not
        // the client's (`df` was checked above).
        return write(shared, &[view], &stored).await.map_err(|e| match e.code {
            ErrorCode::InvalidRequest => bad(
                ErrorCode::UdfFailed,
                format!(
                    "on-demand feature view `{}`'s transformation gave rows that cannot be stored: {}",
                    view.name, e.message
                ),
            ),
            _ => e,
        });
    }
    write(shared, &[view], &body.df).await
}

/// `df` transformed by `view`'s transformation (an on-demand view with
/// `write_to_online_store=True`), run in the Python pool as Feast's SDK runs it
/// on a write: the view's join keys and features to store.
async fn transformed(
    shared: &Shared,
    view: &FeatureView,
    df: &indexmap::IndexMap<String, Json>,
) -> Result<indexmap::IndexMap<String, Json>, ApiError> {
    let transform = shared.loaded.load().transforms.get(&view.name).cloned();
    let Some(transform) = transform else {
        return Err(bad(
            ErrorCode::UdfUnavailable,
            format!(
                "on-demand feature view `{}` (write_to_online_store=True) has no Python worker to run its transformation, so nothing was written: serve the Feast repository with `oka serve --feast-repo DIR --python VENV/bin/python`",
                view.name
            ),
        ));
    };
    let text = serde_json::to_string(df).map_err(|e| {
        bad(
            ErrorCode::InvalidRequest,
            format!("`df` cannot be written as JSON: {e}"),
        )
    })?;
    let nothing = "so nothing was written";
    let out = (transform.transform(text, Some(Instant::now() + TRANSFORM_WAIT)))
        .await
        .map_err(|e| match e {
            TransformError::Batch(BatchError::TimedOut(m)) => {
                bad(ErrorCode::UdfTimeout, format!("{m}; {nothing}"))
            }
            TransformError::Batch(BatchError::Overloaded(m)) => {
                bad(ErrorCode::Overloaded, format!("{m}; {nothing}"))
            }
            TransformError::Batch(e) => bad(ErrorCode::UdfUnavailable, format!("{e}; {nothing}")),
            e => bad(
                ErrorCode::UdfFailed,
                format!(
                    "on-demand feature view `{}`'s transformation failed on `df`, {nothing}: {e}",
                    view.name
                ),
            ),
        })?;
    oka_core::json::from_slice(out.as_bytes()).map_err(|e| {
        bad(
            ErrorCode::UdfFailed,
            format!(
                "on-demand feature view `{}`'s transformation answered columns that cannot be read ({e}), {nothing}",
                view.name
            ),
        )
    })
}

/// Checks every row of `df` for every view, then writes them view by view.
async fn write(
    shared: &Shared,
    views: &[&FeatureView],
    df: &indexmap::IndexMap<String, Json>,
) -> Result<(), ApiError> {
    let frame = Frame::of(df)?;
    let registry = Arc::clone(&shared.loaded.load().registry);
    let bounds = TimeBounds {
        max_future_skew: shared.limits.max_future_skew,
    };
    let now = Timestamp::now();
    let mut batches = Vec::with_capacity(views.len());
    for view in views {
        if let Some(batch) = view_rows(&registry, view, &frame, now, &bounds)? {
            batches.push(batch);
        }
    }
    let writer = &shared.writer;
    let mut written = 0;
    for (id, rows) in batches {
        for chunk in rows.chunks(writer.batch_size()) {
            writer
                .write(&registry, id, chunk.to_vec())
                .await
                .map_err(|e| crate::api::write_failed(shared, &e, written))?;
            written += chunk.len();
        }
    }
    Ok(())
}

/// `df`: its columns, each a list of one value per row.
struct Frame<'a> {
    columns: &'a indexmap::IndexMap<String, Json>,
    rows: usize,
}

impl<'a> Frame<'a> {
    fn of(columns: &'a indexmap::IndexMap<String, Json>) -> Result<Self, ApiError> {
        let mut rows = None;
        for (name, values) in columns {
            let Json::Array(values) = values else {
                return Err(bad(
                    ErrorCode::InvalidRequest,
                    format!(
                        "column `{}` of `df` must be a list (one value per row)",
                        oka_ingest::record::printable(name)
                    ),
                ));
            };
            if *rows.get_or_insert(values.len()) != values.len() {
                return Err(bad(
                    ErrorCode::InvalidRequest,
                    "every column of `df` must have as many values (one per row)".to_owned(),
                ));
            }
        }
        Ok(Self {
            columns,
            rows: rows.unwrap_or(0),
        })
    }

    /// The values of the column holding `name` (a feature renamed by the
    /// view's `field_mapping` is found under its source column).
    fn column(&self, view: &FeatureView, name: &str) -> Option<&'a [Json]> {
        let source = view
            .field_mapping
            .iter()
            .find(|(_, to)| *to == name)
            .map(|(from, _)| from.as_str())
            .filter(|from| self.columns.contains_key(*from));
        match self.columns.get(source.unwrap_or(name)) {
            Some(Json::Array(values)) => Some(values),
            _ => None,
        }
    }
}

/// Records of one Oka feature, ready for the write path.
type Records = Vec<(EntityKey, Row)>;

/// A row that cannot be written, in words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadRow(String);

/// The columns of `df` a write to `view` reads: each join key and feature with
/// its values, in that order, and the event times (`None`: the write's time, as
/// Feast stamps an on-demand view's rows). Names every column missing.
#[allow(clippy::type_complexity)] // two borrowed views of the frame, named here once
fn view_columns<'f>(
    view: &'f FeatureView,
    frame: &Frame<'f>,
) -> Result<(Vec<(&'f Column, &'f [Json])>, Option<&'f [Json]>), BadRow> {
    let mut missing = Vec::new();
    let mut columns = Vec::new();
    for c in view.join_keys.iter().chain(&view.features) {
        match frame.column(view, &c.name) {
            Some(values) => columns.push((c, values)),
            None => missing.push(c.name.as_str()),
        }
    }
    let listed = |missing: &[&str]| {
        (missing.iter())
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if view.on_write.is_some() && missing.is_empty() {
        return Ok((columns, None));
    }
    if view.on_write.is_some() {
        return Err(BadRow(format!(
            "the rows to store lack the column(s) {}: an on-demand view's rows hold its join keys and every feature",
            listed(&missing)
        )));
    }
    let times = frame
        .columns
        .get(&view.timestamp_field)
        .and_then(Json::as_array);
    if times.is_none() {
        missing.push(&view.timestamp_field);
    }
    match times.filter(|_| missing.is_empty()) {
        Some(times) => Ok((columns, Some(times))),
        None => Err(BadRow(format!(
            "`df` lacks the column(s) {}: a write needs the view's join keys, every feature and its timestamp field `{}`, as Feast's does",
            listed(&missing),
            view.timestamp_field
        ))),
    }
}

/// The records of `view` in `frame`, checked; `None` when there is nothing to
/// write (no rows, or no feature value in any row, which Feast skips too).
fn view_rows(
    registry: &Registry,
    view: &FeatureView,
    frame: &Frame<'_>,
    now: Timestamp,
    bounds: &TimeBounds,
) -> Result<Option<(FeatureId, Records)>, ApiError> {
    let at = |m: String| {
        bad(
            ErrorCode::InvalidRequest,
            format!("feature view `{}`: {m}", view.name),
        )
    };
    let id = registry
        .feature_id(&view.name)
        .filter(|_| view.online)
        .ok_or_else(|| {
            at("it is not online (`online=False`), and Oka serves online views only".to_owned())
        })?;
    if view.timestamp_field.is_empty() && view.on_write.is_none() {
        return Err(at(
            "it has no batch source naming a timestamp field to write it with".to_owned(),
        ));
    }
    // An empty `df` writes nothing, as Feast's SDK writes nothing (with a warning).
    if frame.rows == 0 {
        return Ok(None);
    }
    let (columns, times) = view_columns(view, frame).map_err(|e| at(e.0))?;
    let keys = view.join_keys.len();
    if columns[keys..]
        .iter()
        .all(|(_, v)| v.iter().all(Json::is_null))
    {
        return Ok(None);
    }
    let feature = registry.feature(id);
    let parser = RecordParser::new(&feature.entity, now, bounds);
    let ts_column = oka_feast::spec::timestamp_column(view);
    let mut rows = Vec::with_capacity(frame.rows);
    let mut refused = Vec::new();
    for i in 0..frame.rows {
        let time = match times {
            Some(times) => event_time(&times[i]),
            None => Ok(now),
        };
        let row = time
            .and_then(|time| record(&columns, &ts_column, time, i))
            .and_then(|json| {
                parser
                    .parse_json(json.as_bytes())
                    .map_err(|e| BadRow(e.to_string()))
            })
            .and_then(|(key, row)| check_types(view, &feature.entity, &row).map(|()| (key, row)));
        match row {
            Ok(r) => rows.push(r),
            Err(why) => refused.push(format!("row {i}: {why}")),
        }
    }
    if refused.is_empty() {
        return Ok(Some((id, rows)));
    }
    let n = refused.len();
    refused.truncate(MAX_REPORTED);
    let more = if n > MAX_REPORTED {
        format!("; and {} more", n - MAX_REPORTED)
    } else {
        String::new()
    };
    Err(at(format!(
        "{n} of {} rows of `df` cannot be written, so nothing was: {}{more}",
        frame.rows,
        refused.join("; ")
    )))
}

/// Row `i` as an Oka record (JSON): the join keys and features as given (a
/// `FLOAT` rounded to 32 bits, as Feast's SDK stores it), the event time as RFC
/// 3339.
fn record(
    columns: &[(&Column, &[Json])],
    ts_column: &str,
    time: Timestamp,
    i: usize,
) -> Result<String, BadRow> {
    let mut record = serde_json::Map::with_capacity(columns.len() + 1);
    for (c, values) in columns {
        let v = &values[i];
        let v = match c.ty {
            FeastType::Float => narrow(v),
            FeastType::List(Scalar::Float) => match v {
                Json::Array(items) => Json::Array(items.iter().map(narrow).collect()),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        record.insert(c.name.clone(), v);
    }
    record.insert(ts_column.to_owned(), Json::String(time.to_rfc3339()));
    Ok(Json::Object(record).to_string())
}

/// A number as the nearest 32-bit float (widened back exactly), as Feast's SDK
/// writes a `Float32` feature; anything else unchanged.
fn narrow(v: &Json) -> Json {
    match v.as_f64() {
        Some(x) if !v.is_i64() && !v.is_u64() => serde_json::Number::from_f64(f64::from(x as f32))
            .map_or_else(|| v.clone(), Json::Number),
        _ => v.clone(),
    }
}

/// An event time of `df`: ISO 8601 with or without an offset (naive is UTC,
/// as Feast takes it), or a date. A number is refused: pandas would read it as
/// nanoseconds since 1970, which is rarely what was meant.
fn event_time(v: &Json) -> Result<Timestamp, BadRow> {
    let Json::String(s) = v else {
        return Err(BadRow(format!(
            "the event time {v} is not a date-time string: give it as ISO 8601 (`2026-01-02T03:04:05Z`, or without an offset for UTC)"
        )));
    };
    Timestamp::parse_iso_or_naive_utc(s)
        // A date alone (`2026-01-02`) is its midnight, UTC, as pandas reads it.
        .or_else(|| (s.len() == 10).then(|| Timestamp::parse_iso_or_naive_utc(&format!("{s}T00:00:00")))?)
        .ok_or_else(|| {
            BadRow(format!(
                "the event time `{}` is not ISO 8601 (`2026-01-02T03:04:05Z`, or without an offset for UTC)",
                oka_ingest::record::printable(s)
            ))
        })
}

/// Whether every feature value of `row` fits its Feast type (an int32 in range,
/// base64 bytes), as the store will write it.
fn check_types(view: &FeatureView, entity: &oka_core::Entity, row: &Row) -> Result<(), BadRow> {
    for c in &view.features {
        let Some(v) = entity
            .column_index(&c.name)
            .and_then(|i| row.columns.get(i))
        else {
            continue;
        };
        if let Err(e) = layout::from_oka(v, c.ty) {
            return Err(BadRow(format!("`{}`: {}", c.name, e)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_times_are_read_as_feast_reads_them() {
        let t = |s: &str| {
            event_time(&Json::String(s.into()))
                .map(Timestamp::to_rfc3339)
                .map_err(|e| e.0)
        };
        assert_eq!(
            t("2026-01-02T03:04:05Z").unwrap(),
            "2026-01-02T03:04:05.000000+00:00"
        );
        assert_eq!(
            t("2026-01-02 03:04:05").unwrap(),
            "2026-01-02T03:04:05.000000+00:00"
        );
        assert_eq!(
            t("2026-01-02T05:04:05+02:00").unwrap(),
            "2026-01-02T03:04:05.000000+00:00"
        );
        assert_eq!(t("2026-01-02").unwrap(), "2026-01-02T00:00:00.000000+00:00");
        assert!(t("yesterday").unwrap_err().contains("not ISO 8601"));
        let n = event_time(&serde_json::json!(1_700_000_000)).unwrap_err().0;
        assert!(n.contains("not a date-time string"), "{n}");
    }

    #[test]
    fn an_on_demand_view_written_needs_its_keys_and_features_and_no_time() {
        let column = |name: &str| Column {
            name: name.to_owned(),
            ty: FeastType::Double,
        };
        let view = FeatureView {
            name: "score".to_owned(),
            join_keys: vec![column("driver_id")],
            features: vec![column("score")],
            ttl: None,
            online: true,
            timestamp_field: String::new(),
            field_mapping: Default::default(),
            on_write: Some(Arc::from(&b"view"[..])),
        };
        let df: indexmap::IndexMap<String, Json> =
            serde_json::from_str(r#"{"driver_id": [1, 2], "score": [0.5, null]}"#).unwrap();
        let frame = Frame::of(&df).unwrap();
        let (columns, times) = view_columns(&view, &frame).unwrap();
        assert_eq!(columns.len(), 2);
        assert!(times.is_none(), "stamped with the write's time");
        let df: indexmap::IndexMap<String, Json> =
            serde_json::from_str(r#"{"driver_id": [1], "other": [2]}"#).unwrap();
        let why = view_columns(&view, &Frame::of(&df).unwrap()).unwrap_err().0;
        assert!(
            why.contains("`score`") && why.contains("join keys"),
            "{why}"
        );
        // A feature view's write needs its timestamp field.
        let stored = FeatureView {
            on_write: None,
            timestamp_field: "ts".to_owned(),
            ..view
        };
        let df: indexmap::IndexMap<String, Json> =
            serde_json::from_str(r#"{"driver_id": [1], "score": [2.0]}"#).unwrap();
        let why = view_columns(&stored, &Frame::of(&df).unwrap())
            .unwrap_err()
            .0;
        assert!(why.contains("`ts`"), "{why}");
    }

    #[test]
    fn floats_are_rounded_to_32_bits_as_feast_stores_them() {
        assert_eq!(
            narrow(&serde_json::json!(0.1)),
            serde_json::json!(f64::from(0.1f32))
        );
        assert_eq!(narrow(&serde_json::json!(3)), serde_json::json!(3));
        assert_eq!(narrow(&serde_json::json!("x")), serde_json::json!("x"));
    }
}
