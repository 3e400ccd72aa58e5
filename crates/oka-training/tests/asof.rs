//! The as-of answers equal a literal replay into the store's rules: every record
//! with event time ≤ t written in event-time order (file order among equal
//! times), the clock reading each record's time as it is written and `t` when read.

mod common;

use std::collections::VecDeque;

use common::Lcg;

use oka_core::{EntityKey, NativeUdfs, Query, Registry, Row, Timestamp, Value};
use oka_storage::history::{expired, insert, select};
use oka_training::history::FeatureHistory;

const SPEC: &str = r#"
version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {v: int}
features:
  plain: {kind: pipeline, entity: E, history: 4}
  ttl: {kind: pipeline, entity: E, history: 3, ttl_s: 0.000025}
"#;

fn row(t: i64, v: i64) -> Row {
    Row::new(
        Timestamp(t),
        vec![
            Value::String("k".into()),
            Value::Timestamp(Timestamp(t)),
            Value::Int(v),
        ],
    )
}

/// What the store would answer as of `t` after the replay.
fn replay(records: &[Row], bound: usize, ttl: Option<i64>, t: i64, q: &Query) -> (Vec<Row>, bool) {
    let mut order: Vec<&Row> = records.iter().filter(|r| r.event_time.0 <= t).collect();
    order.sort_by_key(|r| r.event_time);
    let mut kept: VecDeque<Row> = VecDeque::new();
    let mut last: Option<Timestamp> = None;
    for r in order {
        if last.is_some_and(|w| expired(w, r.event_time, ttl)) {
            kept.clear();
        }
        insert(&mut kept, r.clone(), bound);
        last = Some(r.event_time);
    }
    match last {
        Some(w) if expired(w, Timestamp(t), ttl) => (Vec::new(), true),
        _ => {
            let range = select(kept.len(), |i| kept[i].event_time, q);
            (kept.range(range).cloned().collect(), false)
        }
    }
}

#[test]
fn as_of_answers_equal_a_replay_into_the_store() {
    let registry = Registry::from_yaml("asof", SPEC, &NativeUdfs::new()).unwrap();
    let mut rng = Lcg(7);
    for (name, bound, ttl) in [("plain", 4, None), ("ttl", 3, Some(25))] {
        let id = registry.feature_id(name).unwrap();
        for case in 0..200 {
            let records: Vec<Row> = (0..rng.next(12))
                .map(|i| row(rng.next(60) as i64, case * 100 + i as i64))
                .collect();
            let mut h = FeatureHistory::new(id, registry.feature(id));
            let key = EntityKey::from_canonical("k");
            for r in &records {
                h.push(key.clone(), r.clone());
            }
            h.finish();
            for t in -1..65 {
                for q in [
                    Query::Latest,
                    Query::LastN { n: 2 },
                    Query::Range {
                        start: Timestamp(t - 20),
                        end: Timestamp(t),
                    },
                ] {
                    let (rows, was_expired) = replay(&records, bound, ttl, t, &q);
                    let got = h.answer(&key, Timestamp(t), &q);
                    assert_eq!(got.rows, rows, "{name} case {case} t {t} {q:?} {records:?}");
                    assert_eq!(got.expired, was_expired, "{name} case {case} t {t}");
                }
            }
        }
    }
}
