//! Input files: paths and globs, and their formats by extension.

use std::path::{Path, PathBuf};

use crate::error::TrainingError;

/// A file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet (`.parquet`, `.pq`).
    Parquet,
    /// CSV with a header row (`.csv`).
    Csv,
    /// One JSON object per line (`.jsonl`, `.ndjson`, `.json`).
    JsonLines,
}

impl Format {
    /// The format of `path` by its extension (any letter case).
    pub fn of(path: &Path) -> Result<Self, TrainingError> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("parquet" | "pq") => Ok(Self::Parquet),
            Some("csv") => Ok(Self::Csv),
            Some("jsonl" | "ndjson" | "json") => Ok(Self::JsonLines),
            _ => Err(TrainingError::Input {
                path: path.display().to_string(),
                why: "unknown format: name the file .parquet, .csv or .jsonl".to_owned(),
            }),
        }
    }
}

/// The files a path or glob names, sorted (the order records of equal event
/// time are taken in: the last one read wins, as the last one written does).
pub fn expand(pattern: &str) -> Result<Vec<PathBuf>, TrainingError> {
    let bad = |why: String| TrainingError::Input {
        path: pattern.to_owned(),
        why,
    };
    if !pattern.contains(['*', '?', '[']) {
        let path = PathBuf::from(pattern);
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(vec![path]),
            Ok(_) => Err(bad(
                "not a file (give a file or a glob such as dir/*.parquet)".into(),
            )),
            Err(e) => Err(bad(oka_core::words::io_reason(&e))),
        };
    }
    let paths = glob::glob(pattern).map_err(|e| bad(format!("not a valid glob: {e}")))?;
    let mut files = Vec::new();
    for entry in paths {
        let path = entry.map_err(|e| bad(oka_core::words::io_reason(e.error())))?;
        if path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(bad("the glob matches no file".into()));
    }
    files.sort();
    Ok(files)
}
