//! Sans-IO execution: given a prepared request and the records its reads returned
//! ([`Fetched`], by [`FetchId`]), run the UDFs per key in plan order and collect
//! each target's outcome ([`Outputs`]).
//!
//! Missing inputs skip the UDF (`Missing`); a UDF error or panic marks only that
//! feature and key (`Error`); a dependent of an errored feature is `Error` too.
//!
//! UDFs run elsewhere (Python) are handed to the caller a batch at a time:
//! [`Execution`] is the executor as a state machine, [`execute`] drives it to the
//! end on this thread.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use crate::batch::{BatchError, block_on};
use crate::keyed::KeyedRows;
use crate::plan::{Origin, Step};
use crate::registry::{FeatureId, Registry, UdfImpl};
use crate::request::{FetchId, Prepared, Target};
use crate::udf::{Input, UdfCall, UdfError};
use crate::value::Row;

mod fetched;
mod run;

pub use fetched::Fetched;
pub use run::{CallId, Execution, PendingCall};

/// The outcome of one feature for one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The value: a list of records (Volga's shape).
    Present(Rows),
    /// An input was missing, so the UDF did not run (or `latest` found nothing).
    Missing,
    /// The UDF (or one it depends on) failed for this key: why, in words.
    Error(Arc<str>),
}

/// The records of a present outcome, read as a slice: one kept in place (a
/// `latest` read, a CEL UDF's record: most outcomes, which then cost no
/// allocation of their own), or several, shared.
#[derive(Debug, Clone)]
pub struct Rows(RowsRepr);

#[derive(Debug, Clone)]
enum RowsRepr {
    One(Row),
    Shared(Arc<[Row]>),
}

impl Rows {
    /// One record.
    pub fn one(row: Row) -> Self {
        Self(RowsRepr::One(row))
    }
}

impl std::ops::Deref for Rows {
    type Target = [Row];

    fn deref(&self) -> &[Row] {
        match &self.0 {
            RowsRepr::One(row) => std::slice::from_ref(row),
            RowsRepr::Shared(rows) => rows,
        }
    }
}

impl PartialEq for Rows {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl From<Arc<[Row]>> for Rows {
    fn from(rows: Arc<[Row]>) -> Self {
        Self(RowsRepr::Shared(rows))
    }
}

impl From<&[Row]> for Rows {
    fn from(rows: &[Row]) -> Self {
        match rows {
            [row] => Self::one(row.clone()),
            rows => Self(RowsRepr::Shared(rows.into())),
        }
    }
}

impl From<Vec<Row>> for Rows {
    fn from(mut rows: Vec<Row>) -> Self {
        match rows.pop() {
            Some(row) if rows.is_empty() => Self::one(row),
            last => {
                rows.extend(last);
                Self(RowsRepr::Shared(rows.into()))
            }
        }
    }
}

impl Outcome {
    /// The status name on the wire.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Present(_) => "present",
            Self::Missing => "missing",
            Self::Error(_) => "error",
        }
    }
}

/// Per-step timing and error counts, for metrics.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// The on-demand feature.
    pub feature: FeatureId,
    /// When its UDF began (a trace's span starts here).
    pub started: Instant,
    /// Time spent in its UDF over all keys.
    pub elapsed: Duration,
    /// Keys whose UDF failed.
    pub errors: usize,
}

/// A UDF failure, for logging.
#[derive(Debug, Clone)]
pub struct UdfFailure {
    /// The feature.
    pub feature: FeatureId,
    /// The key's position in the request.
    pub key: usize,
    /// What went wrong.
    pub error: UdfError,
}

/// What went wrong putting reads together or executing a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecuteError {
    /// A read answered for a different number of keys than it was asked for.
    #[error("the store answered {got} key results to a read of {expected} keys")]
    WrongKeyCount {
        /// Keys asked for.
        expected: usize,
        /// Key results answered.
        got: usize,
    },
    /// A read's records were not given before execution.
    #[error("read {} of the request was not performed", .0.index())]
    NotFetched(FetchId),
    /// The deadline passed before every UDF ran.
    #[error("the deadline passed while UDFs ran")]
    Expired,
    /// A UDF run elsewhere gave no answer for its batch.
    #[error("{0}")]
    Batch(BatchError),
    /// An answer was handed back for a call not waited for.
    #[error("an answer was given for a UDF call the execution does not wait for")]
    NotWaiting,
}

/// The result of one group.
#[derive(Debug, Default)]
struct GroupOutput {
    /// Per plan target (parallel to `plan.targets`), per key.
    results: Vec<Vec<Outcome>>,
    /// Per step timing.
    steps: SmallVec<[StepReport; 2]>,
    /// The first few UDF failures.
    failures: Vec<UdfFailure>,
}

/// A request's outcomes, per target and key, with what its UDFs reported.
#[derive(Debug, Default)]
pub struct Outputs {
    groups: Vec<GroupOutput>,
}

impl Outputs {
    /// A target's outcome per key, in the order of its key list.
    pub fn of(&self, target: &Target) -> &[Outcome] {
        self.groups
            .get(target.group)
            .and_then(|g| g.results.get(target.result))
            .map_or(&[], Vec::as_slice)
    }

    /// Per on-demand feature run: its time and error count.
    pub fn steps(&self) -> impl Iterator<Item = &StepReport> {
        self.groups.iter().flat_map(|g| &g.steps)
    }

    /// The first few UDF failures of each group, for logging.
    pub fn failures(&self) -> impl Iterator<Item = &UdfFailure> {
        self.groups.iter().flat_map(|g| &g.failures)
    }
}

/// How many failures one group keeps for logging.
const MAX_FAILURES: usize = 8;

/// Keys between deadline checks.
const DEADLINE_CHECK_EVERY: usize = 64;

/// Runs every UDF of `prepared` over the records its reads returned. Past
/// `deadline` it stops with [`ExecuteError::Expired`]. A UDF run elsewhere
/// ([`BatchUdf`]) is waited for on this thread; an async caller drives an
/// [`Execution`] instead.
pub fn execute(
    registry: &Registry,
    prepared: &Prepared,
    fetched: &Fetched,
    deadline: Option<Instant>,
) -> Result<Outputs, ExecuteError> {
    let mut run = Execution::new(registry, prepared, fetched, deadline)?;
    loop {
        let calls = run.advance()?;
        if calls.is_empty() {
            return Ok(run.finish());
        }
        for call in calls {
            let answer = block_on(call.udf.call(call.batch));
            run.complete(call.id, answer)?;
        }
    }
}

impl GroupOutput {
    /// Records a key whose UDF failed; the first [`MAX_FAILURES`] are kept.
    fn failed(&mut self, feature: FeatureId, key: usize, error: UdfError) {
        if self.failures.len() < MAX_FAILURES {
            self.failures.push(UdfFailure {
                feature,
                key,
                error,
            });
        }
    }
}

/// A slot's records per key and whether an empty list means missing (`latest`).
type Slot<'f> = (&'f KeyedRows, bool);

/// Puts key `k`'s inputs to `step` into `inputs`; `Err` with the key's outcome,
/// without running the UDF, when an input is missing or its step failed.
fn gather_inputs(
    step: &Step,
    input_names: &[Arc<str>],
    slots: &[Slot<'_>],
    step_out: &[Vec<Outcome>],
    k: usize,
    inputs: &mut Vec<Input>,
) -> Result<(), Outcome> {
    inputs.clear();
    for (i, src) in step.inputs.iter().enumerate() {
        let input = match *src {
            Origin::Slot(s) => {
                let (records, missing_if_empty) = slots[s];
                let rows = records.of(k);
                if missing_if_empty {
                    rows.first().cloned().map(Input::One)
                } else {
                    Some(Input::Many(rows.into()))
                }
            }
            Origin::Step(j) => match &step_out[j][k] {
                Outcome::Present(rows) => rows.first().cloned().map(Input::One),
                Outcome::Missing => None,
                Outcome::Error(why) => {
                    let name = input_names.get(i).map_or("an input", |n| &**n);
                    return Err(Outcome::Error(format!("`{name}` failed: {why}").into()));
                }
            },
        };
        inputs.push(input.ok_or(Outcome::Missing)?);
    }
    Ok(())
}

/// A pipeline feature's outcomes, straight from its slot.
fn slot_outcomes((records, missing_if_empty): Slot<'_>) -> Vec<Outcome> {
    records
        .iter()
        .map(|rows| {
            if rows.is_empty() && missing_if_empty {
                Outcome::Missing
            } else {
                Outcome::Present(rows.into())
            }
        })
        .collect()
}

thread_local! {
    static IN_UDF: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running a UDF now. A binary's panic hook can use it to
/// keep caught UDF panics (reported as `error` statuses and metrics) out of its
/// error log.
pub fn in_udf() -> bool {
    IN_UDF.with(Cell::get)
}

/// Calls a UDF, turning a panic into an error for this key only. Its records
/// come back as an outcome keeps them (a CEL UDF's one record in place).
fn invoke(udf: &UdfImpl, call: &UdfCall<'_>) -> Result<Rows, UdfError> {
    IN_UDF.with(|f| f.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| match udf {
        UdfImpl::Cel(c) => c.row(call).map(Rows::one),
        UdfImpl::Aggregate(a) => a.call(call).map(Rows::from),
        UdfImpl::Native { udf, .. } => udf.call(call).map(Rows::from),
        UdfImpl::Batch(b) => Err(UdfError::failed(format!(
            "{} UDF `{}` runs a batch at a time, not key by key",
            b.kind(),
            b.source()
        ))),
    }));
    IN_UDF.with(|f| f.set(false));
    match result {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(UdfError::Panicked(msg))
        }
    }
}
