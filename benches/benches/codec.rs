//! Record encodings for networked stores: Oka's MessagePack codec against JSON
//! (an object of columns plus the event time), for the seed row and a wide row.
//! Prints the encoded sizes once.
//!
//! `cargo bench -p oka-benches --bench codec`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use oka_core::registry::Entity;
use oka_core::{NativeUdfs, Registry, Row, Timestamp, Value};
use oka_storage::codec;

const SPEC: &str = r#"
version: 1
entities:
  Seed:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
  Wide:
    keys: {user_id: string, merchant_id: int}
    timestamp: ts
    fields: {a: float, b: float, c: float, d: int, e: int, f: string, g: bool, h: list<float>, i: timestamp, j: string}
features:
  seed: {kind: pipeline, entity: Seed}
  wide: {kind: pipeline, entity: Wide}
"#;

fn rows() -> Vec<(&'static str, std::sync::Arc<Entity>, Row)> {
    let r = Registry::from_yaml("bench", SPEC, &NativeUdfs::new()).unwrap();
    let ts = Timestamp(1_744_970_400_123_456);
    let seed = Row::new(
        ts,
        vec![
            Value::from("test-id-4242"),
            Value::Timestamp(ts),
            Value::Float(4242.0),
        ],
    );
    let wide = Row::new(
        ts,
        vec![
            Value::from("user-81723"),
            Value::Int(99_123),
            Value::Timestamp(ts),
            Value::Float(0.125),
            Value::Float(-3.5),
            Value::Float(1e9),
            Value::Int(17),
            Value::Int(-4),
            Value::from("category-electronics"),
            Value::Bool(true),
            Value::List(
                (0..8)
                    .map(|i| Value::Float(f64::from(i) * 0.5))
                    .collect::<Vec<_>>()
                    .into(),
            ),
            Value::Timestamp(Timestamp(1_700_000_000_000_000)),
            Value::from("DE"),
        ],
    );
    vec![
        ("seed", std::sync::Arc::clone(&r.feature(0).entity), seed),
        ("wide", std::sync::Arc::clone(&r.feature(1).entity), wide),
    ]
}

fn json_encode(e: &Entity, row: &Row) -> Vec<u8> {
    let cols: serde_json::Map<String, serde_json::Value> = e
        .columns
        .iter()
        .zip(row.columns.iter())
        .map(|(c, v)| (c.name.to_string(), v.to_json()))
        .collect();
    serde_json::to_vec(&serde_json::json!({"t": row.event_time.0, "c": cols})).unwrap()
}

fn json_decode(e: &Entity, bytes: &[u8]) -> Row {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let cols = v["c"].as_object().unwrap();
    let columns: Vec<Value> = e
        .columns
        .iter()
        .map(|c| {
            cols.get(&*c.name)
                .map(|j| c.ty.from_json(j).unwrap())
                .unwrap_or(Value::Null)
        })
        .collect();
    Row::new(Timestamp(v["t"].as_i64().unwrap()), columns)
}

fn codecs(c: &mut Criterion) {
    for (name, entity, row) in rows() {
        let mp = codec::encode_row(&entity, &row);
        let js = json_encode(&entity, &row);
        assert_eq!(codec::decode_row(&entity, &mp).unwrap(), row);
        assert_eq!(json_decode(&entity, &js), row);
        println!(
            "{name} row: msgpack {} bytes, json {} bytes",
            mp.len(),
            js.len()
        );
        let mut g = c.benchmark_group(format!("codec/{name}"));
        g.bench_function("msgpack/encode", |b| {
            b.iter(|| codec::encode_row(&entity, black_box(&row)))
        });
        g.bench_function("json/encode", |b| {
            b.iter(|| json_encode(&entity, black_box(&row)))
        });
        g.bench_function("msgpack/decode", |b| {
            b.iter(|| codec::decode_row(&entity, black_box(&mp)).unwrap())
        });
        g.bench_function("json/decode", |b| {
            b.iter(|| json_decode(&entity, black_box(&js)))
        });
        g.finish();
    }
}

criterion_group!(benches, codecs);
criterion_main!(benches);
