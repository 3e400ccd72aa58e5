//! An on-demand feature's `udf`: CEL expressions compiled, a native function
//! looked up, or a Python function's declaration (`{python: {file, function,
//! timeout_ms}}`) checked, described as a [`PythonDecl`] and handed to the
//! process's Python runtime, which gives back its runner.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Loader, UdfRuntimes};
use crate::batch::{DEFAULT_PYTHON_TIMEOUT, NotRunHere, PythonDecl, PythonInput, PythonUdfs};
use crate::cel_udf::{Binding, CelUdf};
use crate::entity::Entity;
use crate::feature::{Arg, UdfImpl};
use crate::spec::{FeatureSpec, PythonUdfSpec};

/// What a UDF is called with and returns: its inputs, arguments and `now` as
/// CEL binds them (inputs first, in dependency order), its declared arguments,
/// and its output entity.
#[derive(Clone, Copy)]
pub(super) struct Signature<'a> {
    pub(super) name: &'a str,
    pub(super) bindings: &'a [(Arc<str>, Binding)],
    pub(super) inputs: usize,
    pub(super) args: &'a [Arg],
    pub(super) output: &'a Arc<Entity>,
}

impl Loader {
    /// The feature's UDF: its CEL expressions compiled against `bindings`, the
    /// registered native function it names, or its Python function's runner.
    pub(super) fn udf(
        &mut self,
        path: &str,
        f: &FeatureSpec,
        signature: Signature<'_>,
        runtimes: UdfRuntimes<'_>,
        cel_env: &Arc<cel::Env>,
    ) -> Option<UdfImpl> {
        let Some(u) = &f.udf else {
            self.err(
                path,
                "an on-demand feature needs a `udf` (`expr`, `native` or `python`)",
            );
            return None;
        };
        match (&u.expr, &u.native, &u.python) {
            (Some(exprs), None, None) => {
                match CelUdf::compile(
                    cel_env,
                    signature.output,
                    f.entity.is_none(),
                    exprs,
                    signature.bindings,
                ) {
                    Ok(c) => Some(UdfImpl::Cel(Arc::new(c))),
                    Err(problems) => {
                        for p in problems {
                            let p_path = match &p.field {
                                Some(field) => format!("{path}.udf.expr.{field}"),
                                None => format!("{path}.udf.expr"),
                            };
                            self.err(p_path, p.message);
                        }
                        None
                    }
                }
            }
            (None, Some(n), None) => match runtimes.natives.get(n) {
                Some(udf) => Some(UdfImpl::Native {
                    name: n.as_str().into(),
                    udf,
                }),
                None => {
                    let known = runtimes.natives.names();
                    self.err(
                        format!("{path}.udf.native"),
                        format!(
                            "no native udf `{n}` is registered in this binary (registered: {})",
                            if known.is_empty() {
                                "none".to_owned()
                            } else {
                                known.join(", ")
                            }
                        ),
                    );
                    None
                }
            },
            (None, None, Some(py)) => self.python_udf(path, py, signature, runtimes.python),
            _ => {
                self.err(
                    format!("{path}.udf"),
                    "give exactly one of `expr`, `native` and `python`",
                );
                None
            }
        }
    }
}

/// The longest `timeout_ms` a spec may give: the longest request deadline.
const MAX_TIMEOUT_MS: u64 = 600_000;

impl Loader {
    /// Checks a Python UDF's `file` and `function`: a `.py` file and a Python
    /// name, or for a Feast view (`style: feast`) its repository's
    /// `feature_store.yaml` and the view's name.
    fn python_names(&mut self, path: &str, spec: &PythonUdfSpec) {
        let feast = spec.style == Some(crate::spec::PythonStyle::Feast);
        let file = &spec.file;
        if feast && !file.ends_with("feature_store.yaml") {
            let why = format!(
                "`{file}`: a Feast on-demand view (style: feast) is named by its repository's `feature_store.yaml`"
            );
            self.err(format!("{path}.file"), why);
        }
        if !feast && !file.ends_with(".py") {
            let why = format!(
                "`{file}` is not a Python file: give the path of a `.py` file, relative to the spec"
            );
            self.err(format!("{path}.file"), why);
        }
        if !feast && !is_identifier(&spec.function) {
            let why = format!(
                "`{}` is not a Python function name: give the name of a function defined in `{file}`",
                spec.function
            );
            self.err(format!("{path}.function"), why);
        }
    }

    /// The runner of the Python UDF at `path` (`features.NAME`).
    fn python_udf(
        &mut self,
        path: &str,
        spec: &PythonUdfSpec,
        signature: Signature<'_>,
        runtime: Option<&dyn PythonUdfs>,
    ) -> Option<UdfImpl> {
        let path = format!("{path}.udf.python");
        let errors = self.errors.len();
        self.python_names(&path, spec);
        let timeout_ms = spec
            .timeout_ms
            .unwrap_or(DEFAULT_PYTHON_TIMEOUT.as_millis() as u64);
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            self.err(
                format!("{path}.timeout_ms"),
                format!("`timeout_ms` must be from 1 to {MAX_TIMEOUT_MS} (milliseconds)"),
            );
        }
        if self.errors.len() > errors {
            return None;
        }
        let inputs = signature.bindings[..signature.inputs]
            .iter()
            .filter_map(|(name, b)| match b {
                Binding::Record(e) => Some((name, e, false)),
                Binding::Records(e) => Some((name, e, true)),
                Binding::Scalar(_) => None,
            })
            .map(|(name, entity, many)| PythonInput {
                name: Arc::clone(name),
                entity: Arc::clone(entity),
                many,
            })
            .collect();
        let decl = PythonDecl {
            feature: signature.name.into(),
            origin: self.origin.clone(),
            path: path.clone(),
            file: resolve(&self.origin, &spec.file),
            function: spec.function.clone(),
            timeout: Duration::from_millis(timeout_ms),
            inputs,
            args: signature.args.to_vec(),
            output: Arc::clone(signature.output),
            style: spec.style.unwrap_or_default(),
        };
        let Some(runtime) = runtime else {
            return Some(UdfImpl::Batch(Arc::new(NotRunHere {
                kind: "python",
                source: format!("{}:{}", spec.file, spec.function),
            })));
        };
        match runtime.declare(decl) {
            Ok(udf) => Some(UdfImpl::Batch(udf)),
            Err(e) => {
                self.err(path, e.message);
                None
            }
        }
    }
}

/// `file` as written in the spec, relative to the spec file's folder (`origin`
/// is the spec's path; `<demo>` and other non-paths leave it as written).
fn resolve(origin: &str, file: &str) -> PathBuf {
    let file = Path::new(file);
    if file.is_absolute() || origin.starts_with('<') {
        return file.to_path_buf();
    }
    match Path::new(origin).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(file),
        _ => file.to_path_buf(),
    }
}

/// Whether `name` is a Python identifier Oka accepts (ASCII).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_relative_to_the_spec() {
        assert_eq!(
            resolve("conf/oka.yaml", "udfs/f.py"),
            Path::new("conf/udfs/f.py")
        );
        assert_eq!(resolve("oka.yaml", "f.py"), Path::new("f.py"));
        assert_eq!(
            resolve("/etc/oka.yaml", "/opt/f.py"),
            Path::new("/opt/f.py")
        );
        assert_eq!(resolve("<demo>", "f.py"), Path::new("f.py"));
    }

    #[test]
    fn function_names_are_identifiers() {
        assert!(is_identifier("score") && is_identifier("_x1"));
        assert!(!is_identifier("1x") && !is_identifier("a.b") && !is_identifier(""));
    }
}
