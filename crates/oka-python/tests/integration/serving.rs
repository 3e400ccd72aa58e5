//! Python UDFs answer as their CEL twins do.

use oka_core::execute::Outcome;
use serde_json::json;

use crate::{error, float, load, run, spec};

const SIMPLE: &str = "
def simple(test_feature, multiplier=1.0):
    return {'id': test_feature['id'], 'value': test_feature['value'] * multiplier}
";

fn simple_spec() -> String {
    spec(
        "  simple_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {id: \"test_feature.id\", value: \"test_feature.value * multiplier\", timestamp: \"now\"}
  simple_py:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf: {python: {file: udfs.py, function: simple}}
",
    )
}

#[test]
fn a_python_udf_answers_as_its_cel_twin() {
    let l = load("twin", &simple_spec(), SIMPLE, 1).unwrap();
    let out = run(
        &l.registry,
        &[("a", 2.0), ("b", -3.5)],
        json!({"target_features": ["simple_feature", "simple_py"],
               "keys": [{"id": "a"}, {"id": "b"}, {"id": "nope"}],
               "udf_args": {"simple_feature": {"multiplier": 3.0}, "simple_py": {"multiplier": 3.0}}}),
    );
    let (cel, py) = (&out[0].1, &out[1].1);
    assert_eq!(cel, py, "equal records, the timestamp `now` included");
    assert_eq!(float(&py[0], 2), 6.0);
    assert_eq!(float(&py[1], 2), -10.5);
    assert_eq!(py[2], Outcome::Missing, "a missing input skips the call");
}

#[test]
fn many_keys_are_one_call_and_defaults_apply() {
    let l = load("many", &simple_spec(), SIMPLE, 2).unwrap();
    let ids: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let data: Vec<(&str, f64)> = ids.iter().map(|i| (i.as_str(), 1.5)).collect();
    let keys: Vec<_> = ids.iter().map(|i| json!({"id": i})).collect();
    let out = run(
        &l.registry,
        &data,
        json!({"target_features": ["simple_py"], "keys": keys}),
    );
    assert_eq!(out[0].1.len(), 100);
    assert!(out[0].1.iter().all(|o| float(o, 2) == 1.5));
}

#[test]
fn a_raising_udf_fails_its_key_with_the_exception() {
    let module = "
def f(test_feature):
    if test_feature['value'] == 0:
        return {'value': 1 / test_feature['value']}
    if test_feature['value'] < 0:
        raise ValueError('negative: %s' % test_feature['id'])
    return {'value': test_feature['value']}
";
    let s = spec(
        "  f:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf: {python: {file: udfs.py, function: f}}
",
    );
    let l = load("raise", &s, module, 1).unwrap();
    let out = run(
        &l.registry,
        &[("zero", 0.0), ("neg", -1.0), ("ok", 4.0)],
        json!({"target_features": ["f"], "keys": [{"id": "zero"}, {"id": "neg"}, {"id": "ok"}]}),
    );
    assert_eq!(
        &*error(&out[0].1[0]),
        "ZeroDivisionError: float division by zero"
    );
    assert_eq!(&*error(&out[0].1[1]), "ValueError: negative: neg");
    assert_eq!(float(&out[0].1[2], 2), 4.0);
}
