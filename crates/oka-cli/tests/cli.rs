//! The `oka` binary as a user runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{OKA, Oka, Server, free_port, http, redis_server, service_url, start_oka, tmp_file};

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
        stderr.contains(
            "bad.yaml: features.q.udf.expr.v: `p.w`: records of `p` (entity `E`) have no field `w`"
        ),
        "{stderr}"
    );
}

#[test]
fn serve_demo_answers_the_seed_request_and_exits_cleanly_on_sigterm() {
    let Oka {
        mut server, addr, ..
    } = start_oka(&["--demo", "--workers", "2"], None);
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

const SEED_SPEC: &str = include_str!("../../../examples/seed/spec.yaml");

fn seed_file(name: &str, rows: usize) -> std::path::PathBuf {
    let body: String = (0..rows)
        .map(|i| format!("{{\"id\":\"test-id-{i}\",\"value\":{i}.0}}\n"))
        .collect();
    tmp_file(name, &body)
}

#[test]
fn ingest_reports_rejections_and_exits_non_zero() {
    let spec = tmp_file("seed.yaml", SEED_SPEC);
    let good = seed_file("good.jsonl", 50);
    let out = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "test_feature",
            "--spec",
        ])
        .arg(&spec)
        .arg("--file")
        .arg(&good)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wrote 50 records to `test_feature`") && stdout.contains("rejected 0"),
        "{stdout}"
    );

    let bad = tmp_file("bad.csv", "id,value\na,1.5\nb,oops\n,2\n");
    let out = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "test_feature",
            "--spec",
        ])
        .arg(&spec)
        .arg("--file")
        .arg(&bad)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success());
    assert!(
        stdout.contains("wrote 1 records") && stdout.contains("rejected 2"),
        "{stdout}"
    );
    assert!(
        stderr.contains("line 3: field `value`: `oops` is not a number"),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 4: missing key field `id`"),
        "{stderr}"
    );
}

/// The seed workload end to end: `oka ingest` of 10,000 rows into `store`, then
/// `oka serve` answers from them. `ingest_args` go to ingest only, `store_args` to
/// both.
fn ingest_then_serve(store: &str, store_args: &[&str], ingest_args: &[&str]) {
    let spec = tmp_file("seed-store.yaml", SEED_SPEC);
    let data = seed_file("seed.jsonl", 10_000);
    let out = Command::new(OKA)
        .args(["ingest", "--feature", "test_feature", "--store", store])
        .args(store_args)
        .args(ingest_args)
        .arg("--spec")
        .arg(&spec)
        .arg("--file")
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("wrote 10000 records"), "{stdout}");

    let spec_arg = spec.display().to_string();
    let mut args = vec!["--workers", "2", "--store", store, "--spec", &spec_arg];
    args.extend_from_slice(store_args);
    let Oka {
        server: _server,
        addr,
        ..
    } = start_oka(&args, None);
    let seed = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-9999"},{"id":"test-id-21"},{"id":"test-id-10000"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;
    let (status, body) = http(addr, "POST", "/v1/features", seed).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["results"]["simple_feature"][0][0]["value"], 19998.0);
    assert_eq!(v["results"]["simple_feature"][1][0]["value"], 42.0);
    assert_eq!(v["statuses"]["simple_feature"][2], "missing");
}

/// The seed workload on Redis. Needs `OKA_TEST_REDIS_URL` (set by `.ci/run`).
#[test]
fn ingest_then_serve_from_redis() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let prefix = format!("oka-cli-test-{}:", std::process::id());
    ingest_then_serve(&url, &["--store-key-prefix", &prefix], &[]);
}

/// `oka ingest --file - --format csv` end to end: CSV piped into standard input
/// lands in Redis, and `oka serve` answers from it. Needs `OKA_TEST_REDIS_URL`.
#[test]
fn ingest_from_standard_input_then_serve_from_redis() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let prefix = format!("oka-cli-stdin-{}:", std::process::id());
    let spec = tmp_file("seed-stdin.yaml", SEED_SPEC);
    let mut child = Command::new(OKA)
        .args(["ingest", "--feature", "test_feature", "--format", "csv"])
        .args([
            "--file",
            "-",
            "--store",
            &url,
            "--store-key-prefix",
            &prefix,
        ])
        .arg("--spec")
        .arg(&spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"id,value\nstdin-1,1.5\nstdin-2,2.5\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("standard input: read 2 records; wrote 2 records to `test_feature`")
            && stdout.ends_with("; rejected 0; not written (store failed) 0\n"),
        "{stdout}"
    );

    let spec_arg = spec.display().to_string();
    let Oka {
        server: _server,
        addr,
        ..
    } = start_oka(
        &[
            "--workers",
            "1",
            "--spec",
            &spec_arg,
            "--store",
            &url,
            "--store-key-prefix",
            &prefix,
        ],
        None,
    );
    let request = r#"{"target_features":["simple_feature"],"keys":[{"id":"stdin-2"},{"id":"stdin-1"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;
    let (status, body) = http(addr, "POST", "/v1/features", request).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["results"]["simple_feature"][0][0]["value"], 5.0, "{body}");
    assert_eq!(v["results"]["simple_feature"][1][0]["value"], 3.0, "{body}");
}

/// The seed workload on Cassandra (ScyllaDB's driver): ingest creates the schema in
/// a keyspace of this run's own, serve finds it. Needs `OKA_TEST_CQL_URL` (set by
/// `.ci/run`, which starts Cassandra 5).
#[test]
fn ingest_then_serve_from_cassandra() {
    let Some(url) = service_url("OKA_TEST_CQL_URL") else {
        return;
    };
    let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b);
    let store = format!("{base}/oka_cli_{}", std::process::id());
    ingest_then_serve(&store, &[], &["--store-create-schema"]);
}

/// SIGHUP reloads the spec file: a valid change shows in answers; an invalid one is
/// refused with its reason in the log while the old spec keeps serving.
#[test]
fn sighup_reloads_the_spec() {
    let spec_path = tmp_file(
        "reload.yaml",
        &DEMO_FOR_RELOAD.replace("MULT", "multiplier"),
    );
    let log = tmp_file("reload.log", "");
    let spec_arg = spec_path.display().to_string();
    let Oka { server, addr, .. } = start_oka(&["--workers", "1", "--spec", &spec_arg], Some(&log));
    let ask = || {
        let (status, body) = http(
            addr,
            "POST",
            "/v1/features",
            r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-3"}]}"#,
        )
        .unwrap();
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["results"]["simple_feature"][0][0]["value"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(ask(), 3.0);
    let pid = server.0.id().to_string();
    let hup = || {
        assert!(
            Command::new("kill")
                .args(["-HUP", &pid])
                .status()
                .unwrap()
                .success()
        )
    };

    std::fs::write(
        &spec_path,
        DEMO_FOR_RELOAD.replace("MULT", "multiplier * 100.0"),
    )
    .unwrap();
    hup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ask() != 300.0 {
        assert!(Instant::now() < deadline, "valid reload not applied");
        std::thread::sleep(Duration::from_millis(50));
    }

    std::fs::write(&spec_path, DEMO_FOR_RELOAD.replace("MULT", "nope")).unwrap();
    hup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("reload rejected")
    {
        assert!(Instant::now() < deadline, "invalid reload not logged");
        std::thread::sleep(Duration::from_millis(50));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("references unknown name `nope`"),
        "{logged}"
    );
    assert_eq!(ask(), 300.0, "the previous spec keeps serving");
}

const DEMO_FOR_RELOAD: &str = r#"
version: 1
entities:
  TestEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
features:
  test_feature:
    kind: pipeline
    entity: TestEntity
    source: {mock: {generate: {count: 10, columns: {id: "'test-id-' + string(i)", value: "double(i)"}}}}
  simple_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {value: "test_feature.value * MULT"}
"#;

/// `oka serve` over a Redis that dies mid-traffic: 503s and `/readyz` false, no
/// crash; Redis back → 200s again without restarting Oka. Needs `redis-server`
/// (gated like the other Redis tests).
#[test]
fn redis_outage_and_recovery_without_restart() {
    if service_url("OKA_TEST_REDIS_URL").is_none() {
        return;
    }
    let redis_port = free_port();
    let start_redis = || redis_server(redis_port, &[]);
    let wait_port = |port: u16| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "port {port} did not open");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut redis = start_redis();
    wait_port(redis_port);
    let store = format!("redis://127.0.0.1:{redis_port}");
    let log = tmp_file("outage.log", "");
    let Oka {
        server: mut oka,
        addr,
        admin,
    } = start_oka(
        &[
            "--demo",
            "--workers",
            "2",
            "--store",
            &store,
            "--store-timeout-ms",
            "300",
        ],
        Some(&log),
    );
    let status_of = |a: SocketAddr, m: &str, p: &str, b: &str| http(a, m, p, b).map(|(s, _)| s);
    let seed = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}]}"#;
    assert_eq!(status_of(addr, "POST", "/v1/features", seed), Some(200));

    drop(redis); // kills redis-server
    // Requests racing the connection's death may time out (504); after that the
    // store is known down and requests fail fast with 503. Never a 500, never a hang.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let started = Instant::now();
        let (status, body) = http(addr, "POST", "/v1/features", seed).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "slow answer: {:?}",
            started.elapsed()
        );
        assert!(matches!(status, 503 | 504), "{status} {body}");
        if status == 503 {
            assert!(body.contains("store_unavailable"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "no 503 after the outage");
    }
    let (status, ready) = http(admin, "GET", "/readyz", "").unwrap();
    assert_eq!(status, 503, "{ready}");
    assert!(ready.contains("the store is unavailable ("), "{ready}");
    assert!(oka.0.try_wait().unwrap().is_none(), "oka is still running");
    // Failures that last are an outage, logged once (readiness probes keep
    // failing meanwhile, as Kubernetes' would).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("the store is unavailable")
    {
        assert!(Instant::now() < deadline, "no outage logged");
        let _ = http(admin, "GET", "/readyz", "");
        std::thread::sleep(Duration::from_millis(100));
    }

    redis = start_redis();
    wait_port(redis_port);
    let deadline = Instant::now() + Duration::from_secs(15);
    while status_of(addr, "POST", "/v1/features", seed) != Some(200) {
        assert!(Instant::now() < deadline, "serving did not recover");
        std::thread::sleep(Duration::from_millis(200));
    }
    while status_of(admin, "GET", "/readyz", "") != Some(200) {
        assert!(Instant::now() < deadline, "/readyz did not recover");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(redis);
    // One line when the store went, one when it came back, in words: no driver
    // Debug dump, however many requests failed in between.
    let log = std::fs::read_to_string(&log).unwrap();
    let down: Vec<_> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(down.len(), 1, "{log}");
    assert!(
        down[0].contains("the store is unavailable") && down[0].contains("kind=\"unavailable\""),
        "{log}"
    );
    let up: Vec<_> = log
        .lines()
        .filter(|l| l.contains("the store is available again"))
        .collect();
    assert_eq!(up.len(), 1, "{log}");
    assert!(!log.contains("Error {") && !log.contains("Some("), "{log}");
}

/// A Redis whose password changes under a running `oka serve` (restarted with a
/// new one, or an ACL change): `/readyz` and one log line say the credentials
/// were refused; `oka ingest` mid-file stops with one line instead of retrying.
#[test]
fn a_rotated_redis_password_is_said_once_and_stops_ingest() {
    if service_url("OKA_TEST_REDIS_URL").is_none() {
        return;
    }
    let port = free_port();
    let _redis = redis_server(port, &["--requirepass", "old-secret"]);
    let cli = |password: &str, args: &[&str]| {
        let mut all = vec![
            "-p".to_owned(),
            port.to_string(),
            "-a".to_owned(),
            password.to_owned(),
            "--no-auth-warning".to_owned(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        Command::new("redis-cli")
            .args(&all)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli("old-secret", &["ping"]) != "PONG" {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let store = format!("redis://:old-secret@127.0.0.1:{port}");
    let log = tmp_file("rotated.log", "");
    let Oka {
        server: _oka,
        addr,
        admin,
    } = start_oka(
        &["--demo", "--store", &store, "--store-timeout-ms", "300"],
        Some(&log),
    );
    let seed = r#"{"target_features":["test_feature"],"keys":[{"id":"test-id-1"}]}"#;
    assert_eq!(
        http(addr, "POST", "/v1/features", seed).map(|r| r.0),
        Some(200)
    );

    // An ingest that has written part of its input when the password changes.
    let spec = tmp_file(
        "rotated-spec.yaml",
        &String::from_utf8(Command::new(OKA).arg("demo-spec").output().unwrap().stdout).unwrap(),
    );
    let mut ingest = Command::new(OKA)
        .args([
            "ingest",
            "--spec",
            spec.to_str().unwrap(),
            "--store",
            &store,
            "--store-timeout-ms",
            "300",
            "--feature",
            "test_feature",
            "--file",
            "-",
            "--format",
            "jsonl",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = ingest.stdin.take().unwrap();
    let record = |i: usize| format!("{{\"id\":\"rot-{i}\",\"value\":{i}.0}}\n");
    for i in 0..2000 {
        input.write_all(record(i).as_bytes()).unwrap();
    }
    input.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli("old-secret", &["exists", "oka:{test_feature|rot-1999}:l"]) != "1" {
        assert!(
            Instant::now() < deadline,
            "the first records were not written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        cli(
            "old-secret",
            &["config", "set", "requirepass", "new-secret"]
        ),
        "OK"
    );
    cli("new-secret", &["client", "kill", "type", "normal"]);
    // The rest of the input, then its end.
    for i in 2000..4000 {
        if input.write_all(record(i).as_bytes()).is_err() {
            break;
        }
    }
    drop(input);
    let out = ingest.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<_> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("since the store refuses every write"),
        "{stderr}"
    );
    assert!(
        errors[0].contains("redis refused the credentials: WRONGPASS"),
        "{stderr}"
    );
    assert!(errors[0].contains("redis://:***@127.0.0.1"), "{stderr}");
    assert!(
        !stderr.contains("old-secret") && !stderr.contains("retrying"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not written:"),
        "no line per batch: {stderr}"
    );

    // The server: unready with the reason, and one line in its log.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = http(admin, "GET", "/readyz", "").unwrap();
        if status == 503 && body.contains("the store refused the credentials") {
            assert!(body.contains("check the user and password"), "{body}");
            break;
        }
        let _ = http(addr, "POST", "/v1/features", seed);
        assert!(Instant::now() < deadline, "/readyz: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for _ in 0..20 {
        let (status, body) = http(addr, "POST", "/v1/features", seed).unwrap();
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("store_unavailable"), "{body}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let refused: Vec<_> = text
        .lines()
        .filter(|l| l.contains("refused the credentials"))
        .collect();
    assert_eq!(refused.len(), 1, "{text}");
    assert!(
        refused[0].contains("WARN") && refused[0].contains("kind=\"unauthorized\""),
        "{text}"
    );
    assert!(
        !text.contains("old-secret") && !text.contains("Error {"),
        "{text}"
    );
}

/// `oka schema` prints the CQL DDL for the URL's keyspace and the replication asked
/// for, and refuses a bad URL or replication.
#[test]
fn schema_prints_the_cql_ddl() {
    let out = Command::new(OKA)
        .args([
            "schema",
            "--store",
            "scylla://u:pw@10.0.0.1,10.0.0.2/features_prod",
            "--store-replication",
            "us-east:3,eu-west:3",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("CREATE KEYSPACE IF NOT EXISTS features_prod WITH replication = {'class': 'NetworkTopologyStrategy', 'us-east': 3, 'eu-west': 3}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("CREATE TABLE IF NOT EXISTS features_prod.features")
            && stdout.contains("PRIMARY KEY ((feature, entity_key), event_time)"),
        "{stdout}"
    );
    assert!(!stdout.contains("pw"), "{stdout}");
    for bad in [
        [
            "--store",
            "scylla://h/bad-name",
            "--store-replication",
            "simple:1",
        ],
        [
            "--store",
            "scylla://h/ks",
            "--store-replication",
            "simple:0",
        ],
    ] {
        let out = Command::new(OKA).arg("schema").args(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?}");
    }
}

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: &str) {
    assert!(
        Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// Waits for `child` to exit; `None` if it has not within `within`.
fn exit_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_during_start_up_does_not_end_the_process() {
    let (port, admin_port) = (free_port(), free_port());
    let log = tmp_file("early-hup.log", "");
    let mut server = Server(
        Command::new(OKA)
            .args(["serve", "--demo", "--workers", "1"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // SIGHUPs from the moment `main` has caught them (its first instruction; the
    // kernel shows the handler in SigCgt) until ready. Before that the process is
    // still being loaded: a wait of a fixed 15 ms was not enough on a loaded
    // machine, where the loader alone took longer.
    common::wait_until_caught(server.0.id(), 1); // SIGHUP
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while http(admin, "GET", "/readyz", "").map(|(s, _)| s) != Some(200) {
        signal(&server.0, "-HUP");
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "SIGHUP ended the process: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        assert!(Instant::now() < deadline, "server did not become ready");
        std::thread::sleep(Duration::from_millis(10));
    }
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let (status, body) = http(
        addr,
        "POST",
        "/v1/features",
        r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#,
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    signal(&server.0, "-TERM");
    let status = exit_within(&mut server.0, Duration::from_secs(20)).expect("exits");
    assert!(status.success(), "{status:?}");
}

#[test]
fn api_key_file_errors_name_the_line_and_never_print_the_key() {
    const TOKEN: &str = "s3cr3t-t0ken-0123456789";
    let swapped = format!("# ops\nreader-key-0123456789 read\nread {TOKEN}\n");
    // At start-up.
    let keys = tmp_file("swapped-keys.txt", &swapped);
    let out = Command::new(OKA)
        .args([
            "serve",
            "--demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--api-keys-file")
        .arg(&keys)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("swapped-keys.txt line 3"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");

    // On reload: the file goes bad while serving.
    let keys = tmp_file(
        "reload-keys.txt",
        "ops-key-0123456789abc admin\nreader-key-0123456789 read\n",
    );
    let log = tmp_file("reload-keys.log", "");
    let keys_arg = keys.display().to_string();
    let Oka {
        server: _server,
        admin,
        ..
    } = start_oka(
        &["--demo", "--workers", "1", "--api-keys-file", &keys_arg],
        Some(&log),
    );
    std::fs::write(&keys, &swapped).unwrap();
    let reload = |key: &str| {
        let mut s = TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "POST /admin/reload HTTP/1.1\r\nhost: t\r\nx-api-key: {key}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let answer = reload("reader-key-0123456789");
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    let answer = reload("ops-key-0123456789abc");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("line 3"), "{answer}");
    assert!(!answer.contains(TOKEN), "{answer}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("reload rejected")
    {
        assert!(
            Instant::now() < deadline,
            "the rejected reload is not logged"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(TOKEN), "{logged}");
}

#[test]
fn reload_errors_name_files_not_paths_to_callers_without_a_key() {
    let spec = tmp_file(
        "vanishing-spec.yaml",
        &DEMO_FOR_RELOAD.replace("MULT", "multiplier"),
    );
    let spec_arg = spec.display().to_string();
    let Oka {
        server: _server,
        admin,
        ..
    } = start_oka(&["--workers", "1", "--spec", &spec_arg], None);
    std::fs::remove_file(&spec).unwrap();
    let (status, body) = http(admin, "POST", "/admin/reload", "").unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("vanishing-spec.yaml"), "{body}");
    assert!(body.contains("no such file"), "{body}");
    let dir = spec.parent().unwrap().display().to_string();
    assert!(!body.contains(&dir), "{body}");
    assert!(!body.contains("os error"), "{body}");
}

#[test]
fn the_admin_port_listens_on_loopback_by_default() {
    let out = Command::new(OKA)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let admin = help
        .split("--admin-listen")
        .nth(1)
        .and_then(|rest| rest.split("--").next())
        .unwrap_or_default();
    assert!(admin.contains("[default: 127.0.0.1:9122]"), "{help}");
}

#[test]
fn sigterm_with_half_sent_requests_exits_zero_well_within_the_grace_period() {
    let Oka {
        mut server, addr, ..
    } = start_oka(
        &["--demo", "--workers", "1", "--shutdown-grace-s", "30"],
        None,
    );
    let mut half_head = TcpStream::connect(addr).unwrap();
    half_head
        .write_all(b"POST /v1/features HTTP/1.1\r\nhost:")
        .unwrap();
    let mut half_body = TcpStream::connect(addr).unwrap();
    half_body
        .write_all(b"POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\n{")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    signal(&server.0, "-TERM");
    let status = exit_within(&mut server.0, Duration::from_secs(25)).expect("exits");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?} of the 30 s grace",
        started.elapsed()
    );
}

#[test]
fn sigterm_with_no_delay_does_not_wait_for_a_half_sent_head() {
    let Oka {
        mut server, addr, ..
    } = start_oka(
        &["--demo", "--workers", "1", "--shutdown-delay-s", "0"],
        None,
    );
    // The head's timeout is the default 10 s: the exit must not wait for it.
    let mut half_head = TcpStream::connect(addr).unwrap();
    half_head
        .write_all(b"POST /v1/features HTTP/1.1\r\nhost:")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    signal(&server.0, "-TERM");
    let status = exit_within(&mut server.0, Duration::from_secs(25)).expect("exits");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}: the half-sent head held the shutdown",
        started.elapsed()
    );
    half_head
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = half_head.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

#[test]
fn out_of_file_descriptors_the_server_answers_503_logs_and_recovers() {
    let (port, admin_port) = (free_port(), free_port());
    let log = tmp_file("fd-limit.log", "");
    // 48 descriptors: the server needs about 25 of them before any connection.
    let mut server = Server(
        Command::new("bash")
            .args(["-c", "ulimit -n 48 && exec \"$0\" \"$@\"", OKA])
            .args(["serve", "--demo", "--workers", "1"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .args(["--header-read-timeout-ms", "60000"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
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
    // Hold more idle connections than there are descriptors left.
    let held: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut refused = 0;
    for mut s in held.iter() {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 64];
        if let Ok(n) = s.read(&mut buf)
            && buf[..n].starts_with(b"HTTP/1.1 503")
        {
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "no connection was refused at the descriptor limit"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap()
        .contains("out of file descriptors")
    {
        assert!(Instant::now() < deadline, "the accept error is not logged");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some((200, _)) = http(
            addr,
            "POST",
            "/v1/features",
            r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}]}"#,
        ) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not serving again after the connections closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, metrics) = http(admin, "GET", "/metrics", "").unwrap();
    assert!(
        !metrics.contains("oka_http_accept_errors_total{kind=\"fd_limit\"} 0"),
        "{metrics}"
    );
}

/// Runs `oka ingest` of `file` into the seed spec's `test_feature` (in memory)
/// with `--rejects`; returns (success, stdout, stderr, rejects file).
fn ingest_file(file: &std::path::Path, extra: &[&str]) -> (bool, String, String, String) {
    let spec = tmp_file("seed-spec.yaml", SEED_SPEC);
    let rejects = file.with_extension("rejects");
    let out = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "test_feature",
            "--spec",
        ])
        .arg(&spec)
        .arg("--file")
        .arg(file)
        .arg("--rejects")
        .arg(&rejects)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&std::fs::read(&rejects).unwrap_or_default()).into_owned(),
    )
}

#[test]
fn ingest_gives_each_hostile_line_its_fate_and_line_number() {
    // (line, the record, its fate: "" written, else a fragment of the reason)
    let jsonl: &[(&[u8], &str)] = &[
        (br#"{"id":"a","value":1.0}"#, ""),
        (b"", ""),
        (br#"{"id":"b","value":NaN}"#, "not a JSON object"),
        (b"{\"id\":\"\xff\",\"value\":2.0}", "not valid UTF-8"),
        (
            br#"{"id":"c","value":3.0,"timestamp":9e12}"#,
            "outside the accepted range",
        ),
        (
            br#"{"id":"d","value":4.0,"timestamp":"2999-01-01T00:00:00Z"}"#,
            "in the future",
        ),
        (
            br#"{"id":"e","value":5.0,"timestamp":-1}"#,
            "outside the accepted range",
        ),
        (br#"{"id":"f","value":6.0,"timestamp":1744970400}"#, ""),
        (br#"{"id":"g","val\u001b[31mue":7.0}"#, "has no field"),
        (br#"{"id":"h","value":8.0}"#, ""),
    ];
    let mut text = Vec::new();
    for (line, _) in jsonl {
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    let file = common::tmp_dir().join("hostile.jsonl");
    std::fs::write(&file, &text).unwrap();
    let (ok, stdout, stderr, rejects) = ingest_file(&file, &[]);
    assert!(!ok, "exits non-zero when lines were rejected");
    assert!(
        stdout.contains("read 9 records; wrote 3 records"),
        "{stdout}"
    );
    assert!(stdout.contains("rejected 6"), "{stdout}");
    assert!(
        !stderr.contains('\x1b'),
        "escape sequences reach the terminal: {stderr}"
    );
    assert!(stderr.contains("\\u{1b}"), "{stderr}");
    for (i, (line, fate)) in jsonl.iter().enumerate() {
        let n = i + 1;
        if fate.is_empty() {
            assert!(
                !stderr.contains(&format!("line {n}:")),
                "line {n}: {stderr}"
            );
        } else {
            let reported = stderr
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("line {n}:")))
                .unwrap_or_else(|| panic!("line {n} not reported: {stderr}"));
            assert!(reported.contains(fate), "line {n}: {reported}");
            assert!(
                rejects.contains(&String::from_utf8_lossy(line).into_owned()) || !line.is_ascii(),
                "line {n} not in the rejects file: {rejects}"
            );
        }
    }

    // CSV: quoting, an embedded newline, an unterminated quote, NaN, far times.
    let csv = "id,value,timestamp\n\
               a,1.0,2025-04-18T10:00:00Z\n\
               \"multi\nline\",2.0,\n\
               b,\"3.0,\n\
               c,NaN,\n\
               d,4.0,2999-01-01T00:00:00Z\n\
               e,5.0,1969-12-31T23:59:59Z\n\
               f,6.0,1744970400\n\
               g,\"7,0\",\n\
               h,8.0,\n";
    let file = tmp_file("hostile.csv", csv);
    let (ok, stdout, stderr, rejects) = ingest_file(&file, &[]);
    assert!(!ok);
    // Written: a (2), "multi\nline" (3–4), f (9), h (11).
    assert!(
        stdout.contains("read 9 records; wrote 4 records"),
        "{stdout}"
    );
    for (n, fate) in [
        (5, "unterminated quote"),
        (6, "NaN and infinities"),
        (7, "in the future"),
        (8, "outside the accepted range"),
        (10, "is not a number"),
    ] {
        let reported = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("line {n}:")))
            .unwrap_or_else(|| panic!("line {n} not reported: {stderr}"));
        assert!(reported.contains(fate), "line {n}: {reported}");
    }
    assert!(
        rejects.starts_with("id,value,timestamp\nb,\"3.0,\nc,NaN,\n"),
        "the rejects file is CSV with its header: {rejects}"
    );

    // Standard input needs a format, and then reads like a file.
    let spec = tmp_file("seed-spec.yaml", SEED_SPEC);
    let mut child = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "test_feature",
            "--format",
            "jsonl",
            "--file",
            "-",
            "--spec",
        ])
        .arg(&spec)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"id\":\"a\",\"value\":1}\n{\"id\":\"b\",\"value\":2}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with("standard input: read 2 records; wrote 2"),
        "{stdout}"
    );
}

/// `VmHWM` (peak resident set) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Peak RSS bound for ingest, documented in docs/operations.md ("Memory").
const INGEST_PEAK_RSS_KIB: u64 = 256 * 1024;

#[test]
fn concurrent_4_mib_ingest_bodies_of_tiny_records_hold_bounded_memory() {
    let Oka { server, addr, .. } = start_oka(&["--demo", "--workers", "2"], None);
    // Just under 4 MiB each: ~170k records of ~24 bytes, on 1000 keys (so the
    // in-memory store itself stays small: same key, same event time = one record).
    let mut body = String::from(r#"{"feature":"test_feature","records":["#);
    let mut n = 0;
    while body.len() < 4 * 1024 * 1024 - 64 {
        if n > 0 {
            body.push(',');
        }
        body.push_str(&format!(r#"{{"id":"k{}","value":{n}}}"#, n % 1000));
        n += 1;
    }
    body.push_str("]}");
    let body = std::sync::Arc::new(body);
    let posts: Vec<_> = (0..16)
        .map(|_| {
            let body = std::sync::Arc::clone(&body);
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                write!(
                    s,
                    "POST /v1/ingest HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
                let mut out = String::new();
                s.read_to_string(&mut out).ok()?;
                let status: u16 = out.get(9..12)?.parse().ok()?;
                Some((status, out.split_once("\r\n\r\n")?.1.to_owned()))
            })
        })
        .collect();
    for p in posts {
        let (status, answer) = p.join().unwrap().expect("an answer");
        assert_eq!(status, 200, "{answer}");
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(v["written"], n, "{answer}");
    }
    let peak = peak_rss_kib(server.0.id());
    eprintln!(
        "16 concurrent ingest bodies of {n} records: peak RSS {} MiB",
        peak / 1024
    );
    assert!(
        peak < INGEST_PEAK_RSS_KIB,
        "peak RSS {} MiB, bound {} MiB",
        peak / 1024,
        INGEST_PEAK_RSS_KIB / 1024
    );
}

#[test]
fn oka_ingest_streams_a_file_larger_than_its_memory() {
    // ~70 MB of JSON Lines on 1000 keys (the in-memory store stays small).
    let path = common::tmp_dir().join("large.jsonl");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..2_300_000u64 {
            writeln!(out, r#"{{"id":"k{}","value":{i}.5}}"#, i % 1000).unwrap();
        }
    }
    let size_kib = std::fs::metadata(&path).unwrap().len() / 1024;
    let spec = tmp_file("seed-spec.yaml", SEED_SPEC);
    // The child's peak RSS, from getrusage, by a wrapper that waits for it.
    let out = Command::new("python3")
        .args([
            "-c",
            "import resource, subprocess, sys\nr = subprocess.run(sys.argv[1:])\nprint(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\nsys.exit(r.returncode)",
            OKA,
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "test_feature",
            "--spec",
        ])
        .arg(&spec)
        .arg("--file")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("wrote 2300000 records"), "{stdout}");
    let peak: u64 = stdout.lines().last().unwrap().trim().parse().unwrap();
    eprintln!(
        "oka ingest of {} MiB: peak RSS {} MiB",
        size_kib / 1024,
        peak / 1024
    );
    assert!(peak < INGEST_PEAK_RSS_KIB, "peak RSS {} MiB", peak / 1024);
    assert!(
        peak < size_kib,
        "peak RSS {peak} KiB is not below the input's {size_kib} KiB"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_old_batches_in_flight_name_still_works_and_warns() {
    let file = tmp_file("old-name.jsonl", "{\"id\":\"a\",\"value\":1.0}\n");
    let (ok, _, stderr, _) = ingest_file(&file, &["--max-in-flight", "2"]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("`--max-in-flight` / `OKA_MAX_IN_FLIGHT` (2) is deprecated and was used")
            && stderr.contains("--max-batches-in-flight"),
        "{stderr}"
    );
    let (ok, _, stderr, _) = ingest_file(&file, &["--max-batches-in-flight", "2"]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("deprecated"), "{stderr}");
}

#[test]
fn openapi_writes_the_documents_the_admin_port_serves() {
    let dir = std::env::temp_dir().join(format!("oka-cli-openapi-{}", std::process::id()));
    let out = Command::new(OKA)
        .args(["openapi", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    for file in ["openapi.json", "openapi-admin.json"] {
        let path = dir.join(file);
        assert!(
            stdout.contains(&format!("wrote {}", path.display())),
            "{stdout}"
        );
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("{\n  \"openapi\": \"3.1.0\",") && written.ends_with("}\n"));
        // What the repository commits (regenerated with `oka openapi`).
        assert_eq!(
            written,
            std::fs::read_to_string(docs.join(file)).unwrap(),
            "docs/{file} is stale: run `cargo run -p oka-cli -- openapi`"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
