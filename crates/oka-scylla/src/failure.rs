//! CQL driver errors as store errors: kinds from the driver's typed errors and
//! the server's error codes (never their text), and a session that cannot be
//! opened said by probing the first node ([`oka_storage::probe`]).

use std::time::Duration;

use oka_storage::{StoreError, StoreErrorKind};
use scylla::errors::{DbError, ExecutionError, NewSessionError, PrepareError, RequestAttemptError};

/// Maps a driver error to a store error kind.
pub fn map_execution_error(e: &ExecutionError) -> StoreError {
    let kind = match e {
        ExecutionError::RequestTimeout(_) => StoreErrorKind::Timeout,
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => {
            StoreErrorKind::Unavailable
        }
        ExecutionError::LastAttemptError(attempt) => attempt_kind(attempt),
        ExecutionError::PrepareError(p) => prepare_kind(p),
        _ => StoreErrorKind::Internal,
    };
    tracing::debug!(error = %e, ?kind, "cql error");
    StoreError::new(kind, format!("cql: {e}")).with_source(e.clone())
}

fn attempt_kind(e: &RequestAttemptError) -> StoreErrorKind {
    match e {
        RequestAttemptError::DbError(db, _) => match db {
            DbError::ReadTimeout { .. } | DbError::WriteTimeout { .. } => StoreErrorKind::Timeout,
            DbError::Unavailable { .. }
            | DbError::Overloaded
            | DbError::IsBootstrapping
            | DbError::ReadFailure { .. }
            | DbError::WriteFailure { .. }
            | DbError::RateLimitReached { .. } => StoreErrorKind::Unavailable,
            DbError::AuthenticationError | DbError::Unauthorized => StoreErrorKind::Unauthorized,
            // A missing keyspace or table (`Invalid`), a statement the server
            // refuses: the schema is not the one Oka expects.
            DbError::Invalid | DbError::SyntaxError | DbError::ConfigError => {
                StoreErrorKind::Misconfigured
            }
            _ => StoreErrorKind::Internal,
        },
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => StoreErrorKind::Unavailable,
        RequestAttemptError::CqlResultParseError(_)
        | RequestAttemptError::CqlErrorParseError(_)
        | RequestAttemptError::BodyExtensionsParseError(_)
        | RequestAttemptError::UnexpectedResponse(_) => StoreErrorKind::Corrupt,
        _ => StoreErrorKind::Internal,
    }
}

fn prepare_kind(e: &PrepareError) -> StoreErrorKind {
    match e {
        PrepareError::ConnectionPoolError(_) => StoreErrorKind::Unavailable,
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_kind(first_attempt),
        _ => StoreErrorKind::Internal,
    }
}

pub fn map_session_error(e: &NewSessionError) -> StoreError {
    let kind = match e {
        NewSessionError::FailedToResolveAnyHostname(_)
        | NewSessionError::EmptyKnownNodesList
        | NewSessionError::MetadataError(_) => StoreErrorKind::Unavailable,
        _ => StoreErrorKind::Internal,
    };
    StoreError::new(kind, format!("cql: {e}")).with_source(e.clone())
}

pub(crate) fn map_prepare_error(e: &PrepareError) -> StoreError {
    StoreError::new(prepare_kind(e), format!("cql: {e}")).with_source(e.clone())
}

/// A session that could not be opened because no node answered: the first
/// node's reachability in words (the driver's message lists addresses and
/// Debug dumps).
pub(crate) async fn unreachable(e: StoreError, nodes: &[String]) -> StoreError {
    let node = nodes.first().and_then(|n| n.rsplit_once(':'));
    match node {
        Some((host, port)) if e.kind == StoreErrorKind::Unavailable => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = port.parse().unwrap_or(9042);
            StoreError {
                message: oka_storage::probe::reachability(host, port, Duration::from_secs(2)).await,
                ..e
            }
        }
        _ => e,
    }
}
