//! Typed values, rows and their JSON form.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Self {
        Self(Utc::now().timestamp_micros())
    }

    /// From fractional seconds since the epoch (Volga's `Decimal` epoch seconds).
    pub fn from_epoch_seconds(secs: f64) -> Option<Self> {
        let micros = secs * 1e6;
        if micros.is_finite() && micros.abs() < i64::MAX as f64 {
            Some(Self(micros.round() as i64))
        } else {
            None
        }
    }

    /// Parses RFC 3339 (`2025-04-18T10:00:00Z`, `…+02:00`).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Self(t.timestamp_micros()))
    }

    /// Parses RFC 3339, or an ISO 8601 date-time without an offset as UTC (what
    /// Python's `datetime.isoformat()` writes for a naive datetime:
    /// `2026-12-03T03:43:20.045282`; a space for the `T` is accepted too).
    pub fn parse_iso_or_naive_utc(s: &str) -> Option<Self> {
        Self::parse_rfc3339(s).or_else(|| {
            ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(s, f).ok())
                .map(|t| Self(t.and_utc().timestamp_micros()))
        })
    }

    /// As a chrono UTC datetime; `None` when out of chrono's range.
    pub fn to_datetime(self) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_micros(self.0)
    }

    /// RFC 3339 with microseconds and an explicit `+00:00` offset, which both RFC 3339
    /// parsers and Python's `datetime.fromisoformat` (3.7+) accept.
    pub fn to_rfc3339(self) -> String {
        let mut out = Vec::with_capacity(32);
        self.write_rfc3339(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the time as a naive UTC ISO 8601 text, as Python's
    /// `datetime.isoformat()` writes a naive datetime: `2026-12-03T03:43:20.045282`,
    /// or `2026-12-03T03:43:20` when the microseconds are 0. For years 0–9999
    /// ([`Self::is_rfc3339`]); other instants as [`Self::write_rfc3339`] does.
    pub fn write_naive_utc(self, out: &mut Vec<u8>) {
        let start = out.len();
        self.write_rfc3339(out);
        if self.is_rfc3339() && out[start..].ends_with(b"+00:00") {
            out.truncate(out.len() - b"+00:00".len());
            if out[start..].ends_with(b".000000") {
                out.truncate(out.len() - b".000000".len());
            }
        }
    }

    /// Appends [`Self::to_rfc3339`]'s text to `out`. Years 0–9999 are written
    /// directly (no formatter machinery: this runs once per record on the response
    /// path); other years go through chrono, and instants outside chrono's range are
    /// written as the number of microseconds.
    pub fn write_rfc3339(self, out: &mut Vec<u8>) {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            match self.to_datetime() {
                Some(t) => out
                    .extend_from_slice(t.to_rfc3339_opts(SecondsFormat::Micros, false).as_bytes()),
                None => out.extend_from_slice(self.0.to_string().as_bytes()),
            }
            return;
        }
        // Every number below is non-negative and bounded, so the digits fit.
        #[inline(always)]
        fn two(buf: &mut [u8; 32], at: usize, n: u32) {
            let n = (n % 100) as usize * 2;
            buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[n..n + 2]);
        }
        let (y, sod, micros) = (y as u32, sod as u32, micros as u32);
        let mut buf = *b"0000-00-00T00:00:00.000000+00:00";
        two(&mut buf, 0, y / 100);
        two(&mut buf, 2, y % 100);
        two(&mut buf, 5, m as u32);
        two(&mut buf, 8, d as u32);
        two(&mut buf, 11, sod / 3600);
        two(&mut buf, 14, sod / 60 % 60);
        two(&mut buf, 17, sod % 60);
        two(&mut buf, 20, micros / 10_000);
        two(&mut buf, 22, micros / 100 % 100);
        two(&mut buf, 24, micros % 100);
        out.extend_from_slice(&buf);
    }

    /// The earliest instant RFC 3339 can write: 0000-01-01T00:00:00Z.
    pub const RFC3339_MIN: Self = Self(-62_167_219_200_000_000);
    /// The latest instant RFC 3339 can write: 9999-12-31T23:59:59.999999Z.
    pub const RFC3339_MAX: Self = Self(253_402_300_799_999_999);

    /// Whether RFC 3339 can write this instant (years 0000 to 9999). Answers
    /// carry only such instants: others are written as `null`, and UDF outputs
    /// outside the range are errors.
    pub fn is_rfc3339(self) -> bool {
        (Self::RFC3339_MIN..=Self::RFC3339_MAX).contains(&self)
    }

    /// Shifted by a number of microseconds, saturating.
    pub fn saturating_sub_micros(self, micros: i64) -> Self {
        Self(self.0.saturating_sub(micros))
    }
}

/// "00" "01" … "99", for writing two digits at a time.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// (year, month, day) of a day count since 1970-01-01 in the proleptic Gregorian
/// calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// How timestamps are written in JSON answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeFormat {
    /// RFC 3339 with microseconds and an explicit `+00:00` (Oka's API).
    #[default]
    Rfc3339,
    /// A naive UTC time as Python's `datetime.isoformat()` writes one, without an
    /// offset and without `.ffffff` when the microseconds are 0 (Volga's routes).
    NaiveUtc,
}

/// The type of an entity field or a UDF argument.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldType {
    String,
    Int,
    Float,
    Bool,
    Timestamp,
    List(Box<FieldType>),
}

impl FieldType {
    /// Parses the spec spelling: `string`, `int`, `float`, `bool`, `timestamp`, `list<T>`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        Some(match s {
            "string" => Self::String,
            "int" => Self::Int,
            "float" => Self::Float,
            "bool" => Self::Bool,
            "timestamp" => Self::Timestamp,
            _ => {
                let inner = s.strip_prefix("list<")?.strip_suffix('>')?;
                Self::List(Box::new(Self::parse(inner)?))
            }
        })
    }

    /// Whether a key field may have this type (keys are scalars).
    pub fn is_key_type(&self) -> bool {
        matches!(self, Self::String | Self::Int)
    }

    /// Whether `value` is of this type; null is accepted for any type, and an int
    /// is accepted where a float is expected (it is widened on [`coerce`](Self::coerce)).
    pub fn accepts(&self, value: &Value) -> bool {
        match (self, value) {
            (_, Value::Null) => true,
            (Self::String, Value::String(_))
            | (Self::Int, Value::Int(_))
            | (Self::Float, Value::Float(_) | Value::Int(_))
            | (Self::Bool, Value::Bool(_))
            | (Self::Timestamp, Value::Timestamp(_)) => true,
            (Self::List(inner), Value::List(items)) => items.iter().all(|v| inner.accepts(v)),
            _ => false,
        }
    }

    /// Converts `value` to this type where that loses nothing (int → float, and
    /// the same inside lists); `None` when the value is not of this type.
    pub fn coerce(&self, value: Value) -> Option<Value> {
        self.try_coerce(value).ok()
    }

    /// [`coerce`](Self::coerce), giving the value back when it is not of this type
    /// (so a caller can describe it without a copy made in advance).
    pub fn try_coerce(&self, value: Value) -> Result<Value, Value> {
        match (self, value) {
            (_, Value::Null) => Ok(Value::Null),
            (Self::Float, Value::Int(i)) => Ok(Value::Float(i as f64)),
            (Self::List(inner), Value::List(items)) => {
                let converted: Option<Vec<Value>> =
                    items.iter().cloned().map(|v| inner.coerce(v)).collect();
                converted
                    .map(|v| Value::List(v.into()))
                    .ok_or(Value::List(items))
            }
            (ty, v) if ty.accepts(&v) => Ok(v),
            (_, v) => Err(v),
        }
    }

    /// Parses a JSON value as this type. Timestamps accept RFC 3339 strings and epoch
    /// seconds; `null` is accepted for any type.
    pub fn from_json(&self, json: &serde_json::Value) -> Result<Value, ValueError> {
        use serde_json::Value as J;
        let bad = || ValueError::WrongType {
            expected: self.clone(),
            got: json_kind(json),
        };
        match (self, json) {
            (_, J::Null) => Ok(Value::Null),
            (Self::String, J::String(s)) => Ok(Value::String(s.as_str().into())),
            (Self::Int, J::Number(n)) => n.as_i64().map(Value::Int).ok_or_else(bad),
            (Self::Float, J::Number(n)) => n.as_f64().map(Value::Float).ok_or_else(bad),
            (Self::Bool, J::Bool(b)) => Ok(Value::Bool(*b)),
            (Self::Timestamp, J::String(s)) => Timestamp::parse_rfc3339(s)
                .map(Value::Timestamp)
                .ok_or_else(|| ValueError::InvalidTimestamp(s.clone())),
            (Self::Timestamp, J::Number(n)) => n
                .as_f64()
                .and_then(Timestamp::from_epoch_seconds)
                .map(Value::Timestamp)
                .ok_or_else(bad),
            (Self::List(inner), J::Array(items)) => items
                .iter()
                .map(|v| inner.from_json(v))
                .collect::<Result<Vec<_>, _>>()
                .map(|v| Value::List(v.into())),
            _ => Err(bad()),
        }
    }
}

/// Why a JSON value is not a value of a [`FieldType`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// The JSON value has another kind.
    #[error("expected {expected}, got {got}")]
    WrongType {
        /// The type asked for.
        expected: FieldType,
        /// The JSON value's kind ([`json_kind`]).
        got: &'static str,
    },
    /// A string that is not an RFC 3339 timestamp.
    #[error("invalid RFC 3339 timestamp `{0}`")]
    InvalidTimestamp(String),
}

/// A short name of a JSON value's kind, for error messages.
pub fn json_kind(json: &serde_json::Value) -> &'static str {
    match json {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(n) if n.is_f64() => "float",
        serde_json::Value::Number(_) => "int",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "object",
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String => f.write_str("string"),
            Self::Int => f.write_str("int"),
            Self::Float => f.write_str("float"),
            Self::Bool => f.write_str("bool"),
            Self::Timestamp => f.write_str("timestamp"),
            Self::List(inner) => write!(f, "list<{inner}>"),
        }
    }
}

impl Serialize for FieldType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FieldType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor, so that an unknown name is reported where it is written.
        d.deserialize_str(FieldTypeVisitor)
    }
}

struct FieldTypeVisitor;

impl serde::de::Visitor<'_> for FieldTypeVisitor {
    type Value = FieldType;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a type: string, int, float, bool, timestamp or list<T>")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<FieldType, E> {
        FieldType::parse(s).ok_or_else(|| {
            // The innermost name of `list<list<flaot>>` is the one to correct.
            let mut name = s.trim();
            while let Some(inner) = name.strip_prefix("list<").and_then(|n| n.strip_suffix('>')) {
                name = inner.trim();
            }
            let known = ["string", "int", "float", "bool", "timestamp"];
            let written = s.trim();
            let suggestion = match (crate::error::closest(name, known), written.rfind(name)) {
                (Some(c), Some(at)) => format!(
                    " (did you mean `{}{c}{}`?)",
                    &written[..at],
                    &written[at + name.len()..]
                ),
                _ => String::new(),
            };
            E::custom(format!(
                "unknown type `{s}`{suggestion}, expected string, int, float, bool, timestamp or list<T>"
            ))
        })
    }
}

/// A feature value.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(Arc<str>),
    Timestamp(Timestamp),
    List(Arc<[Value]>),
}

impl Value {
    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// The value as JSON. Non-finite floats become `null` (JSON has no NaN), and so
    /// do timestamps RFC 3339 cannot write.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Self::Null => J::Null,
            Self::Bool(b) => J::Bool(*b),
            Self::Int(i) => J::from(*i),
            Self::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Self::String(s) => J::String(s.to_string()),
            Self::Timestamp(t) if t.is_rfc3339() => J::String(t.to_rfc3339()),
            Self::Timestamp(_) => J::Null,
            Self::List(items) => J::Array(items.iter().map(Self::to_json).collect()),
        }
    }

    /// Appends the JSON form of this value to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_as(out, TimeFormat::Rfc3339);
    }

    /// [`Self::write_json`] with timestamps in `times`' form.
    pub fn write_json_as(&self, out: &mut Vec<u8>, times: TimeFormat) {
        match self {
            Self::Null => out.extend_from_slice(b"null"),
            Self::Bool(true) => out.extend_from_slice(b"true"),
            Self::Bool(false) => out.extend_from_slice(b"false"),
            Self::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
            Self::Float(f) if f.is_finite() => {
                // The shortest round-trip form, as serde_json writes it (`4.0` stays
                // `4.0`).
                out.extend_from_slice(zmij::Buffer::new().format_finite(*f).as_bytes());
            }
            Self::Float(_) => out.extend_from_slice(b"null"),
            Self::String(s) => write_json_str(out, s),
            Self::Timestamp(t) if t.is_rfc3339() => {
                out.push(b'"');
                match times {
                    TimeFormat::Rfc3339 => t.write_rfc3339(out),
                    TimeFormat::NaiveUtc => t.write_naive_utc(out),
                }
                out.push(b'"');
            }
            // Beyond year 9999 or before year 0 (data from before ingest was
            // bounded): not a timestamp a client can parse.
            Self::Timestamp(_) => out.extend_from_slice(b"null"),
            Self::List(items) => {
                out.push(b'[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    v.write_json_as(out, times);
                }
                out.push(b']');
            }
        }
    }
}

/// Appends `s` as a JSON string literal, escaped exactly as serde_json escapes it
/// (`"`, `\\` and control characters; everything else verbatim).
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Most strings (keys, names) need no escape: found eight bytes at a time.
    let clean = clean_prefix(bytes);
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate().skip(clean) {
        if !NEEDS_ESCAPE[usize::from(b)] {
            continue;
        }
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            _ => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The length of the longest prefix of `bytes` with no byte a JSON string must
/// escape, tested a word at a time: a word has a byte below 0x20, a `"` or a `\\`
/// exactly when the classic has-zero-byte test finds one in the word, in the word
/// XOR the quote, or in the word XOR the backslash.
fn clean_prefix(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte below `n` (n ≤ 0x80) in `w`.
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH != 0;
    let mut clean = 0;
    for chunk in bytes.chunks_exact(8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let w = u64::from_le_bytes(word);
        if below(w, 0x20)
            || below(w ^ (ONES * u64::from(b'"')), 1)
            || below(w ^ (ONES * u64::from(b'\\')), 1)
        {
            break;
        }
        clean += 8;
    }
    clean
}

/// The bytes a JSON string must escape: control characters, `"` and `\\`.
static NEEDS_ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.into())
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Self::Float(f)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
impl From<Timestamp> for Value {
    fn from(t: Timestamp) -> Self {
        Self::Timestamp(t)
    }
}

/// One record of an entity: every column (key fields, the timestamp, value fields,
/// in the entity's column order) plus the event time it was recorded at.
///
/// Rows are cheap to clone: the columns are shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// When the event happened (the entity's timestamp column).
    pub event_time: Timestamp,
    /// All columns in entity column order.
    pub columns: Arc<[Value]>,
}

impl Row {
    /// A row from its columns; `event_time` must equal the timestamp column.
    pub fn new(event_time: Timestamp, columns: impl Into<Arc<[Value]>>) -> Self {
        Self {
            event_time,
            columns: columns.into(),
        }
    }

    /// Approximate heap size in bytes, for memory accounting.
    pub fn approx_size(&self) -> usize {
        fn size(v: &Value) -> usize {
            std::mem::size_of::<Value>()
                + match v {
                    Value::String(s) => s.len(),
                    Value::List(items) => items.iter().map(size).sum(),
                    _ => 0,
                }
        }
        self.columns.iter().map(size).sum()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn naive_utc_is_what_python_isoformat_writes() {
        let mut out = Vec::new();
        Timestamp(1_796_119_200_045_282).write_naive_utc(&mut out);
        assert_eq!(out, b"2026-12-01T10:00:00.045282");
        out.clear();
        // Whole seconds: no fraction, as `datetime.isoformat()` leaves it out.
        Timestamp(1_796_119_200_000_000).write_naive_utc(&mut out);
        assert_eq!(out, b"2026-12-01T10:00:00");
        out.clear();
        Value::List(vec![Value::Timestamp(Timestamp(0))].into())
            .write_json_as(&mut out, TimeFormat::NaiveUtc);
        assert_eq!(out, br#"["1970-01-01T00:00:00"]"#);
    }

    #[test]
    fn timestamps_rfc3339_cannot_write_are_null_in_answers() {
        let json = |t: Timestamp| {
            let mut out = Vec::new();
            Value::Timestamp(t).write_json(&mut out);
            (
                String::from_utf8(out).unwrap(),
                Value::Timestamp(t).to_json().to_string(),
            )
        };
        let max = json(Timestamp::RFC3339_MAX);
        assert_eq!(max.0, "\"9999-12-31T23:59:59.999999+00:00\"");
        assert_eq!(max.0, max.1);
        let min = json(Timestamp::RFC3339_MIN);
        assert_eq!(min.0, "\"0000-01-01T00:00:00.000000+00:00\"");
        for t in [
            Timestamp(Timestamp::RFC3339_MAX.0 + 1),
            Timestamp(Timestamp::RFC3339_MIN.0 - 1),
            Timestamp(9_000_000_000_000_000_000),
            Timestamp(i64::MIN),
        ] {
            assert_eq!(json(t), ("null".to_owned(), "null".to_owned()), "{t:?}");
        }
    }

    use super::*;

    #[test]
    fn field_types_parse_and_print() {
        for s in [
            "string",
            "int",
            "float",
            "bool",
            "timestamp",
            "list<float>",
            "list<list<int>>",
        ] {
            assert_eq!(FieldType::parse(s).unwrap().to_string(), s);
        }
        assert!(FieldType::parse("double").is_none());
        assert!(FieldType::parse("list<>").is_none());
    }

    #[test]
    fn json_values_are_typed() {
        let f = FieldType::Float;
        assert_eq!(
            f.from_json(&serde_json::json!(2)).unwrap(),
            Value::Float(2.0)
        );
        assert!(FieldType::Int.from_json(&serde_json::json!(2.5)).is_err());
        assert!(FieldType::String.from_json(&serde_json::json!(1)).is_err());
        let t = FieldType::Timestamp
            .from_json(&serde_json::json!("2025-04-18T10:00:00Z"))
            .unwrap();
        assert_eq!(t, Value::Timestamp(Timestamp(1_744_970_400_000_000)));
        let t2 = FieldType::Timestamp
            .from_json(&serde_json::json!(1_744_970_400))
            .unwrap();
        assert_eq!(t, t2);
    }

    #[test]
    fn timestamps_print_with_explicit_offset() {
        assert_eq!(
            Timestamp(1_744_970_400_000_001).to_rfc3339(),
            "2025-04-18T10:00:00.000001+00:00"
        );
    }

    #[test]
    fn rfc3339_writer_matches_chrono() {
        let chrono_text = |t: Timestamp| {
            t.to_datetime()
                .unwrap()
                .to_rfc3339_opts(SecondsFormat::Micros, false)
        };
        // Edges: the epoch, just before it, leap days, the ends of years 0 and 9999,
        // and a spread of instants with odd microseconds in between.
        let mut cases = vec![
            0,
            -1,
            951_782_400_000_000,     // 2000-02-29
            4_107_542_399_999_999,   // 2100-02-28T23:59:59.999999
            -62_167_219_200_000_000, // 0000-01-01
            -62_167_219_200_000_001, // year -1: through chrono
            253_402_300_799_999_999, // 9999-12-31T23:59:59.999999
            253_402_300_800_000_000, // 10000-01-01: through chrono
        ];
        let mut t: i64 = -62_000_000_000_000_000;
        while t < 253_000_000_000_000_000 {
            cases.push(t);
            t += 7_777_777_777_777_777 / 64 + 13;
        }
        for micros in cases {
            let ts = Timestamp(micros);
            assert_eq!(ts.to_rfc3339(), chrono_text(ts), "{micros}");
        }
        // Outside chrono's range: the number.
        assert_eq!(Timestamp(i64::MIN).to_rfc3339(), i64::MIN.to_string());
    }

    #[test]
    fn json_writers_match_serde_json() {
        let mut strings: Vec<String> = (0u8..0x80).map(|b| char::from(b).to_string()).collect();
        strings
            .extend(["", "plain", "a\"b\\c\n\u{7f}", "ключ🔑\u{1}x", "\u{2028}"].map(String::from));
        // Each byte to escape at each place of a 19-byte string: in either word,
        // in the tail, beside non-ASCII bytes (whose high bit the word test must
        // not take for one).
        for b in (0u8..0x20).chain([b'"', b'\\', 0x7f]) {
            for at in 0..19 {
                let mut s: Vec<char> = "ab\u{e9}cdefghijklmnop".chars().collect();
                s.insert(at.min(s.len()), char::from(b));
                strings.push(s.into_iter().collect());
            }
        }
        strings.push("\u{a2}\u{a2}\u{a2}\u{a2}\u{a2}\u{a2}\u{a2}\u{a2}\"".to_owned());
        for s in strings {
            let mut out = Vec::new();
            write_json_str(&mut out, &s);
            assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
        }
        for i in [0, -1, 42, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            Value::Int(i).write_json(&mut out);
            assert_eq!(out, serde_json::to_vec(&i).unwrap());
        }
        for f in [0.0, -0.0, 4.0, 0.1, 1e300, -2.5e-310, f64::MAX, 1.0 / 3.0] {
            let mut out = Vec::new();
            Value::Float(f).write_json(&mut out);
            assert_eq!(out, serde_json::to_vec(&f).unwrap());
        }
    }

    #[test]
    fn values_write_json() {
        let v = Value::List(vec![Value::Float(4.0), Value::Float(f64::NAN), "a\"b".into()].into());
        let mut out = Vec::new();
        v.write_json(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"[4.0,null,"a\"b"]"#);
    }

    #[test]
    fn coerce_widens_ints() {
        assert_eq!(
            FieldType::Float.coerce(Value::Int(3)),
            Some(Value::Float(3.0))
        );
        assert_eq!(FieldType::Int.coerce(Value::Float(3.0)), None);
        let l = FieldType::List(Box::new(FieldType::Float));
        assert_eq!(
            l.coerce(Value::List(vec![Value::Int(1)].into())),
            Some(Value::List(vec![Value::Float(1.0)].into()))
        );
    }
}
