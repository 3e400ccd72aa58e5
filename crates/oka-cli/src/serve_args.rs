//! `oka serve`'s flags, grouped by what they govern (serving, store, limits,
//! auth, reload and shutdown, logging), and what they make: the server's
//! [`Limits`] and [`ServerConfig`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use oka_core::request::RequestLimits;
use oka_server::Limits;
use oka_server::runtime::ConnTimeouts;
use oka_server::runtime::{RuntimeMode, ServerConfig, Tls, TlsError, TlsFiles, available_cpus};
use oka_telemetry::trace::{TraceConfig, Tracer};

use crate::logs::LogFormat;
use crate::{ingest, stores};

/// `--runtime`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RuntimeArg {
    PerCore,
    Shared,
}

/// `oka serve`'s flags, grouped in its help by heading.
#[derive(Debug, Args)]
#[command(after_help = crate::help::LOGGING)]
pub struct ServeArgs {
    /// The feature spec (YAML). With `--feast-repo`: the overlay giving the
    /// repository's on-demand views their CEL (`oka feast scaffold` prints a
    /// skeleton).
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_SPEC",
        required_unless_present_any = ["demo", "feast_repo", "volga_module"],
        conflicts_with = "demo"
    )]
    pub spec: Option<PathBuf>,
    /// Serve a module written for Volga's on-demand layer as it is: its
    /// `@entity` classes, `@source` features (a mock connector's items are
    /// written at start) and `@on_demand` functions, run by the Python pool
    /// (docs/python-udfs.md). `oka volga spec FILE.py` prints the spec it makes.
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_VOLGA_MODULE",
        value_name = "FILE.py",
        conflicts_with_all = ["demo", "spec", "feast_repo"]
    )]
    pub volga_module: Option<PathBuf>,
    /// Serve a Feast feature repository: the directory holding its
    /// feature_store.yaml, whose file registry gives the features (a pipeline
    /// feature per online feature view) and whose Redis online store is read in
    /// Feast's layout (docs/migrating-from-feast.md).
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_FEAST_REPO",
        value_name = "DIR",
        conflicts_with = "demo"
    )]
    pub feast_repo: Option<PathBuf>,
    /// With `--feast-repo`: serve the repository even if some on-demand views
    /// have no overlay (they are answered with `404 unknown_feature` saying
    /// so) instead of refusing to start.
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_FEAST_SKIP_UNMAPPED",
        requires = "feast_repo"
    )]
    pub feast_skip_unmapped: bool,
    /// Serve the built-in demo spec (the seed workload) with its mock source.
    #[arg(help_heading = "Serving", long)]
    pub demo: bool,
    #[command(flatten, next_help_heading = "Store")]
    pub store: stores::StoreArgs,
    #[command(flatten, next_help_heading = "Store reads")]
    pub reads: stores::ReadArgs,
    #[command(
        flatten,
        next_help_heading = "Write path (POST /v1/ingest and mock sources)"
    )]
    pub writer: ingest::WriterArgs,
    /// Serving address.
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_LISTEN",
        default_value = "0.0.0.0:1122"
    )]
    pub listen: SocketAddr,
    /// Admin address (health, readiness, metrics, stats, reload). Loopback by
    /// default: set it to the pod's address (e.g. `0.0.0.0:9122` in a container)
    /// for probes and scraping.
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_ADMIN_LISTEN",
        default_value = "127.0.0.1:9122"
    )]
    pub admin_listen: SocketAddr,
    /// Serve Feast's gRPC services (`ServingService` and `GrpcFeatureServer`:
    /// `GetOnlineFeatures`, `Push`, `WriteToOnlineStore`) on this address, beside
    /// Feast's HTTP routes. Off by default; needs `--feast-repo`.
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_GRPC_LISTEN",
        value_name = "ADDR",
        requires = "feast_repo"
    )]
    pub grpc_listen: Option<SocketAddr>,
    #[command(flatten, next_help_heading = "TLS")]
    pub tls: TlsArgs,
    #[command(flatten, next_help_heading = "Tracing")]
    pub trace: TraceArgs,
    #[command(flatten, next_help_heading = "Python UDFs")]
    pub python: crate::python::PythonArgs,
    /// Worker threads (default: the CPUs this process may use).
    #[arg(help_heading = "Serving", long, env = "OKA_WORKERS")]
    pub workers: Option<usize>,
    /// Pin worker i to core i (only when workers ≤ cores).
    #[arg(help_heading = "Serving", long, env = "OKA_PIN", default_value_t = true, action = clap::ArgAction::Set)]
    pub pin: bool,
    /// Largest request body in bytes (413 beyond; a larger declared
    /// `Content-Length` is refused before any of the body is read).
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_BODY_BYTES", default_value_t = Limits::default().max_body_bytes)]
    pub max_body_bytes: usize,
    /// A request body must arrive within this many milliseconds of its request
    /// head; 408 and the connection closed beyond.
    #[arg(help_heading = "Limits", long, env = "OKA_BODY_READ_TIMEOUT_MS", default_value_t = Limits::default().body_read_timeout.as_millis() as u64)]
    pub body_read_timeout_ms: u64,
    /// A request head must arrive within this many milliseconds of its first byte
    /// (a new connection: of being accepted); the connection is closed beyond.
    #[arg(help_heading = "Limits", long, env = "OKA_HEADER_READ_TIMEOUT_MS", default_value_t = ConnTimeouts::default().header_read.as_millis() as u64)]
    pub header_read_timeout_ms: u64,
    /// A keep-alive connection idle this many milliseconds between requests is
    /// closed. Keep it above the load balancer's idle timeout (an ALB's is 60 s).
    #[arg(help_heading = "Limits", long, env = "OKA_IDLE_TIMEOUT_MS", default_value_t = ConnTimeouts::default().idle.as_millis() as u64)]
    pub idle_timeout_ms: u64,
    /// Client connections one worker holds open; beyond, a new connection is
    /// answered 503 and closed.
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_CONNECTIONS", default_value_t = oka_server::runtime::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Bytes of `POST /v1/ingest` bodies held at once over all workers; beyond,
    /// 503 with `Retry-After`.
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_INGEST_BYTES", default_value_t = Limits::default().max_ingest_bytes)]
    pub max_ingest_bytes: usize,
    /// How far into the future an ingested record's event time may lie, in
    /// seconds; later records are rejected.
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_FUTURE_SKEW_S", default_value_t = Limits::default().max_future_skew.as_secs())]
    pub max_future_skew_s: u64,
    /// Requests one worker serves at once; beyond, 503 with `Retry-After` at once.
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_IN_FLIGHT_REQUESTS", default_value_t = Limits::default().max_in_flight)]
    pub max_in_flight_requests: usize,
    /// Default request deadline, milliseconds (`X-Oka-Deadline-Ms` or `deadline_ms`
    /// override it per request); 504 beyond.
    #[arg(
        help_heading = "Limits",
        long,
        env = "OKA_DEADLINE_MS",
        default_value_t = 2000
    )]
    pub deadline_ms: u64,
    /// Keys per request (over all key lists).
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_KEYS", default_value_t = oka_core::request::MAX_KEYS)]
    pub max_keys: usize,
    /// Targets per request.
    #[arg(help_heading = "Limits", long, env = "OKA_MAX_TARGETS", default_value_t = oka_core::request::MAX_TARGETS)]
    pub max_targets: usize,
    /// API keys file (`<key> <read|write|admin>[,…]` per line); also
    /// `OKA_API_KEYS` (`;`-separated). Without either, authentication is off; with
    /// an `admin` key, `POST /admin/reload` needs one. Re-read on reload.
    #[arg(help_heading = "Auth", long, env = "OKA_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// The shortest time between two reloads, milliseconds: `POST /admin/reload`
    /// sooner is answered 429, a SIGHUP sooner waits its turn.
    #[arg(help_heading = "Reload and shutdown", long, env = "OKA_RELOAD_MIN_INTERVAL_MS", default_value_t = oka_server::state::DEFAULT_RELOAD_INTERVAL.as_millis() as u64)]
    pub reload_min_interval_ms: u64,
    /// Seconds `oka serve` keeps serving after SIGTERM with `/readyz` failing and
    /// answers saying `connection: close`, before it closes its listeners, so
    /// that load balancers and Kubernetes endpoints stop sending to it first
    /// (longer than an ALB target group's deregistration delay). Ctrl-C (SIGINT)
    /// and a second signal skip it.
    #[arg(
        help_heading = "Reload and shutdown",
        long,
        env = "OKA_SHUTDOWN_DELAY_S",
        default_value_t = 5
    )]
    pub shutdown_delay_s: u64,
    /// Seconds the requests received get to finish once the listeners are closed
    /// (after `--shutdown-delay-s`); what is still being served then is cut,
    /// logged, and the exit status is 1.
    #[arg(
        help_heading = "Reload and shutdown",
        long,
        env = "OKA_SHUTDOWN_GRACE_S",
        default_value_t = 20
    )]
    pub shutdown_grace_s: u64,
    /// Worker runtime: `per-core` (a pinned single-threaded runtime per worker) or
    /// `shared` (one multi-threaded runtime, for comparison).
    #[arg(
        help_heading = "Serving",
        long,
        env = "OKA_RUNTIME",
        value_enum,
        default_value = "per-core"
    )]
    pub runtime: RuntimeArg,
    /// Log format.
    #[arg(
        help_heading = "Logging",
        long,
        env = "OKA_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// TLS on the serving and admin ports: PEM files, re-read on every reload
/// (SIGHUP, `POST /admin/reload`).
#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// Serve HTTPS on the serving port with this certificate chain (PEM, leaf
    /// first; ECDSA, Ed25519 or RSA). Needs --tls-key.
    #[arg(long, env = "OKA_TLS_CERT", value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The serving certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "OKA_TLS_KEY", value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM) on the serving port
    /// (mutual TLS). Needs --tls-cert.
    #[arg(
        long,
        env = "OKA_TLS_CLIENT_CA",
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Serve HTTPS on the admin port with this certificate chain (PEM). Needs
    /// --admin-tls-key. Probes must then use HTTPS too.
    #[arg(
        long,
        env = "OKA_ADMIN_TLS_CERT",
        value_name = "PEM",
        requires = "admin_tls_key"
    )]
    pub admin_tls_cert: Option<PathBuf>,
    /// The admin certificate's private key (PEM).
    #[arg(
        long,
        env = "OKA_ADMIN_TLS_KEY",
        value_name = "PEM",
        requires = "admin_tls_cert"
    )]
    pub admin_tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM) on the admin port.
    #[arg(
        long,
        env = "OKA_ADMIN_TLS_CLIENT_CA",
        value_name = "PEM",
        requires = "admin_tls_cert"
    )]
    pub admin_tls_client_ca: Option<PathBuf>,
}

/// Tracing: W3C trace context in, OTLP out (docs/operations.md, Tracing).
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Send the spans of sampled requests over OTLP to this collector: its base
    /// URL, e.g. http://localhost:4318 or https://collector.example:4318
    /// (HTTP/protobuf; `/v1/traces` is added; a private CA's PEM in
    /// OTEL_EXPORTER_OTLP_CERTIFICATE), or http://localhost:4317 (with
    /// --otlp-protocol grpc). Tracing is off, and costs nothing, when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL", value_name = "PROTOCOL")]
    pub otlp_protocol: Option<String>,
    /// The share of new traces sampled, from 0 to 1 (default 1); a request whose
    /// `traceparent` is sampled, or not, is followed either way
    /// (`OTEL_TRACES_SAMPLER` picks another of OpenTelemetry's samplers).
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG", value_name = "RATIO")]
    pub trace_sample_ratio: Option<String>,
}

impl TraceArgs {
    /// The tracer, started, when an endpoint is given (`service`: the
    /// resource's `service.name` unless `OTEL_SERVICE_NAME` is set); a setting
    /// that cannot be used stops the start, named.
    pub fn start(&self, service: &'static str) -> anyhow::Result<Option<Arc<Tracer>>> {
        let Some(endpoint) = self
            .otlp_endpoint
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        else {
            return Ok(None);
        };
        let sampler = std::env::var("OTEL_TRACES_SAMPLER").ok();
        let mut config = TraceConfig::new(
            endpoint,
            self.otlp_protocol.as_deref(),
            sampler.as_deref(),
            self.trace_sample_ratio.as_deref(),
        )?;
        config.certificate = std::env::var_os("OTEL_EXPORTER_OTLP_CERTIFICATE").map(Into::into);
        let tracer = Tracer::start(&config, service)?;
        tracing::info!(
            endpoint = %config.endpoint,
            protocol = config.protocol.name(),
            ratio = config.sampler.ratio,
            parent_based = config.sampler.parent_based,
            "tracing on: sampled requests are sent over OTLP"
        );
        Ok(Some(tracer))
    }
}

/// The TLS of each port (none: plain HTTP).
#[derive(Debug, Clone, Default)]
pub struct PortsTls {
    /// The serving port's.
    pub serving: Option<Arc<Tls>>,
    /// The admin port's.
    pub admin: Option<Arc<Tls>>,
}

impl TlsArgs {
    /// The serving port's and the admin port's TLS, read from their files now
    /// (a bad file stops the start with the file and what to do).
    pub fn load(&self) -> Result<PortsTls, TlsError> {
        let port =
            |cert: &Option<PathBuf>, key: &Option<PathBuf>, ca: &Option<PathBuf>, flag| match (
                cert, key,
            ) {
                (Some(cert), Some(key)) => Tls::load(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: ca.clone(),
                    flag,
                })
                .map(Some),
                _ => Ok(None),
            };
        Ok(PortsTls {
            serving: port(&self.tls_cert, &self.tls_key, &self.tls_client_ca, "--tls")?,
            admin: port(
                &self.admin_tls_cert,
                &self.admin_tls_key,
                &self.admin_tls_client_ca,
                "--admin-tls",
            )?,
        })
    }
}

/// The serving limits the flags give.
pub fn limits(args: &ServeArgs) -> Limits {
    Limits {
        max_body_bytes: args.max_body_bytes,
        body_read_timeout: Duration::from_millis(args.body_read_timeout_ms.max(1)),
        max_ingest_bytes: args.max_ingest_bytes,
        max_future_skew: Duration::from_secs(args.max_future_skew_s),
        max_in_flight: args.max_in_flight_requests,
        default_deadline: Duration::from_millis(args.deadline_ms.max(1)),
        request: RequestLimits {
            max_keys: args.max_keys,
            max_targets: args.max_targets,
        },
    }
}

impl ServeArgs {
    /// What a reload reads.
    pub(crate) fn sources(&self) -> crate::load::Sources {
        crate::load::Sources {
            spec: self.spec.clone(),
            keys_file: self.api_keys_file.clone(),
            feast_repo: self.feast_repo.clone(),
            skip_unmapped: self.feast_skip_unmapped,
            volga_module: self.volga_module.clone(),
            store_url: self.store.url().to_owned(),
            python: self.python_config(),
            feast_store: None,
        }
    }

    /// The Python pool's settings: one worker per serving worker unless
    /// `--python-workers` says otherwise.
    pub fn python_config(&self) -> oka_python::Config {
        self.python
            .config(self.workers.unwrap_or_else(available_cpus))
    }
}

/// The workers, listeners, connection limits and TLS `oka serve` was given.
pub fn server_config(args: &ServeArgs, tls: PortsTls) -> ServerConfig {
    ServerConfig {
        workers: args.workers.unwrap_or_else(available_cpus),
        pin: args.pin,
        runtime: match args.runtime {
            RuntimeArg::PerCore => RuntimeMode::PerCore,
            RuntimeArg::Shared => RuntimeMode::Shared,
        },
        timeouts: ConnTimeouts {
            header_read: Duration::from_millis(args.header_read_timeout_ms.max(1)),
            idle: Duration::from_millis(args.idle_timeout_ms.max(1)),
        },
        max_connections: args.max_connections.max(1),
        grpc_listen: args.grpc_listen,
        tls: tls.serving,
        admin_tls: tls.admin,
        ..ServerConfig::new(args.listen, args.admin_listen)
    }
}

impl ServeArgs {
    /// Where the spec comes from.
    pub(crate) fn spec_from(&self) -> crate::load::SpecFrom<'_> {
        crate::load::SpecFrom::of(
            self.feast_repo.as_deref(),
            self.spec.as_deref(),
            self.feast_skip_unmapped,
            self.volga_module.as_deref(),
        )
    }
}
