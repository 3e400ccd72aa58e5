//! Feast's answer to `POST /get-online-features`, as JSON: the entity columns,
//! then each feature's column (`values`, `statuses`, `event_timestamps`), then
//! `metadata.feature_names`.

use std::fmt::Write as _;
use std::ops::Range;

use oka_core::execute::Outcome;
use oka_core::value::write_json_str;
use oka_core::{Row, Timestamp, Value};

use super::plan::Feature;
use super::{Computed, Out, Plan};
use crate::error::ApiError;

/// Writes the answer in Feast's shape; an error, writing nothing, when an
/// on-demand feature failed for a row ([`Plan::checked_outcomes`]).
pub fn write_response(computed: &Computed, plan: &Plan, out: &mut Vec<u8>) -> Result<(), ApiError> {
    let views = plan.checked_outcomes(computed)?;
    // What is the same in many columns is written once and copied from where
    // it was written: what every column has between its values and its event
    // times, and each view's event times (its features' values come from the
    // same records).
    let mut same = Same {
        rows: plan.rows,
        between: None,
        tails: vec![None; views.len()],
    };
    // Each column ends with the next one's start (the end of a view's column
    // and the start of the next, copied at once); the last start is taken back.
    out.extend_from_slice(b"{\"results\":[");
    out.extend_from_slice(COLUMN_START);
    for column in plan.columns() {
        match column {
            Out::Entity(values, _) => write_entity(values, &mut same, out),
            Out::Feature(feature) => match views.get(feature.target) {
                Some(outcomes) => write_feature(outcomes, feature, &mut same, out),
                // Not reached (every target has its outcomes); the column is
                // still closed, so the answer stays JSON.
                None => {
                    out.extend_from_slice(b"],\"statuses\":[],\"event_timestamps\":[]}");
                    end_column(out);
                }
            },
        }
    }
    out.truncate(out.len() - COLUMN_START.len());
    out.pop_if(|b| *b == b',');
    out.extend_from_slice(b"],\"metadata\":{\"feature_names\":[");
    let keys = &plan.shape.keys;
    for (key, _) in &plan.entities {
        write_json_str(out, &keys[*key].name);
        out.push(b',');
    }
    // The features' names, written when their list was planned.
    let features = &plan.shape.names_json;
    if features.is_empty() {
        out.pop_if(|b| *b == b',');
    }
    out.extend_from_slice(features);
    out.extend_from_slice(b"]}}");
    Ok(())
}

const EPOCH: &str = "1970-01-01T00:00:00Z";

/// The start of a column, up to its first value.
const COLUMN_START: &[u8] = b"{\"values\":[";

/// Ends a column (after its `]}`) with the next one's start.
fn end_column(out: &mut Vec<u8>) {
    out.push(b',');
    out.extend_from_slice(COLUMN_START);
}

/// Where the answer's repeated parts were first written, to be copied from.
struct Same {
    rows: usize,
    between: Option<Range<usize>>,
    /// Each view's: from its `],"statuses"` to its column's end and the next
    /// column's start (all earlier in the answer, which only grows).
    tails: Vec<Option<Range<usize>>>,
}

impl Same {
    /// What every column has between its values and its event times (Feast
    /// 0.67 on Redis answers `PRESENT` for every value it looked up, found or
    /// not; a key without the view's record has null values and the epoch).
    fn write_between(&mut self, out: &mut Vec<u8>) {
        if let Some(at) = self.between.clone() {
            out.extend_from_within(at);
            return;
        }
        let start = out.len();
        out.extend_from_slice(b"],\"statuses\":[");
        for i in 0..self.rows {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"\"PRESENT\"");
        }
        out.extend_from_slice(b"],\"event_timestamps\":[");
        self.between = Some(start..out.len());
    }
}

/// An entity column after its `{"values":[`: the values as given, each
/// present, at the epoch.
fn write_entity(values: &[Value], same: &mut Same, out: &mut Vec<u8>) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(v, out);
    }
    same.write_between(out);
    for i in 0..values.len() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, EPOCH);
    }
    out.extend_from_slice(b"]}");
    end_column(out);
}

/// A feature's column after its `{"values":[`, from its view's outcomes for
/// each row; each value's event time is its record's (an on-demand view's
/// values have none: Feast answers the epoch).
fn write_feature(
    outcomes: &[Option<&Outcome>],
    feature: &Feature,
    same: &mut Same,
    out: &mut Vec<u8>,
) {
    fn record<'o>(o: &Option<&'o Outcome>) -> Option<&'o Row> {
        match o {
            Some(Outcome::Present(rows)) => rows.first(),
            _ => None,
        }
    }
    for (i, o) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match (record(o), feature.column) {
            (Some(row), Some(at)) => write_value(row.columns.get(at).unwrap_or(&Value::Null), out),
            _ => out.extend_from_slice(b"null"),
        }
    }
    if let Some(at) = same.tails.get(feature.target).cloned().flatten() {
        out.extend_from_within(at);
        return;
    }
    let start = out.len();
    same.write_between(out);
    for (i, o) in outcomes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match record(o).filter(|_| !feature.on_demand) {
            Some(row) => write_feast_time(row.event_time, out),
            None => write_json_str(out, EPOCH),
        }
    }
    out.extend_from_slice(b"]}");
    end_column(out);
    if let Some(tail) = same.tails.get_mut(feature.target) {
        *tail = Some(start..out.len());
    }
}

/// A value as Feast's JSON writes it: unix timestamps as whole seconds,
/// non-finite floats as protobuf JSON's strings, the rest as JSON.
fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Timestamp(t) => {
            let _ = write!(Bytes(out), "{}", t.0.div_euclid(1_000_000));
        }
        Value::Float(f) if !f.is_finite() => {
            let s = if f.is_nan() {
                "NaN"
            } else if *f > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            };
            write_json_str(out, s);
        }
        Value::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        other => other.write_json(out),
    }
}

/// An event time as Feast writes it, a JSON string: RFC 3339 in UTC with `Z`,
/// fractions only as long as needed (none, milliseconds or microseconds).
/// Written from Oka's RFC 3339 text (no formatter: once per value answered);
/// outside years 0–9999 through chrono, and the epoch beyond chrono's range.
fn write_feast_time(t: Timestamp, out: &mut Vec<u8>) {
    // The fraction's digits Feast leaves out of `.000000`.
    let unwritten = match t.0.rem_euclid(1_000_000) {
        0 => ".000000".len(),
        m if m % 1000 == 0 => "000".len(),
        _ => 0,
    };
    out.push(b'"');
    if t.is_rfc3339() {
        // `…T00:00:00.000000+00:00`: no offset, and the fraction trimmed.
        t.write_rfc3339(out);
        out.truncate(out.len() - "+00:00".len() - unwritten);
    } else if let Some(dt) = t.to_datetime() {
        let _ = write!(Bytes(out), "{}", dt.format("%Y-%m-%dT%H:%M:%S%.6f"));
        out.truncate(out.len() - unwritten);
    } else {
        out.extend_from_slice(&EPOCH.as_bytes()[..EPOCH.len() - 1]);
    }
    out.extend_from_slice(b"Z\"");
}

/// `fmt::Write` into a byte buffer.
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feast_time(t: Timestamp) -> String {
        let mut out = Vec::new();
        write_feast_time(t, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn event_times_are_feasts() {
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_000_000)),
            "\"2025-12-04T17:40:00Z\""
        );
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_250_000)),
            "\"2025-12-04T17:40:00.250Z\""
        );
        assert_eq!(
            feast_time(Timestamp(1_764_870_000_000_001)),
            "\"2025-12-04T17:40:00.000001Z\""
        );
        assert_eq!(
            feast_time(Timestamp(-1_000_000)),
            "\"1969-12-31T23:59:59Z\""
        );
        assert_eq!(feast_time(Timestamp(-1)), "\"1969-12-31T23:59:59.999999Z\"");
        // Beyond year 9999 (chrono writes it), fractions trimmed alike.
        let year_10000 = Timestamp::RFC3339_MAX.0 + 1;
        assert_eq!(
            feast_time(Timestamp(year_10000)),
            "\"+10000-01-01T00:00:00Z\""
        );
        assert_eq!(
            feast_time(Timestamp(year_10000 + 250_000)),
            "\"+10000-01-01T00:00:00.250Z\""
        );
        assert_eq!(feast_time(Timestamp(i64::MAX)), "\"1970-01-01T00:00:00Z\"");
    }

    #[test]
    fn values_are_feasts_json() {
        let mut out = Vec::new();
        write_value(
            &Value::Timestamp(Timestamp(1_600_000_000_000_000)),
            &mut out,
        );
        out.push(b' ');
        write_value(&Value::Float(f64::NAN), &mut out);
        out.push(b' ');
        write_value(&Value::Int(-(1 << 62)), &mut out);
        out.push(b' ');
        write_value(&Value::Float(4.0), &mut out);
        out.push(b' ');
        write_value(&Value::String("a\"\u{1}é".into()), &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "1600000000 \"NaN\" -4611686018427387904 4.0 \"a\\\"\\u0001é\""
        );
    }
}
