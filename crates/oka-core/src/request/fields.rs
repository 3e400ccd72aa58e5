//! Small JSON objects of a request: argument maps, and what key lists
//! ([`super::key_list`]) share with them: the repeat rule, order-free equality.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use serde::Deserialize;
use serde::de::MapAccess;
use serde_json::Value as Json;

/// A JSON object with few fields (an argument map), parsed into a vector of
/// (name, value) in request order.
///
/// A repeated name keeps its last value (as a JSON map would); large objects are
/// deduplicated through a hash index, so a hostile request cannot make parsing
/// quadratic. Equality ignores field order.
#[derive(Debug, Clone)]
pub struct FieldMap<V>(Vec<(String, V)>);

/// Query or UDF arguments: parameter name → value.
pub type ArgMap = FieldMap<Json>;

/// Per-feature argument maps (`query_args`, `udf_args`); `null` stands for none.
pub type ArgMaps = FieldMap<Option<ArgMap>>;

/// Objects with more fields than this are deduplicated through a hash index.
pub(super) const LINEAR_DEDUP_MAX: usize = 16;

/// The hash index of a large object's field names: name → place.
pub(super) type NameIndex<N> = HashMap<N, usize, foldhash::fast::RandomState>;

/// Sets field `name` of the object `fields[start..]`: a repeated name keeps its
/// last value, as in serde_json and Python. Past [`LINEAR_DEDUP_MAX`] fields the
/// names are found through `index` (built here), not by a scan.
fn upsert<N: Eq + Hash + Clone + Borrow<str>, V>(
    fields: &mut Vec<(N, V)>,
    start: usize,
    index: &mut Option<NameIndex<N>>,
    name: N,
    value: V,
) {
    let seen = match index {
        Some(index) => index.get(name.borrow()).map(|i| start + i),
        None => fields[start..]
            .iter()
            .position(|(n, _)| n.borrow() == name.borrow())
            .map(|i| start + i),
    };
    if let Some(i) = seen {
        fields[i].1 = value;
        return;
    }
    if let Some(index) = index {
        index.insert(name.clone(), fields.len() - start);
    }
    fields.push((name, value));
    if index.is_none() && fields.len() - start > LINEAR_DEDUP_MAX {
        *index = Some(
            fields[start..]
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (n.clone(), i))
                .collect(),
        );
    }
}

/// Whether two objects have the same fields, in any order.
pub(super) fn same_fields<N: Borrow<str>, V: PartialEq>(a: &[(N, V)], b: &[(N, V)]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let get = |name: &str| b.iter().find(|(n, _)| n.borrow() == name).map(|(_, v)| v);
    if a.len() <= LINEAR_DEDUP_MAX {
        return a.iter().all(|(n, v)| get(n.borrow()) == Some(v));
    }
    // Large objects (hostile ones included) compare through a hash index.
    let index: HashMap<&str, &V, foldhash::fast::RandomState> =
        b.iter().map(|(n, v)| (n.borrow(), v)).collect();
    a.iter().all(|(n, v)| index.get(n.borrow()) == Some(&v))
}

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
        same_fields(&self.0, &other.0)
    }
}

impl<V, const N: usize> From<[(&str, V); N]> for FieldMap<V> {
    fn from(fields: [(&str, V); N]) -> Self {
        fields.into_iter().map(|(n, v)| (n.to_owned(), v)).collect()
    }
}

/// Fields in order; a repeated name keeps its last value, as when parsed.
impl<V> FromIterator<(String, V)> for FieldMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(fields: I) -> Self {
        let mut out = Vec::new();
        let mut index = None;
        for (name, value) in fields {
            upsert(&mut out, 0, &mut index, name, value);
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

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FieldMap<V>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(1).clamp(1, 8));
                let mut index = None;
                while let Some(name) = map.next_key::<String>()? {
                    let value: V = map.next_value()?;
                    upsert(&mut fields, 0, &mut index, name, value);
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
