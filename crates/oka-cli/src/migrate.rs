//! `oka migrate volga`: copies a Volga deployment's features out of its Redis
//! (`volga:hot_feature:{feature}:{keys}` hashes) or its CQL table
//! (`persistent.hot_features`) into a store in Oka's layout.
//!
//! One page at a time (a Redis `SCAN` page, a CQL result page): the page's records
//! are mapped onto the spec's pipeline
//! feature of the same name, written (each feature's records in one batched store
//! write), and only then is the scan cursor saved in the state file. An interrupted
//! copy resumes from the last saved page; the page in flight is written again,
//! which stores nothing twice (a record's key and event time identify it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use oka_core::{EntityKey, Feature, NativeUdfs, Registry, Row, Timestamp};
use oka_redis::volga_layout;
use oka_redis::volga_reader::{Page, VolgaHash, VolgaReader};
use oka_scylla::volga_reader::VolgaCqlReader;
use oka_storage::FeatureStore;
use serde::{Deserialize, Serialize};

use crate::stores;

/// `oka migrate volga`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct VolgaArgs {
    /// Where Volga's features are, read only: its Redis
    /// (`redis://[user:pass@]host:port[/db]` or `rediss://`; the
    /// `volga:hot_feature:*` hashes), or its CQL cluster
    /// (`scylla://host[:port][,host…][/keyspace]` or `cassandra://…`; the
    /// `hot_features` table, keyspace `persistent` unless the URL names one).
    #[arg(long)]
    pub from: String,
    /// The spec: each Volga feature is copied into the pipeline feature of the same
    /// name, its `keys_json`/`values_json` mapped onto that feature's entity.
    #[arg(long, env = "OKA_SPEC")]
    pub spec: PathBuf,
    #[command(flatten)]
    pub store: stores::StoreArgs,
    /// The event time of records that carry none (Volga's writer stores none):
    /// RFC 3339, or `now`, the time the copy started. Kept in the state file, so a
    /// resumed copy writes the same records.
    #[arg(long, default_value = "now")]
    pub event_time: String,
    /// The state file: where the copy is, so that it resumes after an interruption.
    #[arg(long, default_value = "oka-migrate-volga.json")]
    pub state: PathBuf,
    /// Start the copy over, replacing the state file.
    #[arg(long)]
    pub restart: bool,
    /// Stop after this many pages (the state is saved; run the command again to go
    /// on): a long copy in slices, e.g. outside peak hours.
    #[arg(long)]
    pub max_pages: Option<u64>,
    /// Records per page (Redis `SCAN … COUNT`; the CQL page size).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch: u32,
}

/// One feature's records of a page.
type Records = Vec<(EntityKey, Row)>;

/// How many unmapped records the summary shows.
const EXAMPLES: usize = 10;
/// Store write attempts per page and feature (transient errors only).
const ATTEMPTS: u32 = 4;

/// The state file: where the scan is and what was copied so far.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct State {
    /// Where from and to (URLs with passwords masked): a state file is only
    /// resumed for the same copy.
    from: String,
    to: String,
    /// The event time given to records without one (µs since the epoch).
    event_time_us: i64,
    /// The scan cursor of the next page (`"0"` and `finished`: done).
    cursor: String,
    finished: bool,
    pages: u64,
    /// Records written, by feature.
    copied: BTreeMap<String, u64>,
    /// Records that could not be mapped, by feature, and the first few.
    unmapped: BTreeMap<String, u64>,
    examples: Vec<String>,
    /// Hashes of features the spec has no pipeline feature for, by feature.
    not_in_spec: BTreeMap<String, u64>,
}

impl State {
    fn new(from: String, to: String, event_time: Timestamp) -> Self {
        Self {
            from,
            to,
            event_time_us: event_time.0,
            cursor: "0".to_owned(),
            finished: false,
            pages: 0,
            copied: BTreeMap::new(),
            unmapped: BTreeMap::new(),
            examples: Vec::new(),
            not_in_spec: BTreeMap::new(),
        }
    }

    /// The saved state of this copy, or a new one (with `--restart`, or no file).
    fn open(args: &VolgaArgs) -> Result<Self> {
        let (from, to) = (stores::redact(&args.from), stores::redact(args.store.url()));
        let given = match args.event_time.as_str() {
            "now" => None,
            t => Some(Timestamp::parse_rfc3339(t).with_context(|| {
                format!("--event-time `{t}`: give an RFC 3339 time such as 2026-01-31T12:00:00Z, or `now`")
            })?),
        };
        let path = &args.state;
        if args.restart || !path.exists() {
            return Ok(Self::new(from, to, given.unwrap_or_else(Timestamp::now)));
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the state file {}", path.display()))?;
        let state: Self = serde_json::from_str(&text).with_context(|| {
            format!(
                "the state file {} is not one `oka migrate volga` wrote: move it away, or pass --restart to replace it",
                path.display()
            )
        })?;
        if state.from != from || state.to != to {
            bail!(
                "the state file {} belongs to a copy from {} to {}, not from {from} to {to}: give another --state, or pass --restart to replace it",
                path.display(),
                state.from,
                state.to
            );
        }
        if let Some(t) = given.filter(|t| t.0 != state.event_time_us) {
            bail!(
                "the copy in {} gives records without an event time {}; --event-time says {}: leave --event-time out to resume, or pass --restart to copy again with the new time",
                path.display(),
                Timestamp(state.event_time_us).to_rfc3339(),
                t.to_rfc3339()
            );
        }
        Ok(state)
    }

    /// Writes the state atomically (a new file, then renamed over the old).
    fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).context("encoding the state")?;
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing the state file {}", path.display()))
    }

    fn unmapped(&mut self, hash: &VolgaHash, why: &str) {
        *self.unmapped.entry(hash.feature.clone()).or_default() += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(format!("{}: {why}", hash.key));
        }
    }
}

/// Volga's data: its Redis or its CQL table.
enum VolgaData {
    Redis(VolgaReader),
    Cql(Box<VolgaCqlReader>),
}

impl VolgaData {
    async fn connect(url: &str, timeout: Duration) -> Result<Self, oka_storage::StoreError> {
        let scheme = url.split_once("://").map_or(url, |(s, _)| s);
        if !matches!(scheme, "redis" | "rediss" | "scylla" | "cassandra") {
            return Err(oka_storage::StoreError::new(
                oka_storage::StoreErrorKind::Internal,
                format!(
                    "Volga's data is read from its Redis (redis:// or rediss://) or its CQL cluster (scylla:// or cassandra://), not `{scheme}://`"
                ),
            ));
        }
        if url.starts_with("scylla://") || url.starts_with("cassandra://") {
            let quiet = crate::logs::quiet_driver();
            let source = VolgaCqlReader::connect(url, timeout)
                .await
                .map(|s| Self::Cql(Box::new(s)));
            drop(quiet);
            source
        } else {
            VolgaReader::connect(url, timeout).await.map(Self::Redis)
        }
    }

    /// The page at `cursor` (`"0"`: the first); its `next` is `"0"` after the last.
    async fn page(&self, cursor: &str, count: u32) -> Result<Page, oka_storage::StoreError> {
        match self {
            Self::Redis(r) => r.page(cursor, count).await,
            Self::Cql(c) => {
                let start = (cursor != "0").then(|| from_hex(cursor)).flatten();
                let (rows, next) = c.page(start, count).await?;
                let hashes = rows
                    .into_iter()
                    .map(|r| VolgaHash {
                        key: format!("hot_features row ({}, {})", r.feature, r.keys_json),
                        feature: r.feature,
                        fields: [
                            (
                                volga_layout::KEYS_FIELD.to_owned(),
                                r.keys_json.into_bytes(),
                            ),
                            (
                                volga_layout::VALUES_FIELD.to_owned(),
                                r.values_json.into_bytes(),
                            ),
                        ]
                        .into(),
                    })
                    .collect();
                let next = next.map_or_else(|| "0".to_owned(), |b| to_hex(&b));
                Ok(Page { hashes, next })
            }
        }
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

/// Runs the copy (or its next slice); `Ok(true)` when every record so far was
/// copied.
pub fn run(args: &VolgaArgs, natives: &NativeUdfs) -> Result<bool> {
    let origin = args.spec.display().to_string();
    let yaml = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("reading the spec {origin}"))?;
    let registry = Registry::from_yaml(&origin, &yaml, natives)
        .map_err(|e| anyhow::anyhow!("invalid spec:\n{e}"))?;
    args.store.required("migrate volga")?;
    let mut state = State::open(args)?;
    if state.finished {
        print_summary(&state, &args.state, Duration::ZERO);
        println!(
            "(already finished; pass --restart to copy again, or remove {})",
            args.state.display()
        );
        return Ok(state.unmapped.is_empty());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    let started = Instant::now();
    rt.block_on(async {
        let timeout = Duration::from_millis(args.store.store_timeout_ms.max(5000));
        let source = VolgaData::connect(&args.from, timeout)
            .await
            .map_err(|e| match e.kind {
                // The URL itself (its scheme, its options): the message says what.
                oka_storage::StoreErrorKind::Misconfigured
                | oka_storage::StoreErrorKind::Internal => anyhow::anyhow!(
                    "--from `{}`: {}",
                    stores::redact(&args.from),
                    stores::reason(&e)
                ),
                _ => stores::unreachable_at("read Volga's data", &args.from, &e),
            })?;
        let store = stores::open_for_writes(&args.store, "migrate volga").await?;
        copy(&source, &*store, &registry, args, &mut state).await
    })?;
    print_summary(&state, &args.state, started.elapsed());
    Ok(state.unmapped.is_empty())
}

/// Copies page after page until the scan ends, saving the state after each.
async fn copy(
    source: &VolgaData,
    store: &dyn FeatureStore,
    registry: &Registry,
    args: &VolgaArgs,
    state: &mut State,
) -> Result<()> {
    let event_time = Timestamp(state.event_time_us);
    let mut last_report = Instant::now();
    if state.pages > 0 {
        eprintln!(
            "oka migrate volga: resuming the copy in {} after page {} ({})",
            args.state.display(),
            state.pages,
            copied_text(state)
        );
    }
    let mut pages = 0;
    loop {
        let page = source.page(&state.cursor, args.batch).await.map_err(|e| {
            anyhow::anyhow!(
                "reading Volga's data at {}: {}; {} so far; run the same command again to resume",
                state.from,
                stores::reason(&e),
                copied_text(state)
            )
        })?;
        let batches = map_page(registry, &page.hashes, event_time, state);
        for (name, (feature, records)) in &batches {
            write(store, feature, records).await.map_err(|e| {
                anyhow::anyhow!(
                    "writing `{name}` into the store at {}: {}; {} so far; run the same command again to resume",
                    state.to,
                    stores::reason(&e),
                    copied_text(state)
                )
            })?;
            *state.copied.entry((*name).to_owned()).or_default() += records.len() as u64;
        }
        state.pages += 1;
        state.finished = page.next == "0";
        state.cursor = page.next;
        state.save(&args.state)?;
        pages += 1;
        if state.finished {
            return Ok(());
        }
        if args.max_pages.is_some_and(|m| pages >= m) {
            eprintln!(
                "oka migrate volga: stopped after {pages} pages (--max-pages); run the same command again to go on"
            );
            return Ok(());
        }
        if last_report.elapsed() >= Duration::from_secs(1) {
            eprintln!(
                "oka migrate volga: {} after {} pages",
                copied_text(state),
                state.pages
            );
            last_report = Instant::now();
        }
    }
}

/// A page's hashes as records, by feature; what does not map is counted in `state`.
fn map_page<'r>(
    registry: &'r Registry,
    hashes: &[VolgaHash],
    event_time: Timestamp,
    state: &mut State,
) -> BTreeMap<&'r str, (&'r Feature, Records)> {
    let mut batches: BTreeMap<&str, (&Feature, Records)> = BTreeMap::new();
    for hash in hashes {
        let Some(feature) = registry
            .feature_id(&hash.feature)
            .map(|id| registry.feature(id))
            .filter(|f| f.is_pipeline())
        else {
            *state.not_in_spec.entry(hash.feature.clone()).or_default() += 1;
            continue;
        };
        match map_hash(feature, hash, event_time) {
            Ok(record) => batches
                .entry(&feature.name)
                .or_insert((feature, Vec::new()))
                .1
                .push(record),
            Err(why) => state.unmapped(hash, why.message()),
        }
    }
    batches
}

/// A hash as a record of `feature`: its key from `keys_json`, its values from
/// `values_json`, its event time from the hash or `event_time`.
fn map_hash(
    feature: &Feature,
    hash: &VolgaHash,
    event_time: Timestamp,
) -> Result<(EntityKey, Row), volga_layout::MapError> {
    let field = |name: &str| {
        hash.fields
            .get(name)
            .ok_or_else(|| volga_layout::MapError::new(format!("the hash has no `{name}` field")))
    };
    let keys = volga_layout::keys_from_json(feature, field(volga_layout::KEYS_FIELD)?)?;
    let time = hash
        .fields
        .get(feature.entity.timestamp_name())
        .map(Vec::as_slice);
    let row = volga_layout::record(
        feature,
        &keys,
        field(volga_layout::VALUES_FIELD)?,
        time,
        event_time,
    )?;
    Ok((EntityKey::encode(&keys), row))
}

/// One batched write, retried on transient errors.
async fn write(
    store: &dyn FeatureStore,
    feature: &Feature,
    records: &[(EntityKey, Row)],
) -> Result<(), oka_storage::StoreError> {
    let mut attempt = 1;
    loop {
        match store.write(feature, records).await {
            Err(e) if e.kind.is_transient() && attempt < ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn copied_text(state: &State) -> String {
    let total: u64 = state.copied.values().sum();
    let unmapped: u64 = state.unmapped.values().sum();
    format!("{total} records copied, {unmapped} not mapped")
}

fn print_summary(state: &State, path: &Path, elapsed: Duration) {
    println!(
        "oka migrate volga: from {} to {}: {}: {} in {:.1} s ({} pages; state in {})",
        state.from,
        state.to,
        if state.finished {
            "finished"
        } else {
            "not finished"
        },
        copied_text(state),
        elapsed.as_secs_f64(),
        state.pages,
        path.display()
    );
    for (feature, n) in &state.copied {
        println!("  copied      {feature}: {n}");
    }
    for (feature, n) in &state.unmapped {
        println!(
            "  not mapped  {feature}: {n} (they do not fit the spec's entity; first ones below)"
        );
    }
    for e in &state.examples {
        println!("    {e}");
    }
    for (feature, n) in &state.not_in_spec {
        println!(
            "  not in the spec  {feature}: {n} hashes (add a pipeline feature `{feature}` to the spec to copy them)"
        );
    }
    println!(
        "  records without an event time were given {}",
        Timestamp(state.event_time_us).to_rfc3339()
    );
}
