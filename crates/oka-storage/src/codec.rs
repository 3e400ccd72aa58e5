//! The record encoding stored by the networked backends (Redis, ScyllaDB/Cassandra): a version byte, then MessagePack
//! `[event_time_micros, {column: value, …}]`.
//!
//! Columns are stored by name, so a record written under one spec still reads under
//! a spec that added, removed or reordered fields (absent columns read as null).
//! Timestamps are MessagePack extension type 1 (8-byte big-endian microseconds).
//! MessagePack was chosen over JSON for size and speed; `docs/storage.md` has the
//! numbers.

use oka_core::registry::{Entity, Feature};
use oka_core::{Row, Timestamp, Value};
use rmp::decode::{self, RmpRead};
use rmp::encode;

use crate::{StoreError, StoreErrorKind};

/// The current encoding version.
pub const VERSION: u8 = 1;
const EXT_TIMESTAMP: i8 = 1;

/// Encodes a row of `entity`.
pub fn encode_row(entity: &Entity, row: &Row) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 24 * row.columns.len());
    out.push(VERSION);
    // Writing into a Vec cannot fail.
    let _ = encode::write_array_len(&mut out, 2);
    let _ = encode::write_sint(&mut out, row.event_time.0);
    let _ = encode::write_map_len(&mut out, entity.columns.len() as u32);
    for (c, v) in entity.columns.iter().zip(row.columns.iter()) {
        let _ = encode::write_str(&mut out, &c.name);
        write_value(&mut out, v);
    }
    out
}

/// Writes one value. Writing into a `Vec` cannot fail, so results are ignored.
fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => {
            let _ = encode::write_nil(out);
        }
        Value::Bool(b) => {
            let _ = encode::write_bool(out, *b);
        }
        Value::Int(i) => {
            let _ = encode::write_sint(out, *i);
        }
        Value::Float(f) => {
            let _ = encode::write_f64(out, *f);
        }
        Value::String(s) => {
            let _ = encode::write_str(out, s);
        }
        Value::Timestamp(t) => {
            let _ = encode::write_ext_meta(out, 8, EXT_TIMESTAMP);
            out.extend_from_slice(&t.0.to_be_bytes());
        }
        Value::List(items) => {
            let _ = encode::write_array_len(out, items.len() as u32);
            for i in items.iter() {
                write_value(out, i);
            }
        }
    }
}

/// Why a stored record could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The record has no bytes.
    #[error("empty record")]
    Empty,
    /// The record was written by an encoding this build does not know.
    #[error("unknown record encoding version {0}")]
    UnknownVersion(u8),
    /// The record's structure is not `[time, {column: value}]`.
    #[error("corrupt record: {0}")]
    Shape(&'static str),
    /// The MessagePack inside the record did not read.
    #[error("corrupt record: {0}")]
    MessagePack(#[source] Box<dyn std::error::Error + Send + Sync>),
}

fn msgpack<E: std::error::Error + Send + Sync + 'static>(e: E) -> DecodeError {
    DecodeError::MessagePack(Box::new(e))
}

/// Decodes a record of `feature`, as a store's read answers it: a record that
/// does not decode is a [`StoreErrorKind::Corrupt`] error naming the feature.
pub fn decode_feature_row(feature: &Feature, bytes: &[u8]) -> Result<Row, StoreError> {
    decode_row(&feature.entity, bytes).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("feature `{}`: {e}", feature.name),
        )
        .with_source(e)
    })
}

/// Decodes a record into `entity`'s columns. Unknown columns are skipped, absent
/// ones are null, and values are widened to the column type where lossless.
pub fn decode_row(entity: &Entity, bytes: &[u8]) -> Result<Row, DecodeError> {
    let (&version, mut rd) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    if decode::read_array_len(&mut rd).map_err(msgpack)? != 2 {
        return Err(DecodeError::Shape("expected [time, columns]"));
    }
    let event_time = Timestamp(decode::read_int(&mut rd).map_err(msgpack)?);
    let n = decode::read_map_len(&mut rd).map_err(msgpack)?;
    let mut columns = vec![Value::Null; entity.columns.len()];
    for _ in 0..n {
        let name = read_str(&mut rd)?;
        let v = read_value(&mut rd)?;
        if let Some(i) = entity.column_index(name) {
            columns[i] = entity.columns[i].ty.coerce(v).unwrap_or(Value::Null);
        }
    }
    Ok(Row::new(event_time, columns))
}

/// Reads a string, borrowed from the record (no allocation for column names).
fn read_str<'a>(rd: &mut &'a [u8]) -> Result<&'a str, DecodeError> {
    let len = decode::read_str_len(rd).map_err(msgpack)? as usize;
    if rd.len() < len {
        return Err(DecodeError::Shape("truncated string"));
    }
    let (s, rest) = rd.split_at(len);
    *rd = rest;
    std::str::from_utf8(s).map_err(msgpack)
}

fn read_value(rd: &mut &[u8]) -> Result<Value, DecodeError> {
    use rmp::Marker;
    let marker = rd
        .first()
        .copied()
        .map(Marker::from_u8)
        .ok_or(DecodeError::Shape("truncated"))?;
    Ok(match marker {
        Marker::Null => {
            *rd = &rd[1..];
            Value::Null
        }
        Marker::True | Marker::False => Value::Bool(decode::read_bool(rd).map_err(msgpack)?),
        Marker::F64 => Value::Float(decode::read_f64(rd).map_err(msgpack)?),
        Marker::F32 => Value::Float(f64::from(decode::read_f32(rd).map_err(msgpack)?)),
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            Value::String(read_str(rd)?.into())
        }
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
            let n = decode::read_array_len(rd).map_err(msgpack)?;
            let items = (0..n)
                .map(|_| read_value(rd))
                .collect::<Result<Vec<_>, _>>()?;
            Value::List(items.into())
        }
        Marker::FixExt8 => {
            let meta = decode::read_ext_meta(rd).map_err(msgpack)?;
            if meta.typeid != EXT_TIMESTAMP {
                return Err(DecodeError::Shape("unknown extension type"));
            }
            let mut b = [0u8; 8];
            rd.read_exact_buf(&mut b).map_err(msgpack)?;
            Value::Timestamp(Timestamp(i64::from_be_bytes(b)))
        }
        _ => Value::Int(decode::read_int(rd).map_err(msgpack)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oka_core::{NativeUdfs, Registry};

    fn entity() -> std::sync::Arc<Entity> {
        let yaml = "version: 1\nentities:\n  E:\n    keys: {id: string, n: int}\n    timestamp: ts\n    fields: {f: float, b: bool, s: string, l: list<int>, t: timestamp}\nfeatures:\n  p: {kind: pipeline, entity: E}\n";
        let r = Registry::from_yaml("t", yaml, &NativeUdfs::new()).unwrap();
        std::sync::Arc::clone(&r.feature(0).entity)
    }

    #[test]
    fn every_type_round_trips() {
        let e = entity();
        let ts = Timestamp(1_744_970_400_123_456);
        let row = Row::new(
            ts,
            vec![
                Value::from("ключ|1"),
                Value::Int(-300_000),
                Value::Timestamp(ts),
                Value::Float(-0.25),
                Value::Bool(true),
                Value::Null,
                Value::List(vec![Value::Int(1), Value::Int(i64::MAX)].into()),
                Value::Timestamp(Timestamp(-5)),
            ],
        );
        let bytes = encode_row(&e, &row);
        assert_eq!(decode_row(&e, &bytes).unwrap(), row);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let e = entity();
        for bad in [
            &b""[..],
            b"\x02",
            b"\x01\x92",
            b"\x01\xff\xff",
            b"\x01\x92\x01\x81\xa1",
        ] {
            assert!(decode_row(&e, bad).is_err(), "{bad:?}");
        }
    }
}
