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
        return Err(anyhow!(
            "--store {}: a Feast repository's online store is Redis; give a redis:// URL, or leave --store out to use feature_store.yaml's",
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
            "{} on-demand feature view(s) of the Feast repository have no overlay (Feast's are Python, which Oka does not run):\n  {}\ngive each its CEL in an overlay spec (--spec; `oka feast scaffold --feast-repo DIR` prints a skeleton), or start with --feast-skip-unmapped to serve the rest",
            unmapped.len(),
            unmapped.join("\n  ")
        ));
    }
    for view in unmapped {
        tracing::warn!("not served (--feast-skip-unmapped): on-demand feature view {view}");
    }
    Ok(())
}

/// Notes what the repository holds that is not served, by name.
pub fn report_unserved(registry: &FeastRegistry) {
    for view in registry.views.values().filter(|v| !v.online) {
        tracing::info!(feature_view = %view.name, "not served: the feature view is offline only (`online=False`)");
    }
}

/// For a Feast repository: points the store at its Redis in Feast's layout,
/// reports what is not served, and shares its registry with the store.
pub fn prepare(
    store: &mut crate::stores::StoreArgs,
    loaded: Option<FeastRepo>,
) -> Result<Option<crate::stores::FeastLayout>> {
    let Some((config, registry)) = loaded else {
        return Ok(None);
    };
    store.store = Some(store_url(&config, store.store.as_deref())?);
    report_unserved(&registry);
    Ok(Some(crate::stores::FeastLayout {
        registry: oka_feast::shared(registry),
        key_ttl_seconds: config.redis.key_ttl_seconds,
    }))
}
