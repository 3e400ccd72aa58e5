//! Reading a Volga deployment's Redis data page by page, for `oka migrate volga`:
//! `SCAN` over `volga:hot_feature:*` (a cursor that survives restarts, so a copy can
//! resume) and one `HGETALL` per hash, pipelined.

use std::collections::HashMap;
use std::time::Duration;

use fred::prelude::*;
use fred::types::Value as RedisValue;
use fred::types::scan::ScanType;
use oka_storage::{StoreError, StoreErrorKind};

use crate::failure::map_error;
use crate::volga_layout::PREFIX;

/// One Volga hash: its Redis key, the feature named in the key, and its fields.
#[derive(Debug, Clone)]
pub struct VolgaHash {
    /// The Redis key.
    pub key: String,
    /// The feature name in the key (`volga:hot_feature:{feature}:{keys}`).
    pub feature: String,
    /// The hash's fields (`feature_name`, `keys_json`, `values_json`, and
    /// whatever else a writer put there).
    pub fields: HashMap<String, Vec<u8>>,
}

/// One page of a scan: the hashes, and the cursor of the next page (`"0"` when
/// the scan is complete).
#[derive(Debug)]
pub struct Page {
    /// The hashes of this page (a hash deleted since the scan saw its key is left
    /// out).
    pub hashes: Vec<VolgaHash>,
    /// Where the next page starts; `"0"`: done.
    pub next: String,
}

/// A connection to the Redis that holds a Volga deployment's features.
pub struct VolgaReader {
    client: Client,
}

impl std::fmt::Debug for VolgaReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolgaReader").finish_non_exhaustive()
    }
}

impl VolgaReader {
    /// Connects to `url` (`redis://[user:pass@]host:port[/db]`, or `rediss://`).
    /// Redis Cluster is not supported (`SCAN` walks one node).
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        if !matches!(scheme, "redis" | "rediss") {
            return Err(StoreError::new(
                StoreErrorKind::Misconfigured,
                format!(
                    "Volga's Redis data is read from a redis:// or rediss:// URL, not {scheme}://"
                ),
            ));
        }
        let config = Config::from_url(url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Misconfigured,
                format!("invalid redis url: {}", e.details()),
            )
        })?;
        let servers = config.server.hosts();
        let client = Builder::from_config(config)
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
            })
            .with_performance_config(|p| p.default_command_timeout = timeout)
            .build()
            .map_err(|e| map_error(&e))?;
        if let Err(e) = client.init().await {
            return Err(crate::failure::unreachable(map_error(&e), &servers).await);
        }
        Ok(Self { client })
    }

    /// The page of the scan at `cursor` (`"0"` to start), about `count` keys.
    pub async fn page(&self, cursor: &str, count: u32) -> Result<Page, StoreError> {
        let pattern = format!("{PREFIX}*");
        let reply: RedisValue = self
            .client
            .scan_page(
                cursor.to_owned(),
                pattern,
                Some(count),
                Some(ScanType::Hash),
            )
            .await
            .map_err(|e| map_error(&e))?;
        let (next, keys) = match reply {
            RedisValue::Array(mut parts) if parts.len() == 2 => {
                let keys = parts.pop().unwrap_or(RedisValue::Null);
                let next = parts.pop().unwrap_or(RedisValue::Null);
                (text(next)?, keys)
            }
            other => return Err(unexpected(&other)),
        };
        let keys: Vec<String> = match keys {
            RedisValue::Array(keys) => keys.into_iter().map(text).collect::<Result<_, _>>()?,
            RedisValue::Null => Vec::new(),
            other => return Err(unexpected(&other)),
        };
        let pipeline = self.client.pipeline();
        for key in &keys {
            let queued: Result<(), fred::error::Error> = pipeline.hgetall(key.as_str()).await;
            queued.map_err(|e| map_error(&e))?;
        }
        let replies: Vec<HashMap<String, Vec<u8>>> = if keys.is_empty() {
            Vec::new()
        } else {
            pipeline.all().await.map_err(|e| map_error(&e))?
        };
        let hashes = keys
            .into_iter()
            .zip(replies)
            .filter(|(_, fields)| !fields.is_empty())
            .map(|(key, fields)| VolgaHash {
                feature: feature_of(&key).to_owned(),
                key,
                fields,
            })
            .collect();
        Ok(Page { hashes, next })
    }
}

/// The feature name in a Volga key: between the prefix and the next `:`.
fn feature_of(key: &str) -> &str {
    let rest = key.strip_prefix(PREFIX).unwrap_or(key);
    rest.split_once(':').map_or(rest, |(f, _)| f)
}

fn text(v: RedisValue) -> Result<String, StoreError> {
    match v {
        RedisValue::String(s) => Ok(s.to_string()),
        RedisValue::Bytes(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        other => Err(unexpected(&other)),
    }
}

fn unexpected(v: &RedisValue) -> StoreError {
    StoreError::new(
        StoreErrorKind::Corrupt,
        format!("redis: unexpected SCAN reply {v:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::feature_of;

    #[test]
    fn the_feature_is_the_name_after_the_prefix() {
        assert_eq!(
            feature_of(r#"volga:hot_feature:test_feature:{"id": "a:b"}"#),
            "test_feature"
        );
        assert_eq!(feature_of("volga:hot_feature:odd"), "odd");
    }
}
