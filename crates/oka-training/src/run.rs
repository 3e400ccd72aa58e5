//! `oka training-set` from end to end: check the inputs, load the history,
//! then read the entity file batch by batch, compute each row, write it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use oka_core::{FeatureId, Registry};

use crate::compute;
use crate::entities::{EntityBatch, EntityReader};
use crate::error::TrainingError;
use crate::history::{self, Budget, FeatureHistory};
use crate::inputs;
use crate::job::{Job, RowResult, Status};
use crate::output::{self, Output};
use crate::spill::{self, SpillInputs, Spilled};

/// What to make.
#[derive(Debug, Clone)]
pub struct Options {
    /// The entity file (Parquet or CSV).
    pub entities: PathBuf,
    /// `FEATURE=PATH` pairs: each pipeline feature's history files (globs).
    pub history: Vec<(String, String)>,
    /// The output Parquet file.
    pub out: PathBuf,
    /// The features to compute (all of the spec's when `None`).
    pub features: Option<Vec<String>>,
    /// The entity file's time column.
    pub time_column: String,
    /// The most memory the history may take, in bytes.
    pub memory_budget: u64,
}

/// Where a run is, for a progress line.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Reading history: records so far.
    History {
        /// Records read.
        records: u64,
    },
    /// The history passes the memory budget: it is being spilled to disk.
    Spilling,
    /// Computing: rows done of the total (when known).
    Rows {
        /// Rows done.
        done: u64,
        /// Rows in the entity file, when known.
        total: Option<u64>,
        /// Time since the first row.
        elapsed: Duration,
    },
}

/// What a run made.
#[derive(Debug, Default)]
pub struct Summary {
    /// Rows written.
    pub rows: u64,
    /// Per target: its name and how many rows had each status (`error` counted
    /// as one).
    pub statuses: Vec<(String, HashMap<&'static str, u64>)>,
    /// History records read.
    pub history_records: u64,
    /// When the history was spilled to disk: per feature, the parts it was
    /// split into by key.
    pub spilled: Vec<(String, usize)>,
}

/// Makes the training set `options` describe from `registry`'s features.
/// `stop` (set by Ctrl-C) ends it with [`TrainingError::Interrupted`] and no
/// output; `progress` hears of it every so often.
pub fn run(
    registry: &Registry,
    options: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, TrainingError> {
    let job = Job::new(registry, options.features.as_deref())?;
    let files = history_files(registry, &job, &options.history)?;
    // The entity file is checked before any history is read.
    let mut entities = EntityReader::open(&options.entities, &job, &options.time_column)?;
    let schema = output::schema(entities.schema(), &job)?;
    let mut source = load(registry, &job, &files, options, stop, progress)?;
    let mut out = Output::create(&options.out, schema)?;
    let mut summary = Summary {
        statuses: job
            .targets
            .iter()
            .map(|t| (t.name.clone(), HashMap::new()))
            .collect(),
        history_records: source.records(),
        spilled: match &source {
            Source::Memory { .. } => Vec::new(),
            Source::Spilled(s) => s.parts.clone(),
        },
        ..Summary::default()
    };
    let started = Instant::now();
    while let Some(batch) = entities.next_batch(&job)? {
        if stop.load(Ordering::Relaxed) {
            return Err(TrainingError::Interrupted { rows: summary.rows });
        }
        let results = source.compute(&job, &batch, &options.entities)?;
        count(&mut summary, &results);
        out.write(&job, &batch.batch, &results)?;
        summary.rows += batch.times.len() as u64;
        progress(Progress::Rows {
            done: summary.rows,
            total: entities.total_rows,
            elapsed: started.elapsed(),
        });
    }
    out.finish()?;
    Ok(summary)
}

/// Where the rows' reads are answered from.
enum Source<'r> {
    /// Every history held in memory.
    Memory {
        histories: Vec<FeatureHistory>,
        records: u64,
    },
    /// Answered on disk, the history partitioned by key ([`spill`]).
    Spilled(Spilled<'r>),
}

impl Source<'_> {
    fn records(&self) -> u64 {
        match self {
            Self::Memory { records, .. } => *records,
            Self::Spilled(s) => s.records,
        }
    }

    fn compute(
        &mut self,
        job: &Job<'_>,
        batch: &EntityBatch,
        file: &Path,
    ) -> Result<Vec<RowResult>, TrainingError> {
        match self {
            Self::Memory { histories, .. } => {
                compute::compute_batch(job, histories.as_slice(), batch, file)
            }
            Self::Spilled(s) => {
                let reads = s.reads(batch.first_row - 1, batch.times.len())?;
                let results = compute::compute_batch(job, &reads, batch, file)?;
                reads.check(file)?;
                Ok(results)
            }
        }
    }
}

/// Holds every history in memory when it fits the budget; else spills.
fn load<'r>(
    registry: &'r Registry,
    job: &Job<'_>,
    files: &[(FeatureId, Vec<PathBuf>)],
    options: &Options,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Source<'r>, TrainingError> {
    let spilled = |progress: &mut dyn FnMut(Progress)| {
        progress(Progress::Spilling);
        let inputs = SpillInputs {
            entities: &options.entities,
            time_column: &options.time_column,
            out: &options.out,
            budget: options.memory_budget,
        };
        Ok(Source::Spilled(spill::prepare(
            registry, job, files, &inputs, stop,
        )?))
    };
    // Files far larger than the budget are not tried in memory first.
    let all: Vec<PathBuf> = files.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
    if spill::estimate(&all)? > options.memory_budget {
        return spilled(progress);
    }
    let mut budget = Budget::new(options.memory_budget);
    let mut histories: Vec<FeatureHistory> = Vec::new();
    for (id, paths) in files {
        let feature = registry.feature(*id);
        let mut h = FeatureHistory::new(*id, feature);
        match history::load(&mut h, feature, paths, &mut budget, stop) {
            Ok(()) => {}
            Err(TrainingError::OverBudget { .. }) => {
                drop((h, histories));
                return spilled(progress);
            }
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Relaxed) {
            return Err(TrainingError::Interrupted { rows: 0 });
        }
        histories.push(h);
        progress(Progress::History {
            records: budget.records(),
        });
    }
    Ok(Source::Memory {
        histories,
        records: budget.records(),
    })
}

/// Each pipeline feature the job reads, with its history files.
fn history_files(
    registry: &Registry,
    job: &Job<'_>,
    given: &[(String, String)],
) -> Result<Vec<(FeatureId, Vec<PathBuf>)>, TrainingError> {
    let mut by_feature: Vec<(FeatureId, Vec<PathBuf>)> = Vec::new();
    for (name, pattern) in given {
        let bad = |why: &str| TrainingError::BadHistoryFeature {
            name: name.clone(),
            why: why.to_owned(),
        };
        let id = registry
            .feature_id(name)
            .ok_or_else(|| bad("the spec has no such feature"))?;
        if !registry.feature(id).is_pipeline() {
            return Err(bad(
                "an on-demand feature has no history; give its pipeline inputs' history",
            ));
        }
        let paths = inputs::expand(pattern)?;
        match by_feature.iter_mut().find(|(f, _)| *f == id) {
            Some((_, p)) => p.extend(paths),
            None => by_feature.push((id, paths)),
        }
    }
    let mut files = Vec::new();
    for (id, readers) in &job.reads {
        match by_feature.iter().find(|(f, _)| f == id) {
            Some((_, paths)) => files.push((*id, paths.clone())),
            None => {
                return Err(TrainingError::NoHistory {
                    feature: registry.feature(*id).name.to_string(),
                    readers: readers
                        .iter()
                        .map(|r| format!("`{r}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
    }
    Ok(files)
}

fn count(summary: &mut Summary, results: &[RowResult]) {
    for row in results {
        for ((_, counts), (status, _)) in summary.statuses.iter_mut().zip(row) {
            let name = match status {
                Status::Present => "present",
                Status::Missing => "missing",
                Status::Expired => "expired",
                Status::Error(_) => "error",
            };
            *counts.entry(name).or_default() += 1;
        }
    }
}
