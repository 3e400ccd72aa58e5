//! The in-memory store: per feature, a sharded hash map from canonical key to a
//! bounded history sorted by event time. Readers and writers of different shards
//! never contend; a shard's lock is held only for the copy-out of `Arc`-shared rows.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use oka_core::registry::{DEFAULT_HISTORY, FeatureKind};
use oka_core::{EntityKey, Feature, Query, Row};
use parking_lot::RwLock;

use crate::store::{FeatureStore, StoreError};

const SHARDS: usize = 64;

/// Records of one key, oldest first, at most `history` long.
type History = VecDeque<Row>;

#[derive(Debug)]
struct Table {
    shards: Box<[RwLock<HashMap<EntityKey, History>>]>,
}

impl Table {
    fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, key: &EntityKey) -> &RwLock<HashMap<EntityKey, History>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        &self.shards[(h.finish() as usize) % SHARDS]
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

fn history_bound(feature: &Feature) -> usize {
    match feature.kind {
        FeatureKind::Pipeline { history, .. } => history.max(1),
        FeatureKind::OnDemand { .. } => DEFAULT_HISTORY,
    }
}

/// Reads `query` from one key's history.
fn answer(history: &History, query: &Query) -> Vec<Row> {
    match *query {
        Query::Latest => history.back().cloned().into_iter().collect(),
        Query::LastN { n } => {
            let skip = history.len().saturating_sub(n);
            history.iter().skip(skip).cloned().collect()
        }
        Query::Range { start, end } => {
            let lo = history.partition_point(|r| r.event_time < start);
            let hi = history.partition_point(|r| r.event_time <= end);
            history.range(lo..hi.max(lo)).cloned().collect()
        }
    }
}

/// Inserts `row` in event-time order; a row with the same event time replaces the
/// old one (idempotent re-delivery). Drops the oldest beyond `bound`.
fn insert(history: &mut History, row: Row, bound: usize) {
    let pos = history.partition_point(|r| r.event_time < row.event_time);
    match history.get(pos) {
        Some(r) if r.event_time == row.event_time => history[pos] = row,
        _ => history.insert(pos, row),
    }
    while history.len() > bound {
        history.pop_front();
    }
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
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        let Some(table) = self.table(&feature.name) else {
            return Ok(vec![Vec::new(); keys.len()]);
        };
        Ok(keys
            .iter()
            .map(|k| {
                table
                    .shard(k)
                    .read()
                    .get(k)
                    .map(|h| answer(h, query))
                    .unwrap_or_default()
            })
            .collect())
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        let table = self.table_or_create(&feature.name);
        let bound = history_bound(feature);
        for (key, row) in records {
            let mut shard = table.shard(key).write();
            let history = shard.entry(key.clone()).or_default();
            insert(history, row.clone(), bound);
        }
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
