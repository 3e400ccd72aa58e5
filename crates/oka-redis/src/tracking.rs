//! Exact invalidation of the read cache ([`RecordCache`]) through Redis's
//! server-assisted client-side caching: one dedicated RESP3 connection runs
//! `CLIENT TRACKING ON BCAST PREFIX <key prefix>`, so Redis pushes the name of
//! every key under Oka's prefix that anything changes (a write by any process, an
//! expiry, an eviction, a flush), whichever connection read it.
//!
//! - A pushed key `{prefix}{<feature>|<key>}:l|h` drops that key's entries; a
//!   flush (a push without keys) drops everything.
//! - In Feast's layout (`layout=feast`) keys have no common prefix: tracking
//!   covers every key, and a pushed key that is a Feast entity key of the
//!   project (`oka_feast::layout::parse_redis_key`) drops that entity's entries
//!   of every view keyed by the same join keys (they share the hash).
//! - The cache serves only while tracking is established: it starts disabled, is
//!   enabled once `CLIENT TRACKING` succeeded, and is disabled (and emptied) as soon
//!   as the connection reports an error, goes unresponsive or reconnects, until
//!   tracking is on again. So it never serves from a cache whose invalidations may
//!   have been missed.

use std::sync::Arc;
use std::time::Duration;

use fred::interfaces::{EventInterface, HeartbeatInterface, TrackingInterface};
use fred::prelude::*;
use fred::types::RespVersion;
use oka_core::EntityKey;
use oka_storage::{RecordCache, StoreError, StoreErrorKind};

use crate::failure::map_error;

/// The name of the tracking connection (`CLIENT LIST`).
pub const CONNECTION_NAME: &str = "oka-cache-tracking";

/// The feature and canonical key of one of Oka's Redis keys
/// (`{prefix}{<feature>|<key>}:l` or `:h`), or `None` for any other key.
pub fn parse_key<'k>(prefix: &str, name: &'k str) -> Option<(&'k str, &'k str)> {
    let inner = name
        .strip_prefix(prefix)?
        .strip_prefix('{')?
        .strip_suffix(":l")
        .or_else(|| {
            name.strip_prefix(prefix)?
                .strip_prefix('{')?
                .strip_suffix(":h")
        })?
        .strip_suffix('}')?;
    inner.split_once('|')
}

/// Which keys the tracker hears of, and what each names.
#[derive(Debug, Clone)]
pub enum Tracked {
    /// Oka's layout: every key under the prefix.
    Oka {
        /// The key prefix (`--store-key-prefix`).
        prefix: String,
    },
    /// Feast's layout: every key, read with the (reloadable) registry.
    Feast(oka_feast::SharedRegistry),
}

impl Tracked {
    /// The prefixes to track (none: every key).
    fn prefixes(&self) -> Vec<String> {
        match self {
            Self::Oka { prefix } => vec![prefix.clone()],
            Self::Feast(_) => Vec::new(),
        }
    }

    /// Drops the entries the changed key `key` held.
    fn invalidate(&self, cache: &RecordCache, key: &[u8]) {
        match self {
            Self::Oka { prefix } => {
                let parsed = std::str::from_utf8(key)
                    .ok()
                    .and_then(|k| parse_key(prefix, k));
                if let Some((feature, k)) = parsed {
                    cache.invalidate(feature, &EntityKey::from_canonical(k));
                }
            }
            Self::Feast(registry) => {
                let registry = registry.load();
                let Some(pairs) = oka_feast::layout::parse_redis_key(key, &registry.project) else {
                    return;
                };
                for view in registry.views.values() {
                    // The view's key values in its own join-key order; `None`
                    // when its join keys are not the key's.
                    let values: Option<Vec<&oka_core::Value>> = (view.join_keys.len()
                        == pairs.len())
                    .then(|| {
                        (view.join_keys.iter())
                            .map(|c| pairs.iter().find(|(n, _)| *n == c.name).map(|(_, v)| v))
                            .collect()
                    })
                    .flatten();
                    if let Some(values) = values {
                        cache.invalidate(&view.name, &EntityKey::encode(values));
                    }
                }
            }
        }
    }
}

/// Keeps `cache` in step with Redis until dropped.
pub struct Tracker {
    client: Client,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            rt.spawn(async move {
                let _ = client.quit().await;
            });
        }
    }
}

impl Tracker {
    /// Connects to `url` (RESP3), turns tracking on for the keys `tracked` says,
    /// and keeps `cache` invalidated; the cache is enabled once tracking is on.
    /// Fails if the server cannot be reached or refuses tracking (Redis before 6).
    pub async fn start(
        url: &str,
        tracked: Tracked,
        cache: Arc<RecordCache>,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        cache.set_enabled(false);
        let (driver_url, _) = crate::url::take_layout(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Internal, e.to_string()))?;
        let mut config = Config::from_url(&driver_url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Internal,
                format!("invalid redis url: {}", e.details()),
            )
        })?;
        config.version = RespVersion::RESP3;
        let client = Builder::from_config(config)
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
                c.tcp.nodelay = Some(true);
                // A silent connection is found within a few seconds: a PING every
                // 0.5 s (the heartbeat below), and the connection is dropped when
                // one goes 2 s unanswered.
                c.unresponsive.max_timeout = Some(Duration::from_secs(2));
                c.unresponsive.interval = Duration::from_millis(500);
            })
            .with_performance_config(|p| {
                p.default_command_timeout = timeout;
                // Room for a burst of invalidations (a 10,000-record ingest batch
                // changes 20,000 keys); a receiver that still falls behind resets
                // the cache.
                p.broadcast_channel_capacity = 1 << 16;
            })
            .set_policy(crate::store::reconnect_policy())
            .build()
            .map_err(|e| map_error(&e))?;
        client.init().await.map_err(|e| map_error(&e))?;
        let _: () = client
            .client_setname(CONNECTION_NAME)
            .await
            .map_err(|e| map_error(&e))?;

        // Listening before tracking is on; the watchdog and the retracker only once
        // it is (the retracker would otherwise turn it on a second time).
        let mut tasks = vec![invalidations(&client, Arc::clone(&cache), tracked.clone())];
        if let Err(e) = client
            .start_tracking(tracked.prefixes(), true, false, false, false)
            .await
        {
            for t in &tasks {
                t.abort();
            }
            let _ = client.quit().await;
            return Err(map_error(&e));
        }
        cache.reset();
        cache.set_enabled(true);
        let heartbeat = client.clone();
        tasks.push(tokio::spawn(async move {
            let _ = heartbeat
                .enable_heartbeat(Duration::from_millis(500), false)
                .await;
        }));
        tasks.push(watchdog(&client, Arc::clone(&cache)));
        tasks.push(retracker(&client, Arc::clone(&cache), tracked));
        Ok(Self { client, tasks })
    }

    /// The tracking connection's Redis client id (for tests that kill it).
    pub async fn connection_id(&self) -> Result<i64, StoreError> {
        self.client.client_id().await.map_err(|e| map_error(&e))
    }
}

/// Drops what each pushed key names; a flush or a lagging receiver resets.
fn invalidations(
    client: &Client,
    c: Arc<RecordCache>,
    tracked: Tracked,
) -> tokio::task::JoinHandle<()> {
    let mut rx = client.invalidation_rx();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match rx.recv().await {
                Ok(inv) if inv.keys.is_empty() => c.reset(),
                Ok(inv) => {
                    for key in &inv.keys {
                        tracked.invalidate(&c, key.as_bytes());
                    }
                }
                // Invalidations were dropped (the channel lagged): start over.
                Err(RecvError::Lagged(_)) => c.reset(),
                Err(RecvError::Closed) => {
                    c.set_enabled(false);
                    return;
                }
            }
        }
    })
}

/// Trouble on the connection (an error, no answer to the heartbeat, a new
/// connection): the cache stops serving at once.
fn watchdog(client: &Client, c: Arc<RecordCache>) -> tokio::task::JoinHandle<()> {
    let (mut errors, mut unresponsive, mut reconnected) = (
        client.error_rx(),
        client.unresponsive_rx(),
        client.reconnect_rx(),
    );
    tokio::spawn(async move {
        loop {
            let what = tokio::select! {
                r = errors.recv() => r.map(|_| "failed").ok(),
                r = unresponsive.recv() => r.map(|_| "is unresponsive").ok(),
                r = reconnected.recv() => r.map(|_| "was replaced").ok(),
            };
            let Some(what) = what else { return };
            if c.enabled() {
                tracing::warn!(
                    "the read cache's tracking connection to Redis {what}: the cache is off until tracking is back"
                );
            }
            c.set_enabled(false);
        }
    })
}

/// While the cache is off and the connection up: tracking on again (from
/// scratch), the cache emptied, then serving again.
fn retracker(
    client: &Client,
    c: Arc<RecordCache>,
    tracked: Tracked,
) -> tokio::task::JoinHandle<()> {
    let tracker = client.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            if c.enabled() || !tracker.is_connected() {
                continue;
            }
            let _ = tracker.stop_tracking().await;
            match tracker
                .start_tracking(tracked.prefixes(), true, false, false, false)
                .await
            {
                Ok(()) => {
                    c.reset();
                    c.set_enabled(true);
                    tracing::info!(
                        "the read cache's tracking connection to Redis is back: the cache serves again"
                    );
                }
                Err(e) => {
                    tracing::debug!(error = %e, "turning Redis client tracking on again failed")
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse_key;

    #[test]
    fn okas_keys_name_their_feature_and_key() {
        assert_eq!(parse_key("oka:", "oka:{f|a}:l"), Some(("f", "a")));
        assert_eq!(parse_key("oka:", "oka:{f|a\\|b}:h"), Some(("f", "a\\|b")));
        assert_eq!(parse_key("oka:", "oka:{f|x}y}:l"), Some(("f", "x}y")));
        assert_eq!(parse_key("oka:", "other:{f|a}:l"), None);
        assert_eq!(parse_key("oka:", "oka:{f|a}:z"), None);
    }
}
