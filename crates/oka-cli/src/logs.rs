//! Logging: the `OKA_LOG` filter, text or JSON lines on stderr, and the CQL
//! driver kept quiet while a store is being opened (its own lines then repeat,
//! as Debug dumps, what the start-up error says in words).

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The variable that holds the log filter.
pub const VAR: &str = "OKA_LOG";

/// The filter when `OKA_LOG` is unset. The store drivers' own lines are off:
/// they are Debug dumps (fred's `Some(Error { details: … })`), repeated per
/// connection, and Oka logs each change of the store's state once, in words
/// (`oka_storage::StoreWatch`). `OKA_LOG=info,fred=warn` brings them back.
pub const DEFAULT: &str = "info,scylla=off,fred=off";

/// `--log-format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter in force and how to change it, once logging is set up.
struct Installed {
    directives: String,
    /// Whether `OKA_LOG` has a say about the CQL driver (`scylla…`).
    names_driver: bool,
    handle: reload::Handle<EnvFilter, Registry>,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Sets up logging to stderr, filtered by `OKA_LOG` (else [`DEFAULT`]). A filter
/// that does not parse is reported on stderr, and the default is used.
pub fn init(format: LogFormat) {
    let directives = match std::env::var(VAR) {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(_) => v,
            Err(e) => {
                eprintln!("warning: {VAR}=`{v}` is not a log filter ({e}); using `{DEFAULT}`");
                DEFAULT.to_owned()
            }
        },
        _ => DEFAULT.to_owned(),
    };
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&directives));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Text => registry.with(fmt).try_init(),
        LogFormat::Json => registry.with(fmt.json()).try_init(),
    };
    if installed.is_ok() {
        let names_driver = directives != DEFAULT && directives.contains("scylla");
        let _ = INSTALLED.set(Installed {
            directives,
            names_driver,
            handle,
        });
    }
}

/// Silences the CQL driver until the guard is dropped, unless `OKA_LOG` names it
/// (`scylla=…`): while a store is opened, what goes wrong is reported once, in
/// words, by the caller.
#[must_use = "the driver is quiet only while the guard lives"]
pub fn quiet_driver() -> QuietDriver {
    let quieted = INSTALLED
        .get()
        .filter(|i| !i.names_driver)
        .is_some_and(|i| {
            i.handle
                .reload(EnvFilter::new(format!("{},scylla=off", i.directives)))
                .is_ok()
        });
    QuietDriver { quieted }
}

/// Restores the driver's logging when dropped.
pub struct QuietDriver {
    quieted: bool,
}

impl Drop for QuietDriver {
    fn drop(&mut self) {
        if let (true, Some(i)) = (self.quieted, INSTALLED.get()) {
            let _ = i.handle.reload(EnvFilter::new(&i.directives));
        }
    }
}

/// Panics inside UDFs are caught and answered as `error` statuses; log them at
/// debug (they can fire per request) and leave every other panic to the default hook.
pub(crate) fn quiet_udf_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if oka_core::execute::in_udf() {
            tracing::debug!(panic = %info, "udf panicked");
        } else {
            default(info);
        }
    }));
}
