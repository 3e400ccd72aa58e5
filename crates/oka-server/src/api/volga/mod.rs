//! Volga's API on the serving port: `POST /on_demand_compute` and `GET
//! /on_demand_compute/{json}` (the request percent-encoded in the path), read
//! as Volga's server read them where it answered 200 (unknown top-level fields
//! ignored, an empty `target_features` answered empty, a key that does not fit
//! its entity answered `invalid_key`) and answered in Volga's shape: naive UTC
//! timestamps, an integer `server_id`, errors as plain text unless JSON is
//! asked for.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use oka_core::request::SharedRequest;
use oka_core::value::TimeFormat;
use oka_core::{ErrorCode, FeatureRequest, KeyPolicy};
use percent_encoding::percent_decode_str;

use crate::api::oka::{answer, parse_request};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::guard::{self, DeadlineHeader, Errors};
use crate::metrics::{Leniency, Route};
use crate::openapi::{VolgaGetErrors, VolgaPostErrors};
use crate::serve::{Call, Timing};
use crate::state::AppState;

pub(crate) mod schema;

/// Volga's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/on_demand_compute", post(post_volga))
        .route("/on_demand_compute/{*json}", get(get_volga))
}

/// Parses a feature request body as Volga's server did: top-level fields it does
/// not know are ignored (pydantic's default), and counted.
fn parse_volga_request(state: &AppState, body: &[u8]) -> Result<SharedRequest, ApiError> {
    match parse_request(body) {
        Err(e) if e.code == ErrorCode::UnknownField => {
            let mut object: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
                serde_json::from_slice(body).map_err(|_| e.clone())?;
            object.retain(|k, _| FeatureRequest::FIELDS.contains(&k.as_str()));
            let known = serde_json::to_vec(&object).map_err(|_| e)?;
            let request = parse_request(&known)?;
            state.shared.metrics.lenient(Leniency::UnknownField);
            Ok(request)
        }
        other => other,
    }
}

/// Serves one request of Volga's: parse, the one request path, Volga's shape.
async fn features(
    state: &AppState,
    body: &[u8],
    call: Call<'_>,
) -> Result<(Vec<u8>, Timing), ApiError> {
    let parsed = parse_volga_request(state, body)?;
    let request = parsed.view();
    if request.request.target_features.is_empty() {
        // The deadline fields are still checked, as for any request.
        let defaults = state.shared.limits.default_deadline;
        crate::serve::time_budget(request.request, call.deadline, defaults)?;
        state.shared.metrics.lenient(Leniency::EmptyTargets);
        let body = format!(
            r#"{{"results":{{}},"server_id":{}}}"#,
            state.volga_server_id
        );
        return Ok((body.into_bytes(), Timing::default()));
    }
    let shape = (TimeFormat::NaiveUtc, &*state.volga_server_id);
    answer(state, request, KeyPolicy::NullForBadKeys, shape, call).await
}

/// The error form of a request on Volga's routes: plain text unless its
/// `Accept` names JSON. Volga's client (aiohttp, `Accept: */*`) shows such a
/// body in its exception, while a JSON error body fails its response model
/// with a message about a missing `results` field.
fn errors(headers: &HeaderMap) -> Errors {
    let json = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.split(';').next().unwrap_or_default().trim();
            t.eq_ignore_ascii_case("application/json")
        });
    if json { Errors::Json } else { Errors::Text }
}

/// `POST /on_demand_compute`.
#[utoipa::path(post, path = "/on_demand_compute", tag = "volga", operation_id = "volga_post",
    summary = "Compute features for keys (Volga's API, POSTed)",
    description = "The request Volga's client puts in its URL, sent as a body. Answers as Volga's server did wherever it answered 200: unknown top-level fields are ignored, an empty `target_features` is `{\"results\":{},\"server_id\":N}`, a key object that does not fit its entity is answered `null` with status `invalid_key`, timestamps are naive UTC and `server_id` is an integer. Errors are plain text (`<code>: <message>`) unless the `Accept` header names `application/json`.",
    params(DeadlineHeader),
    request_body(content = schema::VolgaFeatureRequest, description = "The request; its `Content-Type` is not checked."),
    responses(
        (status = 200, description = "The features, in Volga's shape.", body = schema::VolgaFeatureResponse,
            headers(("server-timing" = String, description = "Where the request's time went, in ms."))),
        VolgaPostErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
pub(crate) async fn post_volga(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    guard::feature_post(
        &state,
        (Route::VolgaPost, errors(&headers)),
        (&headers, &caller),
        body,
        async |body: Bytes, call| features(&state, &body, call).await,
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
        (status = 200, description = "The features, in Volga's shape.", body = schema::VolgaFeatureResponse,
            headers(("server-timing" = String, description = "Where the request's time went, in ms."))),
        (status = 414, description = "URI Too Long: the request target exceeds 65,534 bytes (the HTTP layer; empty body). Use a POST route."),
        VolgaGetErrors,
    ),
    security((), ("bearer" = ["read"]), ("api_key" = ["read"])))]
pub(crate) async fn get_volga(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    uri: Uri,
) -> Response {
    let limit = state.shared.limits.max_body_bytes;
    let body = async || {
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
    guard::feature_request(
        &state,
        (Route::VolgaGet, errors(&headers)),
        (&headers, &caller),
        body,
        async |body: Bytes, call| features(&state, &body, call).await,
    )
    .await
}
