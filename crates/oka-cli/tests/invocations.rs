//! Bad invocations of the `oka` binary, each with the exact message a user reads:
//! the thing, the place and what to do, in the user's words. None shows an OS
//! error dump, a Rust type or Debug formatting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};

use common::{OKA, free_port, tmp_file};

const SPEC: &str = "version: 1\nentities:\n  Txn: {keys: {user_id: string}, timestamp: ts, fields: {amount: float}}\nfeatures:\n  transactions: {kind: pipeline, entity: Txn}\n  stats:\n    kind: on_demand\n    aggregate:\n      over: {feature: transactions, query: last_n, n: 10}\n      outputs: {n: count}\n";

/// What no message may contain.
const FORBIDDEN: [&str; 9] = [
    "Os {", "kind:", "Custom {", "Some(", "None", "::", "Error(", "f64", "usize",
];

#[test]
fn bad_invocations_have_human_messages() {
    let spec = tmp_file("invocations.yaml", SPEC);
    let spec = spec.to_str().unwrap();
    let data = tmp_file("invocations.jsonl", "{\"user_id\":\"u\",\"amount\":1.0}\n");
    let data = data.to_str().unwrap();
    let closed = format!("redis://127.0.0.1:{}", free_port());
    let closed_cql = format!("scylla://127.0.0.1:{}/ks", free_port());
    let ingest = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "ingest",
            "--spec",
            spec,
            "--feature",
            "transactions",
            "--file",
            data,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let owned = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    // (arguments, the exact last line of stderr)
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            ingest(&[]),
            "error: `oka ingest` needs a store to write into: give --store (or OKA_STORE), e.g. --store redis://127.0.0.1:6379 (or --store memory:// for a dry run that checks the records and keeps nothing)".into(),
        ),
        (
            ingest(&["--store", "redis://127.0.0.1:6379?layuot=x"]),
            "error: the store URL `redis://127.0.0.1:6379?layuot=x`: unknown option `layuot`: redis:// takes only `layout` (`oka`, `volga` or `feast`); `sentinelServiceName` makes it a sentinel URL (did you mean `layout`?)".into(),
        ),
        (
            ingest(&["--store", "redis-cluster://127.0.0.1:6379?nod=127.0.0.1:6380"]),
            "error: the store URL `redis-cluster://127.0.0.1:6379?nod=127.0.0.1:6380`: unknown option `nod`: redis-cluster:// takes only `node` (another cluster node, host:port) and `layout` (`oka`, `volga` or `feast`) (did you mean `node`?)".into(),
        ),
        (
            ingest(&["--store", "rediss://127.0.0.1:6379/0?layout=x"]),
            "error: the store URL `rediss://127.0.0.1:6379/0?layout=x`: `layout=x`: the layouts are `oka` (the default: Oka's own), `volga` (Volga's hot-feature hashes, read-only) and `feast` (Feast's online store, with `oka serve --feast-repo`)".into(),
        ),
        (
            ingest(&["--store", "redis-sentinel://:pw@127.0.0.1:26379?sentinelServicename=m"]),
            "error: the store URL `redis-sentinel://:***@127.0.0.1:26379?sentinelServicename=m`: unknown option `sentinelServicename`: redis-sentinel:// takes only `sentinelServiceName`, `sentinelUsername`, `sentinelPassword`, `node`, `layout` (did you mean `sentinelServiceName`?)".into(),
        ),
        (
            ingest(&["--store", "scylla://127.0.0.1:9042/ks?consistency=one"]),
            "error: the store URL `scylla://127.0.0.1:9042/ks?consistency=one`: unknown option `consistency`: scylla:// URLs take no options; give it as a flag: --store-read-consistency or --store-write-consistency".into(),
        ),
        (
            ingest(&["--store", "cassandra://127.0.0.1/ks?timeout=5"]),
            "error: the store URL `cassandra://127.0.0.1/ks?timeout=5`: unknown option `timeout`: cassandra:// URLs take no options; give it as a flag: --store-timeout-ms or --store-connect-timeout-ms".into(),
        ),
        (
            ingest(&["--store", "scylla://127.0.0.1/ks?layout=wide"]),
            "error: the store URL `scylla://127.0.0.1/ks?layout=wide`: unknown option `layout`: scylla:// URLs take no options; the settings are flags: --store-read-consistency, --store-write-consistency, --store-local-dc, --store-replication, … (see `oka serve --help`)".into(),
        ),
        (
            ingest(&["--store", "memory://?layout=x"]),
            "error: the store URL `memory://?layout=x`: memory:// takes no host, path or options".into(),
        ),
        (
            ingest(&["--store", "memory://somewhere"]),
            "error: the store URL `memory://somewhere`: memory:// takes no host, path or options".into(),
        ),
        (
            ingest(&["--store", "bogus://x"]),
            "error: unsupported store URL scheme `bogus://` (this build supports memory://, redis[s]://, redis[s]-cluster://, redis[s]-sentinel://, scylla://, cassandra://)".into(),
        ),
        (
            ingest(&["--store", &format!("redis://:hunter2@{}", &closed["redis://".len()..])]),
            format!("error: cannot open the store at redis://:***@{0}: nothing listens at {0} (the connection was refused). Check that the store is running and reachable from this machine.", &closed["redis://".len()..]),
        ),
        (
            owned(&["serve", "--demo", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", &closed]),
            format!("error: cannot open the store at {closed}: nothing listens at {} (the connection was refused). Check that the store is running and reachable from this machine.", &closed["redis://".len()..]),
        ),
        (
            owned(&["serve", "--demo", "--cache", "tracking"]),
            "error: --cache tracking needs a Redis store (it uses Redis's client tracking to hear of every change); for other stores use --cache ttl:MS".into(),
        ),
        (
            owned(&["serve", "--demo", "--cache", "tracking", "--store", "redis-cluster://127.0.0.1:7000"]),
            "error: --cache tracking does not work on a Redis Cluster (Redis tracks keys per node, and Oka's tracking connection hears one node); use --cache ttl:MS there".into(),
        ),
        (
            owned(&["serve", "--demo", "--cache", "ttl:500"]),
            "error: --cache is for Redis and CQL stores; memory:// is already in this process and needs none (drop --cache, or give --store redis://…)".into(),
        ),
        (
            owned(&["serve", "--demo", "--store", "redis://127.0.0.1:6379?layout=volgaa"]),
            "error: the store URL `redis://127.0.0.1:6379?layout=volgaa`: `layout=volgaa`: the layouts are `oka` (the default: Oka's own), `volga` (Volga's hot-feature hashes, read-only) and `feast` (Feast's online store, with `oka serve --feast-repo`) (did you mean `volga`?)".into(),
        ),
        (
            owned(&["serve", "--demo", "--store", "redis://127.0.0.1:6379?layuot=x"]),
            "error: the store URL `redis://127.0.0.1:6379?layuot=x`: unknown option `layuot`: redis:// takes only `layout` (`oka`, `volga` or `feast`); `sentinelServiceName` makes it a sentinel URL (did you mean `layout`?)".into(),
        ),
        (
            ingest(&["--store", &closed_cql]),
            format!("error: cannot open the store at {closed_cql}: nothing listens at {} (the connection was refused). Check that the store is running and reachable from this machine.", &closed_cql["scylla://".len()..closed_cql.len() - 3]),
        ),
        (
            owned(&["serve", "--demo", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", &closed_cql]),
            format!("error: cannot open the store at {closed_cql}: nothing listens at {} (the connection was refused). Check that the store is running and reachable from this machine.", &closed_cql["scylla://".len()..closed_cql.len() - 3]),
        ),
        (
            ingest(&["--store", "scylla://no-such-host.invalid/ks"]),
            "error: cannot open the store at scylla://no-such-host.invalid/ks: the host name no-such-host.invalid does not resolve. Check that the store is running and reachable from this machine.".into(),
        ),
        (
            ingest(&["--store", "redis://no-such-host.invalid:6379"]),
            "error: cannot open the store at redis://no-such-host.invalid:6379: the host name no-such-host.invalid does not resolve. Check that the store is running and reachable from this machine.".into(),
        ),
        (
            owned(&["ingest", "--spec", spec, "--feature", "transaction", "--file", data, "--store", "memory://"]),
            format!("error: unknown feature `transaction` in {spec} (did you mean `transactions`?)"),
        ),
        (
            owned(&["ingest", "--spec", spec, "--feature", "stats", "--file", data, "--store", "memory://"]),
            "error: `stats` is an on-demand feature; only pipeline features are ingested".into(),
        ),
        (
            owned(&["ingest", "--spec", spec, "--feature", "transactions", "--file", "no-such.jsonl", "--store", "memory://"]),
            "error: reading no-such.jsonl: no such file or directory".into(),
        ),
        (
            owned(&["ingest", "--spec", spec, "--feature", "transactions", "--file", "-", "--store", "memory://"]),
            "error: reading standard input needs --format jsonl or --format csv".into(),
        ),
        (
            owned(&["ingest", "--spec", spec, "--feature", "transactions", "--file", "data.txt", "--store", "memory://"]),
            "error: data.txt: unknown file type (expected .jsonl, .ndjson, .json or .csv; or pass --format)".into(),
        ),
        (
            owned(&["validate", "--spec", "no-such.yaml"]),
            "error: reading the spec no-such.yaml: no such file or directory".into(),
        ),
        (
            owned(&["serve", "--spec", "no-such.yaml"]),
            "error: reading the spec no-such.yaml: no such file or directory".into(),
        ),
        (
            owned(&["schema", "--store", "redis://127.0.0.1:6379"]),
            "error: the store URL `redis://127.0.0.1:6379`: invalid CQL store scheme `redis`: expected scylla:// or cassandra://".into(),
        ),
        (
            owned(&["schema", "--store", "scylla://u:secret@127.0.0.1/ks?replication=simple:3"]),
            "error: the store URL `scylla://u:***@127.0.0.1/ks?replication=simple:3`: unknown option `replication`: scylla:// URLs take no options; give it as a flag: --store-replication".into(),
        ),
    ];
    assert!(cases.len() >= 25);
    for (args, want) in &cases {
        let out = Command::new(OKA)
            .args(args)
            .env_remove("OKA_STORE")
            .env("OKA_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "oka {args:?} should fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        assert_eq!(last, want, "oka {args:?}\n{stderr}");
        for bad in FORBIDDEN {
            assert!(
                !stderr.contains(bad),
                "oka {args:?} shows `{bad}`:\n{stderr}"
            );
        }
    }
}

/// `oka ingest --store memory://` is a dry run: the records are checked and
/// counted, and both the start and the summary say that nothing is kept.
#[test]
fn ingest_into_memory_is_a_dry_run_and_says_so() {
    let spec = tmp_file("dry-run.yaml", SPEC);
    let data = tmp_file("dry-run.jsonl", "{\"user_id\":\"u\",\"amount\":1.0}\n");
    let out = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "transactions",
        ])
        .arg("--spec")
        .arg(&spec)
        .arg("--file")
        .arg(&data)
        .env_remove("OKA_STORE")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "note: --store memory:// is a dry run: the records are checked and written to a store inside this process, which is gone when `oka ingest` exits\n"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{}: read 1 records; wrote 1 records to `transactions` in ", data.display()))
            && stdout.ends_with("; rejected 0; not written (store failed) 0 (a dry run: --store memory:// kept nothing)\n"),
        "{stdout}"
    );
}

/// `OKA_LOG` that does not parse is said, not silently replaced by the default.
#[test]
fn a_log_filter_that_does_not_parse_is_reported() {
    let spec = tmp_file("log-filter.yaml", SPEC);
    let out = Command::new(OKA)
        .args([
            "ingest",
            "--store",
            "memory://",
            "--feature",
            "transactions",
            "--format",
            "jsonl",
            "--file",
            "-",
        ])
        .arg("--spec")
        .arg(&spec)
        .env("OKA_LOG", "oka=loud")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("warning: OKA_LOG=`oka=loud` is not a log filter (error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5); using `info,scylla=off,fred=off`\n"),
        "{stderr}"
    );
}

/// `oka serve` without `--store` serves from memory: it says so at start (WARN)
/// and in `/readyz`.
#[test]
fn serve_without_a_store_says_its_data_is_in_memory() {
    let log = tmp_file("memory-serve.log", "");
    let common::Oka {
        server: _server,
        admin,
        ..
    } = common::start_oka(&["--demo", "--workers", "1"], Some(&log));
    let (status, body) = common::http(admin, "GET", "/readyz", "").unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        body,
        r#"{"ready":true,"note":"the store is memory:// (in this process): data written to it is lost when the server exits; give --store for a shared one"}"#
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("WARN") && logged.contains("no --store given: serving from memory:// inside this process; what is ingested is lost when it exits"),
        "{logged}"
    );
}

/// `oka validate` rejects a misspelt field inside a lambda, naming the feature,
/// the field path and the likely field.
#[test]
fn validate_rejects_a_typo_inside_a_lambda() {
    let spec = tmp_file(
        "lambda.yaml",
        &SPEC.replace(
            "  stats:",
            "  mean_1h:\n    kind: on_demand\n    dependencies: [{feature: transactions, query: range, lookback_s: 3600}]\n    output: {fields: {mean: float}}\n    udf: {expr: {mean: \"math.mean(transactions.filter(t, t.amount > 0.0).map(t, t.amout))\"}}\n  stats:",
        ),
    );
    let out = Command::new(OKA)
        .args(["validate", "--spec"])
        .arg(&spec)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "{}: features.mean_1h.udf.expr.mean: `t.amout`: records of `transactions` (entity `Txn`) have no field `amout` (did you mean `amount`?)",
            spec.display()
        )
    );
}
