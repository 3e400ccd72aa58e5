//! The in-memory store: per feature, a sharded hash map from canonical key to a
//! bounded history sorted by event time (and an expiry, for features with a TTL). Readers and writers of different shards
//! never contend; a shard's lock is held only for the copy-out of `Arc`-shared rows.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row};
use parking_lot::RwLock;

use crate::store::{FeatureStore, StoreError};

const SHARDS: usize = 64;

/// Records of one key, oldest first, at most `history` long, and when the key
/// expires (its feature's TTL after the last write).
#[derive(Debug, Default)]
struct History {
    rows: VecDeque<Row>,
    expires: Option<Instant>,
}

impl History {
    fn live(&self, now: Instant) -> bool {
        self.expires.is_none_or(|e| now < e)
    }
}

/// foldhash: seeded per process, several times cheaper than SipHash on short keys
/// (the default hasher was a visible share of a 100-key read).
type Hasher = foldhash::fast::RandomState;

/// One shard of a table: its keys with their histories, found by the key's
/// hash (the one hash that also picks the shard).
type Shard = HashTable<(EntityKey, History)>;

#[derive(Debug)]
struct Table {
    shards: Box<[RwLock<Shard>]>,
    /// Hashes a key once, for its shard and its place in the shard.
    hasher: Hasher,
    /// Writes so far; every [`SWEEP_EVERY`] writes one shard drops its expired keys.
    writes: AtomicUsize,
}

/// Writes between sweeps of one shard for expired keys.
const SWEEP_EVERY: usize = 1024;

impl Table {
    fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect(),
            hasher: Hasher::default(),
            writes: AtomicUsize::new(0),
        }
    }

    /// Drops expired keys from one shard, round robin, every `SWEEP_EVERY` writes,
    /// so keys that are never read again do not stay forever.
    fn maybe_sweep(&self, writes: usize) {
        let before = self.writes.fetch_add(writes, Ordering::Relaxed);
        let sweeps = (before + writes) / SWEEP_EVERY - before / SWEEP_EVERY;
        for i in 0..sweeps.min(SHARDS) {
            let shard = (before / SWEEP_EVERY + i) % SHARDS;
            let now = Instant::now();
            self.shards[shard].write().retain(|(_, h)| h.live(now));
        }
    }

    fn hash(&self, key: &EntityKey) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of the key whose hash is `hash`, picked by bits the shard's
    /// table does not use (it takes the low bits for a slot, the top seven
    /// for a tag).
    fn shard(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[(hash >> 32) as usize % SHARDS]
    }
}

/// The embedded default store (`memory://`). Data lives as long as the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: RwLock<HashMap<Arc<str>, Arc<Table>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self, feature: &str) -> Option<Arc<Table>> {
        self.tables.read().get(feature).cloned()
    }

    fn table_or_create(&self, feature: &Arc<str>) -> Arc<Table> {
        if let Some(t) = self.table(feature) {
            return t;
        }
        Arc::clone(
            self.tables
                .write()
                .entry(Arc::clone(feature))
                .or_insert_with(|| Arc::new(Table::new())),
        )
    }
}

fn history_bound(feature: &Feature) -> (usize, Option<Duration>) {
    let r = feature.retention();
    (r.history, r.ttl)
}

/// Reads `query` from one key's history.
fn answer<'h>(history: &'h VecDeque<Row>, query: &Query) -> impl Iterator<Item = Row> + 'h {
    let range = crate::history::select(history.len(), |i| history[i].event_time, query);
    history.range(range).cloned()
}

#[async_trait]
impl FeatureStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError> {
        let Some(table) = self.table(&feature.name) else {
            return Ok(KeyedRows::empty(keys.len()));
        };
        let now = Instant::now();
        let mut out = KeyedRows::with_capacity(keys.len(), keys.len());
        for k in keys {
            let hash = table.hash(k);
            let shard = table.shard(hash).read();
            let found = shard.find(hash, |(key, _)| key == k);
            match found.filter(|(_, h)| h.live(now)) {
                Some((_, h)) => out.push(answer(&h.rows, query)),
                None => out.push(None),
            }
        }
        Ok(out)
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        let table = self.table_or_create(&feature.name);
        let (bound, ttl) = history_bound(feature);
        let now = Instant::now();
        for (key, row) in records {
            let hash = table.hash(key);
            let mut shard = table.shard(hash).write();
            let same = |(k, _): &(EntityKey, History)| k == key;
            let rehash = |(k, _): &(EntityKey, History)| table.hash(k);
            let (_, history) = match shard.entry(hash, same, rehash) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert((key.clone(), History::default())).into_mut(),
            };
            if !history.live(now) {
                history.rows.clear();
            }
            crate::history::insert(&mut history.rows, row.clone(), bound);
            history.expires = ttl.map(|t| now + t);
        }
        table.maybe_sweep(records.len());
        Ok(())
    }

    async fn health(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_the_conformance_suite() {
        let store = MemoryStore::new();
        crate::conformance::run_all(&store).await;
    }
}
