//! What preparing a request produces: the reads to perform (each named by a
//! [`FetchId`]), the groups of targets to execute, and where each target's results
//! are.

use std::sync::Arc;

use crate::key::EntityKey;
use crate::plan::Plan;
use crate::query::Query;
use crate::registry::FeatureId;
use crate::value::{Timestamp, Value};

pub use crate::key::KeyValues;

/// Names one storage read of a prepared request ([`Prepared::fetches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FetchId(pub(crate) usize);

impl FetchId {
    /// The read's position in [`Prepared::fetches`] (dense, from 0).
    pub fn index(self) -> usize {
        self.0
    }
}

/// A resolved storage read.
#[derive(Debug, Clone)]
pub struct Fetch {
    /// The pipeline feature.
    pub feature: FeatureId,
    /// The query with its parameters.
    pub query: Query,
    /// The keys, in request order.
    pub keys: Arc<[EntityKey]>,
}

/// Targets that share a key list, ready to execute.
#[derive(Debug)]
pub struct Group {
    /// The plan of this group's targets.
    pub plan: Arc<Plan>,
    /// How many keys are served (the request's, less those refused by
    /// [`KeyPolicy::NullForBadKeys`](super::KeyPolicy)).
    pub key_count: usize,
    /// Under [`KeyPolicy::NullForBadKeys`](super::KeyPolicy), when keys were
    /// refused: the request's key count, and the request index of each key served
    /// (ascending). `None`: every key of the list is served, in order.
    pub served: Option<(usize, Box<[usize]>)>,
    /// For each plan slot, the read that serves it.
    pub slot_fetch: Vec<FetchId>,
    /// For each plan step, its UDF arguments.
    pub step_args: Vec<Vec<Value>>,
    /// For each plan step, per key, the values of the output entity's key fields
    /// (parsed and validated once, with the rest of the key; `Null` for a field the
    /// request's key objects do not give).
    pub step_keys: Vec<KeyValues>,
}

/// Where one target's results are: its group, and its place in that group's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The feature.
    pub feature: FeatureId,
    /// Its group in [`Prepared::groups`].
    pub group: usize,
    /// Its index in that group's `plan.targets` (and plan results).
    pub result: usize,
}

/// A validated request: what to read, then what to run.
///
/// The request path is: [`Registry::prepare_with`](crate::Registry::prepare_with) → perform each of
/// [`Prepared::fetches`] → [`Fetched`](crate::execute::Fetched) (results by
/// [`FetchId`]) → [`execute`](crate::execute::execute) → [`encode`](crate::encode).
#[derive(Debug)]
pub struct Prepared {
    /// The request time (`now` for UDFs and default ranges).
    pub now: Timestamp,
    /// The groups to execute.
    pub groups: Vec<Group>,
    /// Every storage read, over all groups (deduplicated within each group).
    pub(crate) fetches: Vec<Fetch>,
    /// The targets in request order.
    pub targets: Vec<Target>,
}

impl Prepared {
    /// The total number of keys served over all groups.
    pub fn key_count(&self) -> usize {
        self.groups.iter().map(|g| g.key_count).sum()
    }

    /// How many keys were answered `null` as invalid ([`KeyPolicy::NullForBadKeys`](super::KeyPolicy)).
    pub fn invalid_keys(&self) -> usize {
        self.groups
            .iter()
            .filter_map(|g| g.served.as_ref().map(|(n, s)| n - s.len()))
            .sum()
    }

    /// The storage reads this request needs, each with its id.
    pub fn fetches(&self) -> impl ExactSizeIterator<Item = (FetchId, &Fetch)> + '_ {
        self.fetches
            .iter()
            .enumerate()
            .map(|(i, f)| (FetchId(i), f))
    }

    /// The read named `id`.
    pub fn fetch(&self, id: FetchId) -> &Fetch {
        &self.fetches[id.0]
    }
}
