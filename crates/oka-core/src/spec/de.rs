//! Deserializing the spec's own shapes where they are written, so that every
//! problem keeps its path and line: a name or a mapping (`txn` or `{feature: txn,
//! …}`), and mappings whose names are unique.

use std::fmt;
use std::marker::PhantomData;

use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::{DeserializeSeed, Error, MapAccess, Visitor};

/// A name, or a mapping of `T`.
pub(super) enum Either<T> {
    Name(String),
    Map(T),
}

/// Visits a string as a name and a mapping as a `T`, both where they are in the
/// file (no detour through a YAML value, which would lose the path and line).
pub(super) struct NameOr<T> {
    expecting: &'static str,
    of: PhantomData<T>,
}

impl<T> NameOr<T> {
    pub(super) fn new(expecting: &'static str) -> Self {
        Self {
            expecting,
            of: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for NameOr<T> {
    type Value = Either<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Either::Name(s.to_owned()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Either::Map)
    }
}

/// A mapping whose names are unique. YAML lets a repeated name silently replace
/// the first one; in a spec that is a mistake, reported at the repetition.
pub(super) fn unique<'de, D, V>(d: D) -> Result<IndexMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    d.deserialize_map(Unique(PhantomData))
}

/// [`unique`] for an optional mapping.
pub(super) fn unique_opt<'de, D, V>(d: D) -> Result<Option<IndexMap<String, V>>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    d.deserialize_option(UniqueOpt(PhantomData))
}

struct UniqueOpt<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for UniqueOpt<V> {
    type Value = Option<IndexMap<String, V>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping such as `{name: value}`")
    }

    fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        unique(d).map(Some)
    }
}

struct Unique<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for Unique<V> {
    type Value = IndexMap<String, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping such as `{name: value}`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = IndexMap::new();
        while let Some(name) = map.next_key_seed(NewName(&out))? {
            let value = map.next_value()?;
            out.insert(name, value);
        }
        Ok(out)
    }
}

/// A name not yet in the mapping; the error is raised while the name is read, so
/// that it points at the repetition.
struct NewName<'m, V>(&'m IndexMap<String, V>);

impl<'de, V> DeserializeSeed<'de> for NewName<'_, V> {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_string(self)
    }
}

impl<V> Visitor<'_> for NewName<'_, V> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name")
    }

    fn visit_str<E: Error>(self, s: &str) -> Result<String, E> {
        if self.0.contains_key(s) {
            return Err(E::custom(format!("`{s}` is declared twice")));
        }
        Ok(s.to_owned())
    }
}
