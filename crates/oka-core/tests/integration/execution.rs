//! Executing prepared requests over in-test data (the executor is sans-IO).

use std::collections::HashMap;

use oka_core::execute::{ExecuteError, Fetched, Outcome, execute};
use oka_core::request::{Fetch, Prepared};
use oka_core::{EntityKey, FeatureRequest, Query, Registry, Row, Timestamp, Value};
use serde_json::json;

use super::registry;

/// Records by (feature, key), oldest first.
#[derive(Default)]
struct Data(HashMap<(String, String), Vec<Row>>);

impl Data {
    fn put(&mut self, feature: &str, id: &str, ts: i64, value: f64) {
        let row = Row::new(
            Timestamp(ts),
            vec![
                Value::from(id),
                Value::Timestamp(Timestamp(ts)),
                Value::Float(value),
            ],
        );
        let h = self.0.entry((feature.into(), id.into())).or_default();
        h.push(row);
        h.sort_by_key(|r| r.event_time);
    }

    fn read(&self, r: &Registry, f: &Fetch) -> Vec<Vec<Row>> {
        let name = &r.feature(f.feature).name;
        f.keys
            .iter()
            .map(|k: &EntityKey| {
                let h = self
                    .0
                    .get(&(name.to_string(), k.as_str().to_owned()))
                    .cloned()
                    .unwrap_or_default();
                match f.query {
                    Query::Latest => h.last().cloned().into_iter().collect(),
                    Query::LastN { n } => h[h.len().saturating_sub(n)..].to_vec(),
                    Query::Range { start, end } => h
                        .into_iter()
                        .filter(|r| r.event_time >= start && r.event_time <= end)
                        .collect(),
                }
            })
            .collect()
    }
}

/// Runs a request; returns (feature → per-key outcomes).
fn run(
    r: &Registry,
    data: &Data,
    body: serde_json::Value,
    now: i64,
) -> HashMap<String, Vec<Outcome>> {
    let req: FeatureRequest = serde_json::from_value(body).unwrap();
    let prepared: Prepared = r.prepare(&req, Timestamp(now)).unwrap();
    let fetched = Fetched::read_all(&prepared, |f| data.read(r, f)).unwrap();
    let outputs = execute(r, &prepared, &fetched, None).unwrap();
    prepared
        .targets
        .iter()
        .map(|t| {
            (
                r.feature(t.feature).name.to_string(),
                outputs.of(t).to_vec(),
            )
        })
        .collect()
}

fn value(o: &Outcome, col: usize) -> Value {
    match o {
        Outcome::Present(rows) => rows[0].columns[col].clone(),
        other => panic!("expected a value, got {other:?}"),
    }
}

#[test]
fn seed_workload_and_chain() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 21.0);
    let out = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature", "chained_feature"], "keys": [{"id": "a"}],
               "udf_args": {"simple_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 1}}}),
        5_000,
    );
    assert_eq!(value(&out["simple_feature"][0], 2), Value::Float(42.0));
    assert_eq!(value(&out["chained_feature"][0], 2), Value::Float(43.0));
    // The output key comes from the request; the timestamp is `now`.
    assert_eq!(value(&out["simple_feature"][0], 0), Value::from("a"));
    assert_eq!(
        value(&out["simple_feature"][0], 1),
        Value::Timestamp(Timestamp(5_000))
    );
}

#[test]
fn missing_keys_skip_the_udf_and_propagate() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 1.0);
    let out = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature", "chained_feature", "test_feature"], "keys": [{"id": "a"}, {"id": "ghost"}]}),
        5_000,
    );
    assert!(matches!(out["simple_feature"][0], Outcome::Present(_)));
    assert_eq!(out["simple_feature"][1], Outcome::Missing);
    assert_eq!(out["chained_feature"][1], Outcome::Missing);
    assert_eq!(out["test_feature"][1], Outcome::Missing);
}

#[test]
fn one_missing_input_of_two_is_missing() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 1.0);
    d.put("other_feature", "a", 1_000, 2.0);
    d.put("test_feature", "b", 1_000, 1.0);
    let out = run(
        &r,
        &d,
        json!({"target_features": ["sum_feature"], "keys": [{"id": "a"}, {"id": "b"}]}),
        5_000,
    );
    assert_eq!(value(&out["sum_feature"][0], 2), Value::Float(3.0));
    assert_eq!(out["sum_feature"][1], Outcome::Missing);
}

#[test]
fn udf_errors_and_panics_affect_only_their_key() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "ok", 1_000, 1.0);
    d.put("test_feature", "err", 1_000, 13.0);
    d.put("test_feature", "boom", 1_000, 666.0);
    let out = run(
        &r,
        &d,
        json!({"target_features": ["fragile_feature", "after_fragile", "simple_feature"],
               "keys": [{"id": "ok"}, {"id": "err"}, {"id": "boom"}]}),
        5_000,
    );
    assert_eq!(value(&out["fragile_feature"][0], 2), Value::Float(1.0));
    assert_eq!(out["fragile_feature"][1], Outcome::Error("unlucky".into()));
    assert_eq!(
        out["fragile_feature"][2],
        Outcome::Error("udf panicked: fragile udf panicked on purpose".into())
    );
    assert_eq!(
        out["after_fragile"][1],
        Outcome::Error("`fragile_feature` failed: unlucky".into()),
        "errors propagate to dependents, saying which input failed"
    );
    assert_eq!(value(&out["after_fragile"][0], 2), Value::Float(1.0));
    assert!(
        !oka_core::execute::in_udf(),
        "the in-udf flag is cleared after a panic"
    );
    // Another feature over the same keys is unaffected.
    assert_eq!(value(&out["simple_feature"][2], 2), Value::Float(666.0));
}

#[test]
fn range_and_last_n_inputs_are_lists() {
    let r = registry();
    let mut d = Data::default();
    for (ts, v) in [(10_000_000, 1.0), (20_000_000, 5.0), (30_000_000, 3.0)] {
        d.put("test_feature", "a", ts, v);
    }
    let out = run(
        &r,
        &d,
        json!({"target_features": ["window_feature", "last_feature"], "keys": [{"id": "a"}, {"id": "empty"}],
               "query_args": {"window_feature": {"start": 15, "end": 35}}}),
        40_000_000,
    );
    assert_eq!(value(&out["window_feature"][0], 2), Value::Int(2));
    assert_eq!(value(&out["window_feature"][0], 3), Value::Float(5.0));
    // An empty window is a present, empty list: the UDF runs on [].
    assert_eq!(value(&out["window_feature"][1], 2), Value::Int(0));
    // last_n: the newest two, oldest first.
    assert_eq!(value(&out["last_feature"][0], 2), Value::Int(2));
    assert_eq!(value(&out["last_feature"][0], 3), Value::Float(5.0));
}

#[test]
fn pipeline_targets_take_direct_queries() {
    let r = registry();
    let mut d = Data::default();
    for (ts, v) in [(1_000_000, 1.0), (2_000_000, 2.0), (3_000_000, 3.0)] {
        d.put("test_feature", "a", ts, v);
    }
    let out = run(
        &r,
        &d,
        json!({"target_features": ["test_feature"], "keys": [{"id": "a"}], "query_args": {"test_feature": {"n": 2}}}),
        5_000_000,
    );
    let Outcome::Present(rows) = &out["test_feature"][0] else {
        panic!()
    };
    let vals: Vec<_> = rows.iter().map(|r| r.columns[2].clone()).collect();
    assert_eq!(vals, [Value::Float(2.0), Value::Float(3.0)]);
}

#[test]
fn a_passed_deadline_stops_the_udfs() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 1.0);
    let req: FeatureRequest = serde_json::from_value(
        json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}]}),
    )
    .unwrap();
    let prepared = r.prepare(&req, Timestamp(5_000)).unwrap();
    let fetched = Fetched::read_all(&prepared, |f| d.read(&r, f)).unwrap();
    let past = std::time::Instant::now();
    let out = execute(&r, &prepared, &fetched, Some(past));
    assert_eq!(out.unwrap_err(), ExecuteError::Expired);
    let future = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let out = execute(&r, &prepared, &fetched, Some(future)).unwrap();
    assert!(matches!(
        out.of(&prepared.targets[0])[0],
        Outcome::Present(_)
    ));
}

#[test]
fn a_read_answering_for_the_wrong_number_of_keys_is_an_error_not_a_panic() {
    let r = registry();
    let req: FeatureRequest = serde_json::from_value(
        json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}, {"id": "b"}]}),
    )
    .unwrap();
    let prepared = r.prepare(&req, Timestamp(5_000)).unwrap();
    let err = Fetched::read_all(&prepared, |_| vec![Vec::new()]).unwrap_err();
    assert_eq!(
        err,
        ExecuteError::WrongKeyCount {
            expected: 2,
            got: 1
        }
    );
    // A read never performed is an error too.
    let fetched = Fetched::new(&prepared);
    assert!(matches!(
        execute(&r, &prepared, &fetched, None),
        Err(ExecuteError::NotFetched(_))
    ));
}

#[test]
fn a_udf_timestamp_rfc3339_cannot_write_is_an_error_not_a_bare_number() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 1.0);
    // now + 10,000 years is past 9999-12-31.
    let out = run(
        &r,
        &d,
        json!({"target_features": ["far_future_feature"], "keys": [{"id": "a"}]}),
        1_764_000_000_000_000,
    );
    assert!(
        matches!(&out["far_future_feature"][0], Outcome::Error(why) if !why.is_empty()),
        "{:?}",
        out["far_future_feature"][0]
    );
}

/// A CEL step over several keys: each key's record is its own (its key, `now`,
/// its value), a key whose operand is not a double falls back to the interpreter
/// among keys on the fast path, and a step reading the step's records
/// (`chained_feature`) sees each key's.
#[test]
fn a_cel_steps_records_are_each_keys_own() {
    let r = registry();
    let mut d = Data::default();
    d.put("test_feature", "a", 1_000, 1.5);
    d.put("test_feature", "c", 1_000, -3.0);
    d.put("test_feature", "e", 1_000, f64::INFINITY);
    // `b`'s value is null: not a double, so the interpreter builds (fails) it.
    d.0.insert(
        ("test_feature".into(), "b".into()),
        vec![Row::new(
            Timestamp(1_000),
            vec![
                Value::from("b"),
                Value::Timestamp(Timestamp(1_000)),
                Value::Null,
            ],
        )],
    );
    let out = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature", "chained_feature"],
               "keys": [{"id": "a"}, {"id": "b"}, {"id": "ghost"}, {"id": "c"}, {"id": "e"}],
               "udf_args": {"simple_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 0.5}}}),
        5_000,
    );
    let record = |id: &str, v: f64| {
        vec![
            Value::from(id),
            Value::Timestamp(Timestamp(5_000)),
            Value::Float(v),
        ]
    };
    let simple = &out["simple_feature"];
    for (k, id, v) in [(0, "a", 3.0), (3, "c", -6.0), (4, "e", f64::INFINITY)] {
        let Outcome::Present(rows) = &simple[k] else {
            panic!("key {id}: {:?}", simple[k]);
        };
        assert_eq!(rows.len(), 1);
        assert_eq!(*rows[0].columns, record(id, v)[..], "key {id}");
        assert_eq!(rows[0].event_time, Timestamp(5_000));
    }
    assert!(matches!(simple[1], Outcome::Error(_)), "{:?}", simple[1]);
    assert_eq!(simple[2], Outcome::Missing);
    let chained = &out["chained_feature"];
    assert_eq!(value(&chained[0], 2), Value::Float(3.5));
    assert_eq!(value(&chained[3], 2), Value::Float(-5.5));
    assert_eq!(value(&chained[0], 0), Value::from("a"));
    assert_eq!(value(&chained[3], 0), Value::from("c"));
    assert!(matches!(chained[1], Outcome::Error(_)));
    assert_eq!(chained[2], Outcome::Missing);
}
