//! Aggregation kernels: count, sum, mean, min, max, population standard
//! deviation, percentile, time-decayed sum, first and last, each one pass over a
//! window of values. The CEL functions (`math.sum(list)`, …) and the declarative
//! `aggregate` form both run these, so the two give the same answer.
//!
//! Rules, the same everywhere (and in `docs/feature-spec.md`):
//! - `null` elements are skipped, as SQL's aggregates do.
//! - Numbers are `int` or `float`, not both in one window.
//! - Over no values: `count` and `sum` are 0, the others `null`.
//! - NaN propagates: a NaN among the values makes the result NaN (written `null`
//!   in JSON, which has no NaN), except for `count`, `first` and `last`.
//! - `sum` of ints is exact and fails only when the total leaves the `int` range.

use std::cmp::Ordering;

use crate::value::{Timestamp, Value};

/// An aggregation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// How many non-null values.
    Count,
    /// Their sum: an `int` for ints, a `float` for floats; 0 when there are none.
    Sum,
    /// Their mean, a `float`.
    Mean,
    /// The least, of the values' own type (`int`, `float` or `timestamp`).
    Min,
    /// The greatest, of the values' own type.
    Max,
    /// The population standard deviation, a `float`.
    Stddev,
    /// The `p`-quantile (`p` in `[0, 1]`) with linear interpolation between the
    /// two nearest ranks (numpy's default), a `float`.
    Percentile(f64),
    /// `Σ value · 2^(−age / half_life)`, the age being the time from the value's
    /// timestamp to `now` (0 for timestamps after `now`), in seconds.
    Ewma {
        /// The half-life in seconds, `> 0`.
        half_life_s: f64,
    },
    /// The first (oldest) non-null value, of its own type.
    First,
    /// The last (newest) non-null value, of its own type.
    Last,
}

impl Stat {
    /// The name in the spec (`sum`, `percentile`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Mean => "mean",
            Self::Min => "min",
            Self::Max => "max",
            Self::Stddev => "stddev",
            Self::Percentile(_) => "percentile",
            Self::Ewma { .. } => "ewma",
            Self::First => "first",
            Self::Last => "last",
        }
    }

    /// Which element types it takes.
    pub fn takes(self) -> Takes {
        match self {
            Self::Count | Self::First | Self::Last => Takes::Any,
            Self::Min | Self::Max => Takes::Ordered,
            _ => Takes::Numbers,
        }
    }

    /// Checks the parameters: `p` in `[0, 1]`, a positive finite half-life.
    pub fn check(self) -> Result<(), StatError> {
        match self {
            Self::Percentile(p) if !(0.0..=1.0).contains(&p) => Err(StatError::BadP(p)),
            Self::Ewma { half_life_s } if !(half_life_s > 0.0 && half_life_s.is_finite()) => {
                Err(StatError::BadHalfLife)
            }
            _ => Ok(()),
        }
    }
}

/// The element types an aggregation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// `int` or `float`.
    Numbers,
    /// `int`, `float` or `timestamp`.
    Ordered,
    /// Anything.
    Any,
    /// Timestamps (the times of `ewma`).
    Timestamps,
}

impl Takes {
    /// In the user's words: "int or float", ….
    pub fn describe(self) -> &'static str {
        match self {
            Self::Numbers => "int or float",
            Self::Ordered => "int, float or timestamp",
            Self::Any => "any type",
            Self::Timestamps => "timestamp",
        }
    }
}

/// Why an aggregation has no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatError {
    /// Ints and floats in one window.
    #[error("the list mixes int and float values; convert them with double() first")]
    Mixed,
    /// An element of a type the aggregation does not take.
    #[error("takes a list of {}; element {index} is {got}", .takes.describe())]
    Type {
        /// What it takes.
        takes: Takes,
        /// The element's position.
        index: usize,
        /// Its type, in CEL's words.
        got: &'static str,
    },
    /// An int sum beyond the `int` range.
    #[error("the sum overflows int (±9.2e18); convert the values with double() first")]
    IntOverflow,
    /// A percentile outside `[0, 1]`.
    #[error("p must be between 0 and 1 (0.9 for the 90th percentile), got {0}")]
    BadP(f64),
    /// A half-life that is not a positive duration.
    #[error("the half-life must be a positive duration")]
    BadHalfLife,
    /// `ewma` with lists of different lengths.
    #[error("values and timestamps have different lengths ({values} and {timestamps})")]
    Lengths {
        /// The values' length.
        values: usize,
        /// The timestamps' length.
        timestamps: usize,
    },
}

impl StatError {
    /// Whether the error is about the expression rather than the data: the
    /// types of the values, or a parameter out of range. A dry run over typed
    /// placeholders finds these at load.
    pub fn is_spec_error(&self) -> bool {
        matches!(
            self,
            Self::Mixed | Self::Type { .. } | Self::BadP(_) | Self::BadHalfLife
        )
    }
}

/// The kind of the values seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Timestamp,
}

/// Neumaier's compensated sum: exact for small windows of ordinary floats, and
/// IEEE's answer once the sum is infinite or NaN.
#[derive(Debug, Clone, Copy, Default)]
struct FloatSum {
    sum: f64,
    compensation: f64,
}

impl FloatSum {
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn total(self) -> f64 {
        if self.sum.is_finite() {
            self.sum + self.compensation
        } else {
            self.sum
        }
    }
}

/// One aggregation over one window: [`push`](Self::push) each value, then
/// [`finish`](Self::finish).
#[derive(Debug, Clone)]
pub struct Acc {
    stat: Stat,
    now: Timestamp,
    kind: Option<Kind>,
    /// Elements pushed, null or not (for error positions).
    index: usize,
    /// Non-null values.
    n: u64,
    int_sum: i128,
    float_sum: FloatSum,
    /// Welford's running mean and sum of squared deviations.
    mean: f64,
    m2: f64,
    /// min / max / first / last.
    kept: Option<Value>,
    /// percentile.
    values: Vec<f64>,
}

impl Acc {
    /// A fresh accumulator; `now` is the reference time of `ewma`.
    pub fn new(stat: Stat, now: Timestamp) -> Self {
        Self {
            stat,
            now,
            kind: None,
            index: 0,
            n: 0,
            int_sum: 0,
            float_sum: FloatSum::default(),
            mean: 0.0,
            m2: 0.0,
            kept: None,
            values: Vec::new(),
        }
    }

    /// Adds one value with its event time (used by `ewma` only).
    pub fn push(&mut self, v: &Value, at: Timestamp) -> Result<(), StatError> {
        let index = self.index;
        self.index += 1;
        if v.is_null() {
            return Ok(());
        }
        let takes = self.stat.takes();
        let kind = match v {
            Value::Int(_) => Some(Kind::Int),
            Value::Float(_) => Some(Kind::Float),
            Value::Timestamp(_) => Some(Kind::Timestamp),
            _ => None,
        };
        let admitted = match (takes, kind) {
            (Takes::Any, _) => true,
            (Takes::Ordered, Some(_)) => true,
            (Takes::Numbers, Some(k)) => k != Kind::Timestamp,
            _ => false,
        };
        if !admitted {
            return Err(StatError::Type {
                takes,
                index,
                got: type_name(v),
            });
        }
        if let (false, Some(kind)) = (takes == Takes::Any, kind) {
            match self.kind {
                Some(k) if k != kind => return Err(StatError::Mixed),
                _ => self.kind = Some(kind),
            }
        }
        self.n += 1;
        self.add(v, at);
        Ok(())
    }

    fn add(&mut self, v: &Value, at: Timestamp) {
        match self.stat {
            Stat::Count => {}
            Stat::Sum | Stat::Mean => match v {
                Value::Int(i) => self.int_sum += i128::from(*i),
                _ => self.float_sum.add(as_f64(v)),
            },
            Stat::Stddev => {
                let x = as_f64(v);
                let delta = x - self.mean;
                self.mean += delta / self.n as f64;
                self.m2 += delta * (x - self.mean);
            }
            Stat::Percentile(_) => self.values.push(as_f64(v)),
            Stat::Ewma { half_life_s } => {
                let age_s = (self.now.0.saturating_sub(at.0)).max(0) as f64 / 1e6;
                self.float_sum
                    .add(as_f64(v) * (-age_s / half_life_s).exp2());
            }
            Stat::Min | Stat::Max => {
                let wanted = if self.stat == Stat::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                let replace = match &self.kept {
                    None => true,
                    Some(Value::Float(best)) if best.is_nan() => false,
                    Some(_) if matches!(v, Value::Float(x) if x.is_nan()) => true,
                    Some(best) => compare(v, best) == Some(wanted),
                };
                if replace {
                    self.kept = Some(v.clone());
                }
            }
            Stat::First => {
                if self.kept.is_none() {
                    self.kept = Some(v.clone());
                }
            }
            Stat::Last => self.kept = Some(v.clone()),
        }
    }

    /// The result.
    pub fn finish(mut self) -> Result<Value, StatError> {
        let n = self.n;
        if n == 0 {
            return Ok(match self.stat {
                Stat::Count | Stat::Sum => Value::Int(0),
                _ => Value::Null,
            });
        }
        let is_int = self.kind == Some(Kind::Int);
        Ok(match self.stat {
            Stat::Count => Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
            Stat::Sum if is_int => {
                Value::Int(i64::try_from(self.int_sum).map_err(|_| StatError::IntOverflow)?)
            }
            Stat::Sum => Value::Float(self.float_sum.total()),
            Stat::Mean if is_int => Value::Float(self.int_sum as f64 / n as f64),
            Stat::Mean => Value::Float(self.float_sum.total() / n as f64),
            // Rounding can leave m2 a hair below 0; NaN stays NaN (`f64::max` would
            // drop it).
            Stat::Stddev => {
                let var = self.m2 / n as f64;
                Value::Float(if var < 0.0 { 0.0 } else { var.sqrt() })
            }
            Stat::Percentile(p) => Value::Float(percentile(&mut self.values, p)),
            Stat::Ewma { .. } => Value::Float(self.float_sum.total()),
            Stat::Min | Stat::Max | Stat::First | Stat::Last => self.kept.unwrap_or(Value::Null),
        })
    }
}

/// The `p`-quantile of `values` (not empty) with linear interpolation; NaN if
/// any value is NaN. Reorders `values`.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    let h = (values.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let (_, &mut below, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let frac = h - lo as f64;
    if frac == 0.0 || above.is_empty() {
        return below;
    }
    let next = above.iter().copied().fold(f64::INFINITY, f64::min);
    below + frac * (next - below)
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => f64::NAN,
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Timestamp(a), Value::Timestamp(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// A value's type in CEL's words (`double` is called `float`, as in the spec).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::String(_) => "string",
        Value::Timestamp(_) => "timestamp",
        Value::List(_) => "list",
    }
}

/// Runs `stat` over `values`, each with its timestamp (`ewma`), or the epoch.
pub fn aggregate<'a>(
    stat: Stat,
    now: Timestamp,
    values: impl IntoIterator<Item = (&'a Value, Timestamp)>,
) -> Result<Value, StatError> {
    stat.check()?;
    let mut acc = Acc::new(stat, now);
    for (v, at) in values {
        acc.push(v, at)?;
    }
    acc.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::float_cmp)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp(1_000_000_000_000);

    fn run(stat: Stat, values: &[Value]) -> Result<Value, StatError> {
        aggregate(stat, NOW, values.iter().map(|v| (v, NOW)))
    }

    fn floats(xs: &[f64]) -> Vec<Value> {
        xs.iter().map(|x| Value::Float(*x)).collect()
    }

    fn ints(xs: &[i64]) -> Vec<Value> {
        xs.iter().map(|x| Value::Int(*x)).collect()
    }

    fn float(v: Value) -> f64 {
        match v {
            Value::Float(f) => f,
            other => panic!("not a float: {other:?}"),
        }
    }

    #[test]
    fn hand_computed_floats() {
        let xs = floats(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(run(Stat::Count, &xs), Ok(Value::Int(8)));
        assert_eq!(run(Stat::Sum, &xs), Ok(Value::Float(40.0)));
        assert_eq!(run(Stat::Mean, &xs), Ok(Value::Float(5.0)));
        assert_eq!(run(Stat::Min, &xs), Ok(Value::Float(2.0)));
        assert_eq!(run(Stat::Max, &xs), Ok(Value::Float(9.0)));
        // The textbook example: population standard deviation 2.
        assert_eq!(run(Stat::Stddev, &xs), Ok(Value::Float(2.0)));
        // Sorted: 2 4 4 4 5 5 7 9; h = 7 × 0.9 = 6.3 → 7 + 0.3 × (9 − 7) = 7.6.
        let p90 = float(run(Stat::Percentile(0.9), &xs).unwrap());
        assert!((p90 - 7.6).abs() < 1e-12, "{p90}");
        assert_eq!(run(Stat::Percentile(0.5), &xs), Ok(Value::Float(4.5)));
        assert_eq!(run(Stat::Percentile(0.0), &xs), Ok(Value::Float(2.0)));
        assert_eq!(run(Stat::Percentile(1.0), &xs), Ok(Value::Float(9.0)));
        assert_eq!(run(Stat::First, &xs), Ok(Value::Float(2.0)));
        assert_eq!(run(Stat::Last, &xs), Ok(Value::Float(9.0)));
    }

    #[test]
    fn ints_keep_their_type_where_the_result_is_a_value_of_the_list() {
        let xs = ints(&[3, -1, 10]);
        assert_eq!(run(Stat::Sum, &xs), Ok(Value::Int(12)));
        assert_eq!(run(Stat::Min, &xs), Ok(Value::Int(-1)));
        assert_eq!(run(Stat::Max, &xs), Ok(Value::Int(10)));
        assert_eq!(run(Stat::Mean, &xs), Ok(Value::Float(4.0)));
        assert_eq!(run(Stat::Percentile(0.5), &xs), Ok(Value::Float(3.0)));
        // An intermediate total beyond i64 is fine while the final one fits.
        let xs = ints(&[i64::MAX, 1, -2]);
        assert_eq!(run(Stat::Sum, &xs), Ok(Value::Int(i64::MAX - 1)));
        assert_eq!(
            run(Stat::Sum, &ints(&[i64::MAX, 1])),
            Err(StatError::IntOverflow)
        );
    }

    #[test]
    fn empty_windows_and_single_elements() {
        for stat in [
            Stat::Mean,
            Stat::Min,
            Stat::Max,
            Stat::Stddev,
            Stat::Percentile(0.5),
            Stat::Ewma { half_life_s: 60.0 },
            Stat::First,
            Stat::Last,
        ] {
            assert_eq!(run(stat, &[]), Ok(Value::Null), "{stat:?}");
            // Nulls are skipped, so a window of nulls is empty.
            assert_eq!(run(stat, &[Value::Null, Value::Null]), Ok(Value::Null));
        }
        assert_eq!(run(Stat::Sum, &[]), Ok(Value::Int(0)));
        assert_eq!(run(Stat::Count, &[Value::Null]), Ok(Value::Int(0)));
        let one = floats(&[3.5]);
        for stat in [
            Stat::Sum,
            Stat::Mean,
            Stat::Min,
            Stat::Max,
            Stat::Percentile(0.3),
        ] {
            assert_eq!(run(stat, &one), Ok(Value::Float(3.5)), "{stat:?}");
        }
        assert_eq!(run(Stat::Stddev, &one), Ok(Value::Float(0.0)));
    }

    #[test]
    fn nulls_are_skipped() {
        let xs = vec![Value::Float(1.0), Value::Null, Value::Float(3.0)];
        assert_eq!(run(Stat::Count, &xs), Ok(Value::Int(2)));
        assert_eq!(run(Stat::Mean, &xs), Ok(Value::Float(2.0)));
        assert_eq!(run(Stat::Last, &xs), Ok(Value::Float(3.0)));
    }

    #[test]
    fn nan_propagates() {
        let xs = floats(&[1.0, f64::NAN, 3.0]);
        for stat in [
            Stat::Sum,
            Stat::Mean,
            Stat::Min,
            Stat::Max,
            Stat::Stddev,
            Stat::Percentile(0.5),
            Stat::Ewma { half_life_s: 1.0 },
        ] {
            assert!(float(run(stat, &xs).unwrap()).is_nan(), "{stat:?}");
        }
        // NaN first or last makes no difference to min and max.
        assert!(float(run(Stat::Min, &floats(&[f64::NAN, 1.0])).unwrap()).is_nan());
        assert!(float(run(Stat::Max, &floats(&[1.0, f64::NAN])).unwrap()).is_nan());
        assert_eq!(run(Stat::Count, &xs), Ok(Value::Int(3)));
        // Infinities follow IEEE arithmetic.
        assert_eq!(
            run(Stat::Sum, &floats(&[f64::INFINITY, 1.0])),
            Ok(Value::Float(f64::INFINITY))
        );
    }

    #[test]
    fn compensated_sum_is_exact_where_a_plain_sum_is_not() {
        let xs = floats(&[1e16, 1.0, -1e16]);
        assert_eq!(run(Stat::Sum, &xs), Ok(Value::Float(1.0)));
        let tenths = floats(&[0.1; 10]);
        assert_eq!(run(Stat::Sum, &tenths), Ok(Value::Float(1.0)));
    }

    #[test]
    fn ewma_halves_per_half_life() {
        let v = Value::Float(8.0);
        let at = |s: i64| Timestamp(NOW.0 - s * 1_000_000);
        let stat = Stat::Ewma { half_life_s: 60.0 };
        let got = aggregate(stat, NOW, [(&v, at(0)), (&v, at(60)), (&v, at(120))]);
        assert_eq!(got, Ok(Value::Float(8.0 + 4.0 + 2.0)));
        // A value from after `now` weighs 1.
        let got = aggregate(stat, NOW, [(&v, at(-30))]);
        assert_eq!(got, Ok(Value::Float(8.0)));
        assert_eq!(
            Stat::Ewma { half_life_s: 0.0 }.check(),
            Err(StatError::BadHalfLife)
        );
    }

    #[test]
    fn type_errors() {
        let mixed = vec![Value::Int(1), Value::Float(2.0)];
        assert_eq!(run(Stat::Sum, &mixed), Err(StatError::Mixed));
        assert_eq!(run(Stat::Max, &mixed), Err(StatError::Mixed));
        let strings = vec![Value::Float(1.0), Value::from("x")];
        let err = run(Stat::Mean, &strings).unwrap_err();
        assert_eq!(
            err.to_string(),
            "takes a list of int or float; element 1 is string"
        );
        assert!(err.is_spec_error());
        // Timestamps are ordered, not numbers.
        let ts = vec![
            Value::Timestamp(Timestamp(5)),
            Value::Timestamp(Timestamp(9)),
        ];
        assert_eq!(run(Stat::Max, &ts), Ok(Value::Timestamp(Timestamp(9))));
        assert!(run(Stat::Sum, &ts).is_err());
        assert_eq!(
            Stat::Percentile(1.5).check().unwrap_err().to_string(),
            "p must be between 0 and 1 (0.9 for the 90th percentile), got 1.5"
        );
    }
}
