//! Python UDFs compiled: a function whose body has an exact counterpart in
//! Oka is translated (`translate.py`, CPython's own parser), checked against
//! its declaration (`ir`), proven equal to CPython on generated inputs at load
//! (`prove`), and then run on the executor's thread (`eval`) — a key it
//! cannot answer exactly still goes to the pool. Anything else stays in
//! Python, and [`Runtime`] says why.
//!
//! Layout: `num` (Python's arithmetic), `ir` (the checked body), `check`
//! (the translator's IR read into it), `eval` (one
//! key; `eval::builtins` its functions; `fast` the common shape without it), `prove` (the comparison with CPython), and here the translation
//! step and the runner the executor calls.

mod check;
mod eval;
mod fast;
mod ir;
mod num;
mod prove;

use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oka_core::batch::{InlineUdf, PythonStyle};
use oka_core::udf::UdfCall;
use oka_core::{Entity, Row, Value};
use serde_json::{Value as Json, json};

pub use prove::prove;

use crate::decl::UdfEntry;

/// The translator, written into the runtime folder.
pub(crate) const TRANSLATE_PY: &str = include_str!("../translate.py");
/// Its file name there.
pub(crate) const TRANSLATE_SCRIPT: &str = "translate.py";
/// How long translating a spec's UDFs may take (it parses their modules).
const TRANSLATE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most the translator may print.
const MAX_TRANSLATION_BYTES: u64 = 64 << 20;

oka_core::described_error! {
    /// Why a UDF is not compiled: it stays in the Python pool.
    pub struct NotCompiled;
}

/// Where an on-demand feature's Python UDF runs, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// Compiled: proven equal to CPython on `cases` generated inputs (of
    /// which `python` needed Python, and run there when served).
    Compiled {
        /// Inputs compared.
        cases: usize,
        /// Of them, those only Python answers (an exception, a big int).
        python: usize,
    },
    /// In the Python pool, for this reason.
    Python(String),
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Compiled { cases, python } => write!(
                f,
                "compiled (equal to CPython on {cases} generated inputs; {python} of them run in Python, as would any such key)"
            ),
            Self::Python(why) => write!(f, "python: {why}"),
        }
    }
}

impl Runtime {
    /// The short name: `compiled` or `python`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Compiled { .. } => "compiled",
            Self::Python(_) => "python",
        }
    }
}

/// A translated UDF, as the executor runs it.
#[derive(Debug)]
pub struct Compiled {
    body: ir::Body,
    output: Arc<Entity>,
    /// Per input, the columns Volga's entity constructor refuses None for
    /// (its keys and timestamp); empty for plain UDFs.
    required: Vec<Vec<usize>>,
    /// The body's fast form, when it has the common shape.
    fast: Option<fast::Fast>,
}

impl Compiled {
    /// One key: its record, or `None` (run it in Python).
    fn row(&self, call: &UdfCall<'_>) -> Option<Row> {
        for (input, cols) in call.inputs.iter().zip(&self.required) {
            let rows = match input {
                oka_core::udf::Input::One(r) => std::slice::from_ref(r),
                oka_core::udf::Input::Many(rs) => rs,
            };
            if rows.iter().any(|r| {
                cols.iter()
                    .any(|&c| r.columns.get(c).is_none_or(Value::is_null))
            }) {
                return None;
            }
        }
        if let Some(row) = self.fast.as_ref().and_then(|f| f.row(call, &self.output)) {
            return Some(row);
        }
        let mut frame = eval::Frame::new(
            &self.body,
            call.inputs,
            call.args,
            call.key,
            call.now,
            &self.output,
        );
        eval::run(&self.body, &mut frame).ok()
    }
}

impl InlineUdf for Compiled {
    fn call(&self, call: &UdfCall<'_>) -> Option<Row> {
        self.row(call)
    }
}

/// Each UDF's translation: its checked body, or why it stays in Python.
pub(crate) fn translate(
    python: &Path,
    memory_mib: u64,
    dir: &Path,
    udfs: &[UdfEntry],
) -> Vec<Result<Compiled, NotCompiled>> {
    let mut todo = Vec::new();
    let mut out: Vec<Option<Result<Compiled, NotCompiled>>> = Vec::with_capacity(udfs.len());
    for u in udfs {
        let decl = u.decl();
        if decl.style == PythonStyle::Feast || u.feast_view().is_some() {
            out.push(Some(Err(NotCompiled::new(
                "a Feast on-demand view runs through Feast's SDK",
            ))));
            continue;
        }
        todo.push(json!({
            "source": u.source(),
            "path": u.path().to_string_lossy(),
            "function": decl.function,
            "style": decl.style.name(),
            "inputs": decl.inputs.iter().map(|i| json!({"name": &*i.name, "many": i.many})).collect::<Vec<_>>(),
            "args": decl.args.iter().map(|a| &*a.name).collect::<Vec<_>>(),
        }));
        out.push(None);
    }
    let answers = if todo.is_empty() {
        Ok(Vec::new())
    } else {
        run_translator(python, memory_mib, dir, &Json::Array(todo))
    };
    let mut answers = match answers {
        Ok(a) => a.into_iter(),
        Err(why) => {
            return out
                .into_iter()
                .map(|o| o.unwrap_or_else(|| Err(why.clone())))
                .collect();
        }
    };
    out.into_iter()
        .zip(udfs)
        .map(|(o, u)| o.unwrap_or_else(|| compiled(u, &answers.next().unwrap_or(Json::Null))))
        .collect()
}

/// A UDF's translator answer, checked: its compiled form, or why not.
fn compiled(u: &UdfEntry, answer: &Json) -> Result<Compiled, NotCompiled> {
    if let Some(why) = answer.get("refused").and_then(Json::as_str) {
        let line = answer.get("line").and_then(Json::as_u64);
        return Err(NotCompiled::new(match line {
            Some(l) => format!("{why} (line {l})"),
            None => why.to_owned(),
        }));
    }
    let decl = u.decl();
    let body = check::check(decl, &answer["ir"])?;
    // Volga builds each input's entity, which refuses None for its keys and
    // timestamp: such a key is Python's to answer.
    let required: Vec<Vec<usize>> = match decl.style {
        PythonStyle::Volga => (decl.inputs.iter())
            .map(|i| {
                let mut cols = i.entity.key_index.clone();
                cols.push(i.entity.timestamp_index);
                cols
            })
            .collect(),
        _ => Vec::new(),
    };
    let one: Vec<bool> = decl.inputs.iter().map(|i| !i.many).collect();
    Ok(Compiled {
        fast: fast::Fast::of(&body, &one),
        body,
        output: Arc::clone(&decl.output),
        required,
    })
}

/// Runs `translate.py` on `todo`, within [`TRANSLATE_TIMEOUT`] and
/// `memory_mib` of address space (0: no limit): its answer per UDF, or why it
/// gave none.
fn run_translator(
    python: &Path,
    memory_mib: u64,
    dir: &Path,
    todo: &Json,
) -> Result<Vec<Json>, NotCompiled> {
    let fail = |why: String| NotCompiled::new(format!("the translator did not run: {why}"));
    let mut child = Command::new(python)
        .arg(dir.join(TRANSLATE_SCRIPT))
        .arg(memory_mib.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(oka_core::words::io_reason(&e)))?;
    let input = todo.to_string();
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut s) = stdin {
            let _ = s.write_all(input.as_bytes());
        }
    });
    let out = child.stdout.take().map(|o| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = o.take(MAX_TRANSLATION_BYTES).read_to_end(&mut text);
            text
        })
    });
    let err = child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = e.take(16 << 10).read_to_end(&mut text);
            text
        })
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < TRANSLATE_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = writer.join();
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    let Some(status) = status else {
        return Err(fail(format!(
            "it took over {} s",
            TRANSLATE_TIMEOUT.as_secs()
        )));
    };
    match serde_json::from_slice::<Vec<Json>>(&stdout) {
        Ok(answers) => Ok(answers),
        Err(_) => Err(fail(format!(
            "{}: {}",
            crate::process::describe_exit(Some(status)),
            String::from_utf8_lossy(&stderr).trim()
        ))),
    }
}
