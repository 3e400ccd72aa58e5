//! `rediss://` against a TLS-only redis-server with a test CA made by `openssl`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oka_core::{EntityKey, Query, Row, Timestamp, Value};
use oka_redis::{RedisOptions, RedisStore};
use oka_storage::FeatureStore;

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success(), "openssl {args:?}");
}

/// A CA and a server certificate for 127.0.0.1, in a fresh directory.
fn certificates() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("oka-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=oka-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ],
    );
    dir
}

#[tokio::test]
async fn rediss_with_a_custom_ca() {
    if common::redis_url().is_none() {
        return;
    }
    let dir = certificates();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--tls-auth-clients", "no"])
        .arg("--tls-cert-file")
        .arg(dir.join("server.crt"))
        .arg("--tls-key-file")
        .arg(dir.join("server.key"))
        .arg("--tls-ca-cert-file")
        .arg(dir.join("ca.crt"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "TLS redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = format!("rediss://127.0.0.1:{port}");

    // Trusting the test CA: reads and writes work.
    let options = RedisOptions {
        tls_ca_file: Some(dir.join("ca.crt")),
        ..Default::default()
    };
    let store = RedisStore::connect(&url, options).await.unwrap();
    let r = oka_storage::conformance::registry();
    let f = r.feature(r.feature_id("conformance_feature").unwrap());
    let key = EntityKey::encode(&[Value::from("tls")]);
    let row = Row::new(
        Timestamp(5),
        vec![
            Value::from("tls"),
            Value::Timestamp(Timestamp(5)),
            Value::Float(1.5),
            Value::Null,
            Value::Null,
        ],
    );
    store.write(f, &[(key.clone(), row.clone())]).await.unwrap();
    assert_eq!(
        store.read(f, &[key], &Query::Latest).await.unwrap(),
        vec![vec![row]]
    );

    // Trusting only the system's CAs, the self-signed server is refused.
    let short = RedisOptions {
        connect_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let e = RedisStore::connect(&url, short).await.unwrap_err();
    assert_eq!(e.kind, oka_storage::StoreErrorKind::Unavailable, "{e}");

    // A CA file with a plain redis:// url is a configuration error.
    let e = RedisStore::connect(
        "redis://127.0.0.1:1",
        RedisOptions {
            tls_ca_file: Some(dir.join("ca.crt")),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("not rediss://"), "{e}");

    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
