//! Small JSON objects of a request: key objects and argument maps.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value as Json;

/// A JSON object with few fields (a key object, an argument map), parsed into a
/// vector of (name, value) in request order.
///
/// Key objects have one to a few fields and a 100-key request parses a hundred of
/// them, so a map's hashing and allocations were a large part of the parse. A
/// repeated name keeps its last value (as a JSON map would); large objects are
/// deduplicated through a hash index, so a hostile request cannot make parsing
/// quadratic. Equality ignores field order.
#[derive(Debug, Clone)]
pub struct FieldMap<V>(Vec<(String, V)>);

/// A key object: key field name → value.
pub type KeyObject = FieldMap<Json>;

/// Query or UDF arguments: parameter name → value.
pub type ArgMap = FieldMap<Json>;

/// Per-feature argument maps (`query_args`, `udf_args`); `null` stands for none.
pub type ArgMaps = FieldMap<Option<ArgMap>>;

/// Objects with more fields than this are deduplicated through a hash index.
const LINEAR_DEDUP_MAX: usize = 16;

impl<V> Default for FieldMap<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> FieldMap<V> {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&V> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The field names, in request order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// The fields, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<V: PartialEq> PartialEq for FieldMap<V> {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        if self.len() <= LINEAR_DEDUP_MAX {
            return self.iter().all(|(n, v)| other.get(n) == Some(v));
        }
        // Large objects (hostile ones included) compare through a hash index.
        let index: HashMap<&str, &V, foldhash::fast::RandomState> = other.iter().collect();
        self.iter().all(|(n, v)| index.get(n) == Some(&v))
    }
}

impl<V, const N: usize> From<[(&str, V); N]> for FieldMap<V> {
    fn from(fields: [(&str, V); N]) -> Self {
        Self(fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect())
    }
}

/// Fields in order; a repeated name keeps its last value, as when parsed.
impl<V> FromIterator<(String, V)> for FieldMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(fields: I) -> Self {
        let mut out: Vec<(String, V)> = Vec::new();
        for (name, value) in fields {
            match out.iter().position(|(n, _)| *n == name) {
                Some(i) => out[i].1 = value,
                None => out.push((name, value)),
            }
        }
        Self(out)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for FieldMap<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Fields<V> {
            type Value = FieldMap<V>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FieldMap<V>, A::Error> {
                let mut fields: Vec<(String, V)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(1).clamp(1, 8));
                let mut index: Option<HashMap<String, usize, foldhash::fast::RandomState>> = None;
                while let Some(name) = map.next_key::<String>()? {
                    let value: V = map.next_value()?;
                    // A repeated field: the last wins, as in serde_json and Python.
                    let seen = match &index {
                        Some(index) => index.get(&name).copied(),
                        None => fields.iter().position(|(n, _)| *n == name),
                    };
                    match seen {
                        Some(i) => fields[i].1 = value,
                        None => {
                            if let Some(index) = &mut index {
                                index.insert(name.clone(), fields.len());
                            }
                            fields.push((name, value));
                            if index.is_none() && fields.len() > LINEAR_DEDUP_MAX {
                                index = Some(
                                    fields
                                        .iter()
                                        .enumerate()
                                        .map(|(i, (n, _))| (n.clone(), i))
                                        .collect(),
                                );
                            }
                        }
                    }
                }
                Ok(FieldMap(fields))
            }
        }
        d.deserialize_map(Fields(std::marker::PhantomData))
    }
}

/// OpenAPI schemas of a request's map-shaped fields (feature `openapi`): the
/// derive on [`FeatureRequest`](super::FeatureRequest) takes them from here, as
/// [`FieldMap`] parses them.
#[cfg(feature = "openapi")]
pub mod openapi {
    use serde_json::json;
    use utoipa::openapi::schema::{
        AllOfBuilder, AnyOfBuilder, ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat,
        SchemaType, Type,
    };

    use crate::query::MAX_LAST_N;

    fn nullable(t: Type) -> SchemaType {
        SchemaType::Array(vec![t, Type::Null])
    }

    fn map_of(
        nullable_map: bool,
        values: impl Into<utoipa::openapi::RefOr<utoipa::openapi::Schema>>,
    ) -> ObjectBuilder {
        let ty = if nullable_map {
            nullable(Type::Object)
        } else {
            Type::Object.into()
        };
        ObjectBuilder::new()
            .schema_type(ty)
            .additional_properties(Some(values.into()))
    }

    /// A key object: key field name → value, a JSON string or integer as the
    /// entity declares the field.
    pub fn key_object() -> ObjectBuilder {
        map_of(
            false,
            ObjectBuilder::new().schema_type(SchemaType::Array(vec![Type::String, Type::Integer])),
        )
        .description(Some(
            "A key object: key field name → value (a JSON string for a `string` key field, a JSON integer for an `int` one). The order of its fields does not matter.",
        ))
        .examples([json!({"id": "test-id-1"})])
    }

    /// `keys`: one key list for every target without one of its own.
    pub fn keys() -> ArrayBuilder {
        ArrayBuilder::new()
            .schema_type(nullable(Type::Array))
            .items(key_object())
            .description(Some(
                "One key list for every target that has no list of its own in `feature_keys`.",
            ))
    }

    /// `feature_keys`: key lists by feature name.
    pub fn feature_keys() -> ObjectBuilder {
        map_of(true, ArrayBuilder::new().items(key_object())).description(Some(
            "Key lists by feature name (Volga's form): a target uses its own list, else the list given for a feature it depends on, else `keys`.",
        ))
    }

    /// One feature's `query_args`: `start`/`end` (a range) or `n` (the last n),
    /// never both.
    pub fn query_arg_map() -> AllOfBuilder {
        let none = || ObjectBuilder::new().schema_type(Type::Null);
        // No `type`: `properties` constrains objects only, so `null` passes.
        let fields = || ObjectBuilder::new().schema_type(SchemaType::AnyValue);
        let one_kind = AnyOfBuilder::new()
            .item(fields().property("n", none()))
            .item(fields().property("start", none()).property("end", none()))
            .description(Some(
                "`start`/`end` or `n`, not both (a `null` one counts as not given).",
            ));
        AllOfBuilder::new().item(query_arg_fields()).item(one_kind)
    }

    fn query_arg_fields() -> ObjectBuilder {
        let bound = |what: &str| {
            // Epoch seconds as far as microseconds in an i64 reach.
            let secs = 9.2e12;
            AnyOfBuilder::new()
                .item(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
                )
                .item(
                    ObjectBuilder::new()
                        .schema_type(Type::Number)
                        .minimum(Some(-secs))
                        .maximum(Some(secs)),
                )
                .item(ObjectBuilder::new().schema_type(Type::Null))
                .description(Some(format!(
                    "The {what} of a `range` read, inclusive: an RFC 3339 timestamp with its offset, or epoch seconds."
                )))
        };
        ObjectBuilder::new()
            .schema_type(nullable(Type::Object))
            .property("start", bound("start"))
            .property("end", bound("end"))
            .property(
                "n",
                ObjectBuilder::new()
                    .schema_type(nullable(Type::Integer))
                    .minimum(Some(1))
                    .maximum(Some(MAX_LAST_N as f64))
                    .description(Some("How many records a `last_n` read returns.")),
            )
            .additional_properties(Some(
                utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
            ))
    }

    /// `query_args`: storage query parameters by feature name.
    pub fn query_args() -> ObjectBuilder {
        map_of(true, query_arg_map()).description(Some(
            "Storage query parameters by feature name: `start`/`end` for `range` reads, `n` for `last_n` reads. `null` stands for none.",
        ))
    }

    /// `udf_args`: UDF arguments by on-demand feature name.
    pub fn udf_args() -> ObjectBuilder {
        let args = ObjectBuilder::new()
            .schema_type(nullable(Type::Object))
            .additional_properties(Some(ObjectBuilder::new().schema_type(SchemaType::AnyValue)));
        map_of(true, args).description(Some(
            "UDF arguments by on-demand feature name: argument name → value. An absent or `null` argument takes the spec's default.",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_objects_keep_the_last_repeat_and_compare_without_order() {
        let k: KeyObject = serde_json::from_str(r#"{"id": "x", "n": 1, "id": "y"}"#).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("id"), Some(&Json::from("y")));
        assert_eq!(k.keys().collect::<Vec<_>>(), ["id", "n"]);
        let reordered: KeyObject = serde_json::from_str(r#"{"n": 1, "id": "y"}"#).unwrap();
        assert_eq!(k, reordered);
        let other: KeyObject = serde_json::from_str(r#"{"n": 1, "id": "x"}"#).unwrap();
        assert_ne!(k, other);
        assert!(serde_json::from_str::<KeyObject>(r#"["id"]"#).is_err());
    }

    #[test]
    fn large_objects_dedupe_through_the_index() {
        // 40 distinct fields, then every one of them again: past the linear limit.
        let fields: Vec<String> = (0..40)
            .map(|i| format!(r#""f{i}": {i}"#))
            .chain((0..40).map(|i| format!(r#""f{i}": {}"#, i + 100)))
            .collect();
        let m: ArgMap = serde_json::from_str(&format!("{{{}}}", fields.join(","))).unwrap();
        assert_eq!(m.len(), 40);
        assert_eq!(m.keys().nth(39), Some("f39"));
        assert_eq!(m.get("f0"), Some(&Json::from(100)));
        assert_eq!(m.get("f39"), Some(&Json::from(139)));

        // Equality of large objects ignores order too (through the index).
        let reversed: Vec<String> = (0..40)
            .rev()
            .map(|i| format!(r#""f{i}": {}"#, i + 100))
            .collect();
        let r: ArgMap = serde_json::from_str(&format!("{{{}}}", reversed.join(","))).unwrap();
        assert_eq!(m, r);
        let changed = format!(
            "{{{}}}",
            reversed.join(",").replace(r#""f7": 107"#, r#""f7": 7"#)
        );
        assert_ne!(m, serde_json::from_str::<ArgMap>(&changed).unwrap());
    }
}
