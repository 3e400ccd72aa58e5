//! Loading what `oka serve` serves: the spec and the API keys, at start and on
//! every reload.

use std::sync::Arc;

use oka_core::{NativeUdfs, Registry};
use oka_server::auth::ApiKeys;
use oka_server::state::ReloadFailure;

use crate::DEMO_SPEC;

/// Reads the spec (a file, or the demo) and the API keys (file and environment).
/// Errors name the files as configured in `message`, and by file name only in
/// `public`; no error shows a key.
pub(crate) fn spec_and_keys(
    spec: Option<&std::path::Path>,
    keys_file: Option<&std::path::Path>,
    natives: &NativeUdfs,
) -> Result<(Arc<Registry>, ApiKeys), ReloadFailure> {
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
    let (origin, yaml) = match spec {
        Some(path) => (path.display().to_string(), read(path, "spec")?),
        None => ("<demo>".to_owned(), DEMO_SPEC.to_owned()),
    };
    let registry = Registry::from_yaml(&origin, &yaml, natives)
        .map_err(|e| fail(&format_args!("invalid spec:\n{e}")))?;
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
    Ok((Arc::new(registry), keys))
}
