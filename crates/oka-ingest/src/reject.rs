//! Why a record was rejected ([`RecordError`], [`BadValue`]), and the helpers
//! that make user data safe to echo in those messages ([`printable`],
//! [`terminal_safe`]). Every message names the field and says what to do.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use oka_core::{FieldType, Timestamp};

/// Why one record was rejected: what the ingest summary and `oka ingest` print
/// next to the record's line. User data in it has gone through [`printable`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// A JSON record that is not exactly one object (serde's reason).
    #[error("not a JSON object: {0}")]
    NotAnObject(String),
    /// A field the entity does not declare.
    #[error("entity `{entity}` has no field `{field}`")]
    UnknownField {
        /// The entity.
        entity: String,
        /// The field as written.
        field: String,
    },
    /// A CSV record with more or fewer cells than the header.
    #[error("expected {expected} fields, found {found}")]
    FieldCount {
        /// Cells in the header.
        expected: usize,
        /// Cells in the record.
        found: usize,
    },
    /// A CSV header index past the entity's columns (a caller's mistake).
    #[error("column index {index} is out of range for entity `{entity}`")]
    ColumnIndex {
        /// The index.
        index: usize,
        /// The entity.
        entity: String,
    },
    /// One field's value was refused.
    #[error("field `{field}`: {problem}")]
    Field {
        /// The field.
        field: String,
        /// What is wrong with its value.
        problem: BadValue,
    },
    /// A key field that is absent or null.
    #[error("missing key field `{0}`")]
    MissingKey(String),
    /// A record without an event time where one is required (a history file).
    #[error("no event time: field `{0}` is absent or null")]
    MissingTime(String),
    /// The entity's timestamp field holds something else.
    #[error("field `{0}` is not a timestamp")]
    NotATimestamp(String),
    /// A line longer than the record size limit.
    #[error("line is longer than {0} bytes")]
    LineTooLong(usize),
    /// A line that is not UTF-8; the 1-based byte where it stops being so.
    #[error("not valid UTF-8 at byte {0} of the line")]
    NotUtf8(usize),
    /// A CSV record that is not valid CSV (the CSV reader's reason).
    #[error("{0}")]
    Csv(&'static str),
    /// A quoted CSV field that opens on the record's line and never closes.
    #[error("{UNTERMINATED}{0}")]
    Unterminated(Unclosed),
    /// An event time past now plus the allowed clock skew.
    #[error(
        "field `{field}`: {instant} is {ahead} in the future (more than the allowed {skew} skew; check the clock or the unit: epoch seconds, not milliseconds)"
    )]
    TooFarAhead {
        /// The timestamp field.
        field: String,
        /// The event time, as RFC 3339.
        instant: String,
        /// How far past now, in words.
        ahead: String,
        /// The allowed skew (`5m0s`).
        skew: String,
    },
}

/// The start of [`RecordError::Unterminated`]'s message.
pub const UNTERMINATED: &str =
    "unterminated quote: the quoted field opened on this line never closes";

/// Where the reader gave up on an open CSV quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unclosed {
    /// The input ended.
    EndOfInput,
    /// Reading on would make the record longer than this many bytes.
    TooLong(usize),
    /// A later line was not valid CSV.
    Syntax {
        /// The line.
        line: u64,
        /// The CSV reader's reason.
        why: &'static str,
    },
    /// A later line was not UTF-8.
    NotUtf8 {
        /// The line.
        line: u64,
    },
    /// The quote closed, but the record then had the wrong number of cells.
    FieldCount {
        /// The line where it closed.
        line: u64,
        /// Cells found.
        found: usize,
        /// Cells in the header.
        expected: usize,
    },
}

impl std::fmt::Display for Unclosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::EndOfInput => Ok(()),
            Self::TooLong(max) => write!(f, " (it would make a record longer than {max} bytes)"),
            Self::Syntax { line, why } => write!(f, " (read through line {line}: {why})"),
            Self::NotUtf8 { line } => write!(f, " (line {line} is not valid UTF-8)"),
            Self::FieldCount {
                line,
                found,
                expected,
            } => write!(
                f,
                " (read through line {line}, it has {found} fields, not {expected})"
            ),
        }
    }
}

impl RecordError {
    /// `field`'s value was refused because of `problem`.
    pub fn field(field: &str, problem: BadValue) -> Self {
        Self::Field {
            field: printable(field).into_owned(),
            problem,
        }
    }
}

/// What is wrong with one value (the field is named by [`RecordError::Field`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadValue {
    /// NaN or an infinity.
    #[error("{}", NON_FINITE)]
    NonFinite,
    /// A value of another JSON type than the field's.
    #[error("expected {expected}, got {got}")]
    Mismatch {
        /// The field's type.
        expected: FieldType,
        /// The JSON type found.
        got: &'static str,
    },
    /// A CSV cell for a bool field that is not `true`, `false`, `1` or `0`.
    #[error("`{0}` is not a bool")]
    NotABool(String),
    /// A CSV cell for a list field that is not a JSON list of the item type.
    #[error("`{0}` is not a JSON list")]
    NotAList(String),
    /// A CSV cell for a number field that is not a number.
    #[error("`{0}` is not a number")]
    NotANumber(String),
    /// A JSON integer above `i64::MAX`.
    #[error("{0} is out of range for int")]
    IntRange(u64),
    /// A string that is not an RFC 3339 timestamp.
    #[error("invalid RFC 3339 timestamp `{0}`")]
    Rfc3339(String),
    /// An instant outside [`MIN_TIME`](crate::record::MIN_TIME)`..=`[`MAX_TIME`](crate::record::MAX_TIME).
    #[error("{}", outside_range(shown, *after))]
    OutsideRange {
        /// The instant as shown to the user.
        shown: String,
        /// Whether it lies past the end (then the message hints at the unit).
        after: bool,
    },
}

/// [`MIN_TIME`]`..=`[`MAX_TIME`] in words, for error messages.
const RANGE_TEXT: &str = "1970-01-01 … 9999-12-31";

/// The usual cause of a far-future instant.
const UNIT_HINT: &str = "check the unit: epoch seconds, not milliseconds";

/// The message for a non-finite float.
const NON_FINITE: &str = "NaN and infinities are not allowed";

/// How many characters of user data an error message echoes.
const ECHO_CHARS: usize = 80;

/// "… is outside the accepted range", with the unit hint for instants past it.
fn outside_range(shown: &str, after: bool) -> String {
    if after {
        format!("{shown} is outside the accepted range {RANGE_TEXT} ({UNIT_HINT})")
    } else {
        format!("{shown} is outside the accepted range {RANGE_TEXT}")
    }
}

/// An instant for a message: RFC 3339 (without a zero fraction), or the epoch
/// seconds when chrono cannot print it.
pub(crate) fn show_instant(t: Timestamp) -> String {
    if t.to_datetime().is_none() {
        return format!("{} epoch seconds", show_number(t.0 as f64 / 1e6));
    }
    let text = t.to_rfc3339();
    if t.0.rem_euclid(1_000_000) == 0 {
        text.replacen(".000000", "", 1)
    } else {
        text
    }
}

/// A number for a message: plain up to 1e15, in exponent form beyond (so `1e300`
/// does not print three hundred digits).
pub(crate) fn show_number(n: f64) -> String {
    if n.abs() < 1e15 {
        format!("{n}")
    } else {
        format!("{n:e}")
    }
}

/// A span of microseconds in the largest unit that is at least one, one decimal.
pub(crate) fn show_span(micros: i64) -> String {
    const UNITS: [(f64, &str); 4] = [
        (365.25 * 86_400.0, "years"),
        (86_400.0, "days"),
        (3_600.0, "hours"),
        (60.0, "minutes"),
    ];
    let secs = micros as f64 / 1e6;
    UNITS.iter().find(|(size, _)| secs >= *size).map_or_else(
        || format!("{secs:.1} seconds"),
        |(size, unit)| format!("{:.1} {unit}", secs / size),
    )
}

/// A skew as Go prints durations: `5m0s`, `1h0m0s`, `30s`, `1.5s`.
pub(crate) fn show_skew(d: Duration) -> String {
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    let millis = d.subsec_millis();
    let secs = if millis == 0 {
        format!("{s}s")
    } else {
        let frac = format!("{millis:03}");
        format!("{s}.{}s", frac.trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

/// `text` made safe to print in an error message: at most 80 characters (then
/// `…`), with control characters (C0, DEL, C1), the line and paragraph separators
/// and the bidirectional overrides and isolates written as `\u{1b}`-style escapes,
/// so a terminal never receives an escape sequence from user data.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, ECHO_CHARS)
}

/// `text` with the characters [`printable`] escapes escaped, at any length: for a
/// message that already went through [`printable`] for its parts, or text that
/// may hold input (a store's error) and is printed on a terminal.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    escape(text, usize::MAX)
}

fn escape(text: &str, max_chars: usize) -> Cow<'_, str> {
    let truncated = text.len() > max_chars && text.chars().nth(max_chars).is_some();
    let clean_prefix = text.chars().take(max_chars).all(|c| !is_unprintable(c));
    if clean_prefix && !truncated {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max_chars) + 16);
    for c in text.chars().take(max_chars) {
        if is_unprintable(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    if truncated {
        out.push('…');
    }
    Cow::Owned(out)
}

/// Characters [`printable`] escapes.
fn is_unprintable(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}
