//! oka-server integration tests: the routers through `oneshot`, and real sockets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod connections;
mod console;
mod hostile;
mod http_errors;
mod openapi;
mod resilience;
mod serving;
mod sockets;
mod volga;
mod volga_dialect;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use http_body_util::BodyExt;
use oka_core::{EntityKey, Feature, KeyedRows, NativeUdfs, Query, Registry, Row, Timestamp, Value};
use oka_server::{AppState, Limits, Shared};
use oka_storage::{FeatureStore, MemoryStore, StoreError};
use tower::ServiceExt;

/// The seed spec (`examples/seed/spec.yaml`) plus the features these tests need.
pub const SPEC: &str = concat!(
    include_str!("../../../../examples/seed/spec.yaml"),
    r#"  plus_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf:
      expr: {value: "test_feature.value + 100.0"}
  chained_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [simple_feature]
    args: {offset: {type: float, default: 0.0}}
    udf:
      expr: {value: "simple_feature.value + offset"}
  ratio_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf:
      expr: {value: "double(100 / (int(test_feature.value) - 13))"}
"#
);

/// Held by tests that start real worker threads, which are found by name in
/// `/proc/self/task`: one such test at a time.
pub static WORKER_THREADS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A store that counts read calls and can be made to fail.
#[derive(Debug, Default)]
pub struct CountingStore {
    pub inner: MemoryStore,
    pub reads: AtomicUsize,
    pub down: std::sync::atomic::AtomicBool,
    /// Milliseconds each read sleeps (a test-only latency hook).
    pub delay_ms: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl FeatureStore for CountingStore {
    fn backend(&self) -> &'static str {
        "counting"
    }
    async fn read(
        &self,
        f: &Feature,
        keys: &[EntityKey],
        q: &Query,
    ) -> Result<KeyedRows, StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                oka_storage::StoreErrorKind::Unavailable,
                "connection refused (10.0.0.1:6379)",
            ));
        }
        self.inner.read(f, keys, q).await
    }
    async fn write(&self, f: &Feature, records: &[(EntityKey, Row)]) -> Result<(), StoreError> {
        self.inner.write(f, records).await
    }
    async fn health(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                oka_storage::StoreErrorKind::Unavailable,
                "down",
            ));
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Fixture {
    pub app: Router,
    pub admin: Router,
    pub store: Arc<CountingStore>,
    pub shared: Arc<Shared>,
}

/// A server over SPEC with test-id-0..99 written (value = i).
pub async fn fixture() -> Fixture {
    fixture_with(Limits::default()).await
}

pub async fn fixture_with(limits: Limits) -> Fixture {
    fixture_custom(|b| b.limits(limits)).await
}

/// A fixture whose shared state `customize` adjusts.
pub async fn fixture_custom(
    customize: impl FnOnce(oka_server::state::SharedBuilder) -> oka_server::state::SharedBuilder,
) -> Fixture {
    let registry = Arc::new(Registry::from_yaml("test.yaml", SPEC, &NativeUdfs::new()).unwrap());
    let store = Arc::new(CountingStore::default());
    let f = registry.feature(registry.feature_id("test_feature").unwrap());
    let rows: Vec<_> = (0..100)
        .map(|i| {
            let id = format!("test-id-{i}");
            let ts = Timestamp(1_744_970_400_000_000 + i);
            let key = EntityKey::encode(&[Value::from(id.as_str())]);
            (
                key,
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
        .collect();
    store.write(f, &rows).await.unwrap();
    let shared = customize(Shared::builder(registry, store.clone())).build();
    Fixture {
        app: oka_server::router(AppState::new(shared.clone(), 0)),
        admin: oka_server::admin_router(AppState::admin(shared.clone())),
        store,
        shared,
    }
}

pub async fn send(app: &Router, req: Request<Body>) -> (u16, Response<Body>) {
    let resp = app.clone().oneshot(req).await.unwrap();
    (resp.status().as_u16(), resp)
}

pub async fn body_json(resp: Response<Body>) -> serde_json::Value {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
}

pub async fn body_text(resp: Response<Body>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

pub fn post(uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(uri)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap()
}

pub fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}
