//! A Feast registry as Oka's spec: each online feature view is a pipeline
//! feature of the same name over an entity of its own (the view's join keys, an
//! event time, its features), and each on-demand view an on-demand feature: the
//! overlay's, if it gives one (CEL: [`overlay_skeleton`] prints one to fill in),
//! else a Python UDF Feast's SDK runs in Oka's workers ([`add_on_demand`]).

use std::fmt::Write as _;

use indexmap::IndexMap;
use oka_core::spec::{
    ArgSpec, DependencySpec, EntitySpec, FeatureKindSpec, FeatureSpec, OutputSpec, PythonStyle,
    PythonUdfSpec, SPEC_VERSION, Spec, UdfSpec,
};
use oka_core::value::FieldType;

use crate::config::RepoError;
use crate::registry::{Column, FeastRegistry, FeatureView};

/// The name of the event-time column of a view's entity (`event_timestamp`, or
/// with underscores before it while a feature or key has that name).
pub fn timestamp_column(view: &FeatureView) -> String {
    let mut name = "event_timestamp".to_owned();
    while view
        .join_keys
        .iter()
        .chain(&view.features)
        .any(|c| c.name == name)
    {
        name.insert(0, '_');
    }
    name
}

/// The Oka spec of the registry's online feature views.
pub fn pipeline_spec(registry: &FeastRegistry) -> Spec {
    let online = || registry.views.values().filter(|v| v.online);
    let entities = online()
        .map(|view| {
            let entity = EntitySpec {
                keys: fields(&view.join_keys),
                timestamp: timestamp_column(view),
                fields: fields(&view.features),
                order: None,
            };
            (view.name.clone(), entity)
        })
        .collect();
    let features = online()
        .map(|view| {
            let feature = FeatureSpec {
                kind: FeatureKindSpec::Pipeline,
                entity: Some(view.name.clone()),
                output: None,
                aggregate: None,
                description: Some(format!("Feast feature view {}", view.name)),
                dependencies: Vec::new(),
                args: IndexMap::new(),
                udf: None,
                history: None,
                ttl_s: None,
                source: None,
            };
            (view.name.clone(), feature)
        })
        .collect();
    Spec {
        version: SPEC_VERSION,
        entities,
        features,
    }
}

/// Adds to `spec` an on-demand feature for each on-demand view it has no
/// feature of (the overlay gives none) and Oka's Python workers can run
/// ([`OnDemandView::not_runnable`]): over the views it reads, its request
/// fields as arguments, its features as outputs, its UDF the view itself, run
/// by Feast's SDK (`style: feast`, `file`: the repository's `store_yaml`).
pub fn add_on_demand(registry: &FeastRegistry, store_yaml: &std::path::Path, spec: &mut Spec) {
    for view in registry.on_demand.values() {
        if spec.features.contains_key(&view.name) || view.not_runnable().is_some() {
            continue;
        }
        let python = PythonUdfSpec {
            file: store_yaml.display().to_string(),
            function: view.name.clone(),
            timeout_ms: None,
            style: Some(PythonStyle::Feast),
        };
        let feature = FeatureSpec {
            kind: FeatureKindSpec::OnDemand,
            entity: None,
            output: Some(OutputSpec {
                fields: fields(&view.features),
            }),
            aggregate: None,
            description: Some(format!(
                "Feast on-demand feature view {} ({} mode), run by Feast's SDK",
                view.name, view.mode
            )),
            dependencies: (view.views.iter())
                .map(|(v, _)| DependencySpec::Name(v.clone()))
                .collect(),
            args: (view.request.iter())
                .map(|c| {
                    let arg = ArgSpec {
                        ty: c.ty.field_type(),
                        default: None,
                    };
                    (c.name.clone(), arg)
                })
                .collect(),
            udf: Some(UdfSpec {
                expr: None,
                native: None,
                python: Some(python),
            }),
            history: None,
            ttl_s: None,
            source: None,
        };
        spec.features.insert(view.name.clone(), feature);
    }
}

/// [`pipeline_spec`] as YAML, as `oka feast spec` prints it.
pub fn pipeline_yaml(registry: &FeastRegistry) -> Result<String, RepoError> {
    let body = pipeline_spec(registry)
        .to_yaml(&format!("Feast project {}", registry.project))
        .map_err(|e| RepoError::caused(e.to_string(), e))?;
    Ok(format!(
        "# Feast project {}: its online feature views as Oka reads them (oka feast spec).\n{body}",
        quote(&registry.project)
    ))
}

fn fields(cols: &[Column]) -> IndexMap<String, FieldType> {
    cols.iter()
        .map(|c| (c.name.clone(), c.ty.field_type()))
        .collect()
}

/// An overlay to start from: an on-demand feature per on-demand view worth
/// writing in CEL — one whose body looks simple ([`crate::simple`]), or one
/// Oka's Python workers cannot run — with its dependencies, request fields as
/// typed args and outputs filled in, each output's CEL left empty (`~`: the
/// overlay is refused until it is written), the view's Python source beside it
/// as a comment. The other views are listed in a comment: they run in Python.
pub fn overlay_skeleton(registry: &FeastRegistry) -> String {
    let mut out = format!(
        "# Oka overlay for Feast project {}: an on-demand feature per on-demand feature\n# view worth giving its CEL (docs/migrating-from-feast.md, \"The overlay\"); the\n# rest run as Feast runs them, in Oka's Python workers (--python).\n# Every `~` is an expression still to write; Oka refuses the overlay until none is left.\n",
        quote(&registry.project)
    );
    let mut entries = Vec::new();
    for view in registry.on_demand.values() {
        let why = match (
            view.not_runnable(),
            crate::simple::why_not_cel(&view.source),
        ) {
            (Some(why), _) => {
                format!("Oka's Python workers cannot run it ({why}): only an overlay serves it")
            }
            (None, None) => "a CEL candidate: its body is arithmetic over its inputs".to_owned(),
            (None, Some(why)) => {
                let _ = writeln!(out, "# left to Python: {} ({why})", view.name);
                continue;
            }
        };
        entries.push((view, why));
    }
    out.push_str("version: 1\nfeatures:\n");
    if entries.is_empty() {
        out.push_str("  {}\n");
    }
    for (view, why) in entries {
        let _ = writeln!(out, "  {}:", quote(&view.name));
        let _ = writeln!(out, "    # {why}");
        skeleton_entry(view, &mut out);
    }
    out
}

/// One view's feature in the skeleton, after its name.
fn skeleton_entry(view: &crate::registry::OnDemandView, out: &mut String) {
    let _ = writeln!(
        out,
        "    description: {}",
        quote(&format!(
            "Feast on-demand feature view {} ({} mode)",
            view.name, view.mode
        ))
    );
    out.push_str("    kind: on_demand\n");
    let deps: Vec<String> = view.views.iter().map(|(v, _)| quote(v)).collect();
    let _ = writeln!(out, "    dependencies: [{}]", deps.join(", "));
    for (v, features) in &view.views {
        let _ = writeln!(out, "    # reads {}: {}", v, features.join(", "));
    }
    if !view.request.is_empty() {
        out.push_str("    args:\n");
        for c in &view.request {
            let _ = writeln!(
                out,
                "      {}: {{type: {}}}",
                quote(&c.name),
                c.ty.field_type()
            );
        }
    }
    let _ = writeln!(out, "    output: {{fields: {}}}", columns(&view.features));
    out.push_str("    udf:\n      expr:\n");
    for c in &view.features {
        let _ = writeln!(out, "        {}: ~", quote(&c.name));
    }
    if !view.source.trim().is_empty() {
        out.push_str("    # Feast's Python:\n");
        for line in view.source.trim_end().lines() {
            let _ = writeln!(out, "    #   {line}");
        }
    }
}

fn columns(cols: &[Column]) -> String {
    let parts: Vec<String> = cols
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                quote(&c.name),
                quote(&c.ty.field_type().to_string())
            )
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// `s` as a YAML scalar: plain when it is a plain identifier, else double-quoted
/// (JSON's escaping is valid YAML).
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '<' || c == '>')
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && !matches!(
            s,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        s.to_owned()
    } else {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::{FeastType, OnDemandView, Scalar};

    fn registry() -> FeastRegistry {
        let mut r = FeastRegistry {
            project: "p".to_owned(),
            ..FeastRegistry::default()
        };
        r.views.insert(
            "stats".to_owned(),
            FeatureView {
                name: "stats".to_owned(),
                join_keys: vec![Column::new("driver_id", FeastType::Int64)],
                features: vec![
                    Column::new("event_timestamp", FeastType::Float),
                    Column::new("tags", FeastType::List(Scalar::String)),
                ],
                ttl: None,
                online: true,
                timestamp_field: "ts".to_owned(),
                field_mapping: Default::default(),
                on_write: None,
            },
        );
        r.on_demand.insert(
            "fare".to_owned(),
            OnDemandView {
                name: "fare".to_owned(),
                mode: "python".to_owned(),
                views: vec![("stats".to_owned(), vec!["tags".to_owned()])],
                request: vec![Column::new("distance", FeastType::Double)],
                features: vec![Column::new("fare", FeastType::Double)],
                source: "def fare(inputs):\n    return {}\n".to_owned(),
                singleton: false,
                aggregations: 0,
                proto: b"\x0a\x00".to_vec(),
            },
        );
        r
    }

    #[test]
    fn on_demand_views_without_an_overlay_feature_run_in_python() {
        let mut registry = registry();
        let mut spec = pipeline_spec(&registry);
        let yaml = std::path::Path::new("/repo/feature_store.yaml");
        add_on_demand(&registry, yaml, &mut spec);
        let fare = &spec.features["fare"];
        let python = fare.udf.as_ref().and_then(|u| u.python.as_ref()).unwrap();
        assert_eq!(
            (python.file.as_str(), python.function.as_str(), python.style),
            ("/repo/feature_store.yaml", "fare", Some(PythonStyle::Feast))
        );
        assert_eq!(fare.args["distance"].ty, FieldType::Float);
        // Without a Python runtime (a command that runs no UDF) it loads, unrun.
        let loaded = oka_core::Registry::load("feast", spec, &oka_core::NativeUdfs::new());
        assert!(loaded.is_ok(), "{:?}", loaded.err());
        // A view the workers cannot run is left to the overlay (or reported).
        let view = registry.on_demand.get_mut("fare").unwrap();
        view.mode = "substrait".to_owned();
        assert!(view.not_runnable().unwrap().contains("mode `substrait`"));
        let mut spec = pipeline_spec(&registry);
        add_on_demand(&registry, yaml, &mut spec);
        assert!(!spec.features.contains_key("fare"));
    }

    #[test]
    fn the_pipeline_spec_is_an_oka_spec() {
        let spec = pipeline_spec(&registry());
        assert_eq!(spec.entities["stats"].timestamp, "_event_timestamp");
        let loaded = oka_core::Registry::load("feast", spec, &oka_core::NativeUdfs::new());
        assert!(loaded.is_ok(), "{:?}", loaded.err());
        // What `oka feast spec` prints loads to the same spec.
        let text = pipeline_yaml(&registry()).unwrap();
        assert!(text.starts_with("# Feast project p:"), "{text}");
        let loaded = oka_core::Registry::from_yaml("feast", &text, &oka_core::NativeUdfs::new());
        assert!(loaded.is_ok(), "{text}\n{:?}", loaded.err());
        assert!(text.contains("timestamp: _event_timestamp"), "{text}");
    }

    #[test]
    fn the_skeleton_is_refused_until_filled_in() {
        let text = overlay_skeleton(&registry());
        assert!(text.contains("fare: ~"), "{text}");
        assert!(text.contains("#   def fare(inputs):"), "{text}");
        assert!(text.contains("distance: {type: float}"), "{text}");
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert!(doc["features"]["fare"]["udf"]["expr"]["fare"].is_null());
        // A view that calls a library is left to Python, named with why.
        let mut r = registry();
        let mut m = r.on_demand["fare"].clone();
        m.name = "m".to_owned();
        m.source = "def m(inputs):\n    return {\"fare\": np.sqrt(inputs[\"d\"])}\n".to_owned();
        r.on_demand.insert("m".to_owned(), m);
        let text = overlay_skeleton(&r);
        assert!(
            text.contains("# left to Python: m (its body calls np.sqrt)"),
            "{text}"
        );
        assert!(!text.contains("\n  m:"), "{text}");
        assert!(text.contains("# a CEL candidate"), "{text}");
    }
}
