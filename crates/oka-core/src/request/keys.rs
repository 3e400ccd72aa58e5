//! A group's key objects, parsed and validated once per entity: the storage keys of
//! the entities read, the key values of the entities returned.

use std::sync::Arc;

use serde_json::Value as Json;

use super::{KeyList, KeyValue, KeyValues, err};
use crate::error::{ErrorCode, RequestError};
use crate::key::{EntityKey, KEY_SEPARATOR, needs_key_escape, push_key_int, push_key_str};
use crate::registry::{Column, Entity};
use crate::value::{FieldType, Value};

/// A group's key objects, parsed once per entity.
pub(super) struct ParsedKeys<'r>(pub(super) smallvec::SmallVec<[EntityKeys<'r>; 2]>);

impl ParsedKeys<'_> {
    fn get(&self, entity: &Arc<Entity>) -> Result<&EntityKeys<'_>, RequestError> {
        self.0
            .iter()
            .find(|p| Arc::ptr_eq(p.entity, entity))
            .ok_or_else(|| err(ErrorCode::Internal, "an entity's keys were not parsed"))
    }

    /// The canonical storage keys of an entity the group reads.
    pub(super) fn canonical(&self, entity: &Arc<Entity>) -> Result<Arc<[EntityKey]>, RequestError> {
        self.get(entity)?
            .canonical
            .clone()
            .ok_or_else(|| err(ErrorCode::Internal, "no storage keys for an entity read"))
    }

    /// The key field values of an entity the group returns.
    pub(super) fn values(&self, entity: &Arc<Entity>) -> Result<KeyValues, RequestError> {
        self.get(entity)?
            .values
            .clone()
            .ok_or_else(|| err(ErrorCode::Internal, "no key values for an entity returned"))
    }
}

/// How a group uses an entity's keys.
#[derive(Debug, Clone, Copy)]
pub(super) struct Use {
    /// A pipeline feature of the entity is read: its key fields are required, and
    /// make the storage keys.
    pub(super) read: bool,
    /// An on-demand feature returns records of the entity: its UDF sees the key's
    /// values.
    pub(super) returned: bool,
}

impl Use {
    pub(super) const READ: Self = Self {
        read: true,
        returned: false,
    };
    pub(super) const RETURNED: Self = Self {
        read: false,
        returned: true,
    };
}

/// The key objects read against one entity's key fields.
pub(super) struct EntityKeys<'r> {
    entity: &'r Arc<Entity>,
    /// Per key, the key fields' values in the entity's key order (entities the
    /// group returns).
    values: Option<KeyValues>,
    /// Per key, the canonical storage key (entities the group reads).
    canonical: Option<Arc<[EntityKey]>>,
}

impl<'r> EntityKeys<'r> {
    /// Parses every key object's fields of `entity`, once, into what the group's
    /// use of it needs: a field must have the entity's type; a missing field is an
    /// error for an entity that is read, and `Null` for one that only names an
    /// on-demand output's key.
    pub(super) fn parse(
        entity: &'r Arc<Entity>,
        keys: &KeyList,
        used: Use,
    ) -> Result<Self, RequestError> {
        let required = used.read;
        let width = entity.key_index.len();
        let mut values = Vec::with_capacity(if used.returned { keys.len() * width } else { 0 });
        let mut canonical = Vec::with_capacity(if required { keys.len() } else { 0 });
        let mut buf = String::new();
        // One string key field (most entities): a key object of just that field
        // takes the short way below.
        let mut columns = entity.keys();
        let single = match (columns.next(), columns.next()) {
            (Some(c), None) if c.ty == FieldType::String => keys.name_id(&c.name),
            _ => None,
        };
        for (i, k) in keys.iter().enumerate() {
            if let (Some(name), [(field, KeyValue::String(s))]) = (single, k.fields())
                && *field == name
            {
                if required {
                    canonical.push(string_key(s));
                }
                if used.returned {
                    values.push(Value::String(Arc::clone(s)));
                }
                continue;
            }
            buf.clear();
            for (p, c) in entity.keys().enumerate() {
                if p > 0 {
                    buf.push(KEY_SEPARATOR);
                }
                let Some(j) = k.get(&c.name) else {
                    if required {
                        return Err(err(
                            ErrorCode::InvalidKey,
                            format!(
                                "key {i} lacks field `{}` of entity `{}`",
                                c.name, entity.name
                            ),
                        ));
                    }
                    if used.returned {
                        values.push(Value::Null);
                    }
                    continue;
                };
                let v = key_field(i, c, j, required.then_some(&mut buf), used.returned)?;
                values.extend(v);
            }
            if required {
                // One string field that needs no escaping: its text is the
                // storage key, shared rather than copied.
                let shared = match k.iter().next() {
                    Some((_, KeyValue::String(s))) if k.len() == 1 && **s == *buf => {
                        Some(Arc::clone(s))
                    }
                    _ => None,
                };
                canonical.push(match shared {
                    Some(s) => EntityKey::from_canonical(s),
                    None => EntityKey::from_canonical(buf.as_str()),
                });
            }
        }
        Ok(Self {
            entity,
            values: used.returned.then(|| KeyValues::new(width, values)),
            canonical: required.then(|| canonical.into()),
        })
    }
}

/// The storage key of a one-field string key `s`: its text, shared rather than
/// copied, unless it has a character to escape.
fn string_key(s: &Arc<str>) -> EntityKey {
    if needs_key_escape(s) {
        let mut buf = String::with_capacity(s.len() + 2);
        push_key_str(&mut buf, s);
        EntityKey::from_canonical(buf)
    } else {
        EntityKey::from_canonical(Arc::clone(s))
    }
}

/// One key field of key object `i`, checked against its column's type; its
/// canonical form is appended to `canonical` when given, and its value returned
/// when `value` asks for it.
fn key_field(
    i: usize,
    c: &Column,
    j: &KeyValue,
    canonical: Option<&mut String>,
    value: bool,
) -> Result<Option<Value>, RequestError> {
    match (&c.ty, j) {
        (FieldType::String, KeyValue::String(s)) => {
            if let Some(buf) = canonical {
                push_key_str(buf, s);
            }
            Ok(value.then(|| Value::String(Arc::clone(s))))
        }
        (FieldType::Int, KeyValue::Int(n)) => {
            if let Some(buf) = canonical {
                push_key_int(buf, *n);
            }
            Ok(value.then_some(Value::Int(*n)))
        }
        (FieldType::Int, KeyValue::Other(Json::Number(n))) if n.is_u64() => Err(err(
            ErrorCode::InvalidKey,
            format!("key {i}: field `{}` is out of the int range", c.name),
        )),
        _ => Err(err(
            ErrorCode::InvalidKey,
            format!(
                "key {i}: field `{}` must be {}, got {}",
                c.name,
                c.ty,
                j.kind()
            ),
        )),
    }
}
