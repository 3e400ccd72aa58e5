//! The request hot path, in process: parse + plan lookup + validation, UDF evaluation
//! per key, and the whole request (parse → memory store → UDFs → encode).
//!
//! `cargo bench -p oka-benches --bench hot_path`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oka_core::execute::{Fetched, execute};
use oka_core::{FeatureRequest, Row, Timestamp, Value};
use std::hint::black_box;

fn prepare(c: &mut Criterion) {
    let r = oka_benches::registry();
    let mut g = c.benchmark_group("prepare");
    for keys in [1usize, 100] {
        let body = oka_benches::request("simple_feature", keys);
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function(format!("parse+plan+validate/{keys}_keys"), |b| {
            b.iter(|| {
                let req: FeatureRequest = serde_json::from_slice(black_box(&body)).unwrap();
                black_box(r.prepare(&req, Timestamp(0)).unwrap())
            })
        });
    }
    g.finish();
}

fn udfs(c: &mut Criterion) {
    let r = oka_benches::registry();
    let mut g = c.benchmark_group("udf");
    for (target, keys) in [
        ("simple_feature", 1usize),
        ("simple_feature", 100),
        ("chained_feature", 1),
    ] {
        let req: FeatureRequest =
            serde_json::from_slice(&oka_benches::request(target, keys)).unwrap();
        let prepared = r.prepare(&req, Timestamp(0)).unwrap();
        let rows: Vec<Vec<Row>> = (0..keys)
            .map(|i| {
                let ts = Timestamp(1);
                vec![Row::new(
                    ts,
                    vec![
                        Value::from(format!("test-id-{i}").as_str()),
                        Value::Timestamp(ts),
                        Value::Float(i as f64),
                    ],
                )]
            })
            .collect();
        let fetched = Fetched::read_all(&prepared, |_| rows.clone()).unwrap();
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function(format!("cel/{target}/{keys}_keys"), |b| {
            b.iter(|| black_box(execute(&r, &prepared, black_box(&fetched), None).unwrap()))
        });
    }
    g.finish();
}

fn whole_request(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = rt.block_on(oka_benches::state(10_000));
    let mut g = c.benchmark_group("request");
    for keys in [1usize, 100] {
        let body = oka_benches::request("simple_feature", keys);
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function(format!("memory/simple_feature/{keys}_keys"), |b| {
            b.iter(|| oka_benches::serve_once(&rt, &state, black_box(&body)))
        });
    }
    g.finish();
}

criterion_group!(benches, prepare, udfs, whole_request);
criterion_main!(benches);
