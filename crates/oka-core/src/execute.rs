//! Sans-IO execution: given a prepared group and the records its reads returned,
//! run the UDFs per key in plan order and collect each target's outcome.
//!
//! Missing inputs skip the UDF (`Missing`); a UDF error or panic marks only that
//! feature and key (`Error`); a dependent of an errored feature is `Error` too.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plan::Source;
use crate::registry::{FeatureId, FeatureKind, Registry, UdfImpl};
use crate::request::Group;
use crate::udf::{Input, UdfCall, UdfError};
use crate::value::{Row, Timestamp};

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

/// The result of one group.
#[derive(Debug, Default)]
pub struct GroupOutput {
    /// Per plan target (parallel to `plan.targets`), per key.
    pub results: Vec<Vec<Outcome>>,
    /// Per step timing.
    pub steps: Vec<StepReport>,
    /// The first few UDF failures.
    pub failures: Vec<UdfFailure>,
    /// The deadline passed before every UDF ran; `results` is incomplete.
    pub expired: bool,
}

/// How many failures one group keeps for logging.
const MAX_FAILURES: usize = 8;

/// Keys between deadline checks.
const DEADLINE_CHECK_EVERY: usize = 64;

/// Runs a group's UDFs. `fetched[i][k]` are the records read by `group.fetches[i]`
/// for key `k`. Past `deadline` it stops and returns with `expired` set.
pub fn run_group(
    registry: &Registry,
    group: &Group,
    fetched: &[Vec<Vec<Row>>],
    now: Timestamp,
    deadline: Option<Instant>,
) -> GroupOutput {
    let n = group.key_count;
    let plan = &group.plan;
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
                out.expired = true;
                return out;
            }
            inputs.clear();
            let mut blocked = None;
            for src in &step.inputs {
                let input = match *src {
                    Source::Slot(s) => {
                        let f = group.slot_fetch[s];
                        let rows = &fetched[f][k];
                        if group.fetches[f].query.empty_is_missing() {
                            rows.first().cloned().map(Input::One)
                        } else {
                            Some(Input::Many(rows.as_slice().into()))
                        }
                    }
                    Source::Step(j) => match &step_out[j][k] {
                        Outcome::Present(rows) => rows.first().cloned().map(Input::One),
                        Outcome::Missing => None,
                        Outcome::Error => {
                            blocked = Some(Outcome::Error);
                            break;
                        }
                    },
                };
                match input {
                    Some(i) => inputs.push(i),
                    None => {
                        blocked = Some(Outcome::Missing);
                        break;
                    }
                }
            }
            if let Some(b) = blocked {
                outcomes.push(b);
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
                key: &group.step_keys[si][k],
                now,
            };
            match invoke(udf, &call) {
                Ok(rows) => outcomes.push(Outcome::Present(rows.into())),
                Err(error) => {
                    errors += 1;
                    if out.failures.len() < MAX_FAILURES {
                        out.failures.push(UdfFailure {
                            feature: step.feature,
                            key: k,
                            error,
                        });
                    }
                    outcomes.push(Outcome::Error);
                }
            }
        }
        out.steps.push(StepReport {
            feature: step.feature,
            elapsed: started.elapsed(),
            errors,
        });
        step_out.push(outcomes);
    }

    out.results = plan
        .results
        .iter()
        .map(|src| match *src {
            Source::Step(j) => step_out[j].clone(),
            Source::Slot(s) => {
                let f = group.slot_fetch[s];
                let missing_if_empty = group.fetches[f].query.empty_is_missing();
                fetched[f]
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
        })
        .collect();
    out
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
