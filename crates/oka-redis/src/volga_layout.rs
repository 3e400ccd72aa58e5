//! Volga's Redis layout (`redis://…?layout=volga`), as Volga's pipeline writes it:
//! one HASH per (feature, key) at
//! `volga:hot_feature:{feature}:{json.dumps(keys, sort_keys=True)}` with fields
//! `feature_name`, `keys_json` and `values_json` (Python `json.dumps` texts). Only
//! the latest record, no history and, as written by Volga, no event time.
//!
//! This module maps between that layout and Oka's records: the Redis key of an
//! entity key ([`redis_key`]) and a hash's JSON onto the feature's entity
//! ([`record`]). The store reads it with one `HMGET` per key, pipelined (one round
//! trip per request); `oka migrate volga` scans it.

use oka_core::value::FieldType;
use oka_core::{EntityKey, Feature, Row, Timestamp, Value};

/// The prefix of every key Volga writes.
pub const PREFIX: &str = "volga:hot_feature:";

/// The hash fields read: the values, and an event time Volga's reader would use
/// if one were there (its writer never sets it).
pub const VALUES_FIELD: &str = "values_json";
/// The hash field of the key's fields as a JSON object.
pub const KEYS_FIELD: &str = "keys_json";

oka_core::described_error! {
    /// Why a hash cannot be mapped onto the feature's entity (the message names the
    /// field and what was expected).
    pub struct MapError;
}

/// The Redis key Volga's pipeline writes `key` of `feature` under: Python's
/// `json.dumps(keys, sort_keys=True)` of the key fields, byte for byte (`", "` and
/// `": "` separators, non-ASCII as `\uXXXX`).
pub fn redis_key(feature: &Feature, key: &EntityKey) -> Result<String, MapError> {
    let fields = key.fields();
    let entity = &feature.entity;
    let mut named: Vec<(&str, &FieldType, &str)> = entity
        .keys()
        .zip(&fields)
        .map(|(c, v)| (&*c.name, &c.ty, v.as_str()))
        .collect();
    if named.len() != fields.len() {
        return Err(MapError::new(format!(
            "key `{key}` has {} fields; entity `{}` has {}",
            fields.len(),
            entity.name,
            named.len()
        )));
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut out =
        String::with_capacity(PREFIX.len() + feature.name.len() + 16 + key.as_str().len());
    out.push_str(PREFIX);
    out.push_str(&feature.name);
    out.push_str(":{");
    for (i, (name, ty, value)) in named.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_python_json_str(&mut out, name);
        out.push_str(": ");
        match ty {
            FieldType::Int => out.push_str(value),
            _ => push_python_json_str(&mut out, value),
        }
    }
    out.push('}');
    Ok(out)
}

/// Appends `s` as Python's `json.dumps` writes a string (`ensure_ascii=True`).
pub fn push_python_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// A Volga record of `feature` as Oka's row: the key fields from `key_values` (in
/// the entity's key order), the value fields from `values_json` by name (a field
/// it lacks is `null`; one the entity does not have is ignored), and the event
/// time, as Volga's reader took it: the hash's own timestamp field (`hash_time`,
/// ISO text), else `values_json`'s (RFC 3339, naive ISO as UTC, or epoch
/// seconds), else `default_time` (Volga's writer stores none; its reader used the
/// read time).
pub fn record(
    feature: &Feature,
    key_values: &[Value],
    values_json: &[u8],
    hash_time: Option<&[u8]>,
    default_time: Timestamp,
) -> Result<Row, MapError> {
    let entity = &feature.entity;
    let mut values: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(values_json)
            .map_err(|e| MapError::caused(format!("`values_json` is not a JSON object: {e}"), e))?;
    if let Some(t) = hash_time {
        let t = String::from_utf8_lossy(t).into_owned();
        values.insert(
            entity.timestamp_name().to_owned(),
            serde_json::Value::String(t),
        );
    }
    let mut event_time = default_time;
    let mut columns = Vec::with_capacity(entity.columns.len());
    let mut keys = key_values.iter();
    for (i, c) in entity.columns.iter().enumerate() {
        if entity.key_index.contains(&i) {
            columns.push(keys.next().cloned().unwrap_or(Value::Null));
            continue;
        }
        let given = values.get(&*c.name).filter(|v| !v.is_null());
        if i == entity.timestamp_index {
            if let Some(v) = given {
                event_time = volga_time(v).ok_or_else(|| {
                    MapError::new(format!(
                        "`values_json` field `{}` is not a time (RFC 3339, ISO 8601 or epoch seconds): {v}",
                        c.name
                    ))
                })?;
            }
            columns.push(Value::Timestamp(event_time));
            continue;
        }
        let value = match given {
            None => Value::Null,
            Some(v) => c.ty.from_json(v).map_err(|e| {
                MapError::new(format!(
                    "`values_json` field `{}` of entity `{}`: {e}",
                    c.name, entity.name
                ))
            })?,
        };
        columns.push(value);
    }
    Ok(Row::new(event_time, columns))
}

/// A Volga time value: an ISO text (naive = UTC) or epoch seconds.
fn volga_time(v: &serde_json::Value) -> Option<Timestamp> {
    match v {
        serde_json::Value::String(s) => Timestamp::parse_iso_or_naive_utc(s),
        serde_json::Value::Number(n) => n.as_f64().and_then(Timestamp::from_epoch_seconds),
        _ => None,
    }
}

/// The typed key values of `key` for `feature`'s entity.
pub fn key_values(feature: &Feature, key: &EntityKey) -> Result<Vec<Value>, MapError> {
    feature
        .entity
        .keys()
        .zip(key.fields())
        .map(|(c, v)| match c.ty {
            FieldType::Int => v
                .parse::<i64>()
                .map(Value::Int)
                .map_err(|_| MapError::new(format!("key field `{}` is not an int: {v}", c.name))),
            _ => Ok(Value::String(v.as_str().into())),
        })
        .collect()
}

/// The typed key values of a hash's `keys_json` for `feature`'s entity: every key
/// field present with its type (an int may be written as a JSON integer only).
pub fn keys_from_json(feature: &Feature, keys_json: &[u8]) -> Result<Vec<Value>, MapError> {
    let keys: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(keys_json)
        .map_err(|e| MapError::caused(format!("`keys_json` is not a JSON object: {e}"), e))?;
    let entity = &feature.entity;
    if let Some(extra) = keys
        .keys()
        .find(|k| !entity.keys().any(|c| &*c.name == k.as_str()))
    {
        return Err(MapError::new(format!(
            "`keys_json` has field `{extra}`, which is not a key field of entity `{}` (its keys: {})",
            entity.name,
            entity
                .keys()
                .map(|c| &*c.name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    entity
        .keys()
        .map(|c| {
            let v = keys.get(&*c.name).ok_or_else(|| {
                MapError::new(format!("`keys_json` lacks key field `{}`", c.name))
            })?;
            match (&c.ty, v) {
                (FieldType::String, serde_json::Value::String(s)) => {
                    Ok(Value::String(s.as_str().into()))
                }
                (FieldType::Int, serde_json::Value::Number(n)) if n.is_i64() => {
                    Ok(Value::Int(n.as_i64().unwrap_or_default()))
                }
                _ => Err(MapError::new(format!(
                    "`keys_json` field `{}` must be {}, got {v}",
                    c.name, c.ty
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use oka_core::{NativeUdfs, Registry};

    const SPEC: &str = r#"
version: 1
entities:
  TestEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
  Pair:
    keys: {user: int, merchant: string}
    timestamp: ts
    fields: {n: int, tags: list<string>}
features:
  test_feature: {kind: pipeline, entity: TestEntity}
  pair: {kind: pipeline, entity: Pair}
"#;

    fn feature(r: &Registry, name: &str) -> Feature {
        r.feature(r.feature_id(name).unwrap()).clone()
    }

    #[test]
    fn keys_are_pythons_sorted_json_dumps() {
        let r = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        let f = feature(&r, "test_feature");
        let k = EntityKey::encode(&[Value::from("test-id-5")]);
        assert_eq!(
            redis_key(&f, &k).unwrap(),
            r#"volga:hot_feature:test_feature:{"id": "test-id-5"}"#
        );
        // Sorted by name (merchant < user), ints bare, non-ASCII escaped as Python
        // does (an astral character as a surrogate pair), quotes and controls too.
        let p = feature(&r, "pair");
        let k = EntityKey::encode(&[
            Value::Int(-7),
            Value::from("caf\u{e9} \u{1F511}\"|\\\n\u{7f}"),
        ]);
        assert_eq!(
            redis_key(&p, &k).unwrap(),
            r#"volga:hot_feature:pair:{"merchant": "caf\u00e9 \ud83d\udd11\"|\\\n\u007f", "user": -7}"#
        );
        assert_eq!(key_values(&p, &k).unwrap()[0], Value::Int(-7));
    }

    #[test]
    fn a_hash_maps_onto_the_entity() {
        let r = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        let p = feature(&r, "pair");
        let now = Timestamp(1_000_000);
        let keys = keys_from_json(&p, br#"{"user": 3, "merchant": "m"}"#).unwrap();
        let row = record(
            &p,
            &keys,
            br#"{"n": 2, "tags": ["a"], "other": 1}"#,
            None,
            now,
        )
        .unwrap();
        assert_eq!(row.event_time, now);
        assert_eq!(
            row.columns.to_vec(),
            vec![
                Value::Int(3),
                Value::from("m"),
                Value::Timestamp(now),
                Value::Int(2),
                Value::List(vec![Value::from("a")].into()),
            ]
        );
        let timed = record(
            &p,
            &keys,
            br#"{"ts": "2024-01-01T12:00:00", "n": null}"#,
            None,
            now,
        )
        .unwrap();
        assert_eq!(timed.event_time, Timestamp(1_704_110_400_000_000));
        let hashed = record(
            &p,
            &keys,
            br#"{"ts": 0}"#,
            Some(b"2024-01-01T12:00:01Z"),
            now,
        )
        .unwrap();
        assert_eq!(hashed.event_time, Timestamp(1_704_110_401_000_000));
        assert_eq!(timed.columns[3], Value::Null);
        for (bad, why) in [
            (
                &br#"{"n": "two"}"#[..],
                "`values_json` field `n` of entity `Pair`: ",
            ),
            (b"[1]", "`values_json` is not a JSON object"),
            (br#"{"ts": true}"#, "`values_json` field `ts` is not a time"),
        ] {
            let e = record(&p, &keys, bad, None, now).unwrap_err().to_string();
            assert!(e.starts_with(why), "{e}");
        }
        for (bad, why) in [
            (
                &br#"{"user": 3}"#[..],
                "`keys_json` lacks key field `merchant`",
            ),
            (
                br#"{"user": "3", "merchant": "m"}"#,
                "`keys_json` field `user` must be int",
            ),
            (
                br#"{"user": 3, "merchant": "m", "x": 1}"#,
                "`keys_json` has field `x`",
            ),
        ] {
            let e = keys_from_json(&p, bad).unwrap_err().to_string();
            assert!(e.starts_with(why), "{e}");
        }
    }
}
