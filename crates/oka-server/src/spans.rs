//! A request's trace on the server (with `--otlp-endpoint`): begun by a route's
//! bookkeeping (HTTP [`crate::router`], gRPC [`crate::grpc`]) when the sampler
//! takes it, fed by the request path at the clock reads it makes anyway (phases,
//! each store call, each UDF), and finished with the answer. Without a tracer
//! every function here is a branch on `None`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use oka_core::ErrorCode;
use oka_core::execute::Outputs;
use oka_telemetry::trace::{Attribute, Phase, RequestTrace};

use crate::metrics::Route;
use crate::state::{Loaded, Shared};

/// A sampled request's trace, shared by the futures that record into it.
pub(crate) type Trace = Option<Arc<RequestTrace>>;

/// What a traced request is: an HTTP route, or a gRPC method
/// (`package.Service/Method`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operation {
    Http(Route),
    Grpc(&'static str),
}

impl Operation {
    /// The request span's name.
    fn name(self) -> &'static str {
        match self {
            Self::Http(route) => route.span_name(),
            Self::Grpc(method) => method,
        }
    }
}

/// The trace of an `operation` that arrived with `headers` at `started`, if
/// tracing is on and the sampler takes it.
pub(crate) fn begin(
    shared: &Shared,
    operation: Operation,
    headers: &HeaderMap,
    started: Instant,
) -> Trace {
    let tracer = shared.tracer.as_ref()?;
    tracer
        .request(headers, operation.name(), started)
        .map(Arc::new)
}

/// How a traced request ended: its HTTP status (for a gRPC call, the one its
/// error maps to on the HTTP routes) and gRPC status code, and the error code it
/// was answered with (if any).
pub(crate) struct Ending {
    pub status: u16,
    pub grpc_code: Option<i32>,
    pub error: Option<ErrorCode>,
}

/// Ends `trace` now: the request span (named after its operation, with the
/// status and, for a failure, the error code) and everything recorded under it.
pub(crate) fn end(shared: &Shared, trace: &Trace, operation: Operation, ending: Ending) {
    let (Some(trace), Some(tracer)) = (trace, &shared.tracer) else {
        return;
    };
    let mut attributes = match operation {
        Operation::Grpc(method) => vec![
            Attribute::new("rpc.system", "grpc"),
            Attribute::new("rpc.method", method),
            Attribute::new(
                "rpc.grpc.status_code",
                i64::from(ending.grpc_code.unwrap_or(0)),
            ),
        ],
        Operation::Http(route) => {
            let (method, path) = route.method_and_path();
            vec![
                Attribute::new("http.request.method", method),
                Attribute::new("http.route", path),
                Attribute::new("http.response.status_code", i64::from(ending.status)),
            ]
        }
    };
    if let Some(code) = ending.error {
        attributes.push(Attribute::new("error.type", code.as_str()));
    }
    // A server span is failed by a 5xx only (OpenTelemetry's HTTP conventions;
    // for gRPC, the codes those map to: unavailable, deadline, internal).
    let failed = (ending.status >= 500).then(|| {
        ending
            .error
            .map_or("internal", ErrorCode::as_str)
            .to_owned()
    });
    trace.finish(tracer, operation.name(), Instant::now(), attributes, failed);
}

/// The phases of a computed request, from its `Server-Timing`
/// ([`crate::serve::Timing::phases`]).
pub(crate) fn phases(trace: Option<&RequestTrace>, lengths: [Duration; 4]) {
    if let Some(t) = trace {
        t.phases(lengths);
    }
}

/// The keys a computed request served.
pub(crate) fn keys(trace: Option<&RequestTrace>, keys: usize) {
    if let Some(t) = trace {
        t.attribute(Attribute::new("oka.keys", keys as i64));
    }
}

/// One store call of the storage phase: the feature, its query, the key
/// count, and the error if it failed.
pub(crate) struct StoreCall<'a> {
    pub backend: &'static str,
    pub feature: &'a str,
    pub query: &'static str,
    pub keys: usize,
}

/// Records a store call from `start` to `end`.
pub(crate) fn store_call(
    trace: Option<&RequestTrace>,
    call: StoreCall<'_>,
    (start, end): (Instant, Instant),
    error: Option<String>,
) {
    if let Some(t) = trace {
        t.record(
            Some(Phase::Storage),
            "storage.read",
            (start, end),
            vec![
                Attribute::new("db.system.name", call.backend),
                Attribute::new("oka.feature", call.feature.to_owned()),
                Attribute::new("oka.query", call.query),
                Attribute::new("oka.keys", call.keys as i64),
            ],
            error,
        );
    }
}

/// Records each UDF run of the udf phase: its feature, and how many keys it
/// failed for.
pub(crate) fn udfs(trace: Option<&RequestTrace>, loaded: &Loaded, outputs: &Outputs) {
    let Some(t) = trace else {
        return;
    };
    for s in outputs.steps() {
        let failed = (s.errors > 0).then(|| format!("the UDF failed for {} key(s)", s.errors));
        t.record(
            Some(Phase::Udf),
            "udf.run",
            (s.started, s.started + s.elapsed),
            vec![
                Attribute::new(
                    "oka.feature",
                    loaded.registry.feature(s.feature).name.clone(),
                ),
                Attribute::new("oka.udf.errors", s.errors as i64),
            ],
            failed,
        );
    }
}
