//! Feast's requests on the request path (`POST /get-online-features`, and the
//! gRPC services' `GetOnlineFeatures`): Feast's request becomes one Oka request
//! per row group ([`super::plan`]), each computed by [`crate::serve::compute`]
//! (concurrently when there are several), and the answer is written from them
//! all in Feast's shape.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesOrdered;
use oka_core::execute::Outputs;
use oka_core::request::{Prepared, SharedRequest};
use oka_core::{ErrorCode, KeyPolicy};
use oka_feast::FeastRegistry;
use oka_telemetry::trace::RequestTrace;

use crate::error::ApiError;
use crate::serve::{Call, Request, Timing, compute, computed, time_budget};
use crate::state::{AppState, Loaded};

/// Row groups computed at once (each one Oka request, with its store reads).
const GROUPS_AT_ONCE: usize = 8;

/// The Feast registry served, or `404` when none is.
pub(crate) fn registry(state: &AppState) -> Result<Arc<FeastRegistry>, ApiError> {
    state
        .shared
        .feast
        .as_ref()
        .map(|f| f.load_full())
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no Feast repository is served"))
}

/// `POST /get-online-features`: the JSON answer and its timing.
pub(crate) async fn features(
    state: &AppState,
    body: &[u8],
    call: Call<'_>,
) -> Result<(Vec<u8>, Timing), ApiError> {
    let feast = registry(state)?;
    // One spec version serves the whole request.
    let loaded = state.shared.loaded.load();
    let (requests, plan) = super::parse(&feast, &loaded.registry, body)?;
    let mut timing = Timing::default();
    let groups = compute_groups(state, &loaded, &requests, call, &mut timing).await?;
    let t = Instant::now();
    let mut out = Vec::with_capacity(plan.answer_bytes());
    super::write_response(&groups, &plan, &mut out)?;
    let done = Instant::now();
    timing.encode = done.saturating_duration_since(t);
    computed(&state.shared, call, done, key_count(&groups));
    Ok((out, timing))
}

/// Computes each row group's request (one spec version for all), up to
/// [`GROUPS_AT_ONCE`] at a time, all within the request's one deadline; the
/// timing is the first group's.
pub(crate) async fn compute_groups(
    state: &AppState,
    loaded: &Loaded,
    requests: &[SharedRequest],
    call: Call<'_>,
    timing: &mut Timing,
) -> Result<Vec<(Prepared, Outputs)>, ApiError> {
    let Call {
        started,
        deadline,
        trace,
    } = call;
    let default = state.shared.limits.default_deadline;
    let budget = match requests.first() {
        Some(r) => time_budget(&r.rest, deadline, default)?,
        None => deadline.unwrap_or(default),
    };
    let context = (started, budget, trace);
    if let [only] = requests {
        // One group (no on-demand view's request data differs between rows):
        // computed as Oka's own route computes its request.
        let (computed, t) = compute_group(state, loaded, only, context).await?;
        *timing = t;
        return Ok(vec![computed]);
    }
    // At most GROUPS_AT_ONCE groups in flight: rows that all give different
    // request data must not fan out into as many concurrent store reads. (A
    // loop, not `buffered` over a mapped iterator: a closure taking a borrowed
    // request, held across an await, makes the handler's future not `Send`.)
    let mut rest = requests.iter();
    let mut pending = FuturesOrdered::new();
    for request in rest.by_ref().take(GROUPS_AT_ONCE) {
        pending.push_back(compute_group(state, loaded, request, context));
    }
    let mut done = Vec::with_capacity(requests.len());
    while let Some(group) = pending.next().await {
        done.push(group?);
        if let Some(request) = rest.next() {
            pending.push_back(compute_group(state, loaded, request, context));
        }
    }
    if let Some((_, t)) = done.first() {
        *timing = *t;
    }
    Ok(done.into_iter().map(|(c, _)| c).collect())
}

/// One row group's request, computed with a timing of its own, under the
/// request's start, budget and trace.
async fn compute_group(
    state: &AppState,
    loaded: &Loaded,
    request: &SharedRequest,
    (started, budget, trace): (Instant, Duration, Option<&RequestTrace>),
) -> Result<((Prepared, Outputs), Timing), ApiError> {
    let request = Request {
        request: request.view(),
        keys: KeyPolicy::Strict,
        started,
        budget,
        trace,
    };
    let mut timing = Timing::default();
    let computed = compute(state, loaded, request, &mut timing).await?;
    Ok((computed, timing))
}

/// The keys all groups served.
pub(crate) fn key_count(groups: &[(Prepared, Outputs)]) -> usize {
    groups.iter().map(|(p, _)| p.key_count()).sum()
}
