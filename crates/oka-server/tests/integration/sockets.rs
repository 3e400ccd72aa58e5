//! Real sockets: N workers on one port, requests over TCP, clean shutdown.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use oka_server::runtime::{ServerConfig, start};

use super::fixture;

/// One HTTP/1.1 request over a fresh connection; returns (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_share_a_port_and_shut_down() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let f = fixture().await;
    let config = ServerConfig {
        workers: 3,
        pin: false,
        ..ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
    };
    let running = start(&config, f.shared.clone()).unwrap();
    let addr = running.addr;
    let admin = running.admin_addr;
    let results = tokio::task::spawn_blocking(move || {
        let mut ids = std::collections::BTreeSet::new();
        for _ in 0..60 {
            let (status, body) = http(
                addr,
                "POST",
                "/v1/features",
                r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#,
            );
            assert_eq!(status, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["results"]["simple_feature"][0][0]["value"], 42.0);
            ids.insert(v["server_id"].as_str().unwrap().to_owned());
        }
        let (status, _) = http(admin, "GET", "/healthz", "");
        assert_eq!(status, 200);
        assert!(running.shutdown(Duration::from_secs(5)).clean());
        ids
    })
    .await
    .unwrap();
    // The kernel spreads 60 connections over 3 SO_REUSEPORT listeners; all land on
    // one of our worker ids.
    assert!(!results.is_empty());
    assert!(
        results.iter().all(|id| id
            .rsplit('/')
            .next()
            .is_some_and(|w| ["0", "1", "2"].contains(&w))),
        "{results:?}"
    );
    assert!(
        results.len() >= 2,
        "connections should reach more than one worker: {results:?}"
    );
    // After shutdown nothing accepts.
    assert!(
        TcpStream::connect(addr).is_err(),
        "listener still open after shutdown"
    );
}
