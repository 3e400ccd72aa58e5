//! Training sets whose history does not fit `--memory-budget-mib`: each
//! pipeline feature's history is partitioned by key onto disk and joined with
//! the rows' reads one partition at a time, so memory holds one partition's
//! history (at most [`history::held_limit`] of the budget) whatever the
//! history's size, and the answers
//! are those of the in-memory run (the same [`FeatureHistory`] rules per key).
//!
//! 1. Each feature's history is split into parts by a hash of the key, in
//!    input order (equal event times keep their file order). The number of
//!    parts is chosen from the files' sizes, and raised (the history split
//!    again) until each part's history fits.
//! 2. The entity file is read once: each row's request is prepared as
//!    [`Job::compute`] prepares it (on every core), and each read (row, time, query, key) is
//!    appended to its feature's request file, in row order.
//! 3. Per feature: the requests are split by the same hash; per part, its
//!    history is loaded and each request answered, in row order; the parts'
//!    answers are merged by row into one file.
//! 4. The entity file is read again, batch by batch, each batch's answers read
//!    from the features' answer files ([`Spilled::reads`]) and its rows
//!    computed as in memory.
//!
//! The files are in a directory beside the output, removed when the run ends,
//! complete, failed or interrupted. Disk: about the history's size, plus each
//! read's answer (a window's records per row).

mod records;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use oka_core::{Entity, EntityKey, Feature, FeatureId, Query, Registry, Timestamp, Value};

use self::records::{Fields, In, Out, Request};
use crate::compute::{self, Reads};
use crate::entities::{EntityBatch, EntityReader};
use crate::error::TrainingError;
use crate::history::{self, Answer, FeatureHistory};
use crate::inputs::Format;
use crate::job::{Job, Read, RowInput};

/// The fewest and most parts a history is split into (the most bounds the
/// files open at once).
const MIN_PARTS: usize = 4;
const MAX_PARTS: usize = 512;

/// The spill directory, removed when dropped.
#[derive(Debug)]
struct SpillDir {
    path: PathBuf,
}

impl SpillDir {
    /// `.<output name>.spill-<pid>` beside the output.
    fn create(out: &Path) -> Result<Self, TrainingError> {
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
        let name = out
            .file_name()
            .map_or_else(|| "out".into(), |n| n.to_string_lossy());
        let path = parent
            .unwrap_or(Path::new("."))
            .join(format!(".{name}.spill-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(|e| TrainingError::os(&path, &e))?;
        Ok(Self { path })
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Where the history of one feature went.
#[derive(Debug)]
struct HistoryParts {
    files: Vec<PathBuf>,
    records: u64,
}

/// The answers to every row's reads, on disk, read back batch by batch.
#[derive(Debug)]
pub struct Spilled<'r> {
    answers: Vec<AnswerFile<'r>>,
    /// Per feature read: its name and the parts its history was split into.
    pub parts: Vec<(String, usize)>,
    /// History records read.
    pub records: u64,
    dir: SpillDir,
}

#[derive(Debug)]
struct AnswerFile<'r> {
    feature: FeatureId,
    entity: &'r Entity,
    input: In,
    path: PathBuf,
    /// A record read ahead (it belongs to a later batch).
    pending: Option<Vec<u8>>,
}

/// What the spill needs of the run.
#[derive(Debug)]
pub struct SpillInputs<'a> {
    /// The entity file and its time column.
    pub entities: &'a Path,
    pub time_column: &'a str,
    /// The output (the spill directory goes beside it).
    pub out: &'a Path,
    /// The most history memory may hold, in bytes.
    pub budget: u64,
}

/// Steps 1–3: the history partitioned, the reads written and answered.
pub fn prepare<'r>(
    registry: &'r Registry,
    job: &Job<'_>,
    files: &[(FeatureId, Vec<PathBuf>)],
    inputs: &SpillInputs<'_>,
    stop: &AtomicBool,
) -> Result<Spilled<'r>, TrainingError> {
    let dir = SpillDir::create(inputs.out)?;
    let mut histories = Vec::new();
    for (i, (id, paths)) in files.iter().enumerate() {
        let feature = registry.feature(*id);
        histories.push(partition_history(
            feature,
            i,
            paths,
            &dir,
            inputs.budget,
            stop,
        )?);
        interrupted(stop)?;
    }
    let requests = write_requests(job, files, inputs, &dir, stop)?;
    let mut answers = Vec::new();
    let mut parts = Vec::new();
    for (i, ((id, _), (history, requests))) in
        files.iter().zip(histories.iter().zip(requests)).enumerate()
    {
        let feature = registry.feature(*id);
        let path = answer_feature(feature, i, history, &requests, &dir, stop)?;
        parts.push((feature.name.to_string(), history.files.len()));
        answers.push(AnswerFile {
            feature: *id,
            entity: &feature.entity,
            input: In::open(&path)?,
            path,
            pending: None,
        });
    }
    Ok(Spilled {
        answers,
        parts,
        records: histories.iter().map(|h| h.records).sum(),
        dir,
    })
}

fn interrupted(stop: &AtomicBool) -> Result<(), TrainingError> {
    match stop.load(Ordering::Relaxed) {
        true => Err(TrainingError::Interrupted { rows: 0 }),
        false => Ok(()),
    }
}

fn part_of(key: &EntityKey, parts: usize) -> usize {
    let mut h = DefaultHasher::new();
    key.as_str().hash(&mut h);
    (h.finish() % parts as u64) as usize
}

/// Parts for `bytes` of held history: each part at most half what the
/// budget may hold, so that an uneven split still fits.
fn parts_for(bytes: u64, budget: u64) -> usize {
    let parts = (bytes.saturating_mul(2)).div_ceil(history::held_limit(budget).max(1));
    usize::try_from(parts)
        .unwrap_or(MAX_PARTS)
        .min(MAX_PARTS)
        .next_power_of_two()
        .clamp(MIN_PARTS, MAX_PARTS)
}

/// About how much memory `files` take when held (Parquet is compressed).
pub fn estimate(files: &[PathBuf]) -> Result<u64, TrainingError> {
    let mut bytes = 0u64;
    for f in files {
        let len = std::fs::metadata(f)
            .map_err(|e| TrainingError::os(f, &e))?
            .len();
        let factor = match Format::of(f)? {
            Format::Parquet => 8,
            Format::Csv | Format::JsonLines => 2,
        };
        bytes = bytes.saturating_add(len.saturating_mul(factor));
    }
    Ok(bytes)
}

/// Step 1 for one feature: its history split into parts that each fit the budget.
fn partition_history(
    feature: &Feature,
    index: usize,
    paths: &[PathBuf],
    dir: &SpillDir,
    budget: u64,
    stop: &AtomicBool,
) -> Result<HistoryParts, TrainingError> {
    let mut parts = parts_for(estimate(paths)?, budget);
    loop {
        let (split, sizes) = split_history(feature, index, paths, dir, parts, stop)?;
        let largest = sizes.iter().copied().max().unwrap_or(0);
        if largest <= history::held_limit(budget) {
            return Ok(split);
        }
        let needed = parts_for(sizes.iter().sum(), budget);
        if needed <= parts {
            return Err(TrainingError::PartOverBudget {
                feature: feature.name.to_string(),
                part_mib: largest >> 20,
                parts,
                budget_mib: budget >> 20,
            });
        }
        parts = needed;
    }
}

/// Writes `feature`'s history into `parts` files by key; with each part's held size.
fn split_history(
    feature: &Feature,
    index: usize,
    paths: &[PathBuf],
    dir: &SpillDir,
    parts: usize,
    stop: &AtomicBool,
) -> Result<(HistoryParts, Vec<u64>), TrainingError> {
    let mut outs = (0..parts)
        .map(|p| Out::create(dir.file(&format!("f{index}-history-{p}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sizes = vec![0u64; parts];
    let mut records = 0u64;
    let mut payload = Vec::new();
    history::read(feature, paths, stop, &mut |key, row, _file| {
        let p = part_of(&key, parts);
        sizes[p] += history::held_size(&key, &row) as u64;
        records += 1;
        records::put_history(&mut payload, &feature.entity, &key, &row);
        outs[p].record(&payload)
    })?;
    interrupted(stop)?;
    let files = outs
        .into_iter()
        .map(Out::finish)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((HistoryParts { files, records }, sizes))
}

/// Step 2: every row's reads, per feature (parallel to `files`), in row order.
fn write_requests(
    job: &Job<'_>,
    files: &[(FeatureId, Vec<PathBuf>)],
    inputs: &SpillInputs<'_>,
    dir: &SpillDir,
    stop: &AtomicBool,
) -> Result<Vec<PathBuf>, TrainingError> {
    let mut outs = (0..files.len())
        .map(|i| Out::create(dir.file(&format!("f{i}-requests"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut reader = EntityReader::open(inputs.entities, job, inputs.time_column)?;
    let mut payload = Vec::new();
    let mut row = 0u64;
    while let Some(batch) = reader.next_batch(job)? {
        interrupted(stop)?;
        let reads = compute::par_rows(batch.times.len(), inputs.entities, |rows| {
            row_reads(job, &batch, rows, inputs.entities)
        })?;
        for (i, fetches) in reads.into_iter().enumerate() {
            let time = batch.times[i];
            for (feature, key, query) in fetches {
                let Some(f) = files.iter().position(|(id, _)| *id == feature) else {
                    return Err(unanswered(inputs.entities, row));
                };
                records::put_request(
                    &mut payload,
                    &Request {
                        row,
                        time,
                        query,
                        key,
                    },
                );
                outs[f].record(&payload)?;
            }
            row += 1;
        }
    }
    outs.into_iter().map(Out::finish).collect()
}

/// The reads of `rows` of `batch`, each as [`Job::compute`] would make them.
fn row_reads(
    job: &Job<'_>,
    batch: &EntityBatch,
    rows: std::ops::Range<usize>,
    file: &Path,
) -> Result<Vec<Vec<Read>>, TrainingError> {
    let (mut keys, mut args): (Vec<Value>, Vec<Value>) = Default::default();
    rows.map(|i| {
        compute::row_values(batch, i, &mut keys, &mut args);
        let input = RowInput {
            keys: &keys,
            time: batch.times[i],
            args: &args,
        };
        job.fetches(&input).map_err(|why| TrainingError::Request {
            file: file.to_owned(),
            row: batch.first_row + i as u64,
            why: why.to_string(),
        })
    })
    .collect()
}

fn unanswered(file: &Path, row: u64) -> TrainingError {
    TrainingError::io(
        file,
        format!(
            "row {}: a read has no answer in the spill files (a bug in oka training-set: please report it)",
            row + 1
        ),
    )
}

/// Step 3 for one feature: its requests answered, part by part, merged by row.
fn answer_feature(
    feature: &Feature,
    index: usize,
    history: &HistoryParts,
    requests: &Path,
    dir: &SpillDir,
    stop: &AtomicBool,
) -> Result<PathBuf, TrainingError> {
    let parts = history.files.len();
    let mut outs = (0..parts)
        .map(|p| Out::create(dir.file(&format!("f{index}-requests-{p}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut input = In::open(requests)?;
    let mut payload = Vec::new();
    while input.next_into(&mut payload)? {
        let r = records::request(&mut Fields::new(&payload, requests))?;
        outs[part_of(&r.key, parts)].record(&payload)?;
    }
    let split = outs
        .into_iter()
        .map(Out::finish)
        .collect::<Result<Vec<_>, _>>()?;
    remove(requests);
    let mut answered = Vec::with_capacity(parts);
    for (p, (history_file, requests_file)) in history.files.iter().zip(&split).enumerate() {
        interrupted(stop)?;
        let held = load_part(feature, history_file)?;
        let out = Out::create(dir.file(&format!("f{index}-answers-{p}")))?;
        answered.push(answer_part(&held, &feature.entity, requests_file, out)?);
    }
    merge(&answered, dir.file(&format!("f{index}-answers")))
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// One part's history, held (the in-memory rules); its file removed.
fn load_part(feature: &Feature, path: &Path) -> Result<FeatureHistory, TrainingError> {
    let mut held = FeatureHistory::new(feature.id, feature);
    let mut input = In::open(path)?;
    let mut payload = Vec::new();
    while input.next_into(&mut payload)? {
        let (key, row) = records::history(&mut Fields::new(&payload, path), &feature.entity)?;
        held.push(key, row);
    }
    held.finish();
    remove(path);
    Ok(held)
}

/// Answers one part's requests, in their (row) order; its file removed.
fn answer_part(
    held: &FeatureHistory,
    entity: &Entity,
    requests: &Path,
    mut out: Out,
) -> Result<PathBuf, TrainingError> {
    let mut input = In::open(requests)?;
    let (mut payload, mut answer) = (Vec::new(), Vec::new());
    while input.next_into(&mut payload)? {
        let r = records::request(&mut Fields::new(&payload, requests))?;
        let a = held.answer(&r.key, r.time, &r.query);
        records::put_answer(&mut answer, entity, &r, &a);
        out.record(&answer)?;
    }
    remove(requests);
    out.finish()
}

/// Merges answer files (each in row order) into one in row order; removes them.
fn merge(files: &[PathBuf], to: PathBuf) -> Result<PathBuf, TrainingError> {
    let mut inputs = files
        .iter()
        .map(|f| In::open(f))
        .collect::<Result<Vec<_>, _>>()?;
    let mut heads = vec![Vec::new(); files.len()];
    let mut heap = BinaryHeap::new();
    for (i, input) in inputs.iter_mut().enumerate() {
        if input.next_into(&mut heads[i])? {
            heap.push(Reverse((Fields::new(&heads[i], &files[i]).u64()?, i)));
        }
    }
    let mut out = Out::create(to)?;
    while let Some(Reverse((_, i))) = heap.pop() {
        out.record(&heads[i])?;
        if inputs[i].next_into(&mut heads[i])? {
            heap.push(Reverse((Fields::new(&heads[i], &files[i]).u64()?, i)));
        }
    }
    files.iter().for_each(|f| remove(f));
    out.finish()
}

impl Spilled<'_> {
    /// Step 4: the answers to the reads of rows `first .. first + n` (from 0).
    pub fn reads(&mut self, first: u64, n: usize) -> Result<SpilledReads, TrainingError> {
        let mut answers = HashMap::new();
        let end = first + n as u64;
        for a in &mut self.answers {
            loop {
                let payload = match a.pending.take() {
                    Some(p) => p,
                    None => {
                        let mut p = Vec::new();
                        if !a.input.next_into(&mut p)? {
                            break;
                        }
                        p
                    }
                };
                if Fields::new(&payload, &a.path).u64()? >= end {
                    a.pending = Some(payload);
                    break;
                }
                let mut fields = Fields::new(&payload, &a.path);
                let (row, query, key, answer) = records::answer(&mut fields, a.entity)?;
                let at = usize::try_from(row - first).map_err(|_| a.input.damaged("row"))?;
                answers.insert((at, a.feature, key, query), answer);
            }
        }
        Ok(SpilledReads {
            answers,
            first,
            unanswered: AtomicBool::new(false),
        })
    }

    /// The spill directory (for messages).
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }
}

/// One batch's reads, answered from the spill files.
#[derive(Debug)]
pub struct SpilledReads {
    answers: HashMap<(usize, FeatureId, EntityKey, Query), Answer>,
    first: u64,
    unanswered: AtomicBool,
}

impl SpilledReads {
    /// `Err` when a read of the batch found no answer (a bug).
    pub fn check(&self, file: &Path) -> Result<(), TrainingError> {
        match self.unanswered.load(Ordering::Relaxed) {
            true => Err(unanswered(file, self.first)),
            false => Ok(()),
        }
    }
}

impl Reads for SpilledReads {
    fn answer(
        &self,
        row: usize,
        feature: FeatureId,
        key: &EntityKey,
        _t: Timestamp,
        query: &Query,
    ) -> Answer {
        match self.answers.get(&(row, feature, key.clone(), *query)) {
            Some(a) => a.clone(),
            None => {
                self.unanswered.store(true, Ordering::Relaxed);
                Answer {
                    rows: Vec::new(),
                    expired: false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_a_power_of_two_within_bounds() {
        assert_eq!(parts_for(0, 1 << 30), MIN_PARTS);
        assert_eq!(parts_for(u64::MAX, 1), MAX_PARTS);
        assert_eq!(parts_for(u64::MAX, 0), MAX_PARTS);
        // 10 GiB held, a 1 GiB budget (512 MiB of history): 40 parts of half that, rounded up.
        assert_eq!(parts_for(10 << 30, 1 << 30), 64);
    }
}
