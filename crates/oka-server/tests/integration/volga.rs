//! Volga wire compatibility: a recorded Volga client payload, sent as Volga's
//! `OnDemandClient` sends it (JSON percent-encoded into a GET path), and as a POST.

use serde_json::Value;

use super::{body_json, fixture, get, post, send};

/// The request from Volga's `on_demand/client.py` docstring, byte for byte as
/// pydantic's `request.json()` writes it.
const VOLGA_REQUEST: &str = r#"{"target_features": ["simple_feature"], "feature_keys": {"simple_feature": [{"id": "test-id-0"}, {"id": "test-id-1"}, {"id": "test-id-2"}]}, "query_args": null, "udf_args": {"simple_feature": {"multiplier": 2.0}}}"#;

/// Percent-encodes a path segment the way aiohttp/yarl does: unreserved and
/// sub-delimiter characters, `:` and `@` stay; the rest is encoded.
fn yarl_quote(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c) {
            out.push(c);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What Volga's client does with the response: `OnDemandResponse(**json)`, where
/// `results: Dict[str, List[Optional[List[Any]]]]` and `server_id: int`; the test
/// suite then parses timestamps with Python 3.10's `datetime.fromisoformat`, which
/// needs `YYYY-MM-DDTHH:MM:SS[.ffffff]+HH:MM` (no `Z`).
fn check_volga_shape(body: &Value) {
    assert!(
        body["server_id"].is_i64(),
        "server_id must be an int for Volga's client: {body}"
    );
    let results = body["results"]["simple_feature"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for (i, entry) in results.iter().enumerate() {
        let records = entry.as_array().unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(r["id"], format!("test-id-{i}"));
        assert_eq!(r["value"], i as f64 * 2.0);
        let ts = r["timestamp"].as_str().unwrap();
        let shape_ok = ts.len() == 32
            && ts.as_bytes()[10] == b'T'
            && ts.ends_with("+00:00")
            && ts.as_bytes()[19] == b'.';
        assert!(shape_ok, "timestamp {ts} is not fromisoformat-compatible");
    }
}

#[tokio::test]
async fn volga_get_request_works_unchanged() {
    let f = fixture().await;
    let uri = format!("/on_demand_compute/{}", yarl_quote(VOLGA_REQUEST));
    let (status, resp) = send(&f.app, get(&uri)).await;
    assert_eq!(status, 200);
    check_volga_shape(&body_json(resp).await);
}

#[tokio::test]
async fn volga_post_request_works() {
    let f = fixture().await;
    let (status, resp) = send(&f.app, post("/on_demand_compute", VOLGA_REQUEST)).await;
    assert_eq!(status, 200);
    check_volga_shape(&body_json(resp).await);
}

#[tokio::test]
async fn volga_locustfile_request_works() {
    // volga-ops' locustfile: one random key, multiplier 2.0, query_args None.
    let f = fixture().await;
    let req = r#"{"target_features": ["simple_feature"], "feature_keys": {"simple_feature": [{"id": "test-id-42"}]}, "query_args": null, "udf_args": {"simple_feature": {"multiplier": 2.0}}}"#;
    let (status, resp) = send(
        &f.app,
        get(&format!("/on_demand_compute/{}", yarl_quote(req))),
    )
    .await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    assert_eq!(body["results"]["simple_feature"][0][0]["value"], 84.0);
}

#[tokio::test]
async fn slash_in_a_key_does_not_break_the_get_route() {
    // Volga's GET route 404'd on any `/` in the JSON; the wildcard route takes it.
    let f = fixture().await;
    let req = r#"{"target_features": ["simple_feature"], "feature_keys": {"simple_feature": [{"id": "a/b"}]}}"#;
    let raw = yarl_quote(req).replace("%2F", "/");
    let (status, resp) = send(&f.app, get(&format!("/on_demand_compute/{raw}"))).await;
    assert_eq!(status, 200);
    let body = body_json(resp).await;
    assert_eq!(body["statuses"]["simple_feature"][0], "missing");
}

#[tokio::test]
async fn volga_chained_request_with_keys_on_the_dependency() {
    let f = fixture().await;
    let req = r#"{"target_features": ["chained_feature"], "feature_keys": {"simple_feature": [{"id": "test-id-3"}]}, "query_args": null, "udf_args": {"simple_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 1.0}}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", req)).await;
    assert_eq!(status, 200);
    assert_eq!(
        body_json(resp).await["results"]["chained_feature"][0][0]["value"],
        7.0
    );
}
