//! Plans: for a set of targets, which pipeline features to read with which query,
//! and which UDFs to run in which order. Built at load (one per feature) or once per
//! distinct target set, never per request.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::feature::{Feature, FeatureId, FeatureKind, QueryKind};

/// How a fetch slot's query is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SlotQuery {
    /// A dependency's declared query; parameters from `query_args` of the dependent
    /// feature, else the spec's defaults.
    Dependency(QueryKind),
    /// A pipeline feature targeted directly: `latest` unless the request's
    /// `query_args` for it give `start`/`end` (range) or `n` (last_n).
    Direct,
}

/// One pipeline read the plan needs.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchSlot {
    /// The pipeline feature read.
    pub feature: FeatureId,
    /// Its query.
    pub query: SlotQuery,
    /// Whose `query_args` parameterise the query (the dependent, or the target itself).
    pub args_from: FeatureId,
}

/// Where a step's input or a target's result comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A fetch slot's records.
    Slot(usize),
    /// An earlier step's output.
    Step(usize),
}

/// One on-demand feature to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The feature.
    pub feature: FeatureId,
    /// Its inputs, parallel to the feature's dependencies.
    pub inputs: Vec<Origin>,
}

/// The plan for one set of targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The targets, sorted.
    pub targets: Vec<FeatureId>,
    /// Pipeline reads. Dependents sharing a `latest` read share one slot.
    pub slots: Vec<FetchSlot>,
    /// On-demand features in dependency order.
    pub steps: Vec<Step>,
    /// Per target (parallel to `targets`): where its result comes from.
    pub results: Vec<Origin>,
}

impl Plan {
    /// Plans `targets` (sorted, deduplicated ids into `features`); `topo_rank` is
    /// each feature's position in a dependency order (dependencies first).
    pub fn build(features: &[Feature], topo_rank: &[usize], targets: &[FeatureId]) -> Self {
        // The closure of the targets, in topological order.
        let mut needed = vec![false; features.len()];
        let mut stack: Vec<FeatureId> = targets.to_vec();
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut needed[id], true) {
                continue;
            }
            if let FeatureKind::OnDemand { dependencies, .. } = &features[id].kind {
                stack.extend(dependencies.iter().map(|d| d.feature));
            }
        }
        let mut order: Vec<FeatureId> = (0..needed.len()).filter(|&i| needed[i]).collect();
        order.sort_by_key(|&i| topo_rank[i]);

        let mut slots: Vec<FetchSlot> = Vec::new();
        let mut slot_for = |slot: FetchSlot| -> usize {
            if let Some(i) = slots.iter().position(|s| *s == slot) {
                return i;
            }
            slots.push(slot);
            slots.len() - 1
        };
        let mut steps = Vec::new();
        let mut step_of: HashMap<FeatureId, usize> = HashMap::new();
        for &id in &order {
            let FeatureKind::OnDemand { dependencies, .. } = &features[id].kind else {
                continue;
            };
            let inputs = dependencies
                .iter()
                .map(|d| {
                    if features[d.feature].is_pipeline() {
                        // `latest` has no parameters, so every dependent shares one read.
                        let args_from = if d.query == QueryKind::Latest {
                            d.feature
                        } else {
                            id
                        };
                        Origin::Slot(slot_for(FetchSlot {
                            feature: d.feature,
                            query: SlotQuery::Dependency(d.query),
                            args_from,
                        }))
                    } else {
                        Origin::Step(step_of[&d.feature])
                    }
                })
                .collect();
            step_of.insert(id, steps.len());
            steps.push(Step {
                feature: id,
                inputs,
            });
        }
        let results = targets
            .iter()
            .map(|&t| {
                if features[t].is_pipeline() {
                    Origin::Slot(slot_for(FetchSlot {
                        feature: t,
                        query: SlotQuery::Direct,
                        args_from: t,
                    }))
                } else {
                    Origin::Step(step_of[&t])
                }
            })
            .collect();
        Self {
            targets: targets.to_vec(),
            slots,
            steps,
            results,
        }
    }
}

/// Plans for multi-target requests, built on first use. Bounded: past the limit new
/// sets are planned per request rather than cached.
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    plans: RwLock<HashMap<Vec<FeatureId>, Arc<Plan>>>,
}

const PLAN_CACHE_LIMIT: usize = 4096;

impl PlanCache {
    pub(crate) fn get_or_insert(
        &self,
        targets: &[FeatureId],
        build: impl FnOnce() -> Plan,
    ) -> Arc<Plan> {
        if let Ok(plans) = self.plans.read()
            && let Some(p) = plans.get(targets)
        {
            return Arc::clone(p);
        }
        let plan = Arc::new(build());
        if let Ok(mut plans) = self.plans.write()
            && plans.len() < PLAN_CACHE_LIMIT
        {
            plans.insert(targets.to_vec(), Arc::clone(&plan));
        }
        plan
    }
}
