//! The way out: the SDK's batch processor (its own thread, a bounded queue)
//! hands batches to the OTLP exporter, whose I/O runs on a small runtime of its
//! own ([`Io`], thread `oka-otlp`), never on a serving worker. Every export is
//! counted, and failures logged at most once a minute.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::{Protocol, TraceConfig, TraceStartError};

/// How long one export may take (connect, send, answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a collector's answer read (it is a few bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How often an export failure is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What a process counts of its span exports (its metrics).
pub trait TraceEvents: std::fmt::Debug + Send + Sync + 'static {
    /// `n` spans reached the collector.
    fn spans_exported(&self, n: u64);
    /// `n` spans were lost: the collector refused them or could not be reached.
    fn spans_failed(&self, n: u64);
}

/// Where exports are counted, once a process has said.
pub(crate) type Events = Arc<std::sync::OnceLock<Arc<dyn TraceEvents>>>;

/// The exporter's runtime, on a thread of its own.
#[derive(Debug)]
pub(crate) struct Io {
    handle: Handle,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Io {
    pub(crate) fn spawn() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("oka-otlp".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(Self {
            handle,
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The batch processor over an exporter for `config`, its I/O on this runtime.
    pub(crate) fn processor(
        &self,
        config: &TraceConfig,
        events: Events,
    ) -> Result<BatchSpanProcessor, TraceStartError> {
        let cause = Cause::default();
        let built = match config.protocol {
            Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(Http {
                    handle: self.handle.clone(),
                    client: Client::builder(TokioExecutor::new()).build(connector(config)?),
                    cause: Arc::clone(&cause),
                })
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(&config.endpoint)
                .with_timeout(EXPORT_TIMEOUT)
                .build(),
            Protocol::Grpc => {
                // tonic's channel starts its connection task on this runtime.
                let _runtime = self.handle.enter();
                opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(&config.endpoint)
                    .with_timeout(EXPORT_TIMEOUT)
                    .build()
            }
        };
        let exporter = built.map_err(|e| {
            let why = format!(
                "the OTLP exporter for {} could not be set up: {e}",
                config.endpoint
            );
            TraceStartError::caused(why, e)
        })?;
        let counted = Counted {
            exporter,
            cause,
            events,
            endpoint: config.endpoint.clone(),
            warned: Mutex::new(None),
        };
        Ok(BatchSpanProcessor::builder(counted)
            .with_batch_config(BatchConfigBuilder::default().build())
            .build())
    }

    /// Stops the runtime and waits for its thread.
    pub(crate) fn stop(&self) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

/// Why the last HTTP export failed, in words (the exporter's own error says
/// only "network error").
type Cause = Arc<Mutex<Option<String>>>;

/// The collector's connections: plain HTTP, or HTTPS (rustls) trusting the CA
/// of `OTEL_EXPORTER_OTLP_CERTIFICATE` or else Mozilla's roots.
fn connector(config: &TraceConfig) -> Result<HttpsConnector<HttpConnector>, TraceStartError> {
    let roots = match &config.certificate {
        Some(path) => {
            let flag = "OTEL_EXPORTER_OTLP_CERTIFICATE";
            crate::http::tls::read_roots(path, flag, "the collector's certificate")
                .map_err(|e| TraceStartError::caused(e.message.clone(), e))?
        }
        None => rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| TraceStartError::caused(format!("TLS for the OTLP collector: {e}"), e))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build())
}

/// OTLP/HTTP requests, sent from the exporter's runtime (the batch processor's
/// thread has none).
#[derive(Debug)]
struct Http {
    handle: Handle,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    cause: Cause,
}

#[async_trait::async_trait]
impl HttpClient for Http {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let exchange = async move {
            let (parts, body) = request.into_parts();
            let answer = client
                .request(Request::from_parts(parts, Full::new(body)))
                .await?;
            let (parts, body) = answer.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES).collect().await?;
            Ok::<_, HttpError>(Response::from_parts(parts, body.to_bytes()))
        };
        let task = self
            .handle
            .spawn(async move { tokio::time::timeout(EXPORT_TIMEOUT, exchange).await });
        let failed = match task.await {
            Ok(Ok(Ok(answer))) => return Ok(answer),
            Ok(Ok(Err(e))) => in_words(&*e),
            Ok(Err(_)) => format!("no answer within {} s", EXPORT_TIMEOUT.as_secs()),
            Err(_) => "the exporter's runtime stopped".to_owned(),
        };
        if let Ok(mut cause) = self.cause.lock() {
            *cause = Some(failed.clone());
        }
        Err(failed.into())
    }
}

/// An HTTP exchange's failure in words: a TLS failure with what to do about it,
/// the I/O error under it (connection refused, reset, …), else the innermost
/// message.
fn in_words(e: &(dyn std::error::Error + 'static)) -> String {
    let tls = |tls: &rustls::Error| {
        format!(
            "TLS with the collector failed ({tls}); if its certificate is signed by a private CA, give that CA's PEM file in OTEL_EXPORTER_OTLP_CERTIFICATE"
        )
    };
    let mut at = Some(e);
    let mut last = e.to_string();
    while let Some(e) = at {
        if let Some(t) = e.downcast_ref::<rustls::Error>() {
            return tls(t);
        }
        // An I/O error may wrap another error (a TLS one, or an I/O one again).
        let io = e.downcast_ref::<std::io::Error>();
        match io.and_then(|io| io.get_ref()) {
            Some(inner) => at = Some(inner as &(dyn std::error::Error + 'static)),
            None if io.is_some() => return io.map(crate::words::io_reason).unwrap_or(last),
            None => {
                last = e.to_string();
                at = e.source();
            }
        }
    }
    last
}

/// The exporter, counted.
#[derive(Debug)]
struct Counted<E> {
    exporter: E,
    cause: Cause,
    events: Events,
    endpoint: String,
    warned: Mutex<Option<Instant>>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.exporter.export(batch).await;
        match &result {
            Ok(()) => {
                if let Some(events) = self.events.get() {
                    events.spans_exported(n);
                }
            }
            Err(e) => {
                if let Some(events) = self.events.get() {
                    events.spans_failed(n);
                }
                let now = Instant::now();
                let due = self.warned.lock().map(|mut last| {
                    let due = last.is_none_or(|t| now.duration_since(t) >= WARN_EVERY);
                    if due {
                        *last = Some(now);
                    }
                    due
                });
                let cause = self.cause.lock().ok().and_then(|mut c| c.take());
                if due.unwrap_or(false) {
                    let error = cause.unwrap_or_else(|| e.to_string());
                    tracing::warn!(endpoint = %self.endpoint, spans = n, %error, "spans could not be sent to the OTLP collector and are lost (logged at most once a minute; oka_trace_spans_total{{result=\"failed\"}} counts them all)");
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.exporter.set_resource(resource);
    }
}
