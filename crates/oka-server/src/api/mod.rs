//! The wire APIs, a folder each: its routes (one function that registers
//! them), the adapter from its request into Oka's [`Request`](crate::serve::Request),
//! and its answer writer. Under them all is one request path
//! ([`crate::serve::compute`]); around every handler, one guard
//! ([`crate::guard`]). Adding a wire API is adding a folder here and merging its
//! routes in [`crate::router`].
//!
//! - [`oka`]: `POST /v1/features`, `GET /v1/features`, `POST /v1/ingest`.
//! - [`volga`]: `/on_demand_compute` (POST, and GET with the request in the path).
//! - [`feast`]: `POST /get-online-features`, `/push`, `/write-to-online-store`,
//!   `/health`, and Feast's gRPC services, with `--feast-repo`.

pub mod feast;
pub mod oka;
pub mod volga;

use oka_core::ErrorCode;
use oka_storage::{StoreError, StoreErrorKind};

use crate::error::ApiError;
use crate::state::Shared;

/// The answer to a write that failed in the store after `written` records of the
/// request were stored (`/v1/ingest`, Feast's `/push` and
/// `/write-to-online-store`): the store's outage is noted, and the message says
/// what was written and that sending the request again is safe.
pub(crate) fn write_failed(shared: &Shared, error: &StoreError, written: usize) -> ApiError {
    if error.kind == StoreErrorKind::Unsupported {
        return ApiError::new(
            ErrorCode::UnsupportedByStore,
            crate::error::UNSUPPORTED_BY_STORE,
        );
    }
    shared.store_watch.failed(error);
    tracing::debug!(kind = error.kind.label(), error = %error.message, written, "a write failed in the store");
    let (code, what) = match error.kind {
        StoreErrorKind::Timeout => (ErrorCode::StoreTimeout, "did not answer in time"),
        StoreErrorKind::Unavailable
        | StoreErrorKind::Unauthorized
        | StoreErrorKind::Misconfigured => (ErrorCode::StoreUnavailable, "is unavailable"),
        _ => (ErrorCode::Internal, "failed"),
    };
    ApiError::new(
        code,
        format!(
            "the feature store {what}; {written} records of the body were written before it failed; send the body again (a record written twice is stored once)"
        ),
    )
}
