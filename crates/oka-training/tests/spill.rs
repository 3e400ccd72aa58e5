//! A history larger than `--memory-budget-mib` is spilled to disk by key, and
//! the training set is the one the in-memory run makes: the same file content,
//! value for value, for latest reads, windows, aggregates, CEL with per-row
//! arguments and a feature of two entities; nothing is left on disk, also when
//! interrupted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use oka_core::{NativeUdfs, Registry};
use oka_training::{Options, Progress, TrainingError};

use common::{Lcg, dir, read};

const SPEC: &str = r#"
version: 1
entities:
  User:
    keys: {user_id: string}
    timestamp: ts
    fields: {balance: float, visits: int, tags: list<string>}
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float}
  Merchant:
    keys: {merchant_id: int}
    timestamp: ts
    fields: {risk: float}
features:
  profile: {kind: pipeline, entity: User, history: 3, ttl_s: 400}
  txn: {kind: pipeline, entity: Txn, history: 12}
  merchant_risk: {kind: pipeline, entity: Merchant}
  spend:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 300}
      outputs: {n: count, total: {sum: amount}, top: {max: amount}}
  last_3:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 3}
      outputs: {mean: {mean: amount}}
  scaled:
    kind: on_demand
    dependencies: [profile]
    args: {factor: {type: float, default: 1.5}}
    output: {fields: {v: float, tagged: int}}
    udf:
      expr:
        v: "profile.balance * factor + double(profile.visits)"
        tagged: "size(profile.tags)"
  risk:
    kind: on_demand
    dependencies: [merchant_risk, scaled]
    output: {fields: {score: float}}
    udf:
      expr: {score: "merchant_risk.risk * scaled.v"}
"#;

/// Histories of 200 users, 30 merchants over 4,000 s (equal times and
/// out-of-order records included), and 3,000 entity rows.
fn inputs(d: &Path) -> Options {
    let mut rng = Lcg(29);
    let (mut profile, mut txn, mut merchant) = (String::new(), String::new(), String::new());
    for _ in 0..2_000 {
        let (u, t) = (rng.next(200), 1_000 + rng.next(4_000));
        let tags = (0..rng.next(3))
            .map(|i| format!("\"t{i}\""))
            .collect::<Vec<_>>()
            .join(",");
        writeln!(
            profile,
            r#"{{"user_id":"u{u}","ts":{t},"balance":{}.25,"visits":{},"tags":[{tags}]}}"#,
            rng.next(900),
            rng.next(50)
        )
        .unwrap();
    }
    for _ in 0..6_000 {
        let (u, t) = (rng.next(150), 1_000 + rng.next(4_000));
        writeln!(
            txn,
            r#"{{"user_id":"u{u}","ts":{t},"amount":{}.5}}"#,
            rng.next(100)
        )
        .unwrap();
    }
    for _ in 0..100 {
        writeln!(
            merchant,
            r#"{{"merchant_id":{},"ts":{},"risk":0.{}}}"#,
            rng.next(30),
            1_000 + rng.next(4_000),
            rng.next(1000)
        )
        .unwrap();
    }
    let mut entities = String::from("user_id,merchant_id,timestamp,factor,label\n");
    for i in 0..3_000 {
        let factor = if rng.next(2) == 0 {
            format!("{}.5", rng.next(4))
        } else {
            String::new()
        };
        writeln!(
            entities,
            "u{},{},{},{factor},{i}",
            rng.next(220),
            rng.next(35),
            900 + rng.next(4_400)
        )
        .unwrap();
    }
    for (name, text) in [
        ("profile.jsonl", &profile),
        ("txn.jsonl", &txn),
        ("merchant.jsonl", &merchant),
        ("entities.csv", &entities),
    ] {
        std::fs::write(d.join(name), text).unwrap();
    }
    let history = |f: &str, file: &str| (f.to_owned(), d.join(file).display().to_string());
    Options {
        entities: d.join("entities.csv"),
        history: vec![
            history("profile", "profile.jsonl"),
            history("txn", "txn.jsonl"),
            history("merchant_risk", "merchant.jsonl"),
        ],
        out: d.join("memory.parquet"),
        features: None,
        time_column: "timestamp".into(),
        memory_budget: 256 << 20,
    }
}

fn run(
    o: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<oka_training::Summary, TrainingError> {
    let registry = Registry::from_yaml("spec", SPEC, &NativeUdfs::new()).unwrap();
    oka_training::run(&registry, o, stop, progress)
}

/// The directory's entries other than the inputs.
fn leftovers(d: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".jsonl") && n != "entities.csv" && !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn a_spilled_training_set_is_the_one_made_in_memory() {
    let d = dir("equal");
    let o = inputs(&d);
    let never = AtomicBool::new(false);
    let held = run(&o, &never, &mut |_| {}).unwrap();
    assert!(held.spilled.is_empty());
    assert_eq!(held.history_records, 8_100);
    // About 1.5 MiB held: a budget of 64 KiB splits each history into parts.
    let spilled_out = d.join("spilled.parquet");
    let small = Options {
        out: spilled_out.clone(),
        memory_budget: 64 << 10,
        ..o.clone()
    };
    let mut told = false;
    let spilled = run(&small, &never, &mut |p| {
        told |= matches!(p, Progress::Spilling)
    })
    .unwrap();
    assert!(told, "no Spilling progress");
    assert_eq!(spilled.history_records, held.history_records);
    assert_eq!(spilled.rows, 3_000);
    let parts: Vec<usize> = spilled.spilled.iter().map(|(_, n)| *n).collect();
    assert_eq!(spilled.spilled.len(), 3, "{:?}", spilled.spilled);
    assert!(parts.iter().any(|&n| n >= 16), "{:?}", spilled.spilled);
    assert_eq!(spilled.statuses, held.statuses);
    let (a, b) = (read(&o.out), read(&spilled_out));
    assert_eq!(a.schema(), b.schema());
    for (name, (x, y)) in a
        .schema()
        .fields()
        .iter()
        .map(|f| f.name())
        .zip(a.columns().iter().zip(b.columns()))
    {
        assert_eq!(x, y, "column {name} differs");
    }
    // A budget the files' sizes say is enough, which the history passes only
    // once held: found while loading, then spilled; the same file again.
    let files: Vec<PathBuf> = ["profile.jsonl", "txn.jsonl", "merchant.jsonl"]
        .iter()
        .map(|f| d.join(f))
        .collect();
    let late_out = d.join("late.parquet");
    let late = Options {
        out: late_out.clone(),
        memory_budget: oka_training::spill::estimate(&files).unwrap(),
        ..o.clone()
    };
    let late_spilled = run(&late, &never, &mut |_| {}).unwrap();
    assert!(!late_spilled.spilled.is_empty(), "not spilled");
    assert_eq!(read(&late_out), a);
    // Every status occurs, so the comparison covers them.
    let statuses = format!("{:?}", held.statuses);
    for s in ["present", "missing", "expired"] {
        assert!(statuses.contains(s), "{statuses}");
    }
    assert_eq!(
        leftovers(&d, &["memory.parquet", "spilled.parquet", "late.parquet"]),
        Vec::<String>::new()
    );
}

#[test]
fn an_interrupted_spill_leaves_nothing() {
    let d = dir("stop");
    let o = Options {
        memory_budget: 64 << 10,
        ..inputs(&d)
    };
    let stop = AtomicBool::new(false);
    let e = run(&o, &stop, &mut |p| {
        if matches!(p, Progress::Spilling) {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .unwrap_err();
    assert!(matches!(e, TrainingError::Interrupted { .. }), "{e}");
    assert_eq!(leftovers(&d, &[]), Vec::<String>::new());
}
