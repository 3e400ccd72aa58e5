//! Training equals serving: a history replayed into `oka serve` (memory store)
//! in event-time order, requested at sampled moments, answers what
//! `oka training-set` computes for the same keys, times and arguments, bit for
//! bit, for every pipeline, window, aggregate and on-demand feature of the spec.
//! The one intended difference: serving's `now` is its clock, a training row's
//! is the row's time, so fields computed from `now` (an on-demand record's
//! default timestamp, an aggregate's timestamp) are not compared; a window's
//! end is given to the server as `query_args.<feature>.end`, the row's time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs::File;
use std::path::Path;
use std::process::Command;

use common::{OKA, http, start_oka, tmp_file};
use oka_core::{FieldType, Timestamp, Value};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value as Json, json};

const SPEC: &str = r#"
version: 1
entities:
  User:
    keys: {user_id: string}
    timestamp: ts
    fields: {balance: float, visits: int, tier: string, tags: list<string>}
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, items: int, merchant: string}
  Merchant:
    keys: {merchant_id: int}
    timestamp: ts
    fields: {risk: float}
features:
  profile: {kind: pipeline, entity: User, history: 5}
  txn: {kind: pipeline, entity: Txn, history: 40}
  merchant_risk: {kind: pipeline, entity: Merchant}
  spend_1h:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 3600}
      outputs:
        n: count
        total: {sum: amount}
        mean: {mean: amount}
        p90: {percentile: amount, p: 0.9}
        spread: {stddev: amount}
        items: {sum: items}
        last_merchant: {last: merchant}
  last_3:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 3}
      outputs: {n: count, mean: {mean: amount}, top: {max: amount}}
  scaled:
    kind: on_demand
    dependencies: [profile]
    args: {factor: {type: float, default: 1.5}}
    output: {fields: {v: float, tagged: int, vip: bool}}
    udf:
      expr:
        v: "profile.balance * factor + double(profile.visits)"
        tagged: "size(profile.tags)"
        vip: "profile.tier == 'gold'"
  big_share:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 5}]
    output: {fields: {share: float}}
    udf:
      expr:
        share: "size(txn) == 0 ? 0.0 : double(size(txn.filter(t, t.amount > 50.0))) / double(size(txn))"
  txn_risk:
    kind: on_demand
    dependencies: [merchant_risk, scaled]
    output: {fields: {score: float}}
    udf:
      expr: {score: "merchant_risk.risk * scaled.v"}
  scaled_py:
    kind: on_demand
    dependencies: [profile]
    args: {factor: {type: float, default: 1.5}}
    output: {fields: {v: float, tagged: int, vip: bool}}
    udf: {python: {file: training_udfs.py, function: scaled}}
  big_share_py:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 5}]
    output: {fields: {share: float, merchants: list<string>}}
    udf: {python: {file: training_udfs.py, function: big_share}}
  txn_risk_py:
    kind: on_demand
    dependencies: [merchant_risk, scaled_py]
    output: {fields: {score: float}}
    udf: {python: {file: training_udfs.py, function: txn_risk}}
"#;

/// The Python UDFs of [`SPEC`]: the CEL ones' logic, and a list built per key.
const UDFS: &str = r#"
def scaled(profile, factor=1.5):
    return {"v": profile["balance"] * factor + float(profile["visits"]),
            "tagged": len(profile["tags"]), "vip": profile["tier"] == "gold"}

def big_share(txn):
    share = 0.0 if not txn else sum(1 for t in txn if t["amount"] > 50.0) / len(txn)
    return {"share": share, "merchants": [t["merchant"] for t in txn]}

def txn_risk(merchant_risk, scaled_py):
    return {"score": merchant_risk["risk"] * scaled_py["v"]}
"#;

/// [`SPEC`] written as `name`, with its Python module beside it.
fn spec_file(name: &str) -> std::path::PathBuf {
    tmp_file("training_udfs.py", UDFS);
    tmp_file(name, SPEC)
}

/// Fields computed from `now`, which serving takes from its clock.
const FROM_NOW: &[&str] = &[
    "spend_1h__ts",
    "last_3__ts",
    "scaled__ts",
    "big_share__ts",
    "txn_risk__ts",
    "scaled_py__ts",
    "big_share_py__ts",
    "txn_risk_py__ts",
];

const TIERS: [&str; 3] = ["gold", "silver", "none"];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
    fn float(&mut self) -> f64 {
        self.next(1 << 40) as f64 / 7_919.0
    }
}

fn rfc3339(t: i64) -> String {
    Timestamp(t).to_rfc3339()
}

/// Records of each pipeline feature in generation (file) order: not sorted by
/// time, with some equal times (the later one wins).
fn history(rng: &mut Lcg, t0: i64) -> Vec<(&'static str, i64, Json)> {
    let mut out = Vec::new();
    let span = 4 * 3_600 * 1_000_000i64;
    for _ in 0..1_500 {
        let t = t0 + rng.next(span as u64) as i64;
        let user = format!("u{}", rng.next(12));
        out.push(match rng.next(10) {
            0..=2 => (
                "profile",
                t,
                json!({"user_id": user, "ts": rfc3339(t), "balance": rng.float(),
                "visits": rng.next(1000), "tier": TIERS[rng.next(3) as usize],
                "tags": (0..rng.next(4)).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
            ),
            3 => (
                "merchant_risk",
                t,
                json!({"merchant_id": rng.next(4), "ts": rfc3339(t), "risk": rng.float() / 1e6}),
            ),
            _ => (
                "txn",
                t,
                json!({"user_id": user, "ts": rfc3339(t), "amount": rng.float() / 1e6,
                "items": rng.next(9), "merchant": format!("m{}", rng.next(5))}),
            ),
        });
        if rng.next(20) == 0 {
            // A record at the same time as the last, written after it.
            let (f, t, mut r) = out.last().cloned().unwrap();
            if let Some(b) = r.get_mut("balance") {
                *b = json!(rng.float());
            }
            out.push((f, t, r));
        }
    }
    out
}

#[test]
fn a_training_set_equals_what_serving_answered_at_each_moment() {
    let mut rng = Lcg(11);
    let t0 = Timestamp::now().0 - 6 * 3_600 * 1_000_000;
    let records = history(&mut rng, t0);
    let spec = spec_file("training-spec.yaml");
    let dir = spec.parent().unwrap().to_owned();
    let mut files = Vec::new();
    for f in ["profile", "txn", "merchant_risk"] {
        let lines: String = records
            .iter()
            .filter(|r| r.0 == f)
            .map(|r| format!("{}\n", r.2))
            .collect();
        files.push(format!(
            "{f}={}",
            tmp_file(&format!("training-{f}.jsonl"), &lines).display()
        ));
    }
    // Sampled moments and the rows asked at each.
    let mut moments: Vec<i64> = (0..25)
        .map(|_| t0 + rng.next(5 * 3_600 * 1_000_000) as i64)
        .collect();
    moments.sort_unstable();
    let mut rows = Vec::new();
    for &t in &moments {
        for _ in 0..4 {
            let factor = (rng.next(3) > 0).then(|| rng.float());
            rows.push((format!("u{}", rng.next(14)), rng.next(5) as i64, t, factor));
        }
    }
    // Serving: replay in event-time order (file order for equal times) up to
    // each moment, then ask.
    let oka = start_oka(&["--spec", spec.to_str().unwrap()], None);
    let mut order: Vec<&(&str, i64, Json)> = records.iter().collect();
    order.sort_by_key(|r| r.1);
    let mut next = 0;
    let mut served = Vec::new();
    for (user, merchant, t, factor) in &rows {
        let upto = order.partition_point(|r| r.1 <= *t);
        // One body per run of one feature's records: a body is written in
        // order, a batch at a time.
        for run in order[next.min(upto)..upto].chunk_by(|a, b| a.0 == b.0) {
            let records: Vec<&Json> = run.iter().map(|r| &r.2).collect();
            let body = json!({"feature": run[0].0, "records": records}).to_string();
            let (status, answer) = http(oka.addr, "POST", "/v1/ingest", &body).unwrap();
            assert_eq!(status, 200, "{answer}");
            assert!(
                answer.contains(&format!("\"written\":{}", records.len())),
                "{answer}"
            );
        }
        next = next.max(upto);
        let mut udf_args = json!({});
        if let Some(f) = factor {
            udf_args = json!({"scaled": {"factor": f}, "scaled_py": {"factor": f}});
        }
        let end = json!({"end": rfc3339(*t)});
        let body = json!({"target_features": ["profile", "txn", "merchant_risk", "spend_1h", "last_3", "scaled", "big_share", "txn_risk", "scaled_py", "big_share_py", "txn_risk_py"],
            "keys": [{"user_id": user, "merchant_id": merchant}], "udf_args": udf_args,
            "query_args": {"spend_1h": end}});
        let (status, answer) = http(oka.addr, "POST", "/v1/features", &body.to_string()).unwrap();
        assert_eq!(status, 200, "{answer}");
        served.push(serde_json::from_str::<Json>(&answer).unwrap());
    }
    // Training: the same rows.
    let mut csv = String::from("user_id,merchant_id,timestamp,factor\n");
    for (user, merchant, t, factor) in &rows {
        let f = factor.map(|f| format!("{f:?}")).unwrap_or_default();
        csv.push_str(&format!("{user},{merchant},{},{f}\n", rfc3339(*t)));
    }
    let entities = tmp_file("training-entities.csv", &csv);
    let out = dir.join("training-out.parquet");
    let mut cmd = Command::new(OKA);
    cmd.args([
        "training-set",
        "--spec",
        spec.to_str().unwrap(),
        "--entities",
        entities.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    for f in &files {
        cmd.args(["--history", f]);
    }
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    compare(&out, &served);
}

/// Every output column of every row equals the served record's field (floats
/// by bits), and every status the served status.
fn compare(out: &Path, served: &[Json]) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(out).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(batch.num_rows(), served.len());
    let mut compared = 0;
    let mut present = 0;
    for field in batch.schema().fields() {
        let Some((feature, name)) = field.name().split_once("__") else {
            continue;
        };
        if FROM_NOW.contains(&field.name().as_str()) {
            continue;
        }
        let ty = field_type(field.data_type());
        let values =
            oka_training::convert::values(batch.column_by_name(field.name()).unwrap(), &ty)
                .unwrap();
        for (row, (value, answer)) in values.iter().zip(served).enumerate() {
            let status = answer["statuses"][feature][0]
                .as_str()
                .unwrap_or_else(|| panic!("{feature}: {answer}"));
            if name == "status" {
                assert_eq!(
                    value,
                    &Value::String(status.into()),
                    "row {row} {feature}: {answer}"
                );
                present += usize::from(status == "present");
                continue;
            }
            let want = &answer["results"][feature][0][0][name];
            let want = if status == "present" {
                ty.from_json(want).unwrap()
            } else {
                Value::Null
            };
            match (value, &want) {
                (Value::Float(a), Value::Float(b)) => assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "row {row} {field}: {a} vs {b}",
                    field = field.name()
                ),
                _ => assert_eq!(value, &want, "row {row} {}: {answer}", field.name()),
            }
            compared += 1;
        }
    }
    assert!(
        compared > 1_500 && present > 400,
        "compared {compared} values, {present} present"
    );
    eprintln!(
        "training equals serving: {compared} values and {} statuses of {} rows",
        present,
        served.len()
    );
}

fn field_type(dt: &arrow::datatypes::DataType) -> FieldType {
    use arrow::datatypes::DataType as D;
    match dt {
        D::Utf8 => FieldType::String,
        D::Int64 => FieldType::Int,
        D::Float64 => FieldType::Float,
        D::Boolean => FieldType::Bool,
        D::Timestamp(_, _) => FieldType::Timestamp,
        D::List(f) => FieldType::List(Box::new(field_type(f.data_type()))),
        other => panic!("unexpected output type {other}"),
    }
}

/// Ctrl-C while a training set is made: exit 130, no output, no partial file;
/// and a refused input: exit 1, one line naming the place, no output.
#[test]
fn an_interrupted_or_refused_training_set_leaves_no_file() {
    let spec = spec_file("interrupt-spec.yaml");
    let dir = spec.parent().unwrap().join("interrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let mut lines = String::new();
    for i in 0..400_000 {
        lines.push_str(&format!(
            "{{\"user_id\":\"u{}\",\"ts\":{},\"amount\":1.5,\"items\":1,\"merchant\":\"m\"}}\n",
            i % 5000,
            1_700_000_000 + i
        ));
    }
    let txn = dir.join("txn.jsonl");
    std::fs::write(&txn, lines).unwrap();
    let entities = dir.join("e.csv");
    std::fs::write(&entities, "user_id,timestamp\nu1,1700000100\n").unwrap();
    let out = dir.join("out.parquet");
    let args = |extra: &[&str]| {
        let mut c = Command::new(OKA);
        c.args([
            "training-set",
            "--spec",
            spec.to_str().unwrap(),
            "--entities",
            entities.to_str().unwrap(),
        ])
        .args([
            "--out",
            out.to_str().unwrap(),
            "--features",
            "spend_1h",
            "--history",
        ])
        .arg(format!("txn={}", txn.display()))
        .args(extra);
        c
    };
    let child = args(&[])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // SIGINT once the process has caught it (before that, on a busy machine,
    // the signal's default action would end it unreported), then a moment
    // more, to be mid-work.
    common::wait_until_caught(child.id(), 2); // SIGINT
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted") && stderr.contains("no output file"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "left behind: {left:?}");
    // Refused: an entity file without the key column.
    std::fs::write(&entities, "user,timestamp\nu1,1700000100\n").unwrap();
    let done = args(&[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("e.csv: column `user_id`: missing"),
        "{stderr}"
    );
    assert!(!out.exists());
}
