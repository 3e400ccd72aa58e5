//! Workers that time out, crash or run out of memory, and results that are
//! not records: each fails only the keys (or the request) concerned, and the
//! pool goes on.

use std::time::{Duration, Instant};

use oka_core::batch::BatchError;
use oka_core::execute::ExecuteError;
use oka_python::Config;
use serde_json::json;

use crate::{error, float, load, load_with, python, run, spec, try_run};

const FRAGILE: &str = r#"
import ctypes, os, time

def f(test_feature):
    v = test_feature['value']
    if v == 13:
        while True:
            pass
    if v == 11:
        ctypes.string_at(0)
    if v == 3:
        os._exit(3)
    if v == 7:
        time.sleep(0.2)
    if v == 99:
        blob = bytearray(1 << 30)
        return {'value': float(len(blob))}
    return {'value': v}
"#;

fn fragile(timeout_ms: u64) -> String {
    spec(&format!(
        "  f:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf: {{python: {{file: udfs.py, function: f, timeout_ms: {timeout_ms}}}}}
"
    ))
}

#[test]
fn a_key_past_its_limit_times_out_its_request_and_the_worker_is_replaced() {
    let l = load("timeout", &fragile(300), FRAGILE, 1).unwrap();
    let started = Instant::now();
    let err = try_run(
        &l.registry,
        &[("slow", 13.0), ("ok", 1.0)],
        json!({"target_features": ["f"], "keys": [{"id": "ok"}, {"id": "slow"}]}),
    )
    .unwrap_err();
    let waited = started.elapsed();
    match err {
        ExecuteError::Batch(BatchError::TimedOut(m)) => {
            assert!(
                m.contains("`udfs.py:f` (feature `f`) ran past its limit of 300 ms"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        waited < Duration::from_secs(3),
        "killed near its limit: {waited:?}"
    );
    // The next request is served by the replacement.
    let out = run(
        &l.registry,
        &[("ok", 1.0)],
        json!({"target_features": ["f"], "keys": [{"id": "ok"}]}),
    );
    assert_eq!(float(&out[0].1[0], 2), 1.0);
    let pool = l.pool.unwrap();
    assert_eq!(pool.health().alive, 1);
}

#[test]
fn a_crash_fails_only_the_key_that_crashed_and_the_rest_are_answered() {
    let l = load("crash", &fragile(1000), FRAGILE, 1).unwrap();
    let out = run(
        &l.registry,
        &[
            ("a", 1.0),
            ("segv", 11.0),
            ("b", 2.0),
            ("exit", 3.0),
            ("c", 4.0),
        ],
        json!({"target_features": ["f"],
               "keys": [{"id": "a"}, {"id": "segv"}, {"id": "b"}, {"id": "exit"}, {"id": "c"}]}),
    );
    let o = &out[0].1;
    assert_eq!(float(&o[0], 2), 1.0);
    assert_eq!(float(&o[2], 2), 2.0);
    assert_eq!(float(&o[4], 2), 4.0);
    let segv = error(&o[1]);
    assert!(segv.contains("the Python worker running `udfs.py:f` for this key died (killed by signal 11 (SIGSEGV))"), "{segv}");
    let exit = error(&o[3]);
    assert!(exit.contains("died (exited with status 3)"), "{exit}");
}

#[test]
fn memory_past_the_limit_is_a_memory_error_for_that_key() {
    let config = Config {
        python: python(),
        workers: 1,
        memory_mib: 256,
        compile: false,
    };
    let l = load_with("memory", &fragile(5000), FRAGILE, config).unwrap();
    let out = run(
        &l.registry,
        &[("big", 99.0), ("ok", 5.0)],
        json!({"target_features": ["f"], "keys": [{"id": "big"}, {"id": "ok"}]}),
    );
    let e = error(&out[0].1[0]);
    assert!(
        e.contains("MemoryError") && e.contains("256 MiB, --python-memory-mib"),
        "{e}"
    );
    assert_eq!(float(&out[0].1[1], 2), 5.0);
    let out = run(
        &l.registry,
        &[("ok", 6.0)],
        json!({"target_features": ["f"], "keys": [{"id": "ok"}]}),
    );
    assert_eq!(float(&out[0].1[0], 2), 6.0, "the replaced worker serves");
}

#[test]
fn concurrent_requests_share_batches_and_a_slow_key_delays_no_other_worker() {
    let l = load("concurrent", &fragile(2000), FRAGILE, 2).unwrap();
    let registry = &l.registry;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                s.spawn(move || {
                    let v = if i == 0 { 7.0 } else { f64::from(i) + 0.5 };
                    let out = run(
                        registry,
                        &[("k", v)],
                        json!({"target_features": ["f"], "keys": [{"id": "k"}]}),
                    );
                    float(&out[0].1[0], 2)
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let expected = if i == 0 { 7.0 } else { i as f64 + 0.5 };
            assert_eq!(h.join().unwrap(), expected);
        }
    });
}

#[test]
fn results_that_are_not_records_fail_their_key_naming_the_field_and_what_came_back() {
    let module = r#"
import math
def f(test_feature, case='ok'):
    v = test_feature['value']
    return {
        'ok': {'value': v},
        'int': {'value': 3},
        'string': {'value': 'abc'},
        'none_result': None,
        'none_field': {'value': None},
        'nan': {'value': float('nan')},
        'inf': {'value': math.inf},
        'bool': {'value': True},
        'missing': {'id': 'x'},
        'unknown': {'value': 1.0, 'colour': 'red'},
        'list': [{'value': 1.0}, {'value': 2.0}],
        'bad_in_list': [{'value': 1.0}, {'value': 'x'}],
        'huge': {'value': 10 ** 400},
        'huge_string': {'id': 'x' * (2 << 20), 'value': 1.0},
        'deep': {'value': [[[[1.0]]]]},
        'object': object(),
        'timestamp': {'value': 1.0, 'timestamp': 'yesterday'},
        'surrogate': {'id': '\udc80', 'value': 1.0},
        'key_int': {'id': 5, 'value': 1.0},
    }[case]
"#;
    let s = spec(
        "  f:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {case: {type: string, default: ok}}
    udf: {python: {file: udfs.py, function: f}}
",
    );
    let l = load("results", &s, module, 1).unwrap();
    let case = |c: &str| {
        run(
            &l.registry,
            &[("k", 2.0)],
            json!({"target_features": ["f"], "keys": [{"id": "k"}], "udf_args": {"f": {"case": c}}}),
        )
        .remove(0)
        .1
        .remove(0)
    };
    assert_eq!(float(&case("ok"), 2), 2.0);
    assert_eq!(float(&case("int"), 2), 3.0, "an int widens to a float");
    let none_field = case("none_field");
    assert!(
        matches!(none_field, oka_core::execute::Outcome::Present(_)),
        "None is null"
    );
    match case("list") {
        oka_core::execute::Outcome::Present(rows) => assert_eq!(rows.len(), 2),
        other => panic!("{other:?}"),
    }
    for (c, expected) in [
        (
            "string",
            "`f` (udfs.py:f): field `value`: expected float, got str 'abc'",
        ),
        (
            "none_result",
            "`f` (udfs.py:f): returned None; return a dict of the output's fields (id, timestamp, value)",
        ),
        ("nan", "field `value`: NaN is not a value Oka answers"),
        ("inf", "field `value`: inf is not a value Oka answers"),
        ("bool", "field `value`: expected float, got bool True"),
        (
            "missing",
            "field `value` is missing from the result (it has: id)",
        ),
        (
            "unknown",
            "unknown field `colour` in the result (the output has: id, timestamp, value)",
        ),
        ("bad_in_list", "field `value`: expected float, got str 'x'"),
        ("huge", "is too large for a float"),
        (
            "huge_string",
            "field `id`: a string of 2097152 characters; Oka answers strings up to 1048576 characters",
        ),
        ("deep", "field `value`: expected float, got list"),
        ("object", "returned object <object object at"),
        (
            "timestamp",
            "field `timestamp`: expected a datetime, got str 'yesterday'",
        ),
        ("surrogate", "field `id`: the string holds a lone surrogate"),
        ("key_int", "field `id`: expected string, got int 5"),
    ] {
        let e = error(&case(c));
        assert!(e.contains(expected), "{c}: {e}");
    }
}

#[test]
fn fuzzed_results_are_each_a_record_or_a_clear_error_and_the_worker_goes_on() {
    let module = r#"
import math, random

def junk(rng, depth=0):
    kind = rng.randrange(16)
    if kind == 0: return None
    if kind == 1: return rng.random() * 10 ** rng.randrange(-5, 300)
    if kind == 2: return float(rng.choice(['nan', 'inf', '-inf']))
    if kind == 3: return rng.randrange(-2 ** 70, 2 ** 70)
    if kind == 4: return rng.choice([True, False])
    if kind == 5: return 'x' * rng.choice([0, 1, 100, 3 << 20])
    if kind == 6: return '\udc80' + 'y'
    if kind == 7: return b'bytes'
    if kind == 8: return {1, 2}
    if kind == 9: return object()
    if kind == 10: return complex(1, 2)
    if kind == 11:
        v = 1.0
        for _ in range(rng.choice([3, 500, 5000])):
            v = [v]
        return v
    if kind == 12 and depth < 3: return [junk(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 13 and depth < 3: return {str(i): junk(rng, depth + 1) for i in range(rng.randrange(3))}
    return rng.random()

def f(test_feature):
    rng = random.Random(int(test_feature['value']))
    shape = rng.randrange(6)
    if shape == 0:
        return junk(rng)
    if shape == 1:
        return [{'value': junk(rng)} for _ in range(rng.randrange(3))]
    if shape == 2:
        return {'value': junk(rng), 'id': junk(rng)}
    if shape == 3:
        return {'value': junk(rng), 'timestamp': junk(rng)}
    if shape == 4:
        return {rng.choice([1, 2.5, None, True, 'value', 'colour', b'value']): junk(rng)}
    return {'value': junk(rng)}
"#;
    let s = spec(
        "  f:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf: {python: {file: udfs.py, function: f}}
",
    );
    let l = load("fuzz", &s, module, 1).unwrap();
    let ids: Vec<String> = (0..400).map(|i| format!("k{i}")).collect();
    let data: Vec<(&str, f64)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i as f64))
        .collect();
    let keys: Vec<_> = ids.iter().map(|id| json!({"id": id})).collect();
    let out = run(
        &l.registry,
        &data,
        json!({"target_features": ["f"], "keys": keys}),
    );
    let (mut present, mut failed) = (0, 0);
    for (k, o) in out[0].1.iter().enumerate() {
        match o {
            oka_core::execute::Outcome::Present(rows) => {
                present += 1;
                for row in rows.iter() {
                    assert!(
                        matches!(row.columns[2], oka_core::Value::Float(f) if f.is_finite())
                            || row.columns[2].is_null(),
                        "key {k}: {row:?}"
                    );
                    assert!(
                        matches!(
                            row.columns[0],
                            oka_core::Value::String(_) | oka_core::Value::Null
                        ),
                        "key {k}: {row:?}"
                    );
                }
            }
            oka_core::execute::Outcome::Error(why) => {
                failed += 1;
                assert!(why.starts_with("`f` (udfs.py:f): "), "key {k}: {why}");
                assert!(
                    why.len() < 2_000,
                    "key {k}: a short message, not a dump ({} bytes)",
                    why.len()
                );
            }
            other => panic!("key {k}: {other:?}"),
        }
    }
    assert!(
        present > 20 && failed > 100,
        "{present} records, {failed} errors"
    );
    let again = run(
        &l.registry,
        &[("ok", 2.0)],
        json!({"target_features": ["f"], "keys": [{"id": "ok"}]}),
    );
    assert_eq!(again[0].1.len(), 1, "the worker goes on");
    assert_eq!(l.pool.unwrap().health().alive, 1);
}
