//! Store URLs to backends. This is the only place that names concrete backends
//! (quickwit's storage resolver pattern).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use oka_redis::tracking::Tracked;
use oka_redis::{RedisOptions, RedisStore};
use oka_scylla::{Consistency, Replication, ScyllaOptions, ScyllaStore};
use oka_storage::{Caching, Coalescing, FeatureStore, MemoryStore, RecordCache};

/// How to reach the store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// The store URL: `redis://[user:pass@]host:port[/db]`,
    /// `redis-cluster://host:port[?node=host:port…]`, `redis-sentinel://…`; `rediss…`
    /// for TLS; `scylla://[user:pass@]host[:port][,host…][/keyspace]` (or
    /// `cassandra://…`) for ScyllaDB/Cassandra; `memory://` for a store inside this
    /// process, lost at exit (`oka serve`'s default, with a warning; for `oka
    /// ingest`, a dry run). An option the scheme does not take is refused.
    #[arg(long, env = "OKA_STORE", hide_env_values = true)]
    pub store: Option<String>,
    /// Timeout of one store command, milliseconds.
    #[arg(long, env = "OKA_STORE_TIMEOUT_MS", default_value_t = 1000)]
    pub store_timeout_ms: u64,
    /// Timeout of connecting to the store, milliseconds.
    #[arg(long, env = "OKA_STORE_CONNECT_TIMEOUT_MS", default_value_t = 5000)]
    pub store_connect_timeout_ms: u64,
    /// Connections to the store (Redis: the pool, default 4; CQL: per shard, or per
    /// node on Cassandra, default 1).
    #[arg(long, env = "OKA_STORE_POOL_SIZE")]
    pub store_pool_size: Option<usize>,
    /// Prefix of every key the store writes.
    #[arg(long, env = "OKA_STORE_KEY_PREFIX", default_value = "oka:")]
    pub store_key_prefix: String,
    /// For `rediss://`: a PEM file of CA certificates to trust instead of the
    /// system's.
    #[arg(long, env = "OKA_STORE_TLS_CA_FILE")]
    pub store_tls_ca_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub cql: CqlArgs,
}

/// How the server reads from the store (`oka serve` only; other commands only
/// write and take the defaults).
#[derive(Debug, Clone, clap::Args)]
pub struct ReadArgs {
    /// Redis: give each serving worker a connection of its own, driven by its own
    /// thread (`false`: all workers share the pool, driven by the main thread).
    #[arg(long, env = "OKA_STORE_WORKER_CONNECTIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub store_worker_connections: bool,
    /// Redis and CQL: merge a worker's concurrent reads of the same feature and query
    /// into one store call (one `MGET` on Redis) while an earlier one is in flight.
    #[arg(long, env = "OKA_STORE_COALESCE_READS", default_value_t = true, action = clap::ArgAction::Set)]
    pub store_coalesce_reads: bool,
    /// Redis and CQL: coalesce reads across workers too (one queue per feature and
    /// query for the whole process, the call going out on the leading worker's
    /// connection), instead of per worker.
    #[arg(long, env = "OKA_STORE_COALESCE_ACROSS_WORKERS", default_value_t = false, action = clap::ArgAction::Set)]
    pub store_coalesce_across_workers: bool,
    /// CQL: consistency of reads (`local_one`, `local_quorum`, `one`, `quorum`, …).
    #[arg(long, env = "OKA_STORE_READ_CONSISTENCY", default_value = "local_one", value_parser = oka_scylla::parse_consistency)]
    pub store_read_consistency: Consistency,
    /// CQL: send one speculative read to another replica after this many
    /// milliseconds without an answer (0: off).
    #[arg(long, env = "OKA_STORE_SPECULATIVE_MS", default_value_t = 0)]
    pub store_speculative_ms: u64,
    /// CQL: single-partition reads in flight per feature read.
    #[arg(long, env = "OKA_STORE_READ_CONCURRENCY", default_value_t = ScyllaOptions::default().read_concurrency)]
    pub store_read_concurrency: usize,
    /// A read cache of pipeline records in this process: `off`; `ttl:MS`, records
    /// serve for at most MS milliseconds after they were read (any store; a write
    /// elsewhere is seen within MS); `tracking`, records serve until Redis says they
    /// changed (Redis 6+ client tracking; exact, and off while tracking is down).
    #[arg(long, env = "OKA_CACHE", default_value = "off", value_parser = CacheMode::parse)]
    pub cache: CacheMode,
    /// The read cache's size bound, in bytes (records, keys and bookkeeping).
    #[arg(long, env = "OKA_CACHE_MAX_BYTES", default_value_t = 256 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub cache_max_bytes: u64,
}

/// `--cache`: how (and whether) reads are cached in the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// No cache.
    Off,
    /// Entries serve for at most this long.
    Ttl(Duration),
    /// Entries serve until the store invalidates them (Redis client tracking).
    Tracking,
}

/// A `--cache` value that is not `off`, `ttl:MS` or `tracking`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: give `off`, `ttl:MS` (milliseconds, e.g. ttl:500) or `tracking`")]
pub struct BadCacheMode(String);

impl CacheMode {
    /// Parses `off`, `ttl:MS` or `tracking`.
    pub fn parse(s: &str) -> Result<Self, BadCacheMode> {
        match s {
            "off" => Ok(Self::Off),
            "tracking" => Ok(Self::Tracking),
            _ => s
                .strip_prefix("ttl:")
                .and_then(|ms| ms.parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(|ms| Self::Ttl(Duration::from_millis(ms)))
                .ok_or_else(|| BadCacheMode(s.to_owned())),
        }
    }
}

impl Default for ReadArgs {
    fn default() -> Self {
        Self {
            store_worker_connections: true,
            store_coalesce_reads: true,
            store_coalesce_across_workers: false,
            store_read_consistency: Consistency::LocalOne,
            store_speculative_ms: 0,
            store_read_concurrency: ScyllaOptions::default().read_concurrency,
            cache: CacheMode::Off,
            cache_max_bytes: 256 << 20,
        }
    }
}

/// Options of the ScyllaDB/Cassandra store (`scylla://`, `cassandra://`).
#[derive(Debug, Clone, clap::Args)]
pub struct CqlArgs {
    /// CQL: consistency of writes.
    #[arg(long, env = "OKA_STORE_WRITE_CONSISTENCY", default_value = "local_quorum", value_parser = oka_scylla::parse_consistency)]
    pub store_write_consistency: Consistency,
    /// CQL: the local data center; requests go only to its nodes (token-aware within
    /// it). Unset: any node.
    #[arg(long, env = "OKA_STORE_LOCAL_DC")]
    pub store_local_dc: Option<String>,
    /// CQL: partition writes in flight per write batch.
    #[arg(long, env = "OKA_STORE_WRITE_CONCURRENCY", default_value_t = ScyllaOptions::default().write_concurrency)]
    pub store_write_concurrency: usize,
    /// CQL: create the keyspace and table if missing (else they must exist; see
    /// `oka schema`).
    #[arg(long, env = "OKA_STORE_CREATE_SCHEMA")]
    pub store_create_schema: bool,
    /// CQL: the keyspace's replication when created: `simple:RF` or
    /// `DC:RF[,DC:RF…]` (NetworkTopologyStrategy; production: 3 per DC).
    #[arg(long, env = "OKA_STORE_REPLICATION", default_value = "simple:1", value_parser = Replication::parse)]
    pub store_replication: Replication,
}

/// Puts the read cache in front of `store` as `--cache` says; `redis` is the Redis
/// URL and the keys to track, which `--cache tracking` needs.
async fn cached(
    reads: &ReadArgs,
    store: Arc<dyn FeatureStore>,
    redis: Option<(&str, Tracked)>,
) -> Result<Arc<dyn FeatureStore>> {
    let ttl = match reads.cache {
        CacheMode::Off => return Ok(store),
        CacheMode::Ttl(ttl) => Some(ttl),
        CacheMode::Tracking => None,
    };
    let cache = Arc::new(RecordCache::new(reads.cache_max_bytes, ttl));
    let caching = Caching::new(store, Arc::clone(&cache));
    if ttl.is_some() {
        return Ok(Arc::new(caching));
    }
    let Some((url, tracked)) = redis else {
        bail!(
            "--cache tracking needs a Redis store (it uses Redis's client tracking to hear of every change); for other stores use --cache ttl:MS"
        );
    };
    if !caching.capabilities().tracking {
        bail!(
            "--cache tracking works on Oka's and Feast's Redis layouts, not `layout=volga`; use --cache ttl:MS there"
        );
    }
    let tracker = oka_redis::tracking::Tracker::start(url, tracked, cache, Duration::from_secs(5))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "--cache tracking: turning Redis client tracking on at {} failed: {} (it needs Redis 6 or newer)",
                redact(url),
                reason(&e)
            )
        })?;
    Ok(Arc::new(caching.with_guard(Arc::new(tracker))))
}

/// Wraps a networked store in read coalescing unless `--store-coalesce-reads false`.
fn coalesced(reads: &ReadArgs, store: Arc<dyn FeatureStore>) -> Arc<dyn FeatureStore> {
    if reads.store_coalesce_reads {
        Arc::new(
            Coalescing::new(store, oka_storage::coalesce::DEFAULT_MAX_BATCH_KEYS)
                .across_workers(reads.store_coalesce_across_workers),
        )
    } else {
        store
    }
}

impl StoreArgs {
    /// The store URL: the one given, else `memory://`.
    pub fn url(&self) -> &str {
        self.store.as_deref().unwrap_or(MEMORY)
    }

    /// The URL given, for a command that writes into a store from its own process
    /// (`oka ingest`, `oka source mock`): one must be named, since an in-memory
    /// store there goes with the process. `memory://` named explicitly is a dry
    /// run (records checked, then discarded), said so on stderr.
    pub fn required(&self, command: &str) -> Result<&str> {
        match self.store.as_deref() {
            None => bail!(
                "`oka {command}` needs a store to write into: give --store (or OKA_STORE), e.g. --store redis://127.0.0.1:6379 (or --store memory:// for a dry run that checks the records and keeps nothing)"
            ),
            Some(url) => {
                if url.starts_with("memory:") {
                    eprintln!(
                        "note: --store memory:// is a dry run: the records are checked and written to a store inside this process, which is gone when `oka {command}` exits"
                    );
                }
                Ok(url)
            }
        }
    }
}

/// The in-process store's URL.
pub const MEMORY: &str = "memory://";

/// Opens the store described by `args`. Its URL is checked first (scheme and
/// options); a store that cannot be reached is reported by its URL, with what
/// went wrong and what to check.
pub async fn open(args: &StoreArgs, reads: &ReadArgs) -> Result<Arc<dyn FeatureStore>> {
    open_with(args, reads, None).await
}

/// What a `layout=feast` Redis store reads and writes by.
#[derive(Debug, Clone)]
pub struct FeastLayout {
    /// The registry naming the views (swapped by reloads).
    pub registry: oka_feast::SharedRegistry,
    /// feature_store.yaml's `key_ttl_seconds`.
    pub key_ttl_seconds: Option<u64>,
}

/// Refuses `--cache tracking` on a store whose changes it cannot hear of all.
fn check_tracking(reads: &ReadArgs, scheme: &str) -> Result<()> {
    if reads.cache != CacheMode::Tracking {
        return Ok(());
    }
    if !scheme.starts_with("redis") {
        bail!(
            "--cache tracking needs a Redis store (it uses Redis's client tracking to hear of every change); for other stores use --cache ttl:MS"
        );
    }
    if scheme.ends_with("-cluster") {
        // Client tracking is per node: one connection hears of the keys of
        // its own node only, so a cluster's other nodes' changes would be missed.
        bail!(
            "--cache tracking does not work on a Redis Cluster (Redis tracks keys per node, and Oka's tracking connection hears one node); use --cache ttl:MS there"
        );
    }
    Ok(())
}

/// [`open`], with what a `layout=feast` Redis store reads and writes by.
pub async fn open_with(
    args: &StoreArgs,
    reads: &ReadArgs,
    feast: Option<FeastLayout>,
) -> Result<Arc<dyn FeatureStore>> {
    let url = args.url();
    let scheme = url.split_once("://").map_or(url, |(s, _)| s);
    check_tracking(reads, scheme)?;
    match scheme {
        "memory" if url != MEMORY => bail!(
            "the store URL `{}`: memory:// takes no host, path or options",
            redact(url)
        ),
        "memory" if reads.cache != CacheMode::Off => bail!(
            "--cache is for Redis and CQL stores; memory:// is already in this process and needs none (drop --cache, or give --store redis://…)"
        ),
        "memory" => Ok(Arc::new(MemoryStore::new())),
        "redis" | "rediss" | "redis-cluster" | "rediss-cluster" | "redis-sentinel"
        | "rediss-sentinel" => {
            let options = RedisOptions {
                pool_size: args.store_pool_size.unwrap_or(4),
                command_timeout: Duration::from_millis(args.store_timeout_ms),
                connect_timeout: Duration::from_millis(args.store_connect_timeout_ms),
                key_prefix: args.store_key_prefix.clone(),
                tls_ca_file: args.store_tls_ca_file.clone(),
                per_worker: reads.store_worker_connections,
                feast_key_ttl: feast.as_ref().and_then(|f| f.key_ttl_seconds),
                feast: feast.map(|f| f.registry),
            };
            oka_redis::url::check_options(url)
                .map_err(|e| anyhow::anyhow!("the store URL `{}`: {e}", redact(url)))?;
            oka_redis::url::take_layout(url)
                .map_err(|e| anyhow::anyhow!("the store URL `{}`: {e}", redact(url)))?;
            let tracked = match &options.feast {
                Some(registry) => Tracked::Feast(Arc::clone(registry)),
                None => Tracked::Oka {
                    prefix: options.key_prefix.clone(),
                },
            };
            let store = RedisStore::connect(url, options)
                .await
                .map_err(|e| unreachable(url, &e))?;
            let store = coalesced(reads, Arc::new(store));
            cached(reads, store, Some((url, tracked))).await
        }
        "scylla" | "cassandra" => {
            let cql = &args.cql;
            let options = ScyllaOptions {
                read_consistency: reads.store_read_consistency,
                write_consistency: cql.store_write_consistency,
                local_dc: cql.store_local_dc.clone(),
                request_timeout: Duration::from_millis(args.store_timeout_ms),
                connect_timeout: Duration::from_millis(args.store_connect_timeout_ms),
                speculative_delay: (reads.store_speculative_ms > 0)
                    .then(|| Duration::from_millis(reads.store_speculative_ms)),
                read_concurrency: reads.store_read_concurrency,
                write_concurrency: cql.store_write_concurrency,
                connections_per_shard: args.store_pool_size.unwrap_or(1),
                create_schema: cql.store_create_schema,
                replication: cql.store_replication.clone(),
            };
            oka_scylla::StoreUrl::parse(url)
                .map_err(|e| anyhow::anyhow!("the store URL `{}`: {e}", redact(url)))?;
            // The driver logs a failed connect as Debug dumps; `unreachable` says it once.
            let quiet = crate::logs::quiet_driver();
            let store = ScyllaStore::connect(url, options)
                .await
                .map_err(|e| unreachable(url, &e))?;
            drop(quiet);
            cached(reads, coalesced(reads, Arc::new(store)), None).await
        }
        other => bail!(
            "unsupported store URL scheme `{other}://` (this build supports memory://, redis[s]://, redis[s]-cluster://, redis[s]-sentinel://, scylla://, cassandra://)"
        ),
    }
}

/// Opens the store for `oka {command}`, which writes into it: a read-only store
/// (Volga's layout) is refused, naming why.
pub async fn open_for_writes(args: &StoreArgs, command: &str) -> Result<Arc<dyn FeatureStore>> {
    let store = open(args, &ReadArgs::default()).await?;
    if let Some(why) = store.capabilities().latest_only() {
        bail!(
            "`oka {command}` writes into the store at {}, but {why}: write into a store in Oka's layout (without `layout=volga`), or let Volga's pipeline write",
            redact(args.url())
        );
    }
    Ok(store)
}

/// Checks that the spec fits the store (a store in Volga's layout answers only
/// `latest` and runs no sources): `Err((message, public))`, the message naming the
/// spec file and the store, the public one neither (for reload answers).
pub fn check_fit(
    store: &dyn FeatureStore,
    registry: &oka_core::Registry,
    url: &str,
) -> Result<(), (String, String)> {
    oka_storage::check_registry(store, registry).map_err(|e| {
        let problems = e
            .problems
            .iter()
            .map(|p| format!("  {p}"))
            .collect::<Vec<_>>()
            .join("\n");
        (
            format!(
                "the spec {} does not fit the store at {}:\n{problems}",
                registry.origin(),
                redact(url)
            ),
            format!("the spec does not fit the store:\n{problems}"),
        )
    })
}

/// A store that could not be opened: its URL (password redacted), what went
/// wrong in the backend's words, and what to check for that kind of failure.
fn unreachable(url: &str, e: &oka_storage::StoreError) -> anyhow::Error {
    unreachable_at("open the store", url, e)
}

/// A store at `url` that `action` (`open the store`, `read Volga's data`) could
/// not use, said as [`unreachable`] says it.
pub(crate) fn unreachable_at(
    action: &str,
    url: &str,
    e: &oka_storage::StoreError,
) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot {action} at {}: {}. {}",
        redact(url),
        reason(e),
        upper_first(e.kind.advice())
    )
}

/// What went wrong in a store call, in words: the backend's message (drivers'
/// Debug output never reaches it; see `oka_redis::failure`).
pub(crate) fn reason(e: &oka_storage::StoreError) -> String {
    e.message.trim_end_matches('.').to_owned()
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect::<String>() + ".")
        .unwrap_or_default()
}

/// The URL with any password replaced (`user:***@`, `sentinelPassword=***`), for
/// logs and errors.
pub fn redact(url: &str) -> String {
    let (out, after) = match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].split_once(':') {
            Some((user, _)) => (format!("{}{user}:***{}", &url[..s + 3], &url[at..]), at),
            None => (url.to_owned(), at),
        },
        _ => (url.to_owned(), 0),
    };
    // Options after the credentials: a password in them is masked too.
    let after = out.len() - (url.len() - after);
    let Some(q) = out[after..].find('?').map(|q| after + q) else {
        return out;
    };
    let options: Vec<String> = out[q + 1..]
        .split('&')
        .map(|o| match o.split_once('=') {
            Some((k, _)) if k.to_lowercase().contains("password") => format!("{k}=***"),
            _ => o.to_owned(),
        })
        .collect();
    format!("{}?{}", &out[..q], options.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact("redis://u:secret@h"), "redis://u:***@h");
        assert_eq!(redact("memory://"), "memory://");
        assert_eq!(
            redact("redis-sentinel://u:p@h:26379?sentinelServiceName=m&sentinelPassword=s&node=b"),
            "redis-sentinel://u:***@h:26379?sentinelServiceName=m&sentinelPassword=***&node=b"
        );
        assert_eq!(redact("redis://h?x=a@b:c"), "redis://h?x=a@b:c");
        assert_eq!(
            redact("redis://:pa?ss@h:1?node=x"),
            "redis://:***@h:1?node=x"
        );
        assert_eq!(redact("redis://h:1?password=p"), "redis://h:1?password=***");
    }

    async fn open_default(args: &StoreArgs) -> Result<Arc<dyn FeatureStore>> {
        open(args, &ReadArgs::default()).await
    }

    fn args(url: &str) -> StoreArgs {
        StoreArgs {
            store: Some(url.to_owned()),
            store_timeout_ms: 100,
            store_connect_timeout_ms: 300,
            store_pool_size: Some(1),
            store_key_prefix: "oka:".to_owned(),
            store_tls_ca_file: None,
            cql: CqlArgs {
                store_write_consistency: oka_scylla::parse_consistency("local_quorum").unwrap(),
                store_local_dc: None,
                store_write_concurrency: 8,
                store_create_schema: false,
                store_replication: Replication::default(),
            },
        }
    }

    #[tokio::test]
    async fn unknown_schemes_are_refused() {
        let err = open_default(&args("bogus://x"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("bogus"), "{err}");
        assert!(open_default(&args("memory://")).await.is_ok());
    }

    #[test]
    fn store_errors_are_said_with_what_to_check_by_kind() {
        let said = |kind, message: &str| {
            let e = oka_storage::StoreError::new(kind, message.to_owned());
            unreachable("redis://u:pw@h:1", &e).to_string()
        };
        assert_eq!(
            said(
                oka_storage::StoreErrorKind::Unauthorized,
                "redis refused the credentials: WRONGPASS invalid username-password pair"
            ),
            "cannot open the store at redis://u:***@h:1: redis refused the credentials: WRONGPASS invalid username-password pair. Check the user and password in the store URL (or the Secret that holds them) against the store's, and the user's ACL."
        );
        assert!(
            said(oka_storage::StoreErrorKind::Misconfigured, "x")
                .ends_with("Check the store URL's scheme (rediss:// for TLS) and --store-tls-ca-file, the database or keyspace, and the layout.")
        );
    }

    #[tokio::test]
    async fn unreachable_redis_is_a_clear_error_without_the_password() {
        let err = open_default(&args("redis://:hunter2@127.0.0.1:1"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "cannot open the store at redis://:***@127.0.0.1:1: nothing listens at 127.0.0.1:1 (the connection was refused). Check that the store is running and reachable from this machine."
        );
    }
}
