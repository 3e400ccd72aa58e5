//! `oka serve --cache tracking` as a user runs it: a record written by another
//! process (`oka ingest`) after it was cached is served as soon as Redis's
//! invalidation arrives, and the cache's counters show on `/metrics`. Needs
//! `OKA_TEST_REDIS_URL` (set by `.ci/run`); uses database 9 of that server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{OKA, http, service_url, start_oka, tmp_file};

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/seed/spec.yaml");

fn ingest(store: &str, lines: &str) {
    let file = tmp_file("cache-ingest.jsonl", lines);
    let out = Command::new(OKA)
        .args(["ingest", "--spec", SEED, "--feature", "test_feature"])
        .args(["--file", file.to_str().unwrap(), "--store", store])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn value(addr: std::net::SocketAddr, id: &str) -> f64 {
    let body = format!(r#"{{"target_features":["test_feature"],"keys":[{{"id":"{id}"}}]}}"#);
    let (status, out) = http(addr, "POST", "/v1/features", &body).unwrap();
    assert_eq!(status, 200, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["results"]["test_feature"][0][0]["value"]
        .as_f64()
        .unwrap()
}

#[test]
fn another_processs_write_reaches_a_tracking_cache() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let store = format!("{}/9", url.trim_end_matches('/'));
    // A key of its own per run: a Redis kept from an earlier run already holds the
    // later record of a fixed key, which would then be served from the start.
    let id = format!(
        "cached-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let record =
        |v: f64, t: &str| format!("{{\"id\":\"{id}\",\"value\":{v:.1},\"timestamp\":\"{t}\"}}\n");
    ingest(&store, &record(1.0, "2026-01-01T00:00:00Z"));
    let oka = start_oka(
        &["--spec", SEED, "--store", &store, "--cache", "tracking"],
        None,
    );
    assert_eq!(value(oka.addr, &id), 1.0);
    assert_eq!(value(oka.addr, &id), 1.0);
    ingest(&store, &record(2.0, "2026-01-01T00:00:01Z"));
    let t = Instant::now();
    while value(oka.addr, &id) != 2.0 {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "the cached 1.0 still served"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let (_, metrics) = http(oka.admin, "GET", "/metrics", "").unwrap();
    let count = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in the metrics"))
    };
    assert!(count("oka_cache_hits_total ") >= 1);
    assert!(count("oka_cache_invalidations_total ") >= 1);
    assert_eq!(count("oka_cache_enabled "), 1);
}
