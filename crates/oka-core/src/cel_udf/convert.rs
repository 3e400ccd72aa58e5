//! Values between Oka and CEL.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelTimestamp,
};
use cel::common::value::Val;
use cel::objects::{Key, Map};
use chrono::{DateTime, FixedOffset};

use super::CelError;
use crate::value::{Row, Timestamp, Value};

/// A record as a CEL map of the given (column index, key) pairs.
pub(super) fn record_to_cel(columns: &[(usize, Key)], row: &Row) -> cel::Value {
    let map: HashMap<Key, cel::Value> = columns
        .iter()
        .map(|(i, k)| (k.clone(), to_cel(&row.columns[*i])))
        .collect();
    cel::Value::Map(Map { map: Arc::new(map) })
}

/// A record's `columns` (index, name) as a CEL map, borrowing its strings.
pub(super) fn record_to_val<'v>(
    columns: &'v [(usize, Arc<str>)],
    row: &'v Row,
) -> Box<dyn Val + 'v> {
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = columns
        .iter()
        .map(|(i, name)| (CelMapKey::from(&**name), to_val(&row.columns[*i])))
        .collect();
    Box::new(CelMap::from(map))
}

/// An Oka value as the interpreter's `Val`, borrowing strings: the same CEL value
/// as [`to_cel`].
pub(super) fn to_val(v: &Value) -> Box<dyn Val + '_> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Int(i) => Box::new(CelInt::from(*i)),
        Value::Float(f) => Box::new(CelDouble::from(*f)),
        Value::String(s) => Box::new(CelString::from(&**s)),
        Value::Timestamp(t) => match t.to_datetime() {
            Some(dt) => Box::new(CelTimestamp::from(dt.fixed_offset())),
            None => Box::new(CelNull),
        },
        Value::List(items) => Box::new(CelList::from(items.iter().map(to_val).collect::<Vec<_>>())),
    }
}

/// An Oka value as a CEL value.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Int(i) => cel::Value::Int(*i),
        Value::Float(f) => cel::Value::Float(*f),
        Value::String(s) => cel::Value::String(Arc::new(s.to_string())),
        Value::Timestamp(t) => match t.to_datetime() {
            Some(dt) => cel::Value::Timestamp(dt.fixed_offset()),
            None => cel::Value::Null,
        },
        Value::List(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
    }
}

/// A CEL result as an Oka value; maps, bytes and durations have no Oka type.
pub fn from_cel(v: cel::Value) -> Result<Value, CelError> {
    Ok(match v {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(b),
        cel::Value::Int(i) => Value::Int(i),
        cel::Value::UInt(u) => Value::Int(i64::try_from(u).map_err(|_| CelError::UintOverflow(u))?),
        cel::Value::Float(f) => Value::Float(f),
        cel::Value::String(s) => Value::String(s.as_str().into()),
        cel::Value::Timestamp(t) => Value::Timestamp(from_datetime(&t)),
        cel::Value::List(items) => Value::List(
            items
                .iter()
                .cloned()
                .map(from_cel)
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        other => return Err(CelError::NoFeatureType(super::explain::type_of(&other))),
    })
}

fn from_datetime(t: &DateTime<FixedOffset>) -> Timestamp {
    Timestamp(t.timestamp_micros())
}
