//! Feast's HTTP routes on the serving port (with `--feast-repo`;
//! docs/migrating-from-feast.md): `POST /get-online-features`, `POST /push`,
//! `POST /write-to-online-store` and `GET /health`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;

use super::compute::{features, registry};
use crate::auth::{Caller, Scope};
use crate::guard::{self, Errors, read_body};
use crate::metrics::Route;
use crate::state::AppState;

/// Feast's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/get-online-features", post(post_online))
        .route("/push", post(post_push))
        .route("/write-to-online-store", post(post_write))
        .route("/health", get(health))
}

/// `POST /get-online-features`.
pub(crate) async fn post_online(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    guard::feature_post(
        &state,
        (Route::FeastOnline, Errors::Json),
        (&headers, &caller),
        body,
        async |body: Bytes, call| features(&state, &body, call).await,
    )
    .await
}

/// `POST /push` (online only) and `POST /write-to-online-store`: gated as
/// `/v1/ingest` is (the `write` scope, the ingest budget), answered as `feast
/// serve` answers them (`200` with an empty body, and with `null`).
async fn write(
    state: &AppState,
    route: Route,
    headers: &HeaderMap,
    caller: &Caller,
    body: Body,
) -> Response {
    guard::http(state, route, Some(headers), |_, _| async {
        guard::authorize(state, headers, caller, Scope::Write)?;
        let budget = Arc::clone(&state.shared.ingest_budget);
        let body = read_body(state, headers, body, Some(&budget)).await?;
        let _slot = guard::admit(state)?;
        let feast = registry(state)?;
        if route == Route::FeastPush {
            super::push(&state.shared, &feast, &body.bytes).await?;
            Ok(Response::new(Body::empty()))
        } else {
            super::write_to_online_store(&state.shared, &feast, &body.bytes).await?;
            Ok(guard::json_response("null"))
        }
    })
    .await
}

async fn post_push(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    write(&state, Route::FeastPush, &headers, &caller, body).await
}

async fn post_write(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    write(&state, Route::FeastWrite, &headers, &caller, body).await
}

/// `GET /health`: 200 with an empty body while the store answers, else 503
/// (as `feast serve`).
async fn health(State(state): State<AppState>) -> Response {
    let healthy = state
        .shared
        .store_watch
        .observe(state.store.health().await)
        .is_ok();
    let mut resp = Response::new(Body::empty());
    if !healthy {
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    resp
}
