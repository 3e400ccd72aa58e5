//! Bodies kept as templates around one field's value: a model server sends the
//! same body with each request but for its keys, so what the rest of it parses
//! to is kept, and only the keys are parsed again.
//!
//! A template is a body's bytes before and after one top-level field's
//! value, with what that body parsed to. A later body that starts with the
//! bytes before, ends with the bytes after, and has one JSON value between them
//! parses as the kept body with that value in its place: the parser reaches
//! the value in the state the kept body left it in (expecting a value), and a
//! complete value leaves it where the kept one did, so every other field (and
//! every check of unknown and repeated fields) reads as it did. Only equal
//! bytes are compared; all parsing is serde_json's.

use std::ops::Range;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::Text;

/// The templates one thread keeps, with what their bodies parsed to.
#[derive(Debug)]
pub struct Templates<T> {
    kept: Vec<Template<T>>,
}

#[derive(Debug)]
struct Template<T> {
    before: Box<[u8]>,
    after: Box<[u8]>,
    parsed: T,
}

impl<T> Templates<T> {
    /// Templates kept at most; a new one when full drops them all (a client
    /// sending a new body shape with each request pays for its own parse and
    /// holds no more memory).
    pub const KEPT: usize = 16;
    /// A body with more bytes than this outside its field's value is not kept.
    pub const KEPT_BYTES: usize = 4096;

    /// None kept.
    pub const fn new() -> Self {
        Self { kept: Vec::new() }
    }

    /// What a kept body parsed to, when `body` is that body with another value
    /// in its field's place, and `body`'s value (its bytes, not yet parsed:
    /// the caller parses it, and parses the whole body if it is not one
    /// JSON value).
    pub fn find<'b>(&self, body: &'b [u8]) -> Option<(&T, &'b [u8])> {
        self.kept.iter().find_map(|t| {
            let end = body.len().checked_sub(t.after.len())?;
            let value = body.get(t.before.len()..end)?;
            let fits = body.starts_with(&t.before) && body.ends_with(&t.after);
            fits.then_some((&t.parsed, value))
        })
    }

    /// Keeps `parsed`, what `body` parsed to, for bodies equal to it outside
    /// `value` (the field's value's bytes: [`locate`]).
    pub fn keep(&mut self, body: &[u8], value: Range<usize>, parsed: T) {
        let (Some(before), Some(after)) = (body.get(..value.start), body.get(value.end..)) else {
            return;
        };
        if before.len() + after.len() > Self::KEPT_BYTES {
            return;
        }
        if self.kept.len() >= Self::KEPT {
            self.kept.clear();
        }
        self.kept.push(Template {
            before: before.into(),
            after: after.into(),
            parsed,
        });
    }
}

impl<T> Default for Templates<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the values of the top-level fields `fields` are in `body`, a JSON
/// object (their bytes, without the whitespace around them; `None` for a field
/// it does not have); `None` when `body` is not an object. Each other value is
/// skipped, not built.
pub fn locate<const N: usize>(body: &str, fields: [&str; N]) -> Option<[Option<Range<usize>>; N]> {
    let mut de = serde_json::Deserializer::from_str(body);
    let found = Locate { fields }.deserialize(&mut de).ok()?;
    let base = body.as_ptr().addr();
    Some(found.map(|raw| {
        let start = raw?.get().as_ptr().addr().checked_sub(base)?;
        Some(start..start + raw?.get().len())
    }))
}

/// The one JSON value in `text` between the bytes `before` and `after`,
/// parsed by serde_json, and what follows `after`; `None` when `text` does not
/// start with `before`, has no complete value next, or has other bytes than
/// `after` after it. The rule a template relies on, one value at a time: the
/// bytes around the value are compared, only the value is parsed.
pub fn between<'t, T: serde::Deserialize<'t>>(
    text: &'t str,
    before: &str,
    after: &str,
) -> Option<(T, &'t str)> {
    let (value, rest) = first_value(text.strip_prefix(before)?)?;
    Some((value, rest.strip_prefix(after)?))
}

/// The JSON value `text` starts with, parsed by serde_json, and the bytes
/// after it; `None` when `text` does not start with a complete value.
pub fn first_value<'t, T: serde::Deserialize<'t>>(text: &'t str) -> Option<(T, &'t str)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, text.get(values.byte_offset()..)?))
}

/// The one field of the JSON object `object`: its name (borrowed from
/// `object` when it has no escapes) and where its value is (its bytes,
/// without the whitespace around them); `None` when `object` is not an
/// object of one field (a repeated name counts twice: the last value is the
/// one a parse keeps).
pub fn only_field(object: &str) -> Option<(Text<'_>, Range<usize>)> {
    let mut de = serde_json::Deserializer::from_str(object);
    let (name, value) = OnlyField.deserialize(&mut de).ok()??;
    de.end().ok()?;
    let start = value
        .get()
        .as_ptr()
        .addr()
        .checked_sub(object.as_ptr().addr())?;
    Some((name, start..start + value.get().len()))
}

/// Reads an object's one field, as [`only_field`] says.
struct OnlyField;

impl<'de> DeserializeSeed<'de> for OnlyField {
    type Value = Option<(Text<'de>, &'de RawValue)>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OnlyField {
    type Value = Option<(Text<'de>, &'de RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = 0;
        let mut last = None;
        while let Some(name) = map.next_key::<Text<'de>>()? {
            fields += 1;
            last = Some((name, map.next_value()?));
        }
        Ok(last.filter(|_| fields == 1))
    }
}

/// Finds fields' values in an object, as the body's own bytes.
struct Locate<'f, const N: usize> {
    fields: [&'f str; N],
}

impl<'de, const N: usize> DeserializeSeed<'de> for Locate<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for Locate<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match self.fields.iter().position(|f| **f == *key) {
                Some(i) if found[i].is_none() => found[i] = Some(map.next_value()?),
                _ => map.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_located_as_its_own_bytes() {
        let body = r#" {"a": [1, {"keys": 2}], "keys" :  [{"id": "x"}] , "z\u0021": null} "#;
        let [keys, a, b] = locate(body, ["keys", "a", "b"]).unwrap();
        assert_eq!(&body[keys.unwrap()], r#"[{"id": "x"}]"#);
        assert_eq!(&body[a.unwrap()], r#"[1, {"keys": 2}]"#);
        assert_eq!(b, None);
        assert_eq!(locate("[1, 2]", ["keys"]), None);
        assert_eq!(locate(r#"{"keys": "#, ["keys"]), None);
        let escaped = r#"{"k\u0065ys": 7}"#;
        let [at] = locate(escaped, ["keys"]).unwrap();
        assert_eq!(&escaped[at.unwrap()], "7");
    }

    #[test]
    fn a_value_between_known_bytes_is_parsed_alone() {
        let between = |t| between::<serde_json::Value>(t, "{\"a\":", "}");
        assert_eq!(
            between(r#"{"a":[1, 2]},x"#),
            Some((serde_json::json!([1, 2]), ",x"))
        );
        assert_eq!(between(r#"{"a": "s"}"#), Some((serde_json::json!("s"), "")));
        for no in [
            r#"{"b":1}"#,
            r#"{"a":}"#,
            r#"{"a":1 }"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":1x}"#,
            r#"{"a":"#,
        ] {
            assert!(between(no).is_none(), "{no}");
        }
    }

    #[test]
    fn an_objects_one_field_is_found_counted_as_sent() {
        let object = r#" { "id" :  ["a", 1] } "#;
        let (name, at) = only_field(object).unwrap();
        assert_eq!((&*name, &object[at]), ("id", r#"["a", 1]"#));
        let (name, _) = only_field(r#"{"i\u0064": 1}"#).unwrap();
        assert!(matches!(name.0, std::borrow::Cow::Owned(_)) && *name == *"id");
        for no in [
            r#"{}"#,
            r#"{"a": 1, "b": 2}"#,
            r#"{"a": 1, "a": 1}"#,
            "[1]",
            r#"{"a": 1"#,
            r#"{"a": 1} x"#,
        ] {
            assert!(only_field(no).is_none(), "{no}");
        }
    }

    fn keys(body: &str) -> Range<usize> {
        let [keys] = locate(body, ["keys"]).unwrap();
        keys.unwrap()
    }

    #[test]
    fn a_body_fits_a_template_only_with_the_same_bytes_around_its_value() {
        let mut kept = Templates::new();
        let body = r#"{"t": ["f"], "keys": [1, 2], "u": {}}"#;
        kept.keep(body.as_bytes(), keys(body), "parsed");
        fn find<'b>(kept: &Templates<&'static str>, b: &'b str) -> Option<(&'static str, &'b str)> {
            let (parsed, value) = kept.find(b.as_bytes())?;
            Some((*parsed, std::str::from_utf8(value).unwrap()))
        }
        let find = |b| find(&kept, b);
        assert_eq!(
            find(r#"{"t": ["f"], "keys": [3], "u": {}}"#),
            Some(("parsed", "[3]"))
        );
        assert_eq!(
            find(r#"{"t": ["f"], "keys": , "u": {}}"#),
            Some(("parsed", ""))
        );
        assert_eq!(find(r#"{"t": ["g"], "keys": [3], "u": {}}"#), None);
        assert_eq!(find(r#"{"t": ["f"], "keys": [3], "u": {} }"#), None);
        // Shorter than the bytes around the value: no middle to take.
        assert_eq!(find(r#"{"t": ["f"], "keys": , "u": {}"#), None);
        assert_eq!(find(""), None);
    }

    #[test]
    fn templates_are_bounded_in_count_and_bytes() {
        let mut kept = Templates::new();
        for i in 0..Templates::<usize>::KEPT {
            let body = format!(r#"{{"n": {i}, "keys": []}}"#);
            kept.keep(body.as_bytes(), keys(&body), i);
        }
        assert_eq!(kept.kept.len(), Templates::<usize>::KEPT);
        let body = r#"{"n": "new", "keys": []}"#;
        kept.keep(body.as_bytes(), keys(body), 99);
        assert_eq!(kept.kept.len(), 1, "a full set is dropped, not grown");
        let long = format!(r#"{{"n": "{}", "keys": []}}"#, "x".repeat(5000));
        kept.keep(long.as_bytes(), keys(&long), 100);
        assert_eq!(kept.kept.len(), 1, "a long body is not kept");
        assert!(kept.find(long.as_bytes()).is_none());
    }
}
