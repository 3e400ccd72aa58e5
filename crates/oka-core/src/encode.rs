//! The response body, written straight into a byte buffer.
//!
//! `{"results": {feature: [[record, …] | null per key]}, "statuses": {feature:
//! ["present"|"missing"|"error"|"invalid_key", …]}, "errors": {feature: [null |
//! {"code": "udf_failed", "message": …}, …]}, "server_id": …}` (`errors` only
//! when a key failed, and only its features); a record is an object of the
//! entity's columns, timestamps in RFC 3339 (or, on Volga's routes, naive UTC as
//! Volga writes them: [`TimeFormat`]).

use crate::execute::{Outcome, Outputs};
use crate::registry::{Entity, Registry};
use crate::request::{Prepared, Target};
use crate::value::{Row, TimeFormat, Timestamp, Value, write_json_str};

/// Writes the response for `prepared` given its outputs, timestamps in `times`'
/// form. `server_id` is written verbatim (already JSON).
pub fn write_response(
    registry: &Registry,
    prepared: &Prepared,
    outputs: &Outputs,
    server_id: &str,
    times: TimeFormat,
    out: &mut Vec<u8>,
) {
    let mut stamps = Stamps::new(times);
    out.extend_from_slice(b"{\"results\":{");
    for (i, target) in prepared.targets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let f = registry.feature(target.feature);
        write_json_str(out, &f.name);
        out.extend_from_slice(b":[");
        for (k, o) in answers(prepared, outputs, target).enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match o {
                Some(Outcome::Present(rows)) => stamps.rows(&f.entity, rows, out),
                Some(Outcome::Missing | Outcome::Error(_)) | None => out.extend_from_slice(b"null"),
            }
        }
        out.push(b']');
    }
    out.extend_from_slice(b"},\"statuses\":{");
    for (i, target) in prepared.targets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, &registry.feature(target.feature).name);
        out.extend_from_slice(b":[");
        for (k, o) in answers(prepared, outputs, target).enumerate() {
            if k > 0 {
                out.push(b',');
            }
            write_status(o, out);
        }
        out.push(b']');
    }
    out.push(b'}');
    write_errors(registry, prepared, outputs, out);
    out.extend_from_slice(b",\"server_id\":");
    out.extend_from_slice(server_id.as_bytes());
    out.push(b'}');
}

/// A key's status as a JSON string: [`Outcome::status`], or [`INVALID_KEY`]
/// for a refused key; each a literal, so a copy of known length, not a call.
fn write_status(o: Option<&Outcome>, out: &mut Vec<u8>) {
    match o {
        Some(Outcome::Present(_)) => out.extend_from_slice(b"\"present\""),
        Some(Outcome::Missing) => out.extend_from_slice(b"\"missing\""),
        Some(Outcome::Error(_)) => out.extend_from_slice(b"\"error\""),
        None => out.extend_from_slice(b"\"invalid_key\""),
    }
}

/// The code of a key whose UDF failed, in `errors`.
pub const UDF_FAILED: &str = "udf_failed";

/// `,"errors":{feature: [null | {"code": "udf_failed", "message": …}, …]}` for
/// the targets with a failed key, when there are any: why each failed.
fn write_errors(registry: &Registry, prepared: &Prepared, outputs: &Outputs, out: &mut Vec<u8>) {
    let failed = |t: &&Target| outputs.of(t).iter().any(|o| matches!(o, Outcome::Error(_)));
    let mut first = true;
    for target in prepared.targets.iter().filter(failed) {
        out.extend_from_slice(if first { b",\"errors\":{" } else { b"," });
        first = false;
        write_json_str(out, &registry.feature(target.feature).name);
        out.extend_from_slice(b":[");
        for (k, o) in answers(prepared, outputs, target).enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match o {
                Some(Outcome::Error(why)) => {
                    out.extend_from_slice(b"{\"code\":\"");
                    out.extend_from_slice(UDF_FAILED.as_bytes());
                    out.extend_from_slice(b"\",\"message\":");
                    write_json_str(out, why);
                    out.push(b'}');
                }
                _ => out.extend_from_slice(b"null"),
            }
        }
        out.push(b']');
    }
    if !first {
        out.push(b'}');
    }
}

/// The status of a key refused under [`KeyPolicy::NullForBadKeys`](crate::KeyPolicy).
pub const INVALID_KEY: &str = "invalid_key";

/// A target's outcome for each key of the request's key list: `None` for a key
/// refused under [`KeyPolicy::NullForBadKeys`](crate::KeyPolicy).
pub fn answers<'o>(
    prepared: &Prepared,
    outputs: &'o Outputs,
    target: &Target,
) -> impl Iterator<Item = Option<&'o Outcome>> + use<'o> {
    let outcomes = outputs.of(target);
    let served = prepared
        .groups
        .get(target.group)
        .and_then(|g| g.served.clone());
    let requested = served.as_ref().map_or(outcomes.len(), |(n, _)| *n);
    let mut next = 0;
    (0..requested).map(move |k| match &served {
        None => outcomes.get(k),
        Some((_, indices)) if indices.get(next) == Some(&k) => {
            next += 1;
            outcomes.get(next - 1)
        }
        Some(_) => None,
    })
}

/// Writes a list of records as JSON objects.
pub fn write_rows(entity: &Entity, rows: &[Row], times: TimeFormat, out: &mut Vec<u8>) {
    Stamps::new(times).rows(entity, rows, out);
}

/// Writes one record as a JSON object of the entity's columns, in the entity's
/// answer order.
pub fn write_row(entity: &Entity, row: &Row, times: TimeFormat, out: &mut Vec<u8>) {
    Stamps::new(times).row(entity, row, out);
}

/// Writes values with timestamps in one form, remembering the text of the last
/// timestamp written: the records of one answer mostly carry the same one (an
/// on-demand feature's `now`), and formatting it cost a quarter of a record.
struct Stamps {
    times: TimeFormat,
    last: Option<Timestamp>,
    text: [u8; Self::CAP],
    len: usize,
}

impl Stamps {
    /// Room for the longest timestamp with its quotes (`"…T…+00:00"`: 34 bytes).
    const CAP: usize = 48;

    fn new(times: TimeFormat) -> Self {
        Self {
            times,
            last: None,
            text: [0; Self::CAP],
            len: 0,
        }
    }

    fn rows(&mut self, entity: &Entity, rows: &[Row], out: &mut Vec<u8>) {
        out.push(b'[');
        for (r, row) in rows.iter().enumerate() {
            if r > 0 {
                out.push(b',');
            }
            self.row(entity, row, out);
        }
        out.push(b']');
    }

    fn row(&mut self, entity: &Entity, row: &Row, out: &mut Vec<u8>) {
        // A record with every column (all but a record read from an older
        // schema): each value after the bytes its entity keeps before it.
        if row.columns.len() >= entity.columns.len() && !entity.columns.is_empty() {
            for (c, before) in entity.answer_fields() {
                out.extend_from_slice(before);
                if let Some(v) = row.columns.get(*c) {
                    self.value(v, out);
                }
            }
            out.push(b'}');
            return;
        }
        out.push(b'{');
        let mut first = true;
        for &c in entity.answer_order() {
            let Some(v) = row.columns.get(c) else {
                continue;
            };
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(entity.json_key(c));
            self.value(v, out);
        }
        out.push(b'}');
    }

    fn value(&mut self, v: &Value, out: &mut Vec<u8>) {
        let Value::Timestamp(t) = v else {
            v.write_json_as(out, self.times);
            return;
        };
        if self.last == Some(*t) {
            out.extend_from_slice(&self.text[..self.len]);
            return;
        }
        let start = out.len();
        v.write_json_as(out, self.times);
        let written = &out[start..];
        if let Some(text) = self.text.get_mut(..written.len()) {
            text.copy_from_slice(written);
            self.len = written.len();
            self.last = Some(*t);
        }
    }
}

/// OpenAPI schemas of the answer [`write_response`] writes (feature `openapi`).
/// Nothing serializes these types: they describe the encoder's output, and take
/// the status names from the code that writes them.
#[cfg(feature = "openapi")]
pub mod openapi {
    use indexmap::IndexMap;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};

    use crate::execute::Outcome;

    /// A record: an object of an entity's columns.
    #[derive(Debug)]
    pub struct Record;

    impl utoipa::PartialSchema for Record {
        fn schema() -> RefOr<Schema> {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(AdditionalProperties::FreeForm(true)))
                .description(Some(
                    "A record: an object of the entity's columns, in its answer order (key fields, the timestamp field, then value fields, unless the entity's `order` gives another). Values are typed as the entity declares them; a float is always written with a fraction, NaN and ±infinity as `null`. Timestamps are RFC 3339 with an explicit `+00:00` offset on `/v1/features`, naive UTC (`2026-12-02T11:16:20.321078`) on Volga's routes. A key field that the key object did not carry is `null`.",
                ))
                .examples([serde_json::json!({"id": "test-id-21", "value": 42.0, "timestamp": "2026-12-02T11:24:08.302133+00:00"})])
                .into()
        }
    }

    impl utoipa::ToSchema for Record {}

    /// The status of one key of one target.
    #[derive(Debug)]
    pub struct KeyStatus;

    impl utoipa::PartialSchema for KeyStatus {
        fn schema() -> RefOr<Schema> {
            let names = [
                Outcome::Present(Vec::new().into()).status(),
                Outcome::Missing.status(),
                Outcome::Error("why".into()).status(),
                super::INVALID_KEY,
            ];
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(names))
                .description(Some(
                    "`present`: computed or read (the value is its records). `missing`: a `latest` read found nothing for the key, for the target or an input of its UDF (the value is `null`). `error`: the feature's UDF, or one it depends on, failed for this key (`null`). `invalid_key`: Volga's routes only, the key object does not fit the entity (`null`).",
                ))
                .into()
        }
    }

    impl utoipa::ToSchema for KeyStatus {}

    /// Why one key of one target failed.
    #[derive(Debug, utoipa::ToSchema)]
    pub struct KeyError {
        /// Always `udf_failed`.
        #[schema(examples("udf_failed"))]
        pub code: String,
        /// What failed, in words: the UDF's error (a Python exception's type and
        /// message; a returned value that does not fit the output, naming the field
        /// and what came back), or `` `input` failed: … `` for a feature whose input failed.
        #[schema(examples("ZeroDivisionError: float division by zero"))]
        pub message: String,
    }

    /// The answer to `POST /v1/features`.
    #[derive(Debug, utoipa::ToSchema)]
    pub struct FeatureResponse {
        /// For each distinct target, in request order: one value per key of its key
        /// list, in key order. A value is a list of records (one for a `latest` read
        /// or a CEL UDF; oldest first, possibly empty, for `range`/`last_n`), or
        /// `null` when the key's status is not `present`.
        pub results: IndexMap<String, Vec<Option<Vec<Record>>>>,
        /// For each distinct target, in request order: one status per key.
        pub statuses: IndexMap<String, Vec<KeyStatus>>,
        /// Only when a key's status is `error`, and only for the targets with
        /// one: per key, why it failed (`null` for the keys that did not).
        #[schema(required = false)]
        pub errors: IndexMap<String, Vec<Option<KeyError>>>,
        /// The worker that answered, `"<host>/<worker>"` (the 0-based worker number).
        #[schema(examples("vm/0"))]
        pub server_id: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_in_its_entitys_answer_order() {
        use crate::entity::Column;
        use crate::value::FieldType;
        let column = |name: &str, ty| Column {
            name: name.into(),
            ty,
        };
        let columns = vec![
            column("id", FieldType::String),
            column("ts", FieldType::Timestamp),
            column("v\"1", FieldType::Float),
        ];
        let entity = Entity::new("E", columns, vec![0], 1);
        let t = Timestamp(1_764_936_000_000_000);
        let row = Row::new(
            t,
            vec![
                Value::String("k".into()),
                Value::Timestamp(t),
                Value::Float(2.0),
            ],
        );
        let short = Row::new(t, vec![Value::String("k".into()), Value::Timestamp(t)]);
        let write = |entity: &Entity, row: &Row| {
            let mut out = Vec::new();
            write_row(entity, row, TimeFormat::NaiveUtc, &mut out);
            String::from_utf8(out).unwrap()
        };
        let ts = r#""2025-12-05T12:00:00""#;
        assert_eq!(
            write(&entity, &row),
            format!(r#"{{"id":"k","ts":{ts},"v\"1":2.0}}"#)
        );
        // A record from an older schema, without its last column.
        assert_eq!(write(&entity, &short), format!(r#"{{"id":"k","ts":{ts}}}"#));
        let entity = entity.answering_in(vec![2, 0, 1]).unwrap();
        assert_eq!(
            write(&entity, &row),
            format!(r#"{{"v\"1":2.0,"id":"k","ts":{ts}}}"#)
        );
        assert_eq!(write(&entity, &short), format!(r#"{{"id":"k","ts":{ts}}}"#));
    }

    #[test]
    fn a_status_is_written_as_its_name() {
        let present = Outcome::Present(Vec::new().into());
        let missing = Outcome::Missing;
        let error = Outcome::Error("why".into());
        for o in [Some(&present), Some(&missing), Some(&error), None] {
            let mut got = Vec::new();
            write_status(o, &mut got);
            let name = o.map_or(INVALID_KEY, Outcome::status);
            assert_eq!(String::from_utf8_lossy(&got), format!("\"{name}\""));
        }
    }

    #[test]
    fn a_remembered_timestamp_is_written_as_when_formatted() {
        let t1 = Value::Timestamp(Timestamp(1_764_936_000_123_456));
        let t2 = Value::Timestamp(Timestamp(1_764_936_001_000_000));
        let far = Value::Timestamp(Timestamp(i64::MAX));
        let values = [&t1, &t1, &t2, &t1, &far, &far, &Value::Float(2.0), &t2];
        for times in [TimeFormat::Rfc3339, TimeFormat::NaiveUtc] {
            let mut stamps = Stamps::new(times);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for v in values {
                stamps.value(v, &mut got);
                v.write_json_as(&mut want, times);
            }
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}
