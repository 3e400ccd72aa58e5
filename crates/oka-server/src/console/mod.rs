//! The console: `/ui` on the admin port. Read-only pages over the registry, the
//! lineage, live health and a try-it form, served from the binary (the page, its
//! script and its style are embedded; nothing is fetched from elsewhere).
//!
//! Safe by construction: every name and text from the spec reaches the page as
//! JSON and is set as text by the script (it never parses HTML), and a strict
//! `Content-Security-Policy` allows only the console's own script, style and
//! `connect-src 'self'`. No route here changes state: the try-it form's request
//! is sent to the serving port's `POST /v1/features` with the caller's own key.
//! With an `admin` key configured every route here needs one (as a bearer token,
//! `X-API-Key`, or the password of HTTP Basic auth, which browsers prompt for).
//!
//! - [`live`]: `/ui/api/live`, the windowed statistics the health page draws.
//! - [`lineage`]: `/ui/api/lineage`, the dependency graph laid out in layers.
//! - [`try_it`]: `/ui/api/try`, the try-it form's request to the serving port.

mod lineage;
mod live;
mod try_it;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use oka_core::ErrorCode;
use serde::Serialize;

use crate::auth::{Caller, ClientIdentity, Scope};
use crate::error::ApiError;
use crate::state::AppState;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");
const ICON: &str = include_str!("assets/icon.svg");

/// Only the console's own files, and requests to its own origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console's routes, for the admin router.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route("/ui/app.js", get(script))
        .route("/ui/app.css", get(style))
        .route("/ui/icon.svg", get(icon))
        .route("/ui/api/overview", get(overview))
        .route("/ui/api/catalog", get(catalog))
        .route("/ui/api/lineage", get(lineage::lineage))
        .route("/ui/api/live", get(live::live))
        .route("/ui/api/try", post(try_it::try_it))
        .layer(from_fn_with_state(state, guard))
}

/// Every console answer: the admin key check first, then the headers that keep
/// the page to itself.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let caller = Caller {
        identity: request.extensions().get::<ClientIdentity>().cloned(),
    };
    let mut resp = match authorize(&state, request.headers(), &caller) {
        Ok(()) => next.run(request).await,
        Err(e) => {
            let unauthenticated = e.code == ErrorCode::Unauthenticated;
            let mut resp = e.into_response();
            if unauthenticated {
                // Browsers prompt for a Basic credential; the key is its password.
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Basic realm="Oka console", charset="UTF-8""#),
                );
            }
            resp
        }
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// With an `admin` key configured, the caller must give one: as the API routes
/// take keys, or as the password (or, without one, the user) of HTTP Basic auth.
fn authorize(state: &AppState, headers: &HeaderMap, caller: &Caller) -> Result<(), ApiError> {
    let loaded = state.shared.loaded.load();
    if !loaded.keys.admin_enabled() {
        return Ok(());
    }
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"));
    // `X-API-Key` wins over `Authorization`, as on every other route.
    let Some((_, credential)) = basic.filter(|_| !headers.contains_key("x-api-key")) else {
        return crate::guard::authorize(state, headers, caller, Scope::Admin);
    };
    let refused = || {
        ApiError::new(
            ErrorCode::Unauthenticated,
            "the Basic credential is not base64 of `user:key` in UTF-8; give the admin key as the password",
        )
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credential.trim())
        .ok()
        .and_then(|d| String::from_utf8(d).ok())
        .ok_or_else(refused)?;
    let (user, password) = decoded.split_once(':').ok_or_else(refused)?;
    let key = if password.is_empty() { user } else { password };
    let mut as_key = HeaderMap::new();
    as_key.insert(
        "x-api-key",
        HeaderValue::from_str(key).map_err(|_| refused())?,
    );
    crate::guard::authorize(state, &as_key, caller, Scope::Admin)
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `GET /ui`: the page.
async fn page() -> Response {
    asset(PAGE, "text/html; charset=utf-8")
}

/// `GET /ui/app.js`.
async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// `GET /ui/app.css`.
async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// `GET /ui/icon.svg` (so the browser does not ask for a missing favicon).
async fn icon() -> Response {
    asset(ICON, "image/svg+xml")
}

pub(crate) fn json<T: Serialize>(body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(body) => json_bytes(body.into()),
        Err(_) => ApiError::new(ErrorCode::Internal, "internal error").into_response(),
    }
}

fn json_bytes(body: bytes::Bytes) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `GET /ui/api/catalog`: the registry, as `GET /v1/features` answers it.
async fn catalog(State(state): State<AppState>) -> Response {
    json_bytes(state.shared.loaded.load().catalog_json.clone())
}

/// What the console shows about the server itself.
#[derive(Debug, Serialize)]
struct Overview {
    version: &'static str,
    host: String,
    /// The serving port (the try-it form's requests go there).
    serving_port: Option<u16>,
    store: Store,
    /// Whether the serving port needs an API key.
    keys_required: bool,
    /// Whether Feast's routes are served (`--feast-repo`).
    feast: bool,
}

#[derive(Debug, Serialize)]
struct Store {
    backend: &'static str,
    /// Its URL, password redacted.
    name: String,
    /// Its key layout: `oka`, `volga`, `feast`.
    layout: &'static str,
    /// Whether it keeps history per key (range and last-n reads).
    history: bool,
    /// Whether it takes writes.
    writes: bool,
}

/// `GET /ui/api/overview`.
async fn overview(State(state): State<AppState>) -> Response {
    let shared = &state.shared;
    let can = shared.store.capabilities();
    json(&Overview {
        version: env!("CARGO_PKG_VERSION"),
        host: shared.host.clone(),
        serving_port: shared.serving_addr.get().map(std::net::SocketAddr::port),
        store: Store {
            backend: shared.store.backend(),
            name: shared.store_watch.name().to_owned(),
            layout: can.layout,
            history: can.history,
            writes: can.writes,
        },
        keys_required: shared.loaded.load().keys.enabled(),
        feast: shared.feast.is_some(),
    })
}
