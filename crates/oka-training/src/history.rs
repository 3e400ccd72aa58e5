//! A pipeline feature's history, read from files and held by key, and what a
//! store would have answered about a key at any instant.
//!
//! The answer as of `t` is what the in-memory store answers after every record
//! with event time ≤ `t` was written to it in event-time order (file order for
//! equal times), its clock reading `t`: the same rules
//! ([`oka_storage::history`]) — a record of the same event time replaces the
//! one kept, at most `history` records are kept, a key expires `ttl_s` after its
//! last write and a write to an expired key starts it afresh. The tests check
//! the closed form here against that replay.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::RecordBatch;
use oka_core::{EntityKey, Feature, FeatureId, Query, Row, Timestamp, Value};
use oka_ingest::lines::{Format as LineFormat, ReaderLimits, RecordReader};
use oka_ingest::record::{MAX_TIME, RecordParser, TimeBounds};
use oka_storage::history::{expired, select};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::convert;
use crate::error::TrainingError;
use crate::inputs::Format;

/// One key's records, oldest first, one per event time.
#[derive(Debug, Default)]
struct KeyRecords {
    rows: Vec<Row>,
    /// With a TTL: per record, where the history it belongs to starts (a record
    /// written after the key expired starts a new one).
    starts: Vec<u32>,
}

/// What a read of one key answers as of an instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The records, oldest first.
    pub rows: Vec<Row>,
    /// The key had records but had expired (its TTL passed since the last).
    pub expired: bool,
}

/// A pipeline feature's history by key.
#[derive(Debug)]
pub struct FeatureHistory {
    /// The feature.
    pub feature: FeatureId,
    bound: usize,
    ttl_micros: Option<i64>,
    keys: HashMap<EntityKey, KeyRecords>,
}

/// How much memory held history may take.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: u64,
    records: u64,
}

impl Budget {
    /// A budget of `bytes`.
    pub fn new(bytes: u64) -> Self {
        Self {
            limit: bytes,
            used: 0,
            records: 0,
        }
    }

    /// Records taken so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    fn take(&mut self, bytes: usize, file: &Path) -> Result<(), TrainingError> {
        self.used += bytes as u64;
        self.records += 1;
        if self.used > held_limit(self.limit) {
            return Err(TrainingError::OverBudget {
                records: self.records,
                used_mib: self.used >> 20,
                budget_mib: self.limit >> 20,
                file: file.to_owned(),
            });
        }
        Ok(())
    }
}

/// How much of a memory budget held records may take by [`held_size`]: half.
/// The rest is the estimate's error, the vectors' growth and sort buffers,
/// the entity batch and the output's row group, so that the process's peak
/// stays near the budget.
pub fn held_limit(budget: u64) -> u64 {
    budget / 2
}

/// Per-record bookkeeping beyond the row itself (map entry, vector slot).
const RECORD_OVERHEAD: usize = 48;

impl FeatureHistory {
    /// An empty history of `feature`.
    pub fn new(id: FeatureId, feature: &Feature) -> Self {
        let retention = feature.retention();
        Self {
            feature: id,
            bound: retention.history,
            ttl_micros: retention
                .ttl
                .map(|t| i64::try_from(t.as_micros()).unwrap_or(i64::MAX)),
            keys: HashMap::new(),
        }
    }

    /// Adds a record as read (in file order).
    pub fn push(&mut self, key: EntityKey, row: Row) {
        self.keys.entry(key).or_default().rows.push(row);
    }

    /// Orders each key's records by event time (file order among equal times,
    /// the last of which is kept) and marks where each history starts.
    pub fn finish(&mut self) {
        let ttl = self.ttl_micros;
        for records in self.keys.values_mut() {
            records.rows.sort_by_key(|r| r.event_time);
            let mut kept: Vec<Row> = Vec::with_capacity(records.rows.len());
            for row in records.rows.drain(..) {
                match kept.last_mut() {
                    Some(last) if last.event_time == row.event_time => *last = row,
                    _ => kept.push(row),
                }
            }
            records.rows = kept;
            records.starts.clear();
            if ttl.is_some() {
                let mut start = 0u32;
                for i in 0..records.rows.len() {
                    if i > 0
                        && expired(
                            records.rows[i - 1].event_time,
                            records.rows[i].event_time,
                            ttl,
                        )
                    {
                        start = i as u32;
                    }
                    records.starts.push(start);
                }
            }
        }
    }

    /// What a read of `key` with `query` answers as of `t`.
    pub fn answer(&self, key: &EntityKey, t: Timestamp, query: &Query) -> Answer {
        let none = |expired| Answer {
            rows: Vec::new(),
            expired,
        };
        let Some(records) = self.keys.get(key) else {
            return none(false);
        };
        let rows = &records.rows;
        let written = rows.partition_point(|r| r.event_time <= t);
        let Some(last) = written.checked_sub(1) else {
            return none(false);
        };
        if expired(rows[last].event_time, t, self.ttl_micros) {
            return none(true);
        }
        let start = records.starts.get(last).map_or(0, |&s| s as usize);
        let kept = &rows[start.max(written.saturating_sub(self.bound))..written];
        let range = select(kept.len(), |i| kept[i].event_time, query);
        Answer {
            rows: kept[range].to_vec(),
            expired: false,
        }
    }

    /// Keys held.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }
}

/// Reads `files` into `feature`'s history, within `budget`; stops early when
/// `stop` is set.
pub fn load(
    history: &mut FeatureHistory,
    feature: &Feature,
    files: &[PathBuf],
    budget: &mut Budget,
    stop: &AtomicBool,
) -> Result<(), TrainingError> {
    read(feature, files, stop, &mut |key, row, file| {
        budget.take(held_size(&key, &row), file)?;
        history.push(key, row);
        Ok(())
    })?;
    history.finish();
    Ok(())
}

/// About how much memory a record takes when held.
pub fn held_size(key: &EntityKey, row: &Row) -> usize {
    row.approx_size() + key.as_str().len() + RECORD_OVERHEAD
}

/// Reads `files` (a pipeline feature's history, in the ingest record format)
/// in order, giving each record with its file to `add`; stops early when
/// `stop` is set.
pub fn read(
    feature: &Feature,
    files: &[PathBuf],
    stop: &AtomicBool,
    add: &mut dyn FnMut(EntityKey, Row, &Path) -> Result<(), TrainingError>,
) -> Result<(), TrainingError> {
    let parser =
        RecordParser::new(&feature.entity, MAX_TIME, &TimeBounds::default()).requiring_time();
    for file in files {
        let mut add = |key: EntityKey, row: Row| add(key, row, file);
        match Format::of(file)? {
            Format::Parquet => load_parquet(&parser, &feature.name, file, &mut add, stop)?,
            Format::Csv => {
                load_lines(
                    &parser,
                    &feature.name,
                    file,
                    LineFormat::Csv,
                    &mut add,
                    stop,
                )?;
            }
            Format::JsonLines => {
                load_lines(
                    &parser,
                    &feature.name,
                    file,
                    LineFormat::JsonLines,
                    &mut add,
                    stop,
                )?;
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
    }
    Ok(())
}

type Add<'a> = dyn FnMut(EntityKey, Row) -> Result<(), TrainingError> + 'a;

fn load_lines(
    parser: &RecordParser<'_>,
    feature: &str,
    file: &Path,
    format: LineFormat,
    add: &mut Add<'_>,
    stop: &AtomicBool,
) -> Result<(), TrainingError> {
    let input = File::open(file).map_err(|e| TrainingError::os(file, &e))?;
    let bad = |place: String, why: String| TrainingError::History {
        feature: feature.to_owned(),
        file: file.to_owned(),
        place,
        why,
    };
    let reader = RecordReader::new(
        BufReader::with_capacity(1 << 16, input),
        format,
        parser.clone(),
        ReaderLimits::default(),
    )
    .map_err(|e| {
        let hint = match e {
            oka_ingest::ReadError::UnknownColumn { .. } => "; is this another feature's history?",
            _ => "",
        };
        bad("header".to_owned(), format!("{e}{hint}"))
    })?;
    for (n, record) in reader.enumerate() {
        let record = record.map_err(|e| bad("reading".to_owned(), e.to_string()))?;
        let (key, row) = record
            .parsed
            .map_err(|e| bad(format!("line {}", record.first_line), e.to_string()))?;
        add(key, row)?;
        if n % 65_536 == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(())
}

fn load_parquet(
    parser: &RecordParser<'_>,
    feature: &str,
    file: &Path,
    add: &mut Add<'_>,
    stop: &AtomicBool,
) -> Result<(), TrainingError> {
    let input = File::open(file).map_err(|e| TrainingError::os(file, &e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(input)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| TrainingError::io(file, format!("not a readable Parquet file: {e}")))?;
    let entity = parser.entity();
    let mut row_number = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| TrainingError::io(file, e))?;
        let columns = history_columns(&batch, entity, file)?;
        for i in 0..batch.num_rows() {
            row_number += 1;
            let values: Vec<Value> = columns.iter().map(|c| c[i].clone()).collect();
            let (key, row) = parser
                .parse_values(values)
                .map_err(|e| TrainingError::History {
                    feature: feature.to_owned(),
                    file: file.to_owned(),
                    place: format!("row {row_number}"),
                    why: e.to_string(),
                })?;
            add(key, row)?;
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(())
}

/// A history batch's columns as the entity's, in its column order: every
/// column of the file must be a field of the entity, and every field a column.
fn history_columns(
    batch: &RecordBatch,
    entity: &oka_core::Entity,
    file: &Path,
) -> Result<Vec<Vec<Value>>, TrainingError> {
    let schema = batch.schema();
    let column_error = |column: &str, why: String| TrainingError::Column {
        file: file.to_owned(),
        column: column.to_owned(),
        why,
    };
    if let Some(f) = schema
        .fields()
        .iter()
        .find(|f| entity.column_index(f.name()).is_none())
    {
        let fields: Vec<&str> = entity.columns.iter().map(|c| &*c.name).collect();
        return Err(column_error(
            f.name(),
            format!(
                "not a field of entity `{}` (its fields: {}); is this another feature's history?",
                entity.name,
                fields.join(", ")
            ),
        ));
    }
    entity
        .columns
        .iter()
        .map(|c| {
            let array = batch.column_by_name(&c.name).ok_or_else(|| {
                column_error(
                    &c.name,
                    format!(
                        "missing: a history file holds every field of entity `{}`",
                        entity.name
                    ),
                )
            })?;
            convert::values(array, &c.ty).map_err(|why| column_error(&c.name, why.to_string()))
        })
        .collect()
}
