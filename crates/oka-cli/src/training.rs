//! `oka training-set`: a spec's features as of each row of an entity file,
//! computed from history files by the planner and executor that serve
//! requests (`oka-training`), written to Parquet.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use clap::Args;
use oka_core::NativeUdfs;
use oka_training::{Options, Progress};

/// `oka training-set`'s flags.
#[derive(Debug, Args)]
pub struct TrainingArgs {
    /// The spec whose features are computed.
    #[arg(long, env = "OKA_SPEC")]
    spec: PathBuf,
    /// The entity file (Parquet or CSV): the key columns of the features'
    /// entities, a time column, optional columns for on-demand arguments
    /// (`<feature>.<arg>`, `<feature>__<arg>` or `<arg>`), and any others,
    /// passed through.
    #[arg(long, value_name = "FILE")]
    entities: PathBuf,
    /// A pipeline feature's history: `FEATURE=PATH`, PATH a file or a glob of
    /// Parquet, CSV or JSON Lines files in the ingest record format. Repeat for
    /// each pipeline feature the requested features read.
    #[arg(long, value_name = "FEATURE=PATH", value_parser = feature_path, required = true)]
    history: Vec<(String, String)>,
    /// The Parquet file to write (replaced only when complete).
    #[arg(long, value_name = "OUT.parquet")]
    out: PathBuf,
    /// The features to compute, comma-separated (default: every feature of
    /// the spec).
    #[arg(long, value_delimiter = ',')]
    features: Option<Vec<String>>,
    /// The entity file's column holding each row's time (timestamps, dates, or
    /// RFC 3339 / epoch-seconds text).
    #[arg(long, default_value = "timestamp")]
    time_column: String,
    /// The most memory the history may take, in MiB; a larger history is
    /// spilled to disk by key (beside --out) and joined part by part.
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    memory_budget_mib: u64,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    python: crate::python::PythonArgs,
}

/// A `--history` value that is not `FEATURE=PATH`.
#[derive(Debug, thiserror::Error)]
#[error("expected FEATURE=PATH, got `{0}`")]
struct NotFeaturePath(String);

fn feature_path(s: &str) -> Result<(String, String), NotFeaturePath> {
    match s.split_once('=') {
        Some((f, p)) if !f.is_empty() && !p.is_empty() => Ok((f.to_owned(), p.to_owned())),
        _ => Err(NotFeaturePath(s.to_owned())),
    }
}

/// Runs `oka training-set`.
pub fn run(args: TrainingArgs, natives: &NativeUdfs) -> Result<ExitCode> {
    let origin = args.spec.display().to_string();
    let yaml = std::fs::read_to_string(&args.spec).map_err(|e| crate::read_error(&origin, &e))?;
    let spec = oka_core::spec::Spec::from_yaml(&origin, &yaml).map_err(|e| anyhow!("{e}"))?;
    // Python UDFs run in a pool as they do when serving: one worker per CPU
    // unless --python-workers says otherwise.
    let python = args.python.config(oka_server::runtime::available_cpus());
    // The pool (`_pool`) runs while the training set is built.
    let crate::python::WithPython {
        registry,
        pool: _pool,
        ..
    } = crate::python::load(&origin, spec, natives, python, Vec::new())
        .map_err(|e| anyhow!("{e}"))?;
    crate::logs::quiet_udf_panics();
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| anyhow!("cannot handle Ctrl-C: {}", oka_core::words::io_reason(&e)))?;
    }
    let options = Options {
        entities: args.entities,
        history: args.history,
        out: args.out,
        features: args.features,
        time_column: args.time_column,
        memory_budget: args.memory_budget_mib << 20,
    };
    let started = Instant::now();
    let mut last = Instant::now();
    let quiet = args.quiet;
    let mut progress = |p: Progress| {
        let news = matches!(p, Progress::Spilling);
        if quiet || (!news && last.elapsed() < Duration::from_secs(2)) {
            return;
        }
        last = Instant::now();
        eprintln!("training-set: {}", describe(p));
    };
    let summary = match oka_training::run(&registry, &options, &stop, &mut progress) {
        Ok(s) => s,
        Err(e @ oka_training::TrainingError::Interrupted { .. }) => {
            eprintln!("training-set: {e}");
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(anyhow!("{e}")),
    };
    eprintln!(
        "training-set: wrote {} rows to {} in {:.1} s ({} history records)",
        summary.rows,
        options.out.display(),
        started.elapsed().as_secs_f64(),
        summary.history_records
    );
    if !summary.spilled.is_empty() {
        let parts: Vec<String> = (summary.spilled.iter())
            .map(|(f, n)| format!("`{f}` in {n} parts"))
            .collect();
        eprintln!(
            "  history spilled to disk by key (it passed --memory-budget-mib): {}",
            parts.join(", ")
        );
    }
    for (name, counts) in &summary.statuses {
        let mut parts: Vec<String> = ["present", "missing", "expired", "error"]
            .iter()
            .filter_map(|s| counts.get(s).map(|n| format!("{n} {s}")))
            .collect();
        if parts.is_empty() {
            parts.push("no rows".to_owned());
        }
        eprintln!("  {name}: {}", parts.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(p: Progress) -> String {
    match p {
        Progress::History { records } => format!("{records} history records read"),
        Progress::Spilling => {
            "the history passes --memory-budget-mib: spilling it to disk by key".to_owned()
        }
        Progress::Rows {
            done,
            total,
            elapsed,
        } => {
            let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
            match total {
                Some(total) if total > 0 => {
                    let eta = total.saturating_sub(done) as f64 / rate.max(1.0);
                    format!(
                        "{done} / {total} rows ({:.1}%), {rate:.0} rows/s, ETA {eta:.0} s",
                        done as f64 * 100.0 / total as f64
                    )
                }
                _ => format!("{done} rows, {rate:.0} rows/s"),
            }
        }
    }
}
