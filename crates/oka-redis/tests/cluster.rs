//! `redis-cluster://` against a three-node Redis Cluster the test starts itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Node(Child, std::path::PathBuf);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn redis_cluster_passes_the_conformance_suite() {
    if common::redis_url().is_none() {
        return;
    }
    let mut nodes = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..3 {
        // Cluster bus ports are port + 10000: keep ports low enough.
        let port = loop {
            let p = free_port();
            if p < 55_000 {
                break p;
            }
        };
        let dir = std::env::temp_dir().join(format!("oka-cluster-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
            ])
            .args([
                "--cluster-config-file",
                "nodes.conf",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        nodes.push(Node(child, dir));
        addrs.push(format!("127.0.0.1:{port}"));
    }
    for a in &addrs {
        let port: u16 = a.rsplit(':').next().unwrap().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "node {a} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(created.success(), "redis-cli --cluster create failed");
    // Wait for the cluster to agree.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new("redis-cli")
            .args([
                "-p",
                addrs[0].rsplit(':').next().unwrap(),
                "cluster",
                "info",
            ])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "cluster did not reach state ok");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!(
        "redis-cluster://{}?node={}&node={}",
        addrs[0], addrs[1], addrs[2]
    );
    let store = common::connect(&url).await;
    oka_storage::conformance::run_all(&store).await;
    drop(nodes);
}
