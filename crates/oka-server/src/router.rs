//! The serving and admin routers.
//!
//! Every serving request walks the same gate before its handler: the API key
//! check (when keys are configured), then the body read (size-limited, with a
//! deadline, refused before reading when its declared length is too big; ingest
//! bodies also against the global ingest budget), then admission (a per-worker
//! in-flight limit, 503 at once beyond it). A slot is taken only once the body is
//! in memory, so slow uploads cannot starve other requests.

use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::BodyExt;
use oka_core::ErrorCode;
use percent_encoding::percent_decode_str;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::Scope;
use crate::error::ApiError;
use crate::ingest;
use crate::metrics::{Metrics, Refusal, Route};
use crate::serve::{self, Dialect};
use crate::state::{Admitted, AppState, ReloadError};

/// The header that sets a request's deadline in milliseconds.
pub const DEADLINE_HEADER: &str = "x-oka-deadline-ms";

/// The serving router (port 1122).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/features", post(post_features).get(get_catalog))
        .route("/on_demand_compute", post(post_volga))
        .route("/on_demand_compute/{*json}", get(get_volga))
        .route("/v1/ingest", post(post_ingest))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// The admin router (port 9122): health, readiness, metrics, stats, reload.
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/stats", get(stats))
        .route("/admin/reload", post(reload))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            )
        })
        .with_state(state)
}

/// A shutdown gives a request body still arriving this long to complete.
const DRAIN_BODY_GRACE: Duration = Duration::from_secs(1);

/// A request body in memory, and the ingest budget it holds (if it was read
/// against the budget) until dropped.
#[derive(Debug)]
struct BodyBytes {
    bytes: Bytes,
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
/// body must arrive within the body-read timeout (408); a shutdown gives a body
/// still arriving [`DRAIN_BODY_GRACE`], then answers 503. With `budget`, the body's
/// bytes are also taken from the ingest budget (503 at once when it is spent).
async fn read_body(
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
                tokio::select! {
                    read = tokio::time::timeout(limits.body_read_timeout, read.as_mut()) => {
                        read.map_err(|_| timed_out())??
                    }
                    () = state.shared.drained() => {
                        tokio::time::timeout(DRAIN_BODY_GRACE, read.as_mut())
                            .await
                            .map_err(|_| {
                                state.shared.metrics.refused(Refusal::ShuttingDown);
                                ApiError::new(
                                    ErrorCode::ShuttingDown,
                                    "the server is shutting down and the request body had not arrived; retry on another instance",
                                )
                            })??
                    }
                }
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

/// The request's deadline header, if any.
fn deadline_header(headers: &HeaderMap) -> Result<Option<Duration>, ApiError> {
    let Some(v) = headers.get(DEADLINE_HEADER) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|ms| serve::DEADLINE_MS.contains(ms))
        .map(|ms| Some(Duration::from_millis(ms)))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "`X-Oka-Deadline-Ms` must be an integer from {} to {}",
                    serve::DEADLINE_MS.start(),
                    serve::DEADLINE_MS.end()
                ),
            )
        })
}

/// The API key check (when keys are configured); cheap, so it runs before the
/// body is read.
fn authorize(state: &AppState, headers: &HeaderMap, scope: Scope) -> Result<(), ApiError> {
    state.shared.loaded.load().keys.check(headers, scope)
}

/// Admission: a slot on this worker, taken once the request's body is in memory
/// (a slow upload never holds one). Holding it counts the request as in flight.
fn admit(state: &AppState) -> Result<Admitted, ApiError> {
    state.admit().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Overloaded,
            "this worker is at its in-flight limit; retry shortly",
        )
    })
}

/// Runs one serving-port handler with the bookkeeping every one of them shares:
/// the clock starts before anything else, the request counts as in flight until
/// it ends (or is dropped with its connection), an error becomes its JSON answer,
/// and the latency is recorded under `route` and the status.
async fn tracked<F, Fut>(state: &AppState, route: Route, handler: F) -> Response
where
    F: FnOnce(Instant) -> Fut,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    let started = Instant::now();
    let metrics = &state.shared.metrics;
    let _in_flight = InFlight::enter(metrics);
    let resp = handler(started)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    metrics.request(route, resp.status().as_u16(), started.elapsed());
    resp
}

/// Holds one count of `oka_http_requests_in_flight` until dropped.
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn enter(metrics: &'a Metrics) -> Self {
        metrics.in_flight().add(1);
        Self(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight().add(-1);
    }
}

fn json_response(body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A feature request from any of the three entry points; `body` yields its JSON.
async fn compute(
    state: &AppState,
    route: Route,
    headers: &HeaderMap,
    body: impl Future<Output = Result<Bytes, ApiError>>,
    dialect: Dialect,
) -> Response {
    tracked(state, route, |started| async move {
        let answer = async {
            authorize(state, headers, Scope::Read)?;
            let deadline = deadline_header(headers)?;
            let body = body.await?;
            let _slot = admit(state)?;
            let (out, timing) = serve::features(state, &body, dialect, started, deadline).await?;
            let mut resp = json_response(out);
            if let Ok(v) = HeaderValue::from_str(&timing.header()) {
                resp.headers_mut().insert("server-timing", v);
            }
            Ok::<_, ApiError>(resp)
        };
        match answer.await {
            Err(e) if dialect == Dialect::Volga && !asks_for_json(headers) => {
                Ok(e.into_text_response())
            }
            other => other,
        }
    })
    .await
}

/// Whether the request's `Accept` names JSON. Volga's routes answer errors as
/// plain text unless it does: Volga's client (aiohttp, `Accept: */*`) shows such a
/// body in its exception, while a JSON error body fails its response model with a
/// message about a missing `results` field.
fn asks_for_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.split(';').next().unwrap_or_default().trim();
            t.eq_ignore_ascii_case("application/json")
        })
}

async fn post_features(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let body = async { Ok(read_body(&state, &headers, body, None).await?.bytes) };
    compute(&state, Route::Features, &headers, body, Dialect::Oka).await
}

async fn post_volga(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let body = async { Ok(read_body(&state, &headers, body, None).await?.bytes) };
    compute(&state, Route::VolgaPost, &headers, body, Dialect::Volga).await
}

/// Volga's `GET /on_demand_compute/{json}`: the request is percent-encoded JSON in
/// the path. The wildcard also takes JSON containing `/` (which broke Volga's route);
/// the path is decoded here so that bad encodings get Oka's JSON errors.
async fn get_volga(State(state): State<AppState>, headers: HeaderMap, uri: Uri) -> Response {
    let limit = state.shared.limits.max_body_bytes;
    let body = async {
        let raw = uri
            .path()
            .strip_prefix("/on_demand_compute/")
            .unwrap_or_default();
        if raw.len() > limit {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                "request exceeds the size limit",
            ));
        }
        Ok(Bytes::from(percent_decode_str(raw).collect::<Vec<u8>>()))
    };
    compute(&state, Route::VolgaGet, &headers, body, Dialect::Volga).await
}

async fn get_catalog(State(state): State<AppState>, headers: HeaderMap) -> Response {
    tracked(&state, Route::Registry, |_| async {
        authorize(&state, &headers, Scope::Read)?;
        let _slot = admit(&state)?;
        Ok(json_response(
            state.shared.loaded.load().catalog_json.clone(),
        ))
    })
    .await
}

async fn post_ingest(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    tracked(&state, Route::Ingest, |_| async {
        authorize(&state, &headers, Scope::Write)?;
        let budget = Arc::clone(&state.shared.ingest_budget);
        let body = read_body(&state, &headers, body, Some(&budget)).await?;
        let _slot = admit(&state)?;
        let summary = ingest::ingest(&state.shared, &body.bytes).await?;
        Ok(json_response(summary))
    })
    .await
}

async fn not_found(State(state): State<AppState>) -> Response {
    tracked(&state, Route::Other, |_| async {
        Err(ApiError::new(ErrorCode::NotFound, "no such route"))
    })
    .await
}

async fn method_not_allowed(State(state): State<AppState>) -> Response {
    tracked(&state, Route::Other, |_| async {
        Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            "method not allowed on this route",
        ))
    })
    .await
}

async fn healthz() -> Response {
    json_response(r#"{"status":"ok"}"#)
}

fn not_ready(reason: &'static str) -> Response {
    let body = serde_json::json!({"ready": false, "reason": reason}).to_string();
    let mut resp = json_response(body);
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    resp
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shared.is_draining() {
        return not_ready("shutting down");
    }
    match state.shared.store.health().await {
        // The in-process store is ready, but its data goes with the process: say
        // so where operators look.
        Ok(()) if state.shared.store.backend() == "memory" => json_response(
            r#"{"ready":true,"note":"the store is memory:// (in this process): data written to it is lost when the server exits; give --store for a shared one"}"#,
        ),
        Ok(()) => json_response(r#"{"ready":true}"#),
        Err(e) => {
            tracing::warn!(backend = state.shared.store.backend(), error = %e, "store health check failed");
            not_ready("store unavailable")
        }
    }
}

/// `GET /metrics`: the OpenMetrics text. A scraper that asks for OpenMetrics
/// (Prometheus does) gets it labelled as such; anyone else (curl, a browser) gets
/// the same text as `text/plain`, so it shows instead of downloading.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let shared = &state.shared;
    let body = crate::metrics::render(
        &shared.metrics,
        &shared.loaded.load().metrics,
        shared.workers(),
        shared.store.coalesced_reads(),
        shared.store.cache_stats(),
    );
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        crate::metrics::OPENMETRICS
    } else {
        crate::metrics::PLAIN
    };
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

async fn stats(State(state): State<AppState>) -> Response {
    let body = serde_json::to_vec(&state.shared.stats.body()).unwrap_or_default();
    json_response(body)
}

/// `POST /admin/reload`: reload the spec and API keys; 400 with the reason if the
/// new spec is invalid (the old one keeps serving), 429 while a reload runs or
/// within the reload interval of the last. With an `admin` key configured, the
/// caller needs it; callers that are not authenticated see file names, never
/// paths, in the reason.
async fn reload(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let keys_guard = state.shared.loaded.load().keys.admin_enabled();
    if keys_guard
        && let Err(e) = state
            .shared
            .loaded
            .load()
            .keys
            .check(&headers, Scope::Admin)
    {
        state
            .shared
            .metrics
            .reload(crate::metrics::ReloadResult::Refused);
        return e.into_response();
    }
    // Refused at once, without a thread, while a reload runs or is too recent.
    let result = match state.shared.reload_allowed() {
        Err(refused) => Ok(Err(refused)),
        Ok(()) => {
            let shared = state.shared.clone();
            // Loading and validating a spec is CPU work off the serving workers' hot path.
            tokio::task::spawn_blocking(move || shared.reload()).await
        }
    };
    match result {
        Ok(Ok(summary)) => {
            json_response(serde_json::json!({"reloaded": true, "summary": summary}).to_string())
        }
        Ok(Err(ReloadError::Invalid(failure))) => {
            let reason = if keys_guard {
                failure.message
            } else {
                failure.public
            };
            ApiError::new(ErrorCode::InvalidSpec, reason).into_response()
        }
        Ok(Err(ReloadError::Busy)) => ApiError::new(
            ErrorCode::TooManyReloads,
            "a reload is running; retry when it has finished",
        )
        .into_response(),
        Ok(Err(ReloadError::TooSoon(wait))) => {
            let mut resp = ApiError::new(
                ErrorCode::TooManyReloads,
                format!(
                    "the last reload was too recent; retry in {} ms",
                    wait.as_millis().max(1)
                ),
            )
            .into_response();
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            if let Ok(v) = HeaderValue::from_str(&secs.max(1).to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            resp
        }
        Ok(Err(ReloadError::Unsupported)) => ApiError::new(
            ErrorCode::InvalidRequest,
            "this server has no reloadable spec source",
        )
        .into_response(),
        Err(_) => ApiError::new(ErrorCode::Internal, "internal error").into_response(),
    }
}
