//! The body of `POST /v1/ingest`: `{"feature": …, "records": [{…}, …]}`.
//!
//! The body is checked as JSON once, keeping `records` as one borrowed slice of
//! the body (no copy, no tree); its records are then taken from that slice one by
//! one, parsed into rows a batch at a time, and each batch is written before the
//! next is parsed, so a request holds its body plus one batch of rows, whatever
//! its record count.

use std::borrow::Cow;
use std::sync::Arc;

use oka_core::json::BodyError as JsonError;
use oka_core::{FeatureId, Registry, Timestamp};
use oka_storage::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::record::{RecordParser, TimeBounds};
use crate::writer::WritePath;

/// How many rejected records an answer details.
pub const MAX_REPORTED: usize = 100;

/// An ingest body, `{"feature": …, "records": […]}`; `records` is kept as the
/// body's text and read one record at a time.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = IngestRequest, examples(
    json!({"feature": "test_feature", "records": [{"id": "user/42", "value": 3.5, "timestamp": "2026-12-02T10:00:00Z"}, {"id": "user/42", "value": 4.5}]}),
)))]
#[serde(deny_unknown_fields)]
pub struct RawBody<'a> {
    /// The pipeline feature the records belong to.
    #[serde(borrow)]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub feature: Cow<'a, str>,
    /// The records: objects of the entity's columns. Key fields are required; the
    /// timestamp field is optional (an RFC 3339 string or epoch seconds; the
    /// server's time at receipt if absent); value fields are optional (`null` if
    /// absent). A record with an unknown field, a wrong type or an out-of-range
    /// timestamp, or that is not an object at all, is rejected alone (listed in
    /// the answer's `errors`): any JSON value is taken here.
    #[serde(borrow)]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Value>))]
    pub records: &'a RawValue,
}

/// The elements of a JSON array's text, already checked to be valid JSON, as
/// borrowed slices, in order.
struct Elements<'a> {
    /// What follows the `[` or the last element.
    rest: &'a str,
    first: bool,
}

impl<'a> Elements<'a> {
    /// The elements of `array`; `None` if it is not an array.
    fn of(array: &'a str) -> Option<Self> {
        let rest = array.trim_start().strip_prefix('[')?;
        Some(Self { rest, first: true })
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = Result<&'a str, BodyError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rest = self.rest.trim_start();
        if rest.starts_with(']') {
            return None;
        }
        if !self.first {
            rest = match rest.strip_prefix(',') {
                Some(r) => r.trim_start(),
                None => {
                    return Some(Err(BodyError::Malformed(
                        "expected `,` or `]` in `records`".to_owned(),
                    )));
                }
            };
        }
        self.first = false;
        let mut de = serde_json::Deserializer::from_str(rest);
        let value = match <&RawValue>::deserialize(&mut de) {
            Ok(v) => v.get(),
            Err(e) => return Some(Err(BodyError::Malformed(e.to_string()))),
        };
        // `value` is a slice of `rest`: continue after it.
        let end = value.as_ptr() as usize - rest.as_ptr() as usize + value.len();
        self.rest = rest.get(end..).unwrap_or_default();
        Some(Ok(value))
    }
}

/// Why a body was not ingested.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// Not JSON, or not the expected shape.
    #[error("invalid ingest body: {0}")]
    Malformed(String),
    /// A top-level field other than `feature` and `records`.
    #[error("invalid ingest body: {0}")]
    UnknownField(String),
    /// The feature is not in the spec.
    #[error("unknown feature `{0}`")]
    UnknownFeature(String),
    /// The feature is computed on demand, not stored.
    #[error("`{0}` is an on-demand feature; only pipeline features are ingested")]
    NotPipeline(String),
    /// The store failed a batch after the writer's retries; the batches before it
    /// were written.
    #[error("the feature store failed after {written} records were written: {error}")]
    Store {
        /// The store's error.
        error: StoreError,
        /// Records written before the failure.
        written: usize,
    },
}

/// One rejected record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rejection {
    /// Its position in `records`.
    pub index: usize,
    /// Why.
    pub message: String,
}

/// The answer to an ingest body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = IngestSummary))]
pub struct BodySummary {
    /// Records written.
    pub written: usize,
    /// Records rejected (not written).
    pub rejected: usize,
    /// The first `MAX_REPORTED` (100) rejections, in body order.
    pub errors: Vec<Rejection>,
}

/// Writes the valid records of an ingest body through `writer`, `batch_size` at a
/// time, and reports the rest. Timestamps are checked against `bounds` from `now`.
pub async fn ingest(
    body: &[u8],
    registry: &Arc<Registry>,
    writer: &WritePath,
    now: Timestamp,
    bounds: &TimeBounds,
    batch_size: usize,
) -> Result<BodySummary, BodyError> {
    let raw: RawBody<'_> = oka_core::json::from_slice_strict(body, &["feature", "records"])
        .map_err(|e| match e {
            JsonError::UnknownField { field, expected } => BodyError::UnknownField(format!(
                "unknown field `{}`, expected one of {expected}",
                crate::record::printable(&field)
            )),
            JsonError::Malformed(e) => BodyError::Malformed(e.to_string()),
        })?;
    let id: FeatureId = registry
        .feature_id(&raw.feature)
        .ok_or_else(|| BodyError::UnknownFeature(crate::record::printable(&raw.feature).into()))?;
    let feature = registry.feature(id);
    if !feature.is_pipeline() {
        return Err(BodyError::NotPipeline(feature.name.to_string()));
    }
    let mut records = Elements::of(raw.records.get())
        .ok_or_else(|| BodyError::Malformed("`records` must be a list of objects".to_owned()))?;
    let parser = RecordParser::new(&feature.entity, now, bounds);
    let mut summary = BodySummary {
        written: 0,
        rejected: 0,
        errors: Vec::new(),
    };
    let batch_size = batch_size.max(1);
    let mut index = 0;
    loop {
        let mut rows = Vec::with_capacity(batch_size);
        let mut taken = 0;
        for record in records.by_ref().take(batch_size) {
            taken += 1;
            let record = record?;
            match parser.parse_json(record.as_bytes()) {
                Ok(row) => rows.push(row),
                Err(why) => {
                    summary.rejected += 1;
                    if summary.errors.len() < MAX_REPORTED {
                        summary.errors.push(Rejection {
                            index,
                            message: why.to_string(),
                        });
                    }
                }
            }
            index += 1;
        }
        if taken == 0 {
            return Ok(summary);
        }
        let n = rows.len();
        if let Err(error) = writer.write(registry, id, rows).await {
            return Err(BodyError::Store {
                error,
                written: summary.written,
            });
        }
        summary.written += n;
        if taken < batch_size {
            return Ok(summary);
        }
    }
}

#[cfg(test)]
mod tests {
    use oka_core::{EntityKey, NativeUdfs, Query, Value};
    use oka_storage::{FeatureStore, MemoryStore};

    use super::*;
    use crate::NoMetrics;
    use crate::writer::WriterConfig;

    fn registry() -> Arc<Registry> {
        let yaml = "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}\nfeatures:\n  p: {kind: pipeline, entity: E}\n  q: {kind: on_demand, entity: E, dependencies: [p], udf: {expr: {v: 'p.v'}}}\n";
        Arc::new(Registry::from_yaml("t", yaml, &NativeUdfs::new()).unwrap())
    }

    #[tokio::test]
    async fn writes_valid_records_in_batches_and_reports_the_rest_by_index() {
        let store = Arc::new(MemoryStore::default());
        let writer = WritePath::spawn(store.clone(), Arc::new(NoMetrics), WriterConfig::default());
        let r = registry();
        let mut records: Vec<String> = (0..25)
            .map(|i| format!(r#"{{"id":"k{i}","v":{i}}}"#))
            .collect();
        records[3] = r#"{"id":"k3","v":"x"}"#.to_owned();
        records[17] = r#"{"id":"k17","ts":9e12}"#.to_owned();
        records[24] = r#"{"v":1}"#.to_owned();
        let body = format!(r#"{{"feature":"p","records":[{}]}}"#, records.join(","));
        let s = ingest(
            body.as_bytes(),
            &r,
            &writer,
            Timestamp::now(),
            &TimeBounds::default(),
            10,
        )
        .await
        .unwrap();
        assert_eq!((s.written, s.rejected), (22, 3));
        let idx: Vec<usize> = s.errors.iter().map(|e| e.index).collect();
        assert_eq!(idx, [3, 17, 24]);
        assert!(
            s.errors[1].message.contains("outside the accepted range"),
            "{:?}",
            s.errors
        );
        let keys: Vec<EntityKey> = ["k0", "k3", "k23"]
            .iter()
            .map(|k| EntityKey::encode(&[Value::from(*k)]))
            .collect();
        let got = store
            .read(r.feature(0), &keys, &Query::Latest)
            .await
            .unwrap();
        assert_eq!(
            got.iter().map(<[oka_core::Row]>::len).collect::<Vec<_>>(),
            [1, 0, 1]
        );
    }

    #[tokio::test]
    async fn records_are_taken_one_by_one_whatever_the_spacing() {
        let store = Arc::new(MemoryStore::default());
        let writer = WritePath::spawn(store, Arc::new(NoMetrics), WriterConfig::default());
        let r = registry();
        for (body, written) in [
            (r#"{"records":[],"feature":"p"}"#, 0),
            (r#"{"feature":"p","records":[ ]}"#, 0),
            (
                "{\"feature\":\"p\",\"records\":[ {\"id\":\"a\"} ,\n{\"id\":\"b\",\"v\":[1,2]} ]}",
                1,
            ),
            (
                r#"{"feature":"p","records":[{"id":"a"},{"id":"b"},{"id":"c"},{"id":"d"}]}"#,
                4,
            ),
            (
                r#"{"feature":"p","records":[{"id":"a"},{"id":"b"},{"id":"c"},{"id":"d"},{"id":"e"}]}"#,
                5,
            ),
        ] {
            let s = ingest(
                body.as_bytes(),
                &r,
                &writer,
                Timestamp::now(),
                &TimeBounds::default(),
                2,
            )
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"));
            assert_eq!(s.written, written, "{body}");
        }
    }

    #[tokio::test]
    async fn shape_errors_write_nothing() {
        let store = Arc::new(MemoryStore::default());
        let writer = WritePath::spawn(store, Arc::new(NoMetrics), WriterConfig::default());
        let r = registry();
        let run = |body: &'static str| {
            let (r, w) = (Arc::clone(&r), writer.clone());
            async move {
                ingest(
                    body.as_bytes(),
                    &r,
                    &w,
                    Timestamp::now(),
                    &TimeBounds::default(),
                    10,
                )
                .await
            }
        };
        assert!(matches!(
            run(r#"{"feature":"p","records":{}}"#).await,
            Err(BodyError::Malformed(_))
        ));
        assert!(matches!(
            run(r#"{"feature":"p","records":[],"x":1}"#).await,
            Err(BodyError::UnknownField(_))
        ));
        assert!(matches!(
            run(r#"{"feature":"p","records":[{"id":"a"}, {"id": ]}"#).await,
            Err(BodyError::Malformed(_))
        ));
        assert!(matches!(
            run(r#"{"feature":"p","records":"x"}"#).await,
            Err(BodyError::Malformed(_))
        ));
        assert!(matches!(
            run(r#"{"feature":"nope","records":[]}"#).await,
            Err(BodyError::UnknownFeature(_))
        ));
        assert!(matches!(
            run(r#"{"feature":"q","records":[]}"#).await,
            Err(BodyError::NotPipeline(_))
        ));
        let ok = run(r#"{"feature":"p","records":[]}"#).await.unwrap();
        assert_eq!((ok.written, ok.rejected), (0, 0));
    }
}
