//! Oka's own API on the serving port: `POST /v1/features` (its request parsed
//! strictly, its answer with RFC 3339 timestamps and the `"<host>/<worker>"`
//! server id), `GET /v1/features` (the registry) and `POST /v1/ingest`.

use std::cell::RefCell;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use oka_core::json::BodyError;
use oka_core::json::template::{self, Templates};
use oka_core::request::{KeyList, ObjectTemplate, RequestView, SharedRequest};
use oka_core::value::TimeFormat;
use oka_core::{ErrorCode, FeatureRequest, KeyPolicy, encode};

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::guard::{self, DeadlineHeader, Errors, read_body};
use crate::metrics::Route;
use crate::openapi::{CatalogErrors, FeatureErrors, IngestErrors};
use crate::serve::{self, Call, Timing};
use crate::state::AppState;

mod ingest;

/// Oka's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/features", post(post_features).get(get_catalog))
        .route("/v1/ingest", post(post_ingest))
}

thread_local! {
    /// The request bodies this worker has parsed, kept around their key lists.
    static KEPT: RefCell<Templates<Kept>> = const { RefCell::new(Templates::new()) };
}

/// What a kept body parsed to but for its keys, and the bytes around the
/// values of its key objects when each is one field of one name.
#[derive(Debug)]
struct Kept {
    request: Arc<FeatureRequest>,
    objects: Option<ObjectTemplate>,
}

/// Parses a feature request body: strictly (an unknown field is refused). A
/// body equal to a kept one but for its `keys` parses only its keys
/// ([`oka_core::json::template`]), and of key objects like the kept ones,
/// only their values ([`ObjectTemplate`]).
pub fn parse_request(body: &[u8]) -> Result<SharedRequest, ApiError> {
    if let Some(parsed) = KEPT.with_borrow(|kept| from_kept(kept, body)) {
        return Ok(parsed);
    }
    let parsed = SharedRequest::from(parse_whole(body)?);
    if parsed.keys.is_some() {
        keep(body, &parsed);
    }
    Ok(parsed)
}

/// Parses a feature request body, all of it.
fn parse_whole(body: &[u8]) -> Result<FeatureRequest, ApiError> {
    oka_core::json::from_slice_strict(body, FeatureRequest::FIELDS).map_err(|e| {
        let code = match e {
            BodyError::UnknownField { .. } => ErrorCode::UnknownField,
            BodyError::Malformed(_) => ErrorCode::MalformedRequest,
        };
        ApiError::new(code, format!("invalid request body: {e}"))
    })
}

/// `body` as the kept request whose bytes surround its key list, that list
/// parsed in place of the kept one's; `None` (parse it whole) when no kept
/// body fits, or the list is not one JSON key list of flat values (one that
/// nests arrays or objects is parsed within its body, where serde_json's
/// nesting limit counts the body's own level too).
fn from_kept(kept: &Templates<Kept>, body: &[u8]) -> Option<SharedRequest> {
    let (kept, keys) = kept.find(body)?;
    let keys = std::str::from_utf8(keys).ok()?;
    let keys = match kept.objects.as_ref().and_then(|t| t.parse(keys)) {
        Some(keys) => keys,
        None => {
            let keys: KeyList = serde_json::from_str(keys).ok()?;
            keys.is_flat().then_some(keys)?
        }
    };
    Some(SharedRequest {
        rest: Arc::clone(&kept.request),
        keys: Some(keys),
    })
}

/// Keeps `parsed`'s request, but for its key list, for the bodies equal to
/// `body` outside that list.
fn keep(body: &[u8], parsed: &SharedRequest) {
    let Some(text) = std::str::from_utf8(body).ok() else {
        return;
    };
    let Some([Some(at)]) = template::locate(text, ["keys"]) else {
        return;
    };
    let objects = (text.get(at.clone()))
        .zip(parsed.keys.as_ref())
        .and_then(|(keys, list)| ObjectTemplate::learn(keys, list));
    let kept = Kept {
        request: Arc::clone(&parsed.rest),
        objects,
    };
    KEPT.with_borrow_mut(|templates| templates.keep(body, at, kept));
}

/// Serves one `POST /v1/features` body: parse, [`serve::compute`], encode.
pub async fn features(
    state: &AppState,
    body: &[u8],
    call: Call<'_>,
) -> Result<(Vec<u8>, Timing), ApiError> {
    let parsed = parse_request(body)?;
    let shape = (TimeFormat::Rfc3339, &*state.server_id);
    answer(state, parsed.view(), KeyPolicy::Strict, shape, call).await
}

/// Computes `request` (parsed by its API, its bad keys taken as `keys` says)
/// and writes the answer in Oka's shape (Volga's is the same with its own
/// timestamps and server id): timestamps as `times`, `server_id` verbatim.
pub(crate) async fn answer(
    state: &AppState,
    request: RequestView<'_>,
    keys: KeyPolicy,
    (times, server_id): (TimeFormat, &str),
    call: Call<'_>,
) -> Result<(Vec<u8>, Timing), ApiError> {
    let shared = &state.shared;
    // One spec version serves the whole request, even if a reload lands
    // meanwhile (a guard, not a clone: the clone's count is one every core writes).
    let loaded = shared.loaded.load();
    let budget = serve::time_budget(
        request.request,
        call.deadline,
        shared.limits.default_deadline,
    )?;
    let mut timing = Timing::default();
    let request = serve::Request {
        request,
        keys,
        started: call.started,
        budget,
        trace: call.trace,
    };
    let (prepared, outputs) = serve::compute(state, &loaded, request, &mut timing).await?;
    let mut body = Vec::with_capacity(256 + 128 * prepared.key_count());
    encode::write_response(
        &loaded.registry,
        &prepared,
        &outputs,
        server_id,
        times,
        &mut body,
    );
    let (encode, done) = timing.lap(call.started);
    timing.encode = encode;
    serve::computed(shared, call, done, prepared.key_count());
    Ok((body, timing))
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
pub(crate) async fn post_features(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    guard::feature_post(
        &state,
        (Route::Features, Errors::Json),
        (&headers, &caller),
        body,
        async |body: Bytes, call| features(&state, &body, call).await,
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
pub(crate) async fn get_catalog(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
) -> Response {
    guard::http(&state, Route::Registry, Some(&headers), |_, _| async {
        guard::authorize(&state, &headers, &caller, Scope::Read)?;
        let _slot = guard::admit(&state)?;
        Ok(guard::json_response(
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
pub(crate) async fn post_ingest(
    State(state): State<AppState>,
    headers: HeaderMap,
    caller: Caller,
    body: Body,
) -> Response {
    guard::http(&state, Route::Ingest, Some(&headers), |_, _| async {
        guard::authorize(&state, &headers, &caller, Scope::Write)?;
        let budget = Arc::clone(&state.shared.ingest_budget);
        let body = read_body(&state, &headers, body, Some(&budget)).await?;
        let _slot = guard::admit(&state)?;
        let summary = ingest::ingest(&state.shared, &body.bytes).await?;
        Ok(guard::json_response(summary))
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A request as parsed, or its error's code and message, for comparing.
    fn outcome(parsed: Result<SharedRequest, ApiError>) -> String {
        match parsed {
            Ok(parsed) => format!("{:?} {:?}", parsed.rest, parsed.keys),
            Err(e) => format!("{:?}: {}", e.code, e.message),
        }
    }

    /// A key list whose one key value nests `levels` arrays.
    fn deep(levels: usize) -> String {
        format!(
            r#"[{{"id":{}1{}}}]"#,
            "[".repeat(levels),
            "]".repeat(levels)
        )
    }

    /// A body parsed through a kept template reads exactly as it does parsed
    /// whole: the same request, or the same error (serde_json's nesting limit
    /// included).
    #[test]
    fn a_kept_body_parses_as_a_whole_one() {
        let kept = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-1"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;
        let around = |keys: &str| {
            format!(
                r#"{{"target_features":["simple_feature"],"keys":{keys},"udf_args":{{"simple_feature":{{"multiplier":2.0}}}}}}"#
            )
        };
        let mut bodies: Vec<String> = [
            r#"[{"id":"test-id-2"},{"id":"test-id-3"}]"#,
            r#"[{"id":"a\"b"},{"id":7},{"id":"x"},{"id":"x"}]"#,
            r#"[{"id":"a"}, {"id":"b"}]"#,
            r#"[{"id":"a","id":"b"}]"#,
            r#"[{"id":"a"},{"id":"b","n":1}]"#,
            r#"[{"id":"a"},{"id":null}]"#,
            r#"[{"id":"a"},{"ID":"b"}]"#,
            r#"  [ {"id" : "t\u00e9st"} ]  "#,
            "[]",
            "null",
            "",
            "7",
            r#"[{"id":"a"}],"keys":[{"id":"b"}]"#,
            r#"[{"id":"a"}],"deadline_ms":5"#,
            r#"[{"id":"a"}],"nope":1"#,
            r#"[{"id":"a"}]]"#,
            r#"[{"id":"a"}"#,
            "[{\"id\":\"\u{0}\"}]",
            &deep(124),
            &deep(125),
            &deep(126),
        ]
        .iter()
        .map(|keys| around(keys))
        .collect();
        // Not the kept body outside the keys: parsed whole.
        bodies.push(kept.replace("2.0", "3.0"));
        bodies.push(format!("{kept} "));
        bodies.push(kept.replace("simple_feature\"]", "simple_feature\",\"x\"]"));
        let whole = |body: &str| outcome(parse_whole(body.as_bytes()).map(SharedRequest::from));
        assert_eq!(outcome(parse_request(kept.as_bytes())), whole(kept));
        let objects = |body: &str| {
            KEPT.with_borrow(|k| {
                k.find(body.as_bytes())
                    .is_some_and(|(t, _)| t.objects.is_some())
            })
        };
        assert!(objects(kept), "its key objects' template is kept with it");
        for body in &bodies {
            assert!(
                KEPT.with_borrow(|k| k.find(kept.as_bytes()).is_some()),
                "the first body is kept"
            );
            assert_eq!(
                outcome(parse_request(body.as_bytes())),
                whole(body),
                "{body}"
            );
        }
    }
}
