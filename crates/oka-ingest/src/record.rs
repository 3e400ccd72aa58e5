//! One record (a JSON object, or the cells of a CSV row) → its entity key and a
//! compact row, checked against time bounds.
//!
//! JSON is parsed straight into the entity's columns with a serde
//! [`DeserializeSeed`]: no `serde_json::Value` tree is built per record. The
//! semantics are those of a field-by-field decoding of a `serde_json` tree (the
//! tests check the two agree: unknown fields, required keys, a
//! missing timestamp meaning "now", the last of duplicate fields winning), and both
//! formats then go through one check of the values: every timestamp within
//! [`MIN_TIME`]`..=`[`MAX_TIME`], the event time at most `now` plus the allowed
//! clock skew, and every float finite.
//!
//! Error messages echo user data only through [`printable`], so a hostile file
//! cannot send escape sequences to the terminal that shows them.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use oka_core::{Entity, EntityKey, FieldType, Row, Timestamp, Value};

pub use crate::reject::{BadValue, RecordError, printable, terminal_safe};
use crate::reject::{show_instant, show_number, show_skew, show_span};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The earliest accepted instant: 1970-01-01T00:00:00Z.
pub const MIN_TIME: Timestamp = Timestamp(0);

/// The latest accepted instant: 9999-12-31T23:59:59.999999Z.
pub const MAX_TIME: Timestamp = Timestamp(253_402_300_799_999_999);

/// Limits on the timestamps of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBounds {
    /// How far past the parser's `now` an event time may lie (clock skew between
    /// the producer and this process).
    pub max_future_skew: Duration,
}

impl Default for TimeBounds {
    fn default() -> Self {
        Self {
            max_future_skew: Duration::from_secs(5 * 60),
        }
    }
}

/// Parses records of one entity into `(key, row)` pairs.
///
/// Built once per input (it indexes the entity's column names); parsing a record
/// only reads it, so one parser serves any number of records.
#[derive(Debug, Clone)]
pub struct RecordParser<'e> {
    entity: &'e Entity,
    /// The event time of records without one.
    now: Timestamp,
    /// The latest accepted event time: `now` plus the skew, saturating.
    latest: Timestamp,
    /// The allowed skew, for messages.
    skew: Duration,
    /// Column indices by name.
    by_name: HashMap<&'e str, usize>,
    /// Whether each column is a key column.
    is_key: Vec<bool>,
    /// Whether a record without an event time is an error (history files)
    /// rather than an event of `now` (live writes).
    time_required: bool,
}

/// What a record said about each column: nothing (`None`), a value, or why its
/// value was rejected. A later duplicate field replaces an earlier one, rejected
/// or not.
type Slots = Vec<Option<Result<Value, BadValue>>>;

impl<'e> RecordParser<'e> {
    /// A parser for `entity`'s records; records without an event time get `now`,
    /// and event times past `now + bounds.max_future_skew` are rejected.
    pub fn new(entity: &'e Entity, now: Timestamp, bounds: &TimeBounds) -> Self {
        let skew_micros = i64::try_from(bounds.max_future_skew.as_micros()).unwrap_or(i64::MAX);
        let mut is_key = vec![false; entity.columns.len()];
        for i in entity.key_columns() {
            if let Some(k) = is_key.get_mut(i) {
                *k = true;
            }
        }
        Self {
            entity,
            now,
            latest: Timestamp(now.0.saturating_add(skew_micros)),
            skew: bounds.max_future_skew,
            by_name: entity
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| (&*c.name, i))
                .collect(),
            is_key,
            time_required: false,
        }
    }

    /// The same parser, refusing records without an event time (a history
    /// record has no "now" to default to).
    pub fn requiring_time(mut self) -> Self {
        self.time_required = true;
        self
    }

    /// Checks one record given as the entity's column values, in column order
    /// (as a columnar file holds them; `Null` for none), as a parsed record is.
    pub fn parse_values(&self, values: Vec<Value>) -> Result<(EntityKey, Row), RecordError> {
        if values.len() != self.entity.columns.len() {
            return Err(RecordError::FieldCount {
                expected: self.entity.columns.len(),
                found: values.len(),
            });
        }
        self.finish(values.into_iter().map(|v| Some(Ok(v))).collect(), self.now)
    }

    /// The entity whose records this parses.
    pub fn entity(&self) -> &'e Entity {
        self.entity
    }

    /// A column's index by name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Parses one JSON object of the entity's fields.
    ///
    /// Key fields are required; a missing or null timestamp is `now`; a missing
    /// value field is null; unknown fields, wrong types and values outside the
    /// bounds are errors. Anything but exactly one JSON object (with surrounding
    /// whitespace) is an error starting `not a JSON object:`.
    pub fn parse_json(&self, text: &[u8]) -> Result<(EntityKey, Row), RecordError> {
        self.parse_json_at(text, self.now)
    }

    /// As [`parse_json`](Self::parse_json), with `default_time` as the event
    /// time of a record without one (a Kafka message's timestamp, say); the
    /// bounds are still those of the parser's `now`.
    pub fn parse_json_at(
        &self,
        text: &[u8],
        default_time: Timestamp,
    ) -> Result<(EntityKey, Row), RecordError> {
        let mut de = serde_json::Deserializer::from_slice(text);
        let mut unknown = None;
        let slots = RowSeed {
            parser: self,
            unknown: &mut unknown,
        }
        .deserialize(&mut de)
        .and_then(|slots| de.end().map(|()| slots))
        .map_err(|e| RecordError::NotAnObject(e.to_string()))?;
        if let Some(name) = unknown {
            return Err(RecordError::UnknownField {
                entity: printable(&self.entity.name).into_owned(),
                field: printable(&name).into_owned(),
            });
        }
        self.finish(slots, default_time)
    }

    /// Parses the cells of one CSV record; `header[i]` is the column index of
    /// cell `i`.
    ///
    /// An empty cell is null; ints and floats are numbers; bools are `true`,
    /// `false`, `1` or `0`; a timestamp is epoch seconds or RFC 3339; a list is a
    /// JSON list. The rest is as [`parse_json`](Self::parse_json).
    pub fn parse_cells(
        &self,
        header: &[usize],
        cells: &[&str],
    ) -> Result<(EntityKey, Row), RecordError> {
        if cells.len() != header.len() {
            return Err(RecordError::FieldCount {
                expected: header.len(),
                found: cells.len(),
            });
        }
        let mut slots: Slots = vec![None; self.entity.columns.len()];
        for (&col, cell) in header.iter().zip(cells) {
            let (Some(slot), Some(column)) = (slots.get_mut(col), self.entity.columns.get(col))
            else {
                return Err(RecordError::ColumnIndex {
                    index: col,
                    entity: printable(&self.entity.name).into_owned(),
                });
            };
            *slot = Some(cell_value(&column.ty, cell));
        }
        self.finish(slots, self.now)
    }

    /// Resolves the slots into columns (required keys, the default event time),
    /// checks the bounds, and encodes the key.
    fn finish(
        &self,
        slots: Slots,
        default_time: Timestamp,
    ) -> Result<(EntityKey, Row), RecordError> {
        let mut columns = Vec::with_capacity(slots.len());
        for (i, (column, slot)) in self.entity.columns.iter().zip(slots).enumerate() {
            let value = match slot {
                Some(Err(problem)) => return Err(RecordError::field(&column.name, problem)),
                Some(Ok(v)) if !v.is_null() => v,
                _ if self.is_key.get(i).copied().unwrap_or(false) => {
                    return Err(RecordError::MissingKey(
                        printable(&column.name).into_owned(),
                    ));
                }
                _ if i == self.entity.timestamp_index && self.time_required => {
                    return Err(RecordError::MissingTime(
                        printable(&column.name).into_owned(),
                    ));
                }
                _ if i == self.entity.timestamp_index => Value::Timestamp(default_time),
                _ => Value::Null,
            };
            columns.push(value);
        }
        let ts_name = self.entity.timestamp_name();
        let Some(&Value::Timestamp(event_time)) = columns.get(self.entity.timestamp_index) else {
            return Err(RecordError::NotATimestamp(printable(ts_name).into_owned()));
        };
        for (column, value) in self.entity.columns.iter().zip(&columns) {
            check_value(&column.name, value)?;
        }
        if event_time > self.latest {
            return Err(self.too_far_ahead(ts_name, event_time));
        }
        let key = EntityKey::encode(self.entity.key_index.iter().filter_map(|&i| columns.get(i)));
        Ok((key, Row::new(event_time, columns)))
    }

    /// The rejection of an event time past `now + skew`.
    fn too_far_ahead(&self, field: &str, t: Timestamp) -> RecordError {
        RecordError::TooFarAhead {
            field: printable(field).into_owned(),
            instant: show_instant(t),
            ahead: show_span(t.0.saturating_sub(self.now.0)),
            skew: show_skew(self.skew),
        }
    }
}

/// Rejects non-finite floats and timestamps outside [`MIN_TIME`]`..=`[`MAX_TIME`],
/// inside lists too. This is the one check both formats share.
fn check_value(field: &str, value: &Value) -> Result<(), RecordError> {
    match value {
        Value::Float(f) if !f.is_finite() => Err(RecordError::field(field, BadValue::NonFinite)),
        Value::Timestamp(t) if !(MIN_TIME..=MAX_TIME).contains(t) => Err(RecordError::field(
            field,
            BadValue::OutsideRange {
                shown: show_instant(*t),
                after: *t > MAX_TIME,
            },
        )),
        Value::List(items) => items.iter().try_for_each(|v| check_value(field, v)),
        _ => Ok(()),
    }
}

/// A CSV cell as a value of `ty`; an empty cell is null.
fn cell_value(ty: &FieldType, cell: &str) -> Result<Value, BadValue> {
    if cell.is_empty() {
        return Ok(Value::Null);
    }
    match ty {
        FieldType::String => Ok(Value::String(cell.into())),
        FieldType::Int => match cell_number(cell)? {
            Value::Float(f) if !f.is_finite() => Err(BadValue::NonFinite),
            Value::Float(_) => Err(mismatch(ty, "float")),
            n => Ok(n),
        },
        FieldType::Float => match cell_number(cell)? {
            Value::Int(i) => Ok(Value::Float(i as f64)),
            // Non-finite floats are rejected by the shared check.
            f => Ok(f),
        },
        FieldType::Bool => match cell {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(BadValue::NotABool(printable(cell).into_owned())),
        },
        FieldType::Timestamp => match cell_number(cell) {
            Ok(Value::Int(i)) => epoch_seconds(i as f64),
            Ok(Value::Float(f)) if !f.is_finite() => Err(BadValue::NonFinite),
            Ok(Value::Float(f)) => epoch_seconds(f),
            _ => rfc3339(cell),
        },
        FieldType::List(_) => {
            let mut de = serde_json::Deserializer::from_str(cell);
            ValueSeed(ty)
                .deserialize(&mut de)
                .and_then(|v| de.end().map(|()| v))
                .unwrap_or_else(|_| Err(BadValue::NotAList(printable(cell).into_owned())))
        }
    }
}

/// A CSV cell as an int or, failing that, a float (possibly non-finite).
fn cell_number(cell: &str) -> Result<Value, BadValue> {
    if let Ok(i) = cell.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    cell.parse::<f64>()
        .map(Value::Float)
        .map_err(|_| BadValue::NotANumber(printable(cell).into_owned()))
}

/// Epoch seconds as a timestamp; an error when the microseconds overflow.
fn epoch_seconds(secs: f64) -> Result<Value, BadValue> {
    Timestamp::from_epoch_seconds(secs)
        .map(Value::Timestamp)
        .ok_or_else(|| BadValue::OutsideRange {
            shown: format!("{} epoch seconds", show_number(secs)),
            after: secs > 0.0,
        })
}

/// An RFC 3339 string as a timestamp.
fn rfc3339(text: &str) -> Result<Value, BadValue> {
    Timestamp::parse_rfc3339(text)
        .map(Value::Timestamp)
        .ok_or_else(|| BadValue::Rfc3339(printable(text).into_owned()))
}

/// "expected T, got K".
fn mismatch(ty: &FieldType, got: &'static str) -> BadValue {
    BadValue::Mismatch {
        expected: ty.clone(),
        got,
    }
}

/// Deserializes one JSON object into [`Slots`], remembering the first unknown
/// field's name.
struct RowSeed<'p, 'e> {
    parser: &'p RecordParser<'e>,
    unknown: &'p mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_, '_> {
    type Value = Slots;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Slots, D::Error> {
        // `any`, not `map`, so that a non-object reaches the visitor and its
        // message does not echo the value.
        deserializer.deserialize_any(self)
    }
}

impl RowSeed<'_, '_> {
    /// The error for a JSON value that is not an object.
    fn found<E: de::Error>(kind: &str) -> Result<Slots, E> {
        Err(E::custom(format_args!("found {kind}")))
    }
}

impl<'de> Visitor<'de> for RowSeed<'_, '_> {
    type Value = Slots;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slots, A::Error> {
        let columns = &self.parser.entity.columns;
        let mut slots: Slots = vec![None; columns.len()];
        while let Some(key) = map.next_key_seed(KeySeed {
            parser: self.parser,
            unknown: &mut *self.unknown,
        })? {
            match key.and_then(|i| Some((slots.get_mut(i)?, &columns.get(i)?.ty))) {
                Some((slot, ty)) => *slot = Some(map.next_value_seed(ValueSeed(ty))?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(slots)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Slots, E> {
        Self::found("null")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Slots, E> {
        Self::found("a bool")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Slots, E> {
        Self::found("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Slots, E> {
        Self::found("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Slots, E> {
        Self::found("a number")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Slots, E> {
        Self::found("a string")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Slots, A::Error> {
        Self::found("a list")
    }
}

/// Deserializes an object key into a column index (`None` for an unknown field,
/// whose name is kept when it is the first).
struct KeySeed<'p, 'e> {
    parser: &'p RecordParser<'e>,
    unknown: &'p mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
        let index = self.parser.column_index(name);
        if index.is_none() && self.unknown.is_none() {
            *self.unknown = Some(name.to_owned());
        }
        Ok(index)
    }
}

/// Deserializes one JSON value as a [`FieldType`], as
/// [`FieldType::from_json`] types it. A value of the wrong type is consumed and
/// comes back as `Ok(Err(why))`; only malformed JSON is a deserializer error.
struct ValueSeed<'t>(&'t FieldType);

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Result<Value, BadValue>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Result<Value, BadValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {}", self.0)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Ok(Value::Null))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
        Ok(match self.0 {
            FieldType::Bool => Ok(Value::Bool(b)),
            ty => Err(mismatch(ty, "bool")),
        })
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Ok(match self.0 {
            FieldType::Int => Ok(Value::Int(n)),
            FieldType::Float => Ok(Value::Float(n as f64)),
            FieldType::Timestamp => epoch_seconds(n as f64),
            ty => Err(mismatch(ty, "int")),
        })
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        Ok(match self.0 {
            FieldType::Int => i64::try_from(n)
                .map(Value::Int)
                .map_err(|_| BadValue::IntRange(n)),
            FieldType::Float => Ok(Value::Float(n as f64)),
            FieldType::Timestamp => epoch_seconds(n as f64),
            ty => Err(mismatch(ty, "int")),
        })
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Self::Value, E> {
        Ok(match self.0 {
            FieldType::Float => Ok(Value::Float(f)),
            FieldType::Timestamp => epoch_seconds(f),
            ty => Err(mismatch(ty, "float")),
        })
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(match self.0 {
            FieldType::String => Ok(Value::String(s.into())),
            FieldType::Timestamp => rfc3339(s),
            ty => Err(mismatch(ty, "string")),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let FieldType::List(inner) = self.0 else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Err(mismatch(self.0, "list")));
        };
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(ValueSeed(inner))? {
            match item {
                Ok(v) => items.push(v),
                Err(e) => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(Err(e));
                }
            }
        }
        Ok(Ok(Value::List(items.into())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Err(mismatch(self.0, "object")))
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use oka_core::{NativeUdfs, Registry};

    use super::*;

    /// 2025-04-18T10:00:00Z.
    const NOW: Timestamp = Timestamp(1_744_970_400_000_000);

    const SPEC: &str = "version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {v: float, n: int, ok: bool, tags: list<string>, seen: timestamp}
  F:
    keys: {a: int, b: string}
    timestamp: at
    fields: {stamps: list<timestamp>, fs: list<float>, nested: list<list<int>>}
features:
  p: {kind: pipeline, entity: E}
  q: {kind: pipeline, entity: F}
";

    fn entity(name: &str) -> Arc<Entity> {
        let registry = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        Arc::clone(
            &registry
                .features()
                .iter()
                .find(|f| &*f.entity.name == name)
                .unwrap()
                .entity,
        )
    }

    fn parser(e: &Entity) -> RecordParser<'_> {
        RecordParser::new(e, NOW, &TimeBounds::default())
    }

    fn json(e: &Entity, text: &str) -> Result<(EntityKey, Row), String> {
        parser(e)
            .parse_json(text.as_bytes())
            .map_err(|e| e.to_string())
    }

    fn json_err(e: &Entity, text: &str) -> String {
        json(e, text).unwrap_err()
    }

    #[test]
    fn a_default_time_stamps_records_without_one_and_keeps_the_bounds() {
        let e = entity("E");
        let p = parser(&e);
        let earlier = Timestamp(NOW.0 - 60_000_000);
        let (_, row) = p.parse_json_at(br#"{"id": "a"}"#, earlier).unwrap();
        assert_eq!(row.event_time, earlier);
        assert_eq!(row.columns[e.timestamp_index], Value::Timestamp(earlier));
        let (_, row) = p
            .parse_json_at(br#"{"id": "a", "ts": 1}"#, earlier)
            .unwrap();
        assert_eq!(
            row.event_time,
            Timestamp(1_000_000),
            "the record's own wins"
        );
        let ahead = Timestamp(NOW.0 + 3_600_000_000);
        let err = p.parse_json_at(br#"{"id": "a"}"#, ahead).unwrap_err();
        assert!(matches!(err, RecordError::TooFarAhead { .. }), "{err}");
    }

    /// The reference decoding of a JSON record (a `serde_json` tree, field by
    /// field), which the streaming parser must match: key fields are required, a
    /// missing timestamp is `default_time`, a missing value field is null, unknown
    /// fields and wrong types are errors.
    fn row_from_json(
        entity: &Entity,
        record: &serde_json::Map<String, serde_json::Value>,
        default_time: Timestamp,
    ) -> Result<(EntityKey, Row), String> {
        if let Some(unknown) = record.keys().find(|k| entity.column_index(k).is_none()) {
            return Err(format!("entity `{}` has no field `{unknown}`", entity.name));
        }
        let mut columns = Vec::with_capacity(entity.columns.len());
        for (i, c) in entity.columns.iter().enumerate() {
            let v = match record.get(&*c.name) {
                None | Some(serde_json::Value::Null) => {
                    if entity.key_index.contains(&i) {
                        return Err(format!("missing key field `{}`", c.name));
                    }
                    if i == entity.timestamp_index {
                        Value::Timestamp(default_time)
                    } else {
                        Value::Null
                    }
                }
                Some(j) => {
                    c.ty.from_json(j)
                        .map_err(|e| format!("field `{}`: {e}", c.name))?
                }
            };
            columns.push(v);
        }
        let Value::Timestamp(event_time) = columns[entity.timestamp_index] else {
            return Err(format!(
                "field `{}` is not a timestamp",
                entity.timestamp_name()
            ));
        };
        let key = EntityKey::encode(entity.key_index.iter().map(|&i| &columns[i]));
        Ok((key, Row::new(event_time, columns)))
    }

    /// Builds the row the reference implementation builds.
    fn reference(e: &Entity, text: &str) -> Result<(EntityKey, Row), String> {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
        row_from_json(e, &map, NOW)
    }

    #[test]
    fn json_records_match_row_from_json() {
        let e = entity("E");
        let f = entity("F");
        let cases: &[(&Entity, &str)] = &[
            (&e, r#"{"id":"a"}"#),
            (&e, r#"{"id":"a","ts":null,"v":null}"#),
            (
                &e,
                r#"{"id":"a","ts":"2025-04-18T10:00:00Z","v":1.5,"n":2,"ok":true}"#,
            ),
            (
                &e,
                r#"{"id":"a","ts":1744970400,"v":3,"tags":["x","y",null]}"#,
            ),
            (
                &e,
                r#"{"id":"a","ts":1744970400.25,"seen":"2001-02-03T04:05:06.789+02:00"}"#,
            ),
            (&e, r#"{"v":1,"id":"k|with\\sep","n":-7}"#),
            (&e, r#"{"id":"a","n":1.5}"#),
            (&e, r#"{"id":"a","n":2.0}"#),
            (&e, r#"{"id":"a","v":"1"}"#),
            (&e, r#"{"id":"a","ok":1}"#),
            (&e, r#"{"id":"a","tags":"x"}"#),
            (&e, r#"{"id":"a","tags":[1]}"#),
            (&e, r#"{"id":"a","tags":{"x":1}}"#),
            (&e, r#"{"id":"a","ts":"yesterday"}"#),
            (&e, r#"{"id":"a","ts":true}"#),
            (&e, r#"{"id":1}"#),
            (&e, r#"{"id":null}"#),
            (&e, r#"{"v":1}"#),
            (&e, r#"{"id":"a","v":1,"v":2}"#),
            (&e, r#"{"id":"a","n":"x","n":2}"#),
            (&e, r#"{"id":"a","n":2,"n":"x"}"#),
            (&e, r#"{"id":"a","colour":"red"}"#),
            (&e, r#"{"i\u0064":"escaped key"}"#),
            (&e, "  {\"id\":\"a\"}\t "),
            (
                &f,
                r#"{"a":1,"b":"x","stamps":[1744970400,"2025-04-18T10:00:00Z"]}"#,
            ),
            (
                &f,
                r#"{"a":1,"b":"x","fs":[1,2.5],"nested":[[1],[2,3],[]]}"#,
            ),
            (&f, r#"{"a":1,"b":"x","nested":[[1],[2.5]]}"#),
            (&f, r#"{"a":-3,"b":"x|y"}"#),
            (&f, r#"{"a":"1","b":"x"}"#),
        ];
        for &(entity, text) in cases {
            assert_eq!(
                parser(entity)
                    .parse_json(text.as_bytes())
                    .map_err(|e| e.to_string()),
                reference(entity, text),
                "{text}"
            );
        }
    }

    #[test]
    fn json_rows_are_built_in_column_order() {
        let e = entity("E");
        let (key, row) = json(
            &e,
            r#"{"seen":0,"tags":["t"],"ok":false,"n":3,"v":2,"id":"k"}"#,
        )
        .unwrap();
        assert_eq!(key.as_str(), "k");
        assert_eq!(row.event_time, NOW);
        assert_eq!(
            &*row.columns,
            &[
                Value::from("k"),
                Value::Timestamp(NOW),
                Value::Float(2.0),
                Value::Int(3),
                Value::Bool(false),
                Value::List(vec![Value::from("t")].into()),
                Value::Timestamp(Timestamp(0)),
            ]
        );
        let f = entity("F");
        let (key, _) = json(&f, r#"{"b":"x|y","a":-3}"#).unwrap();
        assert_eq!(key.as_str(), r"-3|x\|y");
    }

    #[test]
    fn json_errors_name_the_problem() {
        let e = entity("E");
        let cases = [
            (r#"{"v":1}"#, "missing key field `id`"),
            (r#"{"id":null}"#, "missing key field `id`"),
            (
                r#"{"id":"a","n":1.5}"#,
                "field `n`: expected int, got float",
            ),
            (
                r#"{"id":"a","n":9223372036854775808}"#,
                "field `n`: 9223372036854775808 is out of range for int",
            ),
            (
                r#"{"id":"a","tags":[1]}"#,
                "field `tags`: expected string, got int",
            ),
            (
                r#"{"id":"a","colour":1}"#,
                "entity `E` has no field `colour`",
            ),
            (r#"{"id":"a","x":1,"y":2}"#, "entity `E` has no field `x`"),
            (
                "not json",
                "not a JSON object: expected ident at line 1 column 2",
            ),
            (
                "",
                "not a JSON object: EOF while parsing a value at line 1 column 0",
            ),
            (
                r#"{"id":"a"} x"#,
                "not a JSON object: trailing characters at line 1 column 12",
            ),
            (
                r#"{"id":"a"}{"id":"b"}"#,
                "not a JSON object: trailing characters at line 1 column 11",
            ),
            (
                r#"{"id":"a","v":NaN}"#,
                "not a JSON object: expected value at line 1 column 15",
            ),
            (
                r#"{"id":"a","v":1e999}"#,
                "not a JSON object: number out of range at line 1 column 19",
            ),
            (
                "[1,2]",
                "not a JSON object: found a list at line 1 column 1",
            ),
            (
                r#""\u001b[31m""#,
                "not a JSON object: found a string at line 1 column 12",
            ),
            ("42", "not a JSON object: found a number at line 1 column 2"),
            ("null", "not a JSON object: found null at line 1 column 4"),
        ];
        for (text, want) in cases {
            assert_eq!(json_err(&e, text), want, "{text}");
        }
    }

    #[test]
    fn hostile_field_names_and_values_are_escaped() {
        let e = entity("E");
        let msg = json_err(&e, "{\"id\":\"a\",\"\\u001b[2Jevil\":1}");
        assert_eq!(msg, "entity `E` has no field `\\u{1b}[2Jevil`");
        assert!(!msg.contains('\u{1b}'));
        let msg = json_err(&e, "{\"id\":\"a\",\"ts\":\"\\u001b]0;pwned\\u0007\"}");
        assert_eq!(
            msg,
            "field `ts`: invalid RFC 3339 timestamp `\\u{1b}]0;pwned\\u{7}`"
        );
        let long = "x".repeat(500);
        let msg = json_err(&e, &format!("{{\"id\":\"a\",\"{long}\":1}}"));
        assert!(msg.len() < 150, "{msg}");
        assert!(msg.ends_with("…`"), "{msg}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let e = entity("E");
        let deep = "[".repeat(200_000);
        for text in [
            format!(r#"{{"id":"a","tags":{deep}"#),
            format!(r#"{{"id":"a","v":{deep}"#),
            format!(r#"{{"id":"a","unknown":{deep}"#),
            deep.clone(),
            format!("{}{}", "{\"a\":".repeat(100_000), "1"),
        ] {
            let msg = json_err(&e, &text);
            assert!(msg.starts_with("not a JSON object: "), "{msg}");
        }
        // Within the limit, a deep list of the wrong type is a type error.
        let text = format!(
            r#"{{"id":"a","tags":{}{}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(
            json_err(&e, &text),
            "field `tags`: expected string, got list"
        );
    }

    #[test]
    fn timestamp_bounds_are_inclusive_to_the_microsecond() {
        let e = entity("E");
        let seen = |v: &str| json(&e, &format!(r#"{{"id":"a","seen":{v}}}"#));
        assert!(seen(r#""1970-01-01T00:00:00Z""#).is_ok());
        assert!(seen(r#""9999-12-31T23:59:59.999999Z""#).is_ok());
        assert_eq!(
            seen(r#""1969-12-31T23:59:59.999999Z""#).unwrap_err(),
            "field `seen`: 1969-12-31T23:59:59.999999+00:00 is outside the accepted range 1970-01-01 … 9999-12-31"
        );
        // One microsecond past 9999-12-31T23:59:59.999999Z.
        assert_eq!(
            seen("253402300800").unwrap_err(),
            "field `seen`: +10000-01-01T00:00:00+00:00 is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)"
        );
        assert!(seen("0").is_ok());
        assert!(
            seen("-1")
                .unwrap_err()
                .contains("is outside the accepted range")
        );

        // The event time too, with a `now` that makes the upper bound reachable.
        let late = RecordParser::new(&e, MAX_TIME, &TimeBounds::default());
        let at = |p: &RecordParser<'_>, ts: &str| {
            p.parse_json(format!(r#"{{"id":"a","ts":"{ts}"}}"#).as_bytes())
        };
        assert_eq!(
            at(&late, "9999-12-31T23:59:59.999999Z")
                .unwrap()
                .1
                .event_time,
            MAX_TIME
        );
        assert_eq!(
            at(&late, "1970-01-01T00:00:00Z").unwrap().1.event_time,
            MIN_TIME
        );
        assert!(at(&late, "1969-12-31T23:59:59.999999Z").is_err());
        // Timestamps inside lists.
        let f = entity("F");
        let stamps = |v: &str| json(&f, &format!(r#"{{"a":1,"b":"x","stamps":[0,{v}]}}"#));
        assert!(stamps(r#""9999-12-31T23:59:59.999999Z""#).is_ok());
        assert!(
            stamps(r#""1969-12-31T23:59:59Z""#)
                .unwrap_err()
                .starts_with("field `stamps`: 1969-12-31T23:59:59+00:00 is outside")
        );
        assert!(stamps("253402300800").is_err());
    }

    #[test]
    fn event_times_may_lead_now_by_the_skew_only() {
        let e = entity("E");
        let now_s = NOW.0 / 1_000_000;
        let at = |secs: i64| json(&e, &format!(r#"{{"id":"a","ts":{secs}}}"#));
        assert!(at(now_s + 300).is_ok());
        assert_eq!(
            at(now_s + 301).unwrap_err(),
            "field `ts`: 2025-04-18T10:05:01+00:00 is 5.0 minutes in the future (more than the allowed 5m0s skew; check the clock or the unit: epoch seconds, not milliseconds)"
        );
        // Other timestamp fields may lie in the future.
        assert!(json(&e, &format!(r#"{{"id":"a","seen":{}}}"#, now_s + 86_400)).is_ok());
        assert_eq!(
            json_err(&e, r#"{"id":"a","ts":"2031-05-01T00:00:00Z"}"#),
            "field `ts`: 2031-05-01T00:00:00+00:00 is 6.0 years in the future (more than the allowed 5m0s skew; check the clock or the unit: epoch seconds, not milliseconds)"
        );
        let strict = RecordParser::new(
            &e,
            NOW,
            &TimeBounds {
                max_future_skew: Duration::ZERO,
            },
        );
        assert!(
            strict
                .parse_json(format!(r#"{{"id":"a","ts":{now_s}}}"#).as_bytes())
                .is_ok()
        );
        assert!(
            strict
                .parse_json(br#"{"id":"a","ts":"2025-04-18T10:00:00.000001Z"}"#)
                .unwrap_err()
                .to_string()
                .contains("0.0 seconds in the future (more than the allowed 0s skew")
        );
        // A missing event time is `now`, which is always accepted.
        assert_eq!(json(&e, r#"{"id":"a"}"#).unwrap().1.event_time, NOW);
    }

    #[test]
    fn far_and_overflowing_epoch_seconds_are_errors() {
        let e = entity("E");
        let cases = [
            (
                "1744970400000",
                "field `ts`: +57265-11-28T16:00:00+00:00 is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)",
            ),
            (
                "9e12",
                "field `ts`: 9000000000000 epoch seconds is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)",
            ),
            (
                "1e300",
                "field `ts`: 1e300 epoch seconds is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)",
            ),
            (
                "-1e300",
                "field `ts`: -1e300 epoch seconds is outside the accepted range 1970-01-01 … 9999-12-31",
            ),
            (
                "18446744073709551615",
                "field `ts`: 1.8446744073709552e19 epoch seconds is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)",
            ),
            (
                "-1",
                "field `ts`: 1969-12-31T23:59:59+00:00 is outside the accepted range 1970-01-01 … 9999-12-31",
            ),
            (
                "\"1969-07-20T20:17:40Z\"",
                "field `ts`: 1969-07-20T20:17:40+00:00 is outside the accepted range 1970-01-01 … 9999-12-31",
            ),
        ];
        for (ts, want) in cases {
            assert_eq!(
                json_err(&e, &format!(r#"{{"id":"a","ts":{ts}}}"#)),
                want,
                "{ts}"
            );
        }
    }

    #[test]
    fn csv_cells_are_typed_like_oka_ingest_did() {
        let e = entity("E");
        let p = parser(&e);
        let header: Vec<usize> = ["id", "ts", "v", "n", "ok", "tags", "seen"]
            .iter()
            .map(|n| p.column_index(n).unwrap())
            .collect();
        let cells = |row: [&str; 7]| p.parse_cells(&header, &row).map_err(|e| e.to_string());
        let (key, row) = cells([
            "a",
            "2025-04-18T10:00:00Z",
            "1.5",
            "2",
            "true",
            r#"["x"]"#,
            "1000.5",
        ])
        .unwrap();
        assert_eq!(key.as_str(), "a");
        assert_eq!(
            &*row.columns,
            &[
                Value::from("a"),
                Value::Timestamp(NOW),
                Value::Float(1.5),
                Value::Int(2),
                Value::Bool(true),
                Value::List(vec![Value::from("x")].into()),
                Value::Timestamp(Timestamp(1_000_500_000)),
            ]
        );
        let (_, row) = cells(["b", "", "3", "", "0", "", ""]).unwrap();
        assert_eq!(row.event_time, NOW, "an empty timestamp is now");
        assert_eq!(row.columns[2], Value::Float(3.0), "ints widen to floats");
        assert_eq!(row.columns[4], Value::Bool(false));
        assert!(row.columns[3].is_null() && row.columns[5].is_null());

        let errors = [
            (["", "", "", "", "", "", ""], "missing key field `id`"),
            (
                ["a", "", "x", "", "", "", ""],
                "field `v`: `x` is not a number",
            ),
            (
                ["a", "", " 1", "", "", "", ""],
                "field `v`: ` 1` is not a number",
            ),
            (
                ["a", "", "", "1.5", "", "", ""],
                "field `n`: expected int, got float",
            ),
            (
                ["a", "", "", "", "yes", "", ""],
                "field `ok`: `yes` is not a bool",
            ),
            (
                ["a", "", "", "", "", "x", ""],
                "field `tags`: `x` is not a JSON list",
            ),
            (
                ["a", "", "", "", "", "[1]", ""],
                "field `tags`: expected string, got int",
            ),
            (
                ["a", "", "", "", "", "5", ""],
                "field `tags`: expected list<string>, got int",
            ),
            (
                ["a", "soon", "", "", "", "", ""],
                "field `ts`: invalid RFC 3339 timestamp `soon`",
            ),
            (
                ["a", "", "NaN", "", "", "", ""],
                "field `v`: NaN and infinities are not allowed",
            ),
            (
                ["a", "", "inf", "", "", "", ""],
                "field `v`: NaN and infinities are not allowed",
            ),
            (
                ["a", "", "-infinity", "", "", "", ""],
                "field `v`: NaN and infinities are not allowed",
            ),
            (
                ["a", "", "1e999", "", "", "", ""],
                "field `v`: NaN and infinities are not allowed",
            ),
            (
                ["a", "", "", "NaN", "", "", ""],
                "field `n`: NaN and infinities are not allowed",
            ),
            (
                ["a", "NaN", "", "", "", "", ""],
                "field `ts`: NaN and infinities are not allowed",
            ),
            (
                ["a", "", "", "", "", "", "1e999"],
                "field `seen`: NaN and infinities are not allowed",
            ),
            (
                ["a", "1e300", "", "", "", "", ""],
                "field `ts`: 1e300 epoch seconds is outside the accepted range 1970-01-01 … 9999-12-31 (check the unit: epoch seconds, not milliseconds)",
            ),
            (
                ["a", "2100-01-01T00:00:00Z", "", "", "", "", ""],
                "field `ts`: 2100-01-01T00:00:00+00:00 is 74.7 years in the future (more than the allowed 5m0s skew; check the clock or the unit: epoch seconds, not milliseconds)",
            ),
        ];
        for (row, want) in errors {
            assert_eq!(cells(row).unwrap_err(), want, "{row:?}");
        }
        assert_eq!(
            p.parse_cells(&header, &["a", "b"]).unwrap_err().to_string(),
            "expected 7 fields, found 2"
        );
        assert_eq!(
            p.parse_cells(&[0, 99], &["a", "b"])
                .unwrap_err()
                .to_string(),
            "column index 99 is out of range for entity `E`"
        );
        // A column the header leaves out: a missing key fails, a missing timestamp is now.
        let v = p.column_index("v").unwrap();
        assert_eq!(
            p.parse_cells(&[v], &["1"]).unwrap_err().to_string(),
            "missing key field `id`"
        );
    }

    #[test]
    fn printable_escapes_controls_and_truncates() {
        assert!(matches!(
            printable("plain ключ🔑"),
            Cow::Borrowed("plain ключ🔑")
        ));
        let cases = [
            ("a\u{1b}[31mb", "a\\u{1b}[31mb"),
            ("\0\t\n\r", "\\u{0}\\u{9}\\u{a}\\u{d}"),
            ("del\u{7f} c1\u{85}\u{9b}", "del\\u{7f} c1\\u{85}\\u{9b}"),
            ("\u{2028}\u{2029}", "\\u{2028}\\u{2029}"),
            ("evil\u{202e}txt.exe", "evil\\u{202e}txt.exe"),
            ("\u{202a}\u{2066}\u{2069}", "\\u{202a}\\u{2066}\\u{2069}"),
            ("\u{a0}\u{200b}é", "\u{a0}\u{200b}é"),
        ];
        for (input, want) in cases {
            assert_eq!(printable(input), want, "{input:?}");
        }
        let exactly = "é".repeat(80);
        assert_eq!(printable(&exactly), exactly);
        let long = "é".repeat(81);
        assert_eq!(printable(&long), format!("{}…", "é".repeat(80)));
        let long_escapes = "\u{1b}".repeat(100);
        assert_eq!(
            printable(&long_escapes),
            format!("{}…", "\\u{1b}".repeat(80))
        );
    }

    #[test]
    fn spans_and_skews_read_naturally() {
        assert_eq!(show_skew(Duration::from_secs(300)), "5m0s");
        assert_eq!(show_skew(Duration::from_secs(3_661)), "1h1m1s");
        assert_eq!(show_skew(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(show_skew(Duration::ZERO), "0s");
        assert_eq!(show_span(90_000_000), "1.5 minutes");
        assert_eq!(show_span(3 * 86_400_000_000), "3.0 days");
        assert_eq!(show_span(500_000), "0.5 seconds");
        assert_eq!(
            show_instant(Timestamp(1_500_000)),
            "1970-01-01T00:00:01.500000+00:00"
        );
        assert_eq!(
            show_instant(Timestamp(i64::MAX)),
            "9223372036854.775 epoch seconds"
        );
    }
}
