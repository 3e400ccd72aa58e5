//! `oka feast …`: a Feast feature repository as Oka reads it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};
use oka_feast::{FeastConfig, FeastRegistry};

/// What `oka feast` does.
#[derive(Debug, Subcommand)]
pub enum FeastCommand {
    /// Print an overlay skeleton for the repository's on-demand feature views: one
    /// on-demand feature per view with its dependencies, request fields as typed
    /// args and outputs, each output's CEL left to write (`~`), the view's Python
    /// beside it as a comment.
    Scaffold(RepoArgs),
    /// Print the Oka spec the repository's online feature views map to (an entity
    /// and a pipeline feature per view), after checking feature_store.yaml and the
    /// registry.
    Spec(RepoArgs),
}

/// The repository.
#[derive(Debug, Args)]
pub struct RepoArgs {
    /// The Feast feature repository: the directory holding feature_store.yaml.
    #[arg(long, env = "OKA_FEAST_REPO", value_name = "DIR")]
    feast_repo: PathBuf,
}

/// Runs an `oka feast` command.
pub fn run(command: &FeastCommand) -> Result<ExitCode> {
    match command {
        FeastCommand::Scaffold(args) => {
            let (_, registry) = load(&args.feast_repo)?;
            print!("{}", oka_feast::spec::overlay_skeleton(&registry));
        }
        FeastCommand::Spec(args) => {
            let (_, registry) = load(&args.feast_repo)?;
            let yaml = oka_feast::spec::pipeline_yaml(&registry).map_err(|e| anyhow!("{e}"))?;
            print!("{yaml}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A Feast repository as read: its feature_store.yaml and registry.
pub type FeastRepo = (FeastConfig, FeastRegistry);

/// Reads a repository's feature_store.yaml and the registry it names.
pub fn load(repo: &Path) -> Result<FeastRepo> {
    let config = FeastConfig::load(repo).map_err(|e| anyhow!("{e}"))?;
    let registry =
        FeastRegistry::load(&config.registry, &config.project).map_err(|e| anyhow!("{e}"))?;
    Ok((config, registry))
}

/// The store URL of a repository's Redis online store: the one `--store` gives
/// (a Redis URL, to reach the same Redis another way: TLS options, a sentinel),
/// else feature_store.yaml's. Its layout is Feast's because the store is given
/// the repository's registry ([`crate::stores::FeastLayout`]), not by the URL.
pub fn store_url(config: &FeastConfig, given: Option<&str>) -> Result<String> {
    let url = given.unwrap_or(&config.redis.url);
    if !url.starts_with("redis") {
        let from = if given.is_some() {
            "--store"
        } else {
            "feature_store.yaml's online store"
        };
        return Err(anyhow!(
            "{from} {}: a Feast repository's online store is Redis; give a redis:// URL, or leave --store out to use feature_store.yaml's",
            crate::stores::redact(url)
        ));
    }
    let (_, layout) = oka_redis::url::take_layout(url).map_err(|e| anyhow!("--store: {e}"))?;
    if layout == oka_redis::url::Layout::Volga {
        return Err(anyhow!(
            "--store: with --feast-repo the store is read in Feast's layout; leave `layout` out of the URL"
        ));
    }
    Ok(url.to_owned())
}

/// Checks the on-demand views against the spec: each the overlay maps must
/// answer the view's outputs; one it does not map stops the load, unless
/// `skip_unmapped` (then it is logged, and requests naming it are refused).
pub fn check_overlay(
    feast: &FeastRegistry,
    oka: &oka_core::Registry,
    skip_unmapped: bool,
) -> Result<()> {
    oka_feast::overlay::check(feast, oka).map_err(|e| anyhow!("{e}"))?;
    let unmapped = oka_feast::overlay::unmapped(feast, oka);
    if unmapped.is_empty() {
        return Ok(());
    }
    if !skip_unmapped {
        return Err(anyhow!(
            "{} on-demand feature view(s) of the Feast repository cannot run in Oka's Python workers and have no overlay:\n  {}\ngive each its CEL in an overlay spec (--spec; `oka feast scaffold --feast-repo DIR` prints a skeleton), or start with --feast-skip-unmapped to serve the rest",
            unmapped.len(),
            unmapped.join("\n  ")
        ));
    }
    for view in unmapped {
        tracing::warn!("not served (--feast-skip-unmapped): on-demand feature view {view}");
    }
    Ok(())
}

/// The registry's on-demand views as the Python pool runs them (`repo`: the
/// repository, put on the workers' `sys.path` as `feast serve` has it): those
/// computed on reads, and those with `write_to_online_store=True`, run on writes.
pub fn python_views(repo: &Path, registry: &FeastRegistry) -> Vec<oka_python::FeastView> {
    use oka_feast::registry::{Column, FeastType, Scalar};
    let repo = std::fs::canonicalize(repo).unwrap_or_else(|_| repo.to_path_buf());
    let kind_in = |c: &Column| match c.ty {
        FeastType::Bytes => Some((c.name.clone(), "bytes")),
        FeastType::List(Scalar::Bytes) => Some((c.name.clone(), "list<bytes>")),
        _ => None,
    };
    let kind_out = |c: &Column| match c.ty {
        FeastType::Float => Some((c.name.clone(), "float32")),
        FeastType::List(Scalar::Float) => Some((c.name.clone(), "list<float32>")),
        _ => kind_in(c),
    };
    let written = (registry.views.values()).filter_map(|v| {
        v.on_write.as_ref().map(|proto| oka_python::FeastView {
            name: v.name.clone(),
            repo: repo.clone(),
            proto: std::sync::Arc::clone(proto),
            reads: Vec::new(),
            kinds_in: Vec::new(),
            kinds_out: Vec::new(),
            on_write: true,
        })
    });
    (registry.on_demand.values())
        .map(|view| {
            let sources = view.views.iter().filter_map(|(v, _)| registry.views.get(v));
            let kinds_in = (sources.flat_map(|v| v.join_keys.iter().chain(&v.features)))
                .chain(&view.request)
                .filter_map(kind_in)
                .collect();
            oka_python::FeastView {
                name: view.name.clone(),
                repo: repo.clone(),
                proto: view.proto.as_slice().into(),
                reads: view.views.clone(),
                kinds_in,
                kinds_out: view.features.iter().filter_map(kind_out).collect(),
                on_write: false,
            }
        })
        .chain(written)
        .collect()
}

/// Notes what the repository holds that is not served, by name.
pub fn report_unserved(registry: &FeastRegistry) {
    for view in registry.views.values().filter(|v| !v.online) {
        tracing::info!(feature_view = %view.name, "not served: the feature view is offline only (`online=False`)");
    }
}

/// The online store a Feast repository's server started with: the `--store`
/// given (if any) and feature_store.yaml's `key_ttl_seconds`. A reload may
/// change the registry, not these.
#[derive(Debug, Clone)]
pub struct StartedStore {
    /// `--store`, as given (it overrides feature_store.yaml's connection).
    pub given: Option<String>,
    /// The store URL served from.
    pub url: String,
    /// feature_store.yaml's `key_ttl_seconds` at start.
    pub key_ttl_seconds: Option<u64>,
}

impl StartedStore {
    /// Whether a reloaded feature_store.yaml still names the store served from:
    /// an error (message, public message) saying what changed otherwise. Oka
    /// does not re-point a running store: the reload is refused and the old
    /// spec keeps serving.
    pub fn check(&self, config: &FeastConfig) -> Result<(), (String, String)> {
        let restart = "the reload is refused and the running spec keeps serving; restart oka serve to use the new settings";
        let url = store_url(config, self.given.as_deref())
            .map_err(|e| (format!("{e}; {restart}"), restart.to_owned()))?;
        if url != self.url {
            return Err((
                format!(
                    "feature_store.yaml's online store changed ({} → {}): Oka keeps the store it started with, so {restart}",
                    crate::stores::redact(&self.url),
                    crate::stores::redact(&url)
                ),
                format!("feature_store.yaml's online store changed: {restart}"),
            ));
        }
        if config.redis.key_ttl_seconds != self.key_ttl_seconds {
            let ttl = |t: Option<u64>| t.map_or_else(|| "none".to_owned(), |t| format!("{t} s"));
            let message = format!(
                "feature_store.yaml's online_store.key_ttl_seconds changed ({} → {}): {restart}",
                ttl(self.key_ttl_seconds),
                ttl(config.redis.key_ttl_seconds)
            );
            return Err((message.clone(), message));
        }
        Ok(())
    }
}

/// For a Feast repository: points the store at its Redis in Feast's layout,
/// reports what is not served, and shares its registry with the store.
pub fn prepare(
    store: &mut crate::stores::StoreArgs,
    loaded: Option<FeastRepo>,
) -> Result<Option<(crate::stores::FeastLayout, StartedStore)>> {
    let Some((config, registry)) = loaded else {
        return Ok(None);
    };
    let given = store.store.clone();
    let url = store_url(&config, given.as_deref())?;
    store.store = Some(url.clone());
    report_unserved(&registry);
    let started = StartedStore {
        given,
        url,
        key_ttl_seconds: config.redis.key_ttl_seconds,
    };
    let layout = crate::stores::FeastLayout {
        registry: oka_feast::shared(registry),
        key_ttl_seconds: config.redis.key_ttl_seconds,
    };
    Ok(Some((layout, started)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(url: &str, ttl: Option<u64>) -> FeastConfig {
        FeastConfig {
            project: "p".to_owned(),
            registry: PathBuf::from("data/registry.db"),
            redis: oka_feast::config::RedisConfig {
                url: url.to_owned(),
                key_ttl_seconds: ttl,
            },
        }
    }

    #[test]
    fn a_reload_may_not_change_the_store() {
        let started = StartedStore {
            given: None,
            url: "redis://127.0.0.1:6379".to_owned(),
            key_ttl_seconds: Some(60),
        };
        assert!(
            started
                .check(&config("redis://127.0.0.1:6379", Some(60)))
                .is_ok()
        );
        let (message, public) = started
            .check(&config("redis://:secret@127.0.0.1:6380", Some(60)))
            .unwrap_err();
        assert!(
            message.contains("online store changed (redis://127.0.0.1:6379 → redis://"),
            "{message}"
        );
        assert!(
            message.contains("restart oka serve") && !message.contains("secret"),
            "{message}"
        );
        assert!(!public.contains("6380"), "{public}");
        let (message, _) = started
            .check(&config("redis://127.0.0.1:6379", None))
            .unwrap_err();
        assert!(
            message.contains("key_ttl_seconds changed (60 s → none)"),
            "{message}"
        );
        // A store Oka cannot read at all is refused the same way.
        let (message, public) = started
            .check(&config("memcached://127.0.0.1:11211", Some(60)))
            .unwrap_err();
        assert!(
            message.starts_with("feature_store.yaml's online store memcached://")
                && message.contains("redis://"),
            "{message}"
        );
        assert!(public.contains("restart oka serve"), "{public}");
        // With --store given, feature_store.yaml's connection is not the one served.
        let given = StartedStore {
            given: Some("redis://127.0.0.1:7000".to_owned()),
            url: "redis://127.0.0.1:7000".to_owned(),
            key_ttl_seconds: None,
        };
        assert!(given.check(&config("redis://127.0.0.1:6380", None)).is_ok());
    }
}
