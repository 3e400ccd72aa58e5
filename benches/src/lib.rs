//! Fixtures shared by Oka's benchmarks: the seed spec, a populated in-memory store,
//! and the seed request bodies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use oka_core::{EntityKey, NativeUdfs, Registry, Row, Timestamp, Value};
use oka_server::{AppState, Limits, Shared};
use oka_storage::{FeatureStore, MemoryStore};

/// The allocator the `oka` binary uses, so in-process numbers match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The seed spec (`examples/seed/spec.yaml`: `test_feature` and
/// `simple_feature = value × multiplier`) plus a chained feature.
pub const SPEC: &str = concat!(
    include_str!("../../examples/seed/spec.yaml"),
    r#"  chained_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [simple_feature]
    args: {offset: {type: float, default: 0.0}}
    udf:
      expr: {value: "simple_feature.value + offset"}
"#
);

/// The seed registry.
pub fn registry() -> Arc<Registry> {
    Arc::new(Registry::from_yaml("bench", SPEC, &NativeUdfs::new()).unwrap())
}

/// Seed records `test-id-0 … test-id-{n-1}` with value i, all at event time `ts`.
pub fn seed_rows(n: usize, ts: Timestamp) -> Vec<(EntityKey, Row)> {
    (0..n)
        .map(|i| {
            let id = format!("test-id-{i}");
            (
                EntityKey::encode(&[Value::from(id.as_str())]),
                Row::new(
                    ts,
                    vec![
                        Value::from(id.as_str()),
                        Value::Timestamp(ts),
                        Value::Float(i as f64),
                    ],
                ),
            )
        })
        .collect()
}

/// Worker state over an in-memory store holding `test-id-0 … test-id-{n-1}`.
pub async fn state(n: usize) -> AppState {
    let registry = registry();
    let store = Arc::new(MemoryStore::new());
    let f = registry.feature(registry.feature_id("test_feature").unwrap());
    store
        .write(f, &seed_rows(n, Timestamp::now()))
        .await
        .unwrap();
    AppState::new(Shared::new(registry, store, Limits::default()), 0)
}

/// A seed request body for `keys` keys of `target`.
pub fn request(target: &str, keys: usize) -> Vec<u8> {
    let keys: Vec<_> = (0..keys)
        .map(|i| serde_json::json!({"id": format!("test-id-{i}")}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "target_features": [target],
        "keys": keys,
        "udf_args": {"simple_feature": {"multiplier": 2.0}},
    }))
    .unwrap()
}

/// Serves one request body in process (parse → store → UDFs → encode) on `rt`.
pub fn serve_once(rt: &tokio::runtime::Runtime, state: &AppState, body: &[u8]) -> Vec<u8> {
    let served = rt.block_on(oka_server::api::oka::features(
        state,
        body,
        oka_server::serve::Call::now(),
    ));
    served.unwrap().0
}
