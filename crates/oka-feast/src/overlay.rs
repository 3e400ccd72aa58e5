//! The overlay: an Oka spec giving each of Feast's on-demand views (Python in
//! Feast) its CEL or declarative form, as an on-demand feature of the view's
//! name over the pipeline features of the views it reads, its request sources'
//! fields as args (`oka feast scaffold` prints one to start from). It is added
//! to the registry's pipeline spec ([`merge`]: both typed, no YAML text in
//! between), and each on-demand view is
//! then either mapped, with outputs of the view's names and types ([`check`]),
//! or reported ([`unmapped`]).

use indexmap::IndexMap;
use oka_core::Registry;
use oka_core::feature::FeatureKind;
use oka_core::spec::{SPEC_VERSION, Spec};

use crate::config::RepoError;
use crate::registry::{FeastRegistry, OnDemandView};

/// Adds the overlay's features (and entities, if it declares any) to the
/// registry's pipeline spec. An overlay may add but not redefine: a name the
/// pipeline spec already has is refused, naming it.
pub fn merge(spec: &mut Spec, overlay: Spec, origin: &str) -> Result<(), RepoError> {
    let at = |m: String| RepoError::new(format!("{origin}: {m}"));
    if overlay.version != SPEC_VERSION {
        return Err(at(format!("`version` must be {SPEC_VERSION}")));
    }
    add(&mut spec.entities, overlay.entities, "entities", &at)?;
    add(&mut spec.features, overlay.features, "features", &at)
}

fn add<T>(
    into: &mut IndexMap<String, T>,
    items: IndexMap<String, T>,
    section: &str,
    at: &dyn Fn(String) -> RepoError,
) -> Result<(), RepoError> {
    for (name, item) in items {
        if into.contains_key(&name) {
            return Err(at(format!(
                "`{section}.{name}` is a feature view's name in the registry: give the overlay's features the names of on-demand views (or new names)"
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
            .map(|c| format!("{}: {}", c.name, c.ty.field_type()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = format!("`{}` reads {}", view.name, reads.join(", "));
    if let Some(why) = view.not_runnable() {
        out = format!("`{}` ({why}) reads {}", view.name, reads.join(", "));
    }
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
        let at = |m: String| RepoError::new(format!("overlay feature `{}`: {m}", view.name));
        if !matches!(feature.kind, FeatureKind::OnDemand { .. }) {
            return Err(at("it must be `kind: on_demand`".to_owned()));
        }
        for c in &view.features {
            let want = c.ty.field_type();
            let Some(i) = feature.entity.column_index(&c.name) else {
                return Err(at(format!(
                    "Feast's view outputs `{}` ({want}), which the feature does not: give it an output field of that name",
                    c.name,
                )));
            };
            let ty = &feature.entity.columns[i].ty;
            if *ty != want {
                return Err(at(format!(
                    "output `{}` is {ty}; Feast's view gives it as {want} ({:?})",
                    c.name, c.ty
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

    fn merged(overlay: &str) -> Result<Spec, String> {
        let mut spec = Spec::from_yaml("p", PIPELINE).unwrap();
        let overlay = Spec::from_yaml("o.yaml", overlay).map_err(|e| e.to_string())?;
        merge(&mut spec, overlay, "o.yaml").map_err(|e| e.message().to_owned())?;
        Ok(spec)
    }

    #[test]
    fn an_overlay_adds_features_and_may_not_redefine_a_view() {
        let overlay = "version: 1\nfeatures:\n  fare:\n    kind: on_demand\n    dependencies: [stats]\n    args: {d: {type: float}}\n    output: {fields: {fare: float}}\n    udf: {expr: {fare: 'd * stats.acc'}}\n";
        let registry = Registry::load(
            "o.yaml",
            merged(overlay).unwrap(),
            &oka_core::NativeUdfs::new(),
        )
        .unwrap();
        assert!(registry.feature_id("fare").is_some());
        assert!(registry.feature_id("stats").is_some());
        let clash = "version: 1\nfeatures:\n  stats: {kind: pipeline, entity: stats}\n";
        let e = merged(clash).unwrap_err();
        assert!(e.starts_with("o.yaml: `features.stats`"), "{e}");
        let e = merged("version: 2\n").unwrap_err();
        assert!(e.contains("`version` must be 1"), "{e}");
        // An overlay's own mistakes are named in its own file, not a merged text.
        let e = merged("version: 1\nudfs: {}\n").unwrap_err();
        assert!(
            e.starts_with("o.yaml") && e.contains("unknown field `udfs`"),
            "{e}"
        );
    }
}
