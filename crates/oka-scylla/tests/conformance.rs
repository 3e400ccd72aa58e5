//! The storage conformance suite against a real CQL node (Cassandra 5 in `.ci/run`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use oka_scylla::{ScyllaOptions, ScyllaStore};
use oka_storage::{FeatureStore, StoreErrorKind};

#[tokio::test]
async fn cql_passes_the_conformance_suite() {
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
