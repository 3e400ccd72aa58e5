//! The overlay: an Oka spec giving each of Feast's on-demand views (Python in
//! Feast) its CEL or declarative form, as an on-demand feature of the view's
//! name over the pipeline features of the views it reads, its request sources'
//! fields as args (`oka feast scaffold` prints one to start from). It is merged
//! into the registry's pipeline spec ([`merge`]), and each on-demand view is
//! then either mapped, with outputs of the view's names and types ([`check`]),
//! or reported ([`unmapped`]).

use oka_core::Registry;
use oka_core::feature::FeatureKind;
use serde_yaml_ng::{Mapping, Value};

use crate::config::RepoError;
use crate::registry::{FeastRegistry, OnDemandView};

/// The registry's pipeline spec (YAML) with the overlay's features (and
/// entities, if it declares any) added. An overlay may add but not redefine:
/// a name the pipeline spec already has is refused, naming it.
pub fn merge(pipeline: &str, overlay: &str, origin: &str) -> Result<String, RepoError> {
    let at = |m: String| RepoError(format!("{origin}: {m}"));
    let mut spec: Value = serde_yaml_ng::from_str(pipeline)
        .map_err(|e| at(format!("the registry's spec does not parse: {e}")))?;
    let overlay: Value =
        serde_yaml_ng::from_str(overlay).map_err(|e| at(format!("not a YAML spec: {e}")))?;
    let Value::Mapping(overlay) = overlay else {
        return Err(at(
            "an overlay is an Oka spec: a mapping with `version: 1` and `features`".to_owned(),
        ));
    };
    for (key, value) in overlay {
        let section = key.as_str().unwrap_or_default();
        match section {
            "version" => {
                if value.as_u64() != Some(1) {
                    return Err(at("`version` must be 1".to_owned()));
                }
            }
            "features" | "entities" => add(&mut spec, section, value, &at)?,
            other => {
                return Err(at(format!(
                    "unknown section `{other}`: an overlay has `version`, `features` and `entities`"
                )));
            }
        }
    }
    serde_yaml_ng::to_string(&spec).map_err(|e| at(format!("the merged spec: {e}")))
}

fn add(
    spec: &mut Value,
    section: &str,
    value: Value,
    at: &dyn Fn(String) -> RepoError,
) -> Result<(), RepoError> {
    let Value::Mapping(items) = value else {
        if value.is_null() {
            return Ok(());
        }
        return Err(at(format!("`{section}` must be a mapping by name")));
    };
    let Value::Mapping(spec) = spec else {
        return Err(at("the registry's spec is not a mapping".to_owned()));
    };
    let into = spec
        .entry(Value::from(section))
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    let Value::Mapping(into) = into else {
        return Err(at(format!("the registry's `{section}` is not a mapping")));
    };
    for (name, item) in items {
        if into.contains_key(&name) {
            return Err(at(format!(
                "`{section}.{}` is a feature view's name in the registry: give the overlay's features the names of on-demand views (or new names)",
                name.as_str().unwrap_or("?")
            )));
        }
        into.insert(name, item);
    }
    Ok(())
}

/// The on-demand views the spec gives no feature, each described with its
/// inputs and outputs.
pub fn unmapped(feast: &FeastRegistry, oka: &Registry) -> Vec<String> {
    feast
        .on_demand
        .values()
        .filter(|v| oka.feature_id(&v.name).is_none())
        .map(describe)
        .collect()
}

/// An on-demand view in words: what it reads and what it answers.
pub fn describe(view: &OnDemandView) -> String {
    let reads: Vec<String> = view
        .views
        .iter()
        .map(|(v, fs)| format!("{v} ({})", fs.join(", ")))
        .collect();
    let typed = |cols: &[crate::registry::Column]| {
        cols.iter()
            .map(|c| format!("{}: {}", c.name, c.ty.oka_type()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!("`{}` reads {}", view.name, reads.join(", "));
    if !view.request.is_empty() {
        out.push_str(&format!(", request data {}", typed(&view.request)));
    }
    out.push_str(&format!("; outputs {}", typed(&view.features)));
    out
}

/// Whether each on-demand view the spec maps is an on-demand feature whose
/// outputs have the view's feature names and types (what Feast's answer shows).
pub fn check(feast: &FeastRegistry, oka: &Registry) -> Result<(), RepoError> {
    for view in feast.on_demand.values() {
        let Some(id) = oka.feature_id(&view.name) else {
            continue;
        };
        let feature = oka.feature(id);
        let at = |m: String| RepoError(format!("overlay feature `{}`: {m}", view.name));
        if !matches!(feature.kind, FeatureKind::OnDemand { .. }) {
            return Err(at("it must be `kind: on_demand`".to_owned()));
        }
        for c in &view.features {
            let Some(i) = feature.entity.column_index(&c.name) else {
                return Err(at(format!(
                    "Feast's view outputs `{}` ({}), which the feature does not: give it an output field of that name",
                    c.name,
                    c.ty.oka_type()
                )));
            };
            let ty = feature.entity.columns[i].ty.to_string();
            if ty != c.ty.oka_type() {
                return Err(at(format!(
                    "output `{}` is {ty}; Feast's view gives it as {} ({:?})",
                    c.name,
                    c.ty.oka_type(),
                    c.ty
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PIPELINE: &str = "version: 1\nentities:\n  stats: {keys: {driver_id: int}, timestamp: event_timestamp, fields: {acc: float}}\nfeatures:\n  stats: {kind: pipeline, entity: stats}\n";

    #[test]
    fn an_overlay_adds_features_and_may_not_redefine_a_view() {
        let overlay = "version: 1\nfeatures:\n  fare:\n    kind: on_demand\n    dependencies: [stats]\n    args: {d: {type: float}}\n    output: {fields: {fare: float}}\n    udf: {expr: {fare: 'd * stats.acc'}}\n";
        let merged = merge(PIPELINE, overlay, "o.yaml").unwrap();
        let registry =
            Registry::from_yaml("o.yaml", &merged, &oka_core::NativeUdfs::new()).unwrap();
        assert!(registry.feature_id("fare").is_some());
        assert!(registry.feature_id("stats").is_some());
        let clash = "version: 1\nfeatures:\n  stats: {kind: pipeline, entity: stats}\n";
        let e = merge(PIPELINE, clash, "o.yaml").unwrap_err().0;
        assert!(e.starts_with("o.yaml: `features.stats`"), "{e}");
        let e = merge(PIPELINE, "version: 2\n", "o.yaml").unwrap_err().0;
        assert!(e.contains("`version` must be 1"), "{e}");
        let e = merge(PIPELINE, "udfs: {}\n", "o.yaml").unwrap_err().0;
        assert!(e.contains("unknown section `udfs`"), "{e}");
    }
}
