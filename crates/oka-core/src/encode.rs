//! The response body, written straight into a byte buffer.
//!
//! `{"results": {feature: [[record, …] | null per key]}, "statuses": {feature:
//! ["present"|"missing"|"error", …]}, "server_id": …}`; a record is an object of the
//! entity's columns, timestamps in RFC 3339 (or, on Volga's routes, naive UTC as
//! Volga writes them: [`TimeFormat`]).

use crate::execute::{Outcome, Outputs};
use crate::registry::{Entity, Registry};
use crate::request::Prepared;
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
        for (k, o) in outputs.of(target).iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match o {
                Outcome::Present(rows) => write_rows(&f.entity, rows, times, out),
                Outcome::Missing | Outcome::Error => out.extend_from_slice(b"null"),
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
        for (k, o) in outputs.of(target).iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(o.status().as_bytes());
            out.push(b'"');
        }
        out.push(b']');
    }
    out.extend_from_slice(b"},\"server_id\":");
    out.extend_from_slice(server_id.as_bytes());
    out.push(b'}');
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

/// Writes one record as a JSON object of the entity's columns.
pub fn write_row(entity: &Entity, row: &Row, times: TimeFormat, out: &mut Vec<u8>) {
    out.push(b'{');
    for (c, v) in row.columns.iter().enumerate().take(entity.columns.len()) {
        if c > 0 {
            out.push(b',');
        }
        out.extend_from_slice(entity.json_key(c));
        v.write_json_as(out, times);
    }
    out.push(b'}');
}
