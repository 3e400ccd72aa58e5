//! The serving and admin routers.
//!
//! Every serving request walks the same gate before its handler: admission (a
//! per-worker in-flight limit, 503 at once beyond it), then the API key check (when
//! keys are configured), then the body read (size-limited).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use oka_core::ErrorCode;
use percent_encoding::percent_decode_str;

use crate::auth::Scope;
use crate::error::ApiError;
use crate::ingest;
use crate::metrics::Route;
use crate::serve;
use crate::state::{Admitted, AppState};

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

/// Reads a body up to the configured limit; beyond it, 413.
async fn read_body(state: &AppState, body: Body) -> Result<bytes::Bytes, ApiError> {
    let limit = state.shared.limits.max_body_bytes;
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("request body exceeds {limit} bytes"),
        )),
        Err(_) => Err(ApiError::new(
            ErrorCode::MalformedRequest,
            "could not read the request body",
        )),
    }
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

/// Admission and authentication, in that order. Holding the returned slot counts
/// the request as in flight on this worker.
fn gate(state: &AppState, headers: &HeaderMap, scope: Scope) -> Result<Admitted, ApiError> {
    let slot = state.admit().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Overloaded,
            "this worker is at its in-flight limit; retry shortly",
        )
    })?;
    state.shared.loaded.load().keys.check(headers, scope)?;
    Ok(slot)
}

/// Records metrics for a finished request and turns errors into responses.
fn finish(
    state: &AppState,
    route: Route,
    started: Instant,
    result: Result<Response, ApiError>,
) -> Response {
    let resp = result.unwrap_or_else(IntoResponse::into_response);
    let m = &state.shared.metrics;
    m.request(route, resp.status().as_u16(), started.elapsed());
    m.in_flight().add(-1);
    resp
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
    body: impl Future<Output = Result<bytes::Bytes, ApiError>>,
    volga: bool,
) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let result = async {
        let _slot = gate(state, headers, Scope::Read)?;
        let deadline = deadline_header(headers)?;
        let body = body.await?;
        let (out, timing) = serve::features(state, &body, volga, started, deadline).await?;
        let mut resp = json_response(out);
        if let Ok(v) = HeaderValue::from_str(&timing.header()) {
            resp.headers_mut().insert("server-timing", v);
        }
        Ok(resp)
    }
    .await;
    finish(state, route, started, result)
}

async fn post_features(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    compute(
        &state,
        Route::Features,
        &headers,
        read_body(&state, body),
        false,
    )
    .await
}

async fn post_volga(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    compute(
        &state,
        Route::VolgaPost,
        &headers,
        read_body(&state, body),
        true,
    )
    .await
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
        Ok(bytes::Bytes::from(
            percent_decode_str(raw).collect::<Vec<u8>>(),
        ))
    };
    compute(&state, Route::VolgaGet, &headers, body, true).await
}

async fn get_catalog(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let result = gate(&state, &headers, Scope::Read)
        .map(|_slot| json_response(state.shared.loaded.load().catalog_json.clone()));
    finish(&state, Route::Registry, started, result)
}

async fn post_ingest(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let result = async {
        let _slot = gate(&state, &headers, Scope::Write)?;
        let body = read_body(&state, body).await?;
        let summary = ingest::ingest(&state.shared, &body).await?;
        Ok(json_response(summary))
    }
    .await;
    finish(&state, Route::Ingest, started, result)
}

async fn not_found(State(state): State<AppState>) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let err = ApiError::new(ErrorCode::NotFound, "no such route");
    finish(&state, Route::Other, started, Err(err))
}

async fn method_not_allowed(State(state): State<AppState>) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let err = ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    );
    finish(&state, Route::Other, started, Err(err))
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
    if state
        .shared
        .draining
        .load(std::sync::atomic::Ordering::Acquire)
    {
        return not_ready("shutting down");
    }
    match state.shared.store.health().await {
        Ok(()) => json_response(r#"{"ready":true}"#),
        Err(e) => {
            tracing::warn!(backend = state.shared.store.backend(), error = %e, "store health check failed");
            not_ready("store unavailable")
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let shared = &state.shared;
    let body = shared.metrics.render(
        &shared.loaded.load().metrics,
        &shared.workers(),
        shared.store.coalesced_reads(),
    );
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

async fn stats(State(state): State<AppState>) -> Response {
    let body = serde_json::to_vec(&state.shared.stats.body()).unwrap_or_default();
    json_response(body)
}

/// `POST /admin/reload`: reload the spec and API keys; 400 with the reason if the
/// new spec is invalid (the old one keeps serving).
async fn reload(State(state): State<AppState>) -> Response {
    let shared = state.shared.clone();
    // Loading and validating a spec is CPU work off the serving workers' hot path.
    let result = tokio::task::spawn_blocking(move || shared.reload()).await;
    match result {
        Ok(Ok(summary)) => {
            json_response(serde_json::json!({"reloaded": true, "summary": summary}).to_string())
        }
        Ok(Err(reason)) => ApiError::new(ErrorCode::InvalidSpec, reason).into_response(),
        Err(_) => ApiError::new(ErrorCode::Internal, "internal error").into_response(),
    }
}
