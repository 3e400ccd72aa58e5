//! Read coalescing over a store whose reads the test holds open, so that reads
//! overlap exactly as under load.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row, Timestamp, Value};
use oka_storage::conformance::{self, registry};
use oka_storage::{Coalescing, FeatureStore, MemoryStore, StoreError, StoreErrorKind};
use tokio::sync::Semaphore;

/// A memory store whose reads each wait for a permit, count calls and keys, and
/// can be told to fail.
#[derive(Debug)]
struct Held {
    inner: MemoryStore,
    permits: Semaphore,
    calls: AtomicUsize,
    keys: AtomicUsize,
    fail: AtomicBool,
}

impl Held {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryStore::new(),
            permits: Semaphore::new(0),
            calls: AtomicUsize::new(0),
            keys: AtomicUsize::new(0),
            fail: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl FeatureStore for Held {
    fn backend(&self) -> &'static str {
        "held"
    }

    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.keys.fetch_add(keys.len(), Ordering::SeqCst);
        self.permits.acquire().await.unwrap().forget();
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Unavailable, "told to fail"));
        }
        self.inner.read(feature, keys, query).await
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        self.inner.write(feature, records).await
    }

    async fn health(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

fn key(i: usize) -> EntityKey {
    EntityKey::encode(&[Value::from(format!("k{i}").as_str())])
}

fn row(i: usize) -> Row {
    Row::new(
        Timestamp(1_000),
        vec![
            Value::from(format!("k{i}").as_str()),
            Value::Timestamp(Timestamp(1_000)),
            Value::Float(i as f64),
            Value::Null,
            Value::Null,
        ],
    )
}

/// Lets the held store answer until every task is done.
async fn release_until_done(
    held: &Held,
    tasks: Vec<tokio::task::JoinHandle<Result<KeyedRows, StoreError>>>,
) -> Vec<Result<KeyedRows, StoreError>> {
    let mut out = Vec::new();
    for t in tasks {
        loop {
            if t.is_finished() {
                out.push(t.await.unwrap());
                break;
            }
            held.permits.add_permits(1);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    out
}

fn value_of(rows: &KeyedRows) -> Vec<Option<f64>> {
    rows.iter()
        .map(|r| {
            r.first().map(|row| match row.columns[2] {
                Value::Float(f) => f,
                ref other => panic!("{other:?}"),
            })
        })
        .collect()
}

#[tokio::test]
async fn the_wrapper_passes_the_conformance_suite() {
    let store = Coalescing::new(Arc::new(MemoryStore::new()), 64);
    conformance::run_all(&store).await;
}

#[tokio::test]
async fn overlapping_reads_share_calls_and_each_gets_its_own_keys() {
    let reg = Arc::new(registry());
    let held = Held::new();
    let f = reg.feature_id("conformance_feature").unwrap();
    let records: Vec<(EntityKey, Row)> = (0..40).map(|i| (key(i), row(i))).collect();
    held.write(reg.feature(f), &records).await.unwrap();
    let store = Arc::new(Coalescing::new(held.clone(), 64));

    // 20 readers of 2 keys each (one never written), all started while the first
    // read is held open.
    let mut tasks = Vec::new();
    for r in 0..20 {
        let (store, reg) = (Arc::clone(&store), Arc::clone(&reg));
        tasks.push(tokio::spawn(async move {
            let keys = [key(r * 2), key(1000 + r)];
            store.read(reg.feature(f), &keys, &Query::Latest).await
        }));
        tokio::task::yield_now().await;
    }
    let results = release_until_done(&held, tasks).await;
    for (r, res) in results.into_iter().enumerate() {
        assert_eq!(
            value_of(&res.unwrap()),
            [Some((r * 2) as f64), None],
            "reader {r}"
        );
    }
    let calls = held.calls.load(Ordering::SeqCst);
    assert!(calls < 20, "20 overlapping reads made {calls} store calls");
    assert_eq!(
        held.keys.load(Ordering::SeqCst),
        40,
        "every key read exactly once"
    );
    // Each store call had one leader; every other reader rode along, and the count
    // is shared with the workers' handles.
    assert_eq!(store.coalesced_reads(), Some((20 - calls) as u64));
    let worker = store.for_worker().await.unwrap().expect("a worker handle");
    assert_eq!(worker.coalesced_reads(), store.coalesced_reads());

    // Nothing is left in flight: a later read goes straight through.
    held.permits.add_permits(1);
    let alone = store
        .read(reg.feature(f), &[key(3)], &Query::Latest)
        .await
        .unwrap();
    assert_eq!(value_of(&alone), [Some(3.0)]);
}

#[tokio::test]
async fn a_failed_batch_fails_each_of_its_readers() {
    let reg = Arc::new(registry());
    let held = Held::new();
    held.fail.store(true, Ordering::SeqCst);
    let f = reg.feature_id("conformance_feature").unwrap();
    let store = Arc::new(Coalescing::new(held.clone(), 64));
    let mut tasks = Vec::new();
    for r in 0..5 {
        let (store, reg) = (Arc::clone(&store), Arc::clone(&reg));
        tasks.push(tokio::spawn(async move {
            store.read(reg.feature(f), &[key(r)], &Query::Latest).await
        }));
        tokio::task::yield_now().await;
    }
    for res in release_until_done(&held, tasks).await {
        assert_eq!(res.unwrap_err().kind, StoreErrorKind::Unavailable);
    }
    assert!(held.calls.load(Ordering::SeqCst) < 5);
}

#[tokio::test]
async fn a_cancelled_leader_does_not_strand_the_readers_behind_it() {
    let reg = Arc::new(registry());
    let held = Held::new();
    let f = reg.feature_id("conformance_feature").unwrap();
    let records: Vec<(EntityKey, Row)> = (0..10).map(|i| (key(i), row(i))).collect();
    held.write(reg.feature(f), &records).await.unwrap();
    let store = Arc::new(Coalescing::new(held.clone(), 64));

    // The leader's read is held open; readers queue behind it; then it is cancelled.
    let leader = {
        let (store, reg) = (Arc::clone(&store), Arc::clone(&reg));
        tokio::spawn(async move { store.read(reg.feature(f), &[key(0)], &Query::Latest).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut tasks = Vec::new();
    for r in 1..6 {
        let (store, reg) = (Arc::clone(&store), Arc::clone(&reg));
        tasks.push(tokio::spawn(async move {
            store.read(reg.feature(f), &[key(r)], &Query::Latest).await
        }));
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());

    let results = tokio::time::timeout(Duration::from_secs(10), release_until_done(&held, tasks))
        .await
        .expect("the readers queued behind a cancelled leader must finish");
    for (i, res) in results.into_iter().enumerate() {
        assert_eq!(value_of(&res.unwrap()), [Some((i + 1) as f64)]);
    }
    // And the pair is free again.
    held.permits.add_permits(1);
    let again = tokio::time::timeout(
        Duration::from_secs(5),
        store.read(reg.feature(f), &[key(9)], &Query::Latest),
    )
    .await
    .expect("a read after the cancelled leader must not hang");
    assert_eq!(value_of(&again.unwrap()), [Some(9.0)]);
}

#[tokio::test]
async fn large_reads_and_other_queries_are_not_merged() {
    let reg = Arc::new(registry());
    let held = Held::new();
    let f = reg.feature_id("conformance_feature").unwrap();
    let store = Arc::new(Coalescing::new(held.clone(), 4));
    held.permits.add_permits(100);
    // At the batch limit: straight to the store.
    let keys: Vec<EntityKey> = (0..4).map(key).collect();
    assert_eq!(
        store
            .read(reg.feature(f), &keys, &Query::Latest)
            .await
            .unwrap()
            .len(),
        4
    );
    // Different queries of one feature do not share a call.
    let one = [key(1)];
    let a = store.read(reg.feature(f), &one, &Query::Latest);
    let b = store.read(reg.feature(f), &one, &Query::LastN { n: 3 });
    let (a, b) = tokio::join!(a, b);
    assert_eq!((a.unwrap().len(), b.unwrap().len()), (1, 1));
    assert_eq!(held.calls.load(Ordering::SeqCst), 3);
}

/// Per worker (the default), a read queues only behind its own worker's read in
/// flight; across workers, behind any worker's. One read in flight on worker 1,
/// then two on worker 2: 3 store calls per worker, 2 across workers.
#[tokio::test]
async fn across_workers_reads_of_two_workers_share_one_call() {
    for (across, want_calls) in [(false, 3), (true, 2)] {
        let reg = Arc::new(registry());
        let held = Held::new();
        let f = reg.feature_id("conformance_feature").unwrap();
        let records: Vec<(EntityKey, Row)> = (0..4).map(|i| (key(i), row(i))).collect();
        held.write(reg.feature(f), &records).await.unwrap();
        let store = Coalescing::new(held.clone(), 64).across_workers(across);
        let w1 = store.for_worker().await.unwrap().unwrap();
        let w2 = store.for_worker().await.unwrap().unwrap();
        let read = |w: Arc<dyn FeatureStore>, i: usize| {
            let reg = Arc::clone(&reg);
            tokio::spawn(async move { w.read(reg.feature(f), &[key(i)], &Query::Latest).await })
        };
        let first = read(Arc::clone(&w1), 0);
        while held.calls.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
        let second = read(Arc::clone(&w2), 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let third = read(Arc::clone(&w2), 2);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let out = release_until_done(&held, vec![first, second, third]).await;
        for (i, r) in out.into_iter().enumerate() {
            assert_eq!(value_of(&r.unwrap()), [Some(i as f64)], "across {across}");
        }
        assert_eq!(
            held.calls.load(Ordering::SeqCst),
            want_calls,
            "across {across}"
        );
    }
}

/// Layers stack without forwarding by hand: each answers for what it adds and
/// the rest comes from the store below, whatever the order.
#[tokio::test]
async fn layers_report_what_is_below_them() {
    use oka_storage::{Caching, Capabilities, RecordCache};
    let memory: Arc<dyn FeatureStore> = Arc::new(MemoryStore::new());
    let cached: Arc<dyn FeatureStore> = Arc::new(Caching::new(
        Arc::clone(&memory),
        Arc::new(RecordCache::new(1 << 20, Some(Duration::from_secs(1)))),
    ));
    let both = Coalescing::new(Arc::clone(&cached), 64);
    assert_eq!(both.backend(), "memory");
    assert_eq!(both.capabilities(), Capabilities::FULL);
    assert!(both.health().await.is_ok());
    assert_eq!(both.coalesced_reads(), Some(0), "its own counter");
    assert!(both.cache_stats().is_some(), "the cache's, from below");
    let reversed = Caching::new(
        Arc::new(Coalescing::new(memory, 64)),
        Arc::new(RecordCache::new(1 << 20, None)),
    );
    assert_eq!(
        reversed.coalesced_reads(),
        Some(0),
        "the coalescing's, from below"
    );
    assert!(reversed.cache_stats().is_some());
    assert!(cached.coalesced_reads().is_none(), "no coalescing below");
}
