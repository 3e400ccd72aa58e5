//! The storage conformance suite against a real Redis.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

#[tokio::test]
async fn redis_passes_the_conformance_suite() {
    let Some(url) = common::redis_url() else {
        return;
    };
    let store = common::connect(&url).await;
    oka_storage::conformance::run_all(&store).await;
    eprintln!("conformance suite passed against backend redis at {url}");
}

#[tokio::test]
async fn bad_urls_and_unreachable_servers_are_errors() {
    let e = oka_redis::RedisStore::connect(
        "redis://127.0.0.1:1",
        oka_redis::RedisOptions {
            connect_timeout: std::time::Duration::from_millis(500),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind, oka_storage::StoreErrorKind::Unavailable, "{e}");
    let e = oka_redis::RedisStore::connect("nonsense://x", Default::default())
        .await
        .unwrap_err();
    assert!(e.message.contains("invalid redis url"), "{e}");
}
