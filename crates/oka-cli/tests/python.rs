//! Python UDFs through `oka serve` over real sockets, with real CPython
//! (`python3`, or `OKA_TEST_PYTHON`): every failure kind of a UDF answered
//! clearly while a probe beside it stays all-200, start and reload refused for
//! a module that does not load, a reload under load that mixes no versions,
//! and readiness when no worker is alive.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{OKA, http, start_oka_env};
use serde_json::{Value, json};

fn python() -> String {
    std::env::var("OKA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// A fresh folder holding `spec.yaml` and `udfs.py`.
fn project(name: &str, spec: &str, module: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oka-cli-python-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("spec.yaml"), spec).unwrap();
    std::fs::write(dir.join("udfs.py"), module).unwrap();
    dir
}

/// The seed's entity, 100 keys written by a mock source (`test-id-I` has value
/// I), the CEL `simple_feature`, and `features` (YAML under `features:`).
fn spec(features: &str) -> String {
    format!(
        "version: 1
entities:
  TestEntity:
    keys: {{id: string}}
    timestamp: timestamp
    fields: {{value: float}}
features:
  test_feature:
    kind: pipeline
    entity: TestEntity
    source:
      mock:
        generate: {{count: 100, columns: {{id: \"'test-id-' + string(i)\", value: \"double(i)\"}}}}
  simple_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {{multiplier: {{type: float, default: 1.0}}}}
    udf:
      expr: {{id: \"test_feature.id\", value: \"test_feature.value * multiplier\", timestamp: \"now\"}}
{features}"
    )
}

fn serve(dir: &Path, extra: &[&str]) -> common::Oka {
    let spec = dir.join("spec.yaml");
    let py = python();
    let mut args = vec![
        "--spec",
        spec.to_str().unwrap(),
        "--workers",
        "2",
        "--python",
        py.as_str(),
    ];
    args.extend_from_slice(extra);
    start_oka_env(&args, &[], Some(&dir.join("oka.log")))
}

fn post(addr: SocketAddr, body: &Value) -> (u16, Value) {
    let (status, text) = http(addr, "POST", "/v1/features", &body.to_string()).expect("an answer");
    let json =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, json)
}

/// Requests the CEL feature and the well-behaved Python one for a key until
/// stopped, checking every answer; the number of requests it made.
struct Probe {
    stop: Arc<AtomicBool>,
    /// Requests answered so far, every one 200 and right.
    answered: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<Result<usize, String>>,
}

impl Probe {
    fn start(addr: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let answered = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&answered);
        let handle = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                let i = n % 100;
                let body = json!({"target_features": ["simple_feature", "simple_py"],
                    "keys": [{"id": format!("test-id-{i}")}],
                    "udf_args": {"simple_feature": {"multiplier": 2.0}, "simple_py": {"multiplier": 2.0}}});
                let Some((status, text)) = http(addr, "POST", "/v1/features", &body.to_string())
                else {
                    return Err(format!("request {n}: no answer"));
                };
                let v: Value =
                    serde_json::from_str(&text).map_err(|_| format!("request {n}: {text}"))?;
                let want = json!(f64::from(i as u32) * 2.0);
                if status != 200
                    || v["results"]["simple_feature"][0][0]["value"] != want
                    || v["results"]["simple_py"][0][0]["value"] != want
                {
                    return Err(format!("request {n}: {status} {text}"));
                }
                n += 1;
                count.store(n, Ordering::Relaxed);
            }
            Ok(n)
        });
        Self {
            stop,
            answered,
            handle,
        }
    }

    /// Requests answered so far.
    fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    /// Waits (up to 30 s: a busy machine) until the probe has answered more
    /// than `n` requests: it went on beside whatever ran since it had `n`.
    fn wait_past(&self, n: usize, case: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.answered() <= n {
            assert!(
                Instant::now() < deadline && !self.handle.is_finished(),
                "the probe made no progress beside `{case}`"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.join().unwrap() {
            Ok(n) => n,
            Err(e) => panic!("the probe saw a failure: {e}"),
        }
    }
}

const FRAGILE: &str = r#"
import ctypes, os

def simple(test_feature, multiplier=1.0):
    return {'id': test_feature['id'], 'value': test_feature['value'] * multiplier}

def fragile(test_feature, case='ok'):
    if case == 'raise':
        raise KeyError('no such thing')
    if case == 'loop':
        while True:
            pass
    if case == 'segv':
        ctypes.string_at(0)
    if case == 'exit':
        os._exit(7)
    if case == 'memory':
        hog = bytearray(1 << 30)
        return {'value': float(len(hog))}
    if case == 'wrong':
        return {'value': 'not a float'}
    return {'value': test_feature['value']}
"#;

fn fragile_spec() -> String {
    spec(
        "  simple_py:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf: {python: {file: udfs.py, function: simple}}
  fragile_py:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {case: {type: string, default: ok}}
    udf: {python: {file: udfs.py, function: fragile, timeout_ms: 300}}
",
    )
}

fn fragile(addr: SocketAddr, case: &str) -> (u16, Value) {
    post(
        addr,
        &json!({"target_features": ["fragile_py", "simple_feature"],
                "keys": [{"id": "test-id-5"}, {"id": "test-id-6"}],
                "udf_args": {"fragile_py": {"case": case}}}),
    )
}

#[test]
fn every_failure_of_a_python_udf_is_answered_and_a_probe_beside_it_stays_all_200() {
    let dir = project("failures", &fragile_spec(), FRAGILE);
    let oka = serve(
        &dir,
        &["--python-workers", "2", "--python-memory-mib", "300"],
    );
    let probe = Probe::start(oka.addr);

    let (status, v) = fragile(oka.addr, "ok");
    assert_eq!(
        (status, &v["results"]["fragile_py"][1][0]["value"]),
        (200, &json!(6.0))
    );
    assert!(v.get("errors").is_none(), "no errors, no `errors`: {v}");

    for (case, message) in [
        ("raise", "KeyError: 'no such thing'"),
        (
            "wrong",
            "`fragile_py` (udfs.py:fragile): field `value`: expected float, got str 'not a float'",
        ),
        (
            "segv",
            "the Python worker running `udfs.py:fragile` for this key died (killed by signal 11 (SIGSEGV)); it was replaced",
        ),
        ("exit", "died (exited with status 7)"),
        (
            "memory",
            "MemoryError: the UDF ran out of memory (the worker's limit is 300 MiB, --python-memory-mib)",
        ),
    ] {
        let before = probe.answered();
        let (status, v) = fragile(oka.addr, case);
        probe.wait_past(before, case);
        assert_eq!(status, 200, "{case}: {v}");
        assert_eq!(
            v["statuses"]["fragile_py"],
            json!(["error", "error"]),
            "{case}: {v}"
        );
        let got = v["errors"]["fragile_py"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(got.contains(message), "{case}: {got}");
        assert_eq!(v["errors"]["fragile_py"][0]["code"], "udf_failed");
        assert_eq!(
            v["results"]["simple_feature"][0][0]["value"],
            json!(5.0),
            "{case}: other features are answered"
        );
        assert!(v["errors"].get("simple_feature").is_none());
    }

    let before = probe.answered();
    let started = Instant::now();
    let (status, v) = fragile(oka.addr, "loop");
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["error"]["code"], "udf_timeout");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`udfs.py:fragile` (feature `fragile_py`) ran past its limit of 300 ms"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered near the limit"
    );
    probe.wait_past(before, "loop");

    // After all that, the pool serves, and the probe never saw a failure.
    let (status, _) = fragile(oka.addr, "ok");
    assert_eq!(status, 200);
    // Every probe request was answered 200 and right (else `finish` panics),
    // and it made progress beside each case (`wait_past`).
    probe.finish();
    let (_, metrics) = http(oka.admin, "GET", "/metrics", "").unwrap();
    for reason in ["crashed", "timeout", "memory"] {
        let line = format!("oka_python_worker_restarts_total{{reason=\"{reason}\"}} ");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        assert!(n >= 1, "{reason}: {n}");
    }
    let log = std::fs::read_to_string(dir.join("oka.log")).unwrap();
    assert!(
        log.contains("KeyError: 'no such thing'") && log.contains("Traceback"),
        "the traceback is logged"
    );
}

#[test]
fn a_module_that_does_not_load_refuses_the_start_and_a_reload_keeps_the_old_pool() {
    let broken = "def simple(test_feature, multiplier=1.0):\n    return {'value':\n\ndef fragile(x, case='ok'):\n    return 1\n";
    let dir = project("broken", &fragile_spec(), broken);
    let out = std::process::Command::new(OKA)
        .args([
            "serve",
            "--spec",
            dir.join("spec.yaml").to_str().unwrap(),
            "--python",
            &python(),
        ])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("features.simple_py.udf.python"), "{stderr}");
    assert!(
        stderr.contains("udfs.py:2: the module does not import: SyntaxError"),
        "{stderr}"
    );

    std::fs::write(dir.join("udfs.py"), FRAGILE).unwrap();
    let oka = serve(&dir, &["--python-workers", "1"]);
    std::fs::write(dir.join("udfs.py"), broken).unwrap();
    let (status, text) = http(oka.admin, "POST", "/admin/reload", "").unwrap();
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("udfs.py:2: the module does not import: SyntaxError"),
        "{text}"
    );
    let (status, v) = fragile(oka.addr, "ok");
    assert_eq!(
        (status, &v["results"]["fragile_py"][0][0]["value"]),
        (200, &json!(5.0)),
        "the old pool serves"
    );
}

#[test]
fn a_module_changed_and_reloaded_under_load_answers_each_request_from_one_version() {
    let module = |version: u32| {
        format!(
            "VERSION = {version}\n\ndef simple(test_feature, multiplier=1.0):\n    return {{'value': test_feature['value'] * 0 + VERSION}}\n\ndef fragile(test_feature, case='ok'):\n    return {{'value': VERSION}}\n"
        )
    };
    let dir = project("reload", &fragile_spec(), &module(1));
    let oka = serve(
        &dir,
        &["--python-workers", "2", "--reload-min-interval-ms", "0"],
    );
    let addr = oka.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"target_features": ["simple_py", "fragile_py"],
                        "keys": [{"id": "test-id-1"}, {"id": "test-id-2"}, {"id": "test-id-3"}]});
                    let (status, v) = post(addr, &body);
                    assert_eq!(status, 200, "{v}");
                    let values: Vec<f64> = ["simple_py", "fragile_py"]
                        .iter()
                        .flat_map(|f| (0..3).map(move |k| (f, k)))
                        .map(|(f, k)| v["results"][f][k][0]["value"].as_f64().unwrap())
                        .collect();
                    assert!(
                        values.iter().all(|x| *x == values[0]),
                        "one version per answer: {values:?}"
                    );
                    seen.push(values[0]);
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(dir.join("udfs.py"), module(2)).unwrap();
    let (status, text) = http(oka.admin, "POST", "/admin/reload", "").unwrap();
    assert_eq!(status, 200, "{text}");
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<f64> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        seen.contains(&1.0) && seen.contains(&2.0),
        "both versions were served"
    );
    let first_two = seen.iter().position(|v| *v == 2.0).unwrap();
    assert!(seen.len() > 20 && first_two > 0);
    let (_, v) = fragile(oka.addr, "ok");
    assert_eq!(
        v["results"]["fragile_py"][0][0]["value"],
        json!(2.0),
        "the new version serves after the reload"
    );
}

#[test]
fn readiness_fails_while_no_worker_can_start_and_says_why() {
    let marker = std::env::temp_dir().join(format!("oka-cli-python-{}-marker", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let module = format!(
        "import os\nif os.path.exists({marker:?}):\n    raise RuntimeError('the model file is gone')\n\ndef simple(test_feature, multiplier=1.0):\n    return {{'value': 1.0}}\n\ndef fragile(test_feature, case='ok'):\n    if case == 'exit':\n        open({marker:?}, 'w').close()\n        os._exit(1)\n    return {{'value': 1.0}}\n"
    );
    let dir = project("ready", &fragile_spec(), &module);
    let oka = serve(&dir, &["--python-workers", "1"]);
    let exit = json!({"target_features": ["fragile_py"], "keys": [{"id": "test-id-5"}],
                      "udf_args": {"fragile_py": {"case": "exit"}}});
    let (status, v) = post(oka.addr, &exit);
    assert_eq!(status, 200, "{v}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let reason = loop {
        let (status, text) = http(oka.admin, "GET", "/readyz", "").unwrap();
        if status == 503 {
            break text;
        }
        assert!(Instant::now() < deadline, "readiness never failed: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(reason.contains("no Python worker is alive"), "{reason}");
    assert!(
        reason.contains("RuntimeError: the model file is gone"),
        "{reason}"
    );
    let (status, v) = fragile(oka.addr, "ok");
    assert!(status == 503 || status == 200, "{v}");
    if status == 503 {
        assert_eq!(v["error"]["code"], "udf_unavailable", "{v}");
    }
    std::fs::remove_file(&marker).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while http(oka.admin, "GET", "/readyz", "").unwrap().0 != 200 {
        assert!(Instant::now() < deadline, "the pool never came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(fragile(oka.addr, "ok").0, 200);
}
