//! `oka ingest`: load a JSON Lines or CSV file (or standard input) into a pipeline
//! feature through the batched write path, streaming: memory is bounded by the
//! batch size and the batches in flight, whatever the input's size. Every record
//! that is not written is reported with its input line; `--rejects` writes them
//! out for a re-run.

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use oka_core::{FeatureId, NativeUdfs, Registry, Timestamp};
use oka_ingest::load::{self, LoadEvents, LoadSummary, ReadOptions, Sent};
use oka_ingest::record::{printable, terminal_safe};
use oka_ingest::{Format, NoMetrics, ReaderLimits, Record, TimeBounds, WritePath, WriterConfig};
use oka_storage::StoreError;

use crate::stores::{self, StoreArgs};

/// How many rejected records are listed on the terminal (all go to `--rejects`).
const SHOWN_REJECTIONS: u64 = 100;
/// How many failed line ranges the summary lists.
const SHOWN_RANGES: usize = 20;

/// The input's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// One JSON object per line.
    Jsonl,
    /// A header row of column names, then one record per row (RFC 4180).
    Csv,
}

/// Options of `oka ingest`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::help::LOGGING)]
pub struct IngestArgs {
    /// The feature spec (YAML).
    #[arg(long, env = "OKA_SPEC")]
    pub spec: PathBuf,
    /// The pipeline feature to write.
    #[arg(long)]
    pub feature: String,
    /// The records: a `.jsonl`/`.ndjson`/`.json` file (one JSON object per line),
    /// a `.csv` file (a header row of column names), or `-` for standard input
    /// (with `--format`). A missing timestamp means "now".
    #[arg(long)]
    pub file: PathBuf,
    /// The input's format (default: from the file's extension).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Write every record that was not written (rejected, or in a batch the store
    /// failed) to this file, in the input's format, to fix and load again.
    #[arg(long)]
    pub rejects: Option<PathBuf>,
    /// How far into the future an event time may lie, in seconds (clock skew
    /// between the producer and this machine); later records are rejected.
    #[arg(long, env = "OKA_MAX_FUTURE_SKEW_S", default_value_t = TimeBounds::default().max_future_skew.as_secs())]
    pub max_future_skew_s: u64,
    /// The largest record (a line, or a CSV record with quoted line breaks), in
    /// bytes; longer ones are rejected.
    #[arg(long, default_value_t = ReaderLimits::default().max_record_bytes)]
    pub max_record_bytes: usize,
    #[command(flatten, next_help_heading = "Store")]
    pub store: StoreArgs,
    #[command(flatten, next_help_heading = "Write path")]
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
    /// Batches written concurrently [default: 4].
    #[arg(long, env = "OKA_MAX_BATCHES_IN_FLIGHT")]
    pub max_batches_in_flight: Option<usize>,
    /// The old name of `--max-batches-in-flight` (and `OKA_MAX_IN_FLIGHT` of
    /// `OKA_MAX_BATCHES_IN_FLIGHT`), too close to `--max-in-flight-requests`; still
    /// read, with a warning.
    #[arg(long = "max-in-flight", env = "OKA_MAX_IN_FLIGHT", hide = true)]
    pub deprecated_max_in_flight: Option<usize>,
}

impl WriterArgs {
    /// The write path's configuration. Logs a warning when a deprecated setting
    /// name was used.
    pub fn config(&self) -> WriterConfig {
        if let Some(old) = self.deprecated_max_in_flight {
            let used = if self.max_batches_in_flight.is_some() {
                "ignored: `--max-batches-in-flight` (`OKA_MAX_BATCHES_IN_FLIGHT`) is also set"
            } else {
                "used"
            };
            tracing::warn!(
                "`--max-in-flight` / `OKA_MAX_IN_FLIGHT` ({old}) is deprecated and was {used}; \
                 rename it to `--max-batches-in-flight` / `OKA_MAX_BATCHES_IN_FLIGHT`"
            );
        }
        let max_in_flight = self
            .max_batches_in_flight
            .or(self.deprecated_max_in_flight)
            .unwrap_or(WriterConfig::default().max_in_flight);
        WriterConfig {
            batch_size: self.batch_size.max(1),
            flush: Duration::from_millis(self.flush_ms),
            max_in_flight: max_in_flight.max(1),
            ..WriterConfig::default()
        }
    }
}

/// The input's name for messages.
fn input_name(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".to_owned()
    } else {
        printable(&path.display().to_string()).into_owned()
    }
}

fn format_of(args: &IngestArgs) -> Result<Format> {
    match (args.format, args.file == Path::new("-")) {
        (Some(FormatArg::Jsonl), _) => Ok(Format::JsonLines),
        (Some(FormatArg::Csv), _) => Ok(Format::Csv),
        (None, true) => bail!("reading standard input needs --format jsonl or --format csv"),
        (None, false) => Format::from_path(&args.file).with_context(|| {
            format!(
                "{}: unknown file type (expected .jsonl, .ndjson, .json or .csv; or pass --format)",
                input_name(&args.file)
            )
        }),
    }
}

/// `(first, last)` as `line N` or `lines N–M`.
fn lines(first: u64, last: u64) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}–{last}")
    }
}

/// Reports records as they are rejected or fail; shows progress on a terminal.
struct Report {
    shown: u64,
    rejects: Option<(PathBuf, std::io::BufWriter<std::fs::File>)>,
    rejects_error: Option<String>,
    started: Instant,
    last_progress: Instant,
    live: bool,
}

impl Report {
    fn write_reject(&mut self, bytes: &[u8]) {
        if let Some((path, out)) = &mut self.rejects
            && self.rejects_error.is_none()
            && let Err(e) = out.write_all(bytes).and_then(|()| out.write_all(b"\n"))
        {
            self.rejects_error = Some(format!(
                "writing {}: {}",
                printable(&path.display().to_string()),
                oka_server::error::io_reason(&e)
            ));
        }
    }

    fn clear_progress(&self) {
        if self.live {
            eprint!("\r\x1b[K");
        }
    }
}

impl LoadEvents for Report {
    fn header(&mut self, line: &[u8]) {
        self.write_reject(line);
    }

    fn rejected(&mut self, record: &Record) {
        self.shown += 1;
        if self.shown <= SHOWN_REJECTIONS {
            self.clear_progress();
            let why = record
                .parsed
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            eprintln!(
                "  {}: {}",
                lines(record.first_line, record.last_line),
                terminal_safe(&why)
            );
        }
        self.write_reject(&record.raw);
    }

    fn failed(&mut self, batch: &Sent, error: &StoreError) {
        self.clear_progress();
        for raw in &batch.raw {
            self.write_reject(raw);
        }
        if error.kind.is_outage() && !error.kind.is_transient() {
            // The load stops on it, and says so once, at the end.
            return;
        }
        eprintln!(
            "  {} ({} records) not written: {}",
            lines(batch.first_line, batch.last_line),
            batch.rows,
            terminal_safe(&error.to_string())
        );
    }

    fn written(&mut self, written: u64) {
        if !self.live || self.last_progress.elapsed() < Duration::from_millis(200) {
            return;
        }
        self.last_progress = Instant::now();
        let rate = written as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        eprint!("\r\x1b[K{written} records written ({rate:.0}/s)");
    }
}

/// Runs `oka ingest`; `Ok(false)` when any record read was not written.
pub fn run(args: IngestArgs, natives: &NativeUdfs) -> Result<bool> {
    args.store.required("ingest")?;
    let (registry, id) = pipeline_feature(&args, natives)?;
    let format = format_of(&args)?;
    let name = input_name(&args.file);
    let input = open_input(&args.file, &name)?;
    let rejects = args.rejects.as_deref().map(open_rejects).transpose()?;
    let config = args.writer.config();
    let options = ReadOptions {
        format,
        now: Timestamp::now(),
        bounds: TimeBounds {
            max_future_skew: Duration::from_secs(args.max_future_skew_s),
        },
        limits: ReaderLimits {
            max_record_bytes: args.max_record_bytes.max(1),
        },
        batch_size: config.batch_size,
        keep_raw: rejects.is_some(),
    };
    let mut report = Report {
        shown: 0,
        rejects,
        rejects_error: None,
        started: Instant::now(),
        last_progress: Instant::now(),
        live: std::io::stderr().is_terminal(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    let started = Instant::now();
    let outcome = rt.block_on(async {
        let store = stores::open_for_writes(&args.store, "ingest").await?;
        let writer = WritePath::spawn(store, Arc::new(NoMetrics), config.clone());
        let reading =
            load::read(input, &registry, id, options).context("starting the reader thread")?;
        // Two jobs per batch in flight keep the write path busy; the write path
        // adds its own back-pressure beyond that.
        let window = config.max_in_flight * 2;
        anyhow::Ok(load::load(reading, &writer, &registry, id, window, &mut report).await)
    })?;
    report.clear_progress();
    let (summary, read_error) = match outcome {
        Ok(s) => (s, None),
        Err((e, s)) => (s, Some(e)),
    };
    finish_report(&args, &name, &mut report, &summary, started.elapsed());
    if let Some(e) = read_error {
        // The records before the failure are counted above.
        bail!("reading {name} stopped: {}", terminal_safe(&e.to_string()));
    }
    if let Some(e) = &summary.stopped_by {
        // Retrying cannot help: every later batch would fail alike.
        let (first, last) = (
            summary.failed_lines.first().map_or(0, |l| l.0),
            summary.failed_lines.last().map_or(0, |l| l.1),
        );
        return Err(stores::unreachable_at("write to the store", args.store.url(), e).context(format!(
            "{name}: stopped after line {last}, since the store refuses every write ({} records of {} not written{}; the input after line {last} was not read)",
            summary.failed,
            lines(first, last),
            if args.rejects.is_some() { ", and in the rejects file" } else { "" },
        )));
    }
    Ok(summary.complete())
}

/// The spec and the pipeline feature to ingest into.
fn pipeline_feature(args: &IngestArgs, natives: &NativeUdfs) -> Result<(Arc<Registry>, FeatureId)> {
    let origin = args.spec.display().to_string();
    let yaml = std::fs::read_to_string(&args.spec).map_err(|e| {
        anyhow::anyhow!(
            "reading the spec {}: {}",
            printable(&origin),
            oka_server::error::io_reason(&e)
        )
    })?;
    let registry = Arc::new(
        Registry::from_yaml(&origin, &yaml, natives)
            .map_err(|e| anyhow::anyhow!("invalid spec:\n{e}"))?,
    );
    let id = registry.feature_id(&args.feature).with_context(|| {
        let pipeline = registry.features().iter().filter(|f| f.is_pipeline());
        format!(
            "unknown feature `{}` in {}{}",
            printable(&args.feature),
            printable(&origin),
            oka_core::error::did_you_mean(&args.feature, pipeline.map(|f| &*f.name))
        )
    })?;
    if !registry.feature(id).is_pipeline() {
        bail!(
            "`{}` is an on-demand feature; only pipeline features are ingested",
            printable(&args.feature)
        );
    }
    Ok((registry, id))
}

/// The input file, or stdin for `-`.
fn open_input(file: &Path, name: &str) -> Result<Box<dyn std::io::Read + Send>> {
    if file == Path::new("-") {
        return Ok(Box::new(std::io::stdin()));
    }
    let f = std::fs::File::open(file)
        .map_err(|e| anyhow::anyhow!("reading {name}: {}", oka_server::error::io_reason(&e)))?;
    Ok(Box::new(f))
}

/// The `--rejects` file, created (or truncated) now so that a bad path fails
/// before anything is read.
fn open_rejects(path: &Path) -> Result<(PathBuf, std::io::BufWriter<std::fs::File>)> {
    let file = std::fs::File::create(path).map_err(|e| {
        anyhow::anyhow!(
            "creating {}: {}",
            printable(&path.display().to_string()),
            oka_server::error::io_reason(&e)
        )
    })?;
    Ok((path.to_path_buf(), std::io::BufWriter::new(file)))
}

/// Flushes the rejects file and prints the summary, the count of rejections not
/// shown and any error writing the rejects.
fn finish_report(
    args: &IngestArgs,
    name: &str,
    report: &mut Report,
    summary: &LoadSummary,
    elapsed: Duration,
) {
    if let Some((path, mut out)) = report.rejects.take()
        && let Err(e) = out.flush()
    {
        report.rejects_error.get_or_insert_with(|| {
            format!(
                "writing {}: {}",
                printable(&path.display().to_string()),
                oka_server::error::io_reason(&e)
            )
        });
    }
    print_summary(args, name, summary, elapsed);
    if report.shown > SHOWN_REJECTIONS {
        eprintln!(
            "  … and {} more rejected records{}",
            report.shown - SHOWN_REJECTIONS,
            if args.rejects.is_some() {
                " (all are in the rejects file)"
            } else {
                "; pass --rejects FILE to get them all"
            }
        );
    }
    if let Some(e) = &report.rejects_error {
        eprintln!("error: {e}");
    }
}

fn print_summary(args: &IngestArgs, name: &str, s: &LoadSummary, elapsed: Duration) {
    let rate = s.written as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "{name}: read {} records; wrote {} records to `{}` in {:.2}s ({rate:.0} records/s); rejected {}; not written (store failed) {}{}",
        s.read,
        s.written,
        printable(&args.feature),
        elapsed.as_secs_f64(),
        s.rejected,
        s.failed,
        if args.store.url() == stores::MEMORY {
            " (a dry run: --store memory:// kept nothing)"
        } else {
            ""
        }
    );
    // A load the store stopped says so in its final error, with the lines.
    if s.failed > 0 && s.stopped_by.is_none() {
        let mut ranges: Vec<String> = s
            .failed_lines
            .iter()
            .take(SHOWN_RANGES)
            .map(|(a, b)| lines(*a, *b))
            .collect();
        if s.failed_lines.len() > SHOWN_RANGES {
            ranges.push(format!(
                "… {} more ranges",
                s.failed_lines.len() - SHOWN_RANGES
            ));
        }
        eprintln!(
            "error: {} records were not written ({}): {}",
            s.failed,
            ranges.join(", "),
            terminal_safe(s.failure.as_deref().unwrap_or("the store failed"))
        );
        eprintln!(
            "  {}",
            if args.rejects.is_some() {
                "they are in the rejects file with the rejected records: load it again once the store is back"
            } else {
                "load those lines again (--rejects FILE writes them out), once the store is back"
            }
        );
    }
}
