//! Serving on a live Volga Redis (`redis://…?layout=volga`): hashes written the way
//! Volga's pipeline writes them (`HSET volga:hot_feature:{feature}:{json keys}
//! feature_name … keys_json … values_json …`) are served through Oka's API, one
//! Redis round trip per request; history reads and writes are refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::Body;
use axum::http::Request;
use fred::prelude::*;
use http_body_util::BodyExt;
use oka_core::{EntityKey, NativeUdfs, Query, Registry, Row, Timestamp, Value};
use oka_redis::{RedisOptions, RedisStore};
use oka_server::{AppState, Limits, Shared};
use oka_storage::{FeatureStore, StoreErrorKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

const SPEC: &str = r#"
version: 1
entities:
  VlEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
    order: [id, value, timestamp]
  VlPair:
    keys: {user: int, merchant: string}
    timestamp: ts
    fields: {n: int, tags: list<string>}
features:
  vl_feature: {kind: pipeline, entity: VlEntity}
  vl_pair: {kind: pipeline, entity: VlPair}
  vl_simple:
    kind: on_demand
    entity: VlEntity
    dependencies: [vl_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {value: "vl_feature.value * multiplier"}
"#;

/// Python's `json.dumps` of a one-field string key, as Volga's writer makes it.
fn id_json(id: &str) -> String {
    format!(r#"{{"id": "{id}"}}"#)
}

/// Writes one hash as Volga's `RedisHotFeatureStorageApi.insert` does.
async fn volga_insert(client: &Client, feature: &str, sorted_keys: &str, keys: &str, values: &str) {
    let key = format!("volga:hot_feature:{feature}:{sorted_keys}");
    let _: () = client
        .hset(
            key,
            [
                ("feature_name", feature),
                ("keys_json", keys),
                ("values_json", values),
            ],
        )
        .await
        .unwrap();
}

/// A TCP proxy to Redis that counts round trips: a client send that follows a
/// server reply (or starts the connection) begins a new one.
struct TurnCounter {
    port: u16,
    turns: Arc<AtomicU64>,
}

impl TurnCounter {
    async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let turns = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&turns);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let replied = Arc::new(AtomicBool::new(true));
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let (turns, r1) = (Arc::clone(&counted), Arc::clone(&replied));
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        if r1.swap(false, Ordering::SeqCst) {
                            turns.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = sr.read(&mut buf).await {
                        replied.store(true, Ordering::SeqCst);
                        if n == 0 || cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { port, turns }
    }

    fn turns(&self) -> u64 {
        self.turns.load(Ordering::SeqCst)
    }
}

async fn call(app: &axum::Router, body: String) -> (u16, serde_json::Value) {
    let req = Request::post("/v1/features")
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn volga_hashes_are_served_in_one_round_trip_per_request() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let writer = Client::new(Config::from_url(&url).unwrap(), None, None, None);
    writer.init().await.unwrap();
    const N: usize = 300;
    for i in 0..N {
        let keys = id_json(&format!("vl-{i}"));
        volga_insert(
            &writer,
            "vl_feature",
            &keys,
            &keys,
            &format!(r#"{{"value": {i}.5}}"#),
        )
        .await;
    }
    // Two key fields: sorted by name in the Redis key, as given in keys_json; a
    // non-ASCII key escaped as Python escapes it.
    volga_insert(
        &writer,
        "vl_pair",
        r#"{"merchant": "caf\u00e9", "user": 7}"#,
        r#"{"user": 7, "merchant": "caf\u00e9"}"#,
        r#"{"n": 3, "tags": ["a", "b"]}"#,
    )
    .await;

    let host = url.trim_start_matches("redis://").trim_end_matches('/');
    let proxy = TurnCounter::start(host.to_owned()).await;
    let volga_url = format!("redis://127.0.0.1:{}?layout=volga", proxy.port);
    let options = RedisOptions {
        pool_size: 1,
        per_worker: false,
        ..RedisOptions::default()
    };
    let store = Arc::new(RedisStore::connect(&volga_url, options).await.unwrap());
    let registry = Arc::new(Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap());
    oka_storage::check_registry(&*store, &registry).unwrap();
    let shared = Shared::new(Arc::clone(&registry), store.clone(), Limits::default());
    let app = oka_server::router(AppState::new(shared, 0));

    let mut keys: Vec<_> = (0..N)
        .map(|i| serde_json::json!({"id": format!("vl-{i}")}))
        .collect();
    keys.push(serde_json::json!({"id": "not-written"}));
    let body = serde_json::json!({
        "target_features": ["vl_simple"],
        "keys": keys,
        "udf_args": {"vl_simple": {"multiplier": 2.0}},
    })
    .to_string();
    let before = proxy.turns();
    let started = Timestamp::now();
    let (status, out) = call(&app, body).await;
    let turns = proxy.turns() - before;
    assert_eq!(status, 200, "{out}");
    for i in [0, 1, 150, N - 1] {
        let r = &out["results"]["vl_simple"][i][0];
        assert_eq!(r["value"], (i as f64 + 0.5) * 2.0, "{r}");
        assert_eq!(r["id"], format!("vl-{i}"));
    }
    assert_eq!(out["statuses"]["vl_simple"][N], "missing");
    // A pipeline of one HMGET per key; fred writes it in a few flushes, so Redis
    // may answer the first commands while later ones are still being sent.
    assert!(
        turns <= 3,
        "{turns} round trips for a {}-key request (one per key would be {})",
        N + 1,
        N + 1
    );
    eprintln!("{} keys: {turns} round trip(s)", N + 1);

    // Volga's writer stores no event time: the record carries the read's time.
    let (_, out) = call(
        &app,
        serde_json::json!({"target_features": ["vl_feature", "vl_pair"],
            "feature_keys": {"vl_feature": [{"id": "vl-3"}],
                             "vl_pair": [{"user": 7, "merchant": "café"}, {"user": 7, "merchant": "cafe"}]}})
        .to_string(),
    )
    .await;
    let ts = out["results"]["vl_feature"][0][0]["timestamp"]
        .as_str()
        .unwrap();
    let ts = Timestamp::parse_rfc3339(ts).unwrap();
    assert!(ts >= started && ts <= Timestamp::now(), "{out}");
    let pair = &out["results"]["vl_pair"];
    assert_eq!(pair[0][0]["n"], 3, "{out}");
    assert_eq!(pair[0][0]["tags"], serde_json::json!(["a", "b"]));
    assert!(pair[1].is_null(), "{out}");
}

#[tokio::test]
async fn history_reads_and_writes_are_refused() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let store = RedisStore::connect(&format!("{url}?layout=volga"), RedisOptions::default())
        .await
        .unwrap();
    let with_range = format!(
        "{SPEC}  vl_window:\n    kind: on_demand\n    dependencies: [{{feature: vl_feature, query: last_n, n: 3}}]\n    output: {{fields: {{n: int}}}}\n    udf:\n      expr: {{n: \"size(vl_feature)\"}}\n"
    );
    let registry = Registry::from_yaml("t", &with_range, &NativeUdfs::new()).unwrap();
    let e = oka_storage::check_registry(&store, &registry).unwrap_err();
    assert_eq!(
        e.problems,
        [
            "features.vl_window: reads `vl_feature` with `last_n`, but the store is Volga's layout (`layout=volga`), which holds only the latest record of each key and takes no writes: read it with `latest`, or copy the data into Oka's layout (`oka migrate volga`) and serve from there"
        ]
    );
    let f = registry.feature(registry.feature_id("vl_feature").unwrap());
    let key = EntityKey::encode(&[Value::from("x")]);
    let e = store
        .read(f, std::slice::from_ref(&key), &Query::LastN { n: 2 })
        .await
        .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Unsupported);
    let now = Timestamp::now();
    let row = Row::new(
        now,
        vec![Value::from("x"), Value::Timestamp(now), Value::Float(1.0)],
    );
    let e = store.write(f, &[(key, row)]).await.unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Unsupported);
}
