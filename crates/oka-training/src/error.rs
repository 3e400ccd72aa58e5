//! What stops a training set, each naming the file, column or row and what to do.

use std::path::PathBuf;

/// Why a training set cannot be made. Each message names the place (file,
/// column, row) and the fix; no output file is left behind.
#[derive(Debug, thiserror::Error)]
pub enum TrainingError {
    /// A requested feature the spec does not define.
    #[error("unknown feature `{name}` in --features (the spec defines: {known})")]
    UnknownFeature {
        /// The name given.
        name: String,
        /// The spec's features.
        known: String,
    },
    /// `--history` for a name the spec does not define or that is not a
    /// pipeline feature.
    #[error("--history {name}=…: {why}")]
    BadHistoryFeature {
        /// The name given.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A pipeline feature a requested feature reads, without `--history`.
    #[error(
        "no history for pipeline feature `{feature}` (read by {readers}): give --history {feature}=PATH"
    )]
    NoHistory {
        /// The pipeline feature.
        feature: String,
        /// The requested features that read it.
        readers: String,
    },
    /// A path or glob that names no file, or a file of an unknown format.
    #[error("{path}: {why}")]
    Input {
        /// The path or glob as given.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// A column the entity file must have is absent or of the wrong type.
    #[error("{file}: column `{column}`: {why}")]
    Column {
        /// The file.
        file: PathBuf,
        /// The column.
        column: String,
        /// What is wrong and what is expected.
        why: String,
    },
    /// One row of an input is unusable.
    #[error("{file}: row {row}: {why}")]
    Row {
        /// The file.
        file: PathBuf,
        /// The 1-based row (data rows; a CSV header is not counted).
        row: u64,
        /// What is wrong.
        why: String,
    },
    /// A record of a history file is unusable (the ingest record rules).
    #[error("history of `{feature}`: {file}: {place}: {why}")]
    History {
        /// The pipeline feature.
        feature: String,
        /// The file.
        file: PathBuf,
        /// `line N` (JSON Lines, CSV) or `row N` (Parquet).
        place: String,
        /// What is wrong.
        why: String,
    },
    /// The history held in memory would pass the budget.
    #[error(
        "the history read so far ({records} records, about {used_mib} MiB, last from {file}) passes half of --memory-budget-mib {budget_mib}"
    )]
    OverBudget {
        /// Records loaded when the budget was passed.
        records: u64,
        /// Their approximate size.
        used_mib: u64,
        /// The budget.
        budget_mib: u64,
        /// The file being read.
        file: PathBuf,
    },
    /// Spilled, one part of a feature's history still passes the budget: a
    /// key with more history than the budget, or a history too large for the
    /// most parts.
    #[error(
        "the history of `{feature}`, split into {parts} parts by key, still holds about {part_mib} MiB in one part, more than half of --memory-budget-mib {budget_mib}: raise --memory-budget-mib (a key with a very long history cannot be split)"
    )]
    PartOverBudget {
        /// The pipeline feature.
        feature: String,
        /// The largest part's approximate size.
        part_mib: u64,
        /// Parts.
        parts: usize,
        /// The budget.
        budget_mib: u64,
    },
    /// A row's request could not be prepared (the spec needs something a
    /// training set does not give, e.g. a `last_n` without `n`).
    #[error("{file}: row {row}: {why}")]
    Request {
        /// The entity file.
        file: PathBuf,
        /// The 1-based row.
        row: u64,
        /// The planner's message.
        why: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {why}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure, in words.
        why: String,
    },
    /// Ctrl-C or SIGTERM: the partial output was removed.
    #[error("interrupted after {rows} rows; no output file was written")]
    Interrupted {
        /// Rows done.
        rows: u64,
    },
}

impl TrainingError {
    /// A failure to read or write `path` (a Parquet or Arrow reader's reason).
    pub(crate) fn io(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        Self::Io {
            path: path.into(),
            why: e.to_string(),
        }
    }

    /// An operating system's failure on `path`, in words.
    pub(crate) fn os(path: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            why: oka_core::words::io_reason(e),
        }
    }
}
