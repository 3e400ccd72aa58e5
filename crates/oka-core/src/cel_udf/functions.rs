//! Oka's aggregation functions for CEL: `math.sum`, `math.mean`, `math.min`,
//! `math.max`, `math.stddev` over a list, `math.percentile(list, p)` and
//! `math.ewma(values, timestamps, half_life, now)`, all run by [`crate::stats`].
//!
//! A type problem (a list of strings, ints mixed with floats) or a parameter out
//! of range (`p` outside `[0, 1]`, a half-life that is not positive) fails as an
//! unexpected type, which the load-time dry run reports; an int overflow or lists
//! of different lengths depend on the data and fail only that key.

use cel::common::functions::Function;
use cel::common::traits::Iterable;
use cel::common::types::{
    CelDouble, CelDuration, CelInt, CelNull, CelTimestamp, CelUInt, DOUBLE_TYPE, DURATION_TYPE,
    INT_TYPE, Kind, LIST_TYPE, TIMESTAMP_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use crate::kernels::{Acc, Stat, StatError, Takes, type_name};
use crate::value::{Timestamp, Value};

/// How a function is called, for messages: `math.percentile(list, p)`.
pub(super) fn usage(name: &str) -> Option<&'static str> {
    Some(match name {
        "math.sum" => "math.sum(list)",
        "math.mean" => "math.mean(list)",
        "math.min" => "math.min(list)",
        "math.max" => "math.max(list)",
        "math.stddev" => "math.stddev(list)",
        "math.percentile" => "math.percentile(list, 0.9)",
        "math.ewma" => "math.ewma(values, timestamps, duration('10m'), now)",
        _ => return None,
    })
}

/// Declares the functions on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let over_list: [(&str, Function); 5] = [
        ("math.sum", sum),
        ("math.mean", mean),
        ("math.min", min),
        ("math.max", max),
        ("math.stddev", stddev),
    ];
    for (name, f) in over_list {
        env.add_overload(name, &format!("{name}(list)"), vec![LIST_TYPE], f)?;
    }
    for p in [DOUBLE_TYPE, INT_TYPE] {
        env.add_overload(
            "math.percentile",
            &format!("math.percentile(list,{})", p.name()),
            vec![LIST_TYPE, p],
            percentile,
        )?;
    }
    env.add_overload(
        "math.ewma",
        "math.ewma(list,list,duration,timestamp)",
        vec![LIST_TYPE, LIST_TYPE, DURATION_TYPE, TIMESTAMP_TYPE],
        ewma,
    )
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    over_list("math.sum", Stat::Sum, args)
}

fn mean<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    over_list("math.mean", Stat::Mean, args)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    over_list("math.min", Stat::Min, args)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    over_list("math.max", Stat::Max, args)
}

fn stddev<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    over_list("math.stddev", Stat::Stddev, args)
}

fn percentile<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let p = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 0))?;
    let p = match element(&*p) {
        Ok(Value::Float(p)) => p,
        Ok(Value::Int(p)) => p as f64,
        _ => return Err(ExecutionError::invalid_argument_count(2, 1)),
    };
    over_list("math.percentile", Stat::Percentile(p), args)
}

fn over_list<'b, 'v>(
    function: &str,
    stat: Stat,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] =
        <[_; 1]>::try_from(args).map_err(|a| ExecutionError::invalid_argument_count(1, a.len()))?;
    stat.check().map_err(|e| failure(function, e))?;
    let mut acc = Acc::new(stat, Timestamp(0));
    let Some(items) = list.as_iterable() else {
        return Err(ExecutionError::invalid_argument_count(1, 0));
    };
    for (index, item) in elements(items).into_iter().enumerate() {
        let v = element(item).map_err(|got| unexpected(function, stat.takes(), index, got))?;
        acc.push(&v, Timestamp(0))
            .map_err(|e| failure(function, e))?;
    }
    finish(function, acc)
}

fn ewma<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "math.ewma";
    let [values, times, half_life, now] =
        <[_; 4]>::try_from(args).map_err(|a| ExecutionError::invalid_argument_count(4, a.len()))?;
    let half_life_s = half_life
        .downcast_ref::<CelDuration>()
        .and_then(|d| d.inner().num_microseconds())
        .map_or(0.0, |us| us as f64 / 1e6);
    let now = now
        .downcast_ref::<CelTimestamp>()
        .map(|t| Timestamp(t.inner().timestamp_micros()))
        .ok_or_else(|| ExecutionError::invalid_argument_count(4, 3))?;
    let stat = Stat::Ewma { half_life_s };
    stat.check().map_err(|e| failure(F, e))?;
    let (Some(values), Some(times)) = (values.as_iterable(), times.as_iterable()) else {
        return Err(ExecutionError::invalid_argument_count(4, 2));
    };
    let (values, times) = (elements(values), elements(times));
    if values.len() != times.len() {
        return Err(failure(
            F,
            StatError::Lengths {
                values: values.len(),
                timestamps: times.len(),
            },
        ));
    }
    let mut acc = Acc::new(stat, now);
    for (index, (v, t)) in values.into_iter().zip(times).enumerate() {
        let v = element(v).map_err(|got| unexpected(F, Takes::Numbers, index, got))?;
        let at = match element(t) {
            Ok(Value::Timestamp(t)) => t,
            // A value without its time is skipped, as a null value is.
            Ok(Value::Null) => continue,
            Ok(other) => {
                return Err(unexpected(F, Takes::Timestamps, index, type_name(&other)));
            }
            Err(got) => return Err(unexpected(F, Takes::Timestamps, index, got)),
        };
        acc.push(&v, at).map_err(|e| failure(F, e))?;
    }
    finish(F, acc)
}

/// A CEL list's elements.
fn elements<'b, 'v>(list: &'b (dyn Iterable + 'v)) -> Vec<&'b (dyn Val + 'v)> {
    let mut out = Vec::new();
    let mut it = list.iter();
    while let Some(v) = it.next() {
        out.push(v);
    }
    out
}

fn finish<'b, 'v>(function: &str, acc: Acc) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(match acc.finish().map_err(|e| failure(function, e))? {
        Value::Int(i) => CowVal::owned(CelInt::from(i)),
        Value::Float(f) => CowVal::owned(CelDouble::from(f)),
        Value::Timestamp(t) => match t.to_datetime() {
            Some(dt) => CowVal::owned(CelTimestamp::from(dt.fixed_offset())),
            None => CowVal::owned(CelNull),
        },
        _ => CowVal::owned(CelNull),
    })
}

/// A list element as an Oka value, or its CEL type name when it is not a
/// number, a timestamp or null.
fn element(v: &dyn Val) -> Result<Value, &'static str> {
    let kind = v.get_type().kind();
    let got = match kind {
        Kind::NullType => return Ok(Value::Null),
        Kind::Int => v.downcast_ref::<CelInt>().map(|i| Value::Int(*i.inner())),
        Kind::UInt => v
            .downcast_ref::<CelUInt>()
            .and_then(|u| i64::try_from(*u.inner()).ok())
            .map(Value::Int),
        Kind::Double => v
            .downcast_ref::<CelDouble>()
            .map(|d| Value::Float(*d.inner())),
        Kind::Timestamp => v
            .downcast_ref::<CelTimestamp>()
            .map(|t| Value::Timestamp(Timestamp(t.inner().timestamp_micros()))),
        _ => None,
    };
    got.ok_or(match kind {
        Kind::UInt => "a uint beyond int",
        Kind::Boolean => "bool",
        Kind::String => "string",
        Kind::Bytes => "bytes",
        Kind::Duration => "duration",
        Kind::List => "list",
        Kind::Map => "map",
        _ => "a value of another type",
    })
}

/// A failure of `function`: a spec error (types, parameters) as an unexpected
/// type, so that the load-time dry run reports it; a data error as a function
/// error, which fails only the key.
fn failure(function: &str, e: StatError) -> ExecutionError {
    if e.is_spec_error() {
        ExecutionError::UnexpectedType {
            got: e.to_string(),
            want: function.to_owned(),
        }
    } else {
        ExecutionError::function_error(function, e)
    }
}

/// Element `index` of a list is of type `got`, which `function` does not take.
fn unexpected(function: &str, takes: Takes, index: usize, got: &'static str) -> ExecutionError {
    failure(function, StatError::Type { takes, index, got })
}
