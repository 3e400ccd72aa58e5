//! The storage conformance suite against a real CQL node (Cassandra 5 in `.ci/run`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use oka_scylla::{ScyllaOptions, ScyllaStore};
use oka_storage::{FeatureStore, StoreErrorKind};

#[tokio::test]
async fn scylla_backend_passes_the_conformance_suite() {
    let Some(url) = common::cql_url() else {
        return;
    };
    let store = common::connect(&url).await;
    store.health().await.unwrap();
    oka_storage::conformance::run_all(&store).await;
    eprintln!(
        "conformance suite passed against backend {} at {url}",
        store.backend()
    );
}

#[tokio::test]
async fn a_missing_table_is_a_clear_error() {
    let Some(url) = common::cql_url() else {
        return;
    };
    // A keyspace that nobody created: without --store-create-schema this must fail
    // and say how to fix it.
    let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b);
    let missing = format!("{base}/oka_never_created");
    let e = ScyllaStore::connect(&missing, ScyllaOptions::default())
        .await
        .unwrap_err();
    assert!(
        e.message.contains("--store-create-schema") && e.message.contains("oka schema"),
        "{e}"
    );
}

#[tokio::test]
async fn unreachable_nodes_and_bad_urls_are_errors() {
    let e = ScyllaStore::connect(
        "scylla://127.0.0.1:1/oka",
        ScyllaOptions {
            connect_timeout: Duration::from_millis(500),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Unavailable, "{e}");
    let e = ScyllaStore::connect("scylla://host/bad-keyspace", ScyllaOptions::default())
        .await
        .unwrap_err();
    assert!(e.message.contains("invalid keyspace"), "{e}");
}

#[tokio::test]
async fn writes_trim_partitions_to_the_history_bound() {
    use oka_core::{EntityKey, Query, Row, Timestamp, Value};
    let Some(url) = common::cql_url() else {
        return;
    };
    let store = common::connect(&url).await;
    let registry = oka_storage::conformance::registry();
    let f = registry.feature(registry.feature_id("conformance_feature").unwrap());
    let id = format!("trim-{}", std::process::id());
    let key = EntityKey::encode(&[Value::from(id.as_str())]);
    let row = |t: i64| {
        Row::new(
            Timestamp(t),
            vec![
                Value::from(id.as_str()),
                Value::Timestamp(Timestamp(t)),
                Value::Float(t as f64),
                Value::from("x"),
                Value::List(vec![].into()),
            ],
        )
    };
    let stored = || async {
        store
            .session()
            .query_unpaged(
                format!(
                    "SELECT COUNT(*) FROM {}.features WHERE feature = ? AND entity_key = ?",
                    store.keyspace()
                ),
                (&*f.name, key.as_str()),
            )
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .single_row::<(i64,)>()
            .unwrap()
            .0
    };
    let history = oka_storage::conformance::HISTORY as i64;
    // A batch always trims.
    let batch: Vec<_> = (1..=12).map(|t| (key.clone(), row(t))).collect();
    store.write(f, &batch).await.unwrap();
    assert_eq!(stored().await, history, "rows kept after a batch");
    // Single writes trim on a 1-in-8 sample: storage stays near the bound (the last
    // trim is fewer than 64 writes back but with probability (7/8)^64 ≈ 2e-4), and
    // reads never show more than the bound.
    for t in 100..300 {
        store.write(f, &[(key.clone(), row(t))]).await.unwrap();
    }
    let n = stored().await;
    assert!(n >= history && n < history + 64, "{n} rows stored");
    let got = store
        .read(f, std::slice::from_ref(&key), &Query::LastN { n: 1000 })
        .await
        .unwrap();
    let times: Vec<i64> = got[0].iter().map(|r| r.event_time.0).collect();
    assert_eq!(times, (290..300).collect::<Vec<_>>());
    let got = store
        .read(
            f,
            std::slice::from_ref(&key),
            &Query::Range {
                start: Timestamp(0),
                end: Timestamp(295),
            },
        )
        .await
        .unwrap();
    let times: Vec<i64> = got[0].iter().map(|r| r.event_time.0).collect();
    assert_eq!(
        times,
        (290..=295).collect::<Vec<_>>(),
        "a range sees only the newest `history` records, as on every backend"
    );
}
