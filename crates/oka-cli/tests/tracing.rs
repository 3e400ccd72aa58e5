//! Tracing, end to end: `oka serve --otlp-endpoint` sends its spans to a
//! collector run here (over OTLP/HTTP with protobuf bodies, and over OTLP/gRPC),
//! which decodes them with OpenTelemetry's own schemas. A request that carries
//! a sampled `traceparent` becomes one trace with that trace id: the server span
//! (the caller's span as parent, its `tracestate` kept) and the phase spans of
//! `Server-Timing` under it, a span per store call under `storage`, a span per
//! UDF under `udf`. No spans for an unsampled `traceparent`, or at ratio 0; a
//! collector that is down costs no request, and is counted. `oka source kafka`
//! (with a broker: OKA_TEST_KAFKA_BROKERS) gives a message's write a span in the
//! trace its `traceparent` header names.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

mod common;
mod kafka_support;

use common::{Oka, http, start_oka_env};

const REQUEST: &str = r#"{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}],"udf_args":{"simple_feature":{"multiplier":2.0}}}"#;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// Export requests a collector received, decoded.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

impl Received {
    fn push(&self, r: ExportTraceServiceRequest) {
        self.0.lock().unwrap().push(r);
    }

    /// Every span received, with its resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for r in self.0.lock().unwrap().iter() {
            for rs in &r.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .map(|r| attrs(&r.attributes))
                    .and_then(|a| a.get("service.name").cloned())
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    for s in &ss.spans {
                        out.push((service.clone(), s.clone()));
                    }
                }
            }
        }
        out
    }

    /// The spans of trace `id` (hex), waiting up to 20 s for at least `n`.
    fn trace(&self, id: &str, n: usize) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans: Vec<Span> = self
                .spans()
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| hex(&s.trace_id) == id)
                .collect();
            if spans.len() >= n || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attributes as strings (ints written in decimal).
fn attrs(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> HashMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

/// An OTLP/HTTP collector on a free loopback port: `POST /v1/traces` with a
/// protobuf body, answered 200 with an empty `ExportTraceServiceResponse`.
fn http_collector() -> (SocketAddr, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let r = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let r = r.clone();
            std::thread::spawn(move || serve_otlp_http(conn, &r));
        }
    });
    (addr, received)
}

/// One keep-alive connection of the HTTP collector (plain or TLS).
fn serve_otlp_http(conn: impl Read + Write, received: &Received) {
    let mut reader = BufReader::new(conn);
    loop {
        let mut head = String::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("POST /v1/traces "), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/x-protobuf"),
            "{head}"
        );
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        received.push(ExportTraceServiceRequest::decode(&body[..]).unwrap());
        let answer = ExportTraceServiceResponse::default().encode_to_vec();
        let conn = reader.get_mut();
        write!(
            conn,
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        )
        .unwrap();
        conn.write_all(&answer).unwrap();
        conn.flush().unwrap();
    }
}

/// An OTLP/HTTP collector over HTTPS on a free loopback port, its certificate
/// (for `localhost`) signed by a CA of its own, whose PEM file is returned.
fn https_collector(name: &str) -> (SocketAddr, Received, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let ca_path = common::tmp_file(&format!("{name}-collector-ca.pem"), &ca.pem());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let r = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (r, config) = (r.clone(), Arc::clone(&config));
            std::thread::spawn(move || {
                let tls = rustls::ServerConnection::new(config).unwrap();
                serve_otlp_http(rustls::StreamOwned::new(tls, conn), &r);
            });
        }
    });
    (addr, received, ca_path)
}

/// An OTLP/gRPC collector (tonic, OpenTelemetry's service definition).
fn grpc_collector() -> (SocketAddr, Received) {
    struct Collector(Received);

    #[tonic::async_trait]
    impl TraceService for Collector {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            self.0.push(request.into_inner());
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        }
    }

    let received = Received::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let r = received.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let incoming =
                tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap())
                    .unwrap();
            tx.send(incoming.local_addr().unwrap()).unwrap();
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(Collector(r)))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
    });
    (rx.recv().unwrap(), received)
}

/// `oka serve --demo` tracing to `endpoint` with `extra` flags; its batch
/// processor sends every 100 ms.
fn oka_tracing_to(endpoint: &str, extra: &[&str]) -> Oka {
    oka_tracing_with(endpoint, extra, &[], None)
}

/// [`oka_tracing_to`] with more environment variables, its log in `log`.
fn oka_tracing_with(
    endpoint: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    log: Option<&std::path::Path>,
) -> Oka {
    let mut args = vec!["--demo", "--workers", "1", "--otlp-endpoint", endpoint];
    args.extend_from_slice(extra);
    let mut env = env.to_vec();
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "100"));
    start_oka_env(&args, &env, log)
}

/// `POST /v1/features` with `headers` (lines), answered 200.
fn features_with(addr: SocketAddr, headers: &str) {
    let out = post(addr, "/v1/features", headers, REQUEST);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

/// `POST path` with `headers` (lines) and `body`: the whole answer.
fn post(addr: SocketAddr, path: &str, headers: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: t\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn by_name<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = by_name(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
    found[0]
}

fn metric(oka: &Oka, line: &str) -> Option<f64> {
    let (_, text) = http(oka.admin, "GET", "/metrics", "").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
}

/// Sends SIGTERM and waits for the process to end (its queued spans are sent
/// on the way out).
fn stop(oka: &mut Oka) {
    let pid = oka.server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while oka.server.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "oka did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_sampled_caller_gets_one_trace_with_the_phase_spans_over_http() {
    let (collector, received) = http_collector();
    let oka = oka_tracing_to(&format!("http://{collector}"), &[]);
    features_with(
        oka.addr,
        &format!("traceparent: 00-{TRACE_ID}-{CALLER_SPAN}-01\r\ntracestate: vendor=opaque\r\n"),
    );
    let spans = received.trace(TRACE_ID, 7);
    assert_eq!(
        spans.len(),
        7,
        "server, 4 phases, 1 store call, 1 UDF: {spans:#?}"
    );

    let server = one(&spans, "POST /v1/features");
    assert_eq!(server.kind, SpanKind::Server as i32);
    assert_eq!(hex(&server.parent_span_id), CALLER_SPAN);
    assert_eq!(server.trace_state, "vendor=opaque");
    let a = attrs(&server.attributes);
    assert_eq!(a["http.request.method"], "POST");
    assert_eq!(a["http.route"], "/v1/features");
    assert_eq!(a["http.response.status_code"], "200");
    assert_eq!(a["oka.keys"], "1");

    // The phases, back to back under the server span, inside it.
    let mut at = server.start_time_unix_nano;
    for phase in ["parse", "storage", "udf", "encode"] {
        let p = one(&spans, phase);
        assert_eq!(p.parent_span_id, server.span_id, "{phase}");
        assert_eq!(p.kind, SpanKind::Internal as i32, "{phase}");
        assert!(
            p.start_time_unix_nano >= at,
            "{phase} starts after the one before"
        );
        assert!(p.end_time_unix_nano >= p.start_time_unix_nano, "{phase}");
        at = p.end_time_unix_nano;
    }
    assert!(
        at <= server.end_time_unix_nano,
        "the phases end inside the request"
    );

    let read = one(&spans, "storage.read");
    assert_eq!(read.parent_span_id, one(&spans, "storage").span_id);
    let a = attrs(&read.attributes);
    assert_eq!(a["db.system.name"], "memory");
    assert_eq!(a["oka.keys"], "1");
    assert_eq!(a["oka.query"], "latest");
    let udf = one(&spans, "udf.run");
    assert_eq!(udf.parent_span_id, one(&spans, "udf").span_id);
    assert_eq!(attrs(&udf.attributes)["oka.feature"], "simple_feature");

    // Other routes get a request span without phases; a refusal names its code.
    let ingest_trace = "5b8aa5a2d2c872e8321cf37308d69df2";
    let parent = |t: &str| format!("traceparent: 00-{t}-051581bf3cb55c13-01\r\n");
    let ok = post(
        oka.addr,
        "/v1/ingest",
        &parent(ingest_trace),
        r#"{"feature":"test_feature","records":[{"id":"x","value":1.0}]}"#,
    );
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let spans = received.trace(ingest_trace, 1);
    let ingest = one(&spans, "POST /v1/ingest");
    assert_eq!(
        attrs(&ingest.attributes)["http.response.status_code"],
        "200"
    );
    let refused_trace = "6e0c63257de34c926f9efcd03927272e";
    let bad = post(oka.addr, "/v1/features", &parent(refused_trace), "{");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    let spans = received.trace(refused_trace, 1);
    let refused = one(&spans, "POST /v1/features");
    let a = attrs(&refused.attributes);
    assert_eq!(a["http.response.status_code"], "400");
    assert_eq!(a["error.type"], "malformed_request");
    assert!(
        refused.status.as_ref().is_none_or(|s| s.code == 0),
        "a 4xx leaves the status unset"
    );
    assert_eq!(
        spans.len(),
        1,
        "no phases for a request refused before them"
    );

    // A tracestate beyond 512 bytes is dropped whole (every span would copy it).
    let long_trace = "7f1c63257de34c926f9efcd03927272e";
    // Four valid members of 150 characters: 615 bytes in all.
    let members: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|k| format!("{k}={}", "v".repeat(150)))
        .collect();
    let long_state = format!("tracestate: {}\r\n", members.join(","));
    features_with(oka.addr, &format!("{}{long_state}", parent(long_trace)));
    let spans = received.trace(long_trace, 7);
    assert_eq!(spans.len(), 7);
    assert!(spans.iter().all(|s| s.trace_state.is_empty()), "{spans:#?}");

    // Every span of it carries the resource's service name, and is counted.
    let services: Vec<String> = received.spans().into_iter().map(|(s, _)| s).collect();
    assert!(services.iter().all(|s| s == "oka"), "{services:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&oka, "oka_trace_spans_total{result=\"exported\"}") != Some(16.0) {
        assert!(Instant::now() < deadline, "16 spans counted as exported");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn unsampled_callers_and_ratio_zero_send_nothing_and_new_traces_are_roots() {
    let (collector, received) = http_collector();
    let endpoint = format!("http://{collector}");
    // Ratio 0: a new trace is not sampled; a sampled caller is still followed.
    let mut oka = oka_tracing_to(&endpoint, &["--trace-sample-ratio", "0"]);
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    features_with(
        oka.addr,
        &format!("traceparent: 00-{unsampled}-b7ad6b7169203331-00\r\n"),
    );
    features_with(oka.addr, "");
    // A malformed traceparent is a new trace (not sampled at ratio 0).
    features_with(oka.addr, "traceparent: 00-zz-b7ad6b7169203331-01\r\n");
    features_with(
        oka.addr,
        &format!("traceparent: 00-{TRACE_ID}-{CALLER_SPAN}-01\r\n"),
    );
    assert_eq!(received.trace(TRACE_ID, 7).len(), 7);
    stop(&mut oka);
    let traces: std::collections::BTreeSet<String> = received
        .spans()
        .into_iter()
        .map(|(_, s)| hex(&s.trace_id))
        .collect();
    assert_eq!(traces.into_iter().collect::<Vec<_>>(), [TRACE_ID]);

    // Ratio 1 (the default): a request without a traceparent is a root.
    let (collector, received) = http_collector();
    let oka = oka_tracing_to(&format!("http://{collector}"), &[]);
    features_with(oka.addr, "");
    let deadline = Instant::now() + Duration::from_secs(20);
    let server = loop {
        let spans = received.spans();
        if let Some((_, s)) = spans.iter().find(|(_, s)| s.name == "POST /v1/features") {
            break s.clone();
        }
        assert!(Instant::now() < deadline, "a root trace");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(server.parent_span_id.is_empty(), "a root has no parent");
    assert_eq!(server.trace_id.len(), 16);
}

#[test]
fn spans_go_over_grpc_too() {
    let (collector, received) = grpc_collector();
    let oka = oka_tracing_to(&format!("http://{collector}"), &["--otlp-protocol", "grpc"]);
    features_with(
        oka.addr,
        &format!("traceparent: 00-{TRACE_ID}-{CALLER_SPAN}-01\r\n"),
    );
    let spans = received.trace(TRACE_ID, 7);
    assert_eq!(spans.len(), 7, "{spans:#?}");
    assert_eq!(
        hex(&one(&spans, "POST /v1/features").parent_span_id),
        CALLER_SPAN
    );
}

#[test]
fn a_collector_that_is_down_costs_no_request_and_is_counted() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let oka = oka_tracing_to(&format!("http://{closed}"), &[]);
    for _ in 0..5 {
        features_with(oka.addr, "");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let failed = metric(&oka, "oka_trace_spans_total{result=\"failed\"}").unwrap_or(0.0);
        if failed >= 8.0 {
            break;
        }
        assert!(Instant::now() < deadline, "failed spans counted ({failed})");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        metric(&oka, "oka_trace_spans_total{result=\"exported\"}"),
        Some(0.0)
    );
}

#[test]
fn bad_tracing_settings_stop_the_start_named() {
    for (args, says) in [
        (vec!["--otlp-endpoint", "collector:4318"], "--otlp-endpoint"),
        (
            vec![
                "--otlp-endpoint",
                "https://collector:4317",
                "--otlp-protocol",
                "grpc",
            ],
            "http/protobuf",
        ),
        (
            vec![
                "--otlp-endpoint",
                "http://c:4318",
                "--otlp-protocol",
                "http/json",
            ],
            "--otlp-protocol",
        ),
        (
            vec![
                "--otlp-endpoint",
                "http://c:4318",
                "--trace-sample-ratio",
                "2",
            ],
            "from 0 to 1",
        ),
    ] {
        let out = Command::new(common::OKA)
            .args([
                "serve",
                "--demo",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn a_kafka_message_s_traceparent_gets_its_write_a_span_in_that_trace() {
    let Some((brokers, redis)) = kafka_support::services() else {
        return;
    };
    let kafka = kafka_support::Kafka { brokers };
    let (topic, group) = (
        kafka_support::unique("traced"),
        kafka_support::unique("group"),
    );
    let prefix = format!("{}:", kafka_support::unique("kt"));
    kafka.create_topic(&topic, 1);
    let (collector, received) = http_collector();
    let endpoint = format!("http://{collector}");
    let spec = kafka_support::spec(&topic, &group, "");
    let args = ["--otlp-endpoint", endpoint.as_str()];
    let mut source =
        kafka_support::start_source_with(&spec, &kafka.brokers, &redis, &prefix, &args);
    source.wait_joined();
    let unsampled = "0af7651916cd43dd8448eb211c80319c";
    let sampled = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let not_sampled = format!("00-{unsampled}-b7ad6b7169203331-00");
    kafka.produce_with_headers(
        &topic,
        br#"{"id":"a","n":1}"#,
        &[("traceparent", &sampled), ("tracestate", "p=1")],
    );
    kafka.produce_with_headers(
        &topic,
        br#"{"id":"b","n":2}"#,
        &[("traceparent", &not_sampled)],
    );
    kafka.produce_with_headers(&topic, br#"{"id":"c","n":3}"#, &[]);
    kafka_support::wait_for("3 records written", Duration::from_secs(120), || {
        source.metric("oka_kafka_records_written_total", "") >= 3.0
    });
    // SIGTERM: the queued spans are sent on the way out.
    assert!(source.terminate().success());
    let spans = received.spans();
    assert_eq!(
        spans.len(),
        1,
        "one span, for the sampled message: {spans:#?}"
    );
    let (service, write) = &spans[0];
    assert_eq!(service, "oka-source-kafka");
    assert_eq!(hex(&write.trace_id), TRACE_ID);
    assert_eq!(hex(&write.parent_span_id), CALLER_SPAN);
    assert_eq!(write.trace_state, "p=1");
    assert_eq!(write.kind, SpanKind::Consumer as i32);
    assert_eq!(write.name, format!("write {topic}"));
    let a = attrs(&write.attributes);
    assert_eq!(a["messaging.system"], "kafka");
    assert_eq!(a["messaging.destination.name"], topic);
    assert_eq!(a["messaging.kafka.offset"], "0");
    assert_eq!(a["oka.feature"], "clicks");
    assert!(write.end_time_unix_nano >= write.start_time_unix_nano);
}

#[test]
fn spans_go_to_an_https_collector_that_the_ca_file_vouches_for() {
    let (collector, received, ca) = https_collector("trusted");
    let endpoint = format!("https://localhost:{}", collector.port());
    let env = [("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.to_str().unwrap())];
    let oka = oka_tracing_with(&endpoint, &[], &env, None);
    features_with(
        oka.addr,
        &format!("traceparent: 00-{TRACE_ID}-{CALLER_SPAN}-01\r\n"),
    );
    assert_eq!(received.trace(TRACE_ID, 7).len(), 7);

    // Without the CA file the collector's certificate is not trusted (Mozilla's
    // roots do not sign it): requests are served, the spans counted as failed,
    // and the log says what to do.
    let (collector, received, _) = https_collector("untrusted");
    let endpoint = format!("https://localhost:{}", collector.port());
    let log = common::tmp_file("untrusted-collector.log", "");
    let oka = oka_tracing_with(&endpoint, &[], &[], Some(&log));
    features_with(oka.addr, "");
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&oka, "oka_trace_spans_total{result=\"failed\"}") != Some(7.0) {
        assert!(Instant::now() < deadline, "7 spans counted as failed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(received.spans().is_empty());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("TLS with the collector failed")
            && text.contains("OTEL_EXPORTER_OTLP_CERTIFICATE"),
        "{text}"
    );
}
