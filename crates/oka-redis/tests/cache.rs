//! The read cache against a real Redis (`--cache tracking`): another client's write
//! invalidates a cached record, a lost tracking connection empties the cache, the
//! byte bound holds with a key space larger than it, and `range`/`last_n` through
//! the cache equal uncached reads. Each test uses its own key prefix, so its
//! tracking sees only its own keys.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::*;
use oka_core::{EntityKey, Feature, NativeUdfs, Query, Registry, Row, Timestamp, Value};
use oka_redis::tracking::{Tracked, Tracker};
use oka_redis::{RedisOptions, RedisStore};
use oka_storage::{Caching, FeatureStore, RecordCache};

const SPEC: &str = r#"
version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {value: float}
features:
  ct_feature: {kind: pipeline, entity: E, history: 20}
"#;

fn feature() -> Feature {
    let r = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
    r.feature(r.feature_id("ct_feature").unwrap()).clone()
}

fn record(id: &str, ts: i64, value: f64) -> (EntityKey, Row) {
    let t = Timestamp(ts);
    (
        EntityKey::encode(&[Value::from(id)]),
        Row::new(
            t,
            vec![Value::from(id), Value::Timestamp(t), Value::Float(value)],
        ),
    )
}

async fn store(url: &str, prefix: &str) -> RedisStore {
    let options = RedisOptions {
        key_prefix: prefix.to_owned(),
        per_worker: false,
        ..RedisOptions::default()
    };
    RedisStore::connect(url, options).await.unwrap()
}

/// A tracked cache over Oka's layout under `prefix`.
async fn tracked(url: &str, prefix: &str, max_bytes: u64) -> (Caching, Tracker) {
    let cache = Arc::new(RecordCache::new(max_bytes, None));
    let keys = Tracked::Oka {
        prefix: prefix.to_owned(),
    };
    let tracker = Tracker::start(url, keys, Arc::clone(&cache), Duration::from_secs(2))
        .await
        .unwrap();
    (
        Caching::new(Arc::new(store(url, prefix).await), cache),
        tracker,
    )
}

/// Waits until a write's invalidations have arrived: at least `n`, and then none
/// more for 50 ms. They arrive asynchronously (Redis may merge several changes of one
/// key), and one arriving late would drop an entry a test has just read.
async fn settle(cached: &Caching, n: u64) {
    let t = Instant::now();
    let mut last = (cached.cache().stats().invalidations, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = cached.cache().stats().invalidations;
        if now != last.0 {
            last = (now, Instant::now());
        } else if now >= n && last.1.elapsed() >= Duration::from_millis(50) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{:?}",
            cached.cache().stats()
        );
    }
}

fn value(rows: &oka_core::KeyedRows) -> Option<f64> {
    match rows.of(0).first()?.columns.get(2)? {
        Value::Float(v) => Some(*v),
        _ => None,
    }
}

#[tokio::test]
async fn another_clients_write_invalidates_a_cached_record() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let prefix = format!("okacache-inv-{}:", std::process::id());
    let (cached, _tracker) = tracked(&url, &prefix, 1 << 20).await;
    let writer = store(&url, &prefix).await;
    let f = feature();
    let (key, row) = record("a", 1_000, 1.0);
    writer.write(&f, &[(key.clone(), row)]).await.unwrap();
    settle(&cached, 1).await;
    let keys = [key.clone()];
    assert_eq!(
        value(&cached.read(&f, &keys, &Query::Latest).await.unwrap()),
        Some(1.0)
    );
    assert_eq!(
        value(&cached.read(&f, &keys, &Query::Latest).await.unwrap()),
        Some(1.0)
    );
    let s = cached.cache().stats();
    assert_eq!((s.misses, s.hits), (1, 1), "{s:?}");

    // Overwrites by another client, each seen once its invalidation arrives.
    let mut windows = Vec::new();
    for i in 2..12 {
        let (_, row) = record("a", 1_000 + i, i as f64);
        writer.write(&f, &[(key.clone(), row)]).await.unwrap();
        let written = Instant::now();
        loop {
            let got = value(&cached.read(&f, &keys, &Query::Latest).await.unwrap());
            if got == Some(i as f64) {
                windows.push(written.elapsed());
                break;
            }
            assert!(
                written.elapsed() < Duration::from_secs(2),
                "still {got:?} 2 s after the write"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    windows.sort();
    eprintln!(
        "stale window after a write by another client: median {:?}, max {:?}",
        windows[windows.len() / 2],
        windows[windows.len() - 1]
    );
    assert!(cached.cache().stats().invalidations >= 10);
    // A key nobody wrote is cached as absent, and a first write invalidates that.
    let (new_key, row) = record("b", 5, 7.0);
    let nk = [new_key.clone()];
    assert_eq!(
        value(&cached.read(&f, &nk, &Query::Latest).await.unwrap()),
        None
    );
    writer.write(&f, &[(new_key, row)]).await.unwrap();
    let t = Instant::now();
    while value(&cached.read(&f, &nk, &Query::Latest).await.unwrap()) != Some(7.0) {
        assert!(t.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn a_lost_tracking_connection_empties_the_cache_until_tracking_is_back() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let prefix = format!("okacache-lost-{}:", std::process::id());
    let (cached, tracker) = tracked(&url, &prefix, 1 << 20).await;
    let writer = store(&url, &prefix).await;
    let f = feature();
    let records: Vec<_> = (0..50)
        .map(|i| record(&format!("k{i}"), 10, i as f64))
        .collect();
    writer.write(&f, &records).await.unwrap();
    // The writes' invalidations (two keys each) arrive asynchronously: wait for them,
    // so that none drops an entry read below.
    settle(&cached, 50).await;
    let keys: Vec<EntityKey> = records.iter().map(|(k, _)| k.clone()).collect();
    cached.read(&f, &keys, &Query::Latest).await.unwrap();
    let before = cached.cache().stats();
    assert_eq!(before.entries, 50, "{before:?}");

    let admin = Client::new(Config::from_url(&url).unwrap(), None, None, None);
    admin.init().await.unwrap();
    let id = tracker.connection_id().await.unwrap();
    let killed: i64 = admin
        .client_kill(vec![fred::types::client::ClientKillFilter::ID(
            id.to_string(),
        )])
        .await
        .unwrap();
    assert_eq!(killed, 1);
    // The kill is noticed, the cache emptied, and (once tracking is on again on a
    // new connection) it serves again, from scratch.
    let t = Instant::now();
    loop {
        let s = cached.cache().stats();
        if s.resets > before.resets && s.enabled {
            assert_eq!(s.entries, 0, "{s:?}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no reset after the kill: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "tracking connection killed: cache emptied and serving again after {:?}",
        t.elapsed()
    );
    // And invalidations flow on the new connection.
    let (key, row) = record("k1", 20, 100.0);
    let k = [key.clone()];
    cached.read(&f, &k, &Query::Latest).await.unwrap();
    writer.write(&f, &[(key, row)]).await.unwrap();
    let t = Instant::now();
    while value(&cached.read(&f, &k, &Query::Latest).await.unwrap()) != Some(100.0) {
        assert!(t.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn memory_stays_under_the_bound_with_a_larger_key_space() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let prefix = format!("okacache-mem-{}:", std::process::id());
    const MAX: u64 = 64 * 1024;
    let (cached, _tracker) = tracked(&url, &prefix, MAX).await;
    let writer = store(&url, &prefix).await;
    let f = feature();
    let records: Vec<_> = (0..5000)
        .map(|i| record(&format!("key-{i}"), 10, i as f64))
        .collect();
    writer.write(&f, &records).await.unwrap();
    for chunk in records.chunks(100) {
        let keys: Vec<EntityKey> = chunk.iter().map(|(k, _)| k.clone()).collect();
        let rows = cached.read(&f, &keys, &Query::Latest).await.unwrap();
        assert_eq!(rows.len(), 100);
        let s = cached.cache().stats();
        assert!(s.bytes <= MAX, "{s:?}");
    }
    let s = cached.cache().stats();
    eprintln!("5,000 keys through a {MAX}-byte cache: {s:?}");
    assert!(
        s.evictions > 0 && s.entries < 5000 && s.bytes <= MAX,
        "{s:?}"
    );
}

#[tokio::test]
async fn range_and_last_n_through_the_cache_equal_uncached_reads() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let prefix = format!("okacache-hist-{}:", std::process::id());
    let (cached, _tracker) = tracked(&url, &prefix, 1 << 20).await;
    let plain = store(&url, &prefix).await;
    let f = feature();
    let mut records = Vec::new();
    for k in 0..5 {
        for t in 0..(k * 7 + 1) {
            records.push(record(
                &format!("h{k}"),
                1_000 + t * 10,
                (k * 100 + t) as f64,
            ));
        }
    }
    plain.write(&f, &records).await.unwrap();
    settle(&cached, 1).await;
    let keys: Vec<EntityKey> = (0..6)
        .map(|k| EntityKey::encode(&[Value::from(format!("h{k}").as_str())]))
        .collect();
    let queries = [
        Query::Latest,
        Query::LastN { n: 1 },
        Query::LastN { n: 3 },
        Query::LastN { n: 50 },
        Query::Range {
            start: Timestamp(0),
            end: Timestamp(i64::MAX),
        },
        Query::Range {
            start: Timestamp(1_050),
            end: Timestamp(1_120),
        },
        Query::Range {
            start: Timestamp(1_055),
            end: Timestamp(1_055),
        },
        Query::Range {
            start: Timestamp(5_000),
            end: Timestamp(6_000),
        },
    ];
    for round in 0..2 {
        for q in &queries {
            let want = plain.read(&f, &keys, q).await.unwrap();
            let got = cached.read(&f, &keys, q).await.unwrap();
            assert_eq!(got, want, "{q:?}, round {round}");
        }
    }
    let s = cached.cache().stats();
    assert!(
        s.hits > s.misses,
        "the second round is served from the cache: {s:?}"
    );
}

/// A TCP proxy to Redis that can be frozen: while frozen it forwards nothing, as a
/// connection that silently died would.
async fn freezable_proxy(upstream: String) -> (u16, Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let frozen = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&frozen);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let (f1, f2) = (Arc::clone(&f), Arc::clone(&f));
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0
                        || (!f1.load(Ordering::SeqCst) && sw.write_all(&buf[..n]).await.is_err())
                    {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0
                        || (!f2.load(Ordering::SeqCst) && cw.write_all(&buf[..n]).await.is_err())
                    {
                        break;
                    }
                }
            });
        }
    });
    (port, frozen)
}

#[tokio::test]
async fn a_silent_tracking_connection_turns_the_cache_off() {
    use std::sync::atomic::Ordering;
    let Some(url) = common::redis_url() else {
        return;
    };
    let prefix = format!("okacache-silent-{}:", std::process::id());
    let host = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let (port, frozen) = freezable_proxy(host).await;
    let cache = Arc::new(RecordCache::new(1 << 20, None));
    let tracker = Tracker::start(
        &format!("redis://127.0.0.1:{port}"),
        Tracked::Oka {
            prefix: prefix.clone(),
        },
        Arc::clone(&cache),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let cached = Caching::new(Arc::new(store(&url, &prefix).await), Arc::clone(&cache));
    let f = feature();
    let (key, row) = record("s", 1, 1.0);
    cached.write(&f, &[(key.clone(), row)]).await.unwrap();
    cached
        .read(&f, std::slice::from_ref(&key), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(cache.stats().entries, 1);

    // The connection goes silent (nothing is closed): the heartbeat finds it.
    frozen.store(true, Ordering::SeqCst);
    let t = Instant::now();
    while cache.enabled() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the cache still serves {:?} after the connection went silent",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "silent tracking connection: the cache was off after {:?}",
        t.elapsed()
    );
    assert_eq!(cache.stats().entries, 0);
    // Reads still answer, from Redis.
    let rows = cached
        .read(&f, std::slice::from_ref(&key), &Query::Latest)
        .await
        .unwrap();
    assert_eq!(value(&rows), Some(1.0));
    assert_eq!(
        cache.stats().entries,
        0,
        "nothing is cached while tracking is down"
    );
    frozen.store(false, Ordering::SeqCst);
    let t = Instant::now();
    while !cache.enabled() {
        assert!(t.elapsed() < Duration::from_secs(15), "tracking not back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(tracker);
}
