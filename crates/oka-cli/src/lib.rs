//! The `oka` command line. A custom binary calls [`main_with`] with its own native
//! UDFs:
//!
//! ```no_run
//! let mut udfs = oka_core::NativeUdfs::new();
//! // udfs.register("my_udf", |call: &oka_core::UdfCall<'_>| { … });
//! std::process::ExitCode::from(0);
//! # let _ = udfs;
//! ```
//!
//! - [`stores`]: store URLs → backends (the only place concrete backends are named).
//! - [`init`]: `oka init DIR`, a small runnable project.
//! - [`ingest`]: `oka ingest`; `load`: the spec and API keys, at start and on reload.
//! - `kafka`: `oka source kafka`, the Kafka sources' consumers (`oka-kafka`).
//! - `migrate`: `oka migrate volga`, a resumable copy of a Volga deployment's Redis data.
//! - `logs`: the `OKA_LOG` filter and log format; `serve_args`: `oka serve`'s flags.
//! - `demo.yaml`: the spec served by `oka serve --demo`.

mod feast;
mod help;
pub mod ingest;
pub mod init;
mod kafka;
mod load;
mod logs;
mod migrate;
mod python;
mod serve_args;
pub mod stores;
mod training;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use logs::LogFormat;
use oka_core::{NativeUdfs, Registry};
use oka_server::{Limits, Shared};
use serve_args::{ServeArgs, limits, server_config};
use tracing::info;

/// Why `oka serve` could not bind its ports, naming them.
fn bind_failed(config: &oka_server::runtime::ServerConfig, e: &std::io::Error) -> anyhow::Error {
    let grpc = config
        .grpc_listen
        .map(|a| format!(" and {a} (gRPC)"))
        .unwrap_or_default();
    anyhow::anyhow!(
        "binding {} and {}{grpc}: {}",
        config.listen,
        config.admin_listen,
        oka_server::error::io_reason(e)
    )
}

// mimalloc in place of the C library's `malloc` (feature `mimalloc`, on by
// default): Rust's own allocator calls `malloc` for every layout of usual
// alignment, which reaches mimalloc's plain fast path (its `GlobalAlloc` calls
// the aligned entry for every allocation, whose slow path over-allocates).
#[cfg(feature = "mimalloc")]
use mimalloc as _;

/// The demo spec (`oka serve --demo`).
pub const DEMO_SPEC: &str = include_str!("demo.yaml");

/// Oka: an on-demand feature server.
#[derive(Debug, Parser)]
#[command(
    name = "oka",
    version,
    about = "Oka: an on-demand feature server (reads pipeline features from a store, runs UDFs at request time)",
    after_help = help::LOGGING
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve features over HTTP.
    Serve(Box<ServeArgs>),
    /// Write a small runnable project into DIR: a spec (an entity, a pipeline
    /// feature, a window aggregate, a CEL feature), sample events and a README with
    /// the commands to validate, ingest and serve it.
    Init {
        /// The project directory (created if needed).
        dir: PathBuf,
        /// Overwrite the project's files if `DIR/oka.yaml` already exists.
        #[arg(long)]
        force: bool,
    },
    /// Validate a spec (or a Volga module) and print a summary; its Python
    /// UDFs' modules are imported and their functions checked; exits non-zero
    /// on errors.
    Validate {
        /// The spec file.
        #[arg(long, env = "OKA_SPEC", required_unless_present = "volga_module")]
        spec: Option<PathBuf>,
        /// A module written for Volga's on-demand layer, instead of a spec.
        #[arg(long, value_name = "FILE.py", conflicts_with = "spec")]
        volga_module: Option<PathBuf>,
        #[command(flatten)]
        python: python::PythonArgs,
    },
    /// Print where each on-demand feature runs: compiled (a Python UDF
    /// translated and proven equal to CPython), python (and why it was not
    /// compiled), cel, native or aggregate. Starts the spec's Python workers.
    Explain {
        /// The spec file.
        #[arg(long, env = "OKA_SPEC", required_unless_present = "volga_module")]
        spec: Option<PathBuf>,
        /// A module written for Volga's on-demand layer, instead of a spec.
        #[arg(long, value_name = "FILE.py", conflicts_with = "spec")]
        volga_module: Option<PathBuf>,
        #[command(flatten)]
        python: python::PythonArgs,
    },
    /// Read a module written for Volga's on-demand layer.
    #[command(subcommand)]
    Volga(python::VolgaCommand),
    /// Load a JSON-lines or CSV file into a pipeline feature; exits non-zero if any
    /// record was rejected or not written.
    Ingest(ingest::IngestArgs),
    /// Run a spec's data sources without serving.
    #[command(subcommand)]
    Source(SourceCommand),
    /// Copy another system's features into a store in Oka's layout.
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// Read a Feast feature repository (feature_store.yaml and its file registry).
    #[command(subcommand)]
    Feast(feast::FeastCommand),
    /// Make a training set: every requested feature as of each row's time of an
    /// entity file, from history files, computed as `oka serve` computes it;
    /// written to Parquet.
    TrainingSet(training::TrainingArgs),
    /// Print the demo spec.
    DemoSpec,
    /// Write the OpenAPI 3.1 documents of the serving port (`openapi.json`) and the
    /// admin port (`openapi-admin.json`) into DIR: the documents the admin port
    /// serves, generated from the server's code.
    Openapi {
        /// The directory to write them into (created if needed).
        #[arg(long, value_name = "DIR", default_value = "docs")]
        out: PathBuf,
    },
    /// Print the CQL schema (keyspace and table) of a ScyllaDB/Cassandra store, for
    /// operators who manage DDL themselves (`oka serve --store-create-schema`
    /// applies the same statements).
    Schema {
        /// The store URL, `scylla://…/keyspace` or `cassandra://…/keyspace`.
        #[arg(long, env = "OKA_STORE")]
        store: String,
        /// The keyspace's replication: `simple:RF` or `DC:RF[,DC:RF…]`.
        #[arg(long, env = "OKA_STORE_REPLICATION", default_value = "simple:1", value_parser = oka_scylla::Replication::parse)]
        store_replication: oka_scylla::Replication,
    },
}

#[derive(Debug, Subcommand)]
enum MigrateCommand {
    /// Copy a Volga deployment's features from its Redis (`volga:hot_feature:*`
    /// hashes) into the store, page by page, resumable; prints what was copied and
    /// what could not be mapped (exit status 1 when some records could not).
    Volga(migrate::VolgaArgs),
}

// Parsed once at start: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum SourceCommand {
    /// Run the spec's mock sources (`source: {mock: …}`) against the store: the first
    /// emission, then one every `period_s`, until interrupted (or once with `--once`).
    Mock {
        /// The feature spec (YAML).
        #[arg(long, env = "OKA_SPEC")]
        spec: PathBuf,
        /// Write the first emission and exit.
        #[arg(long)]
        once: bool,
        #[command(flatten)]
        store: stores::StoreArgs,
        #[command(flatten)]
        writer: ingest::WriterArgs,
    },
    /// Consume the spec's Kafka sources (`source: {kafka: …}`) into the store, at
    /// least once, until SIGTERM or SIGINT; `/metrics`, `/healthz` and `/readyz`
    /// on the admin port.
    Kafka(kafka::KafkaArgs),
}

/// Runs the CLI with `natives` available to specs; returns the exit code.
pub fn main_with(natives: NativeUdfs) -> ExitCode {
    catch_hangups();
    let cli = Cli::parse();
    match run(cli, natives) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli, natives: NativeUdfs) -> Result<ExitCode> {
    match cli.command {
        Command::DemoSpec => {
            print!("{DEMO_SPEC}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema {
            store,
            store_replication,
        } => schema(&store, &store_replication),
        Command::Feast(command) => feast::run(&command),
        Command::Validate {
            spec,
            volga_module,
            python,
        } => python::validate(spec.as_deref(), volga_module.as_deref(), &python, &natives),
        Command::Explain {
            spec,
            volga_module,
            python,
        } => python::explain(spec.as_deref(), volga_module.as_deref(), &python, &natives),
        Command::Volga(command) => python::volga(&command),
        Command::Openapi { out } => openapi(&out),
        Command::Init { dir, force } => {
            for path in init::init(&dir, oka_core::Timestamp::now(), force)? {
                println!("wrote {}", path.display());
            }
            println!(
                "next: oka validate --spec {0}/oka.yaml (then ingest and serve: see {0}/README.md)",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => serve(*args, natives).map(|()| ExitCode::SUCCESS),
        Command::Source(SourceCommand::Mock {
            spec,
            once,
            store,
            writer,
        }) => mock_source(&spec, once, &store, &writer, &natives),
        Command::Source(SourceCommand::Kafka(args)) => kafka::run(&args, &natives),
        Command::Migrate(MigrateCommand::Volga(args)) => {
            logs::init(LogFormat::Text);
            let all = migrate::run(&args, &natives)?;
            Ok(if all {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::TrainingSet(args) => training::run(args, &natives),
        Command::Ingest(args) => {
            logs::init(LogFormat::Text);
            let all_written = ingest::run(args, &natives)?;
            Ok(if all_written {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// `oka openapi`: the OpenAPI documents of both ports into `out`.
fn openapi(out: &std::path::Path) -> Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (name, text) in [
        ("openapi.json", oka_server::serving_document()),
        ("openapi-admin.json", oka_server::admin_document()),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `oka schema`: the CQL DDL for a store URL's keyspace.
fn schema(store: &str, store_replication: &oka_scylla::Replication) -> Result<ExitCode> {
    let url = oka_scylla::StoreUrl::parse(store)
        .map_err(|e| anyhow::anyhow!("the store URL `{}`: {e}", stores::redact(store)))?;
    println!(
        "-- Oka's CQL schema for keyspace `{}` (replication {})",
        url.keyspace,
        store_replication.cql()
    );
    print!(
        "{}",
        oka_scylla::schema::ddl_script(&url.keyspace, store_replication)
    );
    Ok(ExitCode::SUCCESS)
}

/// `oka source mock`: runs a spec's mock sources into a store, once or until a
/// signal.
fn mock_source(
    spec: &std::path::Path,
    once: bool,
    store: &stores::StoreArgs,
    writer: &ingest::WriterArgs,
    natives: &NativeUdfs,
) -> Result<ExitCode> {
    logs::init(LogFormat::Text);
    let origin = spec.display().to_string();
    let yaml = std::fs::read_to_string(spec).map_err(|e| read_error(&origin, &e))?;
    let registry = Registry::from_yaml(&origin, &yaml, natives)
        .map_err(|e| anyhow::anyhow!("invalid spec:\n{e}"))?;
    if oka_ingest::source::MockSource::all(&registry).is_empty() {
        anyhow::bail!("{origin} declares no mock source");
    }
    store.required("source mock")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let store = stores::open_for_writes(store, "source mock").await?;
        let shared = Shared::with_writer(
            Arc::new(registry),
            store,
            Limits::default(),
            writer.config(),
        );
        let periodic = oka_ingest::source::start(
            shared.writer.clone(),
            Arc::clone(&shared.loaded.load().registry),
        )
        .await
        .map_err(|e| anyhow::anyhow!("mock source: {e}"))?;
        if !once {
            tokio::select! {
                () = periodic => {},
                _ = shutdown_signal() => {},
            }
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `reading the spec PATH: <reason in words>`.
fn read_error(origin: &str, e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "reading the spec {origin}: {}",
        oka_server::error::io_reason(e)
    )
}

/// Warns about ports that listen beyond loopback without the keys that guard them.
fn warn_about_open_ports(
    listen: std::net::SocketAddr,
    admin_listen: std::net::SocketAddr,
    keys: &oka_server::auth::ApiKeys,
) {
    if !listen.ip().is_loopback() && !keys.enabled() {
        tracing::warn!(
            %listen,
            "the serving port listens beyond loopback with authentication off: anyone who reaches it can read features and ingest records; configure API keys (--api-keys-file or OKA_API_KEYS) unless a private network guards it"
        );
    }
    if !admin_listen.ip().is_loopback() && !keys.admin_enabled() {
        tracing::warn!(
            %admin_listen,
            "the admin port listens beyond loopback and POST /admin/reload needs no key: add a key with the `admin` scope, or keep the port on a private network"
        );
    }
}

/// `registry` loaded again without a Python pool (its Python UDFs load but do
/// not run), for what keeps a registry for good, such as the periodic mock
/// sources: a reload's old pool then stops once its requests are done.
fn without_runtimes(registry: &Arc<Registry>, natives: &NativeUdfs) -> Arc<Registry> {
    match Registry::load(registry.origin(), registry.spec().clone(), natives) {
        Ok(r) => Arc::new(r),
        Err(_) => Arc::clone(registry),
    }
}

fn serve(mut args: ServeArgs, natives: NativeUdfs) -> Result<()> {
    RELOADS_ON_HANGUP.store(true, std::sync::atomic::Ordering::Release);
    logs::init(args.log_format);
    logs::quiet_udf_panics();
    let keys_file = args.api_keys_file.as_deref();
    let (load, feast) =
        load::spec_and_keys(args.spec_from(), keys_file, &natives, args.python_config())
            .map_err(|e| anyhow::anyhow!(e.message))?;
    let (registry, keys, runtimes) = (load.registry, load.keys, load.runtimes);
    let transforms = load.transforms;
    let (feast, feast_store) = feast::prepare(&mut args.store, feast)?.unzip();
    let tls = args.tls.load().map_err(|e| anyhow::anyhow!(e.message))?;
    let tracer = args.trace.start("oka")?;
    warn_about_open_ports(args.listen, args.admin_listen, &keys);
    info!(
        spec = %args.spec_from(),
        features = registry.features().len(),
        auth = if keys.enabled() { "on" } else { "off" },
        "spec loaded"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the main runtime")?;
    rt.block_on(async move {
        let feast_registry = feast.as_ref().map(|f| Arc::clone(&f.registry));
        let store = stores::open_with(&args.store, &args.reads, feast).await?;
        info!(store = %stores::redact(args.store.url()), backend = store.backend(), "store opened");
        stores::check_fit(&*store, &registry, args.store.url())
            .map_err(|(message, _)| anyhow::Error::msg(message))?;
        if args.store.store.is_none() {
            tracing::warn!(
                "no --store given: serving from memory:// inside this process; what is ingested is lost when it exits (give --store redis://… for a store that lasts)"
            );
        }
        let sources_registry = without_runtimes(&registry, &natives);
        let sources = load::Sources {
            feast_store,
            ..args.sources()
        };
        let reloader = load::reloader(sources, natives, Arc::clone(&store), feast_registry.clone());
        let shared = Shared::builder(registry, store)
            .runtimes(runtimes)
            .transforms(transforms)
            .feast(feast_registry)
            .store_name(stores::redact(args.store.url()))
            .limits(limits(&args))
            .writer(args.writer.config())
            .keys(keys)
            .reloader(reloader)
            .reload_interval(Duration::from_millis(args.reload_min_interval_ms))
            .tls(tls.serving.iter().chain(&tls.admin).cloned().collect())
            .tracer(tracer.clone())
            .build();
        let sources = oka_ingest::source::start(shared.writer.clone(), sources_registry)
            .await
            .map_err(|e| anyhow::anyhow!("mock source: {e}"))?;
        let sources = tokio::spawn(sources);

        let config = server_config(&args, tls);
        let running = oka_server::runtime::start(&config, Arc::clone(&shared))
            .map_err(|e| bind_failed(&config, &e))?;
        reload_on_sighup(Arc::clone(&shared));
        let signal = shutdown_signal().await;
        drain(&running, signal, Duration::from_secs(args.shutdown_delay_s)).await;
        info!(grace_s = args.shutdown_grace_s, "stopped accepting; finishing the requests received");
        sources.abort();
        let grace = Duration::from_secs(args.shutdown_grace_s);
        let report = tokio::task::spawn_blocking(move || stop(running, grace, tracer))
            .await
            .context("joining workers")?;
        info!(clean = report.clean(), "stopped");
        if report.clean() {
            Ok(())
        } else {
            Err(anyhow::anyhow!("shutdown was not clean: {report}"))
        }
    })
}

/// Stops the workers (each request received is answered within `grace`), then
/// sends the served requests' spans. Blocks.
fn stop(
    running: oka_server::runtime::Running,
    grace: Duration,
    tracer: Option<Arc<oka_telemetry::trace::Tracer>>,
) -> oka_server::runtime::Shutdown {
    let report = running.shutdown(grace);
    if let Some(tracer) = tracer {
        tracer.shutdown();
    }
    report
}

/// SIGHUPs received so far. They are caught from the first instruction of
/// `main` (the default action would end the process); `oka serve` reloads on
/// them, other commands log and ignore them.
static HANGUPS: std::sync::LazyLock<tokio::sync::watch::Sender<u64>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::Sender::new(0));

/// Set once `oka serve` takes SIGHUPs as reloads.
static RELOADS_ON_HANGUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Catches SIGHUP on a thread of its own.
fn catch_hangups() {
    #[cfg(unix)]
    match signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP]) {
        Ok(mut signals) => {
            let spawned = std::thread::Builder::new()
                .name("oka-signals".to_owned())
                .spawn(move || {
                    for _ in signals.forever() {
                        HANGUPS.send_modify(|n| *n += 1);
                        if !RELOADS_ON_HANGUP.load(std::sync::atomic::Ordering::Acquire) {
                            tracing::info!("SIGHUP ignored: this command has nothing to reload");
                        }
                    }
                });
            if let Err(e) = spawned {
                eprintln!("warning: SIGHUP cannot be handled ({e}); it would end the process");
            }
        }
        Err(e) => eprintln!("warning: SIGHUP cannot be handled ({e}); it would end the process"),
    }
}

/// Reloads the spec and API keys on SIGHUP, off the serving workers; a SIGHUP
/// that arrived during start-up reloads once serving. SIGHUPs within the reload
/// interval wait their turn and coalesce into one reload.
fn reload_on_sighup(shared: Arc<Shared>) {
    let mut hangups = HANGUPS.subscribe();
    let early = *hangups.borrow_and_update() > 0;
    tokio::spawn(async move {
        if early {
            info!("SIGHUP received during start-up; reloading now");
        }
        let mut pending = early;
        loop {
            while pending {
                let shared = Arc::clone(&shared);
                // The outcome is logged by `reload`.
                match tokio::task::spawn_blocking(move || shared.reload()).await {
                    Ok(Err(oka_server::state::ReloadError::TooSoon(wait))) => {
                        tokio::time::sleep(wait).await;
                    }
                    Ok(Err(oka_server::state::ReloadError::Busy)) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    _ => pending = false,
                }
            }
            if hangups.changed().await.is_err() {
                return;
            }
            hangups.borrow_and_update();
            pending = true;
        }
    });
}

async fn shutdown_signal() -> StopSignal {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => StopSignal::Interrupt,
        () = term => StopSignal::Terminate,
    }
}

/// The signal that asked a command to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopSignal {
    /// SIGINT: a person at a terminal (Ctrl-C).
    Interrupt,
    /// SIGTERM: an orchestrator (Kubernetes, systemd).
    Terminate,
}

/// The drain before `oka serve` stops accepting: `/readyz` fails and answers
/// carry `connection: close` while everything is still served, for `delay` after
/// SIGTERM, so load balancers and Kubernetes endpoints stop sending here first.
/// Ctrl-C, or a second signal, skips (the rest of) it.
async fn drain(running: &oka_server::runtime::Running, signal: StopSignal, delay: Duration) {
    running.drain();
    if signal == StopSignal::Interrupt || delay.is_zero() {
        return;
    }
    info!(
        delay_s = delay.as_secs(),
        "SIGTERM: draining (/readyz answers 503, requests are still served) before closing the listeners; a second signal skips the wait"
    );
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        _ = shutdown_signal() => info!("second signal: closing the listeners now"),
    }
}
