//! Preparing a request: validation against the registry, grouping by key list,
//! the reads each group needs and its UDF arguments.

use std::sync::Arc;

use smallvec::SmallVec;

use super::keys::{EntityKeys, ParsedKeys, Use};
use super::{ArgMap, ArgMaps, FieldMap, KeyList};
use super::{FeatureRequest, KeyPolicy, RequestLimits, RequestView, err, truncate};
use super::{Fetch, FetchId, Group, Prepared, Target};
use crate::error::{ErrorCode, RequestError};
use crate::plan::{Plan, SlotQuery};
use crate::query::{MAX_LAST_N, Query};
use crate::registry::{Entity, FeatureId, FeatureKind, QueryKind, Registry};
use crate::value::{FieldType, Timestamp, Value, json_kind};

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
        self.prepare_as(req.into(), now, limits, KeyPolicy::Strict)
    }

    /// Validates `req` (a request, or one with its key list held apart) under
    /// `limits`, treating key objects that do not fit as `policy` says, and
    /// resolves everything execution needs.
    pub fn prepare_as(
        &self,
        req: RequestView<'_>,
        now: Timestamp,
        limits: &RequestLimits,
        policy: KeyPolicy,
    ) -> Result<Prepared, RequestError> {
        let RequestView { request: req, keys } = req;
        let targets = self.targets(req, limits)?;
        let feature_keys = self.feature_key_lists(req, keys, limits)?;
        let group_of = self.assign_key_lists(&targets, &feature_keys, keys.is_some())?;
        let query_args = self.arg_maps(req.query_args.as_ref(), "`query_args`")?;
        let udf_args = self.arg_maps(req.udf_args.as_ref(), "`udf_args`")?;
        self.check_query_args(&query_args)?;
        let mut groups = Vec::with_capacity(group_of.len());
        // Most groups read one feature: room for that, made at once.
        let mut fetches = Vec::with_capacity(group_of.len());
        for (list, mut ts) in group_of {
            static NO_KEYS: KeyList = KeyList::new();
            let keys: &KeyList = match list {
                Some(i) => feature_keys[i].1,
                None => keys.unwrap_or(&NO_KEYS),
            };
            ts.sort_unstable();
            let plan = self.plan(&ts);
            let args = (&query_args[..], &udf_args[..]);
            groups.push(self.group(plan, keys, policy, args, now, &mut fetches)?);
        }
        let targets = place_targets(&targets, &groups)?;
        Ok(Prepared {
            now,
            groups,
            fetches,
            targets,
        })
    }

    /// The targets, checked against the limit and deduplicated, in request order.
    fn targets(
        &self,
        req: &FeatureRequest,
        limits: &RequestLimits,
    ) -> Result<Targets, RequestError> {
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
        let mut targets = Targets::with_capacity(req.target_features.len());
        for name in &req.target_features {
            let id = self.lookup(name, "`target_features`")?;
            if !targets.contains(&id) {
                targets.push(id);
            }
        }
        Ok(targets)
    }

    /// The `feature_keys` lists by feature, with the keys of the whole request
    /// (`keys` and those lists) checked against the limit.
    fn feature_key_lists<'r>(
        &self,
        req: &'r FeatureRequest,
        keys: Option<&KeyList>,
        limits: &RequestLimits,
    ) -> Result<SmallVec<[(FeatureId, &'r KeyList); 2]>, RequestError> {
        let feature_keys: SmallVec<[(FeatureId, &KeyList); 2]> = match &req.feature_keys {
            None => SmallVec::new(),
            Some(fk) => fk
                .iter()
                .map(|(name, keys)| Ok((self.lookup(name, "`feature_keys`")?, keys)))
                .collect::<Result<_, RequestError>>()?,
        };
        let total_keys =
            keys.map_or(0, KeyList::len) + feature_keys.iter().map(|(_, k)| k.len()).sum::<usize>();
        if total_keys > limits.max_keys {
            return Err(err(
                ErrorCode::InvalidRequest,
                format!(
                    "{total_keys} keys in one request; the limit is {}",
                    limits.max_keys
                ),
            ));
        }
        Ok(feature_keys)
    }

    /// Assigns each target a key list: its own, else one given for a feature it
    /// depends on, else `keys` (`None`); targets that share a list share a group.
    /// A `feature_keys` list no target needs is an error.
    fn assign_key_lists(
        &self,
        targets: &[FeatureId],
        feature_keys: &[(FeatureId, &KeyList)],
        have_keys: bool,
    ) -> Result<KeyGroups, RequestError> {
        let mut used_lists = vec![false; feature_keys.len()];
        let mut group_of = KeyGroups::new();
        for &t in targets {
            let list = self.key_list_for(t, feature_keys, have_keys, &mut used_lists)?;
            match group_of.iter_mut().find(|(l, _)| *l == list) {
                Some((_, ts)) => ts.push(t),
                None => group_of.push((list, smallvec::smallvec![t])),
            }
        }
        if let Some(i) = used_lists.iter().position(|u| !u) {
            let name = &self.feature(feature_keys[i].0).name;
            return Err(err(
                ErrorCode::InvalidRequest,
                format!("`feature_keys` gives keys for `{name}`, which no target needs"),
            ));
        }
        Ok(group_of)
    }

    /// `query_args` take only `start`, `end` and `n`.
    fn check_query_args(&self, query_args: &[(FeatureId, &ArgMap)]) -> Result<(), RequestError> {
        for &(f, args) in query_args {
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
        Ok(())
    }

    fn key_list_for(
        &self,
        target: FeatureId,
        feature_keys: &[(FeatureId, &KeyList)],
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
    ) -> Result<SmallVec<[(FeatureId, &'a ArgMap); 2]>, RequestError> {
        let mut out = SmallVec::new();
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
        keys: &KeyList,
        policy: KeyPolicy,
        (query_args, udf_args): (&GivenArgs<'_>, &GivenArgs<'_>),
        now: Timestamp,
        fetches: &mut Vec<Fetch>,
    ) -> Result<Group, RequestError> {
        if keys.is_empty() {
            return Err(err(ErrorCode::MissingKeys, "the key list is empty"));
        }
        let (parsed, served) = match self.parse_keys(&plan, keys) {
            Ok(parsed) => (parsed, None),
            Err(e) if e.code == ErrorCode::InvalidKey && policy == KeyPolicy::NullForBadKeys => {
                // Only on a request with a bad key: each key alone, then the good ones.
                let served: Box<[usize]> = (0..keys.len())
                    .filter(|&i| self.parse_keys(&plan, &keys.select(&[i])).is_ok())
                    .collect();
                let good = keys.select(&served);
                (self.parse_keys(&plan, &good)?, Some((keys.len(), served)))
            }
            Err(e) => return Err(e),
        };
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
            key_count: served.as_ref().map_or(keys.len(), |(_, s)| s.len()),
            served,
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
        keys: &KeyList,
    ) -> Result<ParsedKeys<'r>, RequestError> {
        // The entities, in plan order: the ones read first (their fields are
        // required), then the on-demand outputs'.
        let mut entities: SmallVec<[(&'r Arc<Entity>, Use); 2]> = SmallVec::new();
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
        // Each distinct field name is checked once; the first in the list's order
        // that no entity has is named with the first key that has it.
        if let Some(field) = keys.names().iter().find(|name| {
            !entities
                .iter()
                .any(|(e, _)| e.keys().any(|c| *c.name == ***name))
        }) {
            let i = keys
                .iter()
                .position(|k| k.get(field).is_some())
                .unwrap_or(0);
            return Err(err(
                ErrorCode::InvalidKey,
                format!("key {i}: unknown key field `{}`", truncate(field)),
            ));
        }
        let mut parsed = SmallVec::with_capacity(entities.len());
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
        let q = QueryArgs {
            owner: &self.feature(args_from).name,
            dep: &self.feature(feature).name,
            args,
            now,
        };
        match query {
            SlotQuery::Dependency(QueryKind::Latest) => Ok(Query::Latest),
            SlotQuery::Dependency(QueryKind::Range { lookback_s }) => q.range(lookback_s),
            SlotQuery::Dependency(QueryKind::LastN { n }) => match q.count()?.or(n) {
                Some(n) => Ok(Query::LastN { n }),
                None => Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!(
                        "the last_n query of `{}` for `{}` needs `query_args.{}.n`",
                        q.dep, q.owner, q.owner
                    ),
                )),
            },
            SlotQuery::Direct => {
                let has_range = q.get("start").is_some() || q.get("end").is_some();
                match (has_range, q.count()?) {
                    (true, Some(_)) => Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!(
                            "`query_args.{}`: give `start`/`end` or `n`, not both",
                            q.owner
                        ),
                    )),
                    (true, None) => q.range(None),
                    (false, Some(n)) => Ok(Query::LastN { n }),
                    (false, None) => Ok(Query::Latest),
                }
            }
        }
    }
}

/// Arguments given per feature (`query_args`, `udf_args`).
type GivenArgs<'a> = [(FeatureId, &'a ArgMap)];

/// Targets by the key list they use (`None`: the request's `keys`).
type KeyGroups = SmallVec<[(Option<usize>, Targets); 1]>;

/// A request's targets, or a group's: most requests have a few, kept in place
/// (each allocation here was a tenth of a 1-key request's preparation).
type Targets = SmallVec<[FeatureId; 4]>;

/// The `query_args` that `owner` gave for its read of `dep`.
struct QueryArgs<'a> {
    owner: &'a str,
    dep: &'a str,
    args: Option<&'a ArgMap>,
    now: Timestamp,
}

impl QueryArgs<'_> {
    /// A parameter given and not null.
    fn get(&self, name: &str) -> Option<&serde_json::Value> {
        self.args.and_then(|a| a.get(name)).filter(|j| !j.is_null())
    }

    /// `start` or `end`, as an instant.
    fn time(&self, name: &str) -> Result<Option<Timestamp>, RequestError> {
        self.get(name)
            .map(|j| match FieldType::Timestamp.from_json(j) {
                Ok(Value::Timestamp(t)) => Ok(t),
                Ok(_) | Err(_) => Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!(
                        "`query_args.{}.{name}`: expected an RFC 3339 timestamp or epoch seconds, got {}",
                        self.owner,
                        json_kind(j)
                    ),
                )),
            })
            .transpose()
    }

    /// `n`, from 1 to [`MAX_LAST_N`].
    fn count(&self) -> Result<Option<usize>, RequestError> {
        self.get("n")
            // `3.0` is a whole number too (JSON Schema's `integer` takes it).
            .map(|j| {
                match j.as_u64().or_else(|| {
                    j.as_f64()
                        .filter(|f| f.fract() == 0.0 && (0.0..1e15).contains(f))
                        .map(|f| f as u64)
                }) {
                    Some(n) if (1..=MAX_LAST_N as u64).contains(&n) => Ok(n as usize),
                    _ => Err(err(
                        ErrorCode::InvalidQueryArg,
                        format!(
                            "`query_args.{}.n` must be an integer from 1 to {MAX_LAST_N}",
                            self.owner
                        ),
                    )),
                }
            })
            .transpose()
    }

    /// A range ending at `end` (default now) and starting at `start`, else
    /// `lookback_s` before the end.
    fn range(&self, lookback_s: Option<f64>) -> Result<Query, RequestError> {
        let owner = self.owner;
        let end = self.time("end")?.unwrap_or(self.now);
        let start = match (self.time("start")?, lookback_s) {
            (Some(s), _) => s,
            (None, Some(l)) => end.saturating_sub_micros((l * 1e6) as i64),
            (None, None) => {
                return Err(err(
                    ErrorCode::InvalidQueryArg,
                    format!(
                        "the range query of `{}` for `{owner}` needs `query_args.{owner}.start`",
                        self.dep
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
    }
}

/// The arguments given for feature `f`.
fn args_of<'a>(given: &[(FeatureId, &'a ArgMap)], f: FeatureId) -> Option<&'a ArgMap> {
    given.iter().find(|(g, _)| *g == f).map(|&(_, a)| a)
}

/// Where each target's result is: its group and its place among the group's
/// results.
fn place_targets(targets: &[FeatureId], groups: &[Group]) -> Result<Vec<Target>, RequestError> {
    targets
        .iter()
        .map(|&feature| {
            groups
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
                .ok_or_else(|| err(ErrorCode::Internal, "target lost while grouping"))
        })
        .collect()
}
