//! `oka source kafka`: consume a spec's Kafka sources into the store, at least
//! once, until SIGTERM or SIGINT; an admin port serves `/metrics`, `/healthz`
//! and `/readyz`. The consumer itself is `oka-kafka`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use oka_core::{NativeUdfs, Registry};
use oka_ingest::{TimeBounds, WritePath};
use oka_kafka::admin::AdminState;
use oka_kafka::{Consumers, KafkaMetrics, KafkaSource, Partitions, RunOptions};
use oka_server::runtime::ConnTimeouts;
use tracing::info;

use crate::logs::{self, LogFormat};
use crate::stores::{self, StoreArgs};

/// Options of `oka source kafka`.
#[derive(Debug, clap::Args)]
#[command(after_help = crate::help::LOGGING)]
pub struct KafkaArgs {
    /// The feature spec (YAML).
    #[arg(long, env = "OKA_SPEC")]
    pub spec: PathBuf,
    /// Consume only this feature's source (default: every Kafka source in the
    /// spec, each with its own consumer).
    #[arg(long, env = "OKA_KAFKA_FEATURE")]
    pub feature: Option<String>,
    /// The bootstrap servers, `host:port[,host:port…]`, overriding every
    /// source's `brokers`.
    #[arg(long, env = "OKA_KAFKA_BROKERS")]
    pub brokers: Option<String>,
    /// A librdkafka setting for every source, `KEY=VALUE`, over the spec's
    /// `options` (repeatable): credentials that do not belong in a spec file,
    /// e.g. `--kafka-option sasl.password=$KAFKA_PASSWORD`.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE", value_parser = kafka_option)]
    pub kafka_options: Vec<(String, String)>,
    /// The admin port: `/metrics`, `/healthz`, `/readyz`.
    #[arg(long, env = "OKA_ADMIN_LISTEN", default_value = "127.0.0.1:9123")]
    pub admin_listen: SocketAddr,
    /// Batches of one source written at once; when all are busy and the next
    /// batch is full, fetching pauses.
    #[arg(long, env = "OKA_KAFKA_IN_FLIGHT", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub in_flight: u16,
    /// How long a shutdown waits for the batches received to be written and
    /// committed, seconds (what is not is read again by the next consumer).
    #[arg(long, env = "OKA_SHUTDOWN_TIMEOUT_S", default_value_t = 30)]
    pub shutdown_timeout_s: u64,
    /// The longest wait between attempts at writing a batch the store refused,
    /// milliseconds (the wait starts at 500 ms and doubles).
    #[arg(long, env = "OKA_KAFKA_RETRY_MAX_MS", default_value_t = 30_000)]
    pub retry_max_ms: u64,
    /// A name of this consumer process that outlives a restart (the pod's name;
    /// the Helm chart sets it): static group membership, each source's member
    /// being `<ID>-<feature>` (`group.instance.id`). A consumer restarted after a
    /// crash takes its partitions back at once instead of after the dead
    /// member's session timeout. Two running processes must never share one.
    /// Unset: dynamic membership.
    #[arg(long, env = "OKA_KAFKA_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// The prefix of each Kafka client's `client.id` (`<prefix>-<feature>`).
    #[arg(long, env = "OKA_KAFKA_CLIENT_ID", default_value = "oka")]
    pub client_id: String,
    /// How often the partitions' high watermarks (the lag gauges) are
    /// refreshed, milliseconds.
    #[arg(long, env = "OKA_KAFKA_STATS_INTERVAL_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..))]
    pub stats_interval_ms: u64,
    /// How far into the future an event time may lie, in seconds (clock skew
    /// between the producer and this machine); later records are rejected.
    #[arg(long, env = "OKA_MAX_FUTURE_SKEW_S", default_value_t = TimeBounds::default().max_future_skew.as_secs())]
    pub max_future_skew_s: u64,
    /// Log format.
    #[arg(long, env = "OKA_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(flatten, next_help_heading = "Store")]
    pub store: StoreArgs,
    #[command(flatten, next_help_heading = "Tracing")]
    pub trace: crate::serve_args::TraceArgs,
}

impl KafkaArgs {
    fn options(&self) -> RunOptions {
        RunOptions {
            brokers: self.brokers.clone(),
            options: self.kafka_options.clone(),
            client_id: self.client_id.clone(),
            instance_id: self.instance_id.clone(),
            in_flight: usize::from(self.in_flight),
            retry_max: Duration::from_millis(self.retry_max_ms.max(1)),
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout_s),
            stats_interval: Duration::from_millis(self.stats_interval_ms),
            bounds: TimeBounds {
                max_future_skew: Duration::from_secs(self.max_future_skew_s),
            },
            ..RunOptions::default()
        }
    }
}

/// A `--kafka-option` that is not `KEY=VALUE`, or sets what Oka sets itself.
#[derive(Debug, thiserror::Error)]
enum BadOption {
    #[error("`{0}`: give KEY=VALUE, e.g. sasl.password=secret")]
    Shape(String),
    #[error(
        "Oka sets `{0}` itself (give the brokers with --brokers, the instance id with --instance-id, the group and start in the spec)"
    )]
    Reserved(String),
}

fn kafka_option(text: &str) -> Result<(String, String), BadOption> {
    let (k, v) = text
        .split_once('=')
        .filter(|(k, _)| !k.trim().is_empty())
        .ok_or_else(|| BadOption::Shape(text.to_owned()))?;
    let k = k.trim();
    if oka_core::spec::kafka::RESERVED_OPTIONS
        .iter()
        .any(|(name, _)| *name == k)
    {
        return Err(BadOption::Reserved(k.to_owned()));
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// The Kafka sources of `registry` to run: all, or `feature`'s.
fn chosen(registry: &Registry, origin: &str, feature: Option<&str>) -> Result<Vec<KafkaSource>> {
    let all = KafkaSource::all(registry);
    let Some(name) = feature else {
        if all.is_empty() {
            bail!(
                "{origin} declares no Kafka source: give a pipeline feature `source: {{kafka: {{topic: …}}}}`"
            );
        }
        return Ok(all);
    };
    let listed = all.iter().map(|s| s.name.to_string()).collect::<Vec<_>>();
    match all.into_iter().find(|s| &*s.name == name) {
        Some(s) => Ok(vec![s]),
        None if registry.feature_id(name).is_none() => bail!(
            "--feature `{name}`: {origin} has no such feature (its Kafka sources: {})",
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        ),
        None => bail!(
            "--feature `{name}` has no Kafka source in {origin} (its Kafka sources: {})",
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        ),
    }
}

/// `oka source kafka`.
pub fn run(args: &KafkaArgs, natives: &NativeUdfs) -> Result<ExitCode> {
    logs::init(args.log_format);
    let origin = args.spec.display().to_string();
    let yaml = std::fs::read_to_string(&args.spec).map_err(|e| crate::read_error(&origin, &e))?;
    let registry = Arc::new(
        Registry::from_yaml(&origin, &yaml, natives)
            .map_err(|e| anyhow::anyhow!("invalid spec:\n{e}"))?,
    );
    let sources = chosen(&registry, &origin, args.feature.as_deref())?;
    args.store.required("source kafka")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the runtime")?;
    rt.block_on(consume(args, registry, sources))?;
    Ok(ExitCode::SUCCESS)
}

async fn consume(
    args: &KafkaArgs,
    registry: Arc<Registry>,
    sources: Vec<KafkaSource>,
) -> Result<()> {
    let store = stores::open_for_writes(&args.store, "source kafka").await?;
    let tracer = args.trace.start("oka-source-kafka")?;
    let opts = oka_kafka::RunOptions {
        store_watch: Arc::new(oka_storage::StoreWatch::new(
            stores::redact(args.store.url()),
            store.backend(),
        )),
        tracer: tracer.clone(),
        ..args.options()
    };
    let partitions = Arc::new(Partitions::default());
    let metrics = Arc::new(KafkaMetrics::new(store.backend(), Arc::clone(&partitions)));
    if let Some(tracer) = &tracer {
        tracer.report_to(Arc::clone(&metrics) as Arc<dyn oka_telemetry::trace::TraceEvents>);
    }
    let writer = WritePath::spawn(
        Arc::clone(&store),
        Arc::clone(&metrics) as Arc<dyn oka_ingest::IngestMetrics>,
        oka_kafka::writer_config(&sources, &opts),
    );
    let consumers = Consumers::start(&sources, &registry, &writer, &metrics, &partitions, &opts)?;
    let listener = tokio::net::TcpListener::bind(args.admin_listen)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "binding the admin port {}: {} (give another with --admin-listen)",
                args.admin_listen,
                oka_server::error::io_reason(&e)
            )
        })?;
    info!(admin = %args.admin_listen, sources = sources.len(), "admin port: /metrics, /healthz, /readyz");
    let state = AdminState {
        metrics,
        consumers: consumers.contexts(),
        store_watch: Arc::clone(&opts.store_watch),
        store: Arc::clone(&store),
    };
    // The admin port answers probes and scrapes until the consumers have left
    // their groups.
    let (stop_admin, admin_stop) = tokio::sync::watch::channel(false);
    let admin = tokio::spawn(oka_kafka::admin::serve(
        listener,
        state,
        ConnTimeouts::default(),
        admin_stop,
    ));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        crate::shutdown_signal().await;
        info!("stopping: finishing the batches received, committing, leaving the groups");
        let _ = stop.send(true);
    });
    let ran = consumers.run(stopped).await;
    let _ = stop_admin.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), admin).await;
    if let Some(tracer) = tracer {
        // The written batches' spans, sent before the process ends.
        let _ = tokio::task::spawn_blocking(move || tracer.shutdown()).await;
    }
    ran?;
    info!("stopped");
    Ok(())
}
