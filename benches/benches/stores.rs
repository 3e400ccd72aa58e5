//! Against real networked stores: Redis (`OKA_BENCH_REDIS_URL`, e.g.
//! `redis://127.0.0.1:6379`) and ScyllaDB/Cassandra (`OKA_BENCH_CQL_URL`, e.g.
//! `cassandra://127.0.0.1:9042/oka_bench`; the schema is created if missing), each
//! only when its variable is set:
//! - write throughput of the batched write path `oka ingest` uses, for 10,000 seed
//!   records at batch sizes 1, 10, 100 and 1000;
//! - latency of a whole 1-key and 100-key seed request (parse → store → UDF →
//!   encode), in process.
//!
//! `OKA_BENCH_REDIS_URL=… OKA_BENCH_CQL_URL=… cargo bench -p oka-benches --bench stores`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oka_core::{EntityKey, Row, Timestamp};
use oka_ingest::{WritePath, WriterConfig};
use oka_redis::{RedisOptions, RedisStore};
use oka_scylla::{ScyllaOptions, ScyllaStore};
use oka_server::metrics::Metrics;
use oka_server::{AppState, Limits, Shared};
use oka_storage::FeatureStore;

const ROWS: usize = 10_000;

/// The seed rows, `tick` µs after now (each iteration writes new versions).
fn seed_rows(tick: i64) -> Vec<(EntityKey, Row)> {
    oka_benches::seed_rows(ROWS, Timestamp(Timestamp::now().0 + tick))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn redis(c: &mut Criterion) {
    let Ok(url) = std::env::var("OKA_BENCH_REDIS_URL") else {
        eprintln!("OKA_BENCH_REDIS_URL is not set; skipping the Redis benches");
        return;
    };
    let rt = runtime();
    let store = rt
        .block_on(RedisStore::connect(&url, RedisOptions::default()))
        .unwrap();
    bench_store(c, &rt, Arc::new(store));
}

fn cql(c: &mut Criterion) {
    let Ok(url) = std::env::var("OKA_BENCH_CQL_URL") else {
        eprintln!("OKA_BENCH_CQL_URL is not set; skipping the ScyllaDB/Cassandra benches");
        return;
    };
    let rt = runtime();
    let options = ScyllaOptions {
        create_schema: true,
        ..Default::default()
    };
    let store = rt.block_on(ScyllaStore::connect(&url, options)).unwrap();
    bench_store(c, &rt, Arc::new(store));
}

/// Ingest throughput and whole-request latency of one store; groups are named by
/// the store's backend.
fn bench_store(c: &mut Criterion, rt: &tokio::runtime::Runtime, store: Arc<dyn FeatureStore>) {
    let backend = store.backend();
    let registry = oka_benches::registry();
    let id = registry.feature_id("test_feature").unwrap();

    let mut g = c.benchmark_group(format!("{backend}/ingest_10k"));
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROWS as u64));
    for batch in [1usize, 10, 100, 1000] {
        let config = WriterConfig {
            batch_size: batch,
            ..WriterConfig::default()
        };
        let writer = rt.block_on(async {
            WritePath::spawn(
                store.clone(),
                Arc::new(Metrics::new(backend)),
                config.clone(),
            )
        });
        let mut tick = 0;
        g.bench_function(format!("batch_{batch}"), |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    tick += 1;
                    let rows = seed_rows(tick);
                    let started = Instant::now();
                    rt.block_on(async {
                        let mut pending = std::collections::VecDeque::new();
                        let mut rows = rows.into_iter().peekable();
                        while rows.peek().is_some() || !pending.is_empty() {
                            while pending.len() < config.max_in_flight * 2 && rows.peek().is_some()
                            {
                                let chunk: Vec<_> = rows.by_ref().take(batch).collect();
                                let (w, r) = (writer.clone(), Arc::clone(&registry));
                                pending.push_back(tokio::spawn(async move {
                                    w.write(&r, id, chunk).await
                                }));
                            }
                            if let Some(job) = pending.pop_front() {
                                job.await.unwrap().unwrap();
                            }
                        }
                    });
                    total += started.elapsed();
                }
                total
            })
        });
    }
    g.finish();

    let state = rt.block_on(async {
        AppState::new(
            Shared::new(registry.clone(), store.clone(), Limits::default()),
            0,
        )
    });
    let mut g = c.benchmark_group(format!("{backend}/request"));
    for keys in [1usize, 100] {
        let body = oka_benches::request("simple_feature", keys);
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function(format!("simple_feature/{keys}_keys"), |b| {
            b.iter(|| oka_benches::serve_once(rt, &state, black_box(&body)))
        });
    }
    g.finish();
}

criterion_group!(benches, redis, cql);
criterion_main!(benches);
