//! The executor as a state machine ([`Execution`]): steps run on this thread
//! run at once; a step run elsewhere (a [`BatchUdf`]) is handed to the caller as
//! a [`PendingCall`], and its answer taken back.

use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;

use crate::batch::{BatchError, BatchUdf, InlineUdf, KeyResult, UdfBatch};
use crate::plan::{Origin, Step};
use crate::registry::{Feature, FeatureId, FeatureKind, Registry, UdfImpl};
use crate::request::{Group, Prepared};
use crate::udf::{Input, UdfCall};
use crate::value::{Row, Timestamp};

use super::{
    DEADLINE_CHECK_EVERY, ExecuteError, Fetched, GroupOutput, Outcome, Outputs, Rows, Slot,
    StepReport, gather_inputs, invoke, slot_outcomes,
};

/// Names a batch call of an [`Execution`], to hand its answer back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId(usize);

/// A batch of keys an [`Execution`] waits for: run `batch` with `udf`, then hand
/// the answer to [`Execution::complete`] with `id`.
#[derive(Debug)]
pub struct PendingCall {
    /// Names this call.
    pub id: CallId,
    /// The on-demand feature.
    pub feature: FeatureId,
    /// Its UDF.
    pub udf: Arc<dyn BatchUdf>,
    /// The keys to run it for.
    pub batch: UdfBatch,
}

/// A request's UDFs being run: steps that run on this thread (CEL, native,
/// aggregations) run in [`Execution::advance`], which stops at each step run
/// elsewhere ([`BatchUdf`]) and hands back its batch; the caller performs the
/// calls (concurrently) and gives each answer to [`Execution::complete`], until
/// `advance` has nothing left to call. Groups advance independently, so the
/// batch steps of different groups run concurrently.
#[derive(Debug)]
pub struct Execution<'a> {
    registry: &'a Registry,
    prepared: &'a Prepared,
    deadline: Option<Instant>,
    groups: Vec<GroupRun<'a>>,
}

/// One group's progress through its plan.
#[derive(Debug)]
struct GroupRun<'a> {
    group: &'a Group,
    slots: SmallVec<[Slot<'a>; 2]>,
    /// The next step to run.
    next: usize,
    /// Per step run so far, per key.
    step_out: SmallVec<[Vec<Outcome>; 2]>,
    out: GroupOutput,
    /// The batch step waited for.
    waiting: Option<Waiting>,
}

/// A batch step sent out: its keys' outcomes so far (those without a call
/// already final), and which keys the batch carries, in its order.
#[derive(Debug)]
struct Waiting {
    started: Instant,
    outcomes: Vec<Outcome>,
    sent: Vec<usize>,
}

impl<'a> Execution<'a> {
    /// Starts running `prepared`'s UDFs over `fetched`.
    pub fn new(
        registry: &'a Registry,
        prepared: &'a Prepared,
        fetched: &'a Fetched,
        deadline: Option<Instant>,
    ) -> Result<Self, ExecuteError> {
        let groups = prepared
            .groups
            .iter()
            .map(|group| {
                let slots = (group.slot_fetch.iter())
                    .map(|&id| {
                        Ok((
                            fetched.get(id)?,
                            prepared.fetch(id).query.empty_is_missing(),
                        ))
                    })
                    .collect::<Result<SmallVec<[Slot<'_>; 2]>, ExecuteError>>()?;
                Ok(GroupRun {
                    group,
                    slots,
                    next: 0,
                    step_out: SmallVec::with_capacity(group.plan.steps.len()),
                    out: GroupOutput::default(),
                    waiting: None,
                })
            })
            .collect::<Result<_, ExecuteError>>()?;
        Ok(Self {
            registry,
            prepared,
            deadline,
            groups,
        })
    }

    /// Runs every step it can; the batch calls the rest wait for (none: done,
    /// [`Self::finish`]).
    pub fn advance(&mut self) -> Result<Vec<PendingCall>, ExecuteError> {
        let mut calls = Vec::new();
        for (gi, g) in self.groups.iter_mut().enumerate() {
            if g.waiting.is_some() {
                continue;
            }
            let ctx = StepContext {
                registry: self.registry,
                now: self.prepared.now,
                deadline: self.deadline,
            };
            if let Some(call) = g.run_until_batch(&ctx, CallId(gi))? {
                calls.push(call);
            }
        }
        Ok(calls)
    }

    /// Hands back the answer of call `id`: per key of its batch, in order.
    pub fn complete(
        &mut self,
        id: CallId,
        answer: Result<Vec<KeyResult>, BatchError>,
    ) -> Result<(), ExecuteError> {
        let g = self.groups.get_mut(id.0).ok_or(ExecuteError::NotWaiting)?;
        let w = g.waiting.take().ok_or(ExecuteError::NotWaiting)?;
        let results = answer.map_err(ExecuteError::Batch)?;
        if results.len() != w.sent.len() {
            return Err(ExecuteError::WrongKeyCount {
                expected: w.sent.len(),
                got: results.len(),
            });
        }
        let feature = g.group.plan.steps[g.next].feature;
        let mut outcomes = w.outcomes;
        let mut errors = 0;
        for (k, result) in w.sent.into_iter().zip(results) {
            outcomes[k] = match result {
                Ok(rows) => Outcome::Present(rows.into()),
                Err(error) => {
                    errors += 1;
                    let outcome = Outcome::Error(error.to_string().into());
                    g.out.failed(feature, k, error);
                    outcome
                }
            };
        }
        g.finish_step(feature, w.started, errors, outcomes);
        Ok(())
    }

    /// The outcomes, once [`Self::advance`] has nothing left to call.
    pub fn finish(self) -> Outputs {
        let groups = self
            .groups
            .into_iter()
            .map(|mut g| {
                let results = &g.group.plan.results;
                g.out.results = (results.iter().enumerate())
                    .map(|(r, src)| match *src {
                        // A step's outcomes move to their last result, copied
                        // only to another before it.
                        Origin::Step(j) if results[r + 1..].contains(src) => {
                            g.step_out.get(j).cloned().unwrap_or_default()
                        }
                        Origin::Step(j) => g
                            .step_out
                            .get_mut(j)
                            .map(std::mem::take)
                            .unwrap_or_default(),
                        Origin::Slot(s) => slot_outcomes(g.slots[s]),
                    })
                    .collect();
                g.out
            })
            .collect();
        Outputs { groups }
    }
}

/// A batch step's keys: per key its outcome so far, the keys to call, and
/// their inputs one after another.
type BatchKeys = (Vec<Outcome>, Vec<usize>, Vec<Input>);

/// What every step of a request shares.
struct StepContext<'a> {
    registry: &'a Registry,
    now: Timestamp,
    deadline: Option<Instant>,
}

impl<'a> GroupRun<'a> {
    /// Runs steps until one is run elsewhere (its call, which the group then
    /// waits for) or none is left (`None`).
    fn run_until_batch(
        &mut self,
        ctx: &StepContext<'_>,
        id: CallId,
    ) -> Result<Option<PendingCall>, ExecuteError> {
        // The group outlives `self`'s borrow: no count taken on the shared plan.
        let group: &'a Group = self.group;
        while let Some(step) = group.plan.steps.get(self.next) {
            let feature = ctx.registry.feature(step.feature);
            let FeatureKind::OnDemand { udf, .. } = &feature.kind else {
                let n = self.group.key_count;
                let outcomes = vec![Outcome::Error("not an on-demand feature".into()); n];
                self.finish_step(step.feature, Instant::now(), 0, outcomes);
                continue;
            };
            if let UdfImpl::Batch(batch_udf) = udf {
                let started = Instant::now();
                let (outcomes, sent, inputs) =
                    self.batch_keys(ctx, step, feature, batch_udf.inline())?;
                if sent.is_empty() {
                    self.finish_step(step.feature, started, 0, outcomes);
                    continue;
                }
                let batch = UdfBatch {
                    args: self.group.step_args[self.next].clone(),
                    now: ctx.now,
                    inputs,
                    width: step.inputs.len(),
                    keys: sent.clone(),
                    key_values: self.group.step_keys[self.next].clone(),
                    deadline: ctx.deadline,
                };
                self.waiting = Some(Waiting {
                    started,
                    outcomes,
                    sent,
                });
                return Ok(Some(PendingCall {
                    id,
                    feature: step.feature,
                    udf: Arc::clone(batch_udf),
                    batch,
                }));
            }
            self.run_step(ctx, step)?;
        }
        Ok(None)
    }

    /// A batch step's keys: per key its outcome so far (final for keys with a
    /// missing or failed input, and for keys its translation answered), the
    /// keys to call (in order) and their inputs, one after another.
    fn batch_keys(
        &self,
        ctx: &StepContext<'_>,
        step: &Step,
        feature: &Feature,
        inline: Option<&dyn InlineUdf>,
    ) -> Result<BatchKeys, ExecuteError> {
        let FeatureKind::OnDemand {
            input_names,
            input_entities,
            arg_names,
            ..
        } = &feature.kind
        else {
            return Ok((Vec::new(), Vec::new(), Vec::new()));
        };
        let n = self.group.key_count;
        let si = self.next;
        let mut outcomes = Vec::with_capacity(n);
        let mut sent = Vec::with_capacity(if inline.is_some() { 0 } else { n });
        let mut all = Vec::with_capacity(if inline.is_some() {
            0
        } else {
            n * step.inputs.len()
        });
        let mut inputs = Vec::new();
        for k in 0..n {
            if let Err(blocked) = gather_inputs(
                step,
                input_names,
                &self.slots,
                &self.step_out,
                k,
                &mut inputs,
            ) {
                outcomes.push(blocked);
                continue;
            }
            if let Some(inline) = inline {
                if k % DEADLINE_CHECK_EVERY == 0
                    && ctx.deadline.is_some_and(|d| Instant::now() >= d)
                {
                    return Err(ExecuteError::Expired);
                }
                let call = UdfCall {
                    feature: &feature.name,
                    input_names,
                    input_entities,
                    inputs: &inputs,
                    arg_names,
                    args: &self.group.step_args[si],
                    output: &feature.entity,
                    key: self.group.step_keys[si].of(k),
                    now: ctx.now,
                };
                if let Some(row) = inline.call(&call) {
                    outcomes.push(Outcome::Present(Rows::one(row)));
                    inputs.clear();
                    continue;
                }
            }
            outcomes.push(Outcome::Missing);
            sent.push(k);
            all.append(&mut inputs);
        }
        Ok((outcomes, sent, all))
    }

    /// Runs a step on this thread, key by key.
    fn run_step(&mut self, ctx: &StepContext<'_>, step: &Step) -> Result<(), ExecuteError> {
        let feature = ctx.registry.feature(step.feature);
        let FeatureKind::OnDemand {
            input_names,
            input_entities,
            arg_names,
            udf,
            ..
        } = &feature.kind
        else {
            return Ok(());
        };
        let n = self.group.key_count;
        let si = self.next;
        let started = Instant::now();
        let mut errors = 0;
        let mut outcomes = Vec::with_capacity(n);
        let mut inputs: Vec<Input> = Vec::new();
        // A CEL UDF whose every column has a fast form, over `latest` reads
        // only: a key whose records are all there takes its record straight
        // from them (the record its call would make, without the call).
        let fast = match udf {
            UdfImpl::Cel(cel) if step.inputs.iter().all(|i| self.latest(i)) => {
                cel.fast_step(&feature.entity, ctx.now)
            }
            _ => None,
        };
        let mut records: SmallVec<[&Row; 2]> = SmallVec::new();
        for k in 0..n {
            if k % DEADLINE_CHECK_EVERY == 0 && ctx.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ExecuteError::Expired);
            }
            if let Some(fast) = &fast
                && self.records_of(step, k, &mut records)
                && let Some(row) = fast.row(
                    &records,
                    &self.group.step_args[si],
                    self.group.step_keys[si].of(k),
                )
            {
                outcomes.push(Outcome::Present(Rows::one(row)));
                continue;
            }
            if let Err(blocked) = gather_inputs(
                step,
                input_names,
                &self.slots,
                &self.step_out,
                k,
                &mut inputs,
            ) {
                outcomes.push(blocked);
                continue;
            }
            let call = UdfCall {
                feature: &feature.name,
                input_names,
                input_entities,
                inputs: &inputs,
                arg_names,
                args: &self.group.step_args[si],
                output: &feature.entity,
                key: self.group.step_keys[si].of(k),
                now: ctx.now,
            };
            match invoke(udf, &call) {
                Ok(rows) => outcomes.push(Outcome::Present(rows)),
                Err(error) => {
                    errors += 1;
                    outcomes.push(Outcome::Error(error.to_string().into()));
                    self.out.failed(step.feature, k, error);
                }
            }
        }
        self.finish_step(step.feature, started, errors, outcomes);
        Ok(())
    }

    /// Whether input `src` is a `latest` read's slot.
    fn latest(&self, src: &Origin) -> bool {
        matches!(*src, Origin::Slot(s) if self.slots.get(s).is_some_and(|(_, latest)| *latest))
    }

    /// Puts key `k`'s one record of each of `step`'s inputs (all `latest`
    /// slots) into `records`; `false` when one has none (the key's inputs are
    /// then gathered as for any step, which finds it missing).
    fn records_of(&self, step: &Step, k: usize, records: &mut SmallVec<[&'a Row; 2]>) -> bool {
        records.clear();
        for src in &step.inputs {
            let Origin::Slot(s) = *src else {
                return false;
            };
            let Some(row) = self.slots.get(s).and_then(|(rows, _)| rows.of(k).first()) else {
                return false;
            };
            records.push(row);
        }
        true
    }

    /// Records a step's outcomes and report, and moves to the next step.
    fn finish_step(
        &mut self,
        feature: FeatureId,
        started: Instant,
        errors: usize,
        outcomes: Vec<Outcome>,
    ) {
        self.out.steps.push(StepReport {
            feature,
            started,
            elapsed: started.elapsed(),
            errors,
        });
        self.step_out.push(outcomes);
        self.next += 1;
    }
}
