//! Volga's routes answer as Volga's server did where it answered 200: records in the
//! entity's declaration order, an empty target list, unknown top-level fields and
//! key objects that fit no entity are served (and counted); errors are plain text
//! that Volga's client shows. The native API stays strict.

use axum::body::Body;
use axum::http::Request;
use oka_server::metrics::Leniency;

use super::{body_json, body_text, fixture, post, send};

/// The seed spec answers `TestEntity` in Volga's declaration order
/// (`order: [id, value, timestamp]`), on both APIs, byte for byte.
#[tokio::test]
async fn records_come_in_the_entitys_declared_order() {
    let f = fixture().await;
    let volga = r#"{"target_features": ["simple_feature", "test_feature"], "feature_keys": {"simple_feature": [{"id": "test-id-3"}], "test_feature": [{"id": "test-id-3"}]}, "udf_args": {"simple_feature": {"multiplier": 2.0}}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", volga)).await;
    assert_eq!(status, 200);
    let text = body_text(resp).await;
    for (feature, value) in [("simple_feature", "6.0"), ("test_feature", "3.0")] {
        let prefix = format!(r#""{feature}":[[{{"id":"test-id-3","value":{value},"timestamp":""#);
        assert!(text.contains(&prefix), "{prefix} not in {text}");
    }
    let native = r#"{"target_features":["test_feature"],"keys":[{"id":"test-id-3"}]}"#;
    let (_, resp) = send(&f.app, post("/v1/features", native)).await;
    let text = body_text(resp).await;
    assert!(
        text.contains(r#"[[{"id":"test-id-3","value":3.0,"timestamp":"2025-"#),
        "{text}"
    );
}

/// An empty `target_features` is `{"results": {}, "server_id": …}` on Volga's
/// routes (Volga answered 200), a 400 on the native API.
#[tokio::test]
async fn an_empty_target_list_is_an_empty_answer_on_volgas_routes() {
    let f = fixture().await;
    let req =
        r#"{"target_features": [], "feature_keys": {"simple_feature": [{"id": "test-id-1"}]}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", req)).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    assert_eq!(body["results"], serde_json::json!({}), "{body}");
    assert!(body["server_id"].is_i64(), "{body}");
    assert_eq!(f.shared.metrics.lenient_count(Leniency::EmptyTargets), 1);

    let (status, _) = send(&f.app, post("/v1/features", req)).await;
    assert_eq!(status, 400);
    assert_eq!(f.shared.metrics.lenient_count(Leniency::EmptyTargets), 1);
}

/// Top-level fields Volga's request model does not have are ignored there
/// (pydantic), and here on Volga's routes; the native API names them.
#[tokio::test]
async fn unknown_top_level_fields_are_ignored_on_volgas_routes_only() {
    let f = fixture().await;
    let req = r#"{"target_features": ["test_feature"], "feature_keys": {"test_feature": [{"id": "test-id-7"}]}, "request_id": "abc", "trace": {"x": [1, 2]}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", req)).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    assert_eq!(body["results"]["test_feature"][0][0]["value"], 7.0);
    assert_eq!(f.shared.metrics.lenient_count(Leniency::UnknownField), 1);

    let (status, resp) = send(
        &f.app,
        post("/v1/features", req.replace("feature_keys", "keys")),
    )
    .await;
    assert_eq!(status, 400);
    let body = body_json(resp).await;
    assert_eq!(body["error"]["code"], "unknown_field", "{body}");
    // A body that is not a JSON object stays malformed on Volga's routes too.
    let (status, resp) = send(&f.app, post("/on_demand_compute", "[1, 2]")).await;
    assert_eq!(status, 400);
    assert!(body_text(resp).await.starts_with("malformed_request: "));
}

/// A key object of the wrong type, with a field no entity has, or without the key
/// field is `null` with status `invalid_key` on Volga's routes (Volga looked it
/// up, found nothing and answered null); the other keys are served. The native
/// API refuses the request.
#[tokio::test]
async fn malformed_keys_are_null_on_volgas_routes_and_refused_natively() {
    let f = fixture().await;
    let bad_keys = [
        r#"{"id": 5}"#,
        r#"{"id": "test-id-5", "region": "eu"}"#,
        r#"{"name": "test-id-5"}"#,
        r#"{}"#,
    ];
    for bad in bad_keys {
        let before = f.shared.metrics.lenient_count(Leniency::InvalidKey);
        let keys = format!(r#"[{{"id": "test-id-1"}}, {bad}, {{"id": "test-id-2"}}]"#);
        let req = format!(
            r#"{{"target_features": ["simple_feature", "test_feature"], "feature_keys": {{"simple_feature": {keys}, "test_feature": {keys}}}, "udf_args": {{"simple_feature": {{"multiplier": 3.0}}}}}}"#
        );
        let (status, resp) = send(&f.app, post("/on_demand_compute", req.clone())).await;
        assert_eq!(status, 200, "{bad}");
        let body = body_json(resp).await;
        for (feature, m) in [("simple_feature", 3.0), ("test_feature", 1.0)] {
            let results = body["results"][feature].as_array().unwrap();
            assert_eq!(results.len(), 3, "{bad}: {body}");
            assert_eq!(results[0][0]["value"], m, "{bad}: {body}");
            assert!(results[1].is_null(), "{bad}: {body}");
            assert_eq!(results[2][0]["value"], 2.0 * m, "{bad}: {body}");
            assert_eq!(
                body["statuses"][feature],
                serde_json::json!(["present", "invalid_key", "present"]),
                "{bad}"
            );
        }
        assert_eq!(
            f.shared.metrics.lenient_count(Leniency::InvalidKey),
            before + 1,
            "one request, counted once: {bad}"
        );

        let native = format!(r#"{{"target_features": ["test_feature"], "keys": [{bad}]}}"#);
        let (status, resp) = send(&f.app, post("/v1/features", native)).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body_json(resp).await["error"]["code"], "invalid_key");
    }

    // Every key bad: every answer null, still a 200.
    let req = r#"{"target_features": ["simple_feature"], "feature_keys": {"simple_feature": [{"id": 1}, {"x": "y"}]}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", req)).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    assert_eq!(
        body["results"]["simple_feature"],
        serde_json::json!([null, null])
    );
    assert_eq!(
        body["statuses"]["simple_feature"],
        serde_json::json!(["invalid_key", "invalid_key"])
    );
}

/// The leniency is counted where operators look: `/metrics`.
#[tokio::test]
async fn lenient_requests_are_counted_in_the_metrics() {
    let f = fixture().await;
    let req = r#"{"target_features": [], "extra": 1}"#;
    let (status, _) = send(&f.app, post("/on_demand_compute", req)).await;
    assert_eq!(status, 200);
    let (_, resp) = send(
        &f.admin,
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    let text = body_text(resp).await;
    for line in [
        r#"oka_volga_lenient_requests_total{case="empty_targets"} 1"#,
        r#"oka_volga_lenient_requests_total{case="unknown_field"} 1"#,
        r#"oka_volga_lenient_requests_total{case="invalid_key"} 0"#,
    ] {
        assert!(text.contains(line), "{line} not in the metrics");
    }
}

/// Volga's client parses every answer as JSON into its response model, which
/// needs `results` and `server_id`: a JSON error body would reach the user as a
/// validation error about a missing `results`. Plain text makes the client raise
/// with the body in its message. A client that asks for JSON gets Oka's JSON
/// error; the native API always answers JSON.
#[tokio::test]
async fn volga_route_errors_are_plain_text_unless_json_is_asked_for() {
    let f = fixture().await;
    let req = r#"{"target_features": ["simple_featur"], "feature_keys": {"simple_featur": [{"id": "a"}]}}"#;
    let volga = |accept: Option<&str>| {
        let mut b = Request::post("/on_demand_compute").header("content-type", "application/json");
        if let Some(a) = accept {
            b = b.header("accept", a);
        }
        b.body(Body::from(req)).unwrap()
    };
    for accept in [None, Some("*/*"), Some("text/plain")] {
        let (status, resp) = send(&f.app, volga(accept)).await;
        assert_eq!(status, 404, "{accept:?}");
        assert_eq!(
            resp.headers()["content-type"],
            "text/plain; charset=utf-8",
            "{accept:?}"
        );
        assert_eq!(
            body_text(resp).await,
            "unknown_feature: unknown feature `simple_featur` in `target_features`\n"
        );
    }
    for accept in ["application/json", "text/html, application/json;q=0.9"] {
        let (status, resp) = send(&f.app, volga(Some(accept))).await;
        assert_eq!(status, 404);
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert_eq!(body_json(resp).await["error"]["code"], "unknown_feature");
    }
    // The GET route too, and a store outage keeps its status and Retry-After.
    let (status, resp) = send(
        &f.app,
        Request::get("/on_demand_compute/%7Bnot%20json")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body_text(resp).await.starts_with("malformed_request: "));
    f.store
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let ok = r#"{"target_features": ["test_feature"], "feature_keys": {"test_feature": [{"id": "test-id-1"}]}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", ok)).await;
    assert_eq!(status, 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(
        body_text(resp).await,
        "store_unavailable: the feature store is unavailable\n"
    );
    let native = r#"{"target_features": ["test_feature"], "keys": [{"id": "test-id-1"}]}"#;
    let (status, resp) = send(&f.app, post("/v1/features", native)).await;
    assert_eq!(status, 503);
    assert_eq!(resp.headers()["content-type"], "application/json");
}
