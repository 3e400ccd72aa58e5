//! A bounded in-process cache of pipeline records in front of any store
//! ([`Caching`]), shared by the serving workers.
//!
//! Two modes:
//! - **TTL** (`--cache ttl:MS`): an entry serves for at most that long after it was
//!   read; any store. Staleness is bounded by the TTL.
//! - **Tracked** (`--cache tracking`): entries serve until the store says the data
//!   changed. The backend (Redis, with client tracking) calls [`RecordCache::invalidate`]
//!   per changed key and [`RecordCache::reset`] when invalidations may have been
//!   missed (a lost tracking connection); the cache serves nothing while
//!   [`RecordCache::set_enabled`] is off.
//!
//! What is cached per (feature, key): the `latest` record, and separately the
//! feature's whole retained history (read once as `last_n` of the feature's
//! `history`), from which `range` and `last_n` reads are answered.
//!
//! A read that misses asks the store, then inserts what it got only if no
//! invalidation touched that key (a striped generation counter) and no reset
//! happened while it was in flight, so an answer that an invalidation overtook is
//! never cached. The cache is a sharded S3-FIFO (`quick_cache`) weighted by record
//! bytes: no global lock, memory bounded by `max_bytes`.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use oka_core::{Entity, EntityKey, Feature, KeyedRows, Query, Row};

use crate::store::CacheStats;
use crate::{FeatureStore, StoreError};

/// Stripes of invalidation generations (a power of two).
const STRIPES: usize = 4096;

/// What a cache entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// The latest record (or its absence).
    Latest,
    /// The retained history, oldest first.
    History,
}

type CacheKey = (Arc<str>, EntityKey, Kind);

/// A [`CacheKey`] borrowed from a read: (feature name, canonical key, kind). It
/// hashes as the owned key does (a `str` hashes as the `Arc<str>` and the
/// `EntityKey` around it), so a lookup clones nothing: cloning the feature's name,
/// an `Arc` that every worker shares, wrote a cache line the other cores read
/// twice per key.
#[derive(Hash)]
struct KeyRef<'a>(&'a str, &'a str, Kind);

impl quick_cache::Equivalent<CacheKey> for KeyRef<'_> {
    fn equivalent(&self, key: &CacheKey) -> bool {
        self.2 == key.2 && self.1 == key.1.as_str() && self.0 == &*key.0
    }
}

#[derive(Debug)]
struct Entry {
    /// The entity the rows were decoded for: after a reload that changed it, the
    /// entry no longer serves.
    entity: Arc<Entity>,
    rows: Vec<Row>,
    expires: Option<Instant>,
    weight: u64,
}

#[derive(Debug, Clone)]
struct Weigh;

impl quick_cache::Weighter<CacheKey, Arc<Entry>> for Weigh {
    fn weight(&self, _key: &CacheKey, val: &Arc<Entry>) -> u64 {
        val.weight
    }
}

/// Counts evictions.
#[derive(Debug, Clone)]
struct Evictions(Arc<AtomicU64>);

impl quick_cache::Lifecycle<CacheKey, Arc<Entry>> for Evictions {
    type RequestState = ();

    fn begin_request(&self) -> Self::RequestState {}

    fn on_evict(&self, _state: &mut (), _key: CacheKey, _val: Arc<Entry>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

type Inner = quick_cache::sync::Cache<
    CacheKey,
    Arc<Entry>,
    Weigh,
    quick_cache::DefaultHashBuilder,
    Evictions,
>;

/// The cache itself, shared by every worker's store handle.
pub struct RecordCache {
    map: Inner,
    ttl: Option<Duration>,
    /// Bumped per invalidated key's stripe.
    stripes: Box<[AtomicU64]>,
    /// Bumped on every reset.
    epoch: AtomicU64,
    enabled: AtomicBool,
    hasher: quick_cache::DefaultHashBuilder,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
    evictions: Arc<AtomicU64>,
    resets: AtomicU64,
    max_bytes: u64,
}

impl std::fmt::Debug for RecordCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCache")
            .field("ttl", &self.ttl)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// What one read must see unchanged to cache its answer.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    epoch: u64,
    stripe: usize,
    generation: u64,
}

impl RecordCache {
    /// A cache of at most `max_bytes`; entries expire `ttl` after they were read
    /// (`None`: only invalidations remove them). Starts enabled.
    pub fn new(max_bytes: u64, ttl: Option<Duration>) -> Self {
        let evictions = Arc::new(AtomicU64::new(0));
        let map = Inner::with(
            usize::try_from(max_bytes / 512).unwrap_or(1 << 20).max(64),
            max_bytes.max(1),
            Weigh,
            quick_cache::DefaultHashBuilder::default(),
            Evictions(Arc::clone(&evictions)),
        );
        Self {
            map,
            ttl,
            stripes: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            epoch: AtomicU64::new(0),
            enabled: AtomicBool::new(true),
            hasher: quick_cache::DefaultHashBuilder::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            evictions,
            resets: AtomicU64::new(0),
            max_bytes,
        }
    }

    fn stripe(&self, feature: &str, key: &EntityKey) -> usize {
        (self.hasher.hash_one((feature, key.as_str())) as usize) & (STRIPES - 1)
    }

    /// Drops what is cached for `key` of `feature` (its latest record and its
    /// history).
    pub fn invalidate(&self, feature: &str, key: &EntityKey) {
        let stripe = self.stripe(feature, key);
        self.stripes[stripe].fetch_add(1, Ordering::AcqRel);
        for kind in [Kind::Latest, Kind::History] {
            self.map.remove(&KeyRef(feature, key.as_str(), kind));
        }
        self.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops everything (invalidations may have been missed, or the store was
    /// flushed); reads in flight will not cache their answers.
    pub fn reset(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.map.clear();
        self.resets.fetch_add(1, Ordering::Relaxed);
    }

    /// Turns serving from the cache on or off (off: every read goes to the store
    /// and nothing is cached). Turning it off also resets it.
    pub fn set_enabled(&self, on: bool) {
        if !on {
            self.enabled.store(false, Ordering::Release);
            self.reset();
        } else {
            self.enabled.store(true, Ordering::Release);
        }
    }

    /// Whether the cache serves.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// The counters now.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            resets: self.resets.load(Ordering::Relaxed),
            bytes: self.map.weight(),
            max_bytes: self.max_bytes,
            entries: self.map.len() as u64,
            enabled: self.enabled(),
        }
    }

    fn get(&self, feature: &Feature, key: &EntityKey, kind: Kind) -> Option<Arc<Entry>> {
        let e = self.map.get(&KeyRef(&feature.name, key.as_str(), kind))?;
        let fresh = e.expires.is_none_or(|t| Instant::now() < t);
        (fresh && Arc::ptr_eq(&e.entity, &feature.entity)).then_some(e)
    }

    fn ticket(&self, feature: &str, key: &EntityKey) -> Ticket {
        let stripe = self.stripe(feature, key);
        Ticket {
            epoch: self.epoch.load(Ordering::Acquire),
            stripe,
            generation: self.stripes[stripe].load(Ordering::Acquire),
        }
    }

    /// Caches `rows` for `key` unless an invalidation or a reset came since
    /// `ticket` was taken.
    fn put(&self, feature: &Feature, key: &EntityKey, kind: Kind, rows: Vec<Row>, ticket: Ticket) {
        let unchanged = self.enabled()
            && self.epoch.load(Ordering::Acquire) == ticket.epoch
            && self.stripes[ticket.stripe].load(Ordering::Acquire) == ticket.generation;
        if !unchanged {
            return;
        }
        let weight = 96
            + feature.name.len() as u64
            + key.as_str().len() as u64
            + rows.iter().map(|r| r.approx_size() as u64).sum::<u64>();
        let entry = Entry {
            entity: Arc::clone(&feature.entity),
            rows,
            expires: self.ttl.map(|t| Instant::now() + t),
            weight,
        };
        let cache_key = (Arc::clone(&feature.name), key.clone(), kind);
        self.map.insert(cache_key, Arc::new(entry));
        // An invalidation or a reset between the check and the insert (they bump
        // their counter before they remove): take the entry out again.
        if self.stripes[ticket.stripe].load(Ordering::Acquire) != ticket.generation {
            self.map.remove(&KeyRef(&feature.name, key.as_str(), kind));
        }
        if self.epoch.load(Ordering::Acquire) != ticket.epoch {
            self.map.clear();
        }
    }
}

/// A store with a [`RecordCache`] in front: reads are answered from the cache where
/// it can, the rest from the store (and cached); writes go to the store, then drop
/// what they replaced from the cache.
#[derive(Clone)]
pub struct Caching {
    inner: Arc<dyn FeatureStore>,
    cache: Arc<RecordCache>,
    /// Whatever keeps the cache exact (the tracking connection), kept alive as
    /// long as the store.
    guard: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Caching {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caching")
            .field("inner", &self.inner)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Caching {
    /// `inner` behind `cache`.
    pub fn new(inner: Arc<dyn FeatureStore>, cache: Arc<RecordCache>) -> Self {
        Self {
            inner,
            cache,
            guard: None,
        }
    }

    /// The same, keeping `guard` (what invalidates the cache) alive with it.
    #[must_use]
    pub fn with_guard(mut self, guard: Arc<dyn std::any::Any + Send + Sync>) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<RecordCache> {
        &self.cache
    }
}

/// What a cached entry of `kind` answers for `query`.
fn answer<'r>(rows: &'r [Row], query: &Query) -> impl Iterator<Item = Row> + 'r {
    let (from, window) = match *query {
        Query::Latest => (0, None),
        Query::LastN { n } => (rows.len().saturating_sub(n), None),
        Query::Range { start, end } => (0, Some((start, end))),
    };
    let within = move |r: &&Row| window.is_none_or(|(s, e)| r.event_time >= s && r.event_time <= e);
    rows.get(from..)
        .unwrap_or_default()
        .iter()
        .filter(within)
        .cloned()
}

#[async_trait]
impl FeatureStore for Caching {
    fn inner(&self) -> Option<&dyn FeatureStore> {
        Some(&*self.inner)
    }

    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError> {
        let cache = &self.cache;
        if !cache.enabled() || keys.is_empty() {
            return self.inner.read(feature, keys, query).await;
        }
        let (kind, fill) = match query {
            Query::Latest => (Kind::Latest, Query::Latest),
            _ => (
                Kind::History,
                Query::LastN {
                    n: feature.retention().history.max(1),
                },
            ),
        };
        // Each key's entry, or `None` where it missed: a hit's records are
        // copied once, into the answer, after the misses are read.
        let mut entries: Vec<Option<Arc<Entry>>> = Vec::with_capacity(keys.len());
        let mut missed: Vec<(usize, Ticket)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let entry = cache.get(feature, key, kind);
            if entry.is_none() {
                missed.push((i, cache.ticket(&feature.name, key)));
            }
            entries.push(entry);
        }
        cache
            .hits
            .fetch_add((keys.len() - missed.len()) as u64, Ordering::Relaxed);
        // The missed keys' answers, in key order.
        let mut read: Vec<Vec<Row>> = Vec::new();
        if !missed.is_empty() {
            cache
                .misses
                .fetch_add(missed.len() as u64, Ordering::Relaxed);
            let miss_keys: Vec<EntityKey> = missed.iter().map(|(i, _)| keys[*i].clone()).collect();
            let rows = self.inner.read(feature, &miss_keys, &fill).await?;
            read.reserve(missed.len());
            for ((i, ticket), rows) in missed.into_iter().zip(rows.into_keys()) {
                read.push(answer(&rows, query).collect());
                cache.put(feature, &keys[i], kind, rows, ticket);
            }
        }
        let mut read = read.into_iter();
        let mut out = KeyedRows::with_capacity(keys.len(), keys.len());
        for entry in &entries {
            match entry {
                Some(e) => out.push(answer(&e.rows, query)),
                None => out.push(read.next().unwrap_or_default()),
            }
        }
        Ok(out)
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        let written = self.inner.write(feature, records).await;
        // Written or not (a failed batch may be partly written), what it touched is
        // no longer known to be current.
        for (key, _) in records {
            self.cache.invalidate(&feature.name, key);
        }
        written
    }

    async fn for_worker(&self) -> Result<Option<Arc<dyn FeatureStore>>, StoreError> {
        Ok(self.inner.for_worker().await?.map(|inner| {
            Arc::new(Self {
                inner,
                cache: Arc::clone(&self.cache),
                guard: self.guard.clone(),
            }) as Arc<dyn FeatureStore>
        }))
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        Some(self.cache.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A borrowed key finds what an owned key stored: both hash alike, under the
    /// cache's own hasher, and compare equal.
    #[test]
    fn a_borrowed_key_hashes_and_compares_as_the_owned_one() {
        let hasher = quick_cache::DefaultHashBuilder::default();
        for kind in [Kind::Latest, Kind::History] {
            let owned: CacheKey = (Arc::from("f"), EntityKey::from_canonical("a|b"), kind);
            let borrowed = KeyRef("f", "a|b", kind);
            assert_eq!(hasher.hash_one(&owned), hasher.hash_one(&borrowed));
            assert!(quick_cache::Equivalent::equivalent(&borrowed, &owned));
            for other in [
                KeyRef("g", "a|b", kind),
                KeyRef("f", "a|c", kind),
                KeyRef("fa", "|b", kind),
            ] {
                assert!(!quick_cache::Equivalent::equivalent(&other, &owned));
            }
        }
        let owned: CacheKey = (Arc::from("f"), EntityKey::from_canonical("a"), Kind::Latest);
        assert!(!quick_cache::Equivalent::equivalent(
            &KeyRef("f", "a", Kind::History),
            &owned
        ));
    }
}
