//! The serving and admin routers.
//!
//! Every serving request walks the same gate before its handler: the API key
//! check (when keys are configured), then the body read (size-limited, with a
//! deadline, refused before reading when its declared length is too big; ingest
//! bodies also against the global ingest budget), then admission (a per-worker
//! in-flight limit, 503 at once beyond it). A slot is taken only once the body is
//! in memory, so slow uploads cannot starve other requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use oka_core::ErrorCode;
use percent_encoding::percent_decode_str;

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::ingest;
use crate::metrics::{Metrics, Route};
use crate::openapi::{CatalogErrors, FeatureErrors, IngestErrors, VolgaGetErrors, VolgaPostErrors};
use crate::serve::{self, Dialect};
use crate::spans::{self, Ending, Operation, Trace};
use crate::state::{Admitted, AppState};

mod admin;
mod body;
pub mod docs;

use body::read_body;

/// The header that sets a request's deadline in milliseconds.
pub const DEADLINE_HEADER: &str = "x-oka-deadline-ms";

/// Where a feature request's time went ([`serve::Timing`]). A constant: a name
/// given as a string is parsed and copied on every insert.
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The deadline header, as the feature routes document it.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // a schema: never built
struct DeadlineHeader {
    /// This request's deadline in milliseconds, from 1 to 600000 (anything else is
    /// `400 invalid_request`); overrides the body's `deadline_ms` and the server's
    /// `--deadline-ms`.
    #[param(rename = "X-Oka-Deadline-Ms", value_type = u64, required = false, minimum = 1, maximum = 600_000)]
    deadline: Option<u64>,
}

/// The serving router (port 1122).
pub fn router(state: AppState) -> Router {
    let mut routes = Router::new()
        .route("/v1/features", post(post_features).get(get_catalog))
        .route("/on_demand_compute", post(post_volga))
        .route("/on_demand_compute/{*json}", get(get_volga))
        .route("/v1/ingest", post(post_ingest));
    if state.shared.feast.is_some() {
        // Feast's routes, beside Oka's, only when a Feast repository is served.
        routes = routes
            .route("/get-online-features", post(post_feast_online))
            .route("/push", post(post_feast_push))
            .route("/write-to-online-store", post(post_feast_write))
            .route("/health", get(feast_health));
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
fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    caller: &Caller,
    scope: Scope,
) -> Result<(), ApiError> {
    state
        .shared
        .loaded
        .load()
        .keys
        .check(headers, caller, scope)
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
/// the latency is recorded under `route` and the status, a 5xx answer counts
/// as shed (overloaded) or failed in the live statistics, and a request whose
/// `headers` are given is traced when tracing is on and the sampler takes it.
async fn tracked<F, Fut>(
    state: &AppState,
    route: Route,
    headers: Option<&HeaderMap>,
    handler: F,
) -> Response
where
    F: FnOnce(Instant, Trace) -> Fut,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    let started = Instant::now();
    let shared = &state.shared;
    let metrics = &shared.metrics;
    let _in_flight = InFlight::enter(metrics);
    let trace = headers.and_then(|h| spans::begin(shared, Operation::Http(route), h, started));
    let resp = handler(started, trace.clone())
        .await
        .unwrap_or_else(IntoResponse::into_response);
    let status = resp.status();
    metrics.request(route, status.as_u16(), started.elapsed());
    let error = resp.extensions().get::<ErrorCode>().copied();
    if status.is_server_error() {
        match error {
            Some(ErrorCode::Overloaded) => shared.stats.shed.add(1),
            _ => shared.stats.errors.add(1),
        }
    }
    if trace.is_some() {
        let ending = Ending {
            status: status.as_u16(),
            grpc_code: None,
            error,
        };
        spans::end(shared, &trace, Operation::Http(route), ending);
    }
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
    caller: &Caller,
    body: impl Future<Output = Result<Bytes, ApiError>>,
    dialect: Dialect,
) -> Response {
    tracked(state, route, Some(headers), |started, trace| async move {
        let answer = async {
            authorize(state, headers, caller, Scope::Read)?;
            let deadline = deadline_header(headers)?;
            let body = body.await?;
            let _slot = admit(state)?;
            let call = serve::Call {
                started,
                deadline,
                trace: trace.as_deref(),
            };
            let (out, timing) = serve::features(state, &body, dialect, call).await?;
            spans::phases(trace.as_deref(), timing.phases());
            let mut resp = json_response(out);
            // The header's own buffer becomes the value: no second copy.
            let timing = Bytes::from(timing.header().into_bytes());
            if let Ok(v) = HeaderValue::from_maybe_shared(timing) {
                resp.headers_mut().insert(SERVER_TIMING, v);
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

/// `POST /v1/features`.
#[utoipa::path(post, path = "/v1/features", tag = "features", operation_id = "features",
    summary = "Compute features for keys (Oka's API)",
    description = "Reads the pipeline features the targets need from the store (batched) and runs the on-demand UDFs over them. Strict: an unknown top-level field, a key object that does not fit its entity, or an empty `target_features` is a 400. There are no partial answers: a failed store read fails the whole request; a failing UDF marks only its key `error`.",
    params(DeadlineHeader),
    request_body(content = oka_core::FeatureRequest, description = "The request; its `Content-Type` is not checked (the body is always parsed as JSON)."),
    responses(
        (status = 200, description = "The features: one value and one status per key of each target.", body = oka_core::encode::openapi::FeatureResponse,
            headers(("server-timing" = String, description = "Where the request's time went, in ms: `parse;dur=…, storage;dur=…, udf;dur=…, encode;dur=…`."))),
        FeatureErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
async fn post_features(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    let body = async { Ok(read_body(&state, &headers, body, None).await?.bytes) };
    compute(
        &state,
        Route::Features,
        &headers,
        &caller,
        body,
        Dialect::Oka,
    )
    .await
}

/// Feast's `POST /get-online-features` (with `--feast-repo`;
/// docs/migrating-from-feast.md).
async fn post_feast_online(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    let body = async { Ok(read_body(&state, &headers, body, None).await?.bytes) };
    compute(
        &state,
        Route::FeastOnline,
        &headers,
        &caller,
        body,
        Dialect::Feast,
    )
    .await
}

/// Feast's `POST /push` (online only) and `POST /write-to-online-store` (with
/// `--feast-repo`): gated as `/v1/ingest` is (the `write` scope, the ingest
/// budget), answered as `feast serve` answers them (`200` with an empty body,
/// and with `null`).
async fn feast_write(
    state: &AppState,
    route: Route,
    headers: &HeaderMap,
    caller: &Caller,
    body: Body,
) -> Response {
    tracked(state, route, Some(headers), |_, _| async {
        authorize(state, headers, caller, Scope::Write)?;
        let budget = Arc::clone(&state.shared.ingest_budget);
        let body = read_body(state, headers, body, Some(&budget)).await?;
        let _slot = admit(state)?;
        let feast = state
            .shared
            .feast
            .as_ref()
            .map(|f| f.load_full())
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no Feast repository is served"))?;
        if route == Route::FeastPush {
            crate::feast::push(&state.shared, &feast, &body.bytes).await?;
            Ok(Response::new(Body::empty()))
        } else {
            crate::feast::write_to_online_store(&state.shared, &feast, &body.bytes).await?;
            Ok(json_response("null"))
        }
    })
    .await
}

async fn post_feast_push(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    feast_write(&state, Route::FeastPush, &headers, &caller, body).await
}

async fn post_feast_write(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    feast_write(&state, Route::FeastWrite, &headers, &caller, body).await
}

/// Feast's `GET /health`: 200 with an empty body while the store answers, else
/// 503 (as `feast serve`).
async fn feast_health(State(state): State<AppState>) -> Response {
    let healthy = state
        .shared
        .store_watch
        .observe(state.store.health().await)
        .is_ok();
    let mut resp = Response::new(Body::empty());
    if !healthy {
        *resp.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    }
    resp
}

/// `POST /on_demand_compute`.
#[utoipa::path(post, path = "/on_demand_compute", tag = "volga", operation_id = "volga_post",
    summary = "Compute features for keys (Volga's API, POSTed)",
    description = "The request Volga's client puts in its URL, sent as a body. Answers as Volga's server did wherever it answered 200: unknown top-level fields are ignored, an empty `target_features` is `{\"results\":{},\"server_id\":N}`, a key object that does not fit its entity is answered `null` with status `invalid_key`, timestamps are naive UTC and `server_id` is an integer. Errors are plain text (`<code>: <message>`) unless the `Accept` header names `application/json`.",
    params(DeadlineHeader),
    request_body(content = docs::VolgaFeatureRequest, description = "The request; its `Content-Type` is not checked."),
    responses(
        (status = 200, description = "The features, in Volga's shape.", body = oka_core::encode::openapi::VolgaFeatureResponse,
            headers(("server-timing" = String, description = "Where the request's time went, in ms."))),
        VolgaPostErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
async fn post_volga(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    let body = async { Ok(read_body(&state, &headers, body, None).await?.bytes) };
    compute(
        &state,
        Route::VolgaPost,
        &headers,
        &caller,
        body,
        Dialect::Volga,
    )
    .await
}

/// Volga's `GET /on_demand_compute/{json}`: the request is percent-encoded JSON in
/// the path. The wildcard also takes JSON containing `/` (which broke Volga's route);
/// the path is decoded here so that bad encodings get Oka's JSON errors.
#[utoipa::path(get, path = "/on_demand_compute/{json}", tag = "volga", operation_id = "volga_get",
    summary = "Compute features for keys (Volga's wire format: JSON in the path)",
    description = "Everything after `/on_demand_compute/` is percent-decoded once and parsed as the request JSON (the fields of `VolgaFeatureRequest`); a `/` in it is allowed. Answers as `POST /on_demand_compute`. A request target longer than 65,534 bytes is refused by the HTTP layer with `414` and an empty body; `GET /on_demand_compute/` with nothing after the slash is a `404 not_found`.",
    params(DeadlineHeader,
        ("json" = String, Path, min_length = 1,
            description = "The request's JSON (a `VolgaFeatureRequest`), percent-encoded whole. It is decoded once, so a `%` in it must be sent as `%25`. A `/` may stand in it, encoded or not.",
            example = "%7B%22target_features%22%3A%5B%22simple_feature%22%5D%2C%22feature_keys%22%3A%7B%22simple_feature%22%3A%5B%7B%22id%22%3A%22test-id-21%22%7D%5D%7D%7D")),
    responses(
        (status = 200, description = "The features, in Volga's shape.", body = oka_core::encode::openapi::VolgaFeatureResponse,
            headers(("server-timing" = String, description = "Where the request's time went, in ms."))),
        (status = 414, description = "URI Too Long: the request target exceeds 65,534 bytes (the HTTP layer; empty body). Use a POST route."),
        VolgaGetErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
async fn get_volga(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    uri: Uri,
) -> Response {
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
    compute(
        &state,
        Route::VolgaGet,
        &headers,
        &caller,
        body,
        Dialect::Volga,
    )
    .await
}

/// `GET /v1/features`.
#[utoipa::path(get, path = "/v1/features", tag = "registry", operation_id = "registry",
    summary = "The loaded spec: entities and features",
    description = "The registry as JSON, encoded at start and again on each reload.",
    responses(
        (status = 200, description = "The registry.", body = crate::catalog::Catalog),
        CatalogErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
async fn get_catalog(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
) -> Response {
    tracked(&state, Route::Registry, Some(&headers), |_, _| async {
        authorize(&state, &headers, &caller, Scope::Read)?;
        let _slot = admit(&state)?;
        Ok(json_response(
            state.shared.loaded.load().catalog_json.clone(),
        ))
    })
    .await
}

/// `POST /v1/ingest`.
#[utoipa::path(post, path = "/v1/ingest", tag = "ingest", operation_id = "ingest",
    summary = "Write records of a pipeline feature",
    description = "Writes the body's valid records through the batched write path and answers once they are stored; invalid records are reported and not written (the answer is 200 even then). A body that is not JSON writes nothing. If the store fails for good, the message says how many records were written before it failed; a retry is idempotent for records that carry their own timestamp.",
    request_body(content = oka_ingest::body::RawBody<'static>, description = "The feature and its records."),
    responses(
        (status = 200, description = "What was written and what was rejected.", body = oka_ingest::body::BodySummary),
        IngestErrors,
    ),
    security((), ("bearer" = ["write"]), ("api_key" = ["write"])))]
async fn post_ingest(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    tracked(&state, Route::Ingest, Some(&headers), |_, _| async {
        authorize(&state, &headers, &caller, Scope::Write)?;
        let budget = Arc::clone(&state.shared.ingest_budget);
        let body = read_body(&state, &headers, body, Some(&budget)).await?;
        let _slot = admit(&state)?;
        let summary = ingest::ingest(&state.shared, &body.bytes).await?;
        Ok(json_response(summary))
    })
    .await
}

async fn not_found(State(state): State<AppState>) -> Response {
    tracked(&state, Route::Other, None, |_, _| async {
        Err(ApiError::new(ErrorCode::NotFound, "no such route"))
    })
    .await
}

async fn method_not_allowed(State(state): State<AppState>) -> Response {
    tracked(&state, Route::Other, None, |_, _| async {
        Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            "method not allowed on this route",
        ))
    })
    .await
}
