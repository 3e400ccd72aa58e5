//! Modules written for Volga's on-demand layer: Oka's stand-in for `volga.api`
//! (given to the workers when the real package is not importable), and a
//! module described as an Oka spec (`oka volga spec`, `oka serve
//! --volga-module`) by running `describe.py` on it with the same interpreter.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oka_core::spec::Spec;

use crate::process::{RuntimeDir, VOLGA_SHIM};

/// The stand-in for Volga's API: each file's path under the shim's folder, and
/// its text.
pub const SHIM: &[(&str, &str)] = &[
    (
        "volga/__init__.py",
        include_str!("volga/shim/volga/__init__.py"),
    ),
    (
        "volga/api/__init__.py",
        include_str!("volga/shim/volga/api/__init__.py"),
    ),
    (
        "volga/api/entity.py",
        include_str!("volga/shim/volga/api/entity.py"),
    ),
    (
        "volga/api/feature.py",
        include_str!("volga/shim/volga/api/feature.py"),
    ),
    (
        "volga/api/on_demand.py",
        include_str!("volga/shim/volga/api/on_demand.py"),
    ),
    (
        "volga/api/pipeline.py",
        include_str!("volga/shim/volga/api/pipeline.py"),
    ),
    (
        "volga/api/source.py",
        include_str!("volga/shim/volga/api/source.py"),
    ),
];

const DESCRIBE: &str = include_str!("volga/describe.py");

/// How long describing a module may take (it imports the module).
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(120);

/// The most a description may print.
const MAX_DESCRIPTION_BYTES: u64 = 64 << 20;

/// A Volga module as an Oka spec.
#[derive(Debug, Clone)]
pub struct VolgaModule {
    /// The spec.
    pub spec: Spec,
    /// What serves differently from Volga, one line each (a `@pipeline` Oka
    /// does not run, a source whose data comes from outside).
    pub notes: Vec<String>,
}

/// Why a module could not be described: the file, the line when known, and
/// what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct VolgaError {
    /// The whole message.
    pub message: String,
}

/// Every file of a runtime folder that gives workers the stand-in: the shim's
/// files under [`VOLGA_SHIM`].
pub fn shim_files() -> Vec<(String, &'static str)> {
    SHIM.iter()
        .map(|(path, text)| (format!("{VOLGA_SHIM}/{path}"), *text))
        .collect()
}

/// Runs `describe.py` (in `dir`) on the module at `abs` with `python`, within
/// [`DESCRIBE_TIMEOUT`] and `memory_mib` of address space (0: no limit): how
/// it ended, what it printed and what it logged.
fn run(
    python: &Path,
    memory_mib: u64,
    dir: &RuntimeDir,
    abs: &Path,
    shown: &str,
) -> Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>), VolgaError> {
    let fail = |message: String| VolgaError { message };
    let mut child = Command::new(python)
        .arg(dir.path().join("describe.py"))
        .arg(dir.path().join(VOLGA_SHIM))
        .arg(abs)
        .arg(memory_mib.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            fail(format!(
                "cannot start the Python interpreter `{}` to read {shown}: {} (give --python the path of CPython 3.9 or newer)",
                python.display(),
                oka_core::words::io_reason(&e)
            ))
        })?;
    let out = child.stdout.take().map(|o| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = o.take(MAX_DESCRIPTION_BYTES).read_to_end(&mut text);
            text
        })
    });
    let err = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = e.take(64 << 10).read_to_end(&mut text);
            text
        })
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < DESCRIBE_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let Some(status) = status else {
        return Err(fail(format!(
            "reading the Volga module {shown} took over {} s (its import does not finish)",
            DESCRIBE_TIMEOUT.as_secs()
        )));
    };
    Ok((status, stdout, stderr))
}

/// Describes the Volga module `module` as a spec, importing it with `python`
/// in a process limited to `memory_mib` MiB of address space (0: no limit),
/// as a worker is.
pub fn describe(python: &Path, memory_mib: u64, module: &Path) -> Result<VolgaModule, VolgaError> {
    let shown = module.display().to_string();
    let fail = |message: String| VolgaError { message };
    let files = shim_files();
    let mut all: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    all.push(("describe.py", DESCRIBE));
    let dir = RuntimeDir::create(&all).map_err(|e| fail(e.to_string()))?;
    let abs = std::fs::canonicalize(module).map_err(|e| {
        fail(format!(
            "cannot read the Volga module {shown}: {}",
            oka_core::words::io_reason(&e)
        ))
    })?;
    let (status, stdout, stderr) = run(python, memory_mib, &dir, &abs, &shown)?;
    let parsed: serde_json::Value = serde_json::from_slice(&stdout).map_err(|_| {
        let printed = String::from_utf8_lossy(&stderr);
        fail(format!(
            "`{}` could not read the Volga module {shown} ({}): {}",
            python.display(),
            crate::process::describe_exit(Some(status)),
            printed.trim()
        ))
    })?;
    if let Some(problem) = parsed.get("problem") {
        let line = problem.get("line").and_then(serde_json::Value::as_u64);
        let message = problem
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("it could not be read");
        return Err(fail(match line {
            Some(line) => format!("{shown}:{line}: {message}"),
            None => format!("{shown}: {message}"),
        }));
    }
    let spec: Spec = serde_json::from_value(parsed["spec"].clone()).map_err(|e| {
        fail(format!(
            "{shown}: the module's features do not make a spec: {e}"
        ))
    })?;
    let notes = parsed["notes"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(VolgaModule { spec, notes })
}
