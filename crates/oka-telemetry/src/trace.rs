//! Distributed tracing: W3C trace context in, OTLP out.
//!
//! A process that traces holds one [`Tracer`] (none when `--otlp-endpoint` is
//! unset: then nothing here runs and nothing is allocated). Per request the
//! tracer reads `traceparent`/`tracestate`, asks the sampler (parent-based, a
//! ratio for new traces), and for a sampled request hands back a
//! [`RequestTrace`]: the request path records its phases and store calls into
//! it with the clock reads it already makes, and [`RequestTrace::finish`] turns
//! them into OpenTelemetry spans, queued to the SDK's batch processor and sent
//! over OTLP (HTTP/protobuf or gRPC) by its exporter off the request path.
//!
//! Memory is bounded by the batch processor's queue (`OTEL_BSP_MAX_QUEUE_SIZE`,
//! 2,048 spans): beyond it spans are dropped, never waited for. An export that
//! fails is counted ([`TraceEvents`]) and logged, at most once a minute.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanKind, TraceContextExt, TraceFlags};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, IdGenerator, RandomIdGenerator, Sampler, SamplingDecision, ShouldSample,
    SpanData, SpanProcessor,
};

mod config;
mod export;
mod request;

pub use config::{Protocol, SamplerChoice, TraceConfig, TraceConfigError};
pub use export::TraceEvents;
pub use opentelemetry::KeyValue as Attribute;
pub use opentelemetry::trace::{SpanContext, SpanId, SpanKind as Kind, Status};
pub use request::{Phase, RequestTrace};

/// How long a shutdown waits for queued spans to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's tracer: sampler, ids, and the batch processor that exports.
pub struct Tracer {
    sampler: Sampler,
    ids: RandomIdGenerator,
    scope: InstrumentationScope,
    processor: BatchSpanProcessor,
    /// The exporter's I/O runtime (its own thread).
    io: export::Io,
    /// Where exports are counted.
    events: Arc<OnceLock<Arc<dyn TraceEvents>>>,
    /// Where spans go, for log lines.
    endpoint: String,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

oka_core::described_error! {
    /// A tracer could not be started.
    pub struct TraceStartError;
}

impl Tracer {
    /// Starts exporting to `config`'s endpoint as `service` (the resource's
    /// `service.name` unless `OTEL_SERVICE_NAME` says otherwise; more attributes
    /// from `OTEL_RESOURCE_ATTRIBUTES`). Spawns the exporter's threads; exports
    /// are counted once [`Tracer::report_to`] names where.
    pub fn start(
        config: &TraceConfig,
        service: &'static str,
    ) -> Result<Arc<Self>, TraceStartError> {
        let io = export::Io::spawn().map_err(|e| {
            TraceStartError::new(format!(
                "could not start the trace exporter's thread: {}",
                crate::words::io_reason(&e)
            ))
        })?;
        let events = Arc::new(OnceLock::new());
        let mut processor = io.processor(config, Arc::clone(&events))?;
        let mut resource = Resource::builder()
            .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))]);
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(service);
        }
        processor.set_resource(&resource.build());
        Ok(Arc::new(Self {
            sampler: config.sampler.sampler(),
            ids: RandomIdGenerator::default(),
            scope: InstrumentationScope::builder("oka")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            processor,
            io,
            events,
            endpoint: config.endpoint.clone(),
        }))
    }

    /// Counts exports into `events` (a process's metrics); the first call wins.
    pub fn report_to(&self, events: Arc<dyn TraceEvents>) {
        let _ = self.events.set(events);
    }

    /// The trace of a request that arrived with `headers` (its `traceparent` and
    /// `tracestate`), begun at `started`, if it is sampled. A malformed
    /// `traceparent` is ignored, as W3C trace context says: the request starts a
    /// new trace.
    pub fn request(
        &self,
        headers: &HeaderMap,
        name: &'static str,
        started: std::time::Instant,
    ) -> Option<RequestTrace> {
        let parent = headers
            .contains_key("traceparent")
            .then(|| TraceContextPropagator::new().extract(&Headers(headers)));
        let parent = parent.as_ref().filter(|cx| cx.has_active_span());
        let span = self.sample(parent, name, SpanKind::Server)?;
        Some(RequestTrace::new(span, parent, &self.ids, started))
    }

    /// The span context a message's headers carry (`traceparent`, `tracestate`
    /// as bytes, e.g. from Kafka), if valid and the sampler takes it: the parent
    /// of its write span. Messages without one start no trace.
    pub fn message_parent(
        &self,
        traceparent: &[u8],
        tracestate: Option<&[u8]>,
    ) -> Option<SpanContext> {
        if traceparent.len() > MAX_CONTEXT_HEADER {
            return None;
        }
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", traceparent.try_into().ok()?);
        let tracestate = tracestate.filter(|s| s.len() <= MAX_CONTEXT_HEADER);
        if let Some(state) = tracestate.and_then(|s| s.try_into().ok()) {
            headers.insert("tracestate", state);
        }
        let cx = TraceContextPropagator::new().extract(&Headers(&headers));
        let sc = cx.span().span_context().clone();
        // The sampler decides (parent-based: as the producer did).
        sc.is_valid()
            .then(|| self.sample(Some(&cx), "write", SpanKind::Consumer))
            .flatten()
            .map(|_| sc)
    }

    /// The sampler's decision for a new span: its context if recorded.
    fn sample(&self, parent: Option<&Context>, name: &str, kind: SpanKind) -> Option<SpanContext> {
        let trace_id = match parent {
            Some(cx) => cx.span().span_context().trace_id(),
            None => self.ids.new_trace_id(),
        };
        let result = self
            .sampler
            .should_sample(parent, trace_id, name, &kind, &[], &[]);
        (result.decision == SamplingDecision::RecordAndSample).then(|| {
            SpanContext::new(
                trace_id,
                self.ids.new_span_id(),
                TraceFlags::SAMPLED,
                false,
                result.trace_state,
            )
        })
    }

    /// One finished span, queued for export (dropped if the queue is full).
    pub fn emit(&self, span: Span) {
        let Span {
            context,
            parent,
            kind,
            name,
            start,
            end,
            attributes,
            status,
        } = span;
        let (parent_span_id, parent_span_is_remote) = match parent {
            Some((id, remote)) => (id, remote),
            None => (opentelemetry::trace::SpanId::INVALID, false),
        };
        self.processor.on_end(SpanData {
            span_context: context,
            parent_span_id,
            parent_span_is_remote,
            span_kind: kind,
            name,
            start_time: start,
            end_time: end,
            attributes,
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// A span of a message write (`oka source kafka`): a child of `parent` (the
    /// message's context), its own id.
    pub fn child_of(&self, parent: &SpanContext) -> (SpanContext, (SpanId, bool)) {
        let context = SpanContext::new(
            parent.trace_id(),
            self.ids.new_span_id(),
            TraceFlags::SAMPLED,
            false,
            parent.trace_state().clone(),
        );
        (context, (parent.span_id(), parent.is_remote()))
    }

    /// Sends what is queued and stops the exporter (at most 5 s). Blocks: call it
    /// outside async code (or from `spawn_blocking`).
    pub fn shutdown(&self) {
        if let Err(e) = self.processor.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!(endpoint = %self.endpoint, error = %e, "spans still queued at shutdown were not all sent");
        }
        self.io.stop();
    }
}

/// A finished span as [`Tracer::emit`] takes it.
#[derive(Debug)]
pub struct Span {
    /// Its ids (trace, span), flags and trace state.
    pub context: SpanContext,
    /// Its parent's span id and whether that parent is remote; none for a root.
    pub parent: Option<(SpanId, bool)>,
    /// Server, internal, consumer, …
    pub kind: SpanKind,
    /// Its name.
    pub name: Cow<'static, str>,
    /// When it began.
    pub start: std::time::SystemTime,
    /// When it ended.
    pub end: std::time::SystemTime,
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
    /// Unset, or an error with its description.
    pub status: Status,
}

/// The longest `traceparent` or `tracestate` taken (W3C trace context asks at
/// least 512 characters of `tracestate` to be kept; a longer one is dropped
/// whole: every span of the trace would hold a copy in the export queue).
pub const MAX_CONTEXT_HEADER: usize = 512;

/// `traceparent`/`tracestate` read from an HTTP request's headers.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key)?;
        if value.len() > MAX_CONTEXT_HEADER {
            return None;
        }
        value.to_str().ok()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}
