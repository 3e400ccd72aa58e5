//! A batch of entity rows computed: each row through [`Job::compute`], its
//! pipeline reads answered by a [`Reads`] (history files as of the row's time
//! for `oka training-set`, the row's own columns for the Python engine), the
//! rows split over the machine's cores.

use std::path::Path;

use oka_core::{EntityKey, FeatureId, Query, Timestamp, Value};

use crate::entities::EntityBatch;
use crate::error::TrainingError;
use crate::history::{Answer, FeatureHistory};
use crate::job::{Job, RowInput, RowResult};

/// Where a row's pipeline reads are answered from: history files (as of the
/// row's time), or the row's own columns (the Python engine).
pub trait Reads: Sync {
    /// What a read of `key` of `feature` with `query` answers for `row` of the
    /// batch, at time `t`.
    fn answer(
        &self,
        row: usize,
        feature: FeatureId,
        key: &EntityKey,
        t: Timestamp,
        query: &Query,
    ) -> Answer;
}

impl Reads for [FeatureHistory] {
    fn answer(
        &self,
        _row: usize,
        feature: FeatureId,
        key: &EntityKey,
        t: Timestamp,
        query: &Query,
    ) -> Answer {
        match self.iter().find(|h| h.feature == feature) {
            Some(h) => h.answer(key, t, query),
            None => Answer {
                rows: Vec::new(),
                expired: false,
            },
        }
    }
}

/// One batch's rows computed, split over the machine's cores.
pub fn compute_batch<R: Reads + ?Sized>(
    job: &Job<'_>,
    reads: &R,
    batch: &EntityBatch,
    file: &Path,
) -> Result<Vec<RowResult>, TrainingError> {
    par_rows(batch.times.len(), file, |rows| {
        compute_rows(job, reads, batch, file, rows)
    })
}

/// Rows computed together at most: their Python UDFs' keys go to the pool as
/// one batch per UDF.
const ROWS_TOGETHER: usize = 1024;

fn compute_rows<R: Reads + ?Sized>(
    job: &Job<'_>,
    reads: &R,
    batch: &EntityBatch,
    file: &Path,
    rows: std::ops::Range<usize>,
) -> Result<Vec<RowResult>, TrainingError> {
    let mut out = Vec::with_capacity(rows.len());
    let indices: Vec<usize> = rows.collect();
    for chunk in indices.chunks(ROWS_TOGETHER) {
        let values: Vec<(Vec<Value>, Vec<Value>)> = chunk
            .iter()
            .map(|&i| {
                let (mut keys, mut args) = (Vec::new(), Vec::new());
                row_values(batch, i, &mut keys, &mut args);
                (keys, args)
            })
            .collect();
        let inputs: Vec<RowInput<'_>> = chunk
            .iter()
            .zip(&values)
            .map(|(&i, (keys, args))| RowInput {
                keys,
                time: batch.times[i],
                args,
            })
            .collect();
        let mut read = |r: usize, f: FeatureId, key: &EntityKey, q: &Query| {
            let i = chunk[r];
            reads.answer(i, f, key, batch.times[i], q)
        };
        for (r, result) in job.compute_rows(&inputs, &mut read).into_iter().enumerate() {
            out.push(result.map_err(|why| TrainingError::Request {
                file: file.to_owned(),
                row: batch.first_row + chunk[r] as u64,
                why: why.to_string(),
            })?);
        }
    }
    Ok(out)
}

/// Row `i`'s key and argument values (for a [`RowInput`]), into reused buffers.
pub(crate) fn row_values(
    batch: &EntityBatch,
    i: usize,
    keys: &mut Vec<Value>,
    args: &mut Vec<Value>,
) {
    keys.clear();
    keys.extend(batch.keys.iter().map(|k| k[i].clone()));
    args.clear();
    args.extend(batch.args.iter().map(|a| a[i].clone()));
}

/// `each` over the rows `0..n`, split into one range per core; the results in
/// row order.
pub(crate) fn par_rows<T: Send>(
    n: usize,
    file: &Path,
    each: impl Fn(std::ops::Range<usize>) -> Result<Vec<T>, TrainingError> + Sync,
) -> Result<Vec<T>, TrainingError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n.max(1));
    let chunk = n.div_ceil(threads.max(1)).max(1);
    let each = &each;
    let parts: Vec<Result<Vec<T>, TrainingError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|lo| s.spawn(move || each(lo..(lo + chunk).min(n))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(TrainingError::io(file, "a worker thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(n);
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}
