//! One key's history as a store keeps it, and what it answers to a query: the
//! rules the in-memory store applies as records arrive, written once so that a
//! reader replaying a history in event-time order (`oka training-set`) answers
//! exactly what the store would have answered at each moment.
//!
//! - Records are kept oldest first; one with the same event time as a kept record
//!   replaces it (idempotent re-delivery: the last one written wins).
//! - At most the feature's `history` newest records are kept.
//! - A key with a TTL expires that long after its last write; a write to an
//!   expired key starts its history afresh.

use std::collections::VecDeque;
use std::ops::Range;

use oka_core::{Query, Row, Timestamp};

/// Inserts `row` in event-time order; a row with the same event time replaces the
/// old one (idempotent re-delivery). Drops the oldest beyond `bound`.
pub fn insert(history: &mut VecDeque<Row>, row: Row, bound: usize) {
    let pos = history.partition_point(|r| r.event_time < row.event_time);
    match history.get(pos) {
        Some(r) if r.event_time == row.event_time => history[pos] = row,
        _ => history.insert(pos, row),
    }
    while history.len() > bound {
        history.pop_front();
    }
}

/// The positions of the records that answer `query` in a history of `len`
/// records, oldest first, whose event times `time_at` gives.
pub fn select(len: usize, time_at: impl Fn(usize) -> Timestamp, query: &Query) -> Range<usize> {
    match *query {
        Query::Latest => len.saturating_sub(1)..len,
        Query::LastN { n } => len.saturating_sub(n)..len,
        Query::Range { start, end } => {
            let lo = partition_point(len, |i| time_at(i) < start);
            let hi = partition_point(len, |i| time_at(i) <= end);
            lo..hi.max(lo)
        }
    }
}

/// The first position in `0..len` where `before` is false (it must be true for
/// a prefix and false after it).
fn partition_point(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Whether a key last written at `written` has expired at `now` under `ttl`
/// (micros): it lives while `now < written + ttl`.
pub fn expired(written: Timestamp, now: Timestamp, ttl_micros: Option<i64>) -> bool {
    ttl_micros.is_some_and(|ttl| now.0 >= written.0.saturating_add(ttl))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(times: &[i64]) -> impl Fn(usize) -> Timestamp + '_ {
        |i| Timestamp(times[i])
    }

    #[test]
    fn queries_select_what_the_store_answers() {
        let t = [10, 20, 20, 30, 40];
        assert_eq!(select(5, at(&t), &Query::Latest), 4..5);
        assert_eq!(select(0, at(&t), &Query::Latest), 0..0);
        assert_eq!(select(5, at(&t), &Query::LastN { n: 2 }), 3..5);
        assert_eq!(select(5, at(&t), &Query::LastN { n: 9 }), 0..5);
        let range = |s, e| Query::Range {
            start: Timestamp(s),
            end: Timestamp(e),
        };
        assert_eq!(select(5, at(&t), &range(20, 30)), 1..4);
        assert_eq!(select(5, at(&t), &range(21, 29)), 3..3);
        assert_eq!(select(5, at(&t), &range(0, 5)), 0..0);
        assert_eq!(select(5, at(&t), &range(41, 50)), 5..5);
    }

    #[test]
    fn a_key_lives_until_its_ttl_has_passed() {
        assert!(!expired(Timestamp(100), Timestamp(149), Some(50)));
        assert!(expired(Timestamp(100), Timestamp(150), Some(50)));
        assert!(!expired(Timestamp(100), Timestamp(i64::MAX), None));
    }
}
