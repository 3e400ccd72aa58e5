//! Oka serving from Redis: one round trip per batched read, and outages.
//! (A test binary of its own: `INFO commandstats` is server-wide, and cargo runs
//! test binaries one at a time.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use fred::prelude::*;
use http_body_util::BodyExt;
use oka_core::{EntityKey, NativeUdfs, Registry, Row, Timestamp, Value};
use oka_redis::{RedisOptions, RedisStore};
use oka_server::{AppState, Limits, Shared};
use oka_storage::FeatureStore;
use tower::ServiceExt;

const SPEC: &str = r#"
version: 1
entities:
  TestEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
features:
  rt_feature:
    kind: pipeline
    entity: TestEntity
  rt_simple:
    kind: on_demand
    entity: TestEntity
    dependencies: [rt_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {value: "rt_feature.value * multiplier"}
  rt_plus:
    kind: on_demand
    entity: TestEntity
    dependencies: [rt_feature]
    udf:
      expr: {value: "rt_feature.value + 1.0"}
"#;

async fn app_over(store: Arc<RedisStore>, n: usize) -> (axum::Router, axum::Router) {
    let registry = Arc::new(Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap());
    let f = registry.feature(registry.feature_id("rt_feature").unwrap());
    let now = Timestamp::now();
    let rows: Vec<_> = (0..n)
        .map(|i| {
            let id = format!("rt-{i}");
            (
                EntityKey::encode(&[Value::from(id.as_str())]),
                Row::new(
                    now,
                    vec![
                        Value::from(id.as_str()),
                        Value::Timestamp(now),
                        Value::Float(i as f64),
                    ],
                ),
            )
        })
        .collect();
    store.write(f, &rows).await.unwrap();
    let shared = Shared::new(registry, store, Limits::default());
    (
        oka_server::router(AppState::new(shared.clone(), 0)),
        oka_server::admin_router(AppState::new(shared, 1)),
    )
}

async fn call(app: &axum::Router, method: &str, uri: &str, body: &str) -> (u16, serde_json::Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body.to_owned()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// Calls per command since the server started, from `INFO commandstats`.
async fn command_calls(client: &Client) -> BTreeMap<String, u64> {
    let info: String = client
        .info(Some(fred::types::InfoKind::CommandStats))
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

#[tokio::test]
async fn a_100_key_request_is_one_command() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let store = Arc::new(common::connect(&url).await);
    let (app, _) = app_over(store, 100).await;
    let observer = Client::new(Config::from_url(&url).unwrap(), None, None, None);
    observer.init().await.unwrap();

    let keys: Vec<_> = (0..100)
        .map(|i| serde_json::json!({"id": format!("rt-{i}")}))
        .collect();
    let body =
        serde_json::json!({"target_features": ["rt_simple", "rt_plus"], "keys": keys}).to_string();
    let before = command_calls(&observer).await;
    let (status, out) = call(&app, "POST", "/v1/features", &body).await;
    let after = command_calls(&observer).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["results"]["rt_simple"][99][0]["value"], 99.0);
    assert_eq!(out["results"]["rt_plus"][0][0]["value"], 1.0);

    let mut delta: BTreeMap<String, u64> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d > 0)
        .collect();
    delta.remove("info");
    assert_eq!(
        delta,
        BTreeMap::from([("mget".to_owned(), 1)]),
        "commands for one 100-key, two-feature request"
    );
}

#[tokio::test]
async fn outage_is_503_and_recovers_without_restart() {
    if common::redis_url().is_none() {
        return;
    }
    let mut redis = common::OwnRedis::start();
    let options = RedisOptions {
        command_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let store = Arc::new(RedisStore::connect(&redis.url(), options).await.unwrap());
    let (app, admin) = app_over(store, 10).await;
    let req = r#"{"target_features": ["rt_simple"], "keys": [{"id": "rt-3"}], "udf_args": {"rt_simple": {"multiplier": 2}}}"#;
    let (status, out) = call(&app, "POST", "/v1/features", req).await;
    assert_eq!(
        (status, out["results"]["rt_simple"][0][0]["value"].clone()),
        (200, serde_json::json!(6.0))
    );

    redis.stop();
    let started = Instant::now();
    let (status, out) = call(&app, "POST", "/v1/features", req).await;
    assert_eq!(status, 503, "{out}");
    assert_eq!(out["error"]["code"], "store_unavailable");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "fails fast, took {:?}",
        started.elapsed()
    );
    let (status, _) = call(&admin, "GET", "/readyz", "").await;
    assert_eq!(status, 503);

    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, out) = call(&app, "POST", "/v1/features", req).await;
        if status == 200 {
            // The restarted server has no data (no persistence): the key is missing.
            assert_eq!(out["statuses"]["rt_simple"][0], "missing");
            break;
        }
        assert!(Instant::now() < deadline, "did not recover: {status} {out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every pooled connection reconnects by itself; readiness follows.
    while call(&admin, "GET", "/readyz", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "/readyz did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
