//! The `oka` binary as a user runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OKA: &str = env!("CARGO_BIN_EXE_oka");

fn tmp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("oka-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

#[test]
fn demo_spec_validates() {
    let out = Command::new(OKA).arg("demo-spec").output().unwrap();
    assert!(out.status.success());
    let spec = tmp_file("demo.yaml", &String::from_utf8(out.stdout).unwrap());
    let out = Command::new(OKA)
        .args(["validate", "--spec"])
        .arg(&spec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ok (2 entities, 4 features: 1 pipeline, 3 on-demand)"),
        "{stdout}"
    );
}

#[test]
fn invalid_spec_fails_with_paths() {
    let spec = tmp_file(
        "bad.yaml",
        "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}\nfeatures:\n  p: {kind: pipeline, entity: E}\n  q: {kind: on_demand, entity: E, dependencies: [p], udf: {expr: {v: 'p.w'}}}\n",
    );
    let out = Command::new(OKA)
        .args(["validate", "--spec"])
        .arg(&spec)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml: features.q.udf.expr.v: `p.w`: entity `E` has no field `w`"),
        "{stderr}"
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    Some((status, out.split_once("\r\n\r\n")?.1.to_owned()))
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_demo_answers_the_seed_request_and_exits_cleanly_on_sigterm() {
    let (port, admin_port) = (free_port(), free_port());
    let mut server = Server(
        Command::new(OKA)
            .args(["serve", "--demo", "--workers", "2"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while http(admin, "GET", "/readyz", "").map(|(s, _)| s) != Some(200) {
        assert!(Instant::now() < deadline, "server did not become ready");
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "server exited early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let seed = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;
    let (status, body) = http(addr, "POST", "/v1/features", seed).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["results"]["simple_feature"][0][0]["value"], 42.0);
    // The 10,000th demo key exists, the 10,001st does not.
    let two = r#"{"target_features":["test_feature"],"keys":[{"id":"test-id-9999"},{"id":"test-id-10000"}]}"#;
    let (_, body) = http(addr, "POST", "/v1/features", two).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["statuses"]["test_feature"],
        serde_json::json!(["present", "missing"])
    );

    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status:?}");
}
