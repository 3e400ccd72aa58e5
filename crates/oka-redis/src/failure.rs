//! Redis failures as store errors with a kind and a cause in words.
//!
//! - The kind comes from fred's error kind and, for an error reply, from Redis's
//!   error code (the reply's first word, which the protocol defines: `NOPERM`,
//!   `WRONGPASS`, `READONLY`, `LOADING`, …), never from the text around it.
//! - A command that fails while no connection is up says only that (fred:
//!   "Canceled", "Failed to route command"); the reason is the reconnection's
//!   failure, which [`Connection`] keeps, so a rotated password reads as
//!   `Unauthorized`, not as an outage to wait out.
//! - fred keeps an I/O error only as a Debug dump; the words come from probing the
//!   address instead ([`oka_storage::probe`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::error::{Error as FredError, ErrorKind};
use fred::interfaces::EventInterface;
use fred::types::config::Server;
use oka_storage::{StoreError, StoreErrorKind};

/// How long a probe of an unreachable server may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// fred 10's words when a cluster node's `CLUSTER INFO` does not say
/// `cluster_state:ok` (`protocol/connection.rs`).
const CLUSTER_STATE_NOT_OK: &str = "Invalid or missing cluster state.";

/// Maps a fred error to a store error: its kind, and a cause in words.
pub fn map_error(e: &FredError) -> StoreError {
    let (kind, cause) = classify(e);
    tracing::debug!(fred_kind = ?e.kind(), error = %e, "redis error");
    StoreError::new(kind, cause).with_source(e.clone())
}

/// The store error kind of `e`, and what happened in words.
fn classify(e: &FredError) -> (StoreErrorKind, String) {
    use StoreErrorKind as K;
    let details = e.details();
    match e.kind() {
        ErrorKind::Timeout => (K::Timeout, "redis did not answer in time".to_owned()),
        ErrorKind::Auth => (
            K::Unauthorized,
            format!("redis refused the credentials: {details}"),
        ),
        ErrorKind::Tls => (
            K::Misconfigured,
            format!("the TLS handshake with redis failed: {details}"),
        ),
        ErrorKind::Config | ErrorKind::Url => (
            K::Misconfigured,
            format!("the redis connection settings are invalid: {details}"),
        ),
        // fred's check of a cluster node on (re)connection: its CLUSTER INFO did not
        // say `cluster_state:ok` (a primary lost and its replica not yet promoted).
        ErrorKind::Protocol if details == CLUSTER_STATE_NOT_OK => (
            K::Unavailable,
            "the Redis Cluster's state is not ok (a primary is down and no replica has taken its slots yet)"
                .to_owned(),
        ),
        ErrorKind::Parse | ErrorKind::Protocol => (
            K::Corrupt,
            "redis answered with something this client cannot read (is that port Redis's?)"
                .to_owned(),
        ),
        ErrorKind::InvalidArgument => (K::Corrupt, format!("redis: {details}")),
        ErrorKind::Unknown | ErrorKind::InvalidCommand => match reply_code(details) {
            Some("NOPERM" | "NOAUTH" | "WRONGPASS") => {
                (K::Unauthorized, format!("redis refused: {details}"))
            }
            Some("READONLY") => (
                K::Misconfigured,
                format!("redis is a read-only replica, and writes need the primary: {details}"),
            ),
            Some("LOADING" | "MASTERDOWN" | "BUSY" | "TRYAGAIN" | "CLUSTERDOWN") => (
                K::Unavailable,
                format!("redis is not serving yet: {details}"),
            ),
            Some("WRONGTYPE") => (
                K::Corrupt,
                format!(
                    "a key holds another type than Oka writes (another writer on the key prefix?): {details}"
                ),
            ),
            Some(_) => (K::Internal, format!("redis: {details}")),
            // fred's own "Failed to route command" while no connection is up.
            None => (K::Unavailable, "no connection to redis is up".to_owned()),
        },
        ErrorKind::Sentinel => (K::Unavailable, "no redis sentinel answered".to_owned()),
        ErrorKind::IO
        | ErrorKind::Canceled
        | ErrorKind::Routing
        | ErrorKind::Cluster
        | ErrorKind::Backpressure => (K::Unavailable, "the connection to redis failed".to_owned()),
        _ => (K::Internal, format!("redis: {details}")),
    }
}

/// The error code of a Redis error reply: its first word when that is all
/// capitals (`NOPERM`, `ERR`, …).
fn reply_code(details: &str) -> Option<&str> {
    let word = details.split_whitespace().next()?;
    (word.len() > 1 && word.bytes().all(|b| b.is_ascii_uppercase())).then_some(word)
}

/// A connection failure of fred's reconnection loop, kept for the commands that
/// fail meanwhile with only "no connection".
#[derive(Debug, Clone, Default)]
pub struct Connection {
    failure: Arc<Mutex<Option<StoreError>>>,
}

impl Connection {
    /// Listens to `client`'s connection events: a failed (re)connection is kept,
    /// with the address probed for words when it is an I/O failure; a successful
    /// one clears it. The listeners run on the calling runtime.
    pub fn watch(&self, client: &impl EventInterface) {
        let on_error = self.clone();
        client.on_error(move |(e, server)| {
            let on_error = on_error.clone();
            async move {
                on_error.failed(&e, server.as_ref()).await;
                Ok(())
            }
        });
        let on_reconnect = self.clone();
        client.on_reconnect(move |_| {
            if let Ok(mut f) = on_reconnect.failure.lock() {
                *f = None;
            }
            async { Ok(()) }
        });
    }

    async fn failed(&self, e: &FredError, server: Option<&Server>) {
        let mut mapped = map_error(e);
        if mapped.kind == StoreErrorKind::Unavailable
            && let Some(server) = server
        {
            mapped.message =
                oka_storage::probe::reachability(&server.host, server.port, PROBE_TIMEOUT).await;
        }
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(mapped);
        }
    }

    /// `e` mapped, with the connection's own failure standing in for "no
    /// connection" or a timeout (a command that waited for a connection that
    /// cannot be made: the reason is why it cannot).
    pub fn map(&self, e: &FredError) -> StoreError {
        let mapped = map_error(e);
        if !mapped.kind.is_transient() {
            return mapped;
        }
        self.failure
            .lock()
            .ok()
            .and_then(|f| f.clone())
            .unwrap_or(mapped)
    }
}

/// Words for a connection to `servers` that could not be opened: the first
/// server's reachability when the failure is below Redis (I/O), else `e`'s.
pub async fn unreachable(e: StoreError, servers: &[Server]) -> StoreError {
    if e.kind != StoreErrorKind::Unavailable {
        return e;
    }
    let Some(server) = servers.first() else {
        return e;
    };
    StoreError {
        message: oka_storage::probe::reachability(&server.host, server.port, PROBE_TIMEOUT).await,
        ..e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(kind: ErrorKind, details: &str) -> StoreErrorKind {
        map_error(&FredError::new(kind, details.to_owned())).kind
    }

    #[test]
    fn kinds_come_from_fred_and_the_reply_code() {
        use StoreErrorKind as K;
        assert_eq!(
            kind(ErrorKind::Auth, "WRONGPASS invalid username-password pair"),
            K::Unauthorized
        );
        assert_eq!(
            kind(
                ErrorKind::Unknown,
                "NOPERM this user has no permissions to run the 'evalsha' command"
            ),
            K::Unauthorized
        );
        assert_eq!(
            kind(
                ErrorKind::Unknown,
                "READONLY You can't write against a read only replica."
            ),
            K::Misconfigured
        );
        assert_eq!(
            kind(
                ErrorKind::Unknown,
                "LOADING Redis is loading the dataset in memory"
            ),
            K::Unavailable
        );
        assert_eq!(
            kind(ErrorKind::Unknown, "Failed to route command."),
            K::Unavailable
        );
        // A Redis Cluster in failover is unavailable, not a reply this client cannot read.
        assert_eq!(
            kind(ErrorKind::Protocol, "Invalid or missing cluster state."),
            K::Unavailable
        );
        assert_eq!(kind(ErrorKind::Protocol, "Expected string."), K::Corrupt);
        assert_eq!(
            kind(ErrorKind::Tls, "invalid peer certificate"),
            K::Misconfigured
        );
        assert_eq!(
            kind(ErrorKind::IO, "Os { code: 111, kind: ConnectionRefused }"),
            K::Unavailable
        );
        assert_eq!(kind(ErrorKind::Timeout, "x"), K::Timeout);
        // No Debug dump reaches the words.
        let e = map_error(&FredError::new(ErrorKind::IO, "Os { code: 111 }"));
        assert_eq!(e.message, "the connection to redis failed");
    }

    #[test]
    fn a_reconnection_failure_explains_the_commands_that_fail_meanwhile() {
        let c = Connection::default();
        let no_connection = FredError::new(ErrorKind::Canceled, "Canceled");
        assert_eq!(c.map(&no_connection).kind, StoreErrorKind::Unavailable);
        if let Ok(mut f) = c.failure.lock() {
            *f = Some(map_error(&FredError::new(
                ErrorKind::Auth,
                "WRONGPASS invalid",
            )));
        }
        assert_eq!(c.map(&no_connection).kind, StoreErrorKind::Unauthorized);
        // So is a command that timed out waiting for a connection; an answer of
        // another kind is its own.
        assert_eq!(
            c.map(&FredError::new(ErrorKind::Timeout, "t")).kind,
            StoreErrorKind::Unauthorized
        );
        let wrongtype = FredError::new(ErrorKind::InvalidArgument, "WRONGTYPE Operation");
        assert_eq!(c.map(&wrongtype).kind, StoreErrorKind::Corrupt);
    }
}
