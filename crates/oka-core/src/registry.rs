//! The validated, planned form of a spec: entities, features in dependency order,
//! and plans. Built once at load (by [`crate::loader`]); requests only read it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;

pub use crate::entity::{Column, Entity};
pub use crate::feature::{
    Arg, DEFAULT_HISTORY, Dependency, Feature, FeatureId, FeatureKind, QueryKind, Retention,
    UdfImpl,
};
use crate::plan::{Plan, PlanCache};
use crate::spec::Spec;

/// The validated spec: entities, features in dependency order, and plans.
pub struct Registry {
    pub(crate) spec: Spec,
    pub(crate) origin: String,
    pub(crate) entities: IndexMap<Arc<str>, Arc<Entity>>,
    pub(crate) features: Vec<Feature>,
    /// Feature names (from requests) → ids; foldhash, seeded per process.
    pub(crate) by_name: HashMap<Arc<str>, FeatureId, foldhash::fast::RandomState>,
    /// Position of each feature in a topological order (dependencies first).
    pub(crate) topo_rank: Vec<usize>,
    pub(crate) single_plans: Vec<Arc<Plan>>,
    pub(crate) plan_cache: PlanCache,
    pub(crate) cel_env: Arc<cel::Env>,
}

impl Registry {
    /// The spec it was built from.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Where the spec came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// All features, by id.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// A feature by id.
    pub fn feature(&self, id: FeatureId) -> &Feature {
        &self.features[id]
    }

    /// A feature's id by name.
    pub fn feature_id(&self, name: &str) -> Option<FeatureId> {
        self.by_name.get(name).copied()
    }

    /// All entities.
    pub fn entities(&self) -> impl Iterator<Item = &Arc<Entity>> {
        self.entities.values()
    }

    /// The shared CEL environment.
    pub fn cel_env(&self) -> &Arc<cel::Env> {
        &self.cel_env
    }

    /// The plan for a set of targets (ids sorted and deduplicated by the caller).
    /// Single targets were planned at load; sets are planned once and cached.
    pub fn plan(&self, targets: &[FeatureId]) -> Arc<Plan> {
        if let [one] = targets {
            return Arc::clone(&self.single_plans[*one]);
        }
        self.plan_cache.get_or_insert(targets, || {
            Plan::build(&self.features, &self.topo_rank, targets)
        })
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("origin", &self.origin)
            .field("entities", &self.entities.len())
            .field("features", &self.features.len())
            .finish_non_exhaustive()
    }
}
