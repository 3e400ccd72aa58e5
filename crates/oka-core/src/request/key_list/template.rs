//! Key lists of one-field objects parsed around their values: a model server's
//! list of a hundred `{"id": "…"}` objects has the same bytes around each
//! value, so only the values are parsed, and the bytes around them compared.
//!
//! The rule is a body's [template](crate::json::template)'s, one level down:
//! an object that is the template's bytes before its value, one JSON value,
//! and the template's bytes after it parses as the template's object with that
//! value (the parser meets the value in the state the template's object left
//! it in, and a complete value leaves it where that one did). A list is `[`,
//! such objects joined by the bytes that joined the template list's first two
//! (a comma, perhaps with whitespace), and `]`, with no other bytes; anything
//! else is not parsed here, and its caller parses it whole. All parsing is
//! serde_json's.

use std::fmt;

use compact_str::CompactString;
use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{KeyList, KeyValue};
use crate::json::template::{first_value, only_field};

/// The bytes around the value of a key list's objects, each one field of one
/// name, and between the objects: for `[{"id": "a"}, {"id": "b"}]`, `{"id": `,
/// `}` and `, `.
#[derive(Debug, Clone)]
pub struct ObjectTemplate {
    /// The field's name, as parsed.
    name: CompactString,
    /// An object's bytes before its value.
    before: Box<str>,
    /// The bytes from one object's value to the next's: the bytes after a
    /// value, those between two objects (a comma, perhaps with whitespace),
    /// and those before a value, compared at once.
    next: Box<str>,
    /// The bytes after the last object's value: those after a value, and `]`.
    last: Box<str>,
}

impl ObjectTemplate {
    /// A template of more bytes than this (around an object's value and
    /// between two objects) is not kept.
    pub const MAX_BYTES: usize = 256;

    /// The template of `list`, which `text` parsed to, when each of its objects
    /// is one field of one name, and the template parses `text` to `list`
    /// again; `None` otherwise.
    pub fn learn(text: &str, list: &KeyList) -> Option<Self> {
        let [name] = list.names() else {
            return None;
        };
        if list.iter().any(|object| object.len() != 1) {
            return None;
        }
        let (object, second) = first_elements(text)?;
        let offset = |inner: &str| inner.as_ptr().addr().checked_sub(text.as_ptr().addr());
        let start = offset(object)?;
        if start != 1 || !text.starts_with('[') {
            return None;
        }
        let between = match second {
            Some(second) => text.get(start + object.len()..offset(second)?)?,
            None => ",",
        };
        // The object's one field, counted as sent: a repeated name, which
        // keeps its last value, is not one field.
        let (_, value) = only_field(object)?;
        let (before, after) = (object.get(..value.start)?, object.get(value.end..)?);
        if before.len() + after.len() + between.len() > Self::MAX_BYTES {
            return None;
        }
        let template = Self {
            name: name.clone(),
            before: before.into(),
            next: [after, between, before].concat().into(),
            last: [after, "]"].concat().into(),
        };
        (template.parse(text).as_ref() == Some(list)).then_some(template)
    }

    /// `text` parsed as a list of this template's objects; `None` when it is
    /// not one, or when a value is not a JSON string or integer (the caller
    /// parses it whole: there an array's or object's nesting counts the
    /// levels around it, and any other kind is refused by the key's check).
    pub fn parse(&self, text: &str) -> Option<KeyList> {
        let mut rest = text.strip_prefix('[')?.strip_prefix(&*self.before)?;
        let mut list = KeyList::with_last_room();
        let id = list.intern(&self.name);
        loop {
            let (value, after) = first_value::<KeyValue>(rest)?;
            if matches!(value, KeyValue::Other(_)) {
                return None;
            }
            list.push_one(id, value);
            // One comparison from a value to the next one's start.
            match after.strip_prefix(&*self.next) {
                Some(next) => rest = next,
                None => return (after == &*self.last).then(|| list.parsed()),
            }
        }
    }
}

/// The first element of the JSON list `text` and its second, if any, as
/// their own bytes; `None` for an empty list or not a list.
fn first_elements(text: &str) -> Option<(&str, Option<&str>)> {
    type Two<'de> = (Option<&'de RawValue>, Option<&'de RawValue>);
    struct First;
    impl<'de> Visitor<'de> for First {
        type Value = Two<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element()?;
            let second = seq.next_element()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok((first, second))
        }
    }
    struct List;
    impl<'de> DeserializeSeed<'de> for List {
        type Value = Two<'de>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(First)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let (first, second) = List.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some((first?.get(), second.map(RawValue::get)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn whole(text: &str) -> Result<KeyList, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The template learned from `learned`, and `text` through it or, where it
    /// does not fit, parsed whole: always what parsing it whole gives.
    fn both(learned: &str, text: &str) -> (Option<KeyList>, Result<KeyList, String>) {
        let template = ObjectTemplate::learn(learned, &whole(learned).unwrap()).unwrap();
        let fast = template.parse(text);
        let whole = whole(text);
        if let Some(fast) = &fast {
            assert_eq!(Ok(fast), whole.as_ref(), "{text}");
        }
        (fast, whole)
    }

    #[test]
    fn a_list_of_the_templates_objects_parses_as_a_whole_one() {
        let learned = r#"[{"id":"test-id-1"},{"id":"test-id-2"}]"#;
        for fits in [
            r#"[{"id":"test-id-7"}]"#,
            r#"[{"id":"x"},{"id":"a\"b\\c\u00e9"},{"id":""},{"id":12},{"id":-3}]"#,
            r#"[{"id": "spaced before"},{"id":9223372036854775807}]"#,
            r#"[{"id":"x"},{"id":"x"}]"#,
        ] {
            let (fast, _) = both(learned, fits);
            assert!(fast.is_some(), "{fits}");
        }
        for parsed_whole in [
            "[]",
            r#"[{"id":"x"} ]"#,
            r#"[{"id":"x"}, {"id":"y"}]"#,
            r#"[{"id":"x"},{"id":"y"},]"#,
            r#"[{"id":"x"},,{"id":"y"}]"#,
            r#"[{"id":"x","id":"y"}]"#,
            r#"[{"id":"x"},{"id":"y","n":1}]"#,
            r#"[{"id":"x"},{"id":"y"}"#,
            r#"[{"id":"x"},{"id":"y"}]]"#,
            r#"[{"id":"x"},{"id":"y"}] "#,
            r#"[{"id":"x" }]"#,
            r#"[{"id":"x""y"}]"#,
            r#"[{"id":}]"#,
            r#"[{"id":"x}]"#,
            r#"[{"id":12a}]"#,
            r#"[{"id":null},{"id":1.5},{"id":true},{"id":18446744073709551616}]"#,
            r#"[{"id":[1]}]"#,
            r#"[{"id":{"a":1}}]"#,
            r#"[{"ID":"x"}]"#,
            r#"[{"i\u0064":"x"}]"#,
            "[{\"id\":\"\u{1}\"}]",
        ] {
            let (fast, _) = both(learned, parsed_whole);
            assert!(fast.is_none(), "{parsed_whole}");
        }
        // Python's `json.dumps` joins by `, ` and writes `": "`.
        let python = r#"[{"id": "a"}, {"id": "b"}]"#;
        assert!(
            both(python, r#"[{"id": "x"}, {"id": 12}, {"id": "z"}]"#)
                .0
                .is_some()
        );
        assert!(both(python, r#"[{"id": "x"}]"#).0.is_some());
        assert!(both(python, r#"[{"id": "x"},{"id": "y"}]"#).0.is_none());
        assert!(both(python, r#"[{"id":"x"}]"#).0.is_none());
    }

    #[test]
    fn a_template_is_learned_only_from_one_field_objects_it_parses_back() {
        let learn = |text: &str| ObjectTemplate::learn(text, &whole(text).unwrap());
        let t = learn(r#"[{ "k" : 1 } ,  { "k" : 2 }]"#).unwrap();
        assert_eq!(
            (&*t.before, &*t.next, &*t.last),
            (r#"{ "k" : "#, r#" } ,  { "k" : "#, " }]")
        );
        // Python's `json.dumps`, and a list of one (joined by a comma).
        let python = r#"[{"id": "a"}, {"id": "b"}, {"id": 3}]"#;
        assert_eq!(
            learn(python).unwrap().parse(python).unwrap(),
            whole(python).unwrap()
        );
        assert_eq!(&*learn(r#"[{"id": "a"}]"#).unwrap().next, r#"},{"id": "#);
        // The name as parsed, the bytes as sent.
        let t = learn(r#"[{"\u0069d":"x"}]"#).unwrap();
        assert_eq!((t.name.as_str(), &*t.before), ("id", r#"{"\u0069d":"#));
        assert_eq!(
            t.parse(r#"[{"\u0069d":"y"}]"#).unwrap(),
            whole(r#"[{"id":"y"}]"#).unwrap()
        );
        for no in [
            "[]",
            "[{}]",
            r#"[{"id":"x","n":1}]"#,
            r#"[{"id":"x"},{"n":1}]"#,
            // A repeat keeps its last value: the bytes after the first are
            // not the same for every object.
            r#"[{"id":"x","id":"x"}]"#,
            r#"[ {"id":"x"}]"#,
            r#"[{"id":[1]}]"#,
        ] {
            assert!(learn(no).is_none(), "{no}");
        }
        let long = format!(r#"[{{"{}":"x"}}]"#, "n".repeat(ObjectTemplate::MAX_BYTES));
        assert!(learn(&long).is_none(), "a long name is not kept");
    }
}
