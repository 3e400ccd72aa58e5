//! The spec loader: a parsed [`Spec`] → a validated, planned [`Registry`], with
//! every problem reported by its place in the spec.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::batch::PythonUdfs;
use crate::cel_udf::{self, Binding};
use crate::entity::Entity;
use crate::error::{SpecError, SpecErrors, did_you_mean};
use crate::feature::{
    Arg, DEFAULT_HISTORY, Dependency, Feature, FeatureId, FeatureKind, QueryKind, Source, UdfImpl,
};
use crate::plan::{Plan, PlanCache};
use crate::registry::Registry;
use crate::spec::{
    DependencySpec, FeatureKindSpec, FeatureSpec, QueryKindSpec, SPEC_VERSION, Spec,
};
use crate::topo::topo_order;
use crate::udf::NativeUdfs;
use crate::value::FieldType;
use udf::Signature;

mod kafka;
mod output;
mod source;
mod udf;

/// What a process offers a spec's UDFs: the native functions of its binary and,
/// when it runs them, a runtime for Python UDFs.
#[derive(Clone, Copy)]
pub struct UdfRuntimes<'a> {
    /// Native functions by name.
    pub natives: &'a NativeUdfs,
    /// The Python runtime; without one, Python UDFs load but do not run.
    pub python: Option<&'a dyn PythonUdfs>,
}

impl<'a> UdfRuntimes<'a> {
    /// Native functions only: Python UDFs load but do not run (commands that
    /// never run UDFs, such as `oka ingest`).
    pub fn natives(natives: &'a NativeUdfs) -> Self {
        Self {
            natives,
            python: None,
        }
    }
}

impl std::fmt::Debug for UdfRuntimes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdfRuntimes")
            .field("natives", self.natives)
            .field("python", &self.python.is_some())
            .finish()
    }
}

impl Registry {
    /// Parses, validates and plans a YAML spec. `origin` (the file path) prefixes
    /// every error. Python UDFs load but do not run ([`UdfRuntimes::natives`]).
    pub fn from_yaml(origin: &str, yaml: &str, natives: &NativeUdfs) -> Result<Self, SpecErrors> {
        Self::from_yaml_with(origin, yaml, UdfRuntimes::natives(natives))
    }

    /// [`Self::from_yaml`] with the UDF runtimes of this process.
    pub fn from_yaml_with(
        origin: &str,
        yaml: &str,
        runtimes: UdfRuntimes<'_>,
    ) -> Result<Self, SpecErrors> {
        let spec = Spec::from_yaml(origin, yaml)?;
        Self::load_with(origin, spec, runtimes)
    }

    /// Validates and plans a parsed spec; reports every problem found.
    pub fn load(origin: &str, spec: Spec, natives: &NativeUdfs) -> Result<Self, SpecErrors> {
        Self::load_with(origin, spec, UdfRuntimes::natives(natives))
    }

    /// [`Self::load`] with the UDF runtimes of this process.
    pub fn load_with(
        origin: &str,
        spec: Spec,
        runtimes: UdfRuntimes<'_>,
    ) -> Result<Self, SpecErrors> {
        Loader::new(origin).load(spec, runtimes)
    }
}

/// What an on-demand feature's UDF is built from: an aggregation's checked
/// outputs, or the spec's `udf` with the runtimes and CEL environment.
struct OnDemandUdf<'a> {
    aggregate: Option<crate::aggregate::AggregateOutputs>,
    runtimes: UdfRuntimes<'a>,
    cel_env: &'a Arc<cel::Env>,
}

struct Loader {
    origin: String,
    errors: Vec<SpecError>,
}

impl Loader {
    fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_owned(),
            errors: Vec::new(),
        }
    }

    fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors
            .push(SpecError::new(&self.origin, path, message));
    }

    fn check_name(&mut self, path: &str, what: &str, name: &str) {
        let mut chars = name.chars();
        let ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            self.err(
                path,
                format!("{what} name `{name}` must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"),
            );
        } else if matches!(what, "feature" | "argument") && cel_udf::is_reserved(name) {
            self.err(path, format!("{what} name `{name}` is reserved"));
        }
    }

    fn load(mut self, spec: Spec, runtimes: UdfRuntimes<'_>) -> Result<Registry, SpecErrors> {
        if spec.version != SPEC_VERSION {
            self.err(
                "version",
                format!(
                    "unsupported spec version {} (expected {SPEC_VERSION})",
                    spec.version
                ),
            );
            return Err(SpecErrors(self.errors));
        }
        let entities = self.entities(&spec.entities);
        let deps_of = self.feature_dependencies(&spec, &entities);
        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }
        let Some((topo, topo_rank)) = self.order(&spec, &deps_of) else {
            return Err(SpecErrors(self.errors));
        };
        let cel_env = cel_udf::env();
        let features = self.build_features(&spec, &entities, &deps_of, &topo, runtimes, &cel_env);
        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }
        let by_name = features
            .iter()
            .map(|f| (Arc::clone(&f.name), f.id))
            .collect();
        let mut registry = Registry {
            spec,
            origin: self.origin,
            entities,
            features,
            by_name,
            topo_rank,
            single_plans: Vec::new(),
            plan_cache: PlanCache::default(),
            cel_env,
        };
        registry.single_plans = (0..registry.features.len())
            .map(|id| Arc::new(Plan::build(&registry.features, &registry.topo_rank, &[id])))
            .collect();
        Ok(registry)
    }

    /// Checks each feature's name and entity, and resolves its dependencies
    /// (by feature id, in spec order).
    fn feature_dependencies(
        &mut self,
        spec: &Spec,
        entities: &IndexMap<Arc<str>, Arc<Entity>>,
    ) -> Vec<Vec<Dependency>> {
        let names: HashMap<Arc<str>, FeatureId> = spec
            .features
            .keys()
            .enumerate()
            .map(|(i, n)| (Arc::<str>::from(n.as_str()), i))
            .collect();
        let mut deps_of: Vec<Vec<Dependency>> = Vec::with_capacity(spec.features.len());
        for (name, f) in &spec.features {
            let path = format!("features.{name}");
            self.check_name(&path, "feature", name);
            self.check_output_decl(&path, f, entities);
            deps_of.push(self.dependencies(&path, f, &spec.features, &names));
        }
        deps_of
    }

    /// The features in dependency order, and each feature's rank in it; `None`
    /// (with the cycle reported) if the dependencies have a cycle.
    fn order(
        &mut self,
        spec: &Spec,
        deps_of: &[Vec<Dependency>],
    ) -> Option<(Vec<FeatureId>, Vec<usize>)> {
        let topo = match topo_order(deps_of) {
            Ok(order) => order,
            Err(cycle) => {
                let names: Vec<&str> = cycle
                    .iter()
                    .map(|&i| spec.features.get_index(i).map_or("?", |(n, _)| n.as_str()))
                    .collect();
                self.err(
                    format!("features.{}.dependencies", names[0]),
                    format!("dependency cycle: {}", names.join(" -> ")),
                );
                return None;
            }
        };
        let mut topo_rank = vec![0; topo.len()];
        for (rank, &id) in topo.iter().enumerate() {
            topo_rank[id] = rank;
        }
        Some((topo, topo_rank))
    }

    /// Builds the features in dependency order, so that UDFs see their inputs'
    /// schemas; the ones with problems are reported and left out.
    fn build_features(
        &mut self,
        spec: &Spec,
        entities: &IndexMap<Arc<str>, Arc<Entity>>,
        deps_of: &[Vec<Dependency>],
        topo: &[FeatureId],
        runtimes: UdfRuntimes<'_>,
        cel_env: &Arc<cel::Env>,
    ) -> Vec<Feature> {
        let mut built: Vec<Option<Feature>> = vec![None; spec.features.len()];
        for &id in topo {
            let Some((name, f)) = spec.features.get_index(id) else {
                continue;
            };
            let Some((entity, aggregate)) =
                self.feature_output(name, f, entities, &deps_of[id], &built)
            else {
                continue;
            };
            let kind = match f.kind {
                FeatureKindSpec::Pipeline => FeatureKind::Pipeline {
                    history: f.history.unwrap_or(DEFAULT_HISTORY),
                    ttl: f
                        .ttl_s
                        .filter(|t| *t > 0.0 && t.is_finite())
                        .map(std::time::Duration::from_secs_f64),
                    source: f.source.as_ref().and_then(|s| self.source(name, s)),
                },
                FeatureKindSpec::OnDemand => {
                    let udf = OnDemandUdf {
                        aggregate,
                        runtimes,
                        cel_env,
                    };
                    match self.on_demand(name, f, &entity, &deps_of[id], &built, udf) {
                        Some(k) => k,
                        None => continue,
                    }
                }
            };
            match &kind {
                FeatureKind::Pipeline {
                    source: Some(Source::Mock(src)),
                    ..
                } => self.check_source(
                    &format!("features.{name}.source.mock"),
                    src,
                    &entity,
                    cel_env,
                ),
                FeatureKind::Pipeline {
                    source: Some(Source::Kafka(src)),
                    ..
                } => self.check_kafka(&format!("features.{name}.source.kafka"), src),
                _ => {}
            }
            built[id] = Some(Feature {
                id,
                name: name.as_str().into(),
                entity,
                description: f.description.clone(),
                kind,
            });
        }
        built.into_iter().flatten().collect()
    }

    fn dependencies(
        &mut self,
        path: &str,
        f: &FeatureSpec,
        all: &IndexMap<String, FeatureSpec>,
        names: &HashMap<Arc<str>, FeatureId>,
    ) -> Vec<Dependency> {
        let mut out = Vec::new();
        if !self.check_kind_fields(path, f) {
            return out;
        }
        let listed: Vec<(String, &DependencySpec)> = match &f.aggregate {
            Some(agg) => vec![(format!("{path}.aggregate.over"), &agg.over)],
            None => (f.dependencies.iter().enumerate())
                .map(|(i, d)| (format!("{path}.dependencies[{i}]"), d))
                .collect(),
        };
        let mut seen = std::collections::HashSet::new();
        for (dpath, d) in listed {
            let (dep_name, query) = self.dependency_query(&dpath, d);
            let Some(&id) = names.get(dep_name) else {
                self.err(
                    &dpath,
                    format!(
                        "unknown feature `{dep_name}`{}",
                        did_you_mean(dep_name, names.keys().map(|k| &**k))
                    ),
                );
                continue;
            };
            if f.aggregate.is_some() && query == QueryKind::Latest {
                self.err(
                    &dpath,
                    "an aggregate reads a window of records: `query: range` (with `lookback_s`) or `query: last_n` (with `n`)",
                );
            }
            if !seen.insert(dep_name) {
                self.err(&dpath, format!("`{dep_name}` is listed twice"));
            }
            let dep_is_pipeline = all[id].kind == FeatureKindSpec::Pipeline;
            if !dep_is_pipeline && query != QueryKind::Latest {
                self.err(
                    &dpath,
                    format!(
                        "`{}` applies only to pipeline features; `{dep_name}` is on-demand",
                        query.name()
                    ),
                );
            }
            out.push(Dependency { feature: id, query });
        }
        out
    }

    /// Checks that a feature has only the fields of its kind (and their values);
    /// whether it can have dependencies (it is on-demand).
    fn check_kind_fields(&mut self, path: &str, f: &FeatureSpec) -> bool {
        match f.kind {
            FeatureKindSpec::Pipeline => {
                for (field, present) in [
                    ("dependencies", !f.dependencies.is_empty()),
                    ("args", !f.args.is_empty()),
                    ("udf", f.udf.is_some()),
                    ("output", f.output.is_some()),
                    ("aggregate", f.aggregate.is_some()),
                ] {
                    if present {
                        self.err(
                            format!("{path}.{field}"),
                            format!("a pipeline feature has no `{field}`"),
                        );
                    }
                }
                if f.history == Some(0) {
                    self.err(format!("{path}.history"), "history must be at least 1");
                }
                if f.ttl_s.is_some_and(|t| !(t > 0.0 && t.is_finite())) {
                    self.err(
                        format!("{path}.ttl_s"),
                        "ttl_s must be a positive number of seconds",
                    );
                }
                false
            }
            FeatureKindSpec::OnDemand => {
                for (field, present) in [
                    ("history", f.history.is_some()),
                    ("ttl_s", f.ttl_s.is_some()),
                    ("source", f.source.is_some()),
                ] {
                    if present {
                        self.err(
                            format!("{path}.{field}"),
                            format!("an on-demand feature has no `{field}`"),
                        );
                    }
                }
                if f.aggregate.is_some() {
                    for (field, present) in [
                        ("dependencies", !f.dependencies.is_empty()),
                        ("args", !f.args.is_empty()),
                        ("udf", f.udf.is_some()),
                    ] {
                        if present {
                            self.err(
                                format!("{path}.{field}"),
                                format!("an aggregate feature has no `{field}`: it reads `aggregate.over`"),
                            );
                        }
                    }
                }
                true
            }
        }
    }

    /// The feature a dependency names and the query it reads it with, with the
    /// query's parameters checked.
    fn dependency_query<'d>(&mut self, dpath: &str, d: &'d DependencySpec) -> (&'d str, QueryKind) {
        match d {
            DependencySpec::Name(n) => (n.as_str(), QueryKind::Latest),
            DependencySpec::Query(q) => {
                let kind = match q.query {
                    QueryKindSpec::Latest => QueryKind::Latest,
                    QueryKindSpec::Range => QueryKind::Range {
                        lookback_s: q.lookback_s,
                    },
                    QueryKindSpec::LastN => QueryKind::LastN { n: q.n },
                };
                if q.n.is_some() && q.query != QueryKindSpec::LastN {
                    self.err(dpath, "`n` applies only to `last_n`");
                }
                if q.n == Some(0) {
                    self.err(dpath, "`n` must be at least 1");
                }
                if q.lookback_s.is_some() && q.query != QueryKindSpec::Range {
                    self.err(dpath, "`lookback_s` applies only to `range`");
                }
                if q.lookback_s.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
                    self.err(dpath, "`lookback_s` must be a positive number");
                }
                (q.feature.as_str(), kind)
            }
        }
    }

    fn on_demand(
        &mut self,
        name: &str,
        f: &FeatureSpec,
        entity: &Arc<Entity>,
        deps: &[Dependency],
        built: &[Option<Feature>],
        udf: OnDemandUdf<'_>,
    ) -> Option<FeatureKind> {
        let path = format!("features.{name}");
        let mut input_names = Vec::new();
        let mut input_entities = Vec::new();
        let mut bindings = Vec::new();
        for d in deps {
            // Dependencies come first in topological order, so they are built
            // unless they failed validation themselves.
            let dep = built[d.feature].as_ref()?;
            input_names.push(Arc::clone(&dep.name));
            input_entities.push(Arc::clone(&dep.entity));
            let b = match d.query {
                QueryKind::Latest => Binding::Record(Arc::clone(&dep.entity)),
                _ => Binding::Records(Arc::clone(&dep.entity)),
            };
            bindings.push((Arc::clone(&dep.name), b));
        }
        let args = self.args(&path, f, &input_names, &mut bindings);
        bindings.push((cel_udf::NOW.into(), Binding::Scalar(FieldType::Timestamp)));
        let udf = match udf.aggregate {
            Some(outputs) => UdfImpl::Aggregate(Arc::new(outputs.compile(entity))),
            None => {
                let signature = Signature {
                    name,
                    bindings: &bindings,
                    inputs: deps.len(),
                    args: &args,
                    output: entity,
                };
                self.udf(&path, f, signature, udf.runtimes, udf.cel_env)?
            }
        };
        let arg_names = args.iter().map(|a| Arc::clone(&a.name)).collect();
        Some(FeatureKind::OnDemand {
            dependencies: deps.to_vec(),
            input_names,
            input_entities,
            args,
            arg_names,
            udf,
        })
    }

    /// The feature's arguments, checked (names, clashes with inputs, defaults of
    /// their type) and added to `bindings`.
    fn args(
        &mut self,
        path: &str,
        f: &FeatureSpec,
        input_names: &[Arc<str>],
        bindings: &mut Vec<(Arc<str>, Binding)>,
    ) -> Vec<Arg> {
        let mut args = Vec::new();
        for (arg, a) in &f.args {
            let apath = format!("{path}.args.{arg}");
            self.check_name(&apath, "argument", arg);
            if input_names.iter().any(|n| &**n == arg.as_str()) {
                self.err(
                    &apath,
                    format!("argument `{arg}` clashes with the dependency of that name"),
                );
            }
            let default = match &a.default {
                None => None,
                Some(j) => match a.ty.from_json(j) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.err(
                            format!("{apath}.default"),
                            format!("default does not match type {}: {e}", a.ty),
                        );
                        None
                    }
                },
            };
            let arg_name: Arc<str> = arg.as_str().into();
            bindings.push((Arc::clone(&arg_name), Binding::Scalar(a.ty.clone())));
            args.push(Arg {
                name: arg_name,
                ty: a.ty.clone(),
                default,
            });
        }
        args
    }
}
