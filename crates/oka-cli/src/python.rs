//! Python UDFs in the `oka` binary: the flags (`--python`, `--python-workers`,
//! `--python-memory-mib`), loading a spec with a pool for its Python UDFs, and
//! the pool as the server sees it ([`UdfRuntime`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use oka_core::loader::UdfRuntimes;
use oka_core::{NativeUdfs, Registry, SpecErrors};
use oka_python::{Config, PythonPool, PythonRuntime};
use oka_server::udf_runtime::{UdfRuntime, WriteTransforms};
use prometheus_client::collector::Collector;

/// How Python UDFs run.
#[derive(Debug, Clone, clap::Args)]
pub struct PythonArgs {
    /// The Python interpreter that runs the spec's Python UDFs: a virtual
    /// environment's `python` makes its libraries importable. CPython 3.9 or
    /// newer.
    #[arg(
        long = "python",
        env = "OKA_PYTHON",
        value_name = "PATH",
        default_value = "python3"
    )]
    pub python: PathBuf,
    /// Python worker processes (default: one per serving worker). Each runs
    /// one batch at a time.
    #[arg(long, env = "OKA_PYTHON_WORKERS", value_name = "N")]
    pub python_workers: Option<usize>,
    /// Each Python worker's memory limit in MiB (its address space, set with
    /// RLIMIT_AS): past it a UDF's allocation raises MemoryError, its key
    /// fails, and the worker is replaced. 0: no limit.
    #[arg(
        long,
        env = "OKA_PYTHON_MEMORY_MIB",
        value_name = "MIB",
        default_value_t = 1024
    )]
    pub python_memory_mib: u64,
    /// Whether Python UDFs with an exact counterpart in Oka are compiled:
    /// translated, proven equal to CPython on generated inputs at start, and
    /// run without a call into the pool. `off` runs every one in the pool.
    #[arg(
        long,
        env = "OKA_PYTHON_COMPILE",
        value_name = "on|off",
        default_value = "on"
    )]
    pub python_compile: Switch,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl PythonArgs {
    /// The pool's settings, with `workers` workers unless `--python-workers`
    /// says otherwise.
    pub fn config(&self, workers: usize) -> Config {
        Config {
            python: self.python.clone(),
            workers: self.python_workers.unwrap_or(workers).max(1),
            memory_mib: self.python_memory_mib,
            compile: self.python_compile == Switch::On,
        }
    }
}

/// Why a spec with Python UDFs did not load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The spec is invalid.
    #[error("invalid spec:\n{0}")]
    Spec(SpecErrors),
    /// Its Python UDFs did not start: every problem, with its file and line.
    #[error("the spec's Python UDFs did not load:\n{0}")]
    Python(String),
}

/// A spec loaded with its Python UDFs' pool.
#[derive(Debug)]
pub struct WithPython {
    /// The registry.
    pub registry: Registry,
    /// The pool (`None` when nothing runs in Python).
    pub pool: Option<PythonPool>,
    /// The transformations of writes, by feature (Feast's on-demand views with
    /// `write_to_online_store=True`).
    pub transforms: WriteTransforms,
}

/// Loads a spec; its Python UDFs, if any, get a pool of `config`'s workers,
/// started and loaded (`None` when there are none). `feast`: the on-demand
/// views of the Feast registry the spec was built from (its `style: feast` UDFs,
/// and the views run on writes).
pub fn load(
    origin: &str,
    spec: oka_core::spec::Spec,
    natives: &NativeUdfs,
    config: Config,
    feast: Vec<oka_python::FeastView>,
) -> Result<WithPython, LoadError> {
    let written: Vec<(String, PathBuf)> = (feast.iter())
        .filter(|v| v.on_write)
        .map(|v| (v.name.clone(), v.repo.join("feature_store.yaml")))
        .collect();
    let runtime = PythonRuntime::new(config).with_feast(feast);
    let runtimes = UdfRuntimes {
        natives,
        python: Some(&runtime),
    };
    let registry = Registry::load_with(origin, spec, runtimes).map_err(LoadError::Spec)?;
    let mut transforms = WriteTransforms::new();
    for (name, repo) in written {
        let transform = (runtime.declare_write(&name, &repo))
            .map_err(|e| LoadError::Python(format!("{}: {}", repo.display(), e.message)))?;
        transforms.insert(name, transform);
    }
    let pool = runtime.start().map_err(|e| LoadError::Python(e.0))?;
    Ok(WithPython {
        registry,
        pool,
        transforms,
    })
}

/// The pool as the server sees it.
#[derive(Debug)]
pub struct PoolRuntime(pub PythonPool);

impl PoolRuntime {
    /// The pool as a server's runtime list.
    pub fn list(pool: Option<PythonPool>) -> Vec<Arc<dyn UdfRuntime>> {
        pool.into_iter()
            .map(|p| Arc::new(Self(p)) as Arc<dyn UdfRuntime>)
            .collect()
    }
}

impl UdfRuntime for PoolRuntime {
    /// No worker alive and none starting: a worker being replaced (one
    /// starting) keeps the pool ready, so that one restart does not take the
    /// instance out of a load balancer.
    fn unready(&self) -> Option<String> {
        let health = self.0.health();
        (health.alive == 0 && health.starting == 0).then(|| {
            format!(
                "no Python worker is alive (of {}): {}",
                health.workers,
                health
                    .last_failure
                    .as_deref()
                    .unwrap_or("they are starting")
            )
        })
    }

    fn collector(&self) -> Option<Box<dyn Collector>> {
        self.0
            .collector()
            .map(|c| Box::new(c) as Box<dyn Collector>)
    }

    fn summary(&self) -> serde_json::Value {
        let health = self.0.health();
        serde_json::json!({
            "runtime": "python",
            "workers": health.workers,
            "alive": health.alive,
            "starting": health.starting,
            "last_failure": health.last_failure,
            "udfs": self.0.udfs().into_iter()
                .map(|(feature, source, runtime)| serde_json::json!({
                    "feature": feature,
                    "source": source,
                    "runtime": runtime.name(),
                    "why": runtime.to_string(),
                }))
                .collect::<Vec<_>>(),
        })
    }
}

/// `oka volga`'s commands.
#[derive(Debug, clap::Subcommand)]
pub enum VolgaCommand {
    /// Print the spec a Volga module makes: what `oka serve --volga-module`
    /// serves (save it beside the module to serve it with `--spec`).
    Spec {
        /// The module (`@entity`, `@source`, `@on_demand` declarations).
        module: PathBuf,
        /// The interpreter that imports it.
        #[arg(
            long = "python",
            env = "OKA_PYTHON",
            value_name = "PATH",
            default_value = "python3"
        )]
        python: PathBuf,
        /// The interpreter's memory limit in MiB while it imports the module
        /// (as a worker's, `--python-memory-mib`). 0: no limit.
        #[arg(
            long,
            env = "OKA_PYTHON_MEMORY_MIB",
            value_name = "MIB",
            default_value_t = 1024
        )]
        python_memory_mib: u64,
    },
}

/// `oka volga …`.
pub fn volga(command: &VolgaCommand) -> anyhow::Result<ExitCode> {
    match command {
        VolgaCommand::Spec {
            module,
            python,
            python_memory_mib,
        } => match oka_python::volga::describe(python, *python_memory_mib, module) {
            Ok(m) => {
                for note in &m.notes {
                    eprintln!("note: {note}");
                }
                let yaml = m.spec.to_yaml(&module.display().to_string());
                print!("{}", yaml.map_err(|e| anyhow::anyhow!("{e}"))?);
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(ExitCode::FAILURE)
            }
        },
    }
}

/// `oka validate`: loads a spec (or a Volga module's) with its Python UDFs
/// imported and checked by one worker, and says what it declares, or every
/// problem in it.
pub fn validate(
    spec: Option<&Path>,
    volga_module: Option<&Path>,
    python: &PythonArgs,
    natives: &NativeUdfs,
) -> anyhow::Result<ExitCode> {
    let Some((origin, spec)) = read_spec(spec, volga_module, python)? else {
        return Ok(ExitCode::FAILURE);
    };
    match load(&origin, spec, natives, python.config(1), Vec::new()) {
        Ok(WithPython {
            registry: r, pool, ..
        }) => {
            let pipeline = r.features().iter().filter(|f| f.is_pipeline()).count();
            let entities = r.entities().count();
            let udfs = pool.map_or_else(Vec::new, |p| p.udfs());
            let compiled = (udfs.iter())
                .filter(|(.., r)| matches!(r, oka_python::Runtime::Compiled { .. }))
                .count();
            println!(
                "{origin}: ok ({entities} {}, {} features: {pipeline} pipeline, {} on-demand{})",
                if entities == 1 { "entity" } else { "entities" },
                r.features().len(),
                r.features().len() - pipeline,
                match udfs.len() {
                    0 => String::new(),
                    n => format!(
                        ", {n} in Python ({compiled} compiled{}), loaded by {}",
                        if compiled < n {
                            ": `oka explain` says why not the rest"
                        } else {
                            ""
                        },
                        python.python.display()
                    ),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(LoadError::Spec(errors)) => {
            eprintln!("{errors}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The spec of `--spec` or `--volga-module`, with its origin; `None` when it
/// is invalid (the errors are printed).
fn read_spec(
    spec: Option<&Path>,
    volga_module: Option<&Path>,
    python: &PythonArgs,
) -> anyhow::Result<Option<(String, oka_core::spec::Spec)>> {
    let (origin, spec) = match (spec, volga_module) {
        (_, Some(module)) => {
            match oka_python::volga::describe(&python.python, python.python_memory_mib, module) {
                Ok(m) => {
                    for note in &m.notes {
                        eprintln!("note: {note}");
                    }
                    (module.display().to_string(), m.spec)
                }
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(None);
                }
            }
        }
        (Some(spec), None) => {
            let origin = spec.display().to_string();
            let yaml = std::fs::read_to_string(spec).map_err(|e| {
                anyhow::anyhow!(
                    "reading the spec {origin}: {}",
                    oka_core::words::io_reason(&e)
                )
            })?;
            match oka_core::spec::Spec::from_yaml(&origin, &yaml) {
                Ok(spec) => (origin, spec),
                Err(errors) => {
                    eprintln!("{errors}");
                    return Ok(None);
                }
            }
        }
        (None, None) => anyhow::bail!("give --spec or --volga-module"),
    };
    Ok(Some((origin, spec)))
}

/// `oka explain`: where each on-demand feature runs — compiled, Python, CEL,
/// native or an aggregation — and for Python left in Python, why.
pub fn explain(
    spec: Option<&Path>,
    volga_module: Option<&Path>,
    python: &PythonArgs,
    natives: &NativeUdfs,
) -> anyhow::Result<ExitCode> {
    use oka_core::registry::{FeatureKind, UdfImpl};
    let Some((origin, spec)) = read_spec(spec, volga_module, python)? else {
        return Ok(ExitCode::FAILURE);
    };
    let loaded = match load(&origin, spec, natives, python.config(1), Vec::new()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let in_python = loaded.pool.as_ref().map_or_else(Vec::new, PythonPool::udfs);
    for f in loaded.registry.features() {
        let FeatureKind::OnDemand { udf, .. } = &f.kind else {
            continue;
        };
        let line = match udf {
            UdfImpl::Cel(_) => "cel".to_owned(),
            UdfImpl::Aggregate(_) => "aggregate".to_owned(),
            UdfImpl::Native { name, .. } => format!("native ({name})"),
            UdfImpl::Batch(b) => {
                match in_python.iter().find(|(feature, ..)| **feature == *f.name) {
                    Some((_, source, runtime)) => format!("{runtime} [{source}]"),
                    None => format!("{} [{}]", b.kind(), b.source()),
                }
            }
        };
        println!("{}: {line}", f.name);
    }
    Ok(ExitCode::SUCCESS)
}
