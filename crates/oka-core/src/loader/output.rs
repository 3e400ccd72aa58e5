//! Entities and outputs: the spec's entities, and the output entity of each
//! feature — a declared entity, or one made in place from an on-demand feature's
//! `output` fields or `aggregate` outputs, with the keys and timestamp of the
//! entity it reads.

use std::sync::Arc;

use indexmap::IndexMap;

use crate::aggregate::{AggregateOutputs, inline_entity};
use crate::entity::{Column, Entity};
use crate::error::did_you_mean;
use crate::feature::{Dependency, Feature};
use crate::spec::{EntitySpec, FeatureKindSpec, FeatureSpec};
use crate::value::FieldType;

use super::Loader;

/// A feature's output entity, and the checked outputs of an aggregation.
pub(super) type Output = (Arc<Entity>, Option<AggregateOutputs>);

impl Loader {
    pub(super) fn entities(
        &mut self,
        specs: &IndexMap<String, EntitySpec>,
    ) -> IndexMap<Arc<str>, Arc<Entity>> {
        let mut out = IndexMap::new();
        for (name, e) in specs {
            let path = format!("entities.{name}");
            self.check_name(&path, "entity", name);
            if e.keys.is_empty() {
                self.err(
                    format!("{path}.keys"),
                    "an entity needs at least one key field",
                );
            }
            let mut columns = Vec::new();
            let mut key_index = Vec::new();
            for (k, ty) in &e.keys {
                self.check_name(&format!("{path}.keys.{k}"), "field", k);
                if !ty.is_key_type() {
                    self.err(
                        format!("{path}.keys.{k}"),
                        format!("key field `{k}` has type {ty}; keys must be string or int"),
                    );
                }
                key_index.push(columns.len());
                columns.push(Column {
                    name: k.as_str().into(),
                    ty: ty.clone(),
                });
            }
            self.check_name(&format!("{path}.timestamp"), "field", &e.timestamp);
            let timestamp_index = columns.len();
            columns.push(Column {
                name: e.timestamp.as_str().into(),
                ty: FieldType::Timestamp,
            });
            for (k, ty) in &e.fields {
                self.check_name(&format!("{path}.fields.{k}"), "field", k);
                columns.push(Column {
                    name: k.as_str().into(),
                    ty: ty.clone(),
                });
            }
            let mut entity = Entity::new(name, columns, key_index, timestamp_index);
            for c in entity.duplicate_columns() {
                self.err(&path, format!("field `{c}` is declared twice"));
            }
            if let Some(order) = &e.order {
                entity = self.answer_order(&path, entity, order);
            }
            out.insert(Arc::<str>::from(name.as_str()), Arc::new(entity));
        }
        out
    }

    /// `entity` answering its records in `order` (an entity's `order:`): every
    /// column named once. On a problem, the error, and the default order.
    fn answer_order(&mut self, path: &str, entity: Entity, order: &[String]) -> Entity {
        let names = || entity.columns.iter().map(|c| &*c.name);
        let mut indices = Vec::with_capacity(order.len());
        let mut misspelt = false;
        for (i, name) in order.iter().enumerate() {
            match entity.column_index(name) {
                Some(c) if indices.contains(&c) => self.err(
                    format!("{path}.order[{i}]"),
                    format!("`{name}` is listed twice"),
                ),
                Some(c) => indices.push(c),
                None => {
                    misspelt = true;
                    self.err(
                        format!("{path}.order[{i}]"),
                        format!(
                            "`{name}` is not a field of entity `{}` (its fields: {}){}",
                            entity.name,
                            names().collect::<Vec<_>>().join(", "),
                            crate::error::did_you_mean(name, names())
                        ),
                    );
                }
            }
        }
        let missing: Vec<&str> = names()
            .enumerate()
            .filter(|(c, _)| !indices.contains(c))
            .map(|(_, n)| n)
            .collect();
        // A misspelt name is reported once, as such, not also as a missing one.
        if !missing.is_empty() && !misspelt {
            self.err(
                format!("{path}.order"),
                format!(
                    "`order` lists the answer order of every field, and leaves out {}: add {}",
                    missing
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if missing.len() == 1 { "it" } else { "them" }
                ),
            );
        }
        let fallback = entity.clone();
        entity.answering_in(indices).unwrap_or(fallback)
    }

    /// Checks how a feature names its output entity: a pipeline feature by
    /// `entity`; an on-demand one by exactly one of `entity`, `output` and
    /// `aggregate`. A named entity must exist.
    pub(super) fn check_output_decl(
        &mut self,
        path: &str,
        f: &FeatureSpec,
        entities: &IndexMap<Arc<str>, Arc<Entity>>,
    ) {
        let given = [
            f.entity.is_some(),
            f.output.is_some(),
            f.aggregate.is_some(),
        ]
        .iter()
        .filter(|g| **g)
        .count();
        match f.kind {
            FeatureKindSpec::Pipeline if f.entity.is_none() => self.err(
                path,
                "a pipeline feature needs `entity`: the entity whose records it holds",
            ),
            FeatureKindSpec::OnDemand if given == 0 => self.err(
                path,
                "an on-demand feature needs an output: `entity: NAME`, `output: {fields: {…}}` (keys and timestamp from its first dependency) or `aggregate: {…}`",
            ),
            FeatureKindSpec::OnDemand if given > 1 => self.err(
                path,
                "give only one of `entity`, `output` and `aggregate`",
            ),
            _ => {}
        }
        if let Some(e) = &f.entity
            && !entities.contains_key(e.as_str())
        {
            self.err(
                format!("{path}.entity"),
                format!(
                    "unknown entity `{e}`{}",
                    did_you_mean(e, entities.keys().map(|k| &**k))
                ),
            );
        }
    }

    /// The output entity of feature `name`, and its aggregation's checked
    /// outputs; `None` (with the problems reported) when it has none.
    pub(super) fn feature_output(
        &mut self,
        name: &str,
        f: &FeatureSpec,
        entities: &IndexMap<Arc<str>, Arc<Entity>>,
        deps: &[Dependency],
        built: &[Option<Feature>],
    ) -> Option<Output> {
        let path = format!("features.{name}");
        if let Some(e) = &f.entity {
            return entities.get(e.as_str()).map(|e| (Arc::clone(e), None));
        }
        // The entity read: the first dependency's (the window, for an aggregate).
        let from = match deps.first() {
            Some(d) => Arc::clone(&built[d.feature].as_ref()?.entity),
            None => {
                self.err(
                    format!("{path}.output"),
                    "`output` takes its keys and timestamp from the first dependency; list one under `dependencies`",
                );
                return None;
            }
        };
        if let Some(agg) = &f.aggregate {
            let outputs = match AggregateOutputs::check(&from, &agg.outputs) {
                Ok(o) => o,
                Err(problems) => {
                    for p in problems {
                        self.err(format!("{path}.aggregate.outputs.{}", p.field), p.message);
                    }
                    return None;
                }
            };
            let entity = self.inline(
                &format!("{path}.aggregate.outputs"),
                name,
                &from,
                &outputs.fields,
            )?;
            return Some((entity, Some(outputs)));
        }
        let fields = f.output.as_ref().map(|o| &o.fields)?;
        let entity = self.inline(&format!("{path}.output.fields"), name, &from, fields)?;
        Some((entity, None))
    }

    /// The entity of feature `name` made from `from`'s keys and timestamp and
    /// `fields` (declared at `path`), with its names checked.
    fn inline(
        &mut self,
        path: &str,
        name: &str,
        from: &Entity,
        fields: &IndexMap<String, FieldType>,
    ) -> Option<Arc<Entity>> {
        if fields.is_empty() {
            self.err(path, "declare at least one output field");
            return None;
        }
        let before = self.errors.len();
        for field in fields.keys() {
            self.check_name(&format!("{path}.{field}"), "field", field);
            let taken = if from.keys().any(|c| &*c.name == field) {
                Some("a key field")
            } else if from.timestamp_name() == field {
                Some("the timestamp field")
            } else {
                None
            };
            if let Some(taken) = taken {
                self.err(
                    format!("{path}.{field}"),
                    format!(
                        "`{field}` is {taken} of entity `{}`, whose keys and timestamp the output takes; pick another name",
                        from.name
                    ),
                );
            }
        }
        (self.errors.len() == before).then(|| inline_entity(name, from, fields))
    }
}
