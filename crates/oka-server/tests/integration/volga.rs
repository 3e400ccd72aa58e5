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
/// `results: Dict[str, List[Optional[List[Any]]]]` and `server_id: int`. Timestamps
/// are naive UTC as Volga's server wrote them (Python's `datetime.isoformat()` of a
/// naive datetime: `YYYY-MM-DDTHH:MM:SS[.ffffff]`, no offset), so that client code
/// comparing them with naive datetimes keeps working.
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
        assert!(is_naive_iso(ts), "timestamp {ts} is not Volga's naive form");
    }
}

/// `YYYY-MM-DDTHH:MM:SS` with an optional `.ffffff`, nothing after.
fn is_naive_iso(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (ts.len() == 19 || (ts.len() == 26 && b[19] == b'.' && digits(20..26)))
        && digits(0..4)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
}

/// The native API keeps RFC 3339 with the offset; Volga's routes answer the same
/// instant as naive UTC.
#[tokio::test]
async fn volga_routes_write_naive_utc_and_the_native_api_keeps_the_offset() {
    let f = fixture().await;
    let native = r#"{"target_features":["test_feature"],"keys":[{"id":"test-id-5"}]}"#;
    let (status, resp) = send(&f.app, post("/v1/features", native)).await;
    assert_eq!(status, 200);
    let rfc = body_json(resp).await["results"]["test_feature"][0][0]["timestamp"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(rfc.ends_with("+00:00"), "{rfc}");
    let volga = r#"{"target_features": ["test_feature"], "feature_keys": {"test_feature": [{"id": "test-id-5"}]}}"#;
    let (status, resp) = send(&f.app, post("/on_demand_compute", volga)).await;
    assert_eq!(status, 200);
    let naive = body_json(resp).await["results"]["test_feature"][0][0]["timestamp"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(is_naive_iso(&naive), "{naive}");
    let same = rfc.trim_end_matches("+00:00");
    assert_eq!(naive, same.trim_end_matches(".000000"), "the same instant");
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

/// How a URL library that leaves valid `%XX` sequences alone (aiohttp's yarl,
/// which Volga's `OnDemandClient` goes through) sends a raw JSON path: every
/// other byte that may not stand in a path is encoded, valid escapes pass as
/// they are, and `?` or `#` end the path (the rest is a query or a fragment,
/// never seen as path).
fn as_volgas_client_sends(json: &str) -> String {
    let path = &json[..json.find(['?', '#']).unwrap_or(json.len())];
    let mut out = String::new();
    for (i, c) in path.char_indices() {
        let escape = path.as_bytes().get(i + 1..i + 3);
        if c == '%' && escape.is_some_and(|e| e.iter().all(u8::is_ascii_hexdigit)) {
            out.push('%');
        } else {
            out.push_str(&yarl_quote(c.encode_utf8(&mut [0; 4])));
        }
    }
    out
}

/// What a key in Volga's GET path becomes, by how the path was written: each
/// odd key is stored (value = its row's number), then asked for by POST, by a
/// GET whose JSON is percent-encoded whole (`%` too), and by a GET as Volga's
/// own client sends it. Oka decodes the path exactly once; keys holding a `%XX`
/// sequence, `?` or `#` need POST (or full encoding), as docs/api.md says.
#[tokio::test]
async fn odd_keys_by_post_by_encoded_get_and_as_volgas_client_sends_them() {
    /// The outcome of a request for one key.
    #[derive(Debug, PartialEq)]
    enum Got {
        /// The key's own record.
        Exact,
        /// The record of another key.
        Key(&'static str),
        /// This status, no result.
        Status(u16),
    }
    use Got::*;
    // (key, as Volga's client sends it)
    let table: &[(&str, Got)] = &[
        ("a b", Exact),
        ("a%20b", Key("a b")),
        ("100%", Exact),
        ("100%zz", Exact),
        ("a+b", Exact),
        ("a/b", Exact),
        ("a?b", Status(400)),
        ("a#b", Status(400)),
        ("héllo ✓", Exact),
        ("q\"uote\\", Exact),
        ("{\"json\": [1]}", Exact),
    ];
    let f = fixture().await;
    let records: Vec<Value> = table
        .iter()
        .enumerate()
        .map(|(i, (k, _))| serde_json::json!({"id": k, "value": 1000.0 + i as f64}))
        .collect();
    let ingest = serde_json::json!({"feature": "test_feature", "records": records}).to_string();
    let (status, _) = send(&f.app, post("/v1/ingest", ingest)).await;
    assert_eq!(status, 200);
    let value_of = |key: &str| 1000.0 + table.iter().position(|(k, _)| *k == key).unwrap() as f64;
    for (key, volga) in table {
        let req = serde_json::json!({
            "target_features": ["test_feature"],
            "feature_keys": {"test_feature": [{"id": key}]},
            "query_args": null,
            "udf_args": null,
        })
        .to_string();
        let ask = |uri: String, body: Option<String>| {
            let app = f.app.clone();
            async move {
                let r = match body {
                    Some(b) => post(&uri, b),
                    None => get(&uri),
                };
                let (status, resp) = send(&app, r).await;
                if status != 200 {
                    let text = super::body_text(resp).await;
                    assert!(text.starts_with("malformed_request: "), "{text}");
                    return Status(status);
                }
                let body = body_json(resp).await;
                let record = &body["results"]["test_feature"][0][0];
                let got = record["id"].as_str().unwrap_or_default().to_owned();
                let want = value_of(&got);
                assert_eq!(record["value"], want, "{body}");
                if got == *key {
                    Exact
                } else {
                    Key(table
                        .iter()
                        .find(|(k, _)| *k == got)
                        .map_or("?", |(k, _)| k))
                }
            }
        };
        let by_post = ask("/on_demand_compute".into(), Some(req.clone())).await;
        assert_eq!(by_post, Exact, "POST of {key:?}");
        let encoded = format!("/on_demand_compute/{}", yarl_quote(&req));
        assert_eq!(ask(encoded, None).await, Exact, "encoded GET of {key:?}");
        let raw = format!("/on_demand_compute/{}", as_volgas_client_sends(&req));
        assert_eq!(
            &ask(raw, None).await,
            volga,
            "GET of {key:?} as Volga's client sends it"
        );
    }
}
