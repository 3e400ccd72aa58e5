//! `oka ingest`: load a JSON-lines or CSV file of records into a pipeline feature
//! through the batched write path, with progress and a summary.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use oka_core::registry::Entity;
use oka_core::{EntityKey, FieldType, NativeUdfs, Registry, Row, Timestamp};
use oka_ingest::{NoMetrics, WritePath, WriterConfig};
use serde_json::{Map, Value as Json};

use crate::stores::{self, StoreArgs};

/// How many rejected records the summary lists.
const SHOWN_REJECTIONS: usize = 20;

/// Options of `oka ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// The feature spec (YAML).
    #[arg(long, env = "OKA_SPEC")]
    pub spec: PathBuf,
    /// The pipeline feature to write.
    #[arg(long)]
    pub feature: String,
    /// The records: `.jsonl`/`.ndjson`/`.json` (one JSON object per line) or `.csv`
    /// (a header row of column names). A missing timestamp column means "now".
    #[arg(long)]
    pub file: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub writer: WriterArgs,
}

/// Batching of the write path.
#[derive(Debug, Clone, clap::Args)]
pub struct WriterArgs {
    /// Rows per store write.
    #[arg(long, env = "OKA_BATCH_SIZE", default_value_t = WriterConfig::default().batch_size)]
    pub batch_size: usize,
    /// How long a batch waits for more rows, milliseconds.
    #[arg(long, env = "OKA_FLUSH_MS", default_value_t = 20)]
    pub flush_ms: u64,
    /// Batches written concurrently.
    #[arg(long, env = "OKA_MAX_IN_FLIGHT", default_value_t = WriterConfig::default().max_in_flight)]
    pub max_in_flight: usize,
}

impl WriterArgs {
    /// The write path's configuration.
    pub fn config(&self) -> WriterConfig {
        WriterConfig {
            batch_size: self.batch_size.max(1),
            flush: Duration::from_millis(self.flush_ms),
            max_in_flight: self.max_in_flight.max(1),
            ..WriterConfig::default()
        }
    }
}

/// Parsed records and the ones rejected (line number, reason).
struct Parsed {
    rows: Vec<(EntityKey, Row)>,
    rejected: Vec<(usize, String)>,
}

fn parse_jsonl(entity: &Entity, text: &str, now: Timestamp) -> Parsed {
    let mut out = Parsed {
        rows: Vec::new(),
        rejected: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str::<Map<String, Json>>(line)
            .map_err(|e| format!("not a JSON object: {e}"))
            .and_then(|m| entity.row_from_json(&m, now));
        match record {
            Ok(r) => out.rows.push(r),
            Err(e) => out.rejected.push((i + 1, e)),
        }
    }
    out
}

/// A CSV cell as JSON for its column's type (empty cells are null).
fn csv_cell(ty: &FieldType, cell: &str) -> Result<Json, String> {
    if cell.is_empty() {
        return Ok(Json::Null);
    }
    let number = |s: &str| {
        s.parse::<i64>()
            .map(Json::from)
            .or_else(|_| {
                s.parse::<f64>()
                    .map_err(|_| ())
                    .and_then(|f| serde_json::Number::from_f64(f).map(Json::Number).ok_or(()))
            })
            .map_err(|()| format!("`{s}` is not a number"))
    };
    match ty {
        FieldType::String => Ok(Json::String(cell.to_owned())),
        FieldType::Int | FieldType::Float => number(cell),
        FieldType::Bool => match cell {
            "true" | "1" => Ok(Json::Bool(true)),
            "false" | "0" => Ok(Json::Bool(false)),
            _ => Err(format!("`{cell}` is not a bool")),
        },
        FieldType::Timestamp => Ok(number(cell).unwrap_or_else(|_| Json::String(cell.to_owned()))),
        FieldType::List(_) => {
            serde_json::from_str(cell).map_err(|_| format!("`{cell}` is not a JSON list"))
        }
    }
}

fn parse_csv(entity: &Entity, text: &str, now: Timestamp) -> Result<Parsed> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .context("reading the CSV header")?
        .iter()
        .map(str::to_owned)
        .collect();
    if let Some(unknown) = header.iter().find(|h| entity.column_index(h).is_none()) {
        bail!(
            "CSV column `{unknown}` is not a field of entity `{}`",
            entity.name
        );
    }
    let mut out = Parsed {
        rows: Vec::new(),
        rejected: Vec::new(),
    };
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let parsed = record.map_err(|e| e.to_string()).and_then(|r| {
            let mut map = Map::new();
            for (name, cell) in header.iter().zip(r.iter()) {
                let ty = entity
                    .column_index(name)
                    .map(|c| &entity.columns[c].ty)
                    .ok_or_else(|| format!("no field `{name}`"))?;
                let v = csv_cell(ty, cell).map_err(|e| format!("field `{name}`: {e}"))?;
                map.insert(name.clone(), v);
            }
            entity.row_from_json(&map, now)
        });
        match parsed {
            Ok(r) => out.rows.push(r),
            Err(e) => out.rejected.push((line, e)),
        }
    }
    Ok(out)
}

fn parse_file(entity: &Entity, path: &Path, now: Timestamp) -> Result<Parsed> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl" | "ndjson" | "json") => Ok(parse_jsonl(entity, &text, now)),
        Some("csv") => parse_csv(entity, &text, now),
        _ => bail!(
            "{}: unknown file type (expected .jsonl, .ndjson or .csv)",
            path.display()
        ),
    }
}

/// Shows `done/total` with rate and ETA on one line of a terminal.
struct Progress {
    started: Instant,
    last: Instant,
    total: usize,
    live: bool,
}

impl Progress {
    fn new(total: usize) -> Self {
        Self {
            started: Instant::now(),
            last: Instant::now(),
            total,
            live: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, done: usize, force: bool) {
        if !self.live || (!force && self.last.elapsed() < Duration::from_millis(200)) {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = done as f64 / secs;
        let eta = if rate > 0.0 {
            (self.total - done) as f64 / rate
        } else {
            0.0
        };
        let width = 30;
        let filled = (width * done).checked_div(self.total).unwrap_or(width);
        eprint!(
            "\r[{}{}] {done}/{} rows  {rate:.0} rows/s  ETA {eta:.1}s ",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.total
        );
        if force {
            eprintln!();
        }
    }
}

/// Runs `oka ingest`; `Ok(false)` when records were rejected or not written.
pub fn run(args: IngestArgs, natives: &NativeUdfs) -> Result<bool> {
    let origin = args.spec.display().to_string();
    let yaml = std::fs::read_to_string(&args.spec).with_context(|| format!("reading {origin}"))?;
    let registry = Arc::new(
        Registry::from_yaml(&origin, &yaml, natives)
            .map_err(|e| anyhow::anyhow!("invalid spec:\n{e}"))?,
    );
    let id = registry
        .feature_id(&args.feature)
        .with_context(|| format!("unknown feature `{}` in {origin}", args.feature))?;
    let feature = registry.feature(id);
    if !feature.is_pipeline() {
        bail!(
            "`{}` is an on-demand feature; only pipeline features are ingested",
            args.feature
        );
    }
    let parsed = parse_file(&feature.entity, &args.file, Timestamp::now())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    let config = args.writer.config();
    let (written, failure, elapsed) = rt.block_on(async {
        let store = stores::open(&args.store).await?;
        let writer = WritePath::spawn(store.clone(), Arc::new(NoMetrics), config.clone());
        let total = parsed.rows.len();
        let mut progress = Progress::new(total);
        let started = Instant::now();
        let mut written = 0;
        let mut failure = None;
        // Keep a bounded number of jobs outstanding; the write path adds its own
        // back-pressure beyond that.
        let window = config.max_in_flight * 2;
        let mut pending = std::collections::VecDeque::new();
        let mut rows = parsed.rows.into_iter().peekable();
        while rows.peek().is_some() || !pending.is_empty() {
            while pending.len() < window && rows.peek().is_some() {
                let chunk: Vec<_> = rows.by_ref().take(config.batch_size).collect();
                let n = chunk.len();
                let w = writer.clone();
                let r = Arc::clone(&registry);
                pending.push_back((n, tokio::spawn(async move { w.write(&r, id, chunk).await })));
            }
            if let Some((n, job)) = pending.pop_front() {
                match job.await {
                    Ok(Ok(())) => written += n,
                    Ok(Err(e)) => {
                        failure.get_or_insert_with(|| e.to_string());
                    }
                    Err(e) => {
                        failure.get_or_insert_with(|| e.to_string());
                    }
                }
                progress.update(written, false);
            }
        }
        progress.update(written, true);
        anyhow::Ok((written, failure, started.elapsed()))
    })?;
    let rejected = parsed.rejected.len();
    let rate = written as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "{}: wrote {written} records to `{}` in {:.2}s ({rate:.0} records/s); rejected {rejected}",
        args.file.display(),
        args.feature,
        elapsed.as_secs_f64()
    );
    for (line, why) in parsed.rejected.iter().take(SHOWN_REJECTIONS) {
        eprintln!("  line {line}: {why}");
    }
    if rejected > SHOWN_REJECTIONS {
        eprintln!("  … and {} more", rejected - SHOWN_REJECTIONS);
    }
    if let Some(e) = &failure {
        eprintln!("error: some batches were not written: {e}");
    }
    Ok(rejected == 0 && failure.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity() -> Arc<Entity> {
        let yaml = "version: 1\nentities:\n  E:\n    keys: {id: string}\n    timestamp: ts\n    fields: {v: float, n: int, ok: bool, tags: list<string>}\nfeatures:\n  p: {kind: pipeline, entity: E}\n";
        Arc::clone(
            &Registry::from_yaml("t", yaml, &NativeUdfs::new())
                .unwrap()
                .feature(0)
                .entity,
        )
    }

    #[test]
    fn csv_cells_are_typed_and_bad_rows_named() {
        let e = entity();
        let text = "id,ts,v,n,ok,tags\na,2025-04-18T10:00:00Z,1.5,2,true,\"[\"\"x\"\"]\"\nb,1744970400,x,2,true,[]\nc,,3,4,0,\n";
        let p = parse_csv(&e, text, Timestamp(7)).unwrap();
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.rejected.len(), 1);
        assert_eq!(p.rejected[0].0, 3);
        assert!(p.rejected[0].1.contains("field `v`"), "{:?}", p.rejected);
        assert_eq!(
            p.rows[1].1.event_time,
            Timestamp(7),
            "missing timestamp is now"
        );
    }

    #[test]
    fn unknown_csv_columns_fail_the_file() {
        assert!(parse_csv(&entity(), "id,colour\na,red\n", Timestamp(0)).is_err());
    }

    #[test]
    fn jsonl_rejections_carry_line_numbers() {
        let p = parse_jsonl(
            &entity(),
            "{\"id\": \"a\", \"v\": 1}\n\nnot json\n{\"v\": 2}\n",
            Timestamp(0),
        );
        assert_eq!(p.rows.len(), 1);
        let lines: Vec<usize> = p.rejected.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [3, 4]);
    }
}
