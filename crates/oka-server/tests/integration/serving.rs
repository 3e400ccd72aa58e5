//! Serving behaviour over HTTP.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::{body_json, body_text, fixture, get, post, send};

#[tokio::test]
async fn seed_request_multiplies_the_stored_value() {
    let f = fixture().await;
    let req = json!({"target_features": ["simple_feature"], "keys": [{"id": "test-id-21"}],
                     "udf_args": {"simple_feature": {"multiplier": 2.0}}});
    let (status, resp) = send(&f.app, post("/v1/features", req.to_string())).await;
    assert_eq!(status, 200);
    let timing = resp.headers()["server-timing"].to_str().unwrap().to_owned();
    for part in ["parse;dur=", "storage;dur=", "udf;dur=", "encode;dur="] {
        assert!(timing.contains(part), "{timing}");
    }
    let body = body_json(resp).await;
    assert_eq!(body["results"]["simple_feature"][0][0]["value"], 42.0);
    assert_eq!(body["results"]["simple_feature"][0][0]["id"], "test-id-21");
    assert_eq!(body["statuses"]["simple_feature"], json!(["present"]));
    assert!(
        body["server_id"].as_str().unwrap().ends_with("/0"),
        "{body}"
    );
}

#[tokio::test]
async fn shared_dependency_is_read_once_per_request() {
    let f = fixture().await;
    let req = json!({"target_features": ["simple_feature", "plus_feature", "chained_feature", "ratio_feature"],
                     "keys": [{"id": "test-id-1"}, {"id": "test-id-2"}, {"id": "test-id-3"}]});
    let before = f.store.reads.load(Ordering::SeqCst);
    let (status, resp) = send(&f.app, post("/v1/features", req.to_string())).await;
    assert_eq!(status, 200, "{}", body_text(resp).await);
    assert_eq!(
        f.store.reads.load(Ordering::SeqCst) - before,
        1,
        "one batched read for four dependents and three keys"
    );
}

#[tokio::test]
async fn missing_keys_and_udf_errors_are_per_key() {
    let f = fixture().await;
    let req = json!({"target_features": ["ratio_feature", "chained_feature"],
                     "keys": [{"id": "test-id-12"}, {"id": "test-id-13"}, {"id": "ghost"}],
                     "udf_args": {"simple_feature": {"multiplier": 3}, "chained_feature": {"offset": 0.5}}});
    let (status, resp) = send(&f.app, post("/v1/features", req.to_string())).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    // 100 / (13 - 13) divides by zero for test-id-13 only.
    assert_eq!(
        body["statuses"]["ratio_feature"],
        json!(["present", "error", "missing"]),
        "{body}"
    );
    assert_eq!(body["results"]["ratio_feature"][0][0]["value"], -100.0);
    assert_eq!(body["results"]["ratio_feature"][1], json!(null));
    assert_eq!(
        body["statuses"]["chained_feature"],
        json!(["present", "present", "missing"])
    );
    assert_eq!(body["results"]["chained_feature"][1][0]["value"], 39.5);
    // The error is counted per feature.
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    let metrics = body_text(resp).await;
    assert!(
        metrics.contains("oka_udf_errors_total{feature=\"ratio_feature\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn metrics_and_stats_reflect_requests() {
    let f = fixture().await;
    let req = json!({"target_features": ["simple_feature"], "keys": [{"id": "test-id-5"}]});
    for _ in 0..3 {
        let (status, _) = send(&f.app, post("/v1/features", req.to_string())).await;
        assert_eq!(status, 200);
    }
    let (_, resp) = send(&f.app, post("/v1/features", "{")).await;
    drop(resp);
    let (status, resp) = send(&f.admin, get("/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let m = body_text(resp).await;
    for line in [
        "oka_http_request_duration_seconds_count{route=\"/v1/features\",status=\"2xx\"} 3",
        "oka_http_request_duration_seconds_count{route=\"/v1/features\",status=\"4xx\"} 1",
        "oka_storage_read_duration_seconds_count{backend=\"counting\",query=\"latest\"} 3",
        "oka_ondemand_compute_duration_seconds_count 3",
        "oka_http_request_keys_count 3",
        "oka_http_requests_in_flight 0",
    ] {
        assert!(m.contains(line), "missing {line:?} in\n{m}");
    }
    assert!(
        m.contains("oka_udf_duration_seconds_count{feature=\"simple_feature\"} 3"),
        "{m}"
    );
    let (status, resp) = send(&f.admin, get("/stats")).await;
    assert_eq!(status, 200);
    let stats = body_json(resp).await;
    for field in [
        "qps",
        "server_p50",
        "server_p95",
        "server_p99",
        "server_avg",
        "db_p50",
        "db_p95",
        "db_p99",
        "db_avg",
    ] {
        assert!(stats[field].is_number(), "{field} in {stats}");
    }
}

#[tokio::test]
async fn a_scraper_that_asks_for_openmetrics_gets_it_labelled_as_such() {
    let f = fixture().await;
    let req = axum::http::Request::get("/metrics")
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, resp) = send(&f.admin, req).await;
    assert_eq!(status, 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let m = body_text(resp).await;
    assert!(m.contains("# TYPE oka_worker_requests counter"), "{m}");
    assert!(m.ends_with("# EOF\n"), "{m}");
}

#[tokio::test]
async fn ingested_records_are_served() {
    let f = fixture().await;
    let ingest = json!({"feature": "test_feature", "records": [
        {"id": "fresh", "value": 2.5, "timestamp": "2025-04-18T10:00:00Z"},
        {"id": "fresh", "value": 9.0, "timestamp": "2025-04-18T09:00:00Z"},
        {"id": "bad", "value": "x"},
        {"value": 1.0},
    ]});
    let (status, resp) = send(&f.app, post("/v1/ingest", ingest.to_string())).await;
    assert_eq!(status, 200);
    let summary = body_json(resp).await;
    assert_eq!(summary["written"], 2);
    assert_eq!(summary["rejected"], 2);
    assert_eq!(summary["errors"][0]["index"], 2);
    assert!(
        summary["errors"][1]["message"]
            .as_str()
            .unwrap()
            .contains("missing key field `id`")
    );
    // The older record does not replace the newer one.
    let req = json!({"target_features": ["test_feature"], "keys": [{"id": "fresh"}]});
    let (_, resp) = send(&f.app, post("/v1/features", req.to_string())).await;
    let body = body_json(resp).await;
    assert_eq!(body["results"]["test_feature"][0][0]["value"], 2.5);
    assert_eq!(
        body["results"]["test_feature"][0][0]["timestamp"],
        "2025-04-18T10:00:00.000000+00:00"
    );
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    let m = body_text(resp).await;
    assert!(
        m.contains("oka_ingest_rows_total{result=\"written\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("oka_ingest_rows_total{result=\"rejected\"} 2"),
        "{m}"
    );
}

#[tokio::test]
async fn catalog_lists_features() {
    let f = fixture().await;
    let (status, resp) = send(&f.app, get("/v1/features")).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    let names: Vec<_> = body["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"simple_feature".to_owned()));
    let simple = body["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "simple_feature")
        .unwrap();
    assert_eq!(simple["args"]["multiplier"]["type"], "float");
    assert_eq!(simple["dependencies"][0]["feature"], "test_feature");
    assert_eq!(body["entities"]["TestEntity"]["keys"], json!(["id"]));
}

#[tokio::test]
async fn health_is_open() {
    let f = fixture().await;
    let (status, resp) = send(&f.admin, get("/healthz")).await;
    assert_eq!(status, 200);
    assert_eq!(body_json(resp).await["status"], "ok");
}
