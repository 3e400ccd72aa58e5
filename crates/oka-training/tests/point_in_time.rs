//! Point-in-time correctness on hand-checked cases, and bad input refused with
//! the file, column and row named and no output written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use oka_core::{FieldType, NativeUdfs, Registry, Timestamp, Value};
use oka_training::{Options, TrainingError, convert};
use parquet::arrow::ArrowWriter;

use common::{dir, read};

const SPEC: &str = r#"
version: 1
entities:
  User: {keys: {user_id: string}, timestamp: ts, fields: {balance: float}}
  Txn: {keys: {user_id: string}, timestamp: ts, fields: {amount: float}}
features:
  profile: {kind: pipeline, entity: User, ttl_s: 100}
  txn: {kind: pipeline, entity: Txn, history: 10}
  spend:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 60}
      outputs: {n: count, total: {sum: amount}}
  scaled:
    kind: on_demand
    dependencies: [profile]
    args: {factor: {type: float, default: 2.0}}
    output: {fields: {v: float, at: timestamp}}
    udf: {expr: {v: "profile.balance * factor", at: "now"}}
"#;

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    path.display().to_string()
}

/// Profile history in JSON Lines, out of order, with two records at 1050 (the
/// later in the file wins) and one at 1030 last.
const PROFILE: &str = r#"{"user_id":"u1","ts":1000,"balance":10.0}
{"user_id":"u1","ts":1050,"balance":20.0}
{"user_id":"u2","ts":1000,"balance":5.0}
{"user_id":"u1","ts":1050,"balance":25.0}
{"user_id":"u1","ts":1030,"balance":15.0}
"#;

const TXN: &str = "user_id,ts,amount\nu1,1100,8.0\nu1,1000,1.0\nu1,1010,2.0\nu1,1070,4.0\n";

fn options(d: &Path, entities: &str) -> Options {
    let e = d.join("entities.csv");
    write(&e, entities);
    Options {
        entities: e,
        history: vec![
            ("profile".into(), write(&d.join("profile.jsonl"), PROFILE)),
            ("txn".into(), write(&d.join("txn.csv"), TXN)),
        ],
        out: d.join("out.parquet"),
        features: None,
        time_column: "timestamp".into(),
        memory_budget: 64 << 20,
    }
}

fn run(o: &Options) -> Result<oka_training::Summary, TrainingError> {
    let registry = Registry::from_yaml("spec", SPEC, &NativeUdfs::new()).unwrap();
    oka_training::run(&registry, o, &AtomicBool::new(false), &mut |_| {})
}

fn column(b: &RecordBatch, name: &str, ty: &FieldType) -> Vec<Value> {
    let c = b
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}: {:?}", b.schema()));
    convert::values(c, ty).unwrap()
}

fn f(x: f64) -> Value {
    Value::Float(x)
}

#[test]
fn features_are_computed_as_of_each_rows_time() {
    let d = dir("pit");
    let o = options(
        &d,
        "user_id,timestamp,factor,label\n\
         u1,999,,1\n\
         u1,1000,,2\n\
         u1,1049.999999,,3\n\
         u1,1050,,4\n\
         u1,1150,,5\n\
         u1,1149,3.0,6\n\
         u3,1000,,7\n\
         u2,1200,,8\n",
    );
    let summary = run(&o).unwrap();
    assert_eq!(summary.rows, 8);
    let b = read(&o.out);
    let text = FieldType::String;
    let status = |name: &str| -> Vec<String> {
        column(&b, &format!("{name}__status"), &text)
            .into_iter()
            .map(|v| match v {
                Value::String(s) => s.to_string(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    // The entity file's columns come first, as read.
    assert_eq!(b.schema().field(0).name(), "user_id");
    assert_eq!(
        column(&b, "label", &FieldType::Int),
        (1..=8).map(Value::Int).collect::<Vec<_>>()
    );
    assert_eq!(
        status("profile"),
        [
            "missing", "present", "present", "present", "expired", "present", "missing", "expired"
        ]
    );
    let null = Value::Null;
    assert_eq!(
        column(&b, "profile__balance", &FieldType::Float),
        [
            null.clone(),
            f(10.0),
            f(15.0),
            f(25.0),
            null.clone(),
            f(25.0),
            null.clone(),
            null.clone()
        ]
    );
    // The record's event time is the one it was written with.
    assert_eq!(
        column(&b, "profile__ts", &FieldType::Timestamp)[2],
        Value::Timestamp(Timestamp(1_030_000_000))
    );
    // Windows end at the row's time: [t-60, t], records at t included.
    assert_eq!(status("spend"), ["present"; 8]);
    let ints = |xs: &[i64]| xs.iter().copied().map(Value::Int).collect::<Vec<_>>();
    assert_eq!(
        column(&b, "spend__n", &FieldType::Int),
        ints(&[0, 1, 2, 2, 1, 1, 0, 0])
    );
    assert_eq!(
        column(&b, "spend__total", &FieldType::Float),
        [
            f(0.0),
            f(1.0),
            f(3.0),
            f(3.0),
            f(8.0),
            f(8.0),
            f(0.0),
            f(0.0)
        ]
    );
    // On-demand: the default argument, a per-row one, `now` = the row's time,
    // missing when its input is missing or expired.
    assert_eq!(
        status("scaled"),
        [
            "missing", "present", "present", "present", "missing", "present", "missing", "missing"
        ]
    );
    assert_eq!(
        column(&b, "scaled__v", &FieldType::Float),
        [
            null.clone(),
            f(20.0),
            f(30.0),
            f(50.0),
            null.clone(),
            f(75.0),
            null.clone(),
            null
        ]
    );
    assert_eq!(
        column(&b, "scaled__at", &FieldType::Timestamp)[3],
        Value::Timestamp(Timestamp(1_050_000_000))
    );
}

#[test]
fn only_the_requested_features_are_computed() {
    let d = dir("some");
    let mut o = options(&d, "user_id,timestamp\nu1,1050\n");
    o.features = Some(vec!["scaled".into()]);
    o.history.retain(|(f, _)| f == "profile");
    run(&o).unwrap();
    let b = read(&o.out);
    let names: Vec<&str> = b
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .leak()
        .to_vec();
    assert_eq!(
        names,
        [
            "user_id",
            "timestamp",
            "scaled__ts",
            "scaled__v",
            "scaled__at",
            "scaled__status"
        ]
    );
}

/// The error of a run over `entities`, and that no output was left.
fn refused(o: &Options) -> String {
    let e = run(o).unwrap_err().to_string();
    assert!(!o.out.exists(), "an output was written despite: {e}");
    let partial = std::fs::read_dir(o.out.parent().unwrap())
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(
        partial, 0,
        "a partial file or spill directory was left: {e}"
    );
    e
}

fn parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) -> PathBuf {
    let schema = Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path.to_owned()
}

#[test]
fn bad_input_is_refused_with_its_place_and_no_output() {
    let d = dir("bad");
    let e = refused(&options(&d, "id,timestamp\nu1,1000\n"));
    assert!(
        e.contains("entities.csv") && e.contains("`user_id`") && e.contains("missing"),
        "{e}"
    );
    let e = refused(&options(&d, "user_id,when\nu1,1000\n"));
    assert!(
        e.contains("`timestamp`") && e.contains("--time-column"),
        "{e}"
    );
    let e = refused(&options(&d, "user_id,timestamp\nu1,1000\nu1,yesterday\n"));
    assert!(e.contains("row 2") && e.contains("yesterday"), "{e}");
    // A key column of the wrong type (Parquet keeps types).
    let mut o = options(&d, "");
    o.entities = parquet(
        &d.join("entities.parquet"),
        vec![
            (
                "user_id",
                Arc::new(Float64Array::from(vec![1.0])) as ArrayRef,
            ),
            (
                "timestamp",
                Arc::new(StringArray::from(vec!["1000"])) as ArrayRef,
            ),
        ],
    );
    let e = refused(&o);
    assert!(
        e.contains("entities.parquet") && e.contains("`user_id`") && e.contains("Float64"),
        "{e}"
    );
    // Another feature's history.
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.history[0].1 = write(&d.join("wrong.csv"), TXN);
    let e = refused(&o);
    assert!(
        e.contains("wrong.csv") && e.contains("`amount`") && e.contains("another feature"),
        "{e}"
    );
    // A history record without its time.
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.history[0].1 = write(
        &d.join("untimed.jsonl"),
        "{\"user_id\":\"u1\",\"ts\":1,\"balance\":1}\n{\"user_id\":\"u1\",\"balance\":1}\n",
    );
    let e = refused(&o);
    assert!(
        e.contains("untimed.jsonl") && e.contains("line 2") && e.contains("no event time"),
        "{e}"
    );
    // Unknown feature, missing history, a glob matching nothing.
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.features = Some(vec!["nope".into()]);
    assert!(refused(&o).contains("unknown feature `nope`"));
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.history.truncate(1);
    let e = refused(&o);
    assert!(e.contains("`txn`") && e.contains("--history txn="), "{e}");
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.history[1].1 = d.join("none-*.csv").display().to_string();
    assert!(refused(&o).contains("matches no file"));
    // A history larger than the budget is spilled to disk by key, but one
    // key's history larger than the budget cannot be split.
    let mut o = options(&d, "user_id,timestamp\nu1,1000\n");
    o.memory_budget = 200;
    let e = refused(&o);
    assert!(
        e.contains("--memory-budget-mib") && e.contains("cannot be split"),
        "{e}"
    );
}

#[test]
fn the_time_column_may_be_a_timestamp_column() {
    let d = dir("ts");
    let mut o = options(&d, "");
    let t = arrow::array::TimestampNanosecondArray::from(vec![1_050_000_000_000i64]);
    o.entities = parquet(
        &d.join("entities.parquet"),
        vec![
            (
                "user_id",
                Arc::new(StringArray::from(vec!["u1"])) as ArrayRef,
            ),
            ("timestamp", Arc::new(t) as ArrayRef),
        ],
    );
    run(&o).unwrap();
    let b = read(&o.out);
    assert_eq!(column(&b, "profile__balance", &FieldType::Float), [f(25.0)]);
    assert_eq!(
        b.schema().field(1).data_type(),
        &DataType::Timestamp(arrow::datatypes::TimeUnit::Nanosecond, None)
    );
}

/// The engine, given the training set's own pipeline columns, computes the
/// training set's on-demand columns (the same function, fed by the caller).
#[test]
fn the_engine_computes_what_the_training_set_holds() {
    let d = dir("engine");
    let mut o = options(
        &d,
        "user_id,timestamp,factor\nu1,999,\nu1,1000,\nu1,1050,4.0\nu1,1150,\nu3,1000,\n",
    );
    o.features = Some(vec!["profile".into(), "scaled".into()]);
    o.history.truncate(1);
    run(&o).unwrap();
    let trained = read(&o.out);
    // The engine's input: the keys, time, argument and the pipeline feature's columns.
    let keep = [
        "user_id",
        "timestamp",
        "factor",
        "profile__ts",
        "profile__balance",
        "profile__status",
    ];
    let idx: Vec<usize> = keep
        .iter()
        .map(|n| trained.schema().index_of(n).unwrap())
        .collect();
    let input = trained.project(&idx).unwrap();
    let engine = oka_training::engine::Engine::new(SPEC).unwrap();
    let compute = oka_training::engine::Compute {
        features: Some(vec!["scaled".into()]),
        time_column: "timestamp".into(),
        args: Vec::new(),
    };
    let out = engine.compute(input.clone(), &compute).unwrap();
    for name in ["scaled__ts", "scaled__v", "scaled__at", "scaled__status"] {
        assert_eq!(
            out.column_by_name(name).unwrap(),
            trained.column_by_name(name).unwrap(),
            "{name}"
        );
    }
    // `<feature>__<arg>` names the argument too (Spark SQL reads a dot in a
    // column name as a path).
    let fields: Vec<arrow::datatypes::Field> = (input.schema().fields().iter())
        .map(|f| match f.name().as_str() {
            "factor" => f.as_ref().clone().with_name("scaled__factor"),
            _ => f.as_ref().clone(),
        })
        .collect();
    let renamed = arrow::array::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        input.columns().to_vec(),
    )
    .unwrap();
    let by_other_name = engine.compute(renamed, &compute).unwrap();
    assert_eq!(
        by_other_name.column_by_name("scaled__v").unwrap(),
        trained.column_by_name("scaled__v").unwrap()
    );
    // A constant argument fills rows whose column is empty.
    let compute = oka_training::engine::Compute {
        args: vec![("scaled".into(), "factor".into(), serde_json::json!(10.0))],
        ..compute
    };
    let out = engine.compute(input, &compute).unwrap();
    assert_eq!(
        column(&out, "scaled__v", &FieldType::Float),
        [Value::Null, f(100.0), f(100.0), Value::Null, Value::Null]
    );
    // A window needs a history.
    let compute = oka_training::engine::Compute {
        features: Some(vec!["spend".into()]),
        ..compute
    };
    let e = engine
        .compute(read(&o.out), &compute)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`spend` reads a window") && e.contains("oka training-set"),
        "{e}"
    );
}
