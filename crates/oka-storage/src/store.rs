//! The storage contract.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row};

/// What kind of failure a store call had; retry and HTTP decisions look only at this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The call did not finish in time.
    Timeout,
    /// The store cannot be reached or refuses service for now (transient).
    Unavailable,
    /// The store refused the credentials (a wrong or rotated password, an ACL
    /// change); retrying with the same ones will not help.
    Unauthorized,
    /// The store and this process disagree on how to talk: TLS, an unknown
    /// database or keyspace, a missing table, a layout or schema mismatch, an
    /// invalid URL; retrying will not help.
    Misconfigured,
    /// The data addressed does not exist where it must (not for missing keys, which
    /// are simply empty).
    NotFound,
    /// Stored data could not be decoded.
    Corrupt,
    /// The store cannot do this at all (a write to a read-only store, a history
    /// read from one that keeps only the latest record); retrying will not help.
    Unsupported,
    /// Anything else.
    Internal,
}

impl StoreErrorKind {
    /// What happened, in words (`the store …`).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Timeout => "the store did not answer in time",
            Self::Unavailable => "the store is unavailable",
            Self::Unauthorized => "the store refused the credentials",
            Self::Misconfigured => "the store is not configured as this process expects",
            Self::NotFound => "the store is missing data it needs",
            Self::Corrupt => "the store holds data that cannot be decoded",
            Self::Unsupported => "the store cannot do this",
            Self::Internal => "the store call failed",
        }
    }

    /// Whether retrying the same call may succeed.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Timeout | Self::Unavailable)
    }

    /// Whether the failure is the store's as a whole (every call fails alike
    /// until it is mended), not one call's data.
    pub fn is_outage(self) -> bool {
        matches!(
            self,
            Self::Timeout | Self::Unavailable | Self::Unauthorized | Self::Misconfigured
        )
    }

    /// What an operator should check, in words.
    pub fn advice(self) -> &'static str {
        match self {
            Self::Timeout => {
                "check the store's load and the network to it, or raise --store-timeout-ms"
            }
            Self::Unavailable => "check that the store is running and reachable from this machine",
            Self::Unauthorized => {
                "check the user and password in the store URL (or the Secret that holds them) against the store's, and the user's ACL"
            }
            Self::Misconfigured => {
                "check the store URL's scheme (rediss:// for TLS) and --store-tls-ca-file, the database or keyspace, and the layout"
            }
            Self::NotFound | Self::Corrupt => {
                "check what wrote the data: another writer or an older Oka may use the same key prefix or table"
            }
            Self::Unsupported => "use a store that can do this",
            Self::Internal => "see the log line's error for the cause",
        }
    }

    /// A bounded label for metrics and logs (`unavailable`, `unauthorized`, …).
    pub fn label(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Unauthorized => "unauthorized",
            Self::Misconfigured => "misconfigured",
            Self::NotFound => "not_found",
            Self::Corrupt => "corrupt",
            Self::Unsupported => "unsupported",
            Self::Internal => "internal",
        }
    }
}

/// A failed store call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {message}", kind.describe())]
pub struct StoreError {
    /// The kind.
    pub kind: StoreErrorKind,
    /// Details for logs (never sent to clients).
    pub message: String,
    /// The driver's error, when there is one (shared: a coalesced read's error
    /// reaches every request that waited on it).
    #[source]
    pub source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    /// A new error.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// One line for operators: what is wrong, the cause in the backend's words,
    /// and what to check (`the store refused the credentials (…); check …`).
    pub fn explain(&self) -> String {
        format!(
            "{} ({}); {}",
            self.kind.describe(),
            self.message.trim_end_matches('.'),
            self.kind.advice()
        )
    }

    /// The same error, keeping `source` (the driver's error) as its cause.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }
}

/// What a store can do, returned once by [`FeatureStore::capabilities`] and
/// looked at, never probed call by call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// It keeps a history per key (`range` and `last_n` reads).
    pub history: bool,
    /// It takes writes (`oka ingest`, `/v1/ingest`, sources).
    pub writes: bool,
    /// It can tell this process of every change to a key, by any writer (Redis
    /// client tracking), which `--cache tracking` needs.
    pub tracking: bool,
    /// Its layout (`oka`; `volga` for Volga's hashes).
    pub layout: &'static str,
    /// Why it lacks history or writes, in words, when it does.
    pub limited_because: Option<&'static str>,
}

impl Capabilities {
    /// Everything Oka's own layout does, without tracking.
    pub const FULL: Self = Self {
        history: true,
        writes: true,
        tracking: false,
        layout: "oka",
        limited_because: None,
    };

    /// Why this store answers only `latest` reads and takes no writes, or `None`
    /// for one that keeps history and takes writes.
    pub fn latest_only(&self) -> Option<&'static str> {
        if self.history && self.writes {
            None
        } else {
            Some(
                self.limited_because
                    .unwrap_or("the store keeps no history and takes no writes"),
            )
        }
    }
}

/// A point-in-time view of the cache's counters (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Keys answered from the cache.
    pub hits: u64,
    /// Keys read from the store.
    pub misses: u64,
    /// Keys invalidated by the store (tracked mode) or by this process's writes.
    pub invalidations: u64,
    /// Entries evicted to stay under the byte bound.
    pub evictions: u64,
    /// Times the whole cache was dropped (a lost tracking connection, a flush).
    pub resets: u64,
    /// Bytes held now (approximate: records, keys and bookkeeping).
    pub bytes: u64,
    /// The bound on `bytes`.
    pub max_bytes: u64,
    /// Entries held now.
    pub entries: u64,
    /// Whether the cache serves (tracked mode: tracking is established).
    pub enabled: bool,
}

/// A store of pipeline feature records, keyed by (feature, canonical entity key),
/// with a bounded history per key ordered by event time.
///
/// Reads are batched: one call answers every key of one feature, and returns one
/// entry per key in key order. `latest` gives zero or one row per key; `range` and
/// `last_n` give rows oldest first.
///
/// Writes are batched and idempotent for the same (key, event time); an older record
/// never replaces a newer one as the latest.
///
/// A wrapper (the read cache, read coalescing) is a layer: it names the store it
/// wraps in [`Self::inner`] and overrides only what it changes; the rest
/// (`backend`, `health`, `capabilities`, the counters of other layers) reaches the
/// store below through the defaults, so nothing is forwarded by hand.
#[async_trait]
pub trait FeatureStore: Send + Sync + fmt::Debug + 'static {
    /// The store this one wraps, for a layer; `None` for a backend.
    fn inner(&self) -> Option<&dyn FeatureStore> {
        None
    }

    /// The backend's name (a bounded metrics label: `memory`, `redis`, `scylla`).
    fn backend(&self) -> &'static str {
        self.inner().map_or("unknown", |s| s.backend())
    }

    /// What the store can do: a layer's are its store's.
    fn capabilities(&self) -> Capabilities {
        self.inner()
            .map_or(Capabilities::FULL, |s| s.capabilities())
    }

    /// Reads `query` for every key of `feature`.
    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError>;

    /// Writes records of `feature`; each row's `event_time` orders its history.
    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError>;

    /// Whether the store can serve (a layer: its store's health).
    async fn health(&self) -> Result<(), StoreError> {
        match self.inner() {
            Some(s) => s.health().await,
            None => Ok(()),
        }
    }

    /// A handle of the store for one worker, called once on the worker's own
    /// runtime as it starts. A backend whose client runs connection tasks on the
    /// runtime that connects it (Redis) returns a client of the worker's own, so a
    /// worker's reads never wake another thread. `None` (the default): the worker
    /// shares this store.
    async fn for_worker(&self) -> Result<Option<std::sync::Arc<dyn FeatureStore>>, StoreError> {
        Ok(None)
    }

    /// The read cache's counters, when a layer of the store is one
    /// ([`crate::Caching`]).
    fn cache_stats(&self) -> Option<CacheStats> {
        self.inner().and_then(|s| s.cache_stats())
    }

    /// Reads answered by a store call that another concurrent read made (read
    /// coalescing), over this store and its workers' handles; `None` when no
    /// layer of the store coalesces.
    fn coalesced_reads(&self) -> Option<u64> {
        self.inner().and_then(|s| s.coalesced_reads())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_keeps_the_driver_error_as_its_source() {
        let driver = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = StoreError::new(StoreErrorKind::Unavailable, "redis: refused").with_source(driver);
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("refused"));
        // Clones (a coalesced read's waiters) share it.
        assert!(std::error::Error::source(&e.clone()).is_some());
        assert!(
            std::error::Error::source(&StoreError::new(StoreErrorKind::Internal, "x")).is_none()
        );
    }
}
