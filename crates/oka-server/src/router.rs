//! The serving and admin routers.

use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use oka_core::ErrorCode;
use percent_encoding::percent_decode_str;

use crate::error::ApiError;
use crate::ingest;
use crate::metrics::Route;
use crate::serve;
use crate::state::AppState;

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

/// The admin router (port 9122): health, readiness, metrics, stats.
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/stats", get(stats))
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

async fn compute(
    state: &AppState,
    route: Route,
    started: Instant,
    body: Result<bytes::Bytes, ApiError>,
    volga: bool,
) -> Response {
    state.shared.metrics.in_flight().add(1);
    let result = async {
        let body = body?;
        let (out, timing) = serve::features(state, &body, volga).await?;
        let mut resp = json_response(out);
        if let Ok(v) = HeaderValue::from_str(&timing.header()) {
            resp.headers_mut().insert("server-timing", v);
        }
        Ok(resp)
    }
    .await;
    finish(state, route, started, result)
}

async fn post_features(State(state): State<AppState>, body: Body) -> Response {
    let started = Instant::now();
    let body = read_body(&state, body).await;
    compute(&state, Route::Features, started, body, false).await
}

async fn post_volga(State(state): State<AppState>, body: Body) -> Response {
    let started = Instant::now();
    let body = read_body(&state, body).await;
    compute(&state, Route::VolgaPost, started, body, true).await
}

/// Volga's `GET /on_demand_compute/{json}`: the request is percent-encoded JSON in
/// the path. The wildcard also takes JSON containing `/` (which broke Volga's route);
/// the path is decoded here so that bad encodings get Oka's JSON errors.
async fn get_volga(State(state): State<AppState>, uri: Uri) -> Response {
    let started = Instant::now();
    let raw = uri
        .path()
        .strip_prefix("/on_demand_compute/")
        .unwrap_or_default();
    let body = if raw.len() > state.shared.limits.max_body_bytes {
        Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            "request exceeds the size limit",
        ))
    } else {
        Ok(bytes::Bytes::from(
            percent_decode_str(raw).collect::<Vec<u8>>(),
        ))
    };
    compute(&state, Route::VolgaGet, started, body, true).await
}

async fn get_catalog(State(state): State<AppState>) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let body = state.shared.loaded.catalog_json.clone();
    finish(&state, Route::Registry, started, Ok(json_response(body)))
}

async fn post_ingest(State(state): State<AppState>, body: Body) -> Response {
    let started = Instant::now();
    state.shared.metrics.in_flight().add(1);
    let result = async {
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

async fn readyz(State(state): State<AppState>) -> Response {
    match state.shared.store.health().await {
        Ok(()) => json_response(r#"{"ready":true}"#),
        Err(e) => {
            tracing::warn!(backend = state.shared.store.backend(), error = %e, "store health check failed");
            let mut resp = json_response(r#"{"ready":false,"reason":"store unavailable"}"#);
            *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            resp
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let body = state.shared.metrics.render(&state.shared.loaded.metrics);
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
