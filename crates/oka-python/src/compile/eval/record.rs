//! The output record of a translated UDF, checked and converted as the
//! worker's encoder does.

use std::sync::Arc;

use oka_core::{FieldType, Row, Value};

use super::{Frame, Py, R, V, eval, item};
use crate::compile::ir::Expr;
use crate::protocol::MAX_STR_CHARS;

/// The output record: each given field converted as the worker's encoder
/// converts it (`worker.py`, `converter`); a value it would refuse runs in
/// Python, which answers the refusal.
pub(super) fn record<'a>(
    given: &'a [Option<Expr>],
    required: &[usize],
    f: &mut Frame<'a, '_>,
) -> R<Row> {
    let out = f.output;
    // Built where the row keeps them: one allocation.
    let mut columns: Arc<[Value]> = std::iter::repeat_n(Value::Null, out.columns.len()).collect();
    let slots = Arc::get_mut(&mut columns).ok_or(Py)?;
    let mut event_time = f.now;
    for (i, ((g, c), slot)) in given
        .iter()
        .zip(&out.columns)
        .zip(slots.iter_mut())
        .enumerate()
    {
        let v = match g {
            Some(e) => {
                let v = eval(e, f)?;
                if matches!(v, V::None) && required.contains(&i) {
                    return Err(Py);
                }
                convert(&v, &c.ty)?
            }
            None => match out.key_index.iter().position(|&k| k == i) {
                Some(k) => f.key.get(k).cloned().unwrap_or(Value::Null),
                None => Value::Timestamp(f.now),
            },
        };
        if i == out.timestamp_index
            && let Value::Timestamp(t) = v
        {
            event_time = t;
        }
        *slot = v;
    }
    Ok(Row::new(event_time, columns))
}

fn convert(v: &V<'_>, ty: &FieldType) -> R<Value> {
    Ok(match (ty, v) {
        (_, V::None) => Value::Null,
        (FieldType::Float, V::Float(x)) if x.is_finite() => Value::Float(*x),
        (FieldType::Float, V::Int(i)) => Value::Float(*i as f64),
        (FieldType::Int, V::Int(i)) => Value::Int(*i),
        (FieldType::Bool, V::Bool(b)) => Value::Bool(*b),
        (FieldType::String, V::Str(s))
            if s.len() <= MAX_STR_CHARS || s.chars().count() <= MAX_STR_CHARS =>
        {
            Value::String(s.value())
        }
        (FieldType::Timestamp, V::Time(t)) if t.is_rfc3339() => Value::Timestamp(*t),
        (FieldType::List(inner), V::Vals(_) | V::List(_)) => {
            let n = v.len()?;
            let mut items = Vec::with_capacity(n);
            for i in 0..n {
                items.push(convert(&item(v, i)?, inner)?);
            }
            Value::List(items.into())
        }
        _ => return Err(Py),
    })
}
