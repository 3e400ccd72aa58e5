//! Strict JSON bodies: an object with a fixed set of top-level fields, where an
//! unknown field is told apart from any other shape error by a typed check, not by
//! the wording of serde's message; and the [`template`]s a body's parse is
//! kept by, so a body that differs from an earlier one only in its keys
//! parses only its keys.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

pub mod template;

/// Why a strict JSON body did not parse.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// A top-level field that the body's type does not have.
    #[error("unknown field `{field}`, expected one of {expected}")]
    UnknownField {
        /// The field (as sent; echo it through a printable filter).
        field: String,
        /// The fields the body may have, each in backquotes.
        expected: String,
    },
    /// Not JSON, or not the expected shape.
    #[error("{0}")]
    Malformed(#[source] serde_json::Error),
}

/// Parses `body` as a `T` whose top-level fields are `fields` (`T` denies unknown
/// fields). On failure, an object with a field outside `fields` is
/// [`BodyError::UnknownField`]; anything else is [`BodyError::Malformed`]. The
/// check costs a second parse of the field names, on the error path only.
pub fn from_slice_strict<'de, T: Deserialize<'de>>(
    body: &'de [u8],
    fields: &[&str],
) -> Result<T, BodyError> {
    from_slice(body).map_err(|e| match unknown_field(body, fields) {
        Some(field) => BodyError::UnknownField {
            field,
            expected: fields
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", "),
        },
        None => BodyError::Malformed(e),
    })
}

/// Parses `body` as JSON, checking that it is UTF-8 once for the whole body
/// rather than string by string (`serde_json::from_slice` validates each string
/// it reads: a sixth of a 100-key request's parse). A body that is not UTF-8 is
/// parsed by `serde_json::from_slice` after all, for its error, which says where.
pub fn from_slice<'de, T: Deserialize<'de>>(body: &'de [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    }
}

/// A JSON string borrowed from the body when it has no escapes (most names do),
/// else decoded into its own buffer: a `Vec<Text>` of names parses without one
/// allocation per name (serde's `Cow<str>` borrows only as a field of its own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Text<'a>(pub std::borrow::Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// A map keyed by `Text` is looked up by `&str` (a `Text` hashes and compares
/// as its string).
impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<String> for Text<'_> {
    fn from(s: String) -> Self {
        Self(std::borrow::Cow::Owned(s))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(std::borrow::Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'a>, E> {
                Ok(Text(std::borrow::Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'a>, E> {
                Ok(Text(std::borrow::Cow::Owned(s)))
            }
        }
        d.deserialize_str(Visitor(std::marker::PhantomData))
    }
}

/// The first top-level field of the object `body` that is not in `fields`.
fn unknown_field(body: &[u8], fields: &[&str]) -> Option<String> {
    let object: BTreeMap<String, IgnoredAny> = serde_json::from_slice(body).ok()?;
    object.into_keys().find(|k| !fields.contains(&k.as_str()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        a: u32,
        #[serde(default)]
        b: Option<String>,
    }

    #[test]
    fn unknown_fields_are_told_from_other_errors() {
        let parse = |s: &str| from_slice_strict::<Body>(s.as_bytes(), &["a", "b"]);
        assert!(parse(r#"{"a": 1}"#).is_ok());
        let e = parse(r#"{"a": 1, "c\u0021": 2}"#).unwrap_err();
        assert!(matches!(&e, BodyError::UnknownField { field, .. } if field == "c!"));
        assert_eq!(
            e.to_string(),
            "unknown field `c!`, expected one of `a`, `b`"
        );
        // A wrong type, a missing field, not an object, not JSON: malformed.
        for bad in [r#"{"a": "x"}"#, r#"{"b": "x"}"#, "[true]", "{", ""] {
            assert!(matches!(parse(bad), Err(BodyError::Malformed(_))), "{bad}");
        }
        // An unknown field next to a wrong type is still the unknown field.
        assert!(matches!(
            parse(r#"{"a": "x", "z": 1}"#),
            Err(BodyError::UnknownField { .. })
        ));
    }

    #[test]
    fn text_borrows_unless_escaped() {
        let names: Vec<Text<'_>> = from_slice(br#"["a:b", "c\u0021"]"#).unwrap();
        assert!(matches!(names[0].0, std::borrow::Cow::Borrowed("a:b")));
        assert!(matches!(&names[1].0, std::borrow::Cow::Owned(s) if s == "c!"));
        assert!(from_slice::<Vec<Text<'_>>>(b"[1]").is_err());
    }

    #[test]
    fn a_body_that_is_not_utf8_fails_as_serde_json_says_where() {
        let bad = b"{\"a\": 1, \"b\": \"x\xff\"}";
        let ours = from_slice::<Body>(bad).unwrap_err().to_string();
        let theirs = serde_json::from_slice::<Body>(bad).unwrap_err().to_string();
        assert_eq!(ours, theirs);
        assert!(ours.contains("column"), "{ours}");
        let ok: Body =
            from_slice("{\"a\": 1, \"b\": \"\u{e9}t\u{e9} \\u00e9\"}".as_bytes()).unwrap();
        assert_eq!(ok.b.as_deref(), Some("\u{e9}t\u{e9} \u{e9}"));
    }
}
