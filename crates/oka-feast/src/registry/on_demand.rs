//! Feast's on-demand feature views as Oka reads them from the registry: their
//! sources, request fields, outputs and mode, with their message byte for byte
//! (what a Python worker rebuilds the view from with Feast's SDK). A view with
//! `write_to_online_store=True` is read as Feast reads it, from the online store:
//! it becomes a feature view ([`FeatureView::on_write`]).

use super::{Column, FeastRegistry, FeatureView, column};
use crate::config::RepoError;
use crate::proto::core as pc;

/// An on-demand feature view: Python in Feast, run by Feast's SDK in Oka's
/// Python workers, or given a CEL form by an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDemandView {
    /// The view's name.
    pub name: String,
    /// `python` or `pandas`.
    pub mode: String,
    /// The feature views it reads, by name, with the features it reads of each.
    pub views: Vec<(String, Vec<String>)>,
    /// Its request sources' fields (the request data a caller sends).
    pub request: Vec<Column>,
    /// Its output features.
    pub features: Vec<Column>,
    /// The Python source, as Feast stored it (for the overlay skeleton).
    pub source: String,
    /// Its `singleton` flag (python mode: called once per row).
    pub singleton: bool,
    /// How many aggregations it declares (Feast then aggregates, not transforms).
    pub aggregations: usize,
    /// Its message in the registry, byte for byte as Feast wrote it (what a
    /// Python worker rebuilds the view from with Feast's SDK).
    pub proto: Vec<u8>,
}

impl OnDemandView {
    /// Why Oka's Python workers cannot run this view as Feast does, if so.
    pub fn not_runnable(&self) -> Option<String> {
        if !matches!(self.mode.as_str(), "python" | "pandas") {
            return Some(format!(
                "mode `{}`: Oka runs python and pandas mode views",
                self.mode
            ));
        }
        if self.aggregations > 0 {
            return Some(
                "it declares aggregations, which Oka does not run for on-demand views".to_owned(),
            );
        }
        if self.proto.is_empty() {
            return Some("its message in the registry could not be read whole".to_owned());
        }
        None
    }
}

impl FeastRegistry {
    /// A view with `write_to_online_store=True`: Feast transforms what is
    /// written to it and stores the result (stamped with the write's time) under
    /// the view's name, and reads it back as it reads a feature view's rows.
    fn add_written(
        &mut self,
        spec: &pc::OnDemandFeatureViewSpec,
        proto: &[u8],
        at: &dyn Fn(String) -> RepoError,
    ) -> Result<(), RepoError> {
        let join_keys = self.join_keys(&spec.entity_columns, &spec.entities, at)?;
        if join_keys.is_empty() {
            return Err(at(
                "write_to_online_store=True without entities: Feast stores its rows by its entities' join keys; give the view `entities=[...]`".to_owned(),
            ));
        }
        let view = FeatureView {
            name: spec.name.clone(),
            join_keys,
            features: features(spec, at)?,
            ttl: None,
            online: true,
            timestamp_field: String::new(),
            field_mapping: Default::default(),
            on_write: Some(proto.into()),
        };
        self.views.insert(spec.name.clone(), view);
        Ok(())
    }

    pub(crate) fn add_on_demand(
        &mut self,
        spec: &pc::OnDemandFeatureViewSpec,
        proto: &[u8],
    ) -> Result<(), RepoError> {
        let at = |what: String| {
            RepoError::new(format!("on-demand feature view `{}`: {what}", spec.name))
        };
        if spec.write_to_online_store {
            return self.add_written(spec, proto, &at);
        }
        let (mut views, mut request) = on_demand_sources(spec, &at)?;
        views.sort();
        request.sort_by(|a, b| a.name.cmp(&b.name));
        let features = features(spec, &at)?;
        let source = match &spec.feature_transformation {
            Some(pc::FeatureTransformationV2 {
                transformation:
                    Some(pc::feature_transformation_v2::Transformation::UserDefinedFunction(u)),
            }) => u.body_text.clone(),
            _ => String::new(),
        };
        self.on_demand.insert(
            spec.name.clone(),
            OnDemandView {
                name: spec.name.clone(),
                mode: spec.mode.clone(),
                views,
                request,
                features,
                source,
                singleton: spec.singleton,
                aggregations: spec.aggregations.len(),
                proto: proto.to_vec(),
            },
        );
        Ok(())
    }
}

/// The feature views (with the features read of each) and the request fields of
/// an on-demand view's sources.
#[allow(clippy::type_complexity)]
fn on_demand_sources(
    spec: &pc::OnDemandFeatureViewSpec,
    at: &dyn Fn(String) -> RepoError,
) -> Result<(Vec<(String, Vec<String>)>, Vec<Column>), RepoError> {
    use pc::on_demand_source::Source;
    let mut views = Vec::new();
    let mut request = Vec::new();
    for source in spec.sources.values() {
        match &source.source {
            Some(Source::FeatureView(v)) => {
                if let Some(s) = &v.spec {
                    views.push((
                        s.name.clone(),
                        s.features.iter().map(|f| f.name.clone()).collect(),
                    ));
                }
            }
            Some(Source::FeatureViewProjection(p)) => {
                let name = if p.feature_view_name_alias.is_empty() {
                    &p.feature_view_name
                } else {
                    &p.feature_view_name_alias
                };
                views.push((
                    name.clone(),
                    p.feature_columns.iter().map(|f| f.name.clone()).collect(),
                ));
            }
            Some(Source::RequestDataSource(d)) => {
                let fields = match &d.options {
                    Some(pc::data_source::Options::RequestDataOptions(o)) => o.schema.as_slice(),
                    _ => &[],
                };
                for f in fields {
                    request.push(column(&f.name, f.value_type, "request field", at)?);
                }
            }
            None => {}
        }
    }
    Ok((views, request))
}

/// An on-demand view's output features, typed.
fn features(
    spec: &pc::OnDemandFeatureViewSpec,
    at: &dyn Fn(String) -> RepoError,
) -> Result<Vec<Column>, RepoError> {
    (spec.features.iter())
        .map(|f| column(&f.name, f.value_type, "feature", at))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::registry::FeastType;

    fn registry(write_to_online_store: bool) -> FeastRegistry {
        let entity = pc::Entity {
            spec: Some(pc::EntitySpecV2 {
                name: "driver".to_owned(),
                project: "p".to_owned(),
                value_type: 4, // INT64
                join_key: "driver_id".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let view = pc::OnDemandFeatureView {
            spec: Some(pc::OnDemandFeatureViewSpec {
                name: "score".to_owned(),
                project: "p".to_owned(),
                mode: "python".to_owned(),
                features: vec![pc::FeatureSpecV2 {
                    name: "score".to_owned(),
                    value_type: 5, // DOUBLE
                    ..Default::default()
                }],
                entities: vec!["driver".to_owned()],
                write_to_online_store,
                ..Default::default()
            }),
            ..Default::default()
        };
        let bytes = pc::Registry {
            entities: vec![entity],
            on_demand_feature_views: vec![view.clone()],
            ..Default::default()
        }
        .encode_to_vec();
        let r = FeastRegistry::decode(&bytes, "p").unwrap();
        if !write_to_online_store {
            // The view's message as written, for Feast's SDK in a worker.
            assert_eq!(r.on_demand["score"].proto, view.encode_to_vec());
        }
        r
    }

    #[test]
    fn a_view_written_to_the_online_store_is_read_as_a_feature_view() {
        let r = registry(true);
        assert!(!r.on_demand.contains_key("score"));
        let view = &r.views["score"];
        assert!(view.on_write.is_some() && view.online);
        assert_eq!(view.join_keys[0].name, "driver_id");
        assert_eq!(view.features[0].ty, FeastType::Double);
        let r = registry(false);
        assert!(r.on_demand.contains_key("score") && !r.views.contains_key("score"));
        assert_eq!(r.on_demand["score"].not_runnable(), None);
    }
}
