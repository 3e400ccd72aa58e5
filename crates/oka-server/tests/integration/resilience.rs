//! Deadlines, load shedding, auth, reload, per-worker spread and graceful shutdown.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use oka_server::Limits;
use oka_server::auth::ApiKeys;
use oka_server::udf_runtime::SpecLoad;
use serde_json::json;

use super::{SPEC, body_json, body_text, fixture, fixture_custom, fixture_with, get, post, send};

const SEED: &str = r#"{"target_features": ["simple_feature"], "keys": [{"id": "test-id-21"}], "udf_args": {"simple_feature": {"multiplier": 2.0}}}"#;

#[tokio::test]
async fn slow_store_gives_504_within_the_deadline() {
    let f = fixture_with(Limits {
        default_deadline: Duration::from_millis(150),
        ..Limits::default()
    })
    .await;
    f.store.delay_ms.store(2_000, Ordering::SeqCst);
    let started = Instant::now();
    let (status, resp) = send(&f.app, post("/v1/features", SEED)).await;
    let took = started.elapsed();
    assert_eq!(status, 504);
    assert_eq!(body_json(resp).await["error"]["code"], "deadline_exceeded");
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_millis(400),
        "took {took:?}"
    );

    // The header overrides the default, and the body field too.
    let started = Instant::now();
    let req = Request::post("/v1/features")
        .header("x-oka-deadline-ms", "50")
        .body(Body::from(SEED))
        .unwrap();
    let (status, _) = send(&f.app, req).await;
    assert_eq!(status, 504);
    assert!(
        started.elapsed() < Duration::from_millis(140),
        "header deadline: {:?}",
        started.elapsed()
    );
    f.store.delay_ms.store(100, Ordering::SeqCst);
    let body = SEED.replace("\"keys\"", "\"deadline_ms\": 1000, \"keys\"");
    let (status, resp) = send(&f.app, post("/v1/features", body)).await;
    assert_eq!(status, 200, "{}", body_text(resp).await);
    // A whole number written as a float is one (JSON Schema's `integer` takes it
    // too); a fraction is not.
    let body = SEED.replace("\"keys\"", "\"deadline_ms\": 1000.0, \"keys\"");
    let (status, resp) = send(&f.app, post("/v1/features", body)).await;
    assert_eq!(status, 200, "{}", body_text(resp).await);
    let body = SEED.replace("\"keys\"", "\"deadline_ms\": 1000.5, \"keys\"");
    let (status, resp) = send(&f.app, post("/v1/features", body)).await;
    let text = body_text(resp).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("whole number of milliseconds"), "{text}");

    let req = Request::post("/v1/features")
        .header("x-oka-deadline-ms", "soon")
        .body(Body::from(SEED))
        .unwrap();
    let (status, resp) = send(&f.app, req).await;
    assert_eq!(status, 400);
    assert!(body_text(resp).await.contains("X-Oka-Deadline-Ms"));
}

#[tokio::test]
async fn overload_sheds_at_once_and_admitted_requests_succeed() {
    let f = fixture_with(Limits {
        max_in_flight: 2,
        ..Limits::default()
    })
    .await;
    f.store.delay_ms.store(200, Ordering::SeqCst);
    let started = Instant::now();
    let calls = (0..20).map(|_| {
        let app = f.app.clone();
        tokio::spawn(async move {
            let (status, resp) = send(&app, post("/v1/features", SEED)).await;
            let retry = resp.headers().get("retry-after").is_some();
            (status, retry, body_text(resp).await)
        })
    });
    let results: Vec<_> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let ok = results.iter().filter(|(s, _, _)| *s == 200).count();
    let shed: Vec<_> = results.iter().filter(|(s, _, _)| *s == 503).collect();
    assert_eq!(ok + shed.len(), 20, "{results:?}");
    assert!(ok >= 2, "admitted requests succeed: {results:?}");
    assert!(shed.len() >= 10, "most of a flood is shed: {results:?}");
    assert!(
        shed.iter()
            .all(|(_, retry, body)| *retry && body.contains("\"overloaded\""))
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "nothing hangs: {:?}",
        started.elapsed()
    );
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    let m = body_text(resp).await;
    assert!(
        m.contains(&format!(
            "oka_http_requests_shed_total{{worker=\"0\"}} {}",
            shed.len()
        )),
        "{m}"
    );
}

#[tokio::test]
async fn auth_needs_keys_with_the_right_scope() {
    let keys =
        ApiKeys::parse("reader-key-0123456789 read\nwriter-key-0123456789 read,write").unwrap();
    let f = fixture_custom(|b| b.keys(keys)).await;
    let (status, resp) = send(&f.app, post("/v1/features", SEED)).await;
    assert_eq!(status, 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let with = |key: &str, uri: &str, body: &str| {
        Request::post(uri)
            .header("authorization", format!("Bearer {key}"))
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let (status, _) = send(&f.app, with("reader-key-0123456789", "/v1/features", SEED)).await;
    assert_eq!(status, 200);
    let (status, _) = send(&f.app, with("wrong-key-0123456789", "/v1/features", SEED)).await;
    assert_eq!(status, 401);
    let ingest = r#"{"feature": "test_feature", "records": [{"id": "z", "value": 1.0}]}"#;
    let (status, resp) = send(&f.app, with("reader-key-0123456789", "/v1/ingest", ingest)).await;
    assert_eq!(status, 403);
    assert_eq!(body_json(resp).await["error"]["code"], "forbidden");
    let req = Request::post("/v1/ingest")
        .header("x-api-key", "writer-key-0123456789")
        .body(Body::from(ingest))
        .unwrap();
    let (status, _) = send(&f.app, req).await;
    assert_eq!(status, 200);
    for path in ["/healthz", "/readyz", "/metrics", "/stats"] {
        let (status, _) = send(&f.admin, get(path)).await;
        assert_eq!(status, 200, "{path} is open");
    }
}

/// `X-API-Key` wins over `Authorization`: one that is present but not readable
/// text (bytes beyond ASCII, over a real socket) is a 401 even beside a valid
/// bearer token, on every port that checks keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_x_api_key_is_refused_beside_a_valid_bearer_token() {
    use std::io::{Read as _, Write as _};
    let keys = ApiKeys::parse("reader-key-0123456789 read,admin").unwrap();
    let f = fixture_custom(|b| b.keys(keys)).await;
    let config = oka_server::runtime::ServerConfig {
        workers: 1,
        pin: false,
        ..oka_server::runtime::ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
    };
    let running = oka_server::runtime::start(&config, f.shared.clone()).unwrap();
    let (addr, admin) = (running.addr, running.admin_addr);
    let answers = tokio::task::spawn_blocking(move || {
        let ask = |addr: std::net::SocketAddr, path: &str, x_api_key: &[u8]| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut req = format!(
                "POST {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\nauthorization: Bearer reader-key-0123456789\r\ncontent-length: {}\r\n",
                SEED.len()
            )
            .into_bytes();
            if !x_api_key.is_empty() {
                req.extend_from_slice(b"x-api-key: ");
                req.extend_from_slice(x_api_key);
                req.extend_from_slice(b"\r\n");
            }
            req.extend_from_slice(b"\r\n");
            req.extend_from_slice(SEED.as_bytes());
            s.write_all(&req).unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
            String::from_utf8_lossy(&out).into_owned()
        };
        [
            ask(addr, "/v1/features", b""),
            ask(addr, "/v1/features", b"reader-key-\xff\xfe0123456789"),
            ask(admin, "/admin/reload", b"\xc3("),
        ]
    })
    .await
    .unwrap();
    assert!(answers[0].starts_with("HTTP/1.1 200 "), "{}", answers[0]);
    for answer in &answers[1..] {
        assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
        assert!(
            answer.contains("`X-API-Key` header is not readable"),
            "{answer}"
        );
    }
    tokio::task::spawn_blocking(move || running.shutdown(Duration::from_secs(5)))
        .await
        .unwrap();
}

#[tokio::test]
async fn reload_swaps_valid_specs_and_keeps_serving_on_invalid_ones() {
    let source = Arc::new(Mutex::new(SPEC.to_owned()));
    let reader = Arc::clone(&source);
    let f = fixture_custom(move |b| {
        b.reload_interval(Duration::ZERO)
            .reloader(Box::new(move || {
                let yaml = reader.lock().unwrap().clone();
                oka_core::Registry::from_yaml("test.yaml", &yaml, &oka_core::NativeUdfs::new())
                    .map(|r| SpecLoad::new(Arc::new(r), ApiKeys::default()))
                    .map_err(|e| oka_server::state::ReloadFailure::new(e.to_string()))
            }))
    })
    .await;
    let value = |body: serde_json::Value| body["results"]["simple_feature"][0][0]["value"].clone();
    let (_, resp) = send(&f.app, post("/v1/features", SEED)).await;
    assert_eq!(value(body_json(resp).await), json!(42.0));

    *source.lock().unwrap() = SPEC.replace(
        "test_feature.value * multiplier",
        "test_feature.value * multiplier * 10.0",
    );
    let (status, resp) = send(
        &f.admin,
        Request::post("/admin/reload").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{}", body_text(resp).await);
    let (_, resp) = send(&f.app, post("/v1/features", SEED)).await;
    assert_eq!(value(body_json(resp).await), json!(420.0));

    *source.lock().unwrap() = SPEC.replace(
        "test_feature.value * multiplier",
        "test_feature.valu * multiplier",
    );
    let (status, resp) = send(
        &f.admin,
        Request::post("/admin/reload").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    let body = body_json(resp).await;
    assert_eq!(body["error"]["code"], "invalid_spec");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("have no field `valu` (did you mean `value`?)"),
        "{body}"
    );
    let (_, resp) = send(&f.app, post("/v1/features", SEED)).await;
    assert_eq!(
        value(body_json(resp).await),
        json!(420.0),
        "the last valid spec keeps serving"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_count_requests_and_shutdown_finishes_in_flight_ones() {
    use std::io::{Read, Write};
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let f = fixture().await;
    let config = oka_server::runtime::ServerConfig {
        workers: 2,
        pin: true,
        ..oka_server::runtime::ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
    };
    let running = oka_server::runtime::start(&config, f.shared.clone()).unwrap();
    let (addr, admin) = (running.addr, running.admin_addr);
    // N workers → N threads, each pinned to its own core (when there are N cores).
    // Threads pin themselves as they start: wait for both.
    let pinned = |w: &[(String, String)]| {
        w.len() == 2 && w.iter().all(|(_, cpus)| !cpus.contains(['-', ',']))
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    let mut workers = pinned_worker_threads();
    while cores >= 2 && !pinned(&workers) && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
        workers = pinned_worker_threads();
    }
    assert_eq!(workers.len(), 2, "{workers:?}");
    if cores >= 2 {
        let mut cpus: Vec<&str> = workers.iter().map(|(_, cpus)| cpus.as_str()).collect();
        cpus.sort_unstable();
        assert_eq!(
            cpus,
            ["0", "1"],
            "each worker pinned to one core: {workers:?}"
        );
    }
    let request = move |path: &str, body: &str| -> (u16, String) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "POST {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        (out[9..12].parse().unwrap(), out)
    };
    tokio::task::spawn_blocking(move || {
        // Concurrent clients spread over both workers.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..25)
                        .map(|_| request("/v1/features", SEED).0)
                        .filter(|s| *s == 200)
                        .count()
                })
            })
            .collect();
        let ok: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(ok, 100);
    })
    .await
    .unwrap();
    // The fixture's own router registered worker 0 first; the server's two come last.
    let all = f.shared.workers();
    let counts: Vec<u64> = all[all.len() - 2..]
        .iter()
        .map(|w| w.requests.load(Ordering::Relaxed))
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 100, "{counts:?}");
    assert!(
        counts.iter().all(|c| *c > 0),
        "both workers served: {counts:?}"
    );

    // A slow request in flight when shutdown starts still completes.
    f.store.delay_ms.store(500, Ordering::SeqCst);
    let slow = std::thread::spawn(move || request("/v1/features", SEED));
    std::thread::sleep(Duration::from_millis(150));
    let shared = f.shared.clone();
    let stopper = std::thread::spawn(move || running.shutdown(Duration::from_secs(5)).clean());
    std::thread::sleep(Duration::from_millis(100));
    assert!(shared.is_draining(), "readiness drops at once");
    let (status, body) = slow.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(stopper.join().unwrap(), "clean shutdown");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no new connections after shutdown"
    );
    assert!(
        std::net::TcpStream::connect(admin).is_err(),
        "admin stopped last"
    );
}

/// (thread name, allowed CPUs) of this process's `oka-worker-*` threads.
fn pinned_worker_threads() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        if !name.starts_with("oka-worker-") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        out.push((name, cpus));
    }
    out
}

#[tokio::test]
async fn reload_needs_an_admin_key_once_one_is_configured_and_is_rate_limited() {
    let keys = || ApiKeys::parse("reader-key-0123456789 read\nops-key-0123456789ab admin").unwrap();
    let f = fixture_custom(|b| {
        b.keys(keys()).reloader(Box::new(move || {
            oka_core::Registry::from_yaml("test.yaml", SPEC, &oka_core::NativeUdfs::new())
                .map(|r| SpecLoad::new(Arc::new(r), keys()))
                .map_err(|e| oka_server::state::ReloadFailure::new(e.to_string()))
        }))
    })
    .await;
    let reload = |key: Option<&str>| {
        let mut req = Request::post("/admin/reload");
        if let Some(k) = key {
            req = req.header("x-api-key", k);
        }
        req.body(Body::empty()).unwrap()
    };
    let (status, resp) = send(&f.admin, reload(None)).await;
    assert_eq!(status, 401, "{}", body_text(resp).await);
    let (status, _) = send(&f.admin, reload(Some("reader-key-0123456789"))).await;
    assert_eq!(status, 403);
    let (status, resp) = send(&f.admin, reload(Some("ops-key-0123456789ab"))).await;
    assert_eq!(status, 200, "{}", body_text(resp).await);
    // A second reload at once is refused with a time to retry.
    let (status, resp) = send(&f.admin, reload(Some("ops-key-0123456789ab"))).await;
    assert_eq!(status, 429);
    assert!(resp.headers().get("retry-after").is_some());
    assert_eq!(body_json(resp).await["error"]["code"], "too_many_reloads");
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    let m = body_text(resp).await;
    assert!(
        m.contains("oka_admin_reloads_total{result=\"ok\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("oka_admin_reloads_total{result=\"refused\"} 3"),
        "{m}"
    );
}

#[tokio::test]
async fn per_feature_metrics_survive_a_reload() {
    let f = fixture_custom(|b| {
        b.reload_interval(Duration::ZERO).reloader(Box::new(|| {
            oka_core::Registry::from_yaml("test.yaml", SPEC, &oka_core::NativeUdfs::new())
                .map(|r| SpecLoad::new(Arc::new(r), ApiKeys::default()))
                .map_err(|e| oka_server::state::ReloadFailure::new(e.to_string()))
        }))
    })
    .await;
    for _ in 0..3 {
        let (status, _) = send(&f.app, post("/v1/features", SEED)).await;
        assert_eq!(status, 200);
    }
    let series = "oka_udf_duration_seconds_count{feature=\"simple_feature\"} 3";
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    assert!(body_text(resp).await.contains(series));
    let (status, _) = send(
        &f.admin,
        Request::post("/admin/reload").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let (_, resp) = send(&f.admin, get("/metrics")).await;
    let m = body_text(resp).await;
    assert!(m.contains(series), "{m}");
}
