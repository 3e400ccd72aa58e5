//! `oka init DIR`: a small runnable project — a spec with an entity, a pipeline
//! feature, a window aggregate and a CEL feature; sample events; a README with the
//! commands to validate, ingest and serve it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use oka_core::Timestamp;

/// The project's spec.
pub const SPEC: &str = include_str!("init/oka.yaml");

/// The project's README; `DIR` stands for the directory given to `oka init`.
const README: &str = include_str!("init/README.md");

/// The sample transactions: user, amount, merchant.
const EVENTS: [(&str, &[f64]); 3] = [
    ("u1", &[12.5, 80.0, 7.25, 150.0, 42.0, 230.0]),
    ("u2", &[5.0, 5.5, 6.0]),
    ("u3", &[999.99]),
];

const MERCHANTS: [&str; 4] = ["grocer", "cinema", "airline", "cafe"];

/// The sample events as JSON Lines, stamped over the hour before `now` (oldest
/// first, at least a minute apart).
pub fn sample_events(now: Timestamp) -> String {
    let mut out = String::new();
    let mut i = 0i64;
    for (user, amounts) in EVENTS {
        for amount in amounts.iter() {
            let minutes_ago = 55 - i * 5;
            let ts = Timestamp(now.0 - minutes_ago * 60_000_000);
            let merchant = MERCHANTS[(i as usize) % MERCHANTS.len()];
            let _ = writeln!(
                out,
                r#"{{"user_id":"{user}","ts":"{ts}","amount":{amount:?},"merchant":"{merchant}"}}"#,
                ts = ts.to_rfc3339()
            );
            i += 1;
        }
    }
    out
}

/// Writes the project into `dir` (created if needed); refuses to overwrite an
/// existing `oka.yaml` unless `force`. Returns the files written.
pub fn init(dir: &Path, now: Timestamp, force: bool) -> Result<Vec<PathBuf>> {
    let spec = dir.join("oka.yaml");
    if spec.exists() && !force {
        bail!(
            "{} already exists; give a new directory, or --force to overwrite the project's files",
            spec.display()
        );
    }
    let data = dir.join("data");
    std::fs::create_dir_all(&data)
        .with_context(|| format!("cannot create the directory {}", data.display()))?;
    let shown = dir.display().to_string();
    let files = [
        (spec, SPEC.to_owned()),
        (dir.join("README.md"), README.replace("DIR", &shown)),
        (data.join("transactions.jsonl"), sample_events(now)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_loads_and_the_events_are_distinct_and_recent() {
        oka_core::Registry::from_yaml("oka.yaml", SPEC, &oka_core::NativeUdfs::new()).unwrap();
        let now = Timestamp(1_800_000_000_000_000);
        let events = sample_events(now);
        let mut seen = std::collections::HashSet::new();
        for line in events.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let ts = Timestamp::parse_rfc3339(v["ts"].as_str().unwrap()).unwrap();
            assert!(ts < now && ts.0 > now.0 - 3_600_000_000, "{line}");
            // (user, time) is a record's identity: no two may share it.
            assert!(seen.insert((v["user_id"].to_string(), ts)), "{line}");
        }
        assert_eq!(seen.len(), 10);
    }
}
