//! UDFs that run outside the executor's thread, a batch of keys per call: Python
//! functions in a pool of worker processes (crate `oka-python`). The core sees
//! only this interface — a [`BatchUdf`] takes a [`UdfBatch`] and answers later —
//! never processes; the executor hands the batch to its caller
//! ([`Execution`](crate::execute::Execution)), which awaits it.
//!
//! How a spec's Python UDFs get their runner: the loader describes each one in a
//! [`PythonDecl`] and asks the process's [`PythonUdfs`] for it. Without one (a
//! command that never runs UDFs, such as `oka ingest`), the feature still loads,
//! and a call answers [`BatchError::Unavailable`].

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::entity::Entity;
use crate::key::KeyValues;
pub use crate::spec::PythonStyle;
use crate::udf::{Arg, Input, UdfCall, UdfError};
use crate::value::{Row, Timestamp, Value};

/// The keys of one request for one UDF, with what they share. Laid out flat
/// (one allocation for every key's inputs), since a batch may hold thousands
/// of keys.
#[derive(Debug, Clone)]
pub struct UdfBatch {
    /// The request's UDF arguments (parallel to the feature's arguments; the
    /// spec's defaults filled in).
    pub args: Vec<Value>,
    /// The request time (an output's timestamp when the UDF gives none).
    pub now: Timestamp,
    /// Each key's inputs, [`Self::width`] at a time (parallel to the feature's
    /// dependencies): a record (`latest`) or records (`range`, `last_n`).
    pub inputs: Vec<Input>,
    /// Inputs per key.
    pub width: usize,
    /// Per key of the batch, its index in `key_values`.
    pub keys: Vec<usize>,
    /// The request's values of the output entity's key fields, per key of the
    /// request's key list.
    pub key_values: KeyValues,
    /// When the request's answer is due: past it, nobody waits for this batch.
    pub deadline: Option<Instant>,
}

impl UdfBatch {
    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Key `k`'s inputs.
    pub fn inputs(&self, k: usize) -> &[Input] {
        let start = k.saturating_mul(self.width);
        self.inputs
            .get(start..start.saturating_add(self.width))
            .unwrap_or(&[])
    }

    /// Key `k`'s values of the output entity's key fields.
    pub fn key(&self, k: usize) -> &[Value] {
        self.keys.get(k).map_or(&[], |&i| self.key_values.of(i))
    }
}

/// One key's result: its records, or why there are none.
pub type KeyResult = Result<Arc<[Row]>, UdfError>;

/// Why a whole batch has no answer. Each names the UDF and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// A key's call ran past the UDF's limit; its worker was killed.
    #[error("{0}")]
    TimedOut(String),
    /// Nothing can run the UDF now (no worker alive, or not in this command).
    #[error("{0}")]
    Unavailable(String),
    /// Too much is queued for the runtime; retry later.
    #[error("{0}")]
    Overloaded(String),
}

/// A batch's answer: per key, in the batch's order.
pub type BatchFuture = Pin<Box<dyn Future<Output = Result<Vec<KeyResult>, BatchError>> + Send>>;

/// A UDF run a batch of keys at a time, elsewhere.
pub trait BatchUdf: Send + Sync + fmt::Debug {
    /// The runtime's name, as the spec writes it: `python`.
    fn kind(&self) -> &'static str;
    /// Where its code is, for a person: `features.py:score`.
    fn source(&self) -> &str;
    /// Runs `batch`; the answer has one result per key, in order.
    fn call(&self, batch: UdfBatch) -> BatchFuture;
    /// Its translation, run on the executor's thread key by key, when it has
    /// one (a Python UDF compiled and proven equal at load).
    fn inline(&self) -> Option<&dyn InlineUdf> {
        None
    }
}

/// A [`BatchUdf`]'s translation into code the executor runs itself. It
/// answers a key exactly as the batch runtime would, or not at all: a key it
/// gives `None` is sent to the batch runtime (an exception, an int past 64
/// bits — whatever only the runtime answers exactly).
pub trait InlineUdf: Send + Sync + fmt::Debug {
    /// One key's record, or `None`: run the key in the batch runtime.
    fn call(&self, call: &UdfCall<'_>) -> Option<Row>;
}

/// A dependency of a Python UDF, as its function receives it.
#[derive(Debug, Clone)]
pub struct PythonInput {
    /// The dependency's name.
    pub name: Arc<str>,
    /// Its records' entity.
    pub entity: Arc<Entity>,
    /// A list of records (`range`, `last_n`) rather than one (`latest`).
    pub many: bool,
}

/// Everything the Python runtime needs to know of one Python UDF.
#[derive(Debug, Clone)]
pub struct PythonDecl {
    /// The feature.
    pub feature: Arc<str>,
    /// The spec file (or `<demo>`), for messages.
    pub origin: String,
    /// The UDF's place in the spec: `features.NAME.udf.python`.
    pub path: String,
    /// The module's file: as written in the spec, resolved against the spec
    /// file's folder.
    pub file: PathBuf,
    /// The function's name.
    pub function: String,
    /// How long one key's call may run.
    pub timeout: Duration,
    /// The dependencies, in spec order (the function's positional arguments).
    pub inputs: Vec<PythonInput>,
    /// The declared arguments (the function's keyword arguments).
    pub args: Vec<Arg>,
    /// The output entity.
    pub output: Arc<Entity>,
    /// How the function is called.
    pub style: PythonStyle,
}

/// Why a Python UDF cannot be declared (checked at load, before anything runs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DeclareError {
    /// What is wrong and what to do, for the spec's error list.
    pub message: String,
}

/// What runs a process's Python UDFs: given each declaration at load, a runner.
pub trait PythonUdfs {
    /// The runner of `decl`.
    fn declare(&self, decl: PythonDecl) -> Result<Arc<dyn BatchUdf>, DeclareError>;
}

/// A transformation of the rows written to a feature, run elsewhere (a Feast
/// on-demand view with `write_to_online_store=True`, in the Python pool): the
/// written columns in, the columns to store out, each as JSON text (an object
/// of column name to its values, one per row).
pub trait WriteTransform: Send + Sync + fmt::Debug {
    /// Where its code is, for a person: `Feast on-demand view NAME`.
    fn source(&self) -> &str;
    /// Transforms `columns`, answering by `deadline`.
    fn transform(&self, columns: String, deadline: Option<Instant>) -> TransformFuture;
}

/// A write transformation's answer: the columns to store, as JSON text.
pub type TransformFuture = Pin<Box<dyn Future<Output = Result<String, TransformError>> + Send>>;

/// Why a write transformation has no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The runtime could not run it (timed out, unavailable, overloaded).
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// It ran and failed (raised, or answered something that cannot be stored).
    #[error(transparent)]
    Failed(#[from] UdfError),
}

/// The default limit of one key's call of a Python UDF.
pub const DEFAULT_PYTHON_TIMEOUT: Duration = Duration::from_millis(1000);

/// The runner of a UDF in a command that does not run them (`oka ingest`):
/// every call answers [`BatchError::Unavailable`].
#[derive(Debug)]
pub(crate) struct NotRunHere {
    pub(crate) kind: &'static str,
    pub(crate) source: String,
}

impl BatchUdf for NotRunHere {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn source(&self) -> &str {
        &self.source
    }

    fn call(&self, _batch: UdfBatch) -> BatchFuture {
        let message = format!(
            "{} UDF `{}` does not run in this command (`oka serve` and `oka training-set` run it)",
            self.kind, self.source
        );
        Box::pin(std::future::ready(Err(BatchError::Unavailable(message))))
    }
}

/// Runs `future` to completion on this thread (for callers without an async
/// runtime: the synchronous [`execute`](crate::execute::execute)).
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_waits_for_a_wake_from_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        struct Later(Option<std::sync::mpsc::Sender<Waker>>, bool);
        impl Future for Later {
            type Output = u32;
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
                if self.1 {
                    return Poll::Ready(7);
                }
                self.1 = true;
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(cx.waker().clone());
                }
                Poll::Pending
            }
        }
        let waker = std::thread::spawn(move || {
            let w = rx.recv().ok();
            std::thread::sleep(Duration::from_millis(20));
            if let Some(w) = w {
                w.wake();
            }
        });
        assert_eq!(block_on(Later(Some(tx), false)), 7);
        let _ = waker.join();
    }

    #[test]
    fn a_udf_not_run_here_says_where_it_runs() {
        let udf = NotRunHere {
            kind: "python",
            source: "f.py:score".to_owned(),
        };
        let batch = UdfBatch {
            args: Vec::new(),
            now: Timestamp(0),
            inputs: Vec::new(),
            width: 0,
            keys: Vec::new(),
            key_values: KeyValues::default(),
            deadline: None,
        };
        let err = block_on(udf.call(batch)).unwrap_err();
        assert!(
            err.to_string()
                .contains("`f.py:score` does not run in this command"),
            "{err}"
        );
    }
}
