//! The engine for callers who join the pipeline features themselves (the
//! Python package `oka-engine`, pandas, polars, Spark's `mapInArrow`): a table
//! holding each row's keys, time, arguments and its pipeline features' latest
//! records (`<feature>__<field>` columns, as `oka training-set` writes them) in,
//! the on-demand features out — computed by the same [`Job::compute`] as
//! `oka training-set`'s last step.
//!
//! A pipeline record is read from its row: present when `<feature>__status`
//! says `present` (when that column is given), else when `<feature>__<timestamp>`
//! is not null (when given), else when any of its fields is not null. Its event
//! time is `<feature>__<timestamp>`, or the row's time. Windows (`range`,
//! `last_n`) need a history and are refused: `oka training-set` computes them.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Schema, SchemaRef};
use oka_core::plan::SlotQuery;
use oka_core::registry::QueryKind;
use oka_core::{EntityKey, FeatureId, NativeUdfs, Query, Registry, Row, Timestamp, Value};

use crate::compute::{self, Reads};
use crate::convert;
use crate::entities::{EntityBatch, Layout};
use crate::error::TrainingError;
use crate::history::Answer;
use crate::job::Job;
use crate::output;

/// The place named in messages about the input table.
const INPUT: &str = "the input table";

/// A spec loaded once, computing batches.
#[derive(Debug)]
pub struct Engine {
    registry: Registry,
}

/// What to compute.
#[derive(Debug, Clone, Default)]
pub struct Compute {
    /// The features (default: every on-demand feature of the spec).
    pub features: Option<Vec<String>>,
    /// The column of each row's time (`now`).
    pub time_column: String,
    /// Arguments for every row, per feature (a column of the table wins).
    pub args: Vec<(String, String, serde_json::Value)>,
}

/// Why a spec cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[error("invalid spec:\n{0}")]
pub struct SpecRefused(oka_core::SpecErrors);

impl Engine {
    /// Loads a spec (YAML text); native UDFs are not available here, nor
    /// Python ones (they load, and answer that they do not run here).
    pub fn new(spec_yaml: &str) -> Result<Self, SpecRefused> {
        let registry =
            Registry::from_yaml("spec", spec_yaml, &NativeUdfs::new()).map_err(SpecRefused)?;
        Ok(Self { registry })
    }

    /// Loads a spec (YAML text) whose Python UDFs `python` runs; `origin` is
    /// the spec's path (their files are relative to its folder).
    pub fn with_python(
        origin: &str,
        spec_yaml: &str,
        python: &dyn oka_core::batch::PythonUdfs,
    ) -> Result<Self, SpecRefused> {
        let natives = NativeUdfs::new();
        let runtimes = oka_core::loader::UdfRuntimes {
            natives: &natives,
            python: Some(python),
        };
        let registry =
            Registry::from_yaml_with(origin, spec_yaml, runtimes).map_err(SpecRefused)?;
        Ok(Self { registry })
    }

    fn job(&self, compute: &Compute) -> Result<Job<'_>, TrainingError> {
        let features = compute.features.clone().unwrap_or_else(|| {
            (self.registry.features().iter())
                .filter(|f| !f.is_pipeline())
                .map(|f| f.name.to_string())
                .collect()
        });
        let job = Job::new(&self.registry, Some(&features))?;
        for t in &job.targets {
            let plan = self.registry.plan(&[t.feature]);
            for slot in &plan.slots {
                if !matches!(
                    slot.query,
                    SlotQuery::Direct | SlotQuery::Dependency(QueryKind::Latest)
                ) {
                    return Err(TrainingError::BadHistoryFeature {
                        name: self.registry.feature(slot.feature).name.to_string(),
                        why: format!(
                            "`{}` reads a window of it, which needs its history: make it with `oka training-set`",
                            t.name
                        ),
                    });
                }
            }
        }
        Ok(job)
    }

    /// The schema of [`Self::compute`]'s answer to a table of `input`'s schema.
    pub fn output_schema(
        &self,
        input: &Schema,
        compute: &Compute,
    ) -> Result<SchemaRef, TrainingError> {
        output::schema(input, &self.job(compute)?)
    }

    /// The table's rows with the features' columns appended.
    pub fn compute(
        &self,
        batch: RecordBatch,
        compute: &Compute,
    ) -> Result<RecordBatch, TrainingError> {
        let job = self.job(compute)?;
        let input = Path::new(INPUT);
        let schema = output::schema(batch.schema_ref(), &job)?;
        let layout = Layout::find(batch.schema_ref(), &job, &compute.time_column, input)?;
        let reads = RowReads::new(&self.registry, &job, &batch)?;
        let mut rows = layout.convert(batch, &job, input, 1)?;
        fill_args(&job, &compute.args, &mut rows)?;
        let results = compute::compute_batch(&job, &reads, &rows, input)?;
        let mut columns: Vec<ArrayRef> = rows.batch.columns().to_vec();
        columns.extend(output::result_columns(&job, &results));
        RecordBatch::try_new(schema, columns).map_err(|e| TrainingError::io(input, e))
    }
}

/// Fills arguments that no column gave from `given`.
fn fill_args(
    job: &Job<'_>,
    given: &[(String, String, serde_json::Value)],
    rows: &mut EntityBatch,
) -> Result<(), TrainingError> {
    for (feature, arg, value) in given {
        let Some(i) = job
            .args
            .iter()
            .position(|a| a.feature == *feature && a.arg == *arg)
        else {
            return Err(TrainingError::Input {
                path: format!("args[{feature}][{arg}]"),
                why: "no requested feature takes this argument".to_owned(),
            });
        };
        let v = job.args[i]
            .ty
            .from_json(value)
            .map_err(|e| TrainingError::Input {
                path: format!("args[{feature}][{arg}]"),
                why: e.to_string(),
            })?;
        for slot in rows.args[i].iter_mut().filter(|s| s.is_null()) {
            *slot = v.clone();
        }
    }
    Ok(())
}

/// A pipeline feature's columns in the table.
struct FeatureColumns {
    feature: FeatureId,
    /// Per entity column: its values (keys from the key columns).
    columns: Vec<Vec<Value>>,
    timestamp: usize,
    has_time: bool,
    status: Option<Vec<Value>>,
}

/// Pipeline reads answered from each row's own columns.
struct RowReads {
    features: Vec<FeatureColumns>,
}

impl RowReads {
    fn new(registry: &Registry, job: &Job<'_>, batch: &RecordBatch) -> Result<Self, TrainingError> {
        let mut features = Vec::new();
        for (id, _) in &job.reads {
            let feature = registry.feature(*id);
            let entity = &feature.entity;
            let mut columns = Vec::with_capacity(entity.columns.len());
            let mut has_time = false;
            for (i, c) in entity.columns.iter().enumerate() {
                let name = if entity.key_index.contains(&i) {
                    c.name.to_string()
                } else {
                    format!("{}__{}", feature.name, c.name)
                };
                let values = match batch.column_by_name(&name) {
                    Some(a) => {
                        convert::values(a, &c.ty).map_err(|why| column(&name, why.to_string()))?
                    }
                    None if i == entity.timestamp_index => vec![Value::Null; batch.num_rows()],
                    None => {
                        return Err(column(
                            &name,
                            format!(
                                "missing: field `{}` of pipeline feature `{}`, read by the features",
                                c.name, feature.name
                            ),
                        ));
                    }
                };
                has_time |= i == entity.timestamp_index && batch.column_by_name(&name).is_some();
                columns.push(values);
            }
            let status_name = format!("{}__status", feature.name);
            let status = match batch.column_by_name(&status_name) {
                Some(a) => Some(
                    convert::values(a, &oka_core::FieldType::String)
                        .map_err(|why| column(&status_name, why.to_string()))?,
                ),
                None => None,
            };
            features.push(FeatureColumns {
                feature: *id,
                columns,
                timestamp: entity.timestamp_index,
                has_time,
                status,
            });
        }
        Ok(Self { features })
    }
}

fn column(name: &str, why: String) -> TrainingError {
    TrainingError::Column {
        file: INPUT.into(),
        column: name.to_owned(),
        why,
    }
}

impl Reads for RowReads {
    fn answer(
        &self,
        row: usize,
        feature: FeatureId,
        _key: &EntityKey,
        t: Timestamp,
        _query: &Query,
    ) -> Answer {
        let mut answer = Answer {
            rows: Vec::new(),
            expired: false,
        };
        let Some(f) = self.features.iter().find(|f| f.feature == feature) else {
            return answer;
        };
        let present = match &f.status {
            Some(s) => matches!(&s[row], Value::String(s) if &**s == "present"),
            None if f.has_time => !f.columns[f.timestamp][row].is_null(),
            None => {
                (f.columns.iter().enumerate()).any(|(i, c)| i != f.timestamp && !c[row].is_null())
            }
        };
        if present {
            let mut values: Vec<Value> = f.columns.iter().map(|c| c[row].clone()).collect();
            let time = match values[f.timestamp] {
                Value::Timestamp(ts) => ts,
                _ => t,
            };
            values[f.timestamp] = Value::Timestamp(time);
            answer
                .rows
                .push(Row::new(time, Arc::<[Value]>::from(values)));
        }
        answer
    }
}
