//! Loading what `oka serve` serves: the spec and the API keys, at start and on
//! every reload.

use std::sync::Arc;

use oka_core::NativeUdfs;
use oka_server::auth::ApiKeys;
use oka_server::state::ReloadFailure;
use oka_server::udf_runtime::SpecLoad;

use crate::DEMO_SPEC;
use crate::feast::FeastRepo;

/// Where the spec comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SpecFrom<'a> {
    /// A spec file.
    File(&'a std::path::Path),
    /// The built-in demo.
    Demo,
    /// A module written for Volga's on-demand layer (`--volga-module`).
    Volga(&'a std::path::Path),
    /// A Feast feature repository: its feature_store.yaml and registry, the
    /// overlay giving its on-demand views their CEL (`--spec`), and whether
    /// on-demand views without one are left unserved instead of refused.
    Feast {
        /// The repository.
        repo: &'a std::path::Path,
        /// The overlay spec.
        overlay: Option<&'a std::path::Path>,
        /// `--feast-skip-unmapped`.
        skip_unmapped: bool,
    },
}

impl<'a> SpecFrom<'a> {
    /// Where `oka serve`'s flags take the spec from.
    pub(crate) fn of(
        feast_repo: Option<&'a std::path::Path>,
        spec: Option<&'a std::path::Path>,
        skip_unmapped: bool,
        volga: Option<&'a std::path::Path>,
    ) -> Self {
        match (feast_repo, spec, volga) {
            (_, _, Some(module)) => Self::Volga(module),
            (Some(repo), overlay, None) => Self::Feast {
                repo,
                overlay,
                skip_unmapped,
            },
            (None, Some(spec), None) => Self::File(spec),
            (None, None, None) => Self::Demo,
        }
    }
}

impl std::fmt::Display for SpecFrom<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(p) => write!(f, "{}", p.display()),
            Self::Feast {
                repo,
                overlay: None,
                ..
            } => write!(f, "Feast repository {}", repo.display()),
            Self::Feast {
                repo,
                overlay: Some(o),
                ..
            } => write!(
                f,
                "Feast repository {} with overlay {}",
                repo.display(),
                o.display()
            ),
            Self::Demo => f.write_str("<demo>"),
            Self::Volga(p) => write!(f, "Volga module {}", p.display()),
        }
    }
}

/// The spec's origin and the spec, and for a Feast repository the repository.
type SpecRead = (String, oka_core::spec::Spec, Option<FeastRepo>);

/// Reads the spec `from` gives: a file or the demo (YAML), a Feast repository's
/// registry (with its overlay) or a Volga module (described with `python`); the
/// last two become a spec in memory, with no YAML text in between.
fn read_spec(
    from: SpecFrom<'_>,
    python: &oka_python::Config,
    fail: &dyn Fn(&dyn std::fmt::Display) -> ReloadFailure,
    read: &dyn Fn(&std::path::Path, &str) -> Result<String, ReloadFailure>,
) -> Result<SpecRead, ReloadFailure> {
    let parse = |origin: String, yaml: &str| {
        let spec = oka_core::spec::Spec::from_yaml(&origin, yaml).map_err(|e| fail(&e))?;
        Ok::<_, ReloadFailure>((origin, spec, None))
    };
    match from {
        SpecFrom::File(path) => parse(path.display().to_string(), &read(path, "spec")?),
        SpecFrom::Demo => parse("<demo>".to_owned(), DEMO_SPEC),
        SpecFrom::Volga(path) => {
            let module = oka_python::volga::describe(&python.python, python.memory_mib, path)
                .map_err(|e| fail(&e))?;
            for note in &module.notes {
                tracing::warn!("{note}");
            }
            Ok((path.display().to_string(), module.spec, None))
        }
        SpecFrom::Feast { repo, overlay, .. } => {
            let (config, registry) = crate::feast::load(repo).map_err(|e| fail(&e))?;
            let mut spec = oka_feast::spec::pipeline_spec(&registry);
            let mut origin = config.registry.display().to_string();
            if let Some(path) = overlay {
                origin = path.display().to_string();
                let text = read(path, "overlay")?;
                let extra =
                    oka_core::spec::Spec::from_yaml(&origin, &text).map_err(|e| fail(&e))?;
                oka_feast::overlay::merge(&mut spec, extra, &origin).map_err(|e| fail(&e))?;
            }
            // The views the overlay gives no CEL run in Python, as Feast runs them.
            oka_feast::spec::add_on_demand(&registry, &repo.join("feature_store.yaml"), &mut spec);
            Ok((origin, spec, Some((config, registry))))
        }
    }
}

/// Reads the spec (a file, the demo, or a Feast repository's registry) and the
/// API keys (file and environment), and starts a pool of `python` for the
/// spec's Python UDFs (if any: every worker imports every module first). Errors
/// name the files as configured in `message`, and by file name only in
/// `public`; no error shows a key. With the load, a Feast repository as read.
pub(crate) fn spec_and_keys(
    from: SpecFrom<'_>,
    keys_file: Option<&std::path::Path>,
    natives: &NativeUdfs,
    python: oka_python::Config,
) -> Result<(SpecLoad, Option<FeastRepo>), ReloadFailure> {
    let spec: Vec<&std::path::Path> = match from {
        SpecFrom::File(p) | SpecFrom::Volga(p) => vec![p],
        SpecFrom::Feast { repo, overlay, .. } => std::iter::once(repo).chain(overlay).collect(),
        SpecFrom::Demo => Vec::new(),
    };
    let paths: Vec<&std::path::Path> = spec.into_iter().chain(keys_file).collect();
    let fail = |message: &dyn std::fmt::Display| {
        let message = message.to_string();
        let mut public = message.clone();
        for path in &paths {
            let full = path.display().to_string();
            let name = path.file_name().map_or_else(
                || "the file".to_owned(),
                |n| n.to_string_lossy().into_owned(),
            );
            public = public.replace(&full, &name);
        }
        ReloadFailure { message, public }
    };
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read_to_string(path).map_err(|e| {
            fail(&format_args!(
                "reading the {what} {}: {}",
                path.display(),
                oka_server::error::io_reason(&e)
            ))
        })
    };
    let (origin, spec, feast) = read_spec(from, &python, &fail, &read)?;
    let views = match (&feast, from) {
        (Some((_, registry)), SpecFrom::Feast { repo, .. }) => {
            crate::feast::python_views(repo, registry)
        }
        _ => Vec::new(),
    };
    let crate::python::WithPython {
        registry,
        pool,
        transforms,
    } = crate::python::load(&origin, spec, natives, python, views).map_err(|e| fail(&e))?;
    if let (Some((_, f)), SpecFrom::Feast { skip_unmapped, .. }) = (&feast, from) {
        crate::feast::check_overlay(f, &registry, skip_unmapped).map_err(|e| fail(&e))?;
    }
    let mut keys = ApiKeys::default();
    if let Some(path) = keys_file {
        let text = read(path, "API keys file")?;
        keys = ApiKeys::parse_from(&path.display().to_string(), "line", &text, &['\n'])
            .map_err(|e| fail(&e))?;
    }
    if let Ok(env) = std::env::var("OKA_API_KEYS") {
        keys = keys.merged(
            ApiKeys::parse_from("OKA_API_KEYS", "entry", &env, &[';', '\n'])
                .map_err(|e| fail(&e))?,
        );
    }
    let load = SpecLoad {
        registry: Arc::new(registry),
        keys,
        runtimes: crate::python::PoolRuntime::list(pool),
        transforms,
    };
    Ok((load, feast))
}

/// Where a reload reads from: `oka serve`'s spec, keys and Python settings,
/// and the store the spec must fit.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub spec: Option<std::path::PathBuf>,
    pub keys_file: Option<std::path::PathBuf>,
    pub feast_repo: Option<std::path::PathBuf>,
    pub skip_unmapped: bool,
    pub volga_module: Option<std::path::PathBuf>,
    pub store_url: String,
    pub python: oka_python::Config,
    /// A Feast repository's store as started (a reload may not change it).
    pub feast_store: Option<crate::feast::StartedStore>,
}

/// What `oka serve` reloads on SIGHUP and `POST /admin/reload`: the spec, the
/// keys and the Python pool, checked against the store as at start (for a Feast
/// repository, feature_store.yaml must still name that store).
pub(crate) fn reloader(
    sources: Sources,
    natives: NativeUdfs,
    store: Arc<dyn oka_storage::FeatureStore>,
    feast: Option<oka_feast::SharedRegistry>,
) -> oka_server::state::Reloader {
    Box::new(move || {
        let s = &sources;
        let from = SpecFrom::of(
            s.feast_repo.as_deref(),
            s.spec.as_deref(),
            s.skip_unmapped,
            s.volga_module.as_deref(),
        );
        let (load, loaded) =
            spec_and_keys(from, s.keys_file.as_deref(), &natives, s.python.clone())?;
        crate::stores::check_fit(&*store, &load.registry, &s.store_url)
            .map_err(|(message, public)| ReloadFailure { message, public })?;
        if let (Some(started), Some((config, _))) = (&s.feast_store, &loaded) {
            started
                .check(config)
                .map_err(|(message, public)| ReloadFailure { message, public })?;
        }
        if let (Some(shared), Some((_, feast_registry))) = (&feast, loaded) {
            shared.store(Arc::new(feast_registry));
        }
        Ok(load)
    })
}
