//! Python UDFs run in the caller's own interpreter, for `oka-engine` (which is
//! already inside Python): the same worker code (`worker.py`, loaded as a
//! module there), the same batch messages and the same checks of the results
//! as the pool's, without worker processes. No time or memory limit applies:
//! the UDFs run in the caller's process, as its own code would.
//!
//! The engine declares the spec's Python UDFs to an [`InProcess`] while it
//! loads the spec, loads them in its interpreter with [`InProcess::load_message`],
//! and hands over an [`Interpreter`] that runs a batch message there
//! ([`InProcess::start`]).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use oka_core::batch::{BatchError, BatchFuture, BatchUdf, DeclareError, PythonDecl, UdfBatch};

use crate::decl::{UdfEntry, describe_problems, load_message};
use crate::marshal::{Reader, Writer};
use crate::process::{RuntimeDir, VOLGA_SHIM};
use crate::protocol::{Done, parse_loaded};
use crate::results::{self, KeyContext};

/// The worker's code, for the caller's interpreter to load as a module.
pub const WORKER_SOURCE: &str = crate::WORKER_PY;

/// Runs a `batch` message in the caller's interpreter (`run_batch` of the
/// worker module): the `done` message.
pub trait Interpreter: Send + Sync + fmt::Debug {
    /// Runs one batch.
    fn run(&self, batch: &[u8]) -> Result<Vec<u8>, InterpreterError>;
}

oka_core::described_error! {
    /// Why the interpreter could not run a batch (its exception, in words).
    pub struct InterpreterError;
}

/// Why the UDFs could not be loaded in the caller's interpreter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadFailed(pub String);

#[derive(Debug, Default)]
struct Shared {
    entries: OnceLock<Vec<UdfEntry>>,
    interpreter: OnceLock<Box<dyn Interpreter>>,
}

/// A spec's Python UDFs, run in the caller's interpreter.
#[derive(Debug, Default)]
pub struct InProcess {
    declared: Mutex<Vec<UdfEntry>>,
    shared: Arc<Shared>,
    /// The stand-in for Volga's API, while the UDFs may import it.
    shim: Mutex<Option<RuntimeDir>>,
}

impl InProcess {
    /// None declared yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `load` message of the declared UDFs (`None`: none was declared),
    /// for the worker module's `load(config, udfs)`; the UDFs are fixed from
    /// here on.
    pub fn load_message(&self) -> Result<Option<Vec<u8>>, LoadFailed> {
        let entries = std::mem::take(
            &mut *self
                .declared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if entries.is_empty() {
            return Ok(None);
        }
        let files = crate::volga::shim_files();
        let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let dir = RuntimeDir::create(&files).map_err(|e| LoadFailed(e.to_string()))?;
        let message = load_message(&entries, 0, &dir.path().join(VOLGA_SHIM));
        *self
            .shim
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(dir);
        let _ = self.shared.entries.set(entries);
        Ok(Some(message))
    }

    /// Whether the worker module's `load` found problems: its answer, as
    /// `marshal.dumps(("loaded", problems), 2)`, in words (`None`: every UDF
    /// loaded).
    pub fn problems(&self, loaded: &[u8]) -> Option<String> {
        let entries = self.shared.entries.get()?;
        match parse_loaded(loaded) {
            Ok(problems) if problems.is_empty() => None,
            Ok(problems) => Some(describe_problems(entries, &problems)),
            Err(e) => Some(e.to_string()),
        }
    }

    /// The UDFs run with `interpreter` from now on.
    pub fn start(&self, interpreter: Box<dyn Interpreter>) {
        let _ = self.shared.interpreter.set(interpreter);
    }
}

impl oka_core::batch::PythonUdfs for InProcess {
    fn declare(&self, decl: PythonDecl) -> Result<Arc<dyn BatchUdf>, DeclareError> {
        let entry = UdfEntry::new(decl, 0, &[]).map_err(|e| DeclareError {
            message: e.message().to_owned(),
        })?;
        let label = entry.label().to_owned();
        let mut declared = self
            .declared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let index = declared.len();
        declared.push(entry);
        Ok(Arc::new(InProcessUdf {
            shared: Arc::clone(&self.shared),
            index,
            label,
        }))
    }
}

/// The runner of one Python UDF in the caller's interpreter.
#[derive(Debug)]
struct InProcessUdf {
    shared: Arc<Shared>,
    index: usize,
    label: String,
}

impl BatchUdf for InProcessUdf {
    fn kind(&self) -> &'static str {
        "python"
    }

    fn source(&self) -> &str {
        &self.label
    }

    fn call(&self, batch: UdfBatch) -> BatchFuture {
        Box::pin(std::future::ready(self.run(&batch)))
    }
}

impl InProcessUdf {
    fn run(&self, batch: &UdfBatch) -> Result<Vec<oka_core::batch::KeyResult>, BatchError> {
        let unavailable =
            |why: String| BatchError::Unavailable(format!("Python UDF `{}`: {why}", self.label));
        let (Some(entries), Some(interpreter)) =
            (self.shared.entries.get(), self.shared.interpreter.get())
        else {
            return Err(unavailable("its module was not loaded".to_owned()));
        };
        let udf = &entries[self.index];
        let mut frame = Vec::with_capacity(256 + 96 * batch.len());
        let mut w = Writer::new(&mut frame);
        w.tuple(2);
        w.str("batch");
        w.list(3);
        udf.write_call(&mut w, self.index, batch, 0..batch.len());
        let done = interpreter
            .run(&frame)
            .map_err(|e| unavailable(format!("the interpreter failed to run it: {e}")))?;
        let header = Done::parse(&done).map_err(|e| unavailable(e.to_string()))?;
        if header.answers != batch.len() {
            return Err(unavailable(format!(
                "{} answers to {} keys",
                header.answers,
                batch.len()
            )));
        }
        let mut r = Reader::new(done.get(header.answers_at..).unwrap_or_default());
        (0..batch.len())
            .map(|k| {
                let ctx = KeyContext {
                    key: batch.key(k),
                    now: batch.now,
                };
                results::decode(udf, &mut r, ctx)
                    .map(|(result, _)| result)
                    .map_err(|e| unavailable(format!("an answer that cannot be read ({e})")))
            })
            .collect()
    }
}
