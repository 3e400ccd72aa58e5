//! What a training set computes and how one row is computed: the row becomes
//! the request a model server would have sent at the row's time (its keys, its
//! on-demand arguments, `now` = the row's time), prepared by the planner and run
//! by the executor that serve requests ([`Registry::prepare_with`],
//! [`execute`]), with the reads answered from the history as of that time.

use std::collections::HashSet;

use oka_core::entity::Column;
use oka_core::execute::{Fetched, Outcome, Outputs};
use oka_core::feature::FeatureKind;
use oka_core::request::{ArgMap, KeyList, KeyValue, RequestLimits};
use oka_core::{
    EntityKey, FeatureId, FeatureRequest, FieldType, Query, Registry, Row, Timestamp, Value,
};

use crate::error::TrainingError;
use crate::history::Answer;

/// An on-demand argument a row may give (by a column of the entity file).
#[derive(Debug, Clone)]
pub struct ArgInput {
    /// The on-demand feature.
    pub feature: String,
    /// The argument.
    pub arg: String,
    /// Its type.
    pub ty: FieldType,
}

/// One output column of a target: the entity column it holds.
#[derive(Debug, Clone)]
pub struct OutColumn {
    /// The column's index in the target's records.
    pub index: usize,
    /// `<feature>__<field>`.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
}

/// A requested feature and its output columns.
#[derive(Debug, Clone)]
pub struct TargetColumns {
    /// The feature.
    pub feature: FeatureId,
    /// Its name.
    pub name: String,
    /// Its record's fields other than the entity's keys, in entity order.
    pub columns: Vec<OutColumn>,
}

/// A target's status in one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Computed (or read).
    Present,
    /// An input had no record at the row's time (or the feature itself had none).
    Missing,
    /// The pipeline feature's key had expired (its `ttl_s` had passed since its
    /// last record) at the row's time.
    Expired,
    /// The UDF failed, or one it depends on did: why.
    Error(String),
}

impl Status {
    /// The status column's text: `present`, `missing`, `expired`, `error: why`.
    pub fn text(&self) -> String {
        match self {
            Self::Present => "present".to_owned(),
            Self::Missing => "missing".to_owned(),
            Self::Expired => "expired".to_owned(),
            Self::Error(why) => format!("error: {why}"),
        }
    }
}

/// Why a row could not be computed at all.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// The planner refused the row's request (the spec needs what a training
    /// set does not give, such as a `last_n` without `n`).
    #[error("{0}")]
    Request(String),
    /// The reads did not fit the request (a bug).
    #[error("{0}")]
    Execute(oka_core::execute::ExecuteError),
}

/// A row's prepared request and what its reads answered.
#[derive(Debug)]
struct ReadRow {
    prepared: oka_core::request::Prepared,
    fetched: Fetched,
    /// Pipeline features whose key had expired at the row's time.
    expired: HashSet<FeatureId>,
}

/// One pipeline read of a row: the feature, the key and the query.
pub type Read = (FeatureId, EntityKey, Query);

/// One row's results: per target, in target order, its status and record.
pub type RowResult = Vec<(Status, Option<Row>)>;

/// One row's inputs: the key fields' values (parallel to [`Job::keys`]), its
/// time, and the on-demand arguments (parallel to [`Job::args`]; `Null` takes
/// the spec's default).
#[derive(Debug)]
pub struct RowInput<'a> {
    /// Key values.
    pub keys: &'a [Value],
    /// The row's time: the request's `now`.
    pub time: Timestamp,
    /// Argument values.
    pub args: &'a [Value],
}

/// A training set's features: the targets and everything their rows must give.
#[derive(Debug)]
pub struct Job<'r> {
    registry: &'r Registry,
    names: Vec<String>,
    /// The targets, in request order.
    pub targets: Vec<TargetColumns>,
    /// Key fields the rows give (every entity the targets read or return).
    pub keys: Vec<Column>,
    /// On-demand arguments a row may give.
    pub args: Vec<ArgInput>,
    /// The pipeline features the targets read, with the targets that read them.
    pub reads: Vec<(FeatureId, Vec<String>)>,
}

impl<'r> Job<'r> {
    /// The job for `features` (all of the spec's when `None`).
    pub fn new(registry: &'r Registry, features: Option<&[String]>) -> Result<Self, TrainingError> {
        let names: Vec<String> = match features {
            Some(f) => f.to_vec(),
            None => registry
                .features()
                .iter()
                .map(|f| f.name.to_string())
                .collect(),
        };
        let mut ids = Vec::new();
        for name in &names {
            let id = registry
                .feature_id(name)
                .ok_or_else(|| TrainingError::UnknownFeature {
                    name: name.clone(),
                    known: registry
                        .features()
                        .iter()
                        .map(|f| &*f.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let names = ids
            .iter()
            .map(|&id| registry.feature(id).name.to_string())
            .collect();
        let targets = ids.iter().map(|&id| target_columns(registry, id)).collect();
        let mut job = Self {
            registry,
            names,
            targets,
            keys: Vec::new(),
            args: Vec::new(),
            reads: Vec::new(),
        };
        for &id in &ids {
            job.add_closure(id);
        }
        Ok(job)
    }

    /// Adds what target `id` reads, returns and takes as arguments.
    fn add_closure(&mut self, id: FeatureId) {
        let plan = self.registry.plan(&[id]);
        let target = &self.registry.feature(id).name;
        let features = plan
            .slots
            .iter()
            .map(|s| s.feature)
            .chain(plan.steps.iter().map(|s| s.feature));
        for f in features {
            let feature = self.registry.feature(f);
            for key in feature.entity.keys() {
                if !self.keys.iter().any(|k| k.name == key.name) {
                    self.keys.push(key.clone());
                }
            }
            if let FeatureKind::OnDemand { args, .. } = &feature.kind {
                for a in args {
                    if !self
                        .args
                        .iter()
                        .any(|x| *x.feature == *feature.name && *x.arg == *a.name)
                    {
                        self.args.push(ArgInput {
                            feature: feature.name.to_string(),
                            arg: a.name.to_string(),
                            ty: a.ty.clone(),
                        });
                    }
                }
            }
        }
        for slot in &plan.slots {
            match self.reads.iter_mut().find(|(f, _)| *f == slot.feature) {
                Some((_, by)) if by.iter().any(|b| b == &**target) => {}
                Some((_, by)) => by.push(target.to_string()),
                None => self.reads.push((slot.feature, vec![target.to_string()])),
            }
        }
    }

    /// Computes one row: the targets' records and statuses, in target order.
    /// `read` answers a pipeline read as of the row's time. `Err` is a request
    /// the planner refuses (the row's message).
    pub fn compute(
        &self,
        row: &RowInput<'_>,
        read: &mut dyn FnMut(FeatureId, &EntityKey, &Query) -> Answer,
    ) -> Result<RowResult, RowError> {
        let mut all = self.compute_rows(std::slice::from_ref(row), &mut |_, f, k, q| read(f, k, q));
        all.pop()
            .unwrap_or(Err(RowError::Request("no row".to_owned())))
    }

    /// Computes many rows together, as [`Self::compute`] computes one; `read`
    /// gets the row's index too. Their UDFs run elsewhere (Python) are sent
    /// for every row before any is waited for, so the pool runs them in
    /// batches of many rows.
    pub fn compute_rows(
        &self,
        rows: &[RowInput<'_>],
        read: &mut dyn FnMut(usize, FeatureId, &EntityKey, &Query) -> Answer,
    ) -> Vec<Result<RowResult, RowError>> {
        let read_rows: Vec<Result<ReadRow, RowError>> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| self.read_row(row, &mut |f, k, q| read(i, f, k, q)))
            .collect();
        let read: Vec<_> = (read_rows.iter())
            .map(|r| r.as_ref().ok().map(|r| (&r.prepared, &r.fetched)))
            .collect();
        let outputs = crate::together::execute_all(self.registry, &read);
        read_rows
            .into_iter()
            .zip(outputs)
            .map(|(r, out)| {
                let r = r?;
                let outputs = out.map_err(RowError::Execute)?;
                Ok(self.row_result(&r, &outputs))
            })
            .collect()
    }

    /// A row's request prepared, and its reads answered.
    fn read_row(
        &self,
        row: &RowInput<'_>,
        read: &mut dyn FnMut(FeatureId, &EntityKey, &Query) -> Answer,
    ) -> Result<ReadRow, RowError> {
        let prepared = self.prepare(row)?;
        let mut expired: HashSet<FeatureId> = HashSet::new();
        let fetched = Fetched::read_all(&prepared, |fetch| {
            fetch
                .keys
                .iter()
                .map(|key| {
                    let answer = read(fetch.feature, key, &fetch.query);
                    if answer.expired {
                        expired.insert(fetch.feature);
                    }
                    answer.rows
                })
                .collect::<oka_core::KeyedRows>()
        })
        .map_err(RowError::Execute)?;
        Ok(ReadRow {
            prepared,
            fetched,
            expired,
        })
    }

    /// A row's targets from its outputs.
    fn row_result(&self, r: &ReadRow, outputs: &Outputs) -> RowResult {
        let failures: Vec<(FeatureId, String)> = outputs
            .failures()
            .map(|f| (f.feature, f.error.to_string()))
            .collect();
        r.prepared
            .targets
            .iter()
            .map(|t| {
                let outcome = outputs.of(t).first().unwrap_or(&Outcome::Missing);
                self.status(t.feature, outcome, &r.expired, &failures)
            })
            .collect()
    }

    /// The reads one row's request makes, in the order [`Self::compute`] asks
    /// for them: per read, its pipeline feature, key and query.
    pub fn fetches(
        &self,
        row: &RowInput<'_>,
    ) -> Result<Vec<(FeatureId, EntityKey, Query)>, RowError> {
        let prepared = self.prepare(row)?;
        Ok(prepared
            .fetches()
            .flat_map(|(_, f)| f.keys.iter().map(move |k| (f.feature, k.clone(), f.query)))
            .collect())
    }

    fn prepare(&self, row: &RowInput<'_>) -> Result<oka_core::request::Prepared, RowError> {
        let request = self.request(row);
        self.registry
            .prepare_with(&request, row.time, &RequestLimits::default())
            .map_err(|e| RowError::Request(e.message))
    }

    /// The request a model server would have sent for this row.
    fn request(&self, row: &RowInput<'_>) -> FeatureRequest {
        let mut keys = KeyList::new();
        keys.push(
            self.keys
                .iter()
                .zip(row.keys)
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (&*k.name, KeyValue::from(v.to_json()))),
        );
        let mut by_feature: Vec<(String, Vec<(String, serde_json::Value)>)> = Vec::new();
        for (a, v) in self.args.iter().zip(row.args).filter(|(_, v)| !v.is_null()) {
            match by_feature.iter_mut().find(|(f, _)| *f == a.feature) {
                Some((_, args)) => args.push((a.arg.clone(), v.to_json())),
                None => by_feature.push((a.feature.clone(), vec![(a.arg.clone(), v.to_json())])),
            }
        }
        let udf_args = (!by_feature.is_empty()).then(|| {
            by_feature
                .into_iter()
                .map(|(f, args)| (f, Some(args.into_iter().collect::<ArgMap>())))
                .collect()
        });
        FeatureRequest {
            target_features: self.names.clone(),
            keys: Some(keys),
            udf_args,
            ..FeatureRequest::default()
        }
    }

    fn status(
        &self,
        feature: FeatureId,
        outcome: &Outcome,
        expired: &HashSet<FeatureId>,
        failures: &[(FeatureId, String)],
    ) -> (Status, Option<Row>) {
        match outcome {
            Outcome::Present(rows) if rows.len() > 1 => (
                Status::Error(format!(
                    "{} records; a training set holds one record per feature",
                    rows.len()
                )),
                None,
            ),
            Outcome::Present(rows) => (Status::Present, rows.first().cloned()),
            Outcome::Missing if expired.contains(&feature) => (Status::Expired, None),
            Outcome::Missing => (Status::Missing, None),
            Outcome::Error(_) => {
                let why = match failures.iter().find(|(f, _)| *f == feature) {
                    Some((_, why)) => why.clone(),
                    None => match failures.first() {
                        Some((f, why)) => format!(
                            "`{}`, which it depends on, failed: {why}",
                            self.registry.feature(*f).name
                        ),
                        None => "a feature it depends on failed".to_owned(),
                    },
                };
                (Status::Error(why), None)
            }
        }
    }
}

/// A target's output columns: its record's fields other than the keys.
fn target_columns(registry: &Registry, id: FeatureId) -> TargetColumns {
    let feature = registry.feature(id);
    let keys: Vec<usize> = feature.entity.key_columns().collect();
    let columns = (feature.entity.columns.iter().enumerate())
        .filter(|(i, _)| !keys.contains(i))
        .map(|(i, c)| OutColumn {
            index: i,
            name: format!("{}__{}", feature.name, c.name),
            ty: c.ty.clone(),
        })
        .collect();
    TargetColumns {
        feature: id,
        name: feature.name.to_string(),
        columns,
    }
}
