//! Aggregations: the CEL functions against hand-computed values, and the
//! declarative `aggregate` form against the equivalent CEL over the same windows.

use std::sync::Arc;

use oka_core::registry::{FeatureKind, UdfImpl};
use oka_core::udf::{Input, UdfCall};
use oka_core::{NativeUdfs, Registry, Row, Timestamp, Value};

const NOW: i64 = 1_800_000_000_000_000;

/// A window of transactions: `amount` (float), `n` (int), per record.
const SPEC: &str = r#"
version: 1
entities:
  Txn:
    keys: {user: string}
    timestamp: ts
    fields: {amount: float, n: int}
features:
  txn:
    kind: pipeline
    entity: Txn
  declarative:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 3600}
      outputs:
        count: count
        amounts: {count: amount}
        total: {sum: amount}
        total_n: {sum: n}
        mean: {mean: amount}
        mean_n: {mean: n}
        low: {min: amount}
        high_n: {max: n}
        sd: {stddev: amount}
        p90: {percentile: amount, p: 0.9}
        decayed: {ewma: amount, half_life_s: 600}
        last_seen: {max: ts}
        first_n: {first: n}
        last_amount: {last: amount}
  cel:
    kind: on_demand
    dependencies: [{feature: txn, query: range, lookback_s: 3600}]
    output:
      fields:
        count: int
        amounts: int
        total: float
        total_n: int
        mean: float
        mean_n: float
        low: float
        high_n: int
        sd: float
        p90: float
        decayed: float
        last_seen: timestamp
        first_n: int
        last_amount: float
    udf:
      expr:
        count: "size(txn)"
        amounts: "size(txn.filter(r, r.amount != null))"
        total: "math.sum(txn.map(r, r.amount))"
        total_n: "math.sum(txn.map(r, r.n))"
        mean: "math.mean(txn.map(r, r.amount))"
        mean_n: "math.mean(txn.map(r, r.n))"
        low: "math.min(txn.map(r, r.amount))"
        high_n: "math.max(txn.map(r, r.n))"
        sd: "math.stddev(txn.map(r, r.amount))"
        p90: "math.percentile(txn.map(r, r.amount), 0.9)"
        decayed: "math.ewma(txn.map(r, r.amount), txn.map(r, r.ts), duration('600s'), now)"
        last_seen: "math.max(txn.map(r, r.ts))"
        first_n: "size(txn.filter(r, r.n != null)) == 0 ? null : txn.filter(r, r.n != null)[0].n"
        last_amount: "size(txn.filter(r, r.amount != null)) == 0 ? null : txn.filter(r, r.amount != null)[size(txn.filter(r, r.amount != null)) - 1].amount"
"#;

fn registry(extra: &str) -> Registry {
    Registry::from_yaml("agg.yaml", &format!("{SPEC}{extra}"), &NativeUdfs::new()).unwrap()
}

fn row(secs_ago: i64, amount: Value, n: Value) -> Row {
    let ts = Timestamp(NOW - secs_ago * 1_000_000);
    Row::new(ts, vec![Value::from("u"), Value::Timestamp(ts), amount, n])
}

/// Runs feature `name` over `window` for one key; the output row's value
/// columns by name, or the error text.
fn run(r: &Registry, name: &str, window: &[Row]) -> Result<Vec<(String, Value)>, String> {
    let f = r.feature(r.feature_id(name).unwrap());
    let FeatureKind::OnDemand {
        input_names,
        input_entities,
        arg_names,
        udf,
        ..
    } = &f.kind
    else {
        panic!("{name} is not on-demand")
    };
    let inputs = [Input::Many(Arc::from(window))];
    let key = [Value::from("u")];
    let call = UdfCall {
        feature: &f.name,
        input_names,
        input_entities,
        inputs: &inputs,
        arg_names,
        args: &[],
        output: &f.entity,
        key: &key,
        now: Timestamp(NOW),
    };
    let rows = match udf {
        UdfImpl::Cel(c) => c.call(&call),
        UdfImpl::Aggregate(a) => a.call(&call),
        UdfImpl::Native { .. } | UdfImpl::Batch(_) => panic!("not an aggregation"),
    }
    .map_err(|e| e.to_string())?;
    let e = &f.entity;
    Ok((e.columns.iter().zip(rows[0].columns.iter()))
        .skip(e.key_index.len() + 1)
        .map(|(c, v)| (c.name.to_string(), v.clone()))
        .collect())
}

/// Equal, with NaN equal to NaN (the same bits for floats).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

/// A small deterministic generator (no dependency for the tests).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

#[test]
fn declarative_and_cel_agree_on_every_window() {
    let r = registry("");
    let mut rng = Lcg(7);
    let mut compared = 0;
    for len in [0usize, 1, 2, 3, 10, 57, 1000] {
        for _ in 0..5 {
            let mut window: Vec<Row> = (0..len)
                .map(|i| {
                    let amount = match rng.next() % 10 {
                        0 => Value::Null,
                        1 => Value::Float(-(rng.next() as f64) / 7.0),
                        _ => Value::Float((rng.next() % 100_000) as f64 / 100.0),
                    };
                    let n = match rng.next() % 8 {
                        0 => Value::Null,
                        _ => Value::Int((rng.next() % 1000) as i64 - 300),
                    };
                    row((len - i) as i64 * 3, amount, n)
                })
                .collect();
            window.sort_by_key(|r| r.event_time);
            let declarative = run(&r, "declarative", &window).unwrap();
            let cel = run(&r, "cel", &window).unwrap();
            assert_eq!(declarative.len(), cel.len());
            for ((name, d), (_, c)) in declarative.iter().zip(&cel) {
                assert!(
                    same(d, c),
                    "window of {len}: `{name}` declarative {d:?}, CEL {c:?}"
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 7 * 5 * 14);
}

#[test]
fn declarative_over_a_hand_computed_window() {
    let r = registry("");
    let window = vec![
        row(1200, Value::Float(2.0), Value::Int(3)),
        row(600, Value::Float(4.0), Value::Null),
        row(600, Value::Null, Value::Int(-1)),
        row(0, Value::Float(6.0), Value::Int(10)),
    ];
    let got = run(&r, "declarative", &window).unwrap();
    let get = |name: &str| got.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(get("count"), Value::Int(4));
    assert_eq!(get("amounts"), Value::Int(3));
    assert_eq!(get("total"), Value::Float(12.0));
    assert_eq!(get("total_n"), Value::Int(12));
    assert_eq!(get("mean"), Value::Float(4.0));
    assert_eq!(get("mean_n"), Value::Float(4.0));
    assert_eq!(get("low"), Value::Float(2.0));
    assert_eq!(get("high_n"), Value::Int(10));
    // Population: deviations −2, 0, 2 → variance 8/3.
    assert_eq!(get("sd"), Value::Float((8.0f64 / 3.0).sqrt()));
    // Sorted 2 4 6: h = 2 × 0.9 = 1.8 → 4 + 0.8 × 2 = 5.6.
    let Value::Float(p90) = get("p90") else {
        panic!()
    };
    assert!((p90 - 5.6).abs() < 1e-12, "{p90}");
    // Half-lives 2, 1, 0 ago: 2/4 + 4/2 + 6 = 8.5.
    assert_eq!(get("decayed"), Value::Float(8.5));
    assert_eq!(get("last_seen"), Value::Timestamp(Timestamp(NOW)));
    assert_eq!(get("first_n"), Value::Int(3));
    assert_eq!(get("last_amount"), Value::Float(6.0));
    // An empty window: counts and sums 0, the rest null.
    let empty = run(&r, "declarative", &[]).unwrap();
    for (name, v) in empty {
        let want = match name.as_str() {
            "count" | "amounts" | "total_n" => Value::Int(0),
            "total" => Value::Float(0.0),
            _ => Value::Null,
        };
        assert_eq!(v, want, "{name}");
    }
}

/// One CEL expression over the window as feature `probe`'s `v` field of `ty`.
fn cel(expr: &str, ty: &str, window: &[Row]) -> Result<Value, String> {
    let extra = format!(
        "  probe:\n    kind: on_demand\n    dependencies: [{{feature: txn, query: last_n, n: 1000}}]\n    output: {{fields: {{v: {ty}}}}}\n    udf: {{expr: {{v: \"{expr}\"}}}}\n"
    );
    let r = Registry::from_yaml("agg.yaml", &format!("{SPEC}{extra}"), &NativeUdfs::new())
        .map_err(|e| e.to_string())?;
    run(&r, "probe", window).map(|v| v[0].1.clone())
}

#[test]
fn cel_functions_against_hand_computed_values() {
    let w = vec![
        row(3, Value::Float(1.5), Value::Int(2)),
        row(2, Value::Float(-0.5), Value::Int(4)),
        row(1, Value::Float(5.0), Value::Int(9)),
    ];
    let f = |e: &str| cel(e, "float", &w).unwrap();
    let i = |e: &str| cel(e, "int", &w).unwrap();
    assert_eq!(f("math.sum(txn.map(r, r.amount))"), Value::Float(6.0));
    assert_eq!(i("math.sum(txn.map(r, r.n))"), Value::Int(15));
    assert_eq!(f("math.mean(txn.map(r, r.amount))"), Value::Float(2.0));
    assert_eq!(f("math.mean(txn.map(r, r.n))"), Value::Float(5.0));
    assert_eq!(f("math.min(txn.map(r, r.amount))"), Value::Float(-0.5));
    assert_eq!(i("math.max(txn.map(r, r.n))"), Value::Int(9));
    // Ints 2 4 9: mean 5, deviations −3 −1 4 → variance 26/3.
    assert_eq!(
        f("math.stddev(txn.map(r, r.n))"),
        Value::Float((26.0f64 / 3.0).sqrt())
    );
    assert_eq!(
        f("math.percentile(txn.map(r, r.n), 0.5)"),
        Value::Float(4.0)
    );
    assert_eq!(f("math.percentile(txn.map(r, r.n), 1)"), Value::Float(9.0));
    assert_eq!(
        f("math.percentile(txn.map(r, r.n), 0.25)"),
        Value::Float(3.0)
    );
    // Composes with filter: the positive amounts 1.5 and 5.
    assert_eq!(
        f("math.mean(txn.filter(r, r.amount > 0.0).map(r, r.amount))"),
        Value::Float(3.25)
    );
    // Literal lists, a single element, empty lists.
    assert_eq!(f("math.sum([0.25])"), Value::Float(0.25));
    assert_eq!(i("math.sum([])"), Value::Int(0));
    assert_eq!(f("math.mean([])"), Value::Null);
    assert_eq!(f("math.stddev([])"), Value::Null);
    assert_eq!(f("math.percentile([], 0.5)"), Value::Null);
    assert_eq!(f("math.max([1.0, null, 3.0])"), Value::Float(3.0));
    // ewma: 1 s ago with a 1 s half-life weighs ½.
    assert_eq!(
        f("math.ewma([4.0, 2.0], [now - duration('1s'), now], duration('1s'), now)"),
        Value::Float(4.0)
    );
    // NaN propagates (JSON shows it as null).
    let Value::Float(nan) = f("math.sum([1.0, double('NaN')])") else {
        panic!()
    };
    assert!(nan.is_nan());
}

#[test]
fn cel_function_errors() {
    let w = vec![
        row(1, Value::Float(1.0), Value::Int(i64::MAX)),
        row(0, Value::Float(1.0), Value::Int(1)),
    ];
    // At load: types and literal parameters.
    let load = |e: &str| cel(e, "float", &[]).unwrap_err();
    assert_eq!(
        load("math.sum([1, 2.0])"),
        "agg.yaml: features.probe.udf.expr.v: type mismatch in `math.sum([1, 2.0])`: math.sum: the list mixes int and float values; convert them with double() first"
    );
    assert_eq!(
        load("math.mean(['a'])"),
        "agg.yaml: features.probe.udf.expr.v: type mismatch in `math.mean(['a'])`: math.mean: takes a list of int or float; element 0 is string"
    );
    assert_eq!(
        load("math.percentile(txn.map(r, r.amount), 1.5)"),
        "agg.yaml: features.probe.udf.expr.v: type mismatch in `math.percentile(txn.map(r, r.amount), 1.5)`: math.percentile: p must be between 0 and 1 (0.9 for the 90th percentile), got 1.5"
    );
    assert_eq!(
        load("math.ewma([1.0], [now], duration('0s'), now)"),
        "agg.yaml: features.probe.udf.expr.v: type mismatch in `math.ewma([1.0], [now], duration('0s'), now)`: math.ewma: the half-life must be a positive duration"
    );
    // At request time, for the key: the data's own problems.
    assert_eq!(
        cel("math.sum(txn.map(r, r.n))", "int", &w).unwrap_err(),
        "math.sum: the sum overflows int (±9.2e18); convert the values with double() first"
    );
    assert_eq!(
        cel("math.ewma(txn.map(r, r.amount), txn.filter(r, r.n < 5).map(r, r.ts), duration('1s'), now)", "float", &w)
            .unwrap_err(),
        "math.ewma: values and timestamps have different lengths (2 and 1)"
    );
}
