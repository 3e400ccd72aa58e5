//! Hostile and malformed requests, each with its defined answer; the server serves a
//! valid request afterwards.

use axum::body::Body;
use axum::http::Request;
use oka_server::Limits;

use super::{body_text, fixture_with, get, send};

fn post(uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(uri).body(body.into()).unwrap()
}

fn features(body: impl Into<Body>) -> Request<Body> {
    post("/v1/features", body)
}

#[tokio::test]
async fn hostile_requests_get_defined_answers() {
    let f = fixture_with(Limits {
        max_body_bytes: 256 * 1024,
        ..Limits::default()
    })
    .await;
    let many_targets =
        serde_json::json!({"target_features": vec!["simple_feature"; 300], "keys": [{"id": "a"}]})
            .to_string();
    let many_keys = serde_json::json!({"target_features": ["simple_feature"], "keys": vec![serde_json::json!({"id": "a"}); 10_001]}).to_string();
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let deep_body = format!(
        r#"{{"target_features": ["simple_feature"], "keys": [{{"id": "a"}}], "udf_args": {{"simple_feature": {{"multiplier": {deep}}}}}}}"#
    );
    let long_key = format!(
        r#"{{"target_features": ["simple_feature"], "keys": [{{"id": "{}"}}]}}"#,
        "k".repeat(100_000)
    );
    let ok = |s: &str| {
        format!(r#"{{"target_features": ["simple_feature"], "keys": [{{"id": "test-id-1"}}]{s}}}"#)
    };

    // (request, status, error code or "" for a success)
    let cases: Vec<(Request<Body>, u16, &str)> = vec![
        (features(""), 400, "malformed_request"),
        (features("null"), 400, "malformed_request"),
        (features("\"simple_feature\""), 400, "malformed_request"),
        (features("[]"), 400, "malformed_request"),
        (features("{}"), 400, "malformed_request"),
        (
            features(r#"{"target_features": null}"#),
            400,
            "malformed_request",
        ),
        (
            features(r#"{"target_features": [1]}"#),
            400,
            "malformed_request",
        ),
        (
            features(r#"{"target_features": [""], "keys": [{"id": "a"}]}"#),
            404,
            "unknown_feature",
        ),
        (features(many_targets), 400, "invalid_request"),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": {}}"#),
            400,
            "malformed_request",
        ),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": [1]}"#),
            400,
            "malformed_request",
        ),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": [{}]}"#),
            400,
            "invalid_key",
        ),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": [{"id": null}]}"#),
            400,
            "invalid_key",
        ),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": [{"id": 1e400}]}"#),
            400,
            "malformed_request",
        ),
        (
            features(r#"{"target_features": ["simple_feature"], "keys": [{"id": ["a"]}]}"#),
            400,
            "invalid_key",
        ),
        (features(many_keys), 400, "invalid_request"),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"multiplier": NaN}}}"#,
            ),
            400,
            "malformed_request",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"multiplier": "Infinity"}}}"#,
            ),
            400,
            "invalid_udf_arg",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"multiplier": 1e309}}}"#,
            ),
            400,
            "malformed_request",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": []}}"#,
            ),
            400,
            "malformed_request",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "a"}], "query_args": {"nope": {}}}"#,
            ),
            404,
            "unknown_feature",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "feature_keys": {"simple_feature": []}}"#,
            ),
            400,
            "missing_keys",
        ),
        (features(deep_body), 400, "malformed_request"),
        (
            features(vec![b'{', 0xff, 0xfe, b'}']),
            400,
            "malformed_request",
        ),
        (
            features(format!("{} trailing", ok(""))),
            400,
            "malformed_request",
        ),
        (
            features(ok("") + &" ".repeat(300 * 1024)),
            413,
            "payload_too_large",
        ),
        (get("/on_demand_compute/"), 404, "not_found"),
        (
            Request::post("/v1/features")
                .header("x-oka-deadline-ms", "0")
                .body(Body::from(ok("")))
                .unwrap(),
            400,
            "invalid_request",
        ),
        (
            post(
                "/v1/ingest",
                r#"{"feature": "test_feature", "records": {}}"#,
            ),
            400,
            "malformed_request",
        ),
        (
            post(
                "/v1/ingest",
                r#"{"feature": "test_feature", "records": [], "extra": 1}"#,
            ),
            400,
            "unknown_field",
        ),
        // Defined successes: duplicate JSON keys (the last wins), duplicate targets
        // (answered once), huge but finite numbers, unicode and control characters
        // in keys, a 100 KB key, `udf_args: null` for a feature (its defaults), and
        // any content type.
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "x", "id": "test-id-1"}]}"#,
            ),
            200,
            "",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature", "simple_feature"], "keys": [{"id": "test-id-1"}]}"#,
            ),
            200,
            "",
        ),
        (
            features(ok(
                r#", "udf_args": {"simple_feature": {"multiplier": 99999999999999999999}}"#,
            )),
            200,
            "",
        ),
        (
            features(
                r#"{"target_features": ["simple_feature"], "keys": [{"id": "ключ🔑\u0000\n"}]}"#,
            ),
            200,
            "",
        ),
        (features(long_key), 200, ""),
        (
            features(ok(r#", "udf_args": {"simple_feature": null}"#)),
            200,
            "",
        ),
        (
            Request::post("/v1/features")
                .header("content-type", "text/plain")
                .body(Body::from(ok("")))
                .unwrap(),
            200,
            "",
        ),
        (
            post(
                "/v1/ingest",
                r#"{"feature": "test_feature", "records": [{"id": "h", "value": "NaN"}]}"#,
            ),
            200,
            "",
        ),
    ];
    assert!(cases.len() >= 30);
    for (req, status, code) in cases {
        let what = format!(
            "{} {}",
            req.method(),
            req.uri().to_string().chars().take(60).collect::<String>()
        );
        let (got, resp) = send(&f.app, req).await;
        let text = body_text(resp).await;
        assert_eq!(
            got,
            status,
            "{what}: {}",
            text.chars().take(300).collect::<String>()
        );
        let body: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e})"));
        if code.is_empty() {
            assert!(body.get("error").is_none(), "{what}: {body}");
        } else {
            assert_eq!(body["error"]["code"], code, "{what}: {body}");
            assert!(
                !text.contains("panicked") && !text.contains("src/"),
                "{what}: internals leaked: {text}"
            );
        }
    }
    // Still serving.
    let (status, resp) = send(&f.app, features(r#"{"target_features": ["simple_feature"], "keys": [{"id": "test-id-2"}], "udf_args": {"simple_feature": {"multiplier": 2}}}"#)).await;
    assert_eq!(status, 200);
    assert!(body_text(resp).await.contains("\"value\":4.0"));
}
