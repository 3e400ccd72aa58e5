//! Loading a stream of records (a file, stdin) into a pipeline feature with
//! memory bounded by the batch size and the batches in flight, never by the input.
//!
//! A reader thread parses the input ([`RecordReader`]) into batches of rows and
//! sends them, and every rejected record, through a bounded channel; [`load`]
//! hands the batches to the write path with a bounded number outstanding, and
//! reports each rejected record and each batch that failed after the writer's
//! retries, with the input lines it came from, to a [`LoadEvents`] sink as they
//! happen. The [`LoadSummary`] at the end counts everything read.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::thread::JoinHandle;

use oka_core::{EntityKey, FeatureId, Registry, Row, Timestamp};
use oka_storage::StoreError;
use tokio::sync::mpsc;

use crate::lines::{Format, ReadError, ReaderLimits, Record, RecordReader};
use crate::record::{RecordParser, TimeBounds};
use crate::writer::WritePath;

/// Rows parsed from consecutive input lines, written in one job.
#[derive(Debug)]
pub struct Batch {
    /// The rows.
    pub rows: Vec<(EntityKey, Row)>,
    /// The first input line of the first row.
    pub first_line: u64,
    /// The last input line of the last row.
    pub last_line: u64,
    /// Each row's input text, when asked for (to write out what failed).
    pub raw: Vec<Vec<u8>>,
}

/// What the reader thread sends.
#[derive(Debug)]
enum Item {
    /// The CSV header line (sent first).
    Header(Vec<u8>),
    Batch(Batch),
    Rejected(Record),
}

/// How to read an input.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// JSON Lines or CSV.
    pub format: Format,
    /// Event times of records without one, and the future bound's origin.
    pub now: Timestamp,
    /// Accepted timestamps.
    pub bounds: TimeBounds,
    /// The largest record.
    pub limits: ReaderLimits,
    /// Rows per batch.
    pub batch_size: usize,
    /// Keep each row's input text (for a rejects file).
    pub keep_raw: bool,
}

/// The input being read on a thread of its own.
#[derive(Debug)]
pub struct Reading {
    rx: mpsc::Receiver<Result<Item, ReadError>>,
    thread: JoinHandle<()>,
}

/// Starts reading `input` as records of `feature` on a thread of its own. At most
/// two batches wait to be written; the thread blocks until they are taken.
pub fn read(
    input: Box<dyn Read + Send>,
    registry: &Arc<Registry>,
    feature: FeatureId,
    options: ReadOptions,
) -> std::io::Result<Reading> {
    let (tx, rx) = mpsc::channel(2);
    let registry = Arc::clone(registry);
    let thread = std::thread::Builder::new()
        .name("oka-ingest-read".to_owned())
        .spawn(move || {
            let entity = &registry.feature(feature).entity;
            let parser = RecordParser::new(entity, options.now, &options.bounds);
            let input = BufReader::with_capacity(256 * 1024, input);
            let reader = match RecordReader::new(input, options.format, parser, options.limits) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            if !reader.header_line().is_empty()
                && tx
                    .blocking_send(Ok(Item::Header(reader.header_line().to_vec())))
                    .is_err()
            {
                return;
            }
            let batch_size = options.batch_size.max(1);
            let empty = || Batch {
                rows: Vec::with_capacity(batch_size),
                first_line: 0,
                last_line: 0,
                raw: Vec::new(),
            };
            let mut batch = empty();
            for record in reader {
                let record = match record {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                };
                match record.parsed {
                    Ok(row) => {
                        if batch.rows.is_empty() {
                            batch.first_line = record.first_line;
                        }
                        batch.last_line = record.last_line;
                        batch.rows.push(row);
                        if options.keep_raw {
                            batch.raw.push(record.raw);
                        }
                        if batch.rows.len() >= batch_size
                            && tx
                                .blocking_send(Ok(Item::Batch(std::mem::replace(
                                    &mut batch,
                                    empty(),
                                ))))
                                .is_err()
                        {
                            return;
                        }
                    }
                    Err(_) => {
                        if tx.blocking_send(Ok(Item::Rejected(record))).is_err() {
                            return;
                        }
                    }
                }
            }
            if !batch.rows.is_empty() {
                let _ = tx.blocking_send(Ok(Item::Batch(batch)));
            }
        })?;
    Ok(Reading { rx, thread })
}

/// A batch handed to the write path: where it came from, not its rows.
#[derive(Debug)]
pub struct Sent {
    /// How many rows.
    pub rows: u64,
    /// The first input line of the first row.
    pub first_line: u64,
    /// The last input line of the last row.
    pub last_line: u64,
    /// Each row's input text, when it was kept.
    pub raw: Vec<Vec<u8>>,
}

/// Receives what happens to the records as it happens.
pub trait LoadEvents {
    /// The CSV header line, before any record.
    fn header(&mut self, line: &[u8]) {
        let _ = line;
    }
    /// A record was rejected (its `parsed` is the reason).
    fn rejected(&mut self, record: &Record);
    /// A batch was not written: the store failed it after the writer's retries.
    fn failed(&mut self, batch: &Sent, error: &StoreError);
    /// Progress: records written so far.
    fn written(&mut self, written: u64) {
        let _ = written;
    }
}

/// What a load did with every record it read.
#[derive(Debug, Clone, Default)]
pub struct LoadSummary {
    /// Records read (written, rejected or failed).
    pub read: u64,
    /// Records written.
    pub written: u64,
    /// Records rejected (bad content).
    pub rejected: u64,
    /// Records the store did not take (after retries).
    pub failed: u64,
    /// The input lines of the batches that failed, adjacent ranges merged.
    pub failed_lines: Vec<(u64, u64)>,
    /// The first store error, in words.
    pub failure: Option<String>,
    /// The failure that stopped the load: the store refuses the credentials or
    /// the configuration ([`oka_storage::StoreErrorKind::is_transient`] is false
    /// for an outage), so every later batch would fail alike. Input after the
    /// batches in flight is not read.
    pub stopped_by: Option<StoreError>,
}

impl LoadSummary {
    /// Whether every record read was written.
    pub fn complete(&self) -> bool {
        self.read == self.written
    }

    fn failed_batch(&mut self, batch: &Sent, error: &StoreError) {
        self.failed += batch.rows;
        match self.failed_lines.last_mut() {
            Some((_, last)) if *last + 1 >= batch.first_line => *last = batch.last_line,
            _ => self.failed_lines.push((batch.first_line, batch.last_line)),
        }
        self.failure.get_or_insert_with(|| error.to_string());
    }
}

type WriteJob = tokio::task::JoinHandle<Result<(), StoreError>>;

/// Writes what `reading` reads through `writer`, at most `window` batches
/// outstanding, and waits for every write. Returns the summary; on a failure to
/// read the input, the error and the summary of what was read before it (all of
/// it written or reported).
pub async fn load(
    mut reading: Reading,
    writer: &WritePath,
    registry: &Arc<Registry>,
    feature: FeatureId,
    window: usize,
    events: &mut dyn LoadEvents,
) -> Result<LoadSummary, (ReadError, LoadSummary)> {
    let mut summary = LoadSummary::default();
    let mut pending: VecDeque<(Sent, WriteJob)> = VecDeque::new();
    let mut read_error = None;
    let mut input_done = false;
    loop {
        // Take input while there is room; otherwise wait for the oldest write.
        if !input_done && pending.len() < window.max(1) {
            match reading.rx.recv().await {
                Some(Ok(Item::Batch(batch))) => {
                    let sent = Sent {
                        rows: batch.rows.len() as u64,
                        first_line: batch.first_line,
                        last_line: batch.last_line,
                        raw: batch.raw,
                    };
                    summary.read += sent.rows;
                    let (w, r, rows) = (writer.clone(), Arc::clone(registry), batch.rows);
                    let job = tokio::spawn(async move { w.write(&r, feature, rows).await });
                    pending.push_back((sent, job));
                    continue;
                }
                Some(Ok(Item::Header(line))) => {
                    events.header(&line);
                    continue;
                }
                Some(Ok(Item::Rejected(record))) => {
                    summary.read += 1;
                    summary.rejected += 1;
                    events.rejected(&record);
                    continue;
                }
                Some(Err(e)) => {
                    read_error = Some(e);
                    input_done = true;
                }
                None => input_done = true,
            }
        }
        let Some((sent, job)) = pending.pop_front() else {
            if input_done {
                break;
            }
            continue;
        };
        let result = job.await.unwrap_or_else(|_| {
            Err(StoreError::new(
                oka_storage::StoreErrorKind::Internal,
                "the write task failed",
            ))
        });
        match result {
            Ok(()) => {
                summary.written += sent.rows;
                events.written(summary.written);
            }
            Err(e) => {
                summary.failed_batch(&sent, &e);
                events.failed(&sent, &e);
                if e.kind.is_outage() && !e.kind.is_transient() && summary.stopped_by.is_none() {
                    summary.stopped_by = Some(e);
                    input_done = true;
                }
            }
        }
    }
    drop(reading.rx);
    let _ = reading.thread.join();
    match read_error {
        Some(e) => Err((e, summary)),
        None => Ok(summary),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use async_trait::async_trait;
    use oka_core::{Feature, NativeUdfs, Query};
    use oka_storage::{FeatureStore, MemoryStore, StoreErrorKind};

    use super::*;
    use crate::NoMetrics;
    use crate::writer::WriterConfig;

    /// Fails its write calls number `fail` (1-based) for good.
    #[derive(Debug, Default)]
    struct FailingCalls {
        inner: MemoryStore,
        calls: AtomicUsize,
        fail: Vec<usize>,
    }

    #[async_trait]
    impl FeatureStore for FailingCalls {
        fn backend(&self) -> &'static str {
            "failing"
        }
        async fn read(
            &self,
            f: &Feature,
            k: &[EntityKey],
            q: &Query,
        ) -> Result<oka_core::KeyedRows, StoreError> {
            self.inner.read(f, k, q).await
        }
        async fn write(&self, f: &Feature, r: &[(EntityKey, Row)]) -> Result<(), StoreError> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fail.contains(&call) {
                return Err(StoreError::new(StoreErrorKind::Internal, "disk full"));
            }
            self.inner.write(f, r).await
        }
        async fn health(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[derive(Default)]
    struct Events {
        rejected: Vec<(u64, u64)>,
        failed: Vec<(u64, u64, u64)>,
        failed_raw: Vec<Vec<u8>>,
    }

    impl LoadEvents for Events {
        fn rejected(&mut self, record: &Record) {
            self.rejected.push((record.first_line, record.last_line));
        }
        fn failed(&mut self, batch: &Sent, _: &StoreError) {
            self.failed
                .push((batch.first_line, batch.last_line, batch.rows));
            self.failed_raw.extend(batch.raw.iter().cloned());
        }
    }

    #[tokio::test]
    async fn failed_batches_are_reported_by_line_range_with_their_text() {
        let yaml = "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}\nfeatures:\n  p: {kind: pipeline, entity: E}\n";
        let registry = Arc::new(Registry::from_yaml("t", yaml, &NativeUdfs::new()).unwrap());
        let input: String = (1..=500)
            .map(|i| {
                if i == 150 {
                    "not json\n".to_owned()
                } else {
                    format!("{{\"id\":\"k{i}\",\"v\":{i}}}\n")
                }
            })
            .collect();
        let store = Arc::new(FailingCalls {
            fail: vec![2, 3],
            ..FailingCalls::default()
        });
        let writer = WritePath::spawn(
            store.clone(),
            Arc::new(NoMetrics),
            WriterConfig {
                batch_size: 100,
                flush: Duration::from_millis(1),
                ..WriterConfig::default()
            },
        );
        let options = ReadOptions {
            format: Format::JsonLines,
            now: Timestamp::now(),
            bounds: TimeBounds::default(),
            limits: ReaderLimits::default(),
            batch_size: 100,
            keep_raw: true,
        };
        let reading = read(Box::new(std::io::Cursor::new(input)), &registry, 0, options).unwrap();
        let mut events = Events::default();
        let summary = load(reading, &writer, &registry, 0, 1, &mut events)
            .await
            .unwrap();
        assert_eq!(
            (
                summary.read,
                summary.written,
                summary.rejected,
                summary.failed
            ),
            (500, 299, 1, 200)
        );
        assert!(!summary.complete());
        assert_eq!(summary.failed_lines, [(101, 301)]);
        assert_eq!(
            summary.failure.as_deref(),
            Some("the store call failed: disk full")
        );
        assert_eq!(events.rejected, [(150, 150)]);
        assert_eq!(events.failed, [(101, 201, 100), (202, 301, 100)]);
        assert_eq!(events.failed_raw.len(), 200);
        assert_eq!(events.failed_raw[0], b"{\"id\":\"k101\",\"v\":101}");
        // What was written is in the store; what failed is not.
        let keys: Vec<EntityKey> = ["k1", "k101", "k302", "k500"]
            .iter()
            .map(|k| EntityKey::encode(&[oka_core::Value::from(*k)]))
            .collect();
        let got = store
            .inner
            .read(registry.feature(0), &keys, &Query::Latest)
            .await
            .unwrap();
        assert_eq!(
            got.iter().map(<[Row]>::len).collect::<Vec<_>>(),
            [1, 0, 1, 1]
        );
    }
}
