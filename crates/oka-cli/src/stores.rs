//! Store URLs to backends. This is the only place that names concrete backends
//! (quickwit's storage resolver pattern): `memory://` is built in; other schemes
//! come with their backend crates.

use std::sync::Arc;

use anyhow::{Result, bail};
use oka_storage::{FeatureStore, MemoryStore};

/// Opens the store at `url`.
pub async fn open(url: &str) -> Result<Arc<dyn FeatureStore>> {
    let scheme = url.split_once("://").map_or(url, |(s, _)| s);
    match scheme {
        "memory" => Ok(Arc::new(MemoryStore::new())),
        other => {
            bail!("unsupported store URL scheme `{other}://` (this build supports: memory://)")
        }
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

    #[tokio::test]
    async fn unknown_schemes_are_refused() {
        let err = open("bogus://x")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("bogus"), "{err}");
        assert!(open("memory://").await.is_ok());
    }
}
