//! Python UDFs, run in a pool of CPython worker processes — never inside the
//! server's process: a UDF that loops, crashes, or eats memory costs its own
//! worker, which is killed and replaced, and the answer for its keys says so.
//!
//! How a process uses it: a [`PythonRuntime`] is handed to the spec loader
//! (`oka_core::loader::UdfRuntimes::python`), which declares each Python UDF to
//! it and keeps the runner it gets back (a `BatchUdf`); then
//! [`PythonRuntime::start`] starts the workers, each of which imports every
//! module and checks every function, or the load is refused with the file,
//! line and Python's message. The runners share the pool; it stops when the
//! last of them and the [`PythonPool`] handle are dropped (a reload starts a new
//! pool beside the old one, which serves the requests that began before it).
//!
//! Layout, lowest first:
//! - `marshal`: the subset of CPython's marshal format the protocol speaks.
//! - `protocol`: frames, messages and limits (`worker.py` is the other side).
//! - `decl`: the UDFs as the pool knows them, and their runner.
//! - `results`: a worker's answer for one key, checked, as records.
//! - `process`: one worker process, from its start to its end.
//! - `stats`: the pool's metrics.
//! - `pool`: the workers, the queue, and how calls become batches.
//! - `supervise`: each worker's thread: answers, time limits, replacement.
//! - `transform`: a Feast view's transformation of what is written to it.
//! - `compile`: UDFs translated to Oka's own evaluation, proven equal to
//!   CPython at start, run on the executor's thread.
//! - [`inproc`]: the same UDFs run in the caller's own interpreter (`oka-engine`).
//! - [`volga`]: Volga's modules: Oka's stand-in for `volga.api`, and a module
//!   described as a spec.

mod compile;
mod decl;
pub mod inproc;
mod marshal;
mod pool;
mod process;
mod protocol;
mod results;
mod stats;
mod supervise;
mod transform;
pub mod volga;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use oka_core::batch::{BatchUdf, DeclareError, PythonDecl, WriteTransform};

pub use compile::Runtime;
pub use decl::FeastView;
pub use protocol::LoadProblem;
pub use stats::Health;
pub use transform::FeastWrite;

use crate::compile::Compiled;
use crate::decl::{UdfEntry, describe_problems};
use crate::pool::{Pool, PoolCell, PythonUdf};
use crate::process::{Launch, RuntimeDir, StartError};

/// The worker's side of the protocol, written into the runtime folder.
pub(crate) const WORKER_PY: &str = include_str!("worker.py");

/// How the pool runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The interpreter (`--python`, `OKA_PYTHON`): a venv's `python` makes its
    /// libraries importable.
    pub python: PathBuf,
    /// Worker processes (`--python-workers`).
    pub workers: usize,
    /// Each worker's memory limit in MiB (`--python-memory-mib`; 0: none).
    pub memory_mib: u64,
    /// Whether UDFs that translate are compiled and proven at start
    /// (`--python-compile`, on by default).
    pub compile: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            workers: 1,
            memory_mib: 1024,
            compile: true,
        }
    }
}

/// Why the pool did not start: every problem, in words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartFailed(pub String);

/// A spec's Python UDFs, declared as the spec loads ([`oka_core::batch::PythonUdfs`]),
/// then started as a pool.
#[derive(Debug)]
pub struct PythonRuntime {
    config: Config,
    feast: Vec<FeastView>,
    entries: Mutex<Vec<UdfEntry>>,
    /// Per entry, where its proven translation goes.
    compiled: Mutex<Vec<Arc<OnceLock<Compiled>>>>,
    cell: Arc<PoolCell>,
}

impl PythonRuntime {
    /// A runtime with `config`.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            feast: Vec::new(),
            entries: Mutex::new(Vec::new()),
            compiled: Mutex::new(Vec::new()),
            cell: Arc::new(PoolCell::default()),
        }
    }

    /// The runtime, running `views` for the spec's `style: feast` UDFs (the
    /// on-demand views of the Feast registry the spec was built from).
    pub fn with_feast(mut self, views: Vec<FeastView>) -> Self {
        self.feast = views;
        self
    }

    /// Starts the workers: each imports every module and checks every
    /// function. `None` when the spec declared no Python UDF.
    pub fn start(self) -> Result<Option<PythonPool>, StartFailed> {
        let udfs = self
            .entries
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if udfs.is_empty() {
            return Ok(None);
        }
        let shim = volga::shim_files();
        let mut files: Vec<(&str, &str)> = shim.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        files.push((process::WORKER_SCRIPT, WORKER_PY));
        files.push((compile::TRANSLATE_SCRIPT, compile::TRANSLATE_PY));
        let dir = RuntimeDir::create(&files).map_err(|e| StartFailed(e.to_string()))?;
        let dir_path = dir.path().to_path_buf();
        let launch = Launch {
            python: self.config.python.clone(),
            memory_mib: self.config.memory_mib,
            script: dir.script(),
            dir: dir.path().to_path_buf(),
        };
        let workers = self.config.workers.max(1);
        let pool = Arc::new(Pool::new(udfs, launch, dir, workers));
        // Every worker starts at once, each on its own thread; the pool serves
        // once all have loaded.
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..workers {
            let (shared, tx) = (Arc::clone(&pool), tx.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("oka-python-{i}"))
                .spawn(move || supervise::run(shared, i, tx));
            if let Err(e) = spawned {
                pool.stop();
                return Err(StartFailed(format!(
                    "cannot start the thread that watches Python worker {i}: {}",
                    oka_core::words::io_reason(&e)
                )));
            }
        }
        drop(tx);
        let mut failure = None;
        for _ in 0..workers {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(_) => {
                    failure = failure.or(Some(StartError::Interpreter(
                        "a Python worker's thread ended while it started".to_owned(),
                    )));
                    break;
                }
            }
        }
        if let Some(e) = failure {
            pool.stop();
            return Err(StartFailed(match e {
                StartError::Load(problems) => describe_problems(&pool.udfs, &problems),
                StartError::Interpreter(why) => why,
            }));
        }
        self.cell.set(Arc::clone(&pool));
        let slots = self
            .compiled
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let runtimes = if self.config.compile {
            compile_all(&pool, &self.cell, &slots, &self.config, &dir_path)
        } else {
            (pool.udfs.iter())
                .map(|_| Runtime::Python("--python-compile=off".to_owned()))
                .collect()
        };
        Ok(Some(PythonPool {
            cell: self.cell,
            runtimes: runtimes.into(),
        }))
    }
}

/// Translates every UDF of `pool`, proves each translation against the pool's
/// CPython, and puts the proven ones in their runners' `slots`: each UDF's
/// runtime, logged.
fn compile_all(
    pool: &Arc<Pool>,
    cell: &Arc<PoolCell>,
    slots: &[Arc<OnceLock<Compiled>>],
    config: &Config,
    dir: &std::path::Path,
) -> Vec<Runtime> {
    let translations = compile::translate(&config.python, config.memory_mib, dir, &pool.udfs);
    (pool.udfs.iter().zip(translations).enumerate())
        .map(|(index, (udf, translation))| {
            let runtime = match translation {
                Err(why) => Runtime::Python(why.message().to_owned()),
                Ok(compiled) => {
                    let runner = PythonUdf {
                        cell: Arc::clone(cell),
                        index,
                        label: udf.label().to_owned(),
                        compiled: Arc::new(OnceLock::new()),
                    };
                    let runtime = compile::prove(udf.decl(), &compiled, &runner);
                    if let (Runtime::Compiled { .. }, Some(slot)) = (&runtime, slots.get(index)) {
                        let _ = slot.set(compiled);
                    }
                    runtime
                }
            };
            match &runtime {
                Runtime::Compiled { .. } => tracing::info!(
                    feature = udf.feature(),
                    udf = udf.label(),
                    "Python UDF `{}` of `{}` runs {runtime}",
                    udf.label(),
                    udf.feature()
                ),
                Runtime::Python(_) => tracing::info!(
                    feature = udf.feature(),
                    udf = udf.label(),
                    "Python UDF `{}` of `{}` stays in the pool: {runtime}",
                    udf.label(),
                    udf.feature()
                ),
            }
            runtime
        })
        .collect()
}

impl PythonRuntime {
    /// Adds `decl` to the UDFs the workers load: its index and label.
    fn add(&self, decl: PythonDecl) -> Result<(usize, String), DeclareError> {
        let entry =
            UdfEntry::new(decl, self.config.memory_mib, &self.feast).map_err(|e| DeclareError {
                message: e.message().to_owned(),
            })?;
        let label = entry.label().to_owned();
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.push(entry);
        self.compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::new(OnceLock::new()));
        Ok((entries.len() - 1, label))
    }

    /// The runner of the Feast view `name`'s transformation on writes (a view
    /// given to [`Self::with_feast`] with `on_write`); `repo`: the repository's
    /// feature_store.yaml. Declared before [`Self::start`].
    pub fn declare_write(
        &self,
        name: &str,
        repo: &std::path::Path,
    ) -> Result<Arc<dyn WriteTransform>, DeclareError> {
        let (index, label) = self.add(transform::decl(name, repo))?;
        Ok(Arc::new(FeastWrite {
            cell: Arc::clone(&self.cell),
            index,
            label,
        }))
    }
}

impl oka_core::batch::PythonUdfs for PythonRuntime {
    fn declare(&self, decl: PythonDecl) -> Result<Arc<dyn BatchUdf>, DeclareError> {
        let (index, label) = self.add(decl)?;
        let compiled = self
            .compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(index)
            .cloned()
            .unwrap_or_default();
        Ok(Arc::new(PythonUdf {
            cell: Arc::clone(&self.cell),
            index,
            label,
            compiled,
        }))
    }
}

/// A started pool: its health and metrics. The pool runs while this or any of
/// its UDFs' runners lives.
#[derive(Debug, Clone)]
pub struct PythonPool {
    cell: Arc<PoolCell>,
    /// Per UDF, where it runs.
    runtimes: Arc<[Runtime]>,
}

impl PythonPool {
    /// The pool's health.
    pub fn health(&self) -> Health {
        self.cell.pool().map_or(
            Health {
                alive: 0,
                starting: 0,
                workers: 0,
                last_failure: Some("the pool was stopped".to_owned()),
            },
            |p| p.health(),
        )
    }

    /// The pool's metric families, for a `prometheus-client` registry.
    pub fn collector(&self) -> Option<PoolCollector> {
        self.cell.pool().map(|p| PoolCollector(Arc::clone(p)))
    }

    /// The UDFs it runs: (feature, `file.py:function`, where it runs).
    pub fn udfs(&self) -> Vec<(String, String, Runtime)> {
        self.cell.pool().map_or_else(Vec::new, |p| {
            (p.udfs.iter().zip(self.runtimes.iter()))
                .map(|(u, r)| (u.feature().to_owned(), u.label().to_owned(), r.clone()))
                .collect()
        })
    }
}

/// The pool's metric families at scrape time (a `prometheus-client` collector).
#[derive(Debug)]
pub struct PoolCollector(Arc<Pool>);

impl prometheus_client::collector::Collector for PoolCollector {
    fn encode(&self, mut enc: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
        stats::encode(&self.0.stats, &self.0.health(), &mut enc)
    }
}
