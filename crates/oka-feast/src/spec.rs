//! A Feast registry as Oka's spec: each online feature view is a pipeline
//! feature of the same name over an entity of its own (the view's join keys, an
//! event time, its features), and each on-demand view is an on-demand feature
//! the overlay defines ([`overlay_skeleton`]: one to fill in per view).

use std::fmt::Write as _;

use indexmap::IndexMap;
use oka_core::spec::{EntitySpec, FeatureKindSpec, FeatureSpec, SPEC_VERSION, Spec};
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

/// [`pipeline_spec`] as YAML, as `oka feast spec` prints it.
pub fn pipeline_yaml(registry: &FeastRegistry) -> Result<String, RepoError> {
    let body = pipeline_spec(registry)
        .to_yaml(&format!("Feast project {}", registry.project))
        .map_err(|e| RepoError(e.to_string()))?;
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

/// An overlay to start from: an on-demand feature per on-demand view, its
/// dependencies, request fields as typed args and outputs filled in, each output's
/// CEL left empty (`~`: the overlay is refused until it is written), the view's
/// Python source beside it as a comment.
pub fn overlay_skeleton(registry: &FeastRegistry) -> String {
    let mut out = format!(
        "# Oka overlay for Feast project {}: one on-demand feature per on-demand feature\n# view, to give each its CEL (docs/migrating-from-feast.md, \"The overlay\").\n# Every `~` is an expression still to write; Oka refuses the overlay until none is left.\nversion: 1\nfeatures:\n",
        quote(&registry.project)
    );
    if registry.on_demand.is_empty() {
        out.push_str("  {}\n");
        return out;
    }
    for view in registry.on_demand.values() {
        let _ = writeln!(out, "  {}:", quote(&view.name));
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
    out
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

    fn col(name: &str, ty: FeastType) -> Column {
        Column {
            name: name.to_owned(),
            ty,
        }
    }

    fn registry() -> FeastRegistry {
        let mut r = FeastRegistry {
            project: "p".to_owned(),
            ..FeastRegistry::default()
        };
        r.views.insert(
            "stats".to_owned(),
            FeatureView {
                name: "stats".to_owned(),
                join_keys: vec![col("driver_id", FeastType::Int64)],
                features: vec![
                    col("event_timestamp", FeastType::Float),
                    col("tags", FeastType::List(Scalar::String)),
                ],
                ttl: None,
                online: true,
                timestamp_field: "ts".to_owned(),
                field_mapping: Default::default(),
            },
        );
        r.on_demand.insert(
            "fare".to_owned(),
            OnDemandView {
                name: "fare".to_owned(),
                mode: "python".to_owned(),
                views: vec![("stats".to_owned(), vec!["tags".to_owned()])],
                request: vec![col("distance", FeastType::Double)],
                features: vec![col("fare", FeastType::Double)],
                source: "def fare(inputs):\n    return {}\n".to_owned(),
            },
        );
        r
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
    }
}
