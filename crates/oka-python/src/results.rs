//! One key's answer from a worker (a marshal chunk: see `worker.py`) as the
//! executor takes it: the output's records, or why there are none. The worker
//! checked the result against the output's types already; the server checks
//! again, since the worker runs the user's code, and a value that does not fit
//! fails its key, never the server.

use oka_core::batch::KeyResult;
use oka_core::{FieldType, Row, Timestamp, UdfError, Value};

use crate::decl::UdfEntry;
use crate::marshal::{Obj, Reader};

/// What a worker's answer for one key said besides its records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Notes {
    /// The traceback of an exception, when the worker sent one (rate-limited
    /// there), for the log.
    pub traceback: Option<String>,
}

/// Decodes `chunk`, the answer for one key of `udf` whose output key values are
/// `key`, at request time `now`.
pub fn decode(udf: &UdfEntry, chunk: &[u8], key: &[Value], now: Timestamp) -> (KeyResult, Notes) {
    let mut notes = Notes::default();
    let obj = match Reader::new(chunk).obj() {
        Ok(obj) => obj,
        Err(e) => {
            return (
                Err(udf.worker_fault(&format!("an unreadable answer ({e})"))),
                notes,
            );
        }
    };
    let parts = obj.as_list().unwrap_or_default();
    let status = parts.first().and_then(Obj::as_int);
    let text = |i: usize| parts.get(i).and_then(Obj::as_str).unwrap_or("");
    let result = match status {
        Some(0) => record(udf, parts.get(1), parts.get(2), key, now).map(|r| vec![r]),
        Some(3) => match parts.get(1).and_then(Obj::as_list) {
            Some(records) => records
                .iter()
                .map(|r| {
                    let r = r.as_list().unwrap_or_default();
                    record(udf, r.first(), r.get(1), key, now)
                })
                .collect(),
            None => Err(udf.worker_fault("a list of records that is not a list")),
        },
        Some(1) => {
            notes.traceback = parts.get(3).and_then(Obj::as_str).map(str::to_owned);
            Err(UdfError::failed(if text(2).is_empty() {
                text(1).to_owned()
            } else {
                format!("{}: {}", text(1), text(2))
            }))
        }
        Some(2) => Err(UdfError::failed(format!(
            "`{}` ({}): {}",
            udf.feature(),
            udf.label(),
            text(1)
        ))),
        Some(4) => Err(UdfError::failed(format!(
            "{} (the worker's limit is {} MiB, --python-memory-mib); the worker is replaced",
            text(1),
            udf.memory_mib()
        ))),
        _ => Err(udf.worker_fault("an answer of an unknown kind")),
    };
    (result, notes)
}

/// One record: `values` in the output entity's column order, `omitted` the bit
/// set of the columns the UDF did not give (keys from the request, the
/// timestamp `now`).
fn record(
    udf: &UdfEntry,
    values: Option<&Obj>,
    omitted: Option<&Obj>,
    key: &[Value],
    now: Timestamp,
) -> Result<Row, UdfError> {
    let entity = udf.output();
    let (Some(values), Some(omitted)) = (values.and_then(Obj::as_list), omitted) else {
        return Err(udf.worker_fault("a record without its values"));
    };
    if values.len() != entity.columns.len() {
        return Err(udf.worker_fault("a record with another number of columns"));
    }
    let omitted = match omitted {
        Obj::Int(m) => u64::try_from(*m).unwrap_or(0),
        Obj::BigInt => u64::MAX,
        _ => 0,
    };
    let mut columns = Vec::with_capacity(values.len());
    let mut event_time = now;
    for (i, (obj, column)) in values.iter().zip(&entity.columns).enumerate() {
        let value = if i < 64 && omitted & (1 << i) != 0 {
            match entity.key_index.iter().position(|&k| k == i) {
                Some(k) => key.get(k).cloned().unwrap_or(Value::Null),
                None if i == entity.timestamp_index => Value::Timestamp(now),
                None => return Err(udf.worker_fault("a value field marked as not given")),
            }
        } else {
            value(&column.ty, obj).map_err(|got| {
                udf.worker_fault(&format!(
                    "field `{}` as {got}, which is not a {}",
                    column.name, column.ty
                ))
            })?
        };
        if i == entity.timestamp_index
            && let Value::Timestamp(t) = value
        {
            event_time = t;
        }
        columns.push(value);
    }
    Ok(Row::new(event_time, columns))
}

/// `obj` as a value of type `ty`; else what it was, in words.
fn value(ty: &FieldType, obj: &Obj) -> Result<Value, &'static str> {
    Ok(match (ty, obj) {
        (_, Obj::None) => Value::Null,
        (FieldType::Float, Obj::Float(f)) if f.is_finite() => Value::Float(*f),
        (FieldType::Int, Obj::Int(i)) => Value::Int(*i),
        (FieldType::Bool, Obj::Bool(b)) => Value::Bool(*b),
        (FieldType::String, Obj::Str(s)) => Value::String(s.as_str().into()),
        (FieldType::Timestamp, Obj::Int(us)) if Timestamp(*us).is_rfc3339() => {
            Value::Timestamp(Timestamp(*us))
        }
        (FieldType::List(inner), Obj::List(items)) => Value::List(
            items
                .iter()
                .map(|item| value(inner, item))
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        (_, Obj::Float(_)) => return Err("a float"),
        (_, Obj::Int(_)) => return Err("an int"),
        (_, Obj::BigInt) => return Err("an int past 64 bits"),
        (_, Obj::Bool(_)) => return Err("a bool"),
        (_, Obj::Str(_)) => return Err("a string"),
        (_, Obj::BadStr(_)) => return Err("a string that is not valid UTF-8"),
        (_, Obj::List(_)) => return Err("a list"),
        (_, Obj::Dict(_)) => return Err("a dict"),
    })
}
