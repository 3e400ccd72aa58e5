//! The feature request (Volga's field names) and its validation against a registry.
//!
//! [`Registry::prepare`] turns a [`FeatureRequest`] into [`Prepared`]: the targets
//! grouped by key list, each group with its plan, its canonical keys, its resolved
//! storage reads (deduplicated) and its UDF arguments. Every problem is a
//! [`RequestError`] that names the offending value.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::{ErrorCode, RequestError};
use crate::key::{EntityKey, KEY_SEPARATOR, push_key_int, push_key_str};
use crate::plan::{Plan, SlotQuery};
use crate::query::{MAX_LAST_N, Query};
use crate::registry::{Entity, FeatureId, FeatureKind, QueryKind, Registry};
use crate::value::{FieldType, Timestamp, Value, json_kind};

/// A JSON object with few fields (a key object, an argument map), parsed into a
/// vector of (name, value) in request order.
///
/// Key objects have one to a few fields and a 100-key request parses a hundred of
/// them, so a map's hashing and allocations were a large part of the parse. A
/// repeated name keeps its last value (as a JSON map would); large objects are
/// deduplicated through a hash index, so a hostile request cannot make parsing
/// quadratic. Equality ignores field order.
#[derive(Debug, Clone)]
pub struct FieldMap<V>(Vec<(String, V)>);

/// A key object: key field name → value.
pub type KeyObject = FieldMap<Json>;

/// Query or UDF arguments: parameter name → value.
pub type ArgMap = FieldMap<Json>;

/// Per-feature argument maps (`query_args`, `udf_args`); `null` stands for none.
pub type ArgMaps = FieldMap<Option<ArgMap>>;

/// Objects with more fields than this are deduplicated through a hash index.
const LINEAR_DEDUP_MAX: usize = 16;

impl<V> Default for FieldMap<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> FieldMap<V> {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The field names, in request order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// The fields, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V: PartialEq> PartialEq for FieldMap<V> {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        if self.len() <= LINEAR_DEDUP_MAX {
            return self.iter().all(|(n, v)| other.get(n) == Some(v));
        }
        // Large objects (hostile ones included) compare through a hash index.
        let index: HashMap<&str, &V, foldhash::fast::RandomState> = other.iter().collect();
        self.iter().all(|(n, v)| index.get(n) == Some(&v))
    }
}

impl<V, const N: usize> From<[(&str, V); N]> for FieldMap<V> {
    fn from(fields: [(&str, V); N]) -> Self {
        Self(fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for FieldMap<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Fields<V> {
            type Value = FieldMap<V>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FieldMap<V>, A::Error> {
                let mut fields: Vec<(String, V)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(1).clamp(1, 8));
                let mut index: Option<HashMap<String, usize, foldhash::fast::RandomState>> = None;
                while let Some(name) = map.next_key::<String>()? {
                    let value: V = map.next_value()?;
                    // A repeated field: the last wins, as in serde_json and Python.
                    let seen = match &index {
                        Some(index) => index.get(&name).copied(),
                        None => fields.iter().position(|(n, _)| *n == name),
                    };
                    match seen {
                        Some(i) => fields[i].1 = value,
                        None => {
                            if let Some(index) = &mut index {
                                index.insert(name.clone(), fields.len());
                            }
                            fields.push((name, value));
                            if index.is_none() && fields.len() > LINEAR_DEDUP_MAX {
                                index = Some(
                                    fields
                                        .iter()
                                        .enumerate()
                                        .map(|(i, (n, _))| (n.clone(), i))
                                        .collect(),
                                );
                            }
                        }
                    }
                }
                Ok(FieldMap(fields))
            }
        }
        d.deserialize_map(Fields(std::marker::PhantomData))
    }
}

/// A feature request, as sent to `POST /v1/features` and Volga's `/on_demand_compute`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureRequest {
    /// Features to compute and return.
    pub target_features: Vec<String>,
    /// One key list for every target.
    #[serde(default)]
    pub keys: Option<Vec<KeyObject>>,
    /// Key lists per feature (Volga's form): a target uses its own list, or the list
    /// given for a feature it depends on.
    #[serde(default)]
    pub feature_keys: Option<IndexMap<String, Vec<KeyObject>>>,
    /// Query parameters per feature: `start`/`end` for `range`, `n` for `last_n`.
    #[serde(default)]
    pub query_args: Option<ArgMaps>,
    /// UDF arguments per on-demand feature.
    #[serde(default)]
    pub udf_args: Option<ArgMaps>,
    /// This request's deadline in milliseconds (overrides the server's default; the
    /// `X-Oka-Deadline-Ms` header overrides this).
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

/// The default largest number of keys in one request (over all key lists).
pub const MAX_KEYS: usize = 10_000;
/// The default largest number of targets in one request.
pub const MAX_TARGETS: usize = 256;

/// Per-request size limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Keys over all key lists.
    pub max_keys: usize,
    /// Entries in `target_features`.
    pub max_targets: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            max_keys: MAX_KEYS,
            max_targets: MAX_TARGETS,
        }
    }
}

/// Names one storage read of a prepared request ([`Prepared::fetches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FetchId(usize);

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
    /// How many keys.
    pub key_count: usize,
    /// For each plan slot, the read that serves it.
    pub slot_fetch: Vec<FetchId>,
    /// For each plan step, its UDF arguments.
    pub step_args: Vec<Vec<Value>>,
    /// For each plan step, per key, the values of the output entity's key fields
    /// (parsed and validated once, with the rest of the key; `Null` for a field the
    /// request's key objects do not give).
    pub step_keys: Vec<Arc<[Vec<Value>]>>,
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
/// The request path is: [`Registry::prepare_with`] → perform each of
/// [`Prepared::fetches`] → [`Fetched`](crate::execute::Fetched) (results by
/// [`FetchId`]) → [`execute`](crate::execute::execute) → [`encode`](crate::encode).
#[derive(Debug)]
pub struct Prepared {
    /// The request time (`now` for UDFs and default ranges).
    pub now: Timestamp,
    /// The groups to execute.
    pub groups: Vec<Group>,
    /// Every storage read, over all groups (deduplicated within each group).
    fetches: Vec<Fetch>,
    /// The targets in request order.
    pub targets: Vec<Target>,
}

impl Prepared {
    /// The total number of keys over all groups.
    pub fn key_count(&self) -> usize {
        self.groups.iter().map(|g| g.key_count).sum()
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

fn err(code: ErrorCode, message: impl Into<String>) -> RequestError {
    RequestError::new(code, message)
}

impl Registry {
    fn lookup(&self, name: &str, place: &str) -> Result<FeatureId, RequestError> {
        self.feature_id(name).ok_or_else(|| {
            err(
                ErrorCode::UnknownFeature,
                format!("unknown feature `{}` in {place}", truncate(name)),
            )
        })
    }

    /// Validates `req` under the default limits and resolves everything execution needs.
    pub fn prepare(&self, req: &FeatureRequest, now: Timestamp) -> Result<Prepared, RequestError> {
        self.prepare_with(req, now, &RequestLimits::default())
    }

    /// Validates `req` under `limits` and resolves everything execution needs.
    pub fn prepare_with(
        &self,
        req: &FeatureRequest,
        now: Timestamp,
        limits: &RequestLimits,
    ) -> Result<Prepared, RequestError> {
        if req.target_features.is_empty() {
            return Err(err(ErrorCode::InvalidRequest, "`target_features` is empty"));
        }
        if req.target_features.len() > limits.max_targets {
            return Err(err(
                ErrorCode::InvalidRequest,
                format!(
                    "{} targets in one request; the limit is {}",
                    req.target_features.len(),
                    limits.max_targets
                ),
            ));
        }
        // Targets, deduplicated, in request order.
        let mut targets: Vec<FeatureId> = Vec::with_capacity(req.target_features.len());
        for name in &req.target_features {
            let id = self.lookup(name, "`target_features`")?;
            if !targets.contains(&id) {
                targets.push(id);
            }
        }
        let feature_keys: Vec<(FeatureId, &Vec<KeyObject>)> = match &req.feature_keys {
            None => Vec::new(),
            Some(fk) => fk
                .iter()
                .map(|(name, keys)| Ok((self.lookup(name, "`feature_keys`")?, keys)))
                .collect::<Result<_, RequestError>>()?,
        };
        let total_keys = req.keys.as_ref().map_or(0, Vec::len)
            + feature_keys.iter().map(|(_, k)| k.len()).sum::<usize>();
        if total_keys > limits.max_keys {
            return Err(err(
                ErrorCode::InvalidRequest,
                format!(
                    "{total_keys} keys in one request; the limit is {}",
                    limits.max_keys
                ),
            ));
        }

        // Assign each target a key list: its own, else one given for a feature it
        // depends on, else `keys`. `None` stands for `keys`.
        let mut used_lists = vec![false; feature_keys.len()];
        let mut group_of: Vec<(Option<usize>, Vec<FeatureId>)> = Vec::new();
        for &t in &targets {
            let list = self.key_list_for(t, &feature_keys, req.keys.is_some(), &mut used_lists)?;
            match group_of.iter_mut().find(|(l, _)| *l == list) {
                Some((_, ts)) => ts.push(t),
                None => group_of.push((list, vec![t])),
            }
        }
        if let Some(i) = used_lists.iter().position(|u| !u) {
            let name = &self.feature(feature_keys[i].0).name;
            return Err(err(
                ErrorCode::InvalidRequest,
                format!("`feature_keys` gives keys for `{name}`, which no target needs"),
            ));
        }

        let query_args = self.arg_maps(req.query_args.as_ref(), "`query_args`")?;
        let udf_args = self.arg_maps(req.udf_args.as_ref(), "`udf_args`")?;
        for &(f, args) in &query_args {
            if let Some(k) = args.keys().find(|k| !matches!(*k, "start" | "end" | "n")) {
                return Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!(
                        "`query_args.{}`: unknown parameter `{}` (expected `start`, `end` or `n`)",
                        self.feature(f).name,
                        truncate(k)
                    ),
                ));
            }
        }

        let mut groups = Vec::with_capacity(group_of.len());
        let mut fetches = Vec::new();
        for (list, mut ts) in group_of {
            let keys: &[KeyObject] = match list {
                Some(i) => feature_keys[i].1,
                None => req.keys.as_deref().unwrap_or(&[]),
            };
            ts.sort_unstable();
            let plan = self.plan(&ts);
            groups.push(self.group(plan, keys, &query_args, &udf_args, now, &mut fetches)?);
        }
        let mut placed = Vec::with_capacity(targets.len());
        for &feature in &targets {
            let target = groups
                .iter()
                .enumerate()
                .find_map(|(group, g)| {
                    let result = g.plan.targets.iter().position(|&x| x == feature)?;
                    Some(Target {
                        feature,
                        group,
                        result,
                    })
                })
                .ok_or_else(|| err(ErrorCode::Internal, "target lost while grouping"))?;
            placed.push(target);
        }
        Ok(Prepared {
            now,
            groups,
            fetches,
            targets: placed,
        })
    }

    fn key_list_for(
        &self,
        target: FeatureId,
        feature_keys: &[(FeatureId, &Vec<KeyObject>)],
        have_keys: bool,
        used: &mut [bool],
    ) -> Result<Option<usize>, RequestError> {
        if let Some(i) = feature_keys.iter().position(|(f, _)| *f == target) {
            used[i] = true;
            return Ok(Some(i));
        }
        let plan = self.plan(&[target]);
        let in_closure = |f: FeatureId| {
            plan.slots.iter().any(|s| s.feature == f) || plan.steps.iter().any(|s| s.feature == f)
        };
        let mut found: Option<usize> = None;
        for (i, (f, keys)) in feature_keys.iter().enumerate() {
            if !in_closure(*f) {
                continue;
            }
            match found {
                None => {
                    found = Some(i);
                    used[i] = true;
                }
                Some(j) if feature_keys[j].1 == *keys => used[i] = true,
                Some(j) => {
                    return Err(err(
                        ErrorCode::InvalidRequest,
                        format!(
                            "`feature_keys` gives different keys for `{}` and `{}`, both inputs of `{}`",
                            self.feature(feature_keys[j].0).name,
                            self.feature(*f).name,
                            self.feature(target).name
                        ),
                    ));
                }
            }
        }
        match found {
            Some(i) => Ok(Some(i)),
            None if have_keys => Ok(None),
            None => Err(err(
                ErrorCode::MissingKeys,
                format!(
                    "no keys for `{}`: give `keys`, or `feature_keys` for it",
                    self.feature(target).name
                ),
            )),
        }
    }

    fn arg_maps<'a>(
        &self,
        maps: Option<&'a ArgMaps>,
        place: &str,
    ) -> Result<Vec<(FeatureId, &'a ArgMap)>, RequestError> {
        let mut out = Vec::new();
        for (name, args) in maps.into_iter().flat_map(FieldMap::iter) {
            let id = self.lookup(name, place)?;
            if let Some(args) = args {
                out.push((id, args));
            }
        }
        Ok(out)
    }

    /// Resolves one group: its keys (parsed once per entity), its reads (appended to
    /// the request's `fetches`, deduplicated within the group) and its UDF arguments.
    fn group(
        &self,
        plan: Arc<Plan>,
        keys: &[KeyObject],
        query_args: &[(FeatureId, &ArgMap)],
        udf_args: &[(FeatureId, &ArgMap)],
        now: Timestamp,
        fetches: &mut Vec<Fetch>,
    ) -> Result<Group, RequestError> {
        if keys.is_empty() {
            return Err(err(ErrorCode::MissingKeys, "the key list is empty"));
        }
        let parsed = self.parse_keys(&plan, keys)?;
        let first = fetches.len();
        let mut slot_fetch = Vec::with_capacity(plan.slots.len());
        for slot in &plan.slots {
            let ek = parsed.canonical(&self.feature(slot.feature).entity)?;
            let args = args_of(query_args, slot.args_from);
            let query = self.resolve_query(slot.feature, slot.query, slot.args_from, args, now)?;
            let idx = match fetches[first..]
                .iter()
                .position(|f| f.feature == slot.feature && f.query == query)
            {
                Some(i) => first + i,
                None => {
                    fetches.push(Fetch {
                        feature: slot.feature,
                        query,
                        keys: ek,
                    });
                    fetches.len() - 1
                }
            };
            slot_fetch.push(FetchId(idx));
        }

        let mut step_args = Vec::with_capacity(plan.steps.len());
        let mut step_keys = Vec::with_capacity(plan.steps.len());
        for step in &plan.steps {
            let feature = self.feature(step.feature);
            step_args.push(self.udf_args(step.feature, args_of(udf_args, step.feature))?);
            step_keys.push(parsed.values(&feature.entity)?);
        }
        Ok(Group {
            plan,
            key_count: keys.len(),
            slot_fetch,
            step_args,
            step_keys,
        })
    }

    /// Parses a group's key objects once per entity the group reads or returns:
    /// every key field must belong to one of them, and each entity's fields must
    /// have its types.
    fn parse_keys<'r>(
        &'r self,
        plan: &Plan,
        keys: &[KeyObject],
    ) -> Result<ParsedKeys<'r>, RequestError> {
        // The entities, in plan order: the ones read first (their fields are
        // required), then the on-demand outputs'.
        let mut entities: Vec<(&'r Arc<Entity>, Use)> = Vec::new();
        let read = plan.slots.iter().map(|s| (s.feature, Use::READ));
        let returned = plan.steps.iter().map(|s| (s.feature, Use::RETURNED));
        for (f, used) in read.chain(returned) {
            let e = &self.feature(f).entity;
            match entities.iter_mut().find(|(x, _)| Arc::ptr_eq(x, e)) {
                Some((_, u)) => {
                    u.read |= used.read;
                    u.returned |= used.returned;
                }
                None => entities.push((e, used)),
            }
        }
        for (i, k) in keys.iter().enumerate() {
            if let Some(field) = k.keys().find(|name| {
                !entities
                    .iter()
                    .any(|(e, _)| e.keys().any(|c| &*c.name == *name))
            }) {
                return Err(err(
                    ErrorCode::InvalidKey,
                    format!("key {i}: unknown key field `{}`", truncate(field)),
                ));
            }
        }
        let mut parsed = Vec::with_capacity(entities.len());
        for (entity, used) in entities {
            parsed.push(EntityKeys::parse(entity, keys, used)?);
        }
        Ok(ParsedKeys(parsed))
    }

    /// The UDF arguments of on-demand feature `id`: the request's, else the spec's
    /// defaults, each converted to its declared type.
    fn udf_args(&self, id: FeatureId, given: Option<&ArgMap>) -> Result<Vec<Value>, RequestError> {
        let feature = self.feature(id);
        let FeatureKind::OnDemand { args, .. } = &feature.kind else {
            return Err(err(ErrorCode::Internal, "plan step is not on-demand"));
        };
        if let Some(given) = given
            && let Some(unknown) = given.keys().find(|k| !args.iter().any(|a| &*a.name == *k))
        {
            let declared: Vec<&str> = args.iter().map(|a| &*a.name).collect();
            return Err(err(
                ErrorCode::UnknownUdfArg,
                format!(
                    "`udf_args.{}`: unknown argument `{}` (declared: {})",
                    feature.name,
                    truncate(unknown),
                    if declared.is_empty() {
                        "none".to_owned()
                    } else {
                        declared.join(", ")
                    }
                ),
            ));
        }
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            let v = match given.and_then(|g| g.get(&a.name)).filter(|j| !j.is_null()) {
                Some(j) => a.ty.from_json(j).map_err(|e| {
                    err(
                        ErrorCode::InvalidUdfArg,
                        format!("`udf_args.{}.{}`: {e}", feature.name, a.name),
                    )
                })?,
                None => a.default.clone().ok_or_else(|| {
                    err(
                        ErrorCode::InvalidUdfArg,
                        format!(
                            "`udf_args.{}.{}` is required ({})",
                            feature.name, a.name, a.ty
                        ),
                    )
                })?,
            };
            values.push(v);
        }
        Ok(values)
    }

    fn resolve_query(
        &self,
        feature: FeatureId,
        query: SlotQuery,
        args_from: FeatureId,
        args: Option<&ArgMap>,
        now: Timestamp,
    ) -> Result<Query, RequestError> {
        let owner = &self.feature(args_from).name;
        let dep = &self.feature(feature).name;
        let get = |name: &str| args.and_then(|a| a.get(name)).filter(|j| !j.is_null());
        let time = |name: &str| -> Result<Option<Timestamp>, RequestError> {
            get(name)
                .map(|j| match FieldType::Timestamp.from_json(j) {
                    Ok(Value::Timestamp(t)) => Ok(t),
                    Ok(_) | Err(_) => Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!(
                            "`query_args.{owner}.{name}`: expected an RFC 3339 timestamp or epoch seconds, got {}",
                            json_kind(j)
                        ),
                    )),
                })
                .transpose()
        };
        let count = || -> Result<Option<usize>, RequestError> {
            get("n")
                .map(|j| match j.as_u64() {
                    Some(n) if (1..=MAX_LAST_N as u64).contains(&n) => Ok(n as usize),
                    _ => Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!("`query_args.{owner}.n` must be an integer from 1 to {MAX_LAST_N}"),
                    )),
                })
                .transpose()
        };
        let range = |lookback_s: Option<f64>| -> Result<Query, RequestError> {
            let end = time("end")?.unwrap_or(now);
            let start = match (time("start")?, lookback_s) {
                (Some(s), _) => s,
                (None, Some(l)) => end.saturating_sub_micros((l * 1e6) as i64),
                (None, None) => {
                    return Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!(
                            "the range query of `{dep}` for `{owner}` needs `query_args.{owner}.start`"
                        ),
                    ));
                }
            };
            if start > end {
                return Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!("`query_args.{owner}`: `start` is after `end`"),
                ));
            }
            Ok(Query::Range { start, end })
        };
        match query {
            SlotQuery::Dependency(QueryKind::Latest) => Ok(Query::Latest),
            SlotQuery::Dependency(QueryKind::Range { lookback_s }) => range(lookback_s),
            SlotQuery::Dependency(QueryKind::LastN { n }) => match count()?.or(n) {
                Some(n) => Ok(Query::LastN { n }),
                None => Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!(
                        "the last_n query of `{dep}` for `{owner}` needs `query_args.{owner}.n`"
                    ),
                )),
            },
            SlotQuery::Direct => {
                let has_range = get("start").is_some() || get("end").is_some();
                match (has_range, count()?) {
                    (true, Some(_)) => Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!("`query_args.{owner}`: give `start`/`end` or `n`, not both"),
                    )),
                    (true, None) => range(None),
                    (false, Some(n)) => Ok(Query::LastN { n }),
                    (false, None) => Ok(Query::Latest),
                }
            }
        }
    }
}

/// A group's key objects, parsed once per entity.
struct ParsedKeys<'r>(Vec<EntityKeys<'r>>);

impl ParsedKeys<'_> {
    fn get(&self, entity: &Arc<Entity>) -> Result<&EntityKeys<'_>, RequestError> {
        self.0
            .iter()
            .find(|p| Arc::ptr_eq(p.entity, entity))
            .ok_or_else(|| err(ErrorCode::Internal, "an entity's keys were not parsed"))
    }

    /// The canonical storage keys of an entity the group reads.
    fn canonical(&self, entity: &Arc<Entity>) -> Result<Arc<[EntityKey]>, RequestError> {
        self.get(entity)?
            .canonical
            .clone()
            .ok_or_else(|| err(ErrorCode::Internal, "no storage keys for an entity read"))
    }

    /// The key field values of an entity the group returns.
    fn values(&self, entity: &Arc<Entity>) -> Result<Arc<[Vec<Value>]>, RequestError> {
        self.get(entity)?
            .values
            .clone()
            .ok_or_else(|| err(ErrorCode::Internal, "no key values for an entity returned"))
    }
}

/// How a group uses an entity's keys.
#[derive(Debug, Clone, Copy)]
struct Use {
    /// A pipeline feature of the entity is read: its key fields are required, and
    /// make the storage keys.
    read: bool,
    /// An on-demand feature returns records of the entity: its UDF sees the key's
    /// values.
    returned: bool,
}

impl Use {
    const READ: Self = Self {
        read: true,
        returned: false,
    };
    const RETURNED: Self = Self {
        read: false,
        returned: true,
    };
}

/// The key objects read against one entity's key fields.
struct EntityKeys<'r> {
    entity: &'r Arc<Entity>,
    /// Per key, the key fields' values in the entity's key order (entities the
    /// group returns).
    values: Option<Arc<[Vec<Value>]>>,
    /// Per key, the canonical storage key (entities the group reads).
    canonical: Option<Arc<[EntityKey]>>,
}

impl<'r> EntityKeys<'r> {
    /// Parses every key object's fields of `entity`, once, into what the group's
    /// use of it needs: a field must have the entity's type; a missing field is an
    /// error for an entity that is read, and `Null` for one that only names an
    /// on-demand output's key.
    fn parse(entity: &'r Arc<Entity>, keys: &[KeyObject], used: Use) -> Result<Self, RequestError> {
        let required = used.read;
        let mut values = Vec::with_capacity(if used.returned { keys.len() } else { 0 });
        let mut canonical = Vec::with_capacity(if required { keys.len() } else { 0 });
        let mut buf = String::new();
        for (i, k) in keys.iter().enumerate() {
            buf.clear();
            let mut row = Vec::with_capacity(if used.returned {
                entity.key_index.len()
            } else {
                0
            });
            for (p, c) in entity.keys().enumerate() {
                if p > 0 {
                    buf.push(KEY_SEPARATOR);
                }
                let Some(j) = k.get(&c.name) else {
                    if required {
                        return Err(err(
                            ErrorCode::InvalidKey,
                            format!(
                                "key {i} lacks field `{}` of entity `{}`",
                                c.name, entity.name
                            ),
                        ));
                    }
                    if used.returned {
                        row.push(Value::Null);
                    }
                    continue;
                };
                let v = match (&c.ty, j) {
                    (FieldType::String, Json::String(s)) => {
                        if required {
                            push_key_str(&mut buf, s);
                        }
                        used.returned.then(|| Value::String(s.as_str().into()))
                    }
                    (FieldType::Int, Json::Number(n)) if n.is_i64() || n.is_u64() => {
                        let Some(n) = n.as_i64() else {
                            return Err(err(
                                ErrorCode::InvalidKey,
                                format!("key {i}: field `{}` is out of the int range", c.name),
                            ));
                        };
                        if required {
                            push_key_int(&mut buf, n);
                        }
                        used.returned.then_some(Value::Int(n))
                    }
                    _ => {
                        return Err(err(
                            ErrorCode::InvalidKey,
                            format!(
                                "key {i}: field `{}` must be {}, got {}",
                                c.name,
                                c.ty,
                                json_kind(j)
                            ),
                        ));
                    }
                };
                row.extend(v);
            }
            if required {
                canonical.push(EntityKey::from_canonical(buf.as_str()));
            }
            if used.returned {
                values.push(row);
            }
        }
        Ok(Self {
            entity,
            values: used.returned.then(|| values.into()),
            canonical: required.then(|| canonical.into()),
        })
    }
}

/// The arguments given for feature `f`.
fn args_of<'a>(given: &[(FeatureId, &'a ArgMap)], f: FeatureId) -> Option<&'a ArgMap> {
    given.iter().find(|(g, _)| *g == f).map(|&(_, a)| a)
}

/// Shortens user-supplied names echoed in error messages.
fn truncate(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_objects_keep_the_last_repeat_and_compare_without_order() {
        let k: KeyObject = serde_json::from_str(r#"{"id": "x", "n": 1, "id": "y"}"#).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("id"), Some(&Json::from("y")));
        assert_eq!(k.keys().collect::<Vec<_>>(), ["id", "n"]);
        let reordered: KeyObject = serde_json::from_str(r#"{"n": 1, "id": "y"}"#).unwrap();
        assert_eq!(k, reordered);
        let other: KeyObject = serde_json::from_str(r#"{"n": 1, "id": "x"}"#).unwrap();
        assert_ne!(k, other);
        assert!(serde_json::from_str::<KeyObject>(r#"["id"]"#).is_err());
    }

    #[test]
    fn large_objects_dedupe_through_the_index() {
        // 40 distinct fields, then every one of them again: past the linear limit.
        let fields: Vec<String> = (0..40)
            .map(|i| format!(r#""f{i}": {i}"#))
            .chain((0..40).map(|i| format!(r#""f{i}": {}"#, i + 100)))
            .collect();
        let m: ArgMap = serde_json::from_str(&format!("{{{}}}", fields.join(","))).unwrap();
        assert_eq!(m.len(), 40);
        assert_eq!(m.keys().nth(39), Some("f39"));
        assert_eq!(m.get("f0"), Some(&Json::from(100)));
        assert_eq!(m.get("f39"), Some(&Json::from(139)));

        // Equality of large objects ignores order too (through the index).
        let reversed: Vec<String> = (0..40)
            .rev()
            .map(|i| format!(r#""f{i}": {}"#, i + 100))
            .collect();
        let r: ArgMap = serde_json::from_str(&format!("{{{}}}", reversed.join(","))).unwrap();
        assert_eq!(m, r);
        let changed = format!(
            "{{{}}}",
            reversed.join(",").replace(r#""f7": 107"#, r#""f7": 7"#)
        );
        assert_ne!(m, serde_json::from_str::<ArgMap>(&changed).unwrap());
    }
}
