//! The console (`/ui` on the admin port): its guard, its headers, its live
//! statistics, and the try-it form's request over real sockets. The pages
//! themselves are tested in a real browser by tests/console/run.sh.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use base64::Engine as _;
use oka_server::Limits;
use oka_server::auth::ApiKeys;
use oka_server::runtime::{ServerConfig, start};

use super::{body_json, body_text, fixture, fixture_custom, get, send};

const READER: &str = "reader-key-0123456789";
const ADMIN: &str = "admin-key-0123456789a";
const SEED: &str = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;

fn keys() -> ApiKeys {
    ApiKeys::parse(&format!("{READER} read\n{ADMIN} admin\n")).unwrap()
}

fn with(uri: &str, header: &str, value: &str) -> Request<Body> {
    Request::get(uri)
        .header(header, value)
        .body(Body::empty())
        .unwrap()
}

fn basic(user: &str, password: &str) -> String {
    let c = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {c}")
}

#[tokio::test]
async fn with_admin_keys_every_console_route_needs_one() {
    let f = fixture_custom(|b| b.keys(keys())).await;
    for path in [
        "/ui",
        "/ui/app.js",
        "/ui/api/catalog",
        "/ui/api/live",
        "/ui/api/lineage",
    ] {
        let (status, resp) = send(&f.admin, get(path)).await;
        assert_eq!(status, 401, "{path}");
        let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.starts_with("Basic realm=\"Oka console\""),
            "{challenge}"
        );
        assert!(
            resp.headers().contains_key("content-security-policy"),
            "{path}"
        );
        let (status, _) = send(&f.admin, with(path, "x-api-key", READER)).await;
        assert_eq!(status, 403, "a read key is not an admin key: {path}");
        let (status, _) = send(
            &f.admin,
            with(path, "authorization", &format!("Bearer {ADMIN}")),
        )
        .await;
        assert_eq!(status, 200, "{path}");
        // Browsers send the key as Basic auth's password.
        let (status, _) = send(&f.admin, with(path, "authorization", &basic("ops", ADMIN))).await;
        assert_eq!(status, 200, "{path}");
    }
    let (status, _) = send(
        &f.admin,
        with("/ui", "authorization", &basic("ops", READER)),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = send(&f.admin, with("/ui", "authorization", &basic(ADMIN, ""))).await;
    assert_eq!(status, 200, "a key given as the user name alone");
    // `X-API-Key` wins over a Basic credential, as over a bearer token elsewhere.
    let both = Request::get("/ui")
        .header("x-api-key", READER)
        .header("authorization", basic("ops", ADMIN))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&f.admin, both).await.0, 403);
    let (status, resp) = send(&f.admin, with("/ui", "authorization", "Basic %%%")).await;
    assert_eq!(status, 401);
    let message = body_json(resp).await["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("base64") && message.contains("password"),
        "{message}"
    );
    // The rest of the admin port is as before: its reads stay open.
    assert_eq!(send(&f.admin, get("/stats")).await.0, 200);
}

#[tokio::test]
async fn the_page_is_embedded_and_locked_down() {
    let f = fixture().await;
    let (status, resp) = send(&f.admin, get("/ui")).await;
    assert_eq!(status, 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["x-frame-options"], "DENY");
    let page = body_text(resp).await;
    assert!(page.contains(r#"<script src="/ui/app.js" defer></script>"#));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from elsewhere"
    );
    let (status, resp) = send(&f.admin, get("/ui/app.js")).await;
    assert_eq!(status, 200);
    let script = body_text(resp).await;
    assert!(
        !script.contains("innerHTML") && !script.contains("eval("),
        "text is set as text"
    );
    // Nothing on the console writes.
    let (status, _) = send(
        &f.admin,
        Request::post("/ui/api/live").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn per_feature_statistics_are_kept_only_while_a_console_watches() {
    let f = fixture().await;
    let request = || super::post("/v1/features", SEED);
    assert_eq!(send(&f.app, request()).await.0, 200);
    let (_, resp) = send(&f.admin, get("/ui/api/live")).await;
    let live = body_json(resp).await;
    assert_eq!(
        live["features"],
        serde_json::json!([]),
        "nothing kept before anyone looked"
    );
    assert!(
        f.shared.stats.watched(),
        "asking for live statistics starts the watch"
    );
    assert_eq!(send(&f.app, request()).await.0, 200);
    let (_, resp) = send(&f.admin, get("/ui/api/live")).await;
    let live = body_json(resp).await;
    let names: Vec<_> = live["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["simple_feature"]);
    // A key whose UDF fails counts as an error of its feature once its second is
    // complete (the window holds complete seconds only).
    let failing = r#"{"target_features":["ratio_feature"],"keys":[{"id":"test-id-13"}]}"#;
    let (_, resp) = send(&f.app, super::post("/v1/features", failing)).await;
    assert_eq!(
        body_json(resp).await["statuses"]["ratio_feature"][0],
        "error"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, resp) = send(&f.admin, get("/ui/api/live")).await;
    let live = body_json(resp).await;
    let ratio = live["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "ratio_feature")
        .unwrap();
    assert!(ratio["errors_per_s"].as_f64().unwrap() > 0.0, "{ratio}");
    assert!(ratio["qps"].as_f64().unwrap() > 0.0, "{ratio}");
    // The same windows as `/stats`.
    let (_, resp) = send(&f.admin, get("/stats")).await;
    let stats = body_json(resp).await;
    assert_eq!(live["stats"]["window_s"], stats["window_s"]);
    assert_eq!(live["store"]["available"], true);
    assert_eq!(live["cache"], serde_json::Value::Null);
}

#[tokio::test]
async fn the_lineage_has_every_feature_and_dependency() {
    let f = fixture().await;
    let (_, resp) = send(&f.admin, get("/ui/api/lineage")).await;
    let g = body_json(resp).await;
    let registry = &f.shared.loaded.load().registry;
    let nodes = g["nodes"].as_array().unwrap();
    let features = nodes.iter().filter(|n| !n["feature"].is_null()).count();
    assert_eq!(features, registry.features().len());
    let dependencies: usize = registry
        .features()
        .iter()
        .map(|x| match &x.kind {
            oka_core::feature::FeatureKind::OnDemand { dependencies, .. } => dependencies.len(),
            oka_core::feature::FeatureKind::Pipeline { .. } => 1, // from its source
        })
        .sum();
    assert_eq!(g["edges"].as_array().unwrap().len(), dependencies);
}

/// One request over a fresh connection; (status, body).
fn http(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "POST /ui/api/try HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\nconnection: close\r\n{head}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out[9..12].parse().unwrap();
    (
        status,
        out.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_it_goes_to_the_serving_port_with_the_callers_key() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let limits = Limits {
        max_body_bytes: 4096,
        ..Limits::default()
    };
    let f = fixture_custom(|b| b.keys(keys()).limits(limits)).await;
    let config = ServerConfig {
        workers: 1,
        pin: false,
        ..ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
    };
    let running = start(&config, f.shared.clone()).unwrap();
    let (admin, serving) = (running.admin_addr, running.addr);
    let console = format!("authorization: Bearer {ADMIN}\r\n");
    tokio::task::spawn_blocking(move || {
        let (status, body) = http(
            admin,
            &format!("{console}x-oka-try-key: {READER}\r\n"),
            SEED.as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let tried: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(tried["url"], format!("http://{serving}/v1/features"));
        assert_eq!(tried["status"], 200);
        assert!(
            tried["server_timing"]
                .as_str()
                .unwrap()
                .contains("storage;dur=")
        );
        let answer: serde_json::Value =
            serde_json::from_str(tried["body"].as_str().unwrap()).unwrap();
        assert_eq!(answer["results"]["simple_feature"][0][0]["value"], 42.0);
        // The console's admin key is not passed on: without a key of its own the
        // serving port refuses, and the page is shown its answer.
        let (status, body) = http(admin, &console, SEED.as_bytes());
        assert_eq!(status, 200, "{body}");
        let tried: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(tried["status"], 401, "{tried}");
        // A key that is not text, and a body over the serving port's limit.
        let (status, body) = http(
            admin,
            &format!("{console}x-oka-try-key: \u{e9}t\u{e9}\r\n"),
            SEED.as_bytes(),
        );
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("X-Oka-Try-Key"), "{body}");
        let big = vec![b' '; 10_000];
        let (status, body) = http(admin, &console, &big);
        assert_eq!(status, 413, "{body}");
        // Without the console's key, nothing is sent.
        let (status, _) = http(
            admin,
            &format!("x-oka-try-key: {READER}\r\n"),
            SEED.as_bytes(),
        );
        assert_eq!(status, 401);
    })
    .await
    .unwrap();
    tokio::task::spawn_blocking(move || running.shutdown(Duration::from_secs(5)))
        .await
        .unwrap();
}

#[tokio::test]
async fn try_it_with_the_serving_port_down_says_so_not_that_the_store_is() {
    // The fixture's serving port never listens: the console cannot reach it.
    let f = fixture().await;
    let req = Request::post("/ui/api/try").body(Body::from(SEED)).unwrap();
    let (status, resp) = send(&f.admin, req).await;
    assert_eq!(status, 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body = body_json(resp).await;
    assert_eq!(body["error"]["code"], "serving_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serving port"),
        "{body}"
    );
}
