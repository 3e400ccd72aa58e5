//! Store URLs to backends. This is the only place that names concrete backends
//! (quickwit's storage resolver pattern).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use oka_redis::{RedisOptions, RedisStore};
use oka_storage::{FeatureStore, MemoryStore};

/// How to reach the store.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// The store URL: `memory://`, `redis://[user:pass@]host:port[/db]`,
    /// `redis-cluster://host:port[?node=host:port…]`, `redis-sentinel://…`; `rediss…`
    /// for TLS.
    #[arg(
        long,
        env = "OKA_STORE",
        default_value = "memory://",
        hide_env_values = true
    )]
    pub store: String,
    /// Timeout of one store command, milliseconds.
    #[arg(long, env = "OKA_STORE_TIMEOUT_MS", default_value_t = 1000)]
    pub store_timeout_ms: u64,
    /// Timeout of connecting to the store, milliseconds.
    #[arg(long, env = "OKA_STORE_CONNECT_TIMEOUT_MS", default_value_t = 5000)]
    pub store_connect_timeout_ms: u64,
    /// Connections to the store.
    #[arg(long, env = "OKA_STORE_POOL_SIZE", default_value_t = 4)]
    pub store_pool_size: usize,
    /// Prefix of every key the store writes.
    #[arg(long, env = "OKA_STORE_KEY_PREFIX", default_value = "oka:")]
    pub store_key_prefix: String,
    /// For `rediss://`: a PEM file of CA certificates to trust instead of the
    /// system's.
    #[arg(long, env = "OKA_STORE_TLS_CA_FILE")]
    pub store_tls_ca_file: Option<std::path::PathBuf>,
}

/// Opens the store described by `args`.
pub async fn open(args: &StoreArgs) -> Result<Arc<dyn FeatureStore>> {
    let url = args.store.as_str();
    let scheme = url.split_once("://").map_or(url, |(s, _)| s);
    match scheme {
        "memory" => Ok(Arc::new(MemoryStore::new())),
        "redis" | "rediss" | "redis-cluster" | "rediss-cluster" | "redis-sentinel"
        | "rediss-sentinel" => {
            let options = RedisOptions {
                pool_size: args.store_pool_size,
                command_timeout: Duration::from_millis(args.store_timeout_ms),
                connect_timeout: Duration::from_millis(args.store_connect_timeout_ms),
                key_prefix: args.store_key_prefix.clone(),
                tls_ca_file: args.store_tls_ca_file.clone(),
            };
            let store = RedisStore::connect(url, options)
                .await
                .map_err(|e| anyhow::anyhow!("connecting to {}: {}", redact(url), e.message))?;
            Ok(Arc::new(store))
        }
        other => bail!(
            "unsupported store URL scheme `{other}://` (this build supports memory://, redis[s]://, redis[s]-cluster://, redis[s]-sentinel://)"
        ),
    }
}

/// The URL with any password replaced, for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
        assert_eq!(redact("redis://u:secret@h"), "redis://u:***@h");
        assert_eq!(redact("memory://"), "memory://");
    }

    fn args(url: &str) -> StoreArgs {
        StoreArgs {
            store: url.to_owned(),
            store_timeout_ms: 100,
            store_connect_timeout_ms: 300,
            store_pool_size: 1,
            store_key_prefix: "oka:".to_owned(),
            store_tls_ca_file: None,
        }
    }

    #[tokio::test]
    async fn unknown_schemes_are_refused() {
        let err = open(&args("bogus://x"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("bogus"), "{err}");
        assert!(open(&args("memory://")).await.is_ok());
    }

    #[tokio::test]
    async fn unreachable_redis_is_a_clear_error_without_the_password() {
        let err = open(&args("redis://:hunter2@127.0.0.1:1"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("connecting to redis://:***@127.0.0.1:1"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }
}
