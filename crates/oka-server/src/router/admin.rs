//! The admin port's handlers (port 9122): health, readiness, metrics, stats,
//! reload. Its reads are open; a reload needs an `admin` key once one is
//! configured.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use oka_core::ErrorCode;
use serde::Serialize;

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::state::{AppState, ReloadError};

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let body = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// The answer of `GET /healthz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`: the process serves.
    #[schema(value_type = String, examples("ok"))]
    pub status: &'static str,
}

/// The answer of `GET /readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// Whether the store's health check passed (and shutdown has not begun).
    pub ready: bool,
    /// With the in-process `memory://` store: that its data goes with the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    pub note: Option<&'static str>,
    /// When not ready: `shutting down`, why the store cannot serve and what
    /// to check (`the store refused the credentials (…); check the user and
    /// password …`), or why no Python worker is alive.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    pub reason: Option<String>,
}

/// The answer of a successful `POST /admin/reload`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Reloaded {
    /// Always `true`.
    pub reloaded: bool,
    /// What is now served, e.g. `4 features, 0 API keys`.
    pub summary: String,
}

/// `GET /healthz`.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "healthz",
    summary = "Liveness: 200 while the process serves",
    responses((status = 200, description = "The process serves.", body = Health)))]
pub(super) async fn healthz() -> Response {
    json(StatusCode::OK, &Health { status: "ok" })
}

fn not_ready(reason: String) -> Response {
    let body = Readiness {
        ready: false,
        note: None,
        reason: Some(reason),
    };
    json(StatusCode::SERVICE_UNAVAILABLE, &body)
}

/// `GET /readyz`.
#[utoipa::path(get, path = "/readyz", tag = "health", operation_id = "readyz",
    summary = "Readiness: the store's health check",
    responses(
        (status = 200, description = "Ready: the store's health check passed. With the in-process `memory://` store the answer adds a `note`.", body = Readiness),
        (status = 503, description = "Not ready: the store cannot serve (`reason` says why: unreachable, credentials refused, misconfigured, too slow, and what to check), no Python worker is alive (`reason` says why the last one died), or shutdown has begun (`reason` is `shutting down`). No `Retry-After`.", body = Readiness),
    ))]
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    if state.shared.is_draining() {
        return not_ready("shutting down".to_owned());
    }
    let ready = |note| Readiness {
        ready: true,
        note,
        reason: None,
    };
    let watch = &state.shared.store_watch;
    match watch.observe(state.shared.store.health().await) {
        // The in-process store is ready, but its data goes with the process: say
        // so where operators look.
        // A UDF runtime with no worker alive cannot serve its features.
        Ok(()) if let Some(why) = udfs_unready(&state) => not_ready(why),
        Ok(()) if state.shared.store.backend() == "memory" => json(
            StatusCode::OK,
            &ready(Some(
                "the store is memory:// (in this process): data written to it is lost when the server exits; give --store for a shared one",
            )),
        ),
        Ok(()) => json(StatusCode::OK, &ready(None)),
        // The watch logged the change of state; the reason is this probe's
        // failure (the cause may have grown more precise since the outage began).
        Err(e) => not_ready(e.explain()),
    }
}

/// Why the loaded spec's UDF runtimes cannot serve, if one cannot.
fn udfs_unready(state: &AppState) -> Option<String> {
    let loaded = state.shared.loaded.load();
    loaded.runtimes.iter().find_map(|r| r.unready())
}

/// `GET /metrics`: the OpenMetrics text. A scraper that asks for OpenMetrics
/// (Prometheus does) gets it labelled as such; anyone else (curl, a browser) gets
/// the same text as `text/plain`, so it shows instead of downloading.
#[utoipa::path(get, path = "/metrics", tag = "metrics", operation_id = "metrics",
    summary = "Prometheus metrics",
    description = "The OpenMetrics text exposition (docs/metrics.md lists every metric): `application/openmetrics-text` when the `Accept` header names it (Prometheus does), else the same text as `text/plain`.",
    responses((status = 200, description = "The metrics.", content(
        (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        (String = "text/plain; charset=utf-8"),
    ))))]
pub(super) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let shared = &state.shared;
    let loaded = shared.loaded.load();
    let body = crate::metrics::render(
        &shared.metrics,
        (&loaded.metrics, &loaded.runtimes),
        shared.workers(),
        shared.store.coalesced_reads(),
        shared.store.cache_stats(),
        &shared.store_watch,
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

/// `GET /stats`.
#[utoipa::path(get, path = "/stats", tag = "metrics", operation_id = "stats",
    summary = "Windowed request statistics in Volga's field names",
    responses((status = 200, description = "Rates and latency percentiles of feature requests and store reads over the last complete seconds.", body = crate::stats::StatsBody)))]
pub(super) async fn stats(State(state): State<AppState>) -> Response {
    json(StatusCode::OK, &state.shared.stats.body())
}

/// `POST /admin/reload`: reload the spec and API keys; 400 with the reason if the
/// new spec is invalid (the old one keeps serving), 429 while a reload runs or
/// within the reload interval of the last. With an `admin` key configured, the
/// caller needs it; callers that are not authenticated see file names, never
/// paths, in the reason.
#[utoipa::path(post, path = "/admin/reload", tag = "admin", operation_id = "reload",
    summary = "Reload the spec and the API keys",
    description = "Re-reads the spec and the API keys and swaps them in atomically (the same as SIGHUP). Needs an API key with the `admin` scope once one is configured.",
    responses(
        (status = 200, description = "Reloaded.", body = Reloaded),
        crate::openapi::ReloadErrors,
    ),
    security((), ("bearer" = ["admin"]), ("api_key" = ["admin"])))]
pub(super) async fn reload(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
) -> Response {
    let keys_guard = state.shared.loaded.load().keys.admin_enabled();
    if keys_guard && let Err(e) = crate::guard::authorize(&state, &headers, &caller, Scope::Admin) {
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
        Ok(Ok(summary)) => json(
            StatusCode::OK,
            &Reloaded {
                reloaded: true,
                summary,
            },
        ),
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
