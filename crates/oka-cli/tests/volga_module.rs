//! A module written for Volga's on-demand layer, served unchanged by `oka
//! serve --volga-module` with real CPython (`python3`, or `OKA_TEST_PYTHON`):
//! the seven patterns of docs/migrating-from-volga.md (tests/volga_patterns/
//! patterns.py) answer as their CEL versions (patterns.yaml) do, over Volga's
//! route and Oka's, from the same records.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{http, start_oka};
use serde_json::{Value, json};

fn patterns(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/volga_patterns")
        .join(file)
}

fn python() -> String {
    std::env::var("OKA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

fn post(addr: SocketAddr, path: &str, body: &Value) -> Value {
    let (status, text) = http(addr, "POST", path, &body.to_string()).expect("an answer");
    assert_eq!(status, 200, "{path} {body}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// The same records into both servers.
fn ingest(servers: &[SocketAddr], feature: &str, records: Value) {
    for &addr in servers {
        let v = post(
            addr,
            "/v1/ingest",
            &json!({"feature": feature, "records": records}),
        );
        assert_eq!(v["rejected"], 0, "{feature}: {v}");
    }
}

/// A request's results with the timestamps of `now_features` left out (each
/// server's request time).
fn results(v: &Value, now_features: &[&str]) -> Value {
    let mut r = v["results"].clone();
    for f in now_features {
        if let Some(keys) = r.get_mut(*f).and_then(Value::as_array_mut) {
            for records in keys.iter_mut().filter_map(Value::as_array_mut) {
                for record in records.iter_mut().filter_map(Value::as_object_mut) {
                    record.remove("timestamp");
                }
            }
        }
    }
    r
}

#[test]
fn the_seven_volga_patterns_served_from_the_module_answer_as_their_cel_versions() {
    let py = python();
    let module = patterns("patterns.py");
    let volga = start_oka(
        &[
            "--volga-module",
            module.to_str().unwrap(),
            "--python",
            &py,
            "--workers",
            "2",
        ],
        None,
    );
    let spec = patterns("patterns.yaml");
    let cel = start_oka(&["--spec", spec.to_str().unwrap(), "--workers", "1"], None);
    let both = [volga.addr, cel.addr];

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    ingest(
        &both,
        "test_feature",
        json!([
        {"id": "test-id", "value": 2.0}, {"id": "test-id-1", "value": 3.0}, {"id": "test-id-2", "value": 4.0}]),
    );
    let mut window = Vec::new();
    for (id, base) in [("test-id", 1.0), ("test-id-1", 2.0), ("test-id-2", 3.0)] {
        for (minute, step) in [("11:58", 0.0), ("11:59", 0.5), ("12:00", 1.0)] {
            window.push(json!({"id": id, "value": base + step, "timestamp": format!("2024-01-01T{minute}:00Z")}));
        }
    }
    ingest(&both, "pipeline_feature", Value::Array(window));
    ingest(&both, "base_feature1", json!([{"id": "a", "value": 2.0}]));
    ingest(&both, "base_feature2", json!([{"id": "a", "value": 5.0}]));
    ingest(
        &both,
        "user_order_pipeline",
        json!([{"user_id": "123", "product_id": "123",
        "product_name": "Product", "user_name": "John", "timestamp": "2026-03-01T10:00:00Z"}]),
    );
    ingest(
        &both,
        "user_spent_pipeline",
        json!([{"user_id": "7", "avg_spent_7d": 100.0,
        "num_purchases_1h": 8, "timestamp": "2026-03-01T10:00:00Z"}]),
    );
    ingest(
        &both,
        "orders",
        json!([
        {"buyer_id": "1", "product_id": "p1", "product_type": "ON_SALE", "product_price": 100.0, "purchased_at": now - 2.0 * 86400.0},
        {"buyer_id": "1", "product_id": "p2", "product_type": "ON_SALE", "product_price": 100.0, "purchased_at": now - 1800.0},
        {"buyer_id": "1", "product_id": "p3", "product_type": "ON_SALE", "product_price": 40.0, "purchased_at": now - 600.0},
        {"buyer_id": "1", "product_id": "p4", "product_type": "NORMAL", "product_price": 999.0, "purchased_at": now - 300.0},
        {"buyer_id": "1", "product_id": "p5", "product_type": "ON_SALE", "product_price": 500.0, "purchased_at": now - 8.0 * 86400.0}]),
    );

    let now_features = [
        "simple_feature",
        "dependent_feature",
        "chained_feature",
        "list_feature",
        "level1_feature1",
        "level1_feature2",
        "level2_feature",
        "level3_feature",
        "order_stats",
    ];
    let requests = [
        // 1. The seed workload, with a key that has no record.
        json!({"target_features": ["simple_feature"],
               "feature_keys": {"simple_feature": [{"id": "test-id"}, {"id": "test-id-1"}, {"id": "test-id-2"}, {"id": "nope"}]},
               "udf_args": {"simple_feature": {"multiplier": 2.0}}}),
        // 2. A chain, then two queries on one pipeline feature.
        json!({"target_features": ["chained_feature"],
               "feature_keys": {"dependent_feature": [{"id": "test-id"}, {"id": "test-id-1"}]},
               "udf_args": {"dependent_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 1.0}}}),
        json!({"target_features": ["dependent_feature", "list_feature"],
               "feature_keys": {"dependent_feature": [{"id": "test-id"}, {"id": "test-id-1"}],
                                "list_feature": [{"id": "test-id"}, {"id": "test-id-1"}, {"id": "test-id-2"}]},
               "query_args": {"list_feature": {"start": "2024-01-01T10:00:00Z", "end": "2024-01-01T12:00:00Z"}},
               "udf_args": {"dependent_feature": {"multiplier": 2.0}}}),
        // 3. A diamond.
        json!({"target_features": ["level3_feature", "level2_feature"], "keys": [{"id": "a"}, {"id": "b"}]}),
        // 4. Two entities, a compound key.
        json!({"target_features": ["user_order_stats"], "keys": [{"user_id": "123", "product_id": "123"}]}),
        // 5 and 6. The input's timestamp kept; the pipeline feature itself.
        json!({"target_features": ["user_stats", "user_spent_pipeline"], "keys": [{"user_id": "7"}]}),
        // 7. A window at request time.
        json!({"target_features": ["order_stats"], "keys": [{"buyer_id": "1"}],
               "query_args": {"order_stats": {"start": now - 7.0 * 86400.0, "end": now}}}),
    ];
    let mut answers = Vec::new();
    for request in &requests {
        for path in ["/on_demand_compute", "/v1/features"] {
            let (a, b) = (
                post(volga.addr, path, request),
                post(cel.addr, path, request),
            );
            assert_eq!(
                results(&a, &now_features),
                results(&b, &now_features),
                "{path} {request}:\nfrom the module: {a}\nfrom CEL:        {b}"
            );
            assert_eq!(a["statuses"], b["statuses"], "{path} {request}");
            assert!(a.get("errors").is_none(), "{a}");
        }
        answers.push(post(volga.addr, "/on_demand_compute", request));
    }
    // What Volga answered, as docs/migrating-from-volga.md says.
    let value =
        |i: usize, f: &str, k: usize, field: &str| answers[i]["results"][f][k][0][field].clone();
    assert_eq!(
        (0..3)
            .map(|k| value(0, "simple_feature", k, "value"))
            .collect::<Vec<_>>(),
        [json!(4.0), json!(6.0), json!(8.0)]
    );
    assert_eq!(answers[0]["results"]["simple_feature"][3], Value::Null);
    assert_eq!(
        [
            value(1, "chained_feature", 0, "computed_value"),
            value(1, "chained_feature", 1, "computed_value")
        ],
        [json!(5.0), json!(7.0)]
    );
    assert_eq!(value(2, "list_feature", 2, "computed_value"), json!(10.5));
    assert_eq!(value(2, "list_feature", 2, "num_entities"), json!(3));
    assert_eq!(value(3, "level3_feature", 0, "computed_value"), json!(7.0));
    assert_eq!(
        value(4, "user_order_stats", 0, "order_name"),
        json!("Product")
    );
    assert_eq!(
        value(4, "user_order_stats", 0, "timestamp"),
        json!("2026-03-01T09:00:00")
    );
    assert_eq!(value(5, "user_stats", 0, "total_spent"), json!(800.0));
    assert_eq!(value(6, "order_stats", 0, "avg_spent_7d"), json!(80.0));
    assert_eq!(value(6, "order_stats", 0, "num_purchases_1h"), json!(2));
    assert_eq!(value(6, "order_stats", 0, "total_spent"), json!(160.0));
    // Volga's routes answer records in the entity's declared order.
    let record = answers[4]["results"]["user_order_stats"][0][0]
        .as_object()
        .unwrap();
    assert_eq!(
        record.keys().collect::<Vec<_>>(),
        ["user_id", "order_name", "timestamp"]
    );
}

#[test]
fn a_volga_module_that_does_not_import_or_declares_what_oka_cannot_serve_is_named_with_its_line() {
    let dir = std::env::temp_dir().join(format!("oka-cli-volga-module-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "broken.py",
            "from volga.api.entity import entity, field\nfrom volga.api.source import source, KafkaSource\n\n@entity\nclass E:\n    id: str = field(key=True)\n    ts: int = field(timestamp=True)\n\n@source(E)\ndef e():\n    return KafkaSource.get('k', '', '').topic('t')\n",
            "broken.py:4: the timestamp field `ts` of entity E is not a datetime",
        ),
        (
            "complex.py",
            "from datetime import datetime\nfrom volga.api.entity import entity, field\nfrom volga.api.source import source, KafkaSource\n\n@entity\nclass E:\n    id: str = field(key=True)\n    x: complex\n    ts: datetime = field(timestamp=True)\n\n@source(E)\ndef e():\n    return KafkaSource.get('k', '', '').topic('t')\n",
            "complex.py:5: field `x` of entity E has type <class 'complex'>, which Oka cannot serve",
        ),
        (
            "missing.py",
            "from volga.api.on_demand import on_demand\n\n@on_demand(dependencies=['nope'])\ndef f(x) -> int:\n    return 1\n",
            "missing.py:3: ValueError: dependency nope of feature f is not declared",
        ),
        ("syntax.py", "def f(:\n", "syntax.py:1: SyntaxError"),
    ];
    for (file, text, expected) in cases {
        std::fs::write(dir.join(file), text).unwrap();
        let out = std::process::Command::new(common::OKA)
            .args([
                "volga",
                "spec",
                dir.join(file).to_str().unwrap(),
                "--python",
                &python(),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{file}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{file}: {stderr}");
    }
    // Importing is bounded in memory as a worker is: a module that allocates
    // past --python-memory-mib is named with its line and the flag to raise.
    std::fs::write(dir.join("hungry.py"), "x = 1\nbuf = bytearray(512 << 20)\n").unwrap();
    let out = std::process::Command::new(common::OKA)
        .args(["volga", "spec", dir.join("hungry.py").to_str().unwrap()])
        .args(["--python", &python(), "--python-memory-mib", "128"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hungry.py:2: MemoryError: importing it needs more than 128 MiB (raise --python-memory-mib"),
        "{stderr}"
    );
}

#[test]
fn oka_explain_says_which_pattern_udfs_are_compiled_and_why_the_rest_are_not() {
    let explain = |extra: &[&str], tz: &str| {
        let out = std::process::Command::new(common::OKA)
            .args(["explain", "--volga-module"])
            .arg(patterns("patterns.py"))
            .args(["--python", &python()])
            .args(extra)
            // Volga's naive `datetime.now()` translates where local time is UTC.
            .env("TZ", tz)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let on = explain(&[], "UTC");
    let line = |text: &str, feature: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{feature}: ")))
            .unwrap_or_else(|| panic!("no line for {feature}: {text}"))
            .to_owned()
    };
    for f in [
        "simple_feature",
        "list_feature",
        "level2_feature",
        "user_stats",
    ] {
        let l = line(&on, f);
        assert!(
            l.starts_with(&format!(
                "{f}: compiled (equal to CPython on 288 generated inputs;"
            )),
            "{l}"
        );
        assert!(l.ends_with(&format!("[patterns.py:{f}]")), "{l}");
    }
    assert_eq!(
        line(&on, "order_stats"),
        "order_stats: python: a call of the method `.replace` (line 201) [patterns.py:order_stats]"
    );
    let off = explain(&["--python-compile", "off"], "UTC");
    assert_eq!(
        line(&off, "simple_feature"),
        "simple_feature: python: --python-compile=off [patterns.py:simple_feature]"
    );
    // Five hours west of UTC (a POSIX zone: no tz database needed), the naive
    // local `datetime.now()` is not the request's UTC time.
    let west = explain(&[], "EST+5");
    assert_eq!(
        line(&west, "simple_feature"),
        "simple_feature: python: `datetime.now()` is local time here, not UTC (set TZ=UTC to translate it) (line 98) [patterns.py:simple_feature]"
    );
}
