//! The read cache ([`Caching`]) over the in-memory store: it keeps the store
//! contract, a TTL entry serves no longer than its TTL, and this process's writes
//! are seen at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use oka_core::{EntityKey, Query, Row, Timestamp, Value};
use oka_storage::conformance::{self, registry};
use oka_storage::{Caching, FeatureStore, MemoryStore, RecordCache};

fn cached(ttl: Option<Duration>) -> (Caching, Arc<MemoryStore>) {
    let inner = Arc::new(MemoryStore::new());
    let cache = Arc::new(RecordCache::new(1 << 20, ttl));
    (Caching::new(inner.clone(), cache), inner)
}

/// Every part of the conformance suite but feature TTLs (a cached record may
/// outlive its key's expiry by up to the cache's TTL; with Redis tracking, an
/// expiry is an invalidation like any change).
#[tokio::test]
async fn a_cached_store_keeps_the_store_contract() {
    for ttl in [Some(Duration::from_secs(60)), None] {
        let (store, _) = cached(ttl);
        let s: &dyn FeatureStore = &store;
        conformance::latest_is_newest_event_time(s).await;
        conformance::range_is_inclusive_and_ordered(s).await;
        conformance::last_n_is_newest_n_oldest_first(s).await;
        conformance::missing_keys_are_empty_in_order(s).await;
        conformance::many_keys_in_one_call(s).await;
        conformance::same_event_time_is_idempotent(s).await;
        conformance::history_is_bounded(s).await;
        conformance::unusual_key_values_stay_distinct(s).await;
        conformance::large_values_round_trip(s).await;
        conformance::concurrent_writers(s).await;
        conformance::rows_round_trip_every_column(s).await;
        let st = store.cache().stats();
        assert!(st.hits > 0 && st.misses > 0, "{st:?}");
    }
}

#[tokio::test]
async fn a_ttl_entry_serves_until_its_ttl_then_the_store_is_read_again() {
    let (store, inner) = cached(Some(Duration::from_millis(150)));
    let r = registry();
    let f = r.feature(r.feature_id("conformance_feature").unwrap());
    let key = EntityKey::encode(&[Value::from("k")]);
    let row = |v: f64, t: i64| {
        let mut cols = vec![Value::Null; f.entity.columns.len()];
        cols[f.entity.key_index[0]] = Value::from("k");
        cols[f.entity.timestamp_index] = Value::Timestamp(Timestamp(t));
        cols[f.entity.column_index("value").unwrap()] = Value::Float(v);
        (key.clone(), Row::new(Timestamp(t), cols))
    };
    store.write(f, &[row(1.0, 10)]).await.unwrap();
    let keys = [key.clone()];
    let first = store.read(f, &keys, &Query::Latest).await.unwrap();
    // Written around the cache (another process): the cached record serves until
    // the TTL passes.
    inner.write(f, &[row(2.0, 20)]).await.unwrap();
    let started = Instant::now();
    let again = store.read(f, &keys, &Query::Latest).await.unwrap();
    assert_eq!(again, first, "served from the cache within the TTL");
    loop {
        let now = store.read(f, &keys, &Query::Latest).await.unwrap();
        if now[0][0].event_time == Timestamp(20) {
            assert!(started.elapsed() <= Duration::from_millis(400));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_millis(150),
            "stale past the TTL"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Written through the cache: seen at once.
    store.write(f, &[row(3.0, 30)]).await.unwrap();
    let now = store.read(f, &keys, &Query::Latest).await.unwrap();
    assert_eq!(now[0][0].event_time, Timestamp(30));
}

/// A read of keys some of which the cache holds answers every key in its
/// place, for each kind of query: hits from the cache, misses from the store.
#[tokio::test]
async fn a_read_of_hits_and_misses_answers_each_key_in_its_place() {
    let r = registry();
    let f = r.feature(r.feature_id("conformance_feature").unwrap());
    let key = |k: &str| EntityKey::encode(&[Value::from(k)]);
    let row = |k: &str, v: f64, t: i64| {
        let mut cols = vec![Value::Null; f.entity.columns.len()];
        cols[f.entity.key_index[0]] = Value::from(k);
        cols[f.entity.timestamp_index] = Value::Timestamp(Timestamp(t));
        cols[f.entity.column_index("value").unwrap()] = Value::Float(v);
        (key(k), Row::new(Timestamp(t), cols))
    };
    let queries = [
        Query::Latest,
        Query::LastN { n: 2 },
        Query::Range {
            start: Timestamp(15),
            end: Timestamp(30),
        },
    ];
    let mixed = [key("b"), key("absent"), key("a"), key("c"), key("b")];
    for query in &queries {
        // A cache of its own per query (`range` and `last_n` share an entry).
        let (store, inner) = cached(None);
        for k in ["a", "b", "c"] {
            for t in 1..=3_i32 {
                let (k, row) = row(k, f64::from(t), i64::from(t) * 10);
                store.write(f, &[(k, row)]).await.unwrap();
            }
        }
        // What the store itself answers, key by key.
        let mut want = Vec::new();
        for k in &mixed {
            let one = inner.read(f, std::slice::from_ref(k), query).await.unwrap();
            want.push(one.of(0).to_vec());
        }
        // `a` and `b` cached first; `c` and `absent` missed in the mixed read.
        store.read(f, &[key("a"), key("b")], query).await.unwrap();
        let before = store.cache().stats();
        let got = store.read(f, &mixed, query).await.unwrap();
        let after = store.cache().stats();
        assert_eq!(got, want, "{query:?}");
        assert_eq!(
            (after.hits - before.hits, after.misses - before.misses),
            (3, 2)
        );
    }
}
