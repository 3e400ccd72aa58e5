//! The record encoding stored by the networked backends (Redis, ScyllaDB/Cassandra): a version byte, then MessagePack
//! `[event_time_micros, {column: value, …}]`.
//!
//! Columns are stored by name, so a record written under one spec still reads under
//! a spec that added, removed or reordered fields (absent columns read as null).
//! Timestamps are MessagePack extension type 1 (8-byte big-endian microseconds).
//! MessagePack was chosen over JSON for size and speed; `docs/storage.md` has the
//! numbers.

use oka_core::registry::Entity;
use oka_core::{Row, Timestamp, Value};
use rmp::decode::{self, RmpRead};
use rmp::encode;

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

/// Decodes a record into `entity`'s columns. Unknown columns are skipped, absent
/// ones are null, and values are widened to the column type where lossless.
pub fn decode_row(entity: &Entity, bytes: &[u8]) -> Result<Row, String> {
    let (&version, mut rd) = bytes.split_first().ok_or("empty record")?;
    if version != VERSION {
        return Err(format!("unknown record encoding version {version}"));
    }
    let err = |e: &dyn std::fmt::Display| format!("corrupt record: {e}");
    if decode::read_array_len(&mut rd).map_err(|e| err(&e))? != 2 {
        return Err("corrupt record: expected [time, columns]".into());
    }
    let event_time = Timestamp(read_int(&mut rd).map_err(|e| err(&e))?);
    let n = decode::read_map_len(&mut rd).map_err(|e| err(&e))?;
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

fn read_int(rd: &mut &[u8]) -> Result<i64, String> {
    decode::read_int(rd).map_err(|e| e.to_string())
}

/// Reads a string, borrowed from the record (no allocation for column names).
fn read_str<'a>(rd: &mut &'a [u8]) -> Result<&'a str, String> {
    let len = decode::read_str_len(rd).map_err(|e| format!("corrupt record: {e}"))? as usize;
    if rd.len() < len {
        return Err("corrupt record: truncated string".into());
    }
    let (s, rest) = rd.split_at(len);
    *rd = rest;
    std::str::from_utf8(s).map_err(|_| "corrupt record: invalid utf-8".to_owned())
}

fn read_value(rd: &mut &[u8]) -> Result<Value, String> {
    use rmp::Marker;
    let corrupt = |what: &str| format!("corrupt record: {what}");
    let marker = rd
        .first()
        .copied()
        .map(Marker::from_u8)
        .ok_or_else(|| corrupt("truncated"))?;
    Ok(match marker {
        Marker::Null => {
            *rd = &rd[1..];
            Value::Null
        }
        Marker::True | Marker::False => {
            Value::Bool(decode::read_bool(rd).map_err(|e| corrupt(&e.to_string()))?)
        }
        Marker::F64 => Value::Float(decode::read_f64(rd).map_err(|e| corrupt(&e.to_string()))?),
        Marker::F32 => Value::Float(f64::from(
            decode::read_f32(rd).map_err(|e| corrupt(&e.to_string()))?,
        )),
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
            Value::String(read_str(rd)?.into())
        }
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
            let n = decode::read_array_len(rd).map_err(|e| corrupt(&e.to_string()))?;
            let items = (0..n)
                .map(|_| read_value(rd))
                .collect::<Result<Vec<_>, _>>()?;
            Value::List(items.into())
        }
        Marker::FixExt8 => {
            let meta = decode::read_ext_meta(rd).map_err(|e| corrupt(&e.to_string()))?;
            if meta.typeid != EXT_TIMESTAMP {
                return Err(corrupt("unknown extension type"));
            }
            let mut b = [0u8; 8];
            rd.read_exact_buf(&mut b)
                .map_err(|e| corrupt(&e.to_string()))?;
            Value::Timestamp(Timestamp(i64::from_be_bytes(b)))
        }
        _ => Value::Int(read_int(rd).map_err(|e| corrupt(&e))?),
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
