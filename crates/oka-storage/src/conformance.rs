//! The storage conformance suite. Every backend's tests call [`run_all`] with a live
//! store; each case isolates itself with a random key prefix, so it can run against
//! a shared server.
//!
//! The functions panic (assert) on a violation, naming the backend and the case.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use oka_core::{EntityKey, Feature, NativeUdfs, Query, Registry, Row, Timestamp, Value};

use crate::store::FeatureStore;

/// The services test suites run against: the variable that gives a service's
/// address, the one that makes its absence a failure, and its name.
const SERVICES: [(&str, &str, &str); 3] = [
    ("OKA_TEST_REDIS_URL", "OKA_REQUIRE_REDIS", "Redis"),
    ("OKA_TEST_CQL_URL", "OKA_REQUIRE_CQL", "ScyllaDB/Cassandra"),
    ("OKA_TEST_KAFKA_BROKERS", "OKA_REQUIRE_KAFKA", "Kafka"),
];

/// The address of a service a test needs, from `var` (one of `OKA_TEST_REDIS_URL`,
/// `OKA_TEST_CQL_URL`, `OKA_TEST_KAFKA_BROKERS`), or `None`: the test then
/// returns, skipped. A skip is never silent: the first one of each service in a
/// test binary writes one line to the terminal (past the test harness's capture,
/// so it shows under passing tests too). With the service's `OKA_REQUIRE_*=1`
/// (`.ci/run` sets them all) a missing address fails the test instead.
pub fn service(var: &str) -> Option<String> {
    if let Ok(url) = std::env::var(var)
        && !url.is_empty()
    {
        return Some(url);
    }
    let (require, name) = SERVICES
        .iter()
        .find(|(v, _, _)| *v == var)
        .map_or(("", var), |(_, r, n)| (*r, *n));
    assert!(
        require.is_empty() || std::env::var(require).as_deref() != Ok("1"),
        "{require}=1 but {var} is not set: start {name} and give its address in {var}"
    );
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let first = SAID.lock().is_ok_and(|mut said| {
        let first = !said.iter().any(|v| v == var);
        if first {
            said.push(var.to_owned());
        }
        first
    });
    if first {
        let suite = std::env::args()
            .next()
            .map(|a| {
                let file = a.rsplit('/').next().unwrap_or(&a).to_owned();
                // `cli-373bf9abf32dc70e`: the test binary without its hash.
                file.rsplit_once('-')
                    .map_or(file.clone(), |(n, _)| n.to_owned())
            })
            .unwrap_or_default();
        // Cargo names the package when it runs the tests.
        let suite = match std::env::var("CARGO_PKG_NAME") {
            Ok(package) => format!("{package} {suite}"),
            Err(_) => suite,
        };
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!(
                "SKIPPED: the {name} tests of `{suite}`: {var} is not set (set it to run them; {require}=1 makes this a failure)\n"
            )
            .as_bytes(),
        );
    }
    None
}

/// History bound of the suite's feature.
pub const HISTORY: usize = 10;

const SPEC: &str = r#"
version: 1
entities:
  Conformance:
    keys: {id: string}
    timestamp: ts
    fields: {value: float, label: string, tags: list<string>}
features:
  conformance_feature:
    kind: pipeline
    entity: Conformance
    history: 10
  conformance_ttl:
    kind: pipeline
    entity: Conformance
    history: 10
    ttl_s: 1
"#;

/// The suite's registry (one pipeline feature, history 10).
pub fn registry() -> Registry {
    Registry::from_yaml("<conformance>", SPEC, &NativeUdfs::new()).unwrap()
}

fn feature(r: &Registry) -> &Feature {
    r.feature(r.feature_id("conformance_feature").unwrap())
}

/// A prefix unique to this process and call.
fn prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("t{nanos:x}-{}-", N.fetch_add(1, Ordering::Relaxed))
}

fn key(p: &str, id: &str) -> EntityKey {
    EntityKey::encode(&[Value::from(format!("{p}{id}").as_str())])
}

fn row(p: &str, id: &str, ts: i64, value: f64) -> Row {
    Row::new(
        Timestamp(ts),
        vec![
            Value::from(format!("{p}{id}").as_str()),
            Value::Timestamp(Timestamp(ts)),
            Value::Float(value),
            Value::from("label"),
            Value::List(vec![Value::from("a"), Value::from("b")].into()),
        ],
    )
}

fn values(rows: &[Row]) -> Vec<f64> {
    rows.iter()
        .map(|r| match r.columns[2] {
            Value::Float(f) => f,
            ref other => panic!("value column is {other:?}"),
        })
        .collect()
}

/// Runs every case.
pub async fn run_all(store: &dyn FeatureStore) {
    latest_is_newest_event_time(store).await;
    range_is_inclusive_and_ordered(store).await;
    last_n_is_newest_n_oldest_first(store).await;
    missing_keys_are_empty_in_order(store).await;
    many_keys_in_one_call(store).await;
    same_event_time_is_idempotent(store).await;
    history_is_bounded(store).await;
    unusual_key_values_stay_distinct(store).await;
    large_values_round_trip(store).await;
    concurrent_writers(store).await;
    rows_round_trip_every_column(store).await;
    ttl_expires_keys(store).await;
}

/// `latest` returns the record with the newest event time, whatever the write order.
pub async fn latest_is_newest_event_time(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "a");
    for (ts, v) in [(2_000, 2.0), (3_000, 3.0), (1_000, 1.0)] {
        store
            .write(f, &[(k.clone(), row(&p, "a", ts, v))])
            .await
            .unwrap();
    }
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(
        values(&got[0]),
        [3.0],
        "{}: latest after out-of-order writes",
        store.backend()
    );
}

/// `range` includes both bounds and returns oldest first.
pub async fn range_is_inclusive_and_ordered(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "a");
    let batch: Vec<_> = (1..=5)
        .map(|i| (k.clone(), row(&p, "a", i * 1_000, i as f64)))
        .collect();
    store.write(f, &batch).await.unwrap();
    let q = Query::Range {
        start: Timestamp(2_000),
        end: Timestamp(4_000),
    };
    let got = store.read(f, std::slice::from_ref(&k), &q).await.unwrap();
    assert_eq!(
        values(&got[0]),
        [2.0, 3.0, 4.0],
        "{}: range",
        store.backend()
    );
    let empty = Query::Range {
        start: Timestamp(10_000),
        end: Timestamp(20_000),
    };
    let got = store
        .read(f, std::slice::from_ref(&k), &empty)
        .await
        .unwrap();
    assert!(
        got[0].is_empty(),
        "{}: range outside the data",
        store.backend()
    );
}

/// `last_n` returns the newest n, oldest first; more than stored returns all.
pub async fn last_n_is_newest_n_oldest_first(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "a");
    let batch: Vec<_> = (1..=5)
        .map(|i| (k.clone(), row(&p, "a", i * 1_000, i as f64)))
        .collect();
    store.write(f, &batch).await.unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 2 })
        .await
        .unwrap();
    assert_eq!(values(&got[0]), [4.0, 5.0], "{}: last_n 2", store.backend());
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 50 })
        .await
        .unwrap();
    assert_eq!(
        values(&got[0]),
        [1.0, 2.0, 3.0, 4.0, 5.0],
        "{}: last_n 50",
        store.backend()
    );
}

/// Keys never written answer empty, and answers keep the keys' order.
pub async fn missing_keys_are_empty_in_order(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    store
        .write(f, &[(key(&p, "b"), row(&p, "b", 1_000, 7.0))])
        .await
        .unwrap();
    let keys = [key(&p, "a"), key(&p, "b"), key(&p, "c")];
    let got = store.read(f, &keys, &Query::Latest).await.unwrap();
    assert_eq!(got.len(), 3, "{}: one answer per key", store.backend());
    assert!(
        got[0].is_empty() && got[2].is_empty(),
        "{}: missing keys",
        store.backend()
    );
    assert_eq!(
        values(&got[1]),
        [7.0],
        "{}: present key in the middle",
        store.backend()
    );
}

/// Hundreds of keys in one call come back complete and in order.
pub async fn many_keys_in_one_call(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let n = 500;
    let batch: Vec<_> = (0..n)
        .map(|i| {
            (
                key(&p, &i.to_string()),
                row(&p, &i.to_string(), 1_000, i as f64),
            )
        })
        .collect();
    store.write(f, &batch).await.unwrap();
    let keys: Vec<_> = (0..n).rev().map(|i| key(&p, &i.to_string())).collect();
    let got = store.read(f, &keys, &Query::Latest).await.unwrap();
    let expected: Vec<f64> = (0..n).rev().map(|i| i as f64).collect();
    let flat: Vec<f64> = got.iter().flat_map(values).collect();
    assert_eq!(flat, expected, "{}: 500 keys in one read", store.backend());
}

/// Re-writing a record with the same event time replaces it (no duplicate).
pub async fn same_event_time_is_idempotent(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "a");
    store
        .write(f, &[(k.clone(), row(&p, "a", 1_000, 1.0))])
        .await
        .unwrap();
    store
        .write(f, &[(k.clone(), row(&p, "a", 1_000, 1.0))])
        .await
        .unwrap();
    store
        .write(f, &[(k.clone(), row(&p, "a", 1_000, 1.5))])
        .await
        .unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 10 })
        .await
        .unwrap();
    assert_eq!(
        values(&got[0]),
        [1.5],
        "{}: same (key, time) written thrice",
        store.backend()
    );
}

/// No more than the feature's history is kept; the newest survive.
pub async fn history_is_bounded(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "a");
    let batch: Vec<_> = (1..=(HISTORY as i64 + 5))
        .map(|i| (k.clone(), row(&p, "a", i * 1_000, i as f64)))
        .collect();
    store.write(f, &batch).await.unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 100 })
        .await
        .unwrap();
    let expected: Vec<f64> = (6..=(HISTORY as i64 + 5)).map(|i| i as f64).collect();
    assert_eq!(
        values(&got[0]),
        expected,
        "{}: history bound",
        store.backend()
    );
    // A range reaching past the bound sees only the records kept.
    let q = Query::Range {
        start: Timestamp(0),
        end: Timestamp(12_000),
    };
    let got = store.read(f, std::slice::from_ref(&k), &q).await.unwrap();
    let expected: Vec<f64> = (6..=12).map(|i| i as f64).collect();
    assert_eq!(
        values(&got[0]),
        expected,
        "{}: range over the history bound",
        store.backend()
    );
}

/// Key values with separators, escapes, spaces and non-ASCII stay distinct.
pub async fn unusual_key_values_stay_distinct(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let ids = [
        "a|b",
        "a\\|b",
        "a:b",
        "a b",
        "ключ🔑",
        "{\"id\":1}",
        "a/b",
        "",
    ];
    let batch: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (key(&p, id), row(&p, id, 1_000, i as f64)))
        .collect();
    store.write(f, &batch).await.unwrap();
    let keys: Vec<_> = ids.iter().map(|id| key(&p, id)).collect();
    let got = store.read(f, &keys, &Query::Latest).await.unwrap();
    let flat: Vec<f64> = got.iter().flat_map(values).collect();
    let expected: Vec<f64> = (0..ids.len()).map(|i| i as f64).collect();
    assert_eq!(flat, expected, "{}: unusual key values", store.backend());
}

/// A 1 MiB string value round-trips.
pub async fn large_values_round_trip(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "big");
    let big: String = "x".repeat(1 << 20);
    let mut rw = row(&p, "big", 1_000, 1.0);
    let mut cols = rw.columns.to_vec();
    cols[3] = Value::from(big.as_str());
    rw.columns = Arc::from(cols);
    store.write(f, &[(k.clone(), rw.clone())]).await.unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(got[0], vec![rw], "{}: 1 MiB value", store.backend());
}

/// Concurrent writers of many keys and of one key lose nothing, and the latest of
/// the shared key is the newest event time.
pub async fn concurrent_writers(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let shared = key(&p, "shared");
    let writers = (0..8i64).map(|w| {
        let p = p.clone();
        let shared = shared.clone();
        async move {
            for i in 0..25i64 {
                let id = format!("w{w}-{i}");
                let ts = (w * 25 + i) * 1_000 + 1_000;
                store
                    .write(
                        f,
                        &[
                            (key(&p, &id), row(&p, &id, ts, ts as f64)),
                            (shared.clone(), row(&p, "shared", ts, ts as f64)),
                        ],
                    )
                    .await
                    .unwrap();
            }
        }
    });
    futures::future::join_all(writers).await;
    let keys: Vec<_> = (0..8)
        .flat_map(|w| (0..25).map(move |i| format!("w{w}-{i}")))
        .map(|id| key(&p, &id))
        .collect();
    let got = store.read(f, &keys, &Query::Latest).await.unwrap();
    assert!(
        got.iter().all(|r| r.len() == 1),
        "{}: every concurrently written key present",
        store.backend()
    );
    let latest = store
        .read(f, std::slice::from_ref(&shared), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(
        values(&latest[0]),
        [200_000.0],
        "{}: newest of the shared key",
        store.backend()
    );
    let hist = store
        .read(f, std::slice::from_ref(&shared), &Query::LastN { n: 100 })
        .await
        .unwrap();
    assert_eq!(
        hist[0].len(),
        HISTORY,
        "{}: shared key history bounded",
        store.backend()
    );
}

/// Every column, including lists and timestamps, and the event time round-trip.
pub async fn rows_round_trip_every_column(store: &dyn FeatureStore) {
    let r = registry();
    let f = feature(&r);
    let p = prefix();
    let k = key(&p, "full");
    let rw = row(&p, "full", 1_744_970_400_123_456, -0.5);
    store.write(f, &[(k.clone(), rw.clone())]).await.unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(got[0], vec![rw], "{}: full row", store.backend());
}

/// A feature with a TTL forgets a key that long after its last write; a later write
/// starts a fresh history.
pub async fn ttl_expires_keys(store: &dyn FeatureStore) {
    let r = registry();
    let f = r.feature(r.feature_id("conformance_ttl").unwrap());
    let p = prefix();
    let k = key(&p, "a");
    store
        .write(
            f,
            &[
                (k.clone(), row(&p, "a", 1_000, 1.0)),
                (k.clone(), row(&p, "a", 2_000, 2.0)),
            ],
        )
        .await
        .unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 10 })
        .await
        .unwrap();
    assert_eq!(
        values(&got[0]),
        [1.0, 2.0],
        "{}: before the TTL",
        store.backend()
    );
    tokio::time::sleep(std::time::Duration::from_millis(1_300)).await;
    for q in [Query::Latest, Query::LastN { n: 10 }] {
        let got = store.read(f, std::slice::from_ref(&k), &q).await.unwrap();
        assert!(
            got[0].is_empty(),
            "{}: {q:?} after the TTL: {:?}",
            store.backend(),
            &got[0]
        );
    }
    store
        .write(f, &[(k.clone(), row(&p, "a", 3_000, 3.0))])
        .await
        .unwrap();
    let got = store
        .read(f, std::slice::from_ref(&k), &Query::LastN { n: 10 })
        .await
        .unwrap();
    assert_eq!(
        values(&got[0]),
        [3.0],
        "{}: a fresh history after expiry",
        store.backend()
    );
}
