//! Key lists: the key objects of a request (`keys`, each `feature_keys` entry),
//! with their field names in one table per list.

use std::sync::Arc;

use compact_str::CompactString;
use serde::Deserialize;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess};
use serde_json::Value as Json;
use smallvec::SmallVec;

use super::fields::{LINEAR_DEDUP_MAX, NameIndex, same_fields};

mod template;

pub use template::ObjectTemplate;

/// A key list: the key objects of `keys` or of one `feature_keys` entry.
///
/// A 100-key request parses a hundred key objects of one or two fields, mostly the
/// same names: the list keeps every object's fields in one vector, each naming its
/// field by its place in one table of the distinct names, so a name is compared
/// with the entity's key fields once per list, not once per key. Within an object
/// a repeated name keeps its last value (as a JSON map would), and two lists are
/// equal when their objects are, each in any field order.
#[derive(Debug, Clone, Default)]
pub struct KeyList {
    /// The distinct field names, in the order first seen (most lists have one or
    /// two: kept in place).
    names: SmallVec<[CompactString; 2]>,
    /// The names' places in `names`, by name, once there are more than
    /// [`LINEAR_DEDUP_MAX`] of them (a hostile list of many names stays linear).
    index: Option<NameIndex<CompactString>>,
    /// The fields of every key object, object after object: (name, value).
    fields: Vec<(NameId, KeyValue)>,
    /// Where each key object's fields end in `fields`.
    ends: Vec<usize>,
    /// Per name, the last object that set it and the field's place in `fields`:
    /// a repeat within an object is found without a scan.
    seen: SmallVec<[(usize, usize); 2]>,
}

/// A field name of a [`KeyList`]: its place in the list's table of names
/// ([`KeyList::names`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameId(u32);

impl NameId {
    /// The place in [`KeyList::names`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One key object of a [`KeyList`]: key field name → value.
#[derive(Debug, Clone, Copy)]
pub struct KeyObject<'a> {
    names: &'a [CompactString],
    fields: &'a [(NameId, KeyValue)],
}

impl<'a> KeyObject<'a> {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&'a KeyValue> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The field names, in request order.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        self.iter().map(|(n, _)| n)
    }

    /// The fields, in request order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a KeyValue)> + use<'a> {
        let names = self.names;
        (self.fields.iter()).map(move |(n, v)| (names.get(n.index()).map_or("", |n| n.as_str()), v))
    }

    /// The fields by name id (see [`KeyList::names`]), in request order.
    pub fn fields(&self) -> &'a [(NameId, KeyValue)] {
        self.fields
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

impl PartialEq for KeyObject<'_> {
    fn eq(&self, other: &Self) -> bool {
        let a: Vec<(&str, &KeyValue)> = self.iter().collect();
        let b: Vec<(&str, &KeyValue)> = other.iter().collect();
        same_fields(&a, &b)
    }
}

impl KeyList {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            names: SmallVec::new_const(),
            index: None,
            fields: Vec::new(),
            ends: Vec::new(),
            seen: SmallVec::new_const(),
        }
    }

    /// How many key objects.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no key objects.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Whether no key value is a JSON array or object: the list nests no
    /// deeper than its objects (a list parsed apart from its body, as a
    /// [template](crate::json::template)'s is, has one more level of
    /// serde_json's nesting limit to spend than it had within the body).
    pub fn is_flat(&self) -> bool {
        (self.fields.iter())
            .all(|(_, v)| !matches!(v, KeyValue::Other(Json::Array(_) | Json::Object(_))))
    }

    /// The distinct field names of all key objects, each at its [`NameId`]'s place.
    pub fn names(&self) -> &[CompactString] {
        &self.names
    }

    /// The id of field name `name`, if a key object has it.
    pub fn name_id(&self, name: &str) -> Option<NameId> {
        self.find_name(name)
    }

    /// Key object `i`.
    pub fn get(&self, i: usize) -> Option<KeyObject<'_>> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        Some(KeyObject {
            names: &self.names,
            fields: &self.fields[start..end],
        })
    }

    /// The key objects, in request order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = KeyObject<'_>> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let fields = &self.fields[start..end];
            start = end;
            KeyObject {
                names: &self.names,
                fields,
            }
        })
    }

    /// Appends a key object of `fields` (a repeated name keeps its last value).
    pub fn push<N: AsRef<str>>(&mut self, fields: impl IntoIterator<Item = (N, KeyValue)>) {
        for (name, value) in fields {
            let id = self.intern(name.as_ref());
            self.set(id, value);
        }
        self.ends.push(self.fields.len());
    }

    /// The key objects at `which`, in that order (with only their names).
    pub fn select(&self, which: &[usize]) -> Self {
        let mut out = Self::new();
        for k in which.iter().filter_map(|&i| self.get(i)) {
            out.push(k.iter().map(|(n, v)| (n, v.clone())));
        }
        out
    }

    /// An empty list with room for `hint` one-field objects (at least the
    /// four a vector's first growth gives, at most [`MAX_LEN_HINT`]), made
    /// with the room: a vector's growth from empty costs a 1-key request
    /// more than its allocation.
    fn with_room(hint: usize) -> Self {
        let room = hint.clamp(4, MAX_LEN_HINT);
        Self {
            fields: Vec::with_capacity(room),
            ends: Vec::with_capacity(room),
            ..Self::new()
        }
    }

    /// An empty list with the room of the last list this thread parsed
    /// ([`LAST_LEN`]).
    fn with_last_room() -> Self {
        Self::with_room(LAST_LEN.get())
    }

    /// The list, parsed: its length is the room the next one starts with.
    fn parsed(self) -> Self {
        LAST_LEN.set(self.len());
        self
    }

    /// Appends a key object of one field, `id` (interned) = `value`.
    fn push_one(&mut self, id: NameId, value: KeyValue) {
        if let Some(seen) = self.seen.get_mut(id.index()) {
            *seen = (self.ends.len(), self.fields.len());
        }
        self.fields.push((id, value));
        self.ends.push(self.fields.len());
    }

    fn find_name(&self, name: &str) -> Option<NameId> {
        let i = match &self.index {
            Some(index) => *index.get(name)?,
            None => self.names.iter().position(|n| n == name)?,
        };
        Some(NameId(i as u32))
    }

    /// The id of `name`, added to the table if new.
    fn intern(&mut self, name: &str) -> NameId {
        if let Some(id) = self.find_name(name) {
            return id;
        }
        let id = NameId(self.names.len() as u32);
        let name = CompactString::from(name);
        if let Some(index) = &mut self.index {
            index.insert(name.clone(), id.index());
        }
        self.names.push(name);
        self.seen.push((usize::MAX, 0));
        if self.index.is_none() && self.names.len() > LINEAR_DEDUP_MAX {
            self.index = Some((self.names.iter().cloned()).zip(0..).collect());
        }
        id
    }

    /// Sets field `id` of the key object being built (the one after the last
    /// end): a repeat keeps its last value, in the place of the first.
    fn set(&mut self, id: NameId, value: KeyValue) {
        let object = self.ends.len();
        let Some(seen) = self.seen.get_mut(id.index()) else {
            return;
        };
        if seen.0 == object
            && let Some(field) = self.fields.get_mut(seen.1)
        {
            field.1 = value;
            return;
        }
        *seen = (object, self.fields.len());
        self.fields.push((id, value));
    }
}

impl PartialEq for KeyList {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl<'de> Deserialize<'de> for KeyList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Reads a field name into the list's table: its id.
        struct Name<'l>(&'l mut KeyList);
        impl<'de> DeserializeSeed<'de> for Name<'_> {
            type Value = NameId;
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<NameId, D::Error> {
                d.deserialize_str(self)
            }
        }
        impl<'de> serde::de::Visitor<'de> for Name<'_> {
            type Value = NameId;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key field name")
            }
            fn visit_str<E>(self, name: &str) -> Result<NameId, E> {
                Ok(self.0.intern(name))
            }
        }
        /// Parses one key object onto the end of the list.
        struct Object<'l>(&'l mut KeyList);
        impl<'de> DeserializeSeed<'de> for Object<'_> {
            type Value = ();
            fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_map(self)
            }
        }
        impl<'de> serde::de::Visitor<'de> for Object<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                let list = self.0;
                while let Some(id) = map.next_key_seed(Name(list))? {
                    let value: KeyValue = map.next_value()?;
                    list.set(id, value);
                }
                list.ends.push(list.fields.len());
                Ok(())
            }
        }
        struct List;
        impl<'de> serde::de::Visitor<'de> for List {
            type Value = KeyList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of key objects")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyList, A::Error> {
                // JSON does not say how long a list is: the room is this
                // thread's last list's length (a model server sends batches
                // of about one size), so a list of 100 keys is not grown six
                // times as it parses.
                let mut list = match seq.size_hint() {
                    Some(hint) => KeyList::with_room(hint),
                    None => KeyList::with_last_room(),
                };
                while seq.next_element_seed(Object(&mut list))?.is_some() {}
                Ok(list.parsed())
            }
        }
        d.deserialize_seq(List)
    }
}

thread_local! {
    /// The length of the last key list this thread parsed: the room the next
    /// one starts with.
    static LAST_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most room a key list starts with from [`LAST_LEN`] (one hostile list
/// must not make every later one start large).
const MAX_LEN_HINT: usize = 1024;

/// A key object's field as sent: a string or an integer (the types key fields
/// have), parsed without a JSON tree; any other JSON value is kept whole, for the
/// error that names its kind.
///
/// A string is shared, not copied, by the storage key and the key value a UDF
/// sees, so a key costs one allocation from the body to the store.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    /// A JSON string.
    String(Arc<str>),
    /// A JSON integer within `i64`.
    Int(i64),
    /// Any other JSON value (an integer beyond `i64` included).
    Other(Json),
}

impl KeyValue {
    /// The value's JSON kind, for messages (as [`json_kind`](crate::value::json_kind)).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::String(_) => "string",
            Self::Int(_) => "int",
            Self::Other(j) => crate::value::json_kind(j),
        }
    }
}

impl From<Json> for KeyValue {
    fn from(j: Json) -> Self {
        match j {
            Json::String(s) => Self::String(s.into()),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Self::Int(i),
                None => Self::Other(Json::Number(n)),
            },
            other => Self::Other(other),
        }
    }
}

impl<'de> Deserialize<'de> for KeyValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = KeyValue;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<KeyValue, E> {
                Ok(KeyValue::String(s.into()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<KeyValue, E> {
                Ok(KeyValue::Int(n))
            }
            fn visit_u64<E>(self, n: u64) -> Result<KeyValue, E> {
                Ok(i64::try_from(n).map_or(KeyValue::Other(Json::from(n)), KeyValue::Int))
            }
            fn visit_f64<E>(self, n: f64) -> Result<KeyValue, E> {
                Ok(KeyValue::Other(Json::from(n)))
            }
            fn visit_bool<E>(self, b: bool) -> Result<KeyValue, E> {
                Ok(KeyValue::Other(Json::Bool(b)))
            }
            fn visit_unit<E>(self) -> Result<KeyValue, E> {
                Ok(KeyValue::Other(Json::Null))
            }
            fn visit_none<E>(self) -> Result<KeyValue, E> {
                Ok(KeyValue::Other(Json::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<KeyValue, A::Error> {
                Json::deserialize(SeqAccessDeserializer::new(seq)).map(KeyValue::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<KeyValue, A::Error> {
                Json::deserialize(MapAccessDeserializer::new(map)).map(KeyValue::Other)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_list(json: &str) -> KeyList {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_list_starts_with_the_last_ones_room_at_most_a_bound() {
        let list_of = |n: usize| {
            let keys: Vec<String> = (0..n).map(|i| format!(r#"{{"id":"k{i}"}}"#)).collect();
            key_list(&format!("[{}]", keys.join(",")))
        };
        let big = list_of(5_000);
        assert_eq!(big.len(), 5_000);
        // The next list starts with room for at most MAX_LEN_HINT keys, and is
        // its own keys only.
        let next = list_of(3);
        assert!(
            next.fields.capacity() <= MAX_LEN_HINT,
            "{}",
            next.fields.capacity()
        );
        assert_eq!(next.len(), 3);
        let ids: Vec<_> = next.iter().map(|k| k.get("id").cloned()).collect();
        assert_eq!(
            ids,
            ["k0", "k1", "k2"].map(|s| Some(KeyValue::String(s.into())))
        );
        // A list the length of the last starts with room for all of it.
        let again = list_of(100);
        let room = list_of(100);
        assert_eq!(again, room);
        assert!(room.fields.capacity() >= 100);
    }

    #[test]
    fn key_objects_keep_the_last_repeat_and_compare_without_order() {
        let l = key_list(r#"[{"id": "x", "n": 1, "id": "y"}, {"id": "z"}, {}]"#);
        assert_eq!(l.len(), 3);
        let k = l.get(0).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("id"), Some(&KeyValue::String("y".into())));
        assert_eq!(k.get("n"), Some(&KeyValue::Int(1)));
        assert_eq!(k.keys().collect::<Vec<_>>(), ["id", "n"]);
        // Each object has its own fields: a name repeated in the next is not a repeat.
        assert_eq!(l.get(1).unwrap().keys().collect::<Vec<_>>(), ["id"]);
        assert!(l.get(2).unwrap().is_empty());
        assert!(l.get(3).is_none());
        assert_eq!(l.iter().map(|k| k.len()).collect::<Vec<_>>(), [2, 1, 0]);

        let reordered = key_list(r#"[{"n": 1, "id": "y"}, {"id": "z"}, {}]"#);
        assert_eq!(l, reordered);
        assert_ne!(l, key_list(r#"[{"n": 1, "id": "x"}, {"id": "z"}, {}]"#));
        assert_ne!(l, key_list(r#"[{"n": 1, "id": "y"}, {"id": "z"}]"#));
        assert_eq!(
            l.select(&[1, 0]),
            key_list(r#"[{"id": "z"}, {"id": "y", "n": 1}]"#)
        );

        let mut pushed = KeyList::new();
        pushed.push([
            ("n", KeyValue::Int(1)),
            ("id", KeyValue::String("x".into())),
        ]);
        pushed.push([("id", KeyValue::String("z".into()))]);
        pushed.push(std::iter::empty::<(&str, KeyValue)>());
        pushed.push([("id", KeyValue::String("y".into()))]);
        assert_ne!(l, pushed);
        assert_eq!(pushed.select(&[1, 2]), l.select(&[1, 2]));
        assert_ne!(pushed.select(&[0]), l.select(&[0]));
        assert_eq!(pushed.select(&[9]), KeyList::new());

        for bad in [r#"["id"]"#, r#"{"id": "x"}"#, r#"[{"id": "x"}, 3]"#, "[{]"] {
            assert!(serde_json::from_str::<KeyList>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_values_keep_strings_and_integers_and_name_any_other_kind() {
        let l = key_list(
            r#"[{"s": "a\"b", "i": -7, "u": 9223372036854775807, "big": 9223372036854775808,
                "f": 1.0, "n": null, "b": false, "l": [1, {"x": 2}], "o": {"y": [3]}}]"#,
        );
        let k = l.get(0).unwrap();
        assert_eq!(k.get("s"), Some(&KeyValue::String("a\"b".into())));
        assert_eq!(k.get("i"), Some(&KeyValue::Int(-7)));
        assert_eq!(k.get("u"), Some(&KeyValue::Int(i64::MAX)));
        let kinds: Vec<&str> = k.iter().map(|(_, v)| v.kind()).collect();
        assert_eq!(
            kinds,
            [
                "string", "int", "int", "int", "float", "null", "bool", "list", "object"
            ]
        );
        assert_eq!(
            k.get("big"),
            Some(&KeyValue::Other(Json::from(9_223_372_036_854_775_808u64)))
        );
        assert_eq!(
            k.get("l"),
            Some(&KeyValue::Other(serde_json::json!([1, {"x": 2}])))
        );
        assert_eq!(
            k.get("o"),
            Some(&KeyValue::Other(serde_json::json!({"y": [3]})))
        );
        assert_eq!(
            KeyValue::from(serde_json::json!("x")),
            KeyValue::String("x".into())
        );
        assert_eq!(KeyValue::from(serde_json::json!(-3)), KeyValue::Int(-3));
        assert_eq!(KeyValue::from(serde_json::json!(2.5)).kind(), "float");
        // A long name and a long value are kept whole.
        let long = "n".repeat(100);
        let l = key_list(&format!(r#"[{{"{long}": "{long}"}}]"#));
        let k = l.get(0).unwrap();
        assert_eq!(k.get(&long), Some(&KeyValue::String(long.as_str().into())));
    }

    #[test]
    fn large_key_objects_dedupe_through_the_index_each_on_its_own() {
        // Two objects of 40 distinct fields, each then repeated: past the linear
        // limit, so through the index, which must count from each object's start.
        let object = |base: i64| {
            let fields: Vec<String> = (0..40)
                .map(|i| format!(r#""f{i}": {i}"#))
                .chain((0..40).map(|i| format!(r#""f{i}": {}"#, i + base)))
                .collect();
            format!("{{{}}}", fields.join(","))
        };
        let l = key_list(&format!("[{}, {}]", object(100), object(200)));
        for (k, base) in l.iter().zip([100, 200]) {
            assert_eq!(k.len(), 40);
            assert_eq!(k.keys().nth(39), Some("f39"));
            assert_eq!(k.get("f0"), Some(&KeyValue::Int(base)));
            assert_eq!(k.get("f39"), Some(&KeyValue::Int(39 + base)));
        }
        assert_ne!(l.get(0), l.get(1));
        let reversed: Vec<String> = (0..40)
            .rev()
            .map(|i| format!(r#""f{i}": {}"#, i + 100))
            .collect();
        let r = key_list(&format!("[{{{}}}]", reversed.join(",")));
        assert_eq!(l.get(0), r.get(0));
    }
}
