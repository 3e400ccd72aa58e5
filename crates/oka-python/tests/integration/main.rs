//! The pool against real CPython (`python3` on PATH, or `OKA_TEST_PYTHON`):
//! specs with Python UDFs loaded, started and executed as the server does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod compiled;
mod failures;
mod loading;
mod serving;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use oka_core::execute::{ExecuteError, Fetched, Outcome, execute};
use oka_core::loader::UdfRuntimes;
use oka_core::request::RequestLimits;
use oka_core::{NativeUdfs, Registry, Row, Timestamp, Value};
use oka_python::{Config, PythonPool, PythonRuntime};

/// The interpreter the tests run.
pub fn python() -> PathBuf {
    std::env::var_os("OKA_TEST_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// A fresh folder for one test's files.
pub fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oka-python-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The seed's entity and pipeline feature, then `features` (YAML, indented
/// two spaces under `features:`).
pub fn spec(features: &str) -> String {
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
{features}"
    )
}

/// A spec and its Python module in a folder, loaded and started.
#[derive(Debug)]
pub struct Loaded {
    pub registry: Registry,
    pub pool: Option<PythonPool>,
    pub dir: PathBuf,
}

/// Writes `spec.yaml` and `udfs.py` into a fresh folder and loads them with
/// `workers` workers.
pub fn load(name: &str, spec: &str, module: &str, workers: usize) -> Result<Loaded, String> {
    load_with(
        name,
        spec,
        module,
        Config {
            python: python(),
            workers,
            memory_mib: 1024,
            compile: false,
        },
    )
}

pub fn load_with(name: &str, spec: &str, module: &str, config: Config) -> Result<Loaded, String> {
    let dir = folder(name);
    std::fs::write(dir.join("udfs.py"), module).unwrap();
    std::fs::write(dir.join("spec.yaml"), spec).unwrap();
    load_dir(&dir, config)
}

pub fn load_dir(dir: &Path, config: Config) -> Result<Loaded, String> {
    let origin = dir.join("spec.yaml");
    let yaml = std::fs::read_to_string(&origin).unwrap();
    let runtime = PythonRuntime::new(config);
    let natives = NativeUdfs::new();
    let runtimes = UdfRuntimes {
        natives: &natives,
        python: Some(&runtime),
    };
    let registry = Registry::from_yaml_with(&origin.display().to_string(), &yaml, runtimes)
        .map_err(|e| e.to_string())?;
    let pool = runtime.start().map_err(|e| e.0)?;
    Ok(Loaded {
        registry,
        pool,
        dir: dir.to_path_buf(),
    })
}

/// `test_feature`'s record for a key: `value`, written at `t`.
pub fn record(id: &str, value: f64, t: i64) -> Row {
    Row::new(
        Timestamp(t),
        vec![
            Value::from(id),
            Value::Timestamp(Timestamp(t)),
            Value::Float(value),
        ],
    )
}

/// Runs `request` (JSON) over `data` (per key id: `test_feature`'s value):
/// per target, its outcomes.
pub fn run(
    registry: &Registry,
    data: &[(&str, f64)],
    request: serde_json::Value,
) -> Vec<(String, Vec<Outcome>)> {
    try_run(registry, data, request).unwrap()
}

/// [`run`], or why the request failed as a whole.
pub fn try_run(
    registry: &Registry,
    data: &[(&str, f64)],
    request: serde_json::Value,
) -> Result<Vec<(String, Vec<Outcome>)>, ExecuteError> {
    let req: oka_core::FeatureRequest = serde_json::from_value(request).unwrap();
    let now = Timestamp(1_764_000_000_000_000);
    let prepared = registry
        .prepare_with(&req, now, &RequestLimits::default())
        .unwrap();
    let fetched = Fetched::read_all(&prepared, |f| {
        f.keys
            .iter()
            .map(|k| {
                data.iter()
                    .filter(|(d, _)| k.as_str() == *d)
                    .map(|(d, v)| record(d, *v, 1_700_000_000_000_000))
                    .collect::<Vec<_>>()
            })
            .collect::<oka_core::KeyedRows>()
    })
    .unwrap();
    let outputs = execute(registry, &prepared, &fetched, None)?;
    Ok(prepared
        .targets
        .iter()
        .map(|t| {
            (
                registry.feature(t.feature).name.to_string(),
                outputs.of(t).to_vec(),
            )
        })
        .collect())
}

/// The float field `field` of an outcome's first record.
pub fn float(o: &Outcome, entity_field: usize) -> f64 {
    match o {
        Outcome::Present(rows) => match rows[0].columns[entity_field] {
            Value::Float(f) => f,
            ref other => panic!("not a float: {other:?}"),
        },
        other => panic!("not present: {other:?}"),
    }
}

/// An outcome's error message.
pub fn error(o: &Outcome) -> Arc<str> {
    match o {
        Outcome::Error(why) => Arc::clone(why),
        other => panic!("not an error: {other:?}"),
    }
}
