//! The routers of the two HTTP ports, assembled from the rooms below them.
//!
//! The serving port (1122) is every wire API's routes ([`crate::api`]: Oka's,
//! Volga's, and Feast's when a Feast repository is served) over one fallback;
//! each handler runs inside the one guard ([`crate::guard`]). The admin port
//! (9122) is health, readiness, metrics, stats, reload, the OpenAPI documents
//! and the console.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Method, Request};
use axum::response::Response;
use axum::routing::{get, post};
use oka_core::ErrorCode;
use oka_telemetry::http::DirectFuture;

use crate::api;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::guard;
use crate::metrics::Route;
use crate::state::AppState;

mod admin;
pub mod docs;

pub use crate::guard::DEADLINE_HEADER;

/// The serving router (port 1122).
pub fn router(state: AppState) -> Router {
    let mut routes = Router::new()
        .merge(api::oka::routes())
        .merge(api::volga::routes());
    if state.shared.feast.is_some() {
        // Feast's routes, beside Oka's, only when a Feast repository is served.
        routes = routes.merge(api::feast::routes());
    }
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// The admin router (port 9122): health, readiness, metrics, stats, reload, the
/// OpenAPI documents of both ports, and the console (`/ui`).
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/metrics", get(admin::metrics))
        .route("/stats", get(admin::stats))
        .route("/admin/reload", post(admin::reload))
        .route("/openapi.json", get(docs::openapi_serving))
        .route("/openapi-admin.json", get(docs::openapi_admin))
        .merge(crate::console::routes(state.clone()))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            )
        })
        .with_state(state)
}

/// The feature routes, served without the router ([`oka_telemetry::http::Direct`]):
/// a request of them pays for nothing of the router's matching, method routing,
/// extractors (a copy of every header) and boxing. They are the same handlers
/// the router has, given what their extractors would have taken.
#[derive(Debug, Clone)]
pub struct Direct {
    state: AppState,
}

impl Direct {
    /// The feature routes of `state` (a worker's).
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

impl oka_telemetry::http::Direct for Direct {
    #[allow(clippy::result_large_err)] // the trait's: the request handed back by value
    fn serve(&self, req: Request<Body>) -> Result<DirectFuture, Request<Body>> {
        if req.method() != Method::POST {
            return Err(req);
        }
        let feast = self.state.shared.feast.is_some();
        let route = match req.uri().path() {
            "/v1/features" => Route::Features,
            "/on_demand_compute" => Route::VolgaPost,
            "/get-online-features" if feast => Route::FeastOnline,
            _ => return Err(req),
        };
        let (parts, body) = req.into_parts();
        let caller = Caller::of(&parts.extensions);
        let (state, headers) = (State(self.state.clone()), parts.headers);
        Ok(match route {
            Route::Features => Box::pin(api::oka::post_features(state, headers, caller, body)),
            Route::VolgaPost => Box::pin(api::volga::post_volga(state, headers, caller, body)),
            _ => Box::pin(api::feast::post_online(state, headers, caller, body)),
        })
    }
}

async fn not_found(State(state): State<AppState>) -> Response {
    guard::http(&state, Route::Other, None, |_, _| async {
        Err(ApiError::new(ErrorCode::NotFound, "no such route"))
    })
    .await
}

async fn method_not_allowed(State(state): State<AppState>) -> Response {
    guard::http(&state, Route::Other, None, |_, _| async {
        Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            "method not allowed on this route",
        ))
    })
    .await
}
