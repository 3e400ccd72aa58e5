//! The mock source's checks: its `items` typed against the entity, or its
//! `generate` expressions compiled and run once.

use std::sync::Arc;

use crate::cel_udf;
use crate::entity::Entity;
use crate::error::did_you_mean;
use crate::spec::{GenerateSpec, MockSourceSpec};

use super::Loader;

type Item = indexmap::IndexMap<String, serde_json::Value>;

impl Loader {
    /// Checks the mock source at `path` of a pipeline feature of `entity`.
    pub(super) fn check_source(
        &mut self,
        path: &str,
        src: &MockSourceSpec,
        entity: &Entity,
        env: &Arc<cel::Env>,
    ) {
        if src.period_s.is_some_and(|p| !(p >= 0.0 && p.is_finite())) {
            self.err(
                format!("{path}.period_s"),
                "period_s must be a non-negative number",
            );
        }
        match (&src.items, &src.generate) {
            (Some(items), None) => {
                for (i, item) in items.iter().enumerate() {
                    self.check_item(&format!("{path}.items[{i}]"), item, entity);
                }
            }
            (None, Some(generate)) => self.check_generate(path, generate, entity, env),
            _ => self.err(path, "give exactly one of `items` and `generate`"),
        }
    }

    /// One fixed record: known fields of the right type, every key. A
    /// timestamp it gives is its event time (Volga's items carried theirs);
    /// without one, the emit time is.
    fn check_item(&mut self, path: &str, item: &Item, entity: &Entity) {
        for (k, v) in item {
            match entity.column_index(k) {
                None => self.err(format!("{path}.{k}"), no_field(entity, k)),
                Some(c) => {
                    if let Err(e) = entity.columns[c].ty.from_json(v) {
                        self.err(format!("{path}.{k}"), e.to_string());
                    }
                }
            }
        }
        for key in entity.keys() {
            if !item.contains_key(&*key.name) {
                self.err(path, format!("missing key field `{}`", key.name));
            }
        }
    }

    /// Generated columns: known fields, no timestamp, every key, and each
    /// expression compiled and run once (i = 0, tick = 0) to check its type.
    fn check_generate(
        &mut self,
        path: &str,
        generate: &GenerateSpec,
        entity: &Entity,
        env: &Arc<cel::Env>,
    ) {
        for (k, expr) in &generate.columns {
            let cpath = format!("{path}.generate.columns.{k}");
            match entity.column_index(k) {
                None => self.err(&cpath, no_field(entity, k)),
                Some(c) if c == entity.timestamp_index => {
                    self.err(&cpath, "the timestamp is the emit time; leave it out")
                }
                Some(c) => {
                    let ty = &entity.columns[c].ty;
                    if let Some(problem) = cel_udf::generated_problem(env, expr, ty) {
                        self.err(&cpath, problem);
                    }
                }
            }
        }
        for key in entity.keys() {
            if !generate.columns.contains_key(&*key.name) {
                self.err(
                    format!("{path}.generate.columns"),
                    format!("missing key field `{}`", key.name),
                );
            }
        }
    }
}

/// `entity` has no field `name`, with the closest field suggested.
fn no_field(entity: &Entity, name: &str) -> String {
    format!(
        "entity `{}` has no field `{name}`{}",
        entity.name,
        did_you_mean(name, entity.columns.iter().map(|c| &*c.name))
    )
}
