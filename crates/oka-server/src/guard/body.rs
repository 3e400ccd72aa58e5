//! Request bodies: read within the size limit, the body-read deadline and, for
//! ingest, the ingest budget.

use std::sync::Arc;
use std::task::Poll;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::BodyExt;
use oka_core::ErrorCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::metrics::Refusal;
use crate::state::AppState;

/// A request body in memory, and the ingest budget it holds (if it was read
/// against the budget) until dropped.
#[derive(Debug)]
pub(crate) struct BodyBytes {
    pub(crate) bytes: Bytes,
    _budget: Option<OwnedSemaphorePermit>,
}

fn too_large(state: &AppState, limit: usize) -> ApiError {
    state.shared.metrics.refused(Refusal::BodyTooLarge);
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("the request body exceeds {limit} bytes (the server's --max-body-bytes)"),
    )
}

fn over_budget(state: &AppState) -> ApiError {
    state.shared.metrics.refused(Refusal::IngestBudget);
    ApiError::new(
        ErrorCode::Overloaded,
        "the server holds as many ingest bodies as its ingest budget allows; retry shortly",
    )
}

/// Takes `n` bytes of the ingest budget, or refuses at once.
fn take_budget(
    state: &AppState,
    budget: &Arc<Semaphore>,
    n: usize,
) -> Result<OwnedSemaphorePermit, ApiError> {
    u32::try_from(n)
        .ok()
        .and_then(|n| Arc::clone(budget).try_acquire_many_owned(n).ok())
        .ok_or_else(|| over_budget(state))
}

/// Reads a request body. A declared `Content-Length` over the limit is refused
/// (413) before any of the body is read, and so is a body that grows past it; the
/// body must arrive within the body-read timeout (408), shutdown or not. With `budget`, the body's
/// bytes are also taken from the ingest budget (503 at once when it is spent).
pub(crate) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    budget: Option<&Arc<Semaphore>>,
) -> Result<BodyBytes, ApiError> {
    let limits = &state.shared.limits;
    let limit = limits.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(state, limit));
    }
    let mut held = match (budget, declared) {
        (Some(budget), Some(n)) => Some(take_budget(state, budget, n as usize)?),
        _ => None,
    };
    // Without a declared length the budget is taken as the bytes arrive.
    let per_frame = if declared.is_none() { budget } else { None };
    let bytes = {
        // A declared length is at most `limit` here: room for all of it at once.
        let capacity = declared.map_or(0, |n| n as usize);
        let mut read = std::pin::pin!(collect(state, body, limit, capacity, per_frame, &mut held));
        // Most bodies arrive with their head: no timer for them.
        match futures::poll!(read.as_mut()) {
            Poll::Ready(bytes) => bytes?,
            Poll::Pending => {
                let timed_out = || {
                    state.shared.metrics.refused(Refusal::BodyTimeout);
                    ApiError::new(
                        ErrorCode::BodyTimeout,
                        format!(
                            "the request body did not arrive within {} ms of the request head; send it promptly",
                            limits.body_read_timeout.as_millis()
                        ),
                    )
                };
                // Shutdown does not cut a body short: it arrives within its own
                // timeout, and the request is served (the grace period bounds it).
                tokio::time::timeout(limits.body_read_timeout, read.as_mut())
                    .await
                    .map_err(|_| timed_out())??
            }
        }
    };
    Ok(BodyBytes {
        bytes,
        _budget: held,
    })
}

/// Collects a body's data frames, refusing it past `limit` bytes (and, with
/// `budget`, when the ingest budget cannot cover the next frame). A body of
/// several frames is copied once into a buffer of `capacity` (its declared
/// length), not grown by doubling.
async fn collect(
    state: &AppState,
    mut body: Body,
    limit: usize,
    capacity: usize,
    budget: Option<&Arc<Semaphore>>,
    held: &mut Option<OwnedSemaphorePermit>,
) -> Result<Bytes, ApiError> {
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| {
            ApiError::new(
                ErrorCode::MalformedRequest,
                "could not read the request body (the connection failed or the encoding is broken)",
            )
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total += data.len();
        if total > limit {
            return Err(too_large(state, limit));
        }
        if let Some(budget) = budget {
            let more = take_budget(state, budget, data.len())?;
            match held {
                Some(h) => h.merge(more),
                None => *held = Some(more),
            }
        }
        // One frame is the common case: kept without a copy.
        match &first {
            None if rest.is_empty() => first = Some(data),
            _ => {
                if let Some(f) = first.take() {
                    rest.reserve_exact(capacity.max(f.len() + data.len()));
                    rest.extend_from_slice(&f);
                }
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(rest)))
}
