//! Arrow columns ↔ Oka values, by the spec's field types.
//!
//! Each spec type has one Arrow type in what Oka writes (`string` → Utf8, `int` →
//! Int64, `float` → Float64, `bool` → Boolean, `timestamp` → Timestamp(µs, UTC),
//! lists → List), and reads the types that hold its values without loss or
//! guessing: any string type, any integer type for `int` (a UInt64 past 2^63 is
//! refused), any float or integer type for `float`, timestamps of any unit and
//! zone and dates for `timestamp`. Anything else is refused with the column's
//! type named.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, ListArray, StringArray,
    TimestampMicrosecondArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{
    DataType, Field, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};
use oka_core::{FieldType, Timestamp, Value};

/// The Arrow type Oka writes for a spec type.
pub fn arrow_type(ty: &FieldType) -> DataType {
    match ty {
        FieldType::String => DataType::Utf8,
        FieldType::Int => DataType::Int64,
        FieldType::Float => DataType::Float64,
        FieldType::Bool => DataType::Boolean,
        FieldType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        FieldType::List(item) => {
            DataType::List(Arc::new(Field::new_list_field(arrow_type(item), true)))
        }
    }
}

/// Whether a column of `dt` can hold values of `ty` without loss.
fn accepts(dt: &DataType, ty: &FieldType) -> bool {
    use DataType as D;
    let int = |d: &D| {
        matches!(
            d,
            D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64
        )
    };
    let string = |d: &D| matches!(d, D::Utf8 | D::LargeUtf8 | D::Utf8View);
    match (ty, dt) {
        (_, D::Null) => true,
        (FieldType::String, D::Dictionary(_, v)) => string(v),
        (FieldType::String, d) => string(d),
        (FieldType::Int, d) => int(d),
        (FieldType::Float, d) => int(d) || matches!(d, D::Float16 | D::Float32 | D::Float64),
        (FieldType::Bool, d) => matches!(d, D::Boolean),
        (FieldType::Timestamp, d) => matches!(d, D::Timestamp(_, _) | D::Date32 | D::Date64),
        (FieldType::List(item), D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _)) => {
            accepts(f.data_type(), item)
        }
        _ => false,
    }
}

/// What a column of `ty` may be, for messages.
pub fn expected(ty: &FieldType) -> String {
    match ty {
        FieldType::String => "a string column".to_owned(),
        FieldType::Int => "an integer column".to_owned(),
        FieldType::Float => "a float or integer column".to_owned(),
        FieldType::Bool => "a boolean column".to_owned(),
        FieldType::Timestamp => "a timestamp or date column".to_owned(),
        FieldType::List(item) => format!("a list column of {}", expected(item)),
    }
}

/// Why a column cannot hold a spec type's values.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unfit {
    /// The column's type cannot hold them.
    #[error("is {found}; expected {} ({ty})", expected(.ty))]
    Type {
        /// The column's Arrow type.
        found: DataType,
        /// The spec type.
        ty: FieldType,
    },
    /// A value does not fit (an integer past 2^63, say).
    #[error("holds a value that is not a {ty}: {why}")]
    Value {
        /// The spec type.
        ty: FieldType,
        /// Arrow's reason.
        why: String,
    },
}

/// A column's values as `ty`'s, one per row (`Null` for a null).
pub fn values(array: &ArrayRef, ty: &FieldType) -> Result<Vec<Value>, Unfit> {
    if !accepts(array.data_type(), ty) {
        return Err(Unfit::Type {
            found: array.data_type().clone(),
            ty: ty.clone(),
        });
    }
    let target = arrow_type(ty);
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let cast = cast_with_options(array, &target, &options).map_err(|e| Unfit::Value {
        ty: ty.clone(),
        why: e.to_string(),
    })?;
    Ok(typed(&cast, ty))
}

/// The values of a column already of `arrow_type(ty)`.
fn typed(array: &ArrayRef, ty: &FieldType) -> Vec<Value> {
    let n = array.len();
    let mut out = Vec::with_capacity(n);
    match ty {
        FieldType::String => {
            let a = array.as_string::<i32>();
            out.extend((0..n).map(|i| opt(a.is_valid(i), || Value::String(a.value(i).into()))));
        }
        FieldType::Int => {
            let a = array.as_primitive::<Int64Type>();
            out.extend((0..n).map(|i| opt(a.is_valid(i), || Value::Int(a.value(i)))));
        }
        FieldType::Float => {
            let a = array.as_primitive::<Float64Type>();
            out.extend((0..n).map(|i| opt(a.is_valid(i), || Value::Float(a.value(i)))));
        }
        FieldType::Bool => {
            let a = array.as_boolean();
            out.extend((0..n).map(|i| opt(a.is_valid(i), || Value::Bool(a.value(i)))));
        }
        FieldType::Timestamp => {
            let a = array.as_primitive::<TimestampMicrosecondType>();
            out.extend(
                (0..n).map(|i| opt(a.is_valid(i), || Value::Timestamp(Timestamp(a.value(i))))),
            );
        }
        FieldType::List(item) => {
            let a = array.as_list::<i32>();
            let items = typed(a.values(), item);
            let offsets = a.value_offsets();
            out.extend((0..n).map(|i| {
                opt(a.is_valid(i), || {
                    let (lo, hi) = (offsets[i] as usize, offsets[i + 1] as usize);
                    Value::List(items[lo..hi].into())
                })
            }));
        }
    }
    out
}

fn opt(valid: bool, value: impl FnOnce() -> Value) -> Value {
    if valid { value() } else { Value::Null }
}

/// An Arrow column of `ty` from values (`Null`, or a value of another type, is
/// a null).
pub fn array(ty: &FieldType, values: &[Value]) -> ArrayRef {
    match ty {
        FieldType::String => Arc::new(StringArray::from_iter(values.iter().map(|v| match v {
            Value::String(s) => Some(&**s),
            _ => None,
        }))),
        FieldType::Int => Arc::new(Int64Array::from_iter(values.iter().map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        }))),
        FieldType::Float => Arc::new(Float64Array::from_iter(values.iter().map(|v| match v {
            Value::Float(f) => Some(*f),
            Value::Int(n) => Some(*n as f64),
            _ => None,
        }))),
        FieldType::Bool => Arc::new(BooleanArray::from_iter(values.iter().map(|v| match v {
            Value::Bool(b) => Some(*b),
            _ => None,
        }))),
        FieldType::Timestamp => Arc::new(
            TimestampMicrosecondArray::from_iter(values.iter().map(|v| match v {
                Value::Timestamp(t) => Some(t.0),
                _ => None,
            }))
            .with_timezone("UTC"),
        ),
        FieldType::List(item) => list(item, values),
    }
}

fn list(item: &FieldType, values: &[Value]) -> ArrayRef {
    let mut offsets = Vec::with_capacity(values.len() + 1);
    let mut valid = Vec::with_capacity(values.len());
    let mut items: Vec<Value> = Vec::new();
    offsets.push(0i32);
    for v in values {
        if let Value::List(xs) = v {
            items.extend(xs.iter().cloned());
            valid.push(true);
        } else {
            valid.push(false);
        }
        offsets.push(i32::try_from(items.len()).unwrap_or(i32::MAX));
    }
    let field = Arc::new(Field::new_list_field(arrow_type(item), true));
    Arc::new(ListArray::new(
        field,
        OffsetBuffer::new(offsets.into()),
        array(item, &items),
        Some(NullBuffer::from(valid)),
    ))
}

/// An entity file's time column as instants: a timestamp or date column, or
/// strings in RFC 3339 or epoch seconds (a CSV file's). `Err((row, why))` for
/// the first row without a usable time (0-based), or `(None, why)` for the
/// column.
pub fn times(array: &ArrayRef) -> Result<Vec<Timestamp>, (Option<usize>, String)> {
    let text = matches!(
        array.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let values = if text {
        let cast = cast_with_options(array, &DataType::Utf8, &CastOptions::default())
            .map_err(|e| (None, e.to_string()))?;
        let a = cast.as_string::<i32>();
        (0..a.len())
            .map(|i| {
                if a.is_null(i) {
                    return Ok(Value::Null);
                }
                parse_time(a.value(i)).map(Value::Timestamp).ok_or_else(|| {
                    (
                        Some(i),
                        format!(
                            "time `{}` is neither RFC 3339 nor epoch seconds",
                            oka_ingest::record::printable(a.value(i))
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        values(array, &FieldType::Timestamp).map_err(|why| (None, why.to_string()))?
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Timestamp(t) => Ok(t),
            _ => Err((Some(i), "the time is null".to_owned())),
        })
        .collect()
}

/// RFC 3339 (with an offset, or naive as UTC) or epoch seconds.
fn parse_time(s: &str) -> Option<Timestamp> {
    let s = s.trim();
    Timestamp::parse_rfc3339(s)
        .or_else(|| Timestamp::parse_iso_or_naive_utc(s))
        .or_else(|| {
            s.parse::<f64>()
                .ok()
                .and_then(Timestamp::from_epoch_seconds)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Int32Array, UInt64Array};

    #[test]
    fn values_round_trip_through_arrow() {
        let cases: Vec<(FieldType, Vec<Value>)> = vec![
            (
                FieldType::String,
                vec![Value::String("a".into()), Value::Null],
            ),
            (
                FieldType::Int,
                vec![Value::Int(i64::MIN), Value::Null, Value::Int(7)],
            ),
            (
                FieldType::Float,
                vec![Value::Float(0.1), Value::Float(-0.0), Value::Null],
            ),
            (FieldType::Bool, vec![Value::Bool(true), Value::Null]),
            (
                FieldType::Timestamp,
                vec![Value::Timestamp(Timestamp(-5)), Value::Null],
            ),
            (
                FieldType::List(Box::new(FieldType::Int)),
                vec![
                    Value::List(vec![Value::Int(1), Value::Null].into()),
                    Value::Null,
                    Value::List(Vec::new().into()),
                ],
            ),
        ];
        for (ty, vs) in cases {
            let a = array(&ty, &vs);
            assert_eq!(a.data_type(), &arrow_type(&ty));
            let back = values(&a, &ty).unwrap();
            assert_eq!(back.len(), vs.len());
            for (x, y) in back.iter().zip(&vs) {
                match (x, y) {
                    (Value::Float(a), Value::Float(b)) => assert_eq!(a.to_bits(), b.to_bits()),
                    _ => assert_eq!(x, y, "{ty}"),
                }
            }
        }
    }

    #[test]
    fn narrower_types_are_read_and_wrong_ones_named() {
        let a: ArrayRef = Arc::new(Int32Array::from(vec![Some(3), None]));
        assert_eq!(
            values(&a, &FieldType::Int).unwrap(),
            vec![Value::Int(3), Value::Null]
        );
        let f: ArrayRef = Arc::new(Float32Array::from(vec![0.5f32]));
        assert_eq!(
            values(&f, &FieldType::Float).unwrap(),
            vec![Value::Float(0.5)]
        );
        let why = values(&f, &FieldType::String).unwrap_err().to_string();
        assert!(
            why.contains("Float32") && why.contains("string column"),
            "{why}"
        );
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX]));
        assert!(values(&big, &FieldType::Int).is_err());
    }

    #[test]
    fn times_are_read_from_strings_and_timestamps() {
        let s: ArrayRef = Arc::new(StringArray::from(vec!["2026-01-01T00:00:01Z", "1.5"]));
        assert_eq!(
            times(&s).unwrap(),
            vec![Timestamp(1_767_225_601_000_000), Timestamp(1_500_000)]
        );
        let bad: ArrayRef = Arc::new(StringArray::from(vec![Some("1"), Some("soon")]));
        assert_eq!(times(&bad).unwrap_err().0, Some(1));
        let null: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>]));
        assert_eq!(times(&null).unwrap_err().0, Some(0));
    }
}
