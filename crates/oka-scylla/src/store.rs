//! [`ScyllaStore`]: a [`FeatureStore`] on one shared `scylla` session.
//!
//! - Statements are prepared once at connect, marked idempotent, and always take the
//!   partition key as bound values, so the driver routes each to a replica (and, on
//!   ScyllaDB, to the owning shard's connection).
//! - Reads of many keys are concurrent single-partition queries, at most
//!   `read_concurrency` in flight per call, answers kept in key order (never `IN`
//!   on the partition key).
//! - Writes are grouped by partition: one unlogged single-partition batch per key
//!   (one `INSERT` when a key has one record), at most `write_concurrency` in
//!   flight. Each carries the feature's TTL (`USING TTL`, 0 = none). Then the
//!   partition is trimmed to the feature's `history` with one range delete: always
//!   after a multi-record write, for a sample of single-record writes
//!   ([`should_trim`]).
//! - Reads apply the history bound themselves (`LIMIT`), so records beyond it that
//!   are not trimmed yet, or a trim racing a concurrent write, never show.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use oka_core::registry::Retention;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row};
use oka_storage::{FeatureStore, StoreError, StoreErrorKind, codec};
use scylla::client::PoolSize;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::policies::speculative_execution::SimpleSpeculativeExecutionPolicy;
use scylla::policies::timestamp_generator::MonotonicTimestampGenerator;
pub use scylla::statement::Consistency;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;

use crate::failure::{map_execution_error, map_prepare_error, map_session_error, unreachable};
use crate::schema::{self, Replication, StoreUrl, TABLE};

/// Records per single-partition batch (larger groups are split).
const BATCH_ROWS: usize = 64;

/// One single-record write in this many trims its partition (see [`should_trim`]).
const TRIM_SAMPLE: u64 = 8;

/// Whether a partition write also trims the partition to the history bound.
///
/// Trimming needs a read (the event time of the oldest record to keep), which costs
/// more than the write itself (measured: 5–10× lower ingest throughput when every
/// write trims). So a write of several records always trims, and a write of one
/// record trims for a deterministic 1 in [`TRIM_SAMPLE`] of (key, event time)
/// pairs: storage stays within a few records of the bound, and reads, which apply
/// the bound themselves (`LIMIT`), never see the excess.
fn should_trim(key: &EntityKey, rows: &[&Row]) -> bool {
    use std::hash::{Hash, Hasher};
    match rows {
        [row] => {
            // SipHash with fixed keys: within a build, the same pair decides the
            // same way in every process.
            let mut h = std::hash::DefaultHasher::new();
            key.as_str().hash(&mut h);
            row.event_time.0.hash(&mut h);
            h.finish().is_multiple_of(TRIM_SAMPLE)
        }
        _ => true,
    }
}

/// Connection and query settings.
#[derive(Debug, Clone)]
pub struct ScyllaOptions {
    /// Consistency of reads (default `LOCAL_ONE`).
    pub read_consistency: Consistency,
    /// Consistency of writes (default `LOCAL_QUORUM`).
    pub write_consistency: Consistency,
    /// The local data center: requests go to its replicas only. `None`: any node.
    pub local_dc: Option<String>,
    /// Client-side timeout of one request.
    pub request_timeout: Duration,
    /// Timeout of opening a connection.
    pub connect_timeout: Duration,
    /// Send a second, speculative read to another replica after this long
    /// (`None`: off). Only idempotent statements (all of Oka's) speculate.
    pub speculative_delay: Option<Duration>,
    /// Single-partition reads in flight per read call.
    pub read_concurrency: usize,
    /// Partition writes in flight per write call.
    pub write_concurrency: usize,
    /// Connections per shard (Cassandra: per node); ScyllaDB recommends 1.
    pub connections_per_shard: usize,
    /// Create the keyspace and table if missing (else they must exist).
    pub create_schema: bool,
    /// The keyspace's replication when `create_schema` creates it.
    pub replication: Replication,
}

impl Default for ScyllaOptions {
    fn default() -> Self {
        Self {
            read_consistency: Consistency::LocalOne,
            write_consistency: Consistency::LocalQuorum,
            local_dc: None,
            request_timeout: Duration::from_millis(1000),
            connect_timeout: Duration::from_secs(5),
            speculative_delay: None,
            read_concurrency: 128,
            write_concurrency: 64,
            connections_per_shard: 1,
            create_schema: false,
            replication: Replication::default(),
        }
    }
}

/// A consistency level name that CQL does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown consistency `{0}` (local_one, local_quorum, one, quorum, all, …)")]
pub struct UnknownConsistency(pub String);

/// Parses a consistency level name (`local_one`, `LOCAL_QUORUM`, `one`, …).
pub fn parse_consistency(s: &str) -> Result<Consistency, UnknownConsistency> {
    Ok(match s.to_ascii_lowercase().replace('-', "_").as_str() {
        "any" => Consistency::Any,
        "one" => Consistency::One,
        "two" => Consistency::Two,
        "three" => Consistency::Three,
        "quorum" => Consistency::Quorum,
        "all" => Consistency::All,
        "local_one" => Consistency::LocalOne,
        "local_quorum" => Consistency::LocalQuorum,
        "each_quorum" => Consistency::EachQuorum,
        _ => return Err(UnknownConsistency(s.to_owned())),
    })
}

/// The prepared statements.
#[derive(Debug)]
struct Statements {
    latest: PreparedStatement,
    last_n: PreparedStatement,
    range: PreparedStatement,
    insert: PreparedStatement,
    trim_scan: PreparedStatement,
    trim: PreparedStatement,
    health: PreparedStatement,
}

/// The ScyllaDB/Cassandra feature store.
#[derive(Debug)]
pub struct ScyllaStore {
    session: Arc<Session>,
    statements: Statements,
    keyspace: String,
    read_concurrency: usize,
    write_concurrency: usize,
}

/// A driver session to the URL's nodes: token-aware, local-DC-first, with the
/// read consistency, timeouts, speculative retries and pool size of `options`.
async fn open_session(parsed: &StoreUrl, options: &ScyllaOptions) -> Result<Session, StoreError> {
    let mut policy = DefaultPolicy::builder()
        .token_aware(true)
        .permit_dc_failover(false);
    if let Some(dc) = &options.local_dc {
        policy = policy.prefer_datacenter(dc.clone());
    }
    let speculative = options.speculative_delay.map(|d| {
        Arc::new(SimpleSpeculativeExecutionPolicy {
            max_retry_count: 1,
            retry_interval: d,
        }) as _
    });
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(policy.build())
        .consistency(options.read_consistency)
        .request_timeout(Some(options.request_timeout))
        .speculative_execution_policy(speculative)
        .build();
    let per_shard =
        NonZeroUsize::new(options.connections_per_shard.max(1)).unwrap_or(NonZeroUsize::MIN);
    let mut builder = SessionBuilder::new()
        .known_nodes(&parsed.nodes)
        .connection_timeout(options.connect_timeout)
        .pool_size(PoolSize::PerShard(per_shard))
        .default_execution_profile_handle(profile.into_handle())
        // Client-side, strictly increasing write timestamps: of two writes of
        // the same (key, event time) from this process, the later one wins.
        .timestamp_generator(Arc::new(MonotonicTimestampGenerator::new()));
    if let Some((user, password)) = &parsed.credentials {
        builder = builder.user(user, password);
    }
    match builder.build().await {
        Ok(session) => Ok(session),
        Err(e) => Err(unreachable(map_session_error(&e), &parsed.nodes).await),
    }
}

/// How long one schema statement may take: creating a keyspace or table waits
/// for the nodes to write and agree on the schema, which takes seconds on a
/// busy cluster — far longer than the reads `--store-timeout-ms` bounds.
const DDL_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates the keyspace and table if missing, and waits for the cluster to agree.
async fn create_schema(
    session: &Session,
    keyspace: &str,
    replication: &Replication,
    request_timeout: Duration,
) -> Result<(), StoreError> {
    for stmt in schema::ddl(keyspace, replication) {
        let mut stmt = Statement::new(stmt);
        stmt.set_request_timeout(Some(DDL_TIMEOUT.max(request_timeout)));
        session
            .query_unpaged(stmt, ())
            .await
            .map_err(|e| map_execution_error(&e))?;
    }
    session
        .await_schema_agreement()
        .await
        .map(|_| ())
        .map_err(|e| {
            StoreError::new(
                StoreErrorKind::Unavailable,
                format!("cql: schema agreement: {e}"),
            )
        })
}

impl Statements {
    /// Prepares every statement against `keyspace`'s table: reads at `r`,
    /// writes and trims at `w`. A missing table says how to create it.
    async fn prepare(
        session: &Session,
        ks: &str,
        r: Consistency,
        w: Consistency,
    ) -> Result<Self, StoreError> {
        let t = format!("{ks}.{TABLE}");
        let pk = "feature = ? AND entity_key = ?";
        let prepare = |cql: String, consistency: Consistency| async move {
            let mut ps = session.prepare(cql).await.map_err(|e| {
                    let mut err = map_prepare_error(&e);
                    if err.kind == StoreErrorKind::Misconfigured {
                        err.message = format!(
                            "{}: create it with --store-create-schema, or run the DDL from `oka schema`",
                            err.message
                        );
                    }
                    err
                })?;
            ps.set_is_idempotent(true);
            ps.set_consistency(consistency);
            Ok::<_, StoreError>(ps)
        };
        Ok(Self {
            latest: prepare(format!("SELECT event_time, record FROM {t} WHERE {pk} LIMIT 1"), r)
                .await?,
            last_n: prepare(format!("SELECT event_time, record FROM {t} WHERE {pk} LIMIT ?"), r)
                .await?,
            // The newest `history` records from `start` on are exactly the part of the
            // newest `history` records overall that is not older than `start`; the end
            // bound is applied to them here (so untrimmed records beyond the bound
            // never show, see `should_trim`).
            range: prepare(
                format!("SELECT event_time, record FROM {t} WHERE {pk} AND event_time >= ? LIMIT ?"),
                r,
            )
            .await?,
            insert: prepare(
                format!(
                    "INSERT INTO {t} (feature, entity_key, event_time, record) VALUES (?, ?, ?, ?) USING TTL ?"
                ),
                w,
            )
            .await?,
            trim_scan: prepare(format!("SELECT event_time FROM {t} WHERE {pk} LIMIT ?"), w).await?,
            trim: prepare(
                format!("DELETE FROM {t} WHERE {pk} AND event_time <= ?"),
                w,
            )
            .await?,
            health: prepare(
                "SELECT release_version FROM system.local WHERE key = 'local'".to_owned(),
                Consistency::One,
            )
            .await?,
        })
    }
}

/// The history bound and the TTL in seconds (0: none) of a feature.
fn retention(feature: &Feature) -> (i32, i32) {
    let Retention { history, ttl } = feature.retention();
    // CQL TTLs are whole seconds, at most 20 years; round sub-second TTLs up.
    let ttl_s = ttl.map_or(0, |t| {
        let s = t.as_secs() + u64::from(t.subsec_nanos() > 0);
        i32::try_from(s.clamp(1, 630_720_000)).unwrap_or(630_720_000)
    });
    (i32::try_from(history).unwrap_or(i32::MAX), ttl_s)
}

/// Records of one partition, deduplicated by event time (the last given wins, as
/// an overwrite would), in their given order otherwise.
fn group_by_key(records: &[(EntityKey, Row)]) -> Vec<(&EntityKey, Vec<&Row>)> {
    let mut groups: Vec<(&EntityKey, Vec<&Row>)> = Vec::new();
    let mut index = std::collections::HashMap::<&str, usize>::new();
    for (key, row) in records {
        let i = *index.entry(key.as_str()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        let rows = &mut groups[i].1;
        match rows.iter_mut().find(|r| r.event_time == row.event_time) {
            Some(existing) => *existing = row,
            None => rows.push(row),
        }
    }
    groups
}

impl ScyllaStore {
    /// Connects to `url` (`scylla://[user:pass@]host[:port][,host…][/keyspace]`, or
    /// `cassandra://…`), optionally creates the schema, and prepares the
    /// statements. Fails if no node can be reached or the table is missing.
    pub async fn connect(url: &str, options: ScyllaOptions) -> Result<Self, StoreError> {
        let parsed = StoreUrl::parse(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Internal, e.to_string()).with_source(e))?;
        let session = open_session(&parsed, &options).await?;
        if options.create_schema {
            create_schema(
                &session,
                &parsed.keyspace,
                &options.replication,
                options.request_timeout,
            )
            .await?;
        }
        let statements = Statements::prepare(
            &session,
            &parsed.keyspace,
            options.read_consistency,
            options.write_consistency,
        )
        .await?;
        Ok(Self {
            session: Arc::new(session),
            statements,
            keyspace: parsed.keyspace,
            read_concurrency: options.read_concurrency.max(1),
            write_concurrency: options.write_concurrency.max(1),
        })
    }

    /// The keyspace in use.
    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// The driver session (for operators' own queries and tests).
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The rows of one partition for `query`, oldest first.
    async fn read_one(
        &self,
        feature: &Feature,
        key: &EntityKey,
        query: &Query,
        history: i32,
    ) -> Result<Vec<Row>, StoreError> {
        let (name, k) = (&*feature.name, key.as_str());
        let s = &self.statements;
        let result = match *query {
            Query::Latest => self.session.execute_unpaged(&s.latest, (name, k)).await,
            Query::LastN { n: 0 } => return Ok(Vec::new()),
            Query::LastN { n } => {
                let n = i32::try_from(n).unwrap_or(i32::MAX).clamp(1, history);
                self.session.execute_unpaged(&s.last_n, (name, k, n)).await
            }
            Query::Range { start, end } => {
                if start.0 > end.0 {
                    return Ok(Vec::new());
                }
                self.session
                    .execute_unpaged(&s.range, (name, k, start.0, history))
                    .await
            }
        }
        .map_err(|e| map_execution_error(&e))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: not rows: {e}")))?;
        let end = match *query {
            Query::Range { end, .. } => end.0,
            _ => i64::MAX,
        };
        let mut out = Vec::with_capacity(rows.rows_num());
        for row in rows
            .rows::<(i64, &[u8])>()
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: {e}")))?
        {
            let (time, bytes) =
                row.map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: {e}")))?;
            if time <= end {
                out.push(codec::decode_feature_row(feature, bytes)?);
            }
        }
        // Stored newest first; answers are oldest first.
        out.reverse();
        Ok(out)
    }

    /// Writes one partition's records, then trims it to `history`.
    async fn write_partition(
        &self,
        feature: &Feature,
        key: &EntityKey,
        rows: &[&Row],
        history: i32,
        ttl_s: i32,
    ) -> Result<(), StoreError> {
        let (name, k) = (&*feature.name, key.as_str());
        let s = &self.statements;
        for chunk in rows.chunks(BATCH_ROWS) {
            let encoded: Vec<(i64, Vec<u8>)> = chunk
                .iter()
                .map(|r| (r.event_time.0, codec::encode_row(&feature.entity, r)))
                .collect();
            if let [(t, record)] = encoded.as_slice() {
                self.session
                    .execute_unpaged(&s.insert, (name, k, *t, record, ttl_s))
                    .await
                    .map_err(|e| map_execution_error(&e))?;
            } else {
                let mut batch = Batch::new(BatchType::Unlogged);
                batch.set_is_idempotent(true);
                batch.set_consistency(
                    s.insert
                        .get_consistency()
                        .unwrap_or(Consistency::LocalQuorum),
                );
                let mut values = Vec::with_capacity(encoded.len());
                for (t, record) in &encoded {
                    batch.append_statement(s.insert.clone());
                    values.push((name, k, *t, record.as_slice(), ttl_s));
                }
                self.session
                    .batch(&batch, values)
                    .await
                    .map_err(|e| map_execution_error(&e))?;
            }
        }
        if should_trim(key, rows) {
            self.trim(name, k, history).await?;
        }
        Ok(())
    }

    /// Deletes all but the newest `history` records of one partition.
    async fn trim(&self, name: &str, key: &str, history: i32) -> Result<(), StoreError> {
        let s = &self.statements;
        let scan = self
            .session
            .execute_unpaged(&s.trim_scan, (name, key, history.saturating_add(1)))
            .await
            .map_err(|e| map_execution_error(&e))?;
        let rows = scan
            .into_rows_result()
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: not rows: {e}")))?;
        let Some(cut) = rows
            .rows::<(i64,)>()
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: {e}")))?
            .nth(usize::try_from(history).unwrap_or(usize::MAX))
        else {
            return Ok(());
        };
        let (cut,) =
            cut.map_err(|e| StoreError::new(StoreErrorKind::Corrupt, format!("cql: {e}")))?;
        self.session
            .execute_unpaged(&s.trim, (name, key, cut))
            .await
            .map_err(|e| map_execution_error(&e))?;
        Ok(())
    }
}

#[async_trait]
impl FeatureStore for ScyllaStore {
    fn backend(&self) -> &'static str {
        "scylla"
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
        let (history, ttl_s) = retention(feature);
        let groups = group_by_key(records);
        // A window of `write_concurrency` partitions; the first error ends the call
        // (partitions already written stay written: writes are idempotent).
        let mut groups = groups.iter();
        let mut pending = FuturesUnordered::new();
        for (key, rows) in groups.by_ref().take(self.write_concurrency) {
            pending.push(self.write_partition(feature, key, rows, history, ttl_s));
        }
        while let Some(done) = pending.next().await {
            done?;
            if let Some((key, rows)) = groups.next() {
                pending.push(self.write_partition(feature, key, rows, history, ttl_s));
            }
        }
        Ok(())
    }

    async fn health(&self) -> Result<(), StoreError> {
        self.session
            .execute_unpaged(&self.statements.health, ())
            .await
            .map_err(|e| map_execution_error(&e))?;
        Ok(())
    }
}

impl ScyllaStore {
    /// [`FeatureStore::read`]: the records per key, a vector each.
    async fn read_keys(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        let (history, _) = retention(feature);
        if let [key] = keys {
            return Ok(vec![self.read_one(feature, key, query, history).await?]);
        }
        // A window of `read_concurrency` reads, answers in key order.
        let mut keys = keys.iter();
        let mut out = Vec::with_capacity(keys.len());
        let mut pending = FuturesOrdered::new();
        for key in keys.by_ref().take(self.read_concurrency) {
            pending.push_back(self.read_one(feature, key, query, history));
        }
        while let Some(rows) = pending.next().await {
            out.push(rows?);
            if let Some(key) = keys.next() {
                pending.push_back(self.read_one(feature, key, query, history));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use oka_core::{Timestamp, Value};

    #[test]
    fn consistency_names() {
        assert_eq!(
            parse_consistency("local_one").unwrap(),
            Consistency::LocalOne
        );
        assert_eq!(
            parse_consistency("LOCAL-QUORUM").unwrap(),
            Consistency::LocalQuorum
        );
        assert!(parse_consistency("local").is_err());
    }

    #[test]
    fn groups_keep_order_and_the_last_of_a_duplicate_time() {
        let k = |s: &str| EntityKey::encode(&[Value::from(s)]);
        let r = |t: i64, v: f64| Row::new(Timestamp(t), vec![Value::Float(v)]);
        let records = vec![
            (k("b"), r(1, 1.0)),
            (k("a"), r(1, 2.0)),
            (k("b"), r(2, 3.0)),
            (k("b"), r(1, 4.0)),
        ];
        let groups = group_by_key(&records);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0.as_str(), k("b").as_str());
        let vals: Vec<_> = groups[0].1.iter().map(|r| r.columns[0].clone()).collect();
        assert_eq!(vals, [Value::Float(4.0), Value::Float(3.0)]);
        assert_eq!(groups[1].1.len(), 1);
    }
}
