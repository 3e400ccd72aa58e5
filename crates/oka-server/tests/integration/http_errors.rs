//! Every 4xx/5xx class over HTTP: a JSON error with a code, never a stack trace.

use axum::body::Body;
use axum::http::Request;
use oka_server::Limits;
use serde_json::json;

use super::{body_json, fixture, fixture_with, get, post, send};

#[tokio::test]
async fn every_error_class_is_a_json_error_with_its_status() {
    let f = fixture().await;
    let cases: Vec<(Request<Body>, u16, &str)> = vec![
        (post("/v1/features", "{"), 400, "malformed_request"),
        (post("/v1/features", "[1,2]"), 400, "malformed_request"),
        (
            post("/v1/features", r#"{"target_features": "simple_feature"}"#),
            400,
            "malformed_request",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["simple_feature"], "kes": []}"#,
            ),
            400,
            "unknown_field",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": [], "keys": [{"id": "a"}]}"#,
            ),
            400,
            "invalid_request",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["nope"], "keys": [{"id": "a"}]}"#,
            ),
            404,
            "unknown_feature",
        ),
        (
            post("/v1/features", r#"{"target_features": ["simple_feature"]}"#),
            400,
            "missing_keys",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["simple_feature"], "keys": [{"id": 7}]}"#,
            ),
            400,
            "invalid_key",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"x": 1}}}"#,
            ),
            400,
            "unknown_udf_arg",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"multiplier": [1]}}}"#,
            ),
            400,
            "invalid_udf_arg",
        ),
        (
            post(
                "/v1/features",
                r#"{"target_features": ["test_feature"], "keys": [{"id": "a"}], "query_args": {"test_feature": {"n": -1}}}"#,
            ),
            400,
            "invalid_query_arg",
        ),
        (
            post(
                "/v1/ingest",
                r#"{"feature": "simple_feature", "records": []}"#,
            ),
            400,
            "invalid_request",
        ),
        (
            post("/v1/ingest", r#"{"feature": "nope", "records": []}"#),
            404,
            "unknown_feature",
        ),
        (
            post("/v1/ingest", r#"{"records": []}"#),
            400,
            "malformed_request",
        ),
        (get("/nope"), 404, "not_found"),
        (
            Request::delete("/v1/features").body(Body::empty()).unwrap(),
            405,
            "method_not_allowed",
        ),
        (
            Request::get("/on_demand_compute/not%20json")
                .header("accept", "application/json")
                .body(Body::empty())
                .unwrap(),
            400,
            "malformed_request",
        ),
    ];
    for (req, status, code) in cases {
        let what = format!("{} {}", req.method(), req.uri());
        let (got, resp) = send(&f.app, req).await;
        assert_eq!(resp.headers()["content-type"], "application/json", "{what}");
        let body = body_json(resp).await;
        assert_eq!(got, status, "{what}: {body}");
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        );
    }
    // The server still serves after all that.
    let (status, _) = send(
        &f.app,
        post(
            "/v1/features",
            r#"{"target_features": ["simple_feature"], "keys": [{"id": "test-id-1"}]}"#,
        ),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let f = fixture_with(Limits {
        max_body_bytes: 1024,
        ..Limits::default()
    })
    .await;
    let big = format!(
        r#"{{"target_features": ["simple_feature"], "keys": [{{"id": "{}"}}]}}"#,
        "x".repeat(2048)
    );
    let (status, resp) = send(&f.app, post("/v1/features", big.clone())).await;
    assert_eq!(status, 413);
    assert_eq!(body_json(resp).await["error"]["code"], "payload_too_large");
    let (status, _) = send(&f.app, post("/v1/ingest", big.clone())).await;
    assert_eq!(status, 413);
    let (status, _) = send(
        &f.app,
        get(&format!("/on_demand_compute/{}", "x".repeat(2048))),
    )
    .await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn store_outage_is_503_without_internals() {
    let f = fixture().await;
    f.store
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, resp) = send(
        &f.app,
        post(
            "/v1/features",
            json!({"target_features": ["simple_feature"], "keys": [{"id": "test-id-1"}]})
                .to_string(),
        ),
    )
    .await;
    assert_eq!(status, 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let text = super::body_text(resp).await;
    assert!(text.contains("store_unavailable"), "{text}");
    assert!(!text.contains("10.0.0.1"), "internals leaked: {text}");
    let (status, _) = send(&f.admin, get("/readyz")).await;
    assert_eq!(status, 503);
    f.store
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, _) = send(&f.admin, get("/readyz")).await;
    assert_eq!(status, 200);
}
