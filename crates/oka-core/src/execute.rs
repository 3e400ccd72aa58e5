//! Sans-IO execution: given a prepared request and the records its reads returned
//! ([`Fetched`], by [`FetchId`]), run the UDFs per key in plan order and collect
//! each target's outcome ([`Outputs`]).
//!
//! Missing inputs skip the UDF (`Missing`); a UDF error or panic marks only that
//! feature and key (`Error`); a dependent of an errored feature is `Error` too.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::{Origin, Step};
use crate::registry::{FeatureId, FeatureKind, Registry, UdfImpl};
use crate::request::{Fetch, FetchId, Group, Prepared, Target};
use crate::udf::{Input, UdfCall, UdfError};
use crate::value::Row;

/// The outcome of one feature for one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The value: a list of records (Volga's shape).
    Present(Arc<[Row]>),
    /// An input was missing, so the UDF did not run (or `latest` found nothing).
    Missing,
    /// The UDF (or one it depends on) failed for this key.
    Error,
}

impl Outcome {
    /// The status name on the wire.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Present(_) => "present",
            Self::Missing => "missing",
            Self::Error => "error",
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

/// The records a prepared request's reads returned, by [`FetchId`].
#[derive(Debug)]
pub struct Fetched {
    /// Per fetch: per key, the records (`None` until given).
    rows: Vec<Option<Vec<Vec<Row>>>>,
    /// Per fetch: how many keys it reads.
    key_counts: Vec<usize>,
}

/// What went wrong putting reads together or executing a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}

impl Fetched {
    /// Room for the results of every read of `prepared`.
    pub fn new(prepared: &Prepared) -> Self {
        Self {
            rows: prepared.fetches().map(|_| None).collect(),
            key_counts: prepared.fetches().map(|(_, f)| f.keys.len()).collect(),
        }
    }

    /// Performs every read of `prepared` with `read` (a synchronous source: a
    /// test's data, a benchmark's fixed records).
    pub fn read_all(
        prepared: &Prepared,
        mut read: impl FnMut(&Fetch) -> Vec<Vec<Row>>,
    ) -> Result<Self, ExecuteError> {
        let mut fetched = Self::new(prepared);
        for (id, f) in prepared.fetches() {
            fetched.insert(id, read(f))?;
        }
        Ok(fetched)
    }

    /// Records read `id`'s result: per key of the read, in its order, the records.
    pub fn insert(&mut self, id: FetchId, rows: Vec<Vec<Row>>) -> Result<(), ExecuteError> {
        let (Some(slot), Some(&expected)) = (
            self.rows.get_mut(id.index()),
            self.key_counts.get(id.index()),
        ) else {
            return Err(ExecuteError::NotFetched(id));
        };
        if rows.len() != expected {
            return Err(ExecuteError::WrongKeyCount {
                expected,
                got: rows.len(),
            });
        }
        *slot = Some(rows);
        Ok(())
    }

    fn get(&self, id: FetchId) -> Result<&[Vec<Row>], ExecuteError> {
        self.rows
            .get(id.index())
            .and_then(Option::as_deref)
            .ok_or(ExecuteError::NotFetched(id))
    }
}

/// The result of one group.
#[derive(Debug, Default)]
struct GroupOutput {
    /// Per plan target (parallel to `plan.targets`), per key.
    results: Vec<Vec<Outcome>>,
    /// Per step timing.
    steps: Vec<StepReport>,
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
/// `deadline` it stops with [`ExecuteError::Expired`].
pub fn execute(
    registry: &Registry,
    prepared: &Prepared,
    fetched: &Fetched,
    deadline: Option<Instant>,
) -> Result<Outputs, ExecuteError> {
    let mut groups = Vec::with_capacity(prepared.groups.len());
    for group in &prepared.groups {
        groups.push(run_group(registry, prepared, group, fetched, deadline)?);
    }
    Ok(Outputs { groups })
}

/// Runs one group's UDFs.
// long: the executor's inner loop (steps × keys) in one piece, so the hot path
// reads top to bottom; input gathering and results are their own functions.
fn run_group(
    registry: &Registry,
    prepared: &Prepared,
    group: &Group,
    fetched: &Fetched,
    deadline: Option<Instant>,
) -> Result<GroupOutput, ExecuteError> {
    let n = group.key_count;
    let plan = &group.plan;
    let slots = (group.slot_fetch.iter())
        .map(|&id| {
            Ok((
                fetched.get(id)?,
                prepared.fetch(id).query.empty_is_missing(),
            ))
        })
        .collect::<Result<Vec<Slot<'_>>, ExecuteError>>()?;
    let mut out = GroupOutput::default();
    let mut step_out: Vec<Vec<Outcome>> = Vec::with_capacity(plan.steps.len());
    let mut inputs: Vec<Input> = Vec::new();

    for (si, step) in plan.steps.iter().enumerate() {
        let feature = registry.feature(step.feature);
        let FeatureKind::OnDemand {
            input_names,
            input_entities,
            arg_names,
            udf,
            ..
        } = &feature.kind
        else {
            step_out.push(vec![Outcome::Error; n]);
            continue;
        };
        let started = Instant::now();
        let mut errors = 0;
        let mut outcomes = Vec::with_capacity(n);
        for k in 0..n {
            if k % DEADLINE_CHECK_EVERY == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ExecuteError::Expired);
            }
            if let Err(blocked) = gather_inputs(step, &slots, &step_out, k, &mut inputs) {
                outcomes.push(blocked);
                continue;
            }
            let call = UdfCall {
                feature: &feature.name,
                input_names,
                input_entities,
                inputs: &inputs,
                arg_names,
                args: &group.step_args[si],
                output: &feature.entity,
                key: group.step_keys[si].of(k),
                now: prepared.now,
            };
            match invoke(udf, &call) {
                Ok(rows) => outcomes.push(Outcome::Present(rows.into())),
                Err(error) => {
                    errors += 1;
                    out.failed(step.feature, k, error);
                    outcomes.push(Outcome::Error);
                }
            }
        }
        out.steps.push(StepReport {
            feature: step.feature,
            started,
            elapsed: started.elapsed(),
            errors,
        });
        step_out.push(outcomes);
    }

    out.results = plan
        .results
        .iter()
        .map(|src| match *src {
            Origin::Step(j) => step_out[j].clone(),
            Origin::Slot(s) => slot_outcomes(slots[s]),
        })
        .collect();
    Ok(out)
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
type Slot<'f> = (&'f [Vec<Row>], bool);

/// Puts key `k`'s inputs to `step` into `inputs`; `Err` with the key's outcome,
/// without running the UDF, when an input is missing or its step failed.
fn gather_inputs(
    step: &Step,
    slots: &[Slot<'_>],
    step_out: &[Vec<Outcome>],
    k: usize,
    inputs: &mut Vec<Input>,
) -> Result<(), Outcome> {
    inputs.clear();
    for src in &step.inputs {
        let input = match *src {
            Origin::Slot(s) => {
                let (records, missing_if_empty) = slots[s];
                let rows = &records[k];
                if missing_if_empty {
                    rows.first().cloned().map(Input::One)
                } else {
                    Some(Input::Many(rows.as_slice().into()))
                }
            }
            Origin::Step(j) => match &step_out[j][k] {
                Outcome::Present(rows) => rows.first().cloned().map(Input::One),
                Outcome::Missing => None,
                Outcome::Error => return Err(Outcome::Error),
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
                Outcome::Present(rows.as_slice().into())
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

/// Calls a UDF, turning a panic into an error for this key only.
fn invoke(udf: &UdfImpl, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
    IN_UDF.with(|f| f.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| match udf {
        UdfImpl::Cel(c) => c.call(call),
        UdfImpl::Aggregate(a) => a.call(call),
        UdfImpl::Native { udf, .. } => udf.call(call),
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
