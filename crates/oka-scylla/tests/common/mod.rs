//! Finding the CQL test server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use oka_scylla::{ScyllaOptions, ScyllaStore};

/// The test node's URL (`OKA_TEST_CQL_URL`, e.g. `cassandra://127.0.0.1:9042/oka_test`,
/// set by `.ci/run`, which starts Cassandra). Without it the CQL tests are skipped,
/// unless `OKA_REQUIRE_CQL=1` (set by `.ci/run`) makes a missing node a failure.
pub fn cql_url() -> Option<String> {
    oka_storage::conformance::service("OKA_TEST_CQL_URL")
}

/// Connects, creating the keyspace and table if missing.
pub async fn connect(url: &str) -> ScyllaStore {
    ScyllaStore::connect(
        url,
        ScyllaOptions {
            create_schema: true,
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}
