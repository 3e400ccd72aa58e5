//! The guard every request passes, on every port and wire API: one place for
//! the bookkeeping each of them shares, so HTTP and gRPC cannot drift apart.
//!
//! In the order a request meets it:
//! 1. [`Tracked::begin`]: the clock starts, the request counts as in flight
//!    (`oka_http_requests_in_flight`) and, when the sampler takes it, its trace
//!    begins;
//! 2. [`authorize`]: the API key check (cheap, before the body is read);
//! 3. the deadline: [`deadline_header`] (`X-Oka-Deadline-Ms`) or
//!    [`grpc_timeout`] (`grpc-timeout`);
//! 4. the body ([`read_body`]: size limit, body-read deadline, ingest budget);
//! 5. [`admit`]: a slot on this worker, taken once the body is in memory (a
//!    slow upload never holds one);
//! 6. [`Tracked::end`]: an error becomes its answer (JSON, plain text on
//!    Volga's routes, a gRPC status), the latency is recorded under the route
//!    and status, a 5xx counts as shed or failed in the live statistics, and
//!    the trace ends.
//!
//! [`http`] runs the whole of it around an HTTP handler, [`grpc`] around a gRPC
//! method, [`feature_request`] around the request path of any API.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use oka_core::ErrorCode;

use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::metrics::{Metrics, Route};
use crate::serve::{self, Call, Timing};
use crate::spans::{self, Ending, Operation, Trace};
use crate::state::{Admitted, AppState, Shared};

mod body;

pub(crate) use body::read_body;

/// The header that sets a request's deadline in milliseconds.
pub const DEADLINE_HEADER: &str = "x-oka-deadline-ms";

/// [`DEADLINE_HEADER`] as a header name: looked up without parsing the name
/// (a `&str` name is parsed and checked on every lookup, ~300 instructions).
const DEADLINE: HeaderName = HeaderName::from_static(DEADLINE_HEADER);

/// `grpc-timeout`, as a header name.
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// Where a feature request's time went ([`serve::Timing`]). A constant: a name
/// given as a string is parsed and copied on every insert.
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// The deadline header, as the feature routes document it.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // a schema: never built
pub(crate) struct DeadlineHeader {
    /// This request's deadline in milliseconds, from 1 to 600000 (anything else is
    /// `400 invalid_request`); overrides the body's `deadline_ms` and the server's
    /// `--deadline-ms`.
    #[param(rename = "X-Oka-Deadline-Ms", value_type = u64, required = false, minimum = 1, maximum = 600_000)]
    deadline: Option<u64>,
}

/// The request's deadline header, if any.
pub(crate) fn deadline_header(headers: &HeaderMap) -> Result<Option<Duration>, ApiError> {
    let Some(v) = headers.get(&DEADLINE) else {
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

/// A gRPC call's `grpc-timeout` (its deadline), if it gave one: at most the
/// longest deadline Oka takes.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Result<Option<Duration>, ApiError> {
    let Some(v) = headers.get(&GRPC_TIMEOUT) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::new(
            ErrorCode::InvalidRequest,
            "`grpc-timeout` must be digits and a unit (H, M, S, m, u or n)",
        )
    };
    let v = v.to_str().map_err(|_| bad())?;
    let (digits, unit) = v.split_at(v.len().saturating_sub(1));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(bad()),
    };
    let max = Duration::from_millis(*serve::DEADLINE_MS.end());
    Ok(Some(d.clamp(Duration::from_millis(1), max)))
}

/// The API key check (when keys are configured), for every port: the serving
/// routes, Feast's gRPC services, the admin routes and the console.
pub(crate) fn authorize(
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

/// Admission: a slot on this worker. Holding it counts the request against the
/// worker's in-flight limit.
pub(crate) fn admit(state: &AppState) -> Result<Admitted, ApiError> {
    state.admit().ok_or_else(|| {
        ApiError::new(
            ErrorCode::Overloaded,
            "this worker is at its in-flight limit; retry shortly",
        )
    })
}

/// One request's bookkeeping, from its first instruction to its answer.
pub(crate) struct Tracked<'a> {
    shared: &'a Shared,
    route: Route,
    operation: Operation,
    started: Instant,
    trace: Trace,
    _in_flight: InFlight<'a>,
}

impl<'a> Tracked<'a> {
    /// Starts the clock, counts the request in flight and, for a request whose
    /// `headers` are given, begins its trace when tracing is on and the sampler
    /// takes it.
    pub(crate) fn begin(
        shared: &'a Shared,
        route: Route,
        operation: Operation,
        headers: Option<&HeaderMap>,
    ) -> Self {
        let started = Instant::now();
        let _in_flight = InFlight::enter(&shared.metrics);
        let trace = headers.and_then(|h| spans::begin(shared, operation, h, started));
        Self {
            shared,
            route,
            operation,
            started,
            trace,
            _in_flight,
        }
    }

    /// When the request began.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The request's trace, if sampled.
    pub(crate) fn trace(&self) -> Trace {
        self.trace.clone()
    }

    /// Records how the request ended: its latency under the route and `status`,
    /// a 5xx as shed (overloaded) or failed in the live statistics, and the end
    /// of its trace.
    pub(crate) fn end(self, status: u16, error: Option<ErrorCode>, grpc_code: Option<i32>) {
        let shared = self.shared;
        shared
            .metrics
            .request(self.route, status, self.started.elapsed());
        if status >= 500 {
            match error {
                Some(ErrorCode::Overloaded) => shared.stats.shed.add(1),
                _ => shared.stats.errors.add(1),
            }
        }
        if self.trace.is_some() {
            let ending = Ending {
                status,
                grpc_code,
                error,
            };
            spans::end(shared, &self.trace, self.operation, ending);
        }
    }
}

/// Runs one HTTP handler inside the guard's bookkeeping ([`Tracked`]): its
/// error becomes its JSON answer. `headers` are given for a request that may be
/// traced.
pub(crate) async fn http<F, Fut>(
    state: &AppState,
    route: Route,
    headers: Option<&HeaderMap>,
    handler: F,
) -> Response
where
    F: FnOnce(Instant, Trace) -> Fut,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    let tracked = Tracked::begin(&state.shared, route, Operation::Http(route), headers);
    let resp = handler(tracked.started(), tracked.trace())
        .await
        .unwrap_or_else(IntoResponse::into_response);
    let error = resp.extensions().get::<ErrorCode>().copied();
    tracked.end(resp.status().as_u16(), error, None);
    resp
}

/// Runs one gRPC method inside the same guard as the HTTP routes: the API key
/// from the call's metadata (or, with mutual TLS, the client certificate's
/// identity), the `grpc-timeout`, admission, and the bookkeeping of
/// [`Tracked`]; an error becomes a gRPC status.
pub(crate) async fn grpc<T>(
    state: &AppState,
    (route, method): (Route, &'static str),
    (metadata, caller): (&tonic::metadata::MetadataMap, &Caller),
    scope: Scope,
    handler: impl AsyncFnOnce(Call<'_>) -> Result<T, ApiError>,
) -> Result<tonic::Response<T>, tonic::Status> {
    let headers = metadata.clone().into_headers();
    let tracked = Tracked::begin(
        &state.shared,
        route,
        Operation::Grpc(method),
        Some(&headers),
    );
    let trace = tracked.trace();
    let answer = async {
        authorize(state, &headers, caller, scope)?;
        let deadline = grpc_timeout(&headers)?;
        let _slot = admit(state)?;
        let call = Call {
            started: tracked.started(),
            deadline,
            trace: trace.as_deref(),
        };
        handler(call).await
    }
    .await;
    let (status, error, code) = match &answer {
        Ok(_) => (200, None, 0),
        Err(e) => (e.status().as_u16(), Some(e.code), grpc_code(e) as i32),
    };
    tracked.end(status, error, Some(code));
    answer
        .map(tonic::Response::new)
        .map_err(|e| grpc_status(&e))
}

/// An error as a gRPC status: the code that fits its HTTP status, Oka's message.
pub fn grpc_status(e: &ApiError) -> tonic::Status {
    tonic::Status::new(grpc_code(e), format!("{}: {}", e.code.as_str(), e.message))
}

/// The gRPC code that fits an error's HTTP status.
fn grpc_code(e: &ApiError) -> tonic::Code {
    use tonic::Code;
    match e.status().as_u16() {
        400 | 413 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        408 | 504 => Code::DeadlineExceeded,
        429 | 503 => Code::Unavailable,
        501 => Code::Unimplemented,
        _ => Code::Internal,
    }
}

/// How a feature route writes its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Errors {
    /// Oka's JSON error body.
    Json,
    /// `<code>: <message>` as plain text (Volga's routes, for clients that do
    /// not ask for JSON).
    Text,
}

/// A feature request on any HTTP route, the whole guard around it: the key
/// check, the deadline header, the body (`body` reads it), admission, then
/// `serve` (the API's adapter over the one request path) and its answer as
/// JSON with its `Server-Timing`.
///
/// `body` and `serve` are functions, not futures: each future is made where it
/// is awaited, so it is held once. A future passed in would be carried, whole,
/// by every closure and block between here and its await (five copies of the
/// body reader's: 2.5 KB more of a request's future to move and box).
pub(crate) async fn feature_request(
    state: &AppState,
    (route, errors): (Route, Errors),
    (headers, caller): (&HeaderMap, &Caller),
    body: impl AsyncFnOnce() -> Result<Bytes, ApiError>,
    serve: impl AsyncFnOnce(Bytes, Call<'_>) -> Result<(Vec<u8>, Timing), ApiError>,
) -> Response {
    http(state, route, Some(headers), |started, trace| async move {
        let answer = async {
            authorize(state, headers, caller, Scope::Read)?;
            let deadline = deadline_header(headers)?;
            let body = body().await?;
            let _slot = admit(state)?;
            let call = Call {
                started,
                deadline,
                trace: trace.as_deref(),
            };
            let (out, timing) = serve(body, call).await?;
            spans::phases(trace.as_deref(), timing.phases());
            let mut resp = json_response(out);
            if let Ok(v) = HeaderValue::from_bytes(timing.header().as_bytes()) {
                resp.headers_mut().insert(SERVER_TIMING, v);
            }
            Ok::<_, ApiError>(resp)
        };
        match answer.await {
            Err(e) if errors == Errors::Text => Ok(e.into_text_response()),
            other => other,
        }
    })
    .await
}

/// A feature request POSTed on any HTTP route: [`feature_request`] with its
/// body read by [`read_body`].
pub(crate) async fn feature_post(
    state: &AppState,
    (route, errors): (Route, Errors),
    (headers, caller): (&HeaderMap, &Caller),
    body: Body,
    serve: impl AsyncFnOnce(Bytes, Call<'_>) -> Result<(Vec<u8>, Timing), ApiError>,
) -> Response {
    let body = async || Ok(read_body(state, headers, body, None).await?.bytes);
    feature_request(state, (route, errors), (headers, caller), body, serve).await
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

/// A JSON answer of `body`.
pub(crate) fn json_response(body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use oka_core::{NativeUdfs, Registry};
    use oka_storage::memory::MemoryStore;

    use super::*;
    use crate::state::{Limits, Shared};

    fn state(max_in_flight: usize) -> AppState {
        let spec = "version: 1\nentities: {}\nfeatures: {}\n";
        let registry = Registry::from_yaml("t.yaml", spec, &NativeUdfs::new()).unwrap();
        let limits = Limits {
            max_in_flight,
            ..Limits::default()
        };
        let shared = Shared::new(Arc::new(registry), Arc::new(MemoryStore::new()), limits);
        AppState::new(shared, 0)
    }

    const METHOD: (Route, &str) = (Route::FeastGrpc, "test/Method");

    #[tokio::test]
    async fn a_grpc_call_is_counted_in_flight_and_its_5xx_as_an_error() {
        let state = state(4);
        let metadata = tonic::metadata::MetadataMap::new();
        let answer: Result<tonic::Response<()>, _> = grpc(
            &state,
            METHOD,
            (&metadata, &Caller::default()),
            Scope::Read,
            async |_| {
                assert_eq!(state.shared.metrics.in_flight().get(), 1);
                Err(ApiError::new(ErrorCode::StoreUnavailable, "down"))
            },
        )
        .await;
        let status = answer.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "store_unavailable: down");
        assert_eq!(state.shared.metrics.in_flight().get(), 0);
        assert_eq!(state.shared.stats.errors.recorded(), 1);
        assert_eq!(state.shared.stats.shed.recorded(), 0);
    }

    #[tokio::test]
    async fn a_grpc_call_past_the_in_flight_limit_is_shed() {
        let state = state(1);
        let _held = admit(&state).unwrap();
        let metadata = tonic::metadata::MetadataMap::new();
        let answer: Result<tonic::Response<()>, _> = grpc(
            &state,
            METHOD,
            (&metadata, &Caller::default()),
            Scope::Read,
            async |_| unreachable!("a shed call runs no handler"),
        )
        .await;
        assert_eq!(answer.unwrap_err().code(), tonic::Code::Unavailable);
        assert_eq!(state.shared.stats.shed.recorded(), 1);
        assert_eq!(state.shared.stats.errors.recorded(), 0);
    }

    #[test]
    fn grpc_timeout_takes_every_unit_and_refuses_the_rest() {
        let timeout = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", HeaderValue::from_str(v).unwrap());
            grpc_timeout(&h)
        };
        assert_eq!(timeout("250m").unwrap(), Some(Duration::from_millis(250)));
        assert_eq!(timeout("2S").unwrap(), Some(Duration::from_secs(2)));
        assert_eq!(timeout("5n").unwrap(), Some(Duration::from_millis(1)));
        assert_eq!(timeout("99H").unwrap(), Some(Duration::from_secs(600)));
        assert!(timeout("10x").is_err());
        assert!(timeout("m").is_err());
    }
}
