//! The bytes of Feast's Redis online store, as Feast's SDK writes and reads them:
//!
//! - one hash per entity key at `serialize_entity_key(key, version 3) + project`:
//!   the key count (u32 LE), then each join key name sorted by name (type STRING
//!   as u32 LE, its length, its UTF-8 bytes), then each value in the same order
//!   (its type, its length, its bytes: int64 and unix timestamps as i64 LE, int32 as
//!   i32 LE, strings as UTF-8, bytes as they are);
//! - in the hash, a feature's value (a serialized `feast.types.Value`) under the 4
//!   bytes of `mmh3_32("<view>:<feature>")` (seed 0, little-endian), and the view's
//!   event time (a serialized `google.protobuf.Timestamp`) under `_ts:<view>`.
//!
//! Values map to Oka's without loss but two ways, both written down in
//! `docs/migrating-from-feast.md`: `bytes` are Oka strings holding their base64
//! (as Feast's JSON answers carry them), and event times keep microseconds (Oka's
//! resolution; Feast writes Python datetimes, microseconds too).

use std::io::Cursor;
use std::sync::Arc;

use base64::Engine as _;
use oka_core::{Timestamp, Value};
use prost::Message;

use crate::proto::types::value::Val;
use crate::proto::types::{self as pt, value_type::Enum as VT};
use crate::registry::{Column, FeastType, Scalar};

oka_core::described_error! {
    /// Why a value or a key cannot be written or read as Feast does (the message
    /// names the value, the type and what was expected).
    pub struct LayoutError;
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The Redis key of an entity: `join_keys` (names with Feast types) with the
/// entity's `values` in the same order, serialized as Feast's version 3, then
/// the project's name.
pub fn redis_key(
    project: &str,
    join_keys: &[Column],
    values: &[Value],
) -> Result<Vec<u8>, LayoutError> {
    if join_keys.len() != values.len() {
        return Err(LayoutError::new(format!(
            "{} key values for {} join keys",
            values.len(),
            join_keys.len()
        )));
    }
    let mut pairs: Vec<(&Column, &Value)> = join_keys.iter().zip(values).collect();
    pairs.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let mut out = Vec::with_capacity(64 + project.len());
    push_u32(&mut out, pairs.len());
    for (column, _) in &pairs {
        push_u32(&mut out, VT::String as usize);
        push_u32(&mut out, column.name.len());
        out.extend_from_slice(column.name.as_bytes());
    }
    for (column, value) in &pairs {
        let (ty, bytes) = key_bytes(column, value)?;
        push_u32(&mut out, ty as usize);
        push_u32(&mut out, bytes.len());
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(project.as_bytes());
    Ok(out)
}

/// The join keys (names, sorted) and values of a Redis key of `project` written
/// by [`redis_key`] (or Feast's SDK); `None` for any other key. The values are
/// Oka's: ints, strings, bytes as base64, unix timestamps.
pub fn parse_redis_key(key: &[u8], project: &str) -> Option<Vec<(String, Value)>> {
    let mut r = KeyReader(key.strip_suffix(project.as_bytes())?);
    let count = r.u32_le()?;
    // A key holds a few join keys; a count past what the bytes could hold is
    // not one of Feast's.
    if count == 0 || count > key.len() / 8 {
        return None;
    }
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        if r.u32_le()? != VT::String as usize {
            return None;
        }
        let len = r.u32_le()?;
        names.push(String::from_utf8(r.take(len)?.to_vec()).ok()?);
    }
    let mut pairs = Vec::with_capacity(count);
    for name in names {
        let ty = r.u32_le()?;
        let len = r.u32_le()?;
        let bytes = r.take(len)?;
        let int = || -> Option<i64> {
            match bytes.len() {
                8 => Some(i64::from_le_bytes(bytes.try_into().ok()?)),
                4 => Some(i64::from(i32::from_le_bytes(bytes.try_into().ok()?))),
                _ => None,
            }
        };
        let value = match ty {
            t if t == VT::String as usize => Value::String(std::str::from_utf8(bytes).ok()?.into()),
            t if t == VT::Bytes as usize => Value::String(B64.encode(bytes).into()),
            t if t == VT::Int64 as usize || t == VT::Int32 as usize => Value::Int(int()?),
            t if t == VT::UnixTimestamp as usize => {
                Value::Timestamp(Timestamp(int()?.checked_mul(1_000_000)?))
            }
            _ => return None,
        };
        pairs.push((name, value));
    }
    r.0.is_empty().then_some(pairs)
}

/// The bytes of a key still to read.
struct KeyReader<'k>(&'k [u8]);

impl<'k> KeyReader<'k> {
    fn take(&mut self, n: usize) -> Option<&'k [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn u32_le(&mut self) -> Option<usize> {
        let bytes: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(u32::from_le_bytes(bytes) as usize)
    }
}

fn push_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn key_bytes(column: &Column, value: &Value) -> Result<(VT, Vec<u8>), LayoutError> {
    let wrong = || {
        LayoutError::new(format!(
            "join key `{}` is {:?} in Feast; the value {} does not fit",
            column.name,
            column.ty,
            value.to_json()
        ))
    };
    Ok(match (column.ty, value) {
        (FeastType::String, Value::String(s)) => (VT::String, s.as_bytes().to_vec()),
        (FeastType::Bytes, Value::String(s)) => (VT::Bytes, B64.decode(&**s).map_err(|_| wrong())?),
        (FeastType::Int64, Value::Int(n)) => (VT::Int64, n.to_le_bytes().to_vec()),
        (FeastType::Int32, Value::Int(n)) => {
            let n = i32::try_from(*n).map_err(|_| wrong())?;
            (VT::Int32, n.to_le_bytes().to_vec())
        }
        (FeastType::UnixTimestamp, Value::Timestamp(t)) => (
            VT::UnixTimestamp,
            t.0.div_euclid(1_000_000).to_le_bytes().to_vec(),
        ),
        _ => return Err(wrong()),
    })
}

/// The hash field of `feature` of `view`: `mmh3_32("<view>:<feature>")`, seed 0,
/// little-endian.
pub fn feature_field(view: &str, feature: &str) -> [u8; 4] {
    let text = format!("{view}:{feature}");
    // Hashing an in-memory cursor cannot fail.
    let hash = murmur3::murmur3_32(&mut Cursor::new(text.as_bytes()), 0).unwrap_or_default();
    hash.to_le_bytes()
}

/// The hash field of `view`'s event time.
pub fn ts_field(view: &str) -> String {
    format!("_ts:{view}")
}

/// An event time as Feast stores it (a serialized `google.protobuf.Timestamp`).
pub fn encode_timestamp(t: Timestamp) -> Vec<u8> {
    prost_types::Timestamp {
        seconds: t.0.div_euclid(1_000_000),
        nanos: (t.0.rem_euclid(1_000_000) * 1000) as i32,
    }
    .encode_to_vec()
}

/// An event time from its stored bytes (nanoseconds below a microsecond dropped).
pub fn decode_timestamp(bytes: &[u8]) -> Result<Timestamp, LayoutError> {
    let t = prost_types::Timestamp::decode(bytes)
        .map_err(|e| LayoutError::caused("an event time is not a protobuf Timestamp", e))?;
    t.seconds
        .checked_mul(1_000_000)
        .and_then(|s| s.checked_add(i64::from(t.nanos) / 1000))
        .map(Timestamp)
        .ok_or_else(|| LayoutError::new(format!("event time {}s is out of range", t.seconds)))
}

/// A stored value (a serialized `feast.types.Value`) as Oka's, given the
/// feature's Feast type. An empty value (Feast's null) is `Null`.
pub fn decode_value(bytes: &[u8], ty: FeastType) -> Result<Value, LayoutError> {
    let v = pt::Value::decode(bytes).map_err(|_| {
        LayoutError::new(format!(
            "a stored {ty:?} value is not a Feast Value protobuf"
        ))
    })?;
    to_oka(&v, ty)
}

/// A Feast value as Oka's. The value's own kind decides; `ty` is checked.
pub fn to_oka(v: &pt::Value, ty: FeastType) -> Result<Value, LayoutError> {
    let mismatch =
        |got: &str| LayoutError::new(format!("a stored value is {got}; the feature is {ty:?}"));
    let list = |items: Vec<Value>| Value::List(Arc::from(items));
    Ok(match (&v.val, ty) {
        (None | Some(Val::NullVal(_)), _) => Value::Null,
        (Some(Val::BytesVal(b)), FeastType::Bytes) => Value::String(B64.encode(b).into()),
        (Some(Val::StringVal(s)), FeastType::String) => Value::String(s.as_str().into()),
        (Some(Val::Int32Val(n)), FeastType::Int32) => Value::Int(i64::from(*n)),
        (Some(Val::Int64Val(n)), FeastType::Int64) => Value::Int(*n),
        (Some(Val::DoubleVal(x)), FeastType::Double) => Value::Float(*x),
        (Some(Val::FloatVal(x)), FeastType::Float) => Value::Float(f64::from(*x)),
        (Some(Val::BoolVal(b)), FeastType::Bool) => Value::Bool(*b),
        (Some(Val::UnixTimestampVal(s)), FeastType::UnixTimestamp) => seconds(*s)?,
        (Some(Val::BytesListVal(l)), FeastType::List(Scalar::Bytes)) => list(
            l.val
                .iter()
                .map(|b| Value::String(B64.encode(b).into()))
                .collect(),
        ),
        (Some(Val::StringListVal(l)), FeastType::List(Scalar::String)) => list(
            l.val
                .iter()
                .map(|s| Value::String(s.as_str().into()))
                .collect(),
        ),
        (Some(Val::Int32ListVal(l)), FeastType::List(Scalar::Int32)) => {
            list(l.val.iter().map(|n| Value::Int(i64::from(*n))).collect())
        }
        (Some(Val::Int64ListVal(l)), FeastType::List(Scalar::Int64)) => {
            list(l.val.iter().map(|n| Value::Int(*n)).collect())
        }
        (Some(Val::DoubleListVal(l)), FeastType::List(Scalar::Double)) => {
            list(l.val.iter().map(|x| Value::Float(*x)).collect())
        }
        (Some(Val::FloatListVal(l)), FeastType::List(Scalar::Float)) => {
            list(l.val.iter().map(|x| Value::Float(f64::from(*x))).collect())
        }
        (Some(Val::BoolListVal(l)), FeastType::List(Scalar::Bool)) => {
            list(l.val.iter().map(|b| Value::Bool(*b)).collect())
        }
        (Some(Val::UnixTimestampListVal(l)), FeastType::List(Scalar::UnixTimestamp)) => list(
            l.val
                .iter()
                .map(|s| seconds(*s))
                .collect::<Result<_, _>>()?,
        ),
        (Some(other), _) => return Err(mismatch(kind(other))),
    })
}

/// What Feast stores for a missing unix timestamp (numpy's `NaT` as an int64);
/// read as null.
pub const NULL_TIMESTAMP: i64 = i64::MIN;

fn seconds(s: i64) -> Result<Value, LayoutError> {
    if s == NULL_TIMESTAMP {
        return Ok(Value::Null);
    }
    s.checked_mul(1_000_000)
        .map(|us| Value::Timestamp(Timestamp(us)))
        .ok_or_else(|| LayoutError::new(format!("unix timestamp {s} is out of range")))
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::BytesVal(_) => "bytes",
        Val::StringVal(_) => "a string",
        Val::Int32Val(_) => "an int32",
        Val::Int64Val(_) => "an int64",
        Val::DoubleVal(_) => "a double",
        Val::FloatVal(_) => "a float",
        Val::BoolVal(_) => "a bool",
        Val::UnixTimestampVal(_) => "a unix timestamp",
        _ => "of a type Oka does not serve",
    }
}

/// Oka's value as Feast's, of the feature's type `ty` (`Null` is Feast's empty
/// value, as its SDK writes a missing one).
pub fn from_oka(v: &Value, ty: FeastType) -> Result<pt::Value, LayoutError> {
    let wrong = || LayoutError::new(format!("the value {} is not a Feast {ty:?}", v.to_json()));
    let val = match (v, ty) {
        (Value::Null, _) => None,
        (Value::List(items), FeastType::List(s)) => {
            Some(list_from_oka(items, s).ok_or_else(wrong)?)
        }
        (v, ty) => Some(scalar_from_oka(v, ty).ok_or_else(wrong)?),
    };
    Ok(pt::Value { val })
}

/// A value as the bytes Feast's Redis store holds.
pub fn encode_value(v: &Value, ty: FeastType) -> Result<Vec<u8>, LayoutError> {
    Ok(from_oka(v, ty)?.encode_to_vec())
}

fn scalar_from_oka(v: &Value, ty: FeastType) -> Option<Val> {
    Some(match (v, ty) {
        (Value::String(s), FeastType::Bytes) => Val::BytesVal(B64.decode(&**s).ok()?),
        (Value::String(s), FeastType::String) => Val::StringVal(s.to_string()),
        (Value::Int(n), FeastType::Int32) => Val::Int32Val(i32::try_from(*n).ok()?),
        (Value::Int(n), FeastType::Int64) => Val::Int64Val(*n),
        (Value::Float(x), FeastType::Double) => Val::DoubleVal(*x),
        (Value::Float(x), FeastType::Float) => Val::FloatVal(narrow(*x)?),
        (Value::Int(n), FeastType::Double) => Val::DoubleVal(*n as f64),
        (Value::Bool(b), FeastType::Bool) => Val::BoolVal(*b),
        (Value::Timestamp(t), FeastType::UnixTimestamp) => {
            Val::UnixTimestampVal(t.0.div_euclid(1_000_000))
        }
        // A null inside a list of timestamps, as Feast writes one.
        (Value::Null, FeastType::UnixTimestamp) => Val::UnixTimestampVal(NULL_TIMESTAMP),
        _ => return None,
    })
}

/// A float as Feast's 32-bit `float`, refused when it would not read back as
/// the same number (a wider value than `float` holds is not silently rounded).
fn narrow(x: f64) -> Option<f32> {
    let f = x as f32;
    (f64::from(f) == x || x.is_nan()).then_some(f)
}

fn list_from_oka(items: &[Value], s: Scalar) -> Option<Val> {
    let each = |ty| {
        items
            .iter()
            .map(|v| scalar_from_oka(v, ty))
            .collect::<Option<Vec<_>>>()
    };
    let vals = each(FeastType::scalar(s))?;
    macro_rules! take {
        ($variant:ident) => {
            vals.into_iter()
                .map(|v| match v {
                    Val::$variant(x) => Some(x),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?
        };
    }
    Some(match s {
        Scalar::Bytes => Val::BytesListVal(pt::BytesList {
            val: take!(BytesVal),
        }),
        Scalar::String => Val::StringListVal(pt::StringList {
            val: take!(StringVal),
        }),
        Scalar::Int32 => Val::Int32ListVal(pt::Int32List {
            val: take!(Int32Val),
        }),
        Scalar::Int64 => Val::Int64ListVal(pt::Int64List {
            val: take!(Int64Val),
        }),
        Scalar::Double => Val::DoubleListVal(pt::DoubleList {
            val: take!(DoubleVal),
        }),
        Scalar::Float => Val::FloatListVal(pt::FloatList {
            val: take!(FloatVal),
        }),
        Scalar::Bool => Val::BoolListVal(pt::BoolList {
            val: take!(BoolVal),
        }),
        Scalar::UnixTimestamp => Val::UnixTimestampListVal(pt::Int64List {
            val: take!(UnixTimestampVal),
        }),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Keys as Feast 0.67's SDK wrote them to Redis (`feast materialize` of
    /// tests/feast/repo, read back with redis-cli).
    #[test]
    fn entity_keys_are_feasts_bytes() {
        let driver = [Column::new("driver_id", FeastType::Int64)];
        assert_eq!(
            redis_key("oka_feast_test", &driver, &[Value::Int(1001)]).unwrap(),
            b"\x01\x00\x00\x00\x02\x00\x00\x00\x09\x00\x00\x00driver_id\x04\x00\x00\x00\x08\x00\x00\x00\xe9\x03\x00\x00\x00\x00\x00\x00oka_feast_test"
        );
        // Compound: the keys sorted by name, whatever the view's order.
        let pair = [
            Column::new("driver_id", FeastType::Int64),
            Column::new("customer_id", FeastType::String),
        ];
        assert_eq!(
            redis_key("oka_feast_test", &pair, &[Value::Int(1002), Value::String("c-1".into())]).unwrap(),
            b"\x02\x00\x00\x00\x02\x00\x00\x00\x0b\x00\x00\x00customer_id\x02\x00\x00\x00\x09\x00\x00\x00driver_id\x02\x00\x00\x00\x03\x00\x00\x00c-1\x04\x00\x00\x00\x08\x00\x00\x00\xea\x03\x00\x00\x00\x00\x00\x00oka_feast_test"
        );
        // And back.
        let key = redis_key(
            "oka_feast_test",
            &pair,
            &[Value::Int(1002), Value::String("c-1".into())],
        );
        assert_eq!(
            parse_redis_key(&key.unwrap(), "oka_feast_test").unwrap(),
            [
                ("customer_id".to_owned(), Value::String("c-1".into())),
                ("driver_id".to_owned(), Value::Int(1002))
            ]
        );
        let when = [
            Column::new("at", FeastType::UnixTimestamp),
            Column::new("b", FeastType::Bytes),
        ];
        let values = [
            Value::Timestamp(Timestamp(7_000_000)),
            Value::String("AP8=".into()),
        ];
        let key = redis_key("p", &when, &values).unwrap();
        let back: Vec<Value> = (parse_redis_key(&key, "p").unwrap().into_iter())
            .map(|(_, v)| v)
            .collect();
        assert_eq!(back, values);
        assert_eq!(
            parse_redis_key(&key, "other"),
            None,
            "another project's key"
        );
        assert_eq!(parse_redis_key(&key[1..], "p"), None);
        assert_eq!(parse_redis_key(b"oka:{f|a}:l", "p"), None);
        assert_eq!(parse_redis_key(b"\xff\xff\xff\xffp", "p"), None);
        let e = redis_key("p", &driver, &[Value::String("x".into())])
            .unwrap_err()
            .message()
            .to_owned();
        assert!(e.contains("driver_id"), "{e}");
    }

    /// Field names as Feast's `_mmh3` computes them (Python: `mmh3.hash(key,
    /// signed=False)` packed little-endian, first 4 bytes).
    #[test]
    fn feature_fields_are_feasts_hashes() {
        assert_eq!(
            feature_field("driver_stats", "conv_rate"),
            [250, 115, 16, 20]
        );
        assert_eq!(
            feature_field("driver_customer_trips", "last_rating"),
            [76, 216, 131, 27]
        );
        assert_eq!(feature_field("日本", "ü"), [247, 93, 227, 28]);
        assert_eq!(ts_field("driver_stats"), "_ts:driver_stats");
    }

    #[test]
    fn values_round_trip_through_feasts_bytes() {
        let cases = [
            (Value::String("AAH/".into()), FeastType::Bytes),
            (Value::String("Émile".into()), FeastType::String),
            (Value::Int(-3), FeastType::Int32),
            (Value::Int(-(1 << 62)), FeastType::Int64),
            (Value::Float(0.123_456_789_012_345), FeastType::Double),
            (Value::Float(0.5), FeastType::Float),
            (Value::Bool(false), FeastType::Bool),
            (
                Value::Timestamp(Timestamp(1_600_000_000_000_000)),
                FeastType::UnixTimestamp,
            ),
            (Value::Null, FeastType::Int64),
            (
                Value::List(Arc::from(vec![Value::Float(0.25), Value::Float(1.5)])),
                FeastType::List(Scalar::Float),
            ),
            (
                Value::List(Arc::from(Vec::new())),
                FeastType::List(Scalar::String),
            ),
        ];
        for (v, ty) in cases {
            let bytes = encode_value(&v, ty).unwrap();
            assert_eq!(decode_value(&bytes, ty).unwrap(), v, "{ty:?}");
        }
        // Feast's null timestamp (NaT), alone and in a list.
        let nat = pt::Value {
            val: Some(Val::UnixTimestampVal(NULL_TIMESTAMP)),
        };
        assert_eq!(to_oka(&nat, FeastType::UnixTimestamp).unwrap(), Value::Null);
        let with_null = Value::List(Arc::from(vec![Value::Null, Value::Timestamp(Timestamp(0))]));
        let ty = FeastType::List(Scalar::UnixTimestamp);
        assert_eq!(
            decode_value(&encode_value(&with_null, ty).unwrap(), ty).unwrap(),
            with_null
        );
        // A float that 32 bits cannot hold is refused, not rounded.
        assert!(encode_value(&Value::Float(0.1), FeastType::Float).is_err());
        assert!(encode_value(&Value::Int(1 << 40), FeastType::Int32).is_err());
        // A stored value of another type than the feature's is named.
        let bytes = encode_value(&Value::Int(1), FeastType::Int64).unwrap();
        let e = decode_value(&bytes, FeastType::String)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(e.contains("int64"), "{e}");
    }

    #[test]
    fn event_times_round_trip() {
        let t = Timestamp(1_764_870_000_123_456);
        assert_eq!(decode_timestamp(&encode_timestamp(t)).unwrap(), t);
        let before_1970 = Timestamp(-1_500_000);
        assert_eq!(
            decode_timestamp(&encode_timestamp(before_1970)).unwrap(),
            before_1970
        );
    }
}
