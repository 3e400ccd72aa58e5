//! A window aggregate, declarative vs CEL: one key whose 1-hour `range` window
//! holds 1,000 events, six outputs (count, sum, mean, p90, stddev, newest time)
//! computed by the `aggregate` form and by the same outputs as CEL expressions
//! with Oka's `math.*` functions. The store read is not measured (the rows are
//! handed to the executor), so the two differ only in the evaluation.
//!
//! `cargo bench -p oka-benches --bench aggregate`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oka_core::execute::{Fetched, execute};
use oka_core::{FeatureRequest, NativeUdfs, Registry, Row, Timestamp, Value};

const SPEC: &str = r#"
version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float}
features:
  txn:
    kind: pipeline
    entity: Txn
    history: 1000
  declarative:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 3600}
      outputs:
        n: count
        total: {sum: amount}
        mean: {mean: amount}
        p90: {percentile: amount, p: 0.9}
        sd: {stddev: amount}
        last_seen: {max: ts}
  cel:
    kind: on_demand
    dependencies: [{feature: txn, query: range, lookback_s: 3600}]
    output: {fields: {n: int, total: float, mean: float, p90: float, sd: float, last_seen: timestamp}}
    udf:
      expr:
        n: "size(txn)"
        total: "math.sum(txn.map(r, r.amount))"
        mean: "math.mean(txn.map(r, r.amount))"
        p90: "math.percentile(txn.map(r, r.amount), 0.9)"
        sd: "math.stddev(txn.map(r, r.amount))"
        last_seen: "math.max(txn.map(r, r.ts))"
"#;

const NOW: i64 = 1_800_000_000_000_000;

/// 1,000 events 3.6 s apart: the last hour.
fn window() -> Vec<Row> {
    (0..1000i64)
        .map(|i| {
            let ts = Timestamp(NOW - (1000 - i) * 3_600_000);
            let amount = ((i * 7919) % 10_000) as f64 / 100.0;
            Row::new(
                ts,
                vec![Value::from("u"), Value::Timestamp(ts), Value::Float(amount)],
            )
        })
        .collect()
}

fn aggregate(c: &mut Criterion) {
    let r = Registry::from_yaml("bench.yaml", SPEC, &NativeUdfs::new()).unwrap();
    let rows = window();
    let mut g = c.benchmark_group("aggregate_1000_events");
    g.throughput(Throughput::Elements(1));
    for target in ["declarative", "cel"] {
        let body = format!(r#"{{"target_features":["{target}"],"keys":[{{"user_id":"u"}}]}}"#);
        let req: FeatureRequest = serde_json::from_str(&body).unwrap();
        let prepared = r.prepare(&req, Timestamp(NOW)).unwrap();
        let fetched = Fetched::read_all(&prepared, |_| vec![rows.clone()]).unwrap();
        g.bench_function(format!("{target}/1_key"), |b| {
            b.iter(|| black_box(execute(&r, &prepared, black_box(&fetched), None).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, aggregate);
criterion_main!(benches);
