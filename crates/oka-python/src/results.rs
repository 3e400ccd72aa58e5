//! One key's answer from a worker (see `worker.py`) as the executor takes it:
//! the output's records, or why there are none. The worker checked the result
//! against the output's types already; the server checks again while it reads
//! it (straight into values, without an intermediate tree), since the worker
//! runs the user's code: a value that does not fit fails its key, never the
//! server.

use std::sync::Arc;

use oka_core::batch::KeyResult;
use oka_core::{Entity, FieldType, Row, Timestamp, UdfError, Value};

use crate::decl::UdfEntry;
use crate::marshal::{
    BINARY_FLOAT, FALSE, INT, LIST, LONG, NONE, Obj, ReadError, Reader, TRUE, TUPLE, UNICODE,
};

/// What a worker's answer for one key said besides its records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Notes {
    /// The traceback of an exception, when the worker sent one (rate-limited
    /// there), for the log.
    pub traceback: Option<String>,
}

/// The key a record is for: its output key values, and the request time.
#[derive(Debug, Clone, Copy)]
pub struct KeyContext<'k> {
    /// The request's values of the output entity's key fields.
    pub key: &'k [Value],
    /// The request time (a record's timestamp when the UDF gives none).
    pub now: Timestamp,
}

/// Reads one key's answer of `udf` from `r`. `Err` is an answer that cannot be
/// read at all (the frame is broken); a readable answer that does not fit is
/// the key's error.
pub fn decode(
    udf: &UdfEntry,
    r: &mut Reader<'_>,
    ctx: KeyContext<'_>,
) -> Result<(KeyResult, Notes), ReadError> {
    let mut notes = Notes::default();
    let fields = r.seq()?;
    let status = r.int()?;
    let result = match (status, fields) {
        (Some(0), 3) => record(udf, r, ctx)?.map(|row| Arc::from([row])),
        (Some(3), 2) => {
            let n = r.seq()?;
            let mut rows = Vec::with_capacity(n);
            let mut failed = None;
            for _ in 0..n {
                if r.seq()? != 2 {
                    return Err(ReadError::Type(TUPLE));
                }
                match record(udf, r, ctx)? {
                    Ok(row) => rows.push(row),
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            failed.map_or_else(|| Ok(rows.into()), Err)
        }
        (Some(1), 4) => {
            let kind = text(r)?;
            let message = text(r)?;
            notes.traceback = r.opt_str()?.map(str::to_owned);
            Err(UdfError::failed(if message.is_empty() {
                kind
            } else {
                format!("{kind}: {message}")
            }))
        }
        (Some(2), 2) => Err(UdfError::failed(format!(
            "`{}` ({}): {}",
            udf.feature(),
            udf.label(),
            text(r)?
        ))),
        (Some(4), 2) => Err(UdfError::failed(format!(
            "{} (the worker's limit is {} MiB, --python-memory-mib); the worker is replaced",
            text(r)?,
            udf.memory_mib()
        ))),
        _ => return Err(ReadError::Type(TUPLE)),
    };
    Ok((result, notes))
}

/// A string the worker wrote (its text, however it was encoded).
fn text(r: &mut Reader<'_>) -> Result<String, ReadError> {
    Ok(match r.str()? {
        Ok(s) => s.to_owned(),
        Err(_) => "<text that is not UTF-8>".to_owned(),
    })
}

/// One record: its values in the output entity's column order, then the bit
/// set of the columns the UDF did not give (keys from the request, the
/// timestamp `now`).
fn record(
    udf: &UdfEntry,
    r: &mut Reader<'_>,
    ctx: KeyContext<'_>,
) -> Result<Result<Row, UdfError>, ReadError> {
    let entity: &Entity = udf.output();
    if r.seq()? != entity.columns.len() {
        return Err(ReadError::Type(LIST));
    }
    // Built where the row keeps them: one allocation.
    let mut columns: Arc<[Value]> =
        std::iter::repeat_n(Value::Null, entity.columns.len()).collect();
    let Some(slots) = Arc::get_mut(&mut columns) else {
        return Err(ReadError::Truncated);
    };
    let mut wrong = None;
    for (column, slot) in entity.columns.iter().zip(slots.iter_mut()) {
        match value(&column.ty, r)? {
            Ok(v) => *slot = v,
            Err(got) => wrong = wrong.or(Some((column, got))),
        }
    }
    let omitted = r.int()?.map_or(u64::MAX, |m| u64::try_from(m).unwrap_or(0));
    if let Some((column, got)) = wrong {
        return Ok(Err(udf.worker_fault(&format!(
            "field `{}` as {got}, which is not a {}",
            column.name, column.ty
        ))));
    }
    let mut event_time = ctx.now;
    for (i, v) in slots.iter_mut().enumerate() {
        if i < 64 && omitted & (1 << i) != 0 {
            *v = match entity.key_index.iter().position(|&k| k == i) {
                Some(k) => ctx.key.get(k).cloned().unwrap_or(Value::Null),
                None if i == entity.timestamp_index => Value::Timestamp(ctx.now),
                None => return Ok(Err(udf.worker_fault("a value field marked as not given"))),
            };
        }
        if i == entity.timestamp_index
            && let Value::Timestamp(t) = v
        {
            event_time = *t;
        }
    }
    Ok(Ok(Row::new(event_time, columns)))
}

/// The next value as one of type `ty`; else (read past) what it was, in words.
fn value(ty: &FieldType, r: &mut Reader<'_>) -> Result<Result<Value, &'static str>, ReadError> {
    let next = r.peek()?;
    Ok(Ok(match (ty, next) {
        (_, NONE) => {
            r.obj()?;
            Value::Null
        }
        (FieldType::Float, BINARY_FLOAT) => {
            let f = r.float()?;
            if !f.is_finite() {
                return Ok(Err("a float that is not finite"));
            }
            Value::Float(f)
        }
        (FieldType::Int, INT | LONG) => match r.int()? {
            Some(i) => Value::Int(i),
            None => return Ok(Err("an int past 64 bits")),
        },
        (FieldType::Bool, TRUE | FALSE) => {
            r.obj()?;
            Value::Bool(next == TRUE)
        }
        (FieldType::String, UNICODE) => match r.str()? {
            Ok(s) => Value::String(s.into()),
            Err(_) => return Ok(Err("a string that is not valid UTF-8")),
        },
        (FieldType::Timestamp, INT | LONG) => match r.int()?.map(Timestamp) {
            Some(t) if t.is_rfc3339() => Value::Timestamp(t),
            _ => return Ok(Err("a time outside the years 0000–9999")),
        },
        (FieldType::List(inner), LIST | TUPLE) => {
            let n = r.seq()?;
            let mut items = Vec::with_capacity(n);
            let mut wrong = None;
            for _ in 0..n {
                match value(inner, r)? {
                    Ok(v) => items.push(v),
                    Err(got) => wrong = wrong.or(Some(got)),
                }
            }
            match wrong {
                Some(got) => return Ok(Err(got)),
                None => Value::List(items.into()),
            }
        }
        _ => {
            return Ok(Err(match r.obj()? {
                Obj::None => "None",
                Obj::Bool(_) => "a bool",
                Obj::Int(_) | Obj::BigInt => "an int",
                Obj::Float(_) => "a float",
                Obj::Str(_) | Obj::BadStr(_) => "a string",
                Obj::List(_) => "a list",
                Obj::Dict(_) => "a dict",
            }));
        }
    }))
}
