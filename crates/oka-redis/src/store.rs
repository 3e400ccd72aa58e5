//! [`RedisStore`]: a [`FeatureStore`] on a fred connection pool.
//!
//! Layout, per (feature, canonical key), both keys in one hash slot:
//! - `{prefix}{<feature>|<key>}:l` — STRING, the newest record (for `latest`).
//! - `{prefix}{<feature>|<key>}:h` — ZSET, the history: member = record, score =
//!   event time in microseconds, trimmed to the feature's `history` newest.
//! - With a feature TTL, both keys expire that long after the key's last write.
//!
//! A write is one Lua script call per record (pipelined): it replaces any record with
//! the same event time, trims the history, and sets `:l` to the highest-scored
//! member, so an out-of-order record never becomes the latest. Reads are one round
//! trip: `MGET` of the `:l` keys (a pipeline of `GET`s on a cluster), or a pipeline
//! of `ZRANGE`/`ZRANGEBYSCORE` on the `:h` keys.

use std::time::Duration;

use async_trait::async_trait;
use fred::clients::{Pool, WithOptions};
use fred::error::Error as FredError;

use crate::failure::{Connection, map_error, unreachable};
use fred::prelude::*;
use fred::types::Value as RedisValue;
use fred::types::scripts::Script;
use oka_core::registry::Retention;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row};
use oka_storage::{FeatureStore, StoreError, StoreErrorKind, codec};

use crate::url::Layout;
use crate::volga_layout;

mod feast;

/// Commands per write pipeline.
const WRITE_CHUNK: usize = 1000;

/// KEYS: latest, history. ARGV: event time (µs), record, history bound, TTL in ms
/// (0: none).
const WRITE_SCRIPT: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
local n = redis.call('ZCARD', KEYS[2])
local bound = tonumber(ARGV[3])
if n > bound then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - bound - 1)
end
local newest = redis.call('ZRANGE', KEYS[2], -1, -1)
redis.call('SET', KEYS[1], newest[1])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return n
";

/// Connection settings.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Connections in the pool.
    pub pool_size: usize,
    /// Per-command timeout (0: none).
    pub command_timeout: Duration,
    /// Connect (and TLS handshake) timeout.
    pub connect_timeout: Duration,
    /// Prefix of every key.
    pub key_prefix: String,
    /// For `rediss://`: PEM file of the CA(s) to trust instead of the system's.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Give each serving worker a connection of its own, driven by the worker's
    /// runtime ([`FeatureStore::for_worker`]); otherwise every worker's commands go
    /// through the pool's connections, driven by the runtime that connected it.
    pub per_worker: bool,
    /// The Feast registry naming the views of a store in Feast's layout (shared
    /// with the reloader, which swaps in what `feast apply` changed). Given, the
    /// store is read and written in Feast's layout, whatever the URL says
    /// (`layout=volga` is refused).
    pub feast: Option<oka_feast::SharedRegistry>,
    /// Feast's `key_ttl_seconds`: each write in Feast's layout sets this expiry on
    /// the entity's hash, as Feast's SDK does.
    pub feast_key_ttl: Option<u64>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            pool_size: 4,
            command_timeout: Duration::from_millis(1000),
            connect_timeout: Duration::from_secs(5),
            key_prefix: "oka:".to_owned(),
            tls_ca_file: None,
            per_worker: true,
            feast: None,
            feast_key_ttl: None,
        }
    }
}

/// The Redis feature store.
pub struct RedisStore {
    pool: Pool,
    clustered: bool,
    /// Oka's layout, or Volga's (read-only, latest only).
    layout: Layout,
    prefix: String,
    script: Script,
    /// How to connect again (for per-worker clients).
    url: String,
    options: RedisOptions,
    /// The connections' latest failure, for commands that fail without one.
    conn: Connection,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("clustered", &self.clustered)
            .field("layout", &self.layout)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// The URL schemes accepted (`rediss` variants use TLS).
const SCHEMES: &[&str] = &[
    "redis",
    "rediss",
    "redis-cluster",
    "rediss-cluster",
    "redis-sentinel",
    "rediss-sentinel",
];

/// A TLS connector trusting only the CA certificates in `path` (PEM).
fn tls_with_ca(path: &std::path::Path) -> Result<fred::types::config::TlsConnector, StoreError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let bad = |m: String| StoreError::new(StoreErrorKind::Misconfigured, m);
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(format!("reading {}: {e}", path.display())))?
    {
        let cert = cert.map_err(|e| bad(format!("{}: {e}", path.display())))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(bad(format!("{}: no certificates", path.display())));
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config.into())
}

/// The history bound and the TTL in milliseconds (0: none).
fn retention(feature: &Feature) -> (i64, i64) {
    let Retention { history, ttl } = feature.retention();
    let ttl_ms = ttl.map_or(0, |t| {
        i64::try_from(t.as_millis()).unwrap_or(i64::MAX).max(1)
    });
    (i64::try_from(history).unwrap_or(i64::MAX), ttl_ms)
}

impl RedisStore {
    /// Connects to `url` (`redis://[user:pass@]host:port[/db]`,
    /// `redis-cluster://host:port[?node=host:port…]`, `redis-sentinel://…`, and the
    /// `rediss…` forms for TLS, which trust the system's CAs or
    /// `options.tls_ca_file`) and loads the write script. Fails if the server cannot
    /// be reached.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let pool_size = options.pool_size;
        Self::connect_pool(url, options, pool_size).await
    }

    async fn connect_pool(
        url: &str,
        options: RedisOptions,
        pool_size: usize,
    ) -> Result<Self, StoreError> {
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        if !SCHEMES.contains(&scheme) {
            return Err(StoreError::new(
                StoreErrorKind::Misconfigured,
                format!(
                    "invalid redis url scheme `{scheme}`: expected one of {}",
                    SCHEMES.join(", ")
                ),
            ));
        }
        crate::url::check_options(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Misconfigured, e.to_string()))?;
        let (driver_url, layout) = crate::url::take_layout(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Misconfigured, e.to_string()))?;
        let layout = feast::layout(layout, &options)?;
        let mut config = Config::from_url(&driver_url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Misconfigured,
                format!("invalid redis url: {}", e.details()),
            )
        })?;
        if let Some(ca) = &options.tls_ca_file {
            if config.tls.is_none() {
                return Err(StoreError::new(
                    StoreErrorKind::Misconfigured,
                    "a TLS CA file was given but the url is not rediss://",
                ));
            }
            config.tls = Some(tls_with_ca(ca)?.into());
        }
        let clustered = config.server.is_clustered();
        let servers = config.server.hosts();
        let mut builder = Builder::from_config(config);
        builder
            .with_connection_config(|c| {
                c.connection_timeout = options.connect_timeout;
                c.internal_command_timeout = options.connect_timeout;
                // A command in flight when the connection drops is not retried:
                // the caller gets an error at once instead of waiting out a reconnect.
                c.max_command_attempts = 1;
                // Small commands go out at once: with Nagle's algorithm on (fred's
                // default leaves the OS's), a lone GET could wait for the ACK of the
                // previous one (delayed ACK: up to 40 ms).
                c.tcp.nodelay = Some(true);
            })
            .with_performance_config(|p| {
                p.default_command_timeout = options.command_timeout;
            })
            .set_policy(reconnect_policy());
        let pool = builder
            .build_pool(pool_size.max(1))
            .map_err(|e| map_error(&e))?;
        if let Err(e) = pool.init().await {
            return Err(unreachable(map_error(&e), &servers).await);
        }
        let conn = Connection::default();
        let script = Script::from_lua(WRITE_SCRIPT);
        for client in pool.clients() {
            conn.watch(client);
            script.load(client).await.map_err(|e| map_error(&e))?;
        }
        Ok(Self {
            pool,
            clustered,
            layout,
            prefix: options.key_prefix.clone(),
            script,
            url: url.to_owned(),
            options,
            conn,
        })
    }

    fn key(&self, feature: &Feature, key: &EntityKey, suffix: &str) -> String {
        // `<prefix>{<feature>|<key>}:<suffix>`, built without the formatter (once per
        // key read).
        let key = key.as_str();
        let mut out = String::with_capacity(
            self.prefix.len() + feature.name.len() + key.len() + suffix.len() + 4,
        );
        out.push_str(&self.prefix);
        out.push('{');
        out.push_str(&feature.name);
        out.push('|');
        out.push_str(key);
        out.push_str("}:");
        out.push_str(suffix);
        out
    }

    /// One script call per record, sent concurrently on one client so fred
    /// pipelines them on its connection; the first error, if any.
    async fn write_chunk(
        &self,
        feature: &Feature,
        chunk: &[(EntityKey, Row)],
    ) -> Result<(), FredError> {
        let (bound, ttl_ms) = retention(feature);
        let client = self.client();
        let calls = chunk.iter().map(|(key, row)| {
            let keys = vec![self.key(feature, key, "l"), self.key(feature, key, "h")];
            let args: Vec<RedisValue> = vec![
                RedisValue::from(row.event_time.0),
                RedisValue::Bytes(codec::encode_row(&feature.entity, row).into()),
                RedisValue::from(bound),
                RedisValue::from(ttl_ms),
            ];
            let client = &client;
            async move {
                let _: RedisValue = client
                    .evalsha(self.script.sha1().clone(), keys, args)
                    .await?;
                Ok::<(), FredError>(())
            }
        });
        futures::future::join_all(calls).await.into_iter().collect()
    }

    /// A `latest` read in Volga's layout: one `HMGET` of `values_json` and the
    /// entity's timestamp field per key, pipelined (one round trip). A record
    /// without an event time gets the read's time, as Volga's reader gave it.
    async fn read_volga(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        if *query != Query::Latest {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!(
                    "redis: a `{}` read of `{}` in Volga's layout, which holds only the latest record",
                    query.name(),
                    feature.name
                ),
            ));
        }
        let corrupt = |key: &str, e: volga_layout::MapError| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("redis: Volga's hash `{key}`: {e}"),
            )
        };
        let names = keys
            .iter()
            .map(|k| volga_layout::redis_key(feature, k).map_err(|e| corrupt(k.as_str(), e)))
            .collect::<Result<Vec<String>, _>>()?;
        let client = self.client();
        let pipeline = client.pipeline();
        for name in &names {
            let fields = vec![volga_layout::VALUES_FIELD, feature.entity.timestamp_name()];
            let queued: Result<(), FredError> = pipeline.hmget(name.as_str(), fields).await;
            queued.map_err(|e| self.conn.map(&e))?;
        }
        let replies: Vec<RedisValue> = pipeline
            .try_all::<RedisValue>()
            .await
            .into_iter()
            .map(|r| r.map_err(|e| self.conn.map(&e)))
            .collect::<Result<_, _>>()?;
        if replies.len() != keys.len() {
            return Err(StoreError::new(
                StoreErrorKind::Corrupt,
                format!("redis: {} replies for {} keys", replies.len(), keys.len()),
            ));
        }
        let now = oka_core::Timestamp::now();
        replies
            .into_iter()
            .zip(keys.iter().zip(&names))
            .map(|(reply, (key, name))| {
                let fields = array_of(reply)?;
                let Some(values) = fields.first().map(bytes_of).transpose()?.flatten() else {
                    return Ok(Vec::new());
                };
                let key_values =
                    volga_layout::key_values(feature, key).map_err(|e| corrupt(name, e))?;
                let hash_time = fields.get(1).map(bytes_of).transpose()?.flatten();
                let row = volga_layout::record(feature, &key_values, values, hash_time, now)
                    .map_err(|e| corrupt(name, e))?;
                Ok(vec![row])
            })
            .collect()
    }

    /// The client for the next command: the next connected one of the pool, so
    /// that while the pool's connections come back one by one after an outage
    /// (each on its own back-off) commands go to those already back instead of
    /// failing on the others. Its commands fail at once while no connection is
    /// up, rather than queueing until one returns.
    fn client(&self) -> WithOptions<Client> {
        self.pool.next_connected().with_options(&Options {
            fail_fast: true,
            ..Default::default()
        })
    }
}

/// How every connection of Oka's comes back after its store went away: at
/// once, then every 50, 100, 200, 250 ms (plus fred's jitter of up to 100 ms), for
/// as long as it takes. Each process holds several pools (one per worker, one for
/// the admin port), each reconnecting on its own: a short ceiling keeps them in
/// step, so that a Redis back for the serving path is back for `/readyz` too
/// within a fraction of a second instead of up to two (`/readyz` had declared
/// a second outage while requests were being served). A down Redis costs each
/// connection four refused connects a second.
pub(crate) fn reconnect_policy() -> ReconnectPolicy {
    ReconnectPolicy::new_exponential(0, 50, 250, 2)
}

/// A reply's bytes, borrowed (`None` for a nil reply).
fn bytes_of(v: &RedisValue) -> Result<Option<&[u8]>, StoreError> {
    match v {
        RedisValue::Null => Ok(None),
        RedisValue::Bytes(b) => Ok(Some(b)),
        RedisValue::String(s) => Ok(Some(s.as_bytes())),
        other => Err(StoreError::new(
            StoreErrorKind::Corrupt,
            format!("redis: unexpected reply {other:?}"),
        )),
    }
}

fn array_of(v: RedisValue) -> Result<Vec<RedisValue>, StoreError> {
    match v {
        RedisValue::Array(items) => Ok(items),
        RedisValue::Null => Ok(Vec::new()),
        other => Err(StoreError::new(
            StoreErrorKind::Corrupt,
            format!("redis: expected an array, got {other:?}"),
        )),
    }
}

#[async_trait]
impl FeatureStore for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }

    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError> {
        self.read_keys(feature, keys, query)
            .await
            .map(KeyedRows::from)
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        if self.layout == Layout::Feast {
            return self.write_feast(feature, records).await;
        }
        if self.layout == Layout::Volga {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!(
                    "redis: `{}` is read from Volga's layout, which takes no writes",
                    feature.name
                ),
            ));
        }
        for chunk in records.chunks(WRITE_CHUNK) {
            match self.write_chunk(feature, chunk).await {
                Err(e) if e.details().starts_with("NOSCRIPT") => {
                    // The server lost its script cache (a restart, SCRIPT FLUSH):
                    // reload and write the chunk once more; the script is idempotent.
                    for c in self.pool.clients() {
                        self.script.load(c).await.map_err(|e| self.conn.map(&e))?;
                    }
                    self.write_chunk(feature, chunk)
                        .await
                        .map_err(|e| self.conn.map(&e))?;
                }
                other => other.map_err(|e| self.conn.map(&e))?,
            }
        }
        Ok(())
    }

    /// One connection of the worker's own (fred pipelines a worker's concurrent
    /// commands on it), driven by the worker's runtime.
    async fn for_worker(&self) -> Result<Option<std::sync::Arc<dyn FeatureStore>>, StoreError> {
        if !self.options.per_worker {
            return Ok(None);
        }
        let store = Self::connect_pool(&self.url, self.options.clone(), 1).await?;
        Ok(Some(std::sync::Arc::new(store)))
    }

    fn capabilities(&self) -> oka_storage::Capabilities {
        match self.layout {
            Layout::Oka => oka_storage::Capabilities {
                tracking: true,
                ..oka_storage::Capabilities::FULL
            },
            Layout::Volga => oka_storage::Capabilities {
                history: false,
                writes: false,
                tracking: false,
                layout: "volga",
                limited_because: Some(
                    "the store is Volga's layout (`layout=volga`), which holds only the latest record of each key and takes no writes",
                ),
            },
            Layout::Feast => oka_storage::Capabilities {
                history: false,
                writes: true,
                tracking: true,
                layout: "feast",
                limited_because: Some(
                    "the store is Feast's online store (`layout=feast`), which holds only the latest record of each key",
                ),
            },
        }
    }

    async fn health(&self) -> Result<(), StoreError> {
        let client = self.client();
        let _: RedisValue = client.ping(None).await.map_err(|e| self.conn.map(&e))?;
        Ok(())
    }
}

impl RedisStore {
    /// [`FeatureStore::read`]: the records per key, a vector each.
    async fn read_keys(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.layout {
            Layout::Volga => return self.read_volga(feature, keys, query).await,
            Layout::Feast => return self.read_feast(feature, keys, query).await,
            Layout::Oka => {}
        }
        let client = self.client();
        let replies: Vec<RedisValue> = match *query {
            Query::Latest if !self.clustered => {
                let names: Vec<String> = keys.iter().map(|k| self.key(feature, k, "l")).collect();
                let v: RedisValue = client.mget(names).await.map_err(|e| self.conn.map(&e))?;
                array_of(v)?
            }
            _ => {
                let pipeline = client.pipeline();
                for k in keys {
                    let queued: Result<(), FredError> = match *query {
                        Query::Latest => pipeline.get(self.key(feature, k, "l")).await,
                        Query::LastN { n } => {
                            let n = i64::try_from(n).unwrap_or(i64::MAX);
                            pipeline
                                .zrange(self.key(feature, k, "h"), -n, -1, None, false, None, false)
                                .await
                        }
                        Query::Range { start, end } => {
                            pipeline
                                .zrangebyscore(
                                    self.key(feature, k, "h"),
                                    start.0,
                                    end.0,
                                    false,
                                    None,
                                )
                                .await
                        }
                    };
                    queued.map_err(|e| self.conn.map(&e))?;
                }
                pipeline
                    .try_all::<RedisValue>()
                    .await
                    .into_iter()
                    .map(|r| r.map_err(|e| self.conn.map(&e)))
                    .collect::<Result<_, _>>()?
            }
        };
        if replies.len() != keys.len() {
            return Err(StoreError::new(
                StoreErrorKind::Corrupt,
                format!("redis: {} replies for {} keys", replies.len(), keys.len()),
            ));
        }
        replies
            .into_iter()
            .map(|reply| match query {
                Query::Latest => match bytes_of(&reply)? {
                    Some(b) => Ok(vec![codec::decode_feature_row(feature, b)?]),
                    None => Ok(Vec::new()),
                },
                _ => array_of(reply)?
                    .iter()
                    .filter_map(|m| bytes_of(m).transpose())
                    .map(|b| codec::decode_feature_row(feature, b?))
                    .collect(),
            })
            .collect()
    }
}
