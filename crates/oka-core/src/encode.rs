//! The response body, written straight into a byte buffer.
//!
//! `{"results": {feature: [[record, …] | null per key]}, "statuses": {feature:
//! ["present"|"missing"|"error"|"invalid_key", …]}, "server_id": …}`; a record is an object of the
//! entity's columns, timestamps in RFC 3339 (or, on Volga's routes, naive UTC as
//! Volga writes them: [`TimeFormat`]).

use crate::execute::{Outcome, Outputs};
use crate::registry::{Entity, Registry};
use crate::request::{Prepared, Target};
use crate::value::{Row, TimeFormat, write_json_str};

/// Writes the response for `prepared` given its outputs, timestamps in `times`'
/// form. `server_id` is written verbatim (already JSON).
pub fn write_response(
    registry: &Registry,
    prepared: &Prepared,
    outputs: &Outputs,
    server_id: &str,
    times: TimeFormat,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"results\":{");
    for (i, target) in prepared.targets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let f = registry.feature(target.feature);
        write_json_str(out, &f.name);
        out.extend_from_slice(b":[");
        for (k, o) in answers(prepared, outputs, target).enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match o {
                Some(Outcome::Present(rows)) => write_rows(&f.entity, rows, times, out),
                Some(Outcome::Missing | Outcome::Error) | None => out.extend_from_slice(b"null"),
            }
        }
        out.push(b']');
    }
    out.extend_from_slice(b"},\"statuses\":{");
    for (i, target) in prepared.targets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(out, &registry.feature(target.feature).name);
        out.extend_from_slice(b":[");
        for (k, o) in answers(prepared, outputs, target).enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(o.map_or(INVALID_KEY, Outcome::status).as_bytes());
            out.push(b'"');
        }
        out.push(b']');
    }
    out.extend_from_slice(b"},\"server_id\":");
    out.extend_from_slice(server_id.as_bytes());
    out.push(b'}');
}

/// The status of a key refused under [`KeyPolicy::NullForBadKeys`](crate::KeyPolicy).
pub const INVALID_KEY: &str = "invalid_key";

/// A target's outcome for each key of the request's key list: `None` for a key
/// refused under [`KeyPolicy::NullForBadKeys`](crate::KeyPolicy).
fn answers<'o>(
    prepared: &Prepared,
    outputs: &'o Outputs,
    target: &Target,
) -> impl Iterator<Item = Option<&'o Outcome>> + use<'o> {
    let outcomes = outputs.of(target);
    let served = prepared
        .groups
        .get(target.group)
        .and_then(|g| g.served.clone());
    let requested = served.as_ref().map_or(outcomes.len(), |(n, _)| *n);
    let mut next = 0;
    (0..requested).map(move |k| match &served {
        None => outcomes.get(k),
        Some((_, indices)) if indices.get(next) == Some(&k) => {
            next += 1;
            outcomes.get(next - 1)
        }
        Some(_) => None,
    })
}

/// Writes a list of records as JSON objects.
pub fn write_rows(entity: &Entity, rows: &[Row], times: TimeFormat, out: &mut Vec<u8>) {
    out.push(b'[');
    for (r, row) in rows.iter().enumerate() {
        if r > 0 {
            out.push(b',');
        }
        write_row(entity, row, times, out);
    }
    out.push(b']');
}

/// Writes one record as a JSON object of the entity's columns, in the entity's
/// answer order.
pub fn write_row(entity: &Entity, row: &Row, times: TimeFormat, out: &mut Vec<u8>) {
    out.push(b'{');
    let mut first = true;
    for &c in entity.answer_order() {
        let Some(v) = row.columns.get(c) else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(entity.json_key(c));
        v.write_json_as(out, times);
    }
    out.push(b'}');
}
