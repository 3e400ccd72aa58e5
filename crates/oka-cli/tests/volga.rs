//! A Volga deployment's Redis, as Volga's pipeline writes it, served as it stands
//! (`--store redis://…?layout=volga`) and copied into Oka's layout (`oka migrate
//! volga`): both serve the same values; Volga's CQL table is copied too. Needs
//! `OKA_TEST_REDIS_URL` (set by `.ci/run`; uses databases 5, 6 and 7 of that
//! server) and, for the CQL test, `OKA_TEST_CQL_URL` (keyspace `volga_migrate_test`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;

use common::{OKA, http, service_url, start_oka, tmp_file};
use serde_json::{Value, json};

const SPEC: &str = r#"version: 1
entities:
  TestEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
    order: [id, value, timestamp]
  Pair:
    keys: {user: int, merchant: string}
    timestamp: ts
    fields: {n: int, tags: list<string>}
features:
  test_feature: {kind: pipeline, entity: TestEntity}
  pair: {kind: pipeline, entity: Pair}
  simple_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {value: "test_feature.value * multiplier"}
"#;

/// Sends Redis commands (RESP, pipelined) to `url`'s server; the replies' first
/// lines.
fn redis(url: &str, commands: &[Vec<String>]) -> Vec<String> {
    let host = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut s = TcpStream::connect(host).unwrap();
    let mut out = Vec::new();
    for c in commands {
        write!(out, "*{}\r\n", c.len()).unwrap();
        for a in c {
            write!(out, "${}\r\n{a}\r\n", a.len()).unwrap();
        }
    }
    s.write_all(&out).unwrap();
    let mut r = BufReader::new(s);
    (0..commands.len())
        .map(|_| {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert!(!line.starts_with('-'), "redis: {line}");
            line.trim_end().to_owned()
        })
        .collect()
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// `HSET` as Volga's `RedisHotFeatureStorageApi.insert`: the Redis key holds
/// `json.dumps(keys, sort_keys=True)`, the hash `json.dumps(keys)` and
/// `json.dumps(values)`.
fn volga_hset(feature: &str, sorted_keys: &str, keys: &str, values: &str) -> Vec<String> {
    cmd(&[
        "HSET",
        &format!("volga:hot_feature:{feature}:{sorted_keys}"),
        "feature_name",
        feature,
        "keys_json",
        keys,
        "values_json",
        values,
    ])
}

/// Python's `json.dumps` of a string (`ensure_ascii`): what these tests' keys need.
fn py_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

const ODD: [&str; 3] = ["café ✓", "q\"uote", "slash/and space"];

/// Fills database 5 with a Volga deployment's data; empties database 6.
fn volga_data(url: &str) {
    let mut c = vec![cmd(&["SELECT", "6"]), cmd(&["FLUSHDB"])];
    c.push(cmd(&["SELECT", "5"]));
    c.push(cmd(&["FLUSHDB"]));
    let ids = (0..1000)
        .map(|i| format!("test-id-{i}"))
        .chain(ODD.map(String::from));
    for (i, id) in ids.enumerate() {
        let keys = format!("{{\"id\": {}}}", py_str(&id));
        c.push(volga_hset(
            "test_feature",
            &keys,
            &keys,
            &format!("{{\"value\": {i}.25}}"),
        ));
    }
    for u in 0..50 {
        c.push(volga_hset(
            "pair",
            &format!(r#"{{"merchant": "m{u}", "user": {u}}}"#),
            &format!(r#"{{"user": {u}, "merchant": "m{u}"}}"#),
            &format!(
                r#"{{"n": {u}, "tags": ["t{u}"], "ts": "2024-05-01T10:00:0{}"}}"#,
                u % 10
            ),
        ));
    }
    // An int where the entity has a string key: cannot be mapped.
    c.push(volga_hset(
        "test_feature",
        r#"{"id": 5}"#,
        r#"{"id": 5}"#,
        r#"{"value": 1.0}"#,
    ));
    for g in 0..3 {
        let k = format!(r#"{{"id": "g{g}"}}"#);
        c.push(volga_hset("gone", &k, &k, r#"{"v": 1}"#));
    }
    redis(url, &c);
}

fn oka(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(OKA).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A request over odd keys, many keys, a two-field key and an on-demand feature.
fn request() -> String {
    let mut ids: Vec<Value> = (0..1000)
        .step_by(7)
        .map(|i| json!({"id": format!("test-id-{i}")}))
        .collect();
    ids.extend(ODD.iter().map(|k| json!({"id": k})));
    ids.push(json!({"id": "never-written"}));
    let pairs: Vec<Value> = (0..50)
        .map(|u| json!({"user": u, "merchant": format!("m{u}")}))
        .collect();
    json!({
        "target_features": ["simple_feature", "test_feature", "pair"],
        "feature_keys": {"simple_feature": ids, "test_feature": ids, "pair": pairs},
        "udf_args": {"simple_feature": {"multiplier": 3.0}},
    })
    .to_string()
}

/// The answer without the event times of records that had none in Volga (the
/// served copy has the migration's, the Volga layout the read's).
fn without_default_times(mut v: Value) -> Value {
    for f in ["simple_feature", "test_feature"] {
        for r in v["results"][f].as_array_mut().unwrap() {
            if let Some(rec) = r.get_mut(0) {
                rec.as_object_mut().unwrap().remove("timestamp");
            }
        }
    }
    v.as_object_mut().unwrap().remove("server_id");
    v
}

#[test]
fn migrate_volga_copies_what_layout_volga_serves() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let url = url.trim_end_matches('/').to_owned();
    volga_data(&url);
    let spec = tmp_file("volga-spec.yaml", SPEC);
    let spec = spec.to_str().unwrap();
    let state = std::env::temp_dir().join(format!("oka-migrate-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let (from, to) = (format!("{url}/5"), format!("{url}/6"));
    let migrate = |extra: &[&str]| {
        let mut args = vec![
            "migrate",
            "volga",
            "--from",
            &from,
            "--spec",
            spec,
            "--store",
            &to,
            "--batch",
            "100",
            "--state",
            state.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        oka(&args)
    };

    // A slice of the copy, then the rest: it resumes where it stopped.
    let (_, stdout, stderr) = migrate(&["--max-pages", "3"]);
    assert!(stdout.contains(": not finished: "), "{stdout}{stderr}");
    assert!(stderr.contains("stopped after 3 pages"), "{stderr}");
    let (code, stdout, stderr) = migrate(&[]);
    assert!(stderr.contains("resuming the copy in"), "{stderr}");
    assert!(
        stdout.contains(": finished: 1053 records copied, 1 not mapped"),
        "{stdout}{stderr}"
    );
    for line in [
        "  copied      pair: 50",
        "  copied      test_feature: 1003",
        "  not mapped  test_feature: 1 (they do not fit the spec's entity; first ones below)",
        r#"    volga:hot_feature:test_feature:{"id": 5}: `keys_json` field `id` must be string, got 5"#,
        "  not in the spec  gone: 3 hashes (add a pipeline feature `gone` to the spec to copy them)",
    ] {
        assert!(stdout.contains(line), "{line:?} not in\n{stdout}");
    }
    assert_eq!(code, Some(1), "a record could not be mapped: exit 1");
    // The guide shows this run's summary.
    let guide = include_str!("../../../docs/migrating-from-volga.md");
    let shown = guide
        .split_once("$ oka migrate volga --from redis://")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block)
        .expect("the summary in docs/migrating-from-volga.md");
    for line in shown.lines().skip(2).filter(|l| !l.contains("were given")) {
        assert!(
            stdout.contains(line),
            "the guide's {line:?} not in\n{stdout}"
        );
    }
    let (_, stdout, _) = migrate(&[]);
    assert!(
        stdout.contains("(already finished; pass --restart"),
        "{stdout}"
    );

    // Served from Volga's layout and from the copy: the same answer.
    let on_volga = start_oka(
        &["--spec", spec, "--store", &format!("{from}?layout=volga")],
        None,
    );
    let on_copy = start_oka(&["--spec", spec, "--store", &to], None);
    let ask = |addr| {
        let (status, body) = http(addr, "POST", "/v1/features", &request()).unwrap();
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let (a, b) = (ask(on_volga.addr), ask(on_copy.addr));
    assert_eq!(a["results"]["simple_feature"][1][0]["value"], 7.25 * 3.0);
    assert_eq!(a["results"]["test_feature"][143][0]["id"], ODD[0]);
    assert_eq!(a["statuses"]["test_feature"][146], "missing");
    assert_eq!(
        a["results"]["pair"][12][0]["ts"],
        "2024-05-01T10:00:02.000000+00:00"
    );
    assert_eq!(without_default_times(a), without_default_times(b));
}

#[test]
fn a_volga_layout_store_refuses_history_sources_and_writes() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let store = format!("{}/5?layout=volga", url.trim_end_matches('/'));
    let (code, _, stderr) = oka(&[
        "serve",
        "--demo",
        "--store",
        &store,
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("error: the spec <demo> does not fit the store at {store}:\n  features.test_feature: has a `source`, but the store is Volga's layout")),
        "{stderr}"
    );
    assert!(
        stderr.contains("  features.window_feature: reads `test_feature` with `range`, but the store is Volga's layout (`layout=volga`), which holds only the latest record of each key and takes no writes: read it with `latest`, or copy the data into Oka's layout (`oka migrate volga`) and serve from there"),
        "{stderr}"
    );
    let data = tmp_file("volga-ingest.jsonl", "{\"id\": \"a\", \"value\": 1.0}\n");
    let spec = tmp_file("volga-spec2.yaml", SPEC);
    let (code, _, stderr) = oka(&[
        "ingest",
        "--spec",
        spec.to_str().unwrap(),
        "--feature",
        "test_feature",
        "--file",
        data.to_str().unwrap(),
        "--store",
        &store,
    ]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("error: `oka ingest` writes into the store at"),
        "{stderr}"
    );
    let (_, _, stderr) = oka(&[
        "migrate",
        "volga",
        "--from",
        "redis://127.0.0.1:1",
        "--spec",
        spec.to_str().unwrap(),
        "--store",
        "memory://",
        "--event-time",
        "yesterday",
    ]);
    assert!(
        stderr.trim_end().ends_with(
            "\nerror: --event-time `yesterday`: give an RFC 3339 time such as 2026-01-31T12:00:00Z, or `now`"
        ),
        "{stderr}"
    );
    // Where Volga's data cannot be read: said in words, never a driver's dump.
    let state = std::env::temp_dir().join(format!("oka-migrate-err-{}.json", std::process::id()));
    for (from, want) in [
        (
            "redis://127.0.0.1:1",
            "error: cannot read Volga's data at redis://127.0.0.1:1: nothing listens at 127.0.0.1:1 (the connection was refused). Check that the store is running and reachable from this machine.",
        ),
        (
            "mongo://h",
            "error: --from `mongo://h`: Volga's data is read from its Redis (redis:// or rediss://) or its CQL cluster (scylla:// or cassandra://), not `mongo://`",
        ),
    ] {
        let (code, _, stderr) = oka(&[
            "migrate",
            "volga",
            "--from",
            from,
            "--spec",
            spec.to_str().unwrap(),
            "--store",
            "memory://",
            "--restart",
            "--state",
            state.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1));
        assert_eq!(stderr.lines().last(), Some(want), "{stderr}");
        assert!(!stderr.contains("Os {"), "{stderr}");
    }
}

/// Volga's CQL layout (`volga/storage/scylla/consts.py`), and rows as its
/// `ScyllaPyHotFeatureStorageApi.insert` writes them.
async fn volga_cql_data(base: &str) {
    use scylla::client::session_builder::SessionBuilder;
    let host = base.split_once("://").unwrap().1;
    let session = SessionBuilder::new()
        .known_node(host)
        .build()
        .await
        .unwrap();
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS volga_migrate_test WITH replication = {'class': 'SimpleStrategy', 'replication_factor': '1'}",
        "DROP TABLE IF EXISTS volga_migrate_test.hot_features",
        "CREATE TABLE volga_migrate_test.hot_features (feature_name text, keys_json text, values_json text, PRIMARY KEY (feature_name, keys_json))",
    ] {
        session.query_unpaged(ddl, ()).await.unwrap();
    }
    let insert = session
        .prepare("INSERT INTO volga_migrate_test.hot_features (feature_name, keys_json, values_json) VALUES (?, ?, ?)")
        .await
        .unwrap();
    let mut rows: Vec<(String, String, String)> = (0..300)
        .map(|i| {
            (
                "test_feature".to_owned(),
                format!(r#"{{"id": "c-{i}"}}"#),
                format!(r#"{{"value": {i}.5}}"#),
            )
        })
        .collect();
    rows.extend((0..5).map(|u| {
        (
            "pair".to_owned(),
            format!(r#"{{"user": {u}, "merchant": "m"}}"#),
            format!(r#"{{"n": {u}, "tags": []}}"#),
        )
    }));
    rows.push((
        "test_feature".to_owned(),
        r#"{"id": "c-bad"}"#.to_owned(),
        r#"{"value": "x"}"#.to_owned(),
    ));
    for r in rows {
        session.execute_unpaged(&insert, r).await.unwrap();
    }
}

#[test]
fn migrate_volga_copies_volgas_cql_table() {
    let (Some(cql), Some(url)) = (
        service_url("OKA_TEST_CQL_URL"),
        service_url("OKA_TEST_REDIS_URL"),
    ) else {
        return;
    };
    let base = cql
        .rsplit_once('/')
        .map_or(cql.as_str(), |(b, _)| b)
        .to_owned();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(volga_cql_data(&base));
    let to = format!("{}/7", url.trim_end_matches('/'));
    redis(
        &to.replace("/7", ""),
        &[cmd(&["SELECT", "7"]), cmd(&["FLUSHDB"])],
    );
    let spec = tmp_file("volga-cql-spec.yaml", SPEC);
    let state = std::env::temp_dir().join(format!("oka-migrate-cql-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let from = format!("{base}/volga_migrate_test");
    let migrate = |extra: &[&str]| {
        let mut args = vec![
            "migrate",
            "volga",
            "--from",
            &from,
            "--spec",
            spec.to_str().unwrap(),
            "--store",
            &to,
            "--batch",
            "50",
            "--state",
            state.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        oka(&args)
    };
    let (_, stdout, stderr) = migrate(&["--max-pages", "2"]);
    assert!(stdout.contains(": not finished: "), "{stdout}{stderr}");
    let (code, stdout, stderr) = migrate(&[]);
    assert!(stderr.contains("resuming the copy in"), "{stderr}");
    assert!(
        stdout.contains(": finished: 305 records copied, 1 not mapped"),
        "{stdout}{stderr}"
    );
    assert!(
        stdout.contains(r#"    hot_features row (test_feature, {"id": "c-bad"}): `values_json` field `value` of entity `TestEntity`: expected float, got string"#),
        "{stdout}"
    );
    assert_eq!(code, Some(1));

    let served = start_oka(&["--spec", spec.to_str().unwrap(), "--store", &to], None);
    let body = json!({
        "target_features": ["simple_feature", "pair"],
        "feature_keys": {
            "simple_feature": [{"id": "c-0"}, {"id": "c-299"}, {"id": "c-bad"}],
            "pair": [{"user": 4, "merchant": "m"}],
        },
        "udf_args": {"simple_feature": {"multiplier": 2.0}},
    })
    .to_string();
    let (status, out) = http(served.addr, "POST", "/v1/features", &body).unwrap();
    assert_eq!(status, 200, "{out}");
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["results"]["simple_feature"][0][0]["value"], 1.0);
    assert_eq!(out["results"]["simple_feature"][1][0]["value"], 599.0);
    assert_eq!(out["statuses"]["simple_feature"][2], "missing");
    assert_eq!(out["results"]["pair"][0][0]["n"], 4);
}
