//! Canonical entity keys.
//!
//! A key is the entity's key fields in spec order, each encoded (strings as-is, ints
//! in decimal), escaped (`\` → `\\`, `|` → `\|`) and joined with `|`. The encoding is
//! injective, so two different key objects never share a storage key, and it does
//! not depend on the order of fields in the request's key object (Volga's JSON keys
//! did).

use std::fmt;
use std::sync::Arc;

use crate::value::Value;

/// The separator between key fields in a canonical key.
pub const KEY_SEPARATOR: char = '|';

/// A canonical entity key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityKey(Arc<str>);

impl EntityKey {
    /// Encodes key values (already validated against the entity's key types).
    pub fn encode<'a>(values: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut out = String::new();
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                out.push(KEY_SEPARATOR);
            }
            match v {
                Value::String(s) => push_key_str(&mut out, s),
                Value::Int(n) => push_key_int(&mut out, *n),
                other => push_key_str(&mut out, &other.to_json().to_string()),
            }
        }
        Self(out.into())
    }

    /// The canonical form.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps an already canonical string (as read back from a store).
    pub fn from_canonical(s: impl Into<Arc<str>>) -> Self {
        Self(s.into())
    }

    /// The key's fields in canonical form, unescaped, in key order (ints as their
    /// decimal text): the inverse of [`Self::encode`].
    pub fn fields(&self) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut chars = self.0.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out
                    .last_mut()
                    .into_iter()
                    .for_each(|f| f.extend(chars.next())),
                KEY_SEPARATOR => out.push(String::new()),
                c => out.last_mut().into_iter().for_each(|f| f.push(c)),
            }
        }
        out
    }
}

/// Appends one int key field in canonical form (decimal).
pub(crate) fn push_key_int(out: &mut String, n: i64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Whether a string key field has a character its canonical form escapes. Keys
/// are short: every byte is looked at, without an early exit, which the compiler
/// turns into a few wide compares (a searcher's set-up cost more than the search).
pub(crate) fn needs_key_escape(s: &str) -> bool {
    (s.as_bytes().iter()).fold(false, |found, &b| {
        found | (b == b'\\') | (b == KEY_SEPARATOR as u8)
    })
}

/// Appends one string key field in canonical form (escaped).
pub(crate) fn push_key_str(out: &mut String, s: &str) {
    if !needs_key_escape(s) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        if c == '\\' || c == KEY_SEPARATOR {
            out.push('\\');
        }
        out.push(c);
    }
}

impl fmt::Display for EntityKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Per key of a list, the values of an entity's key fields in the entity's key
/// order, stored flat (one allocation for the list, not one per key).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeyValues {
    /// Key fields per key.
    width: usize,
    values: Arc<[Value]>,
}

impl KeyValues {
    /// `values` holds `width` values per key, key after key.
    pub fn new(width: usize, values: Vec<Value>) -> Self {
        Self {
            width,
            values: values.into(),
        }
    }

    /// The key field values of key `k` (empty past the last key).
    pub fn of(&self, k: usize) -> &[Value] {
        let start = k.saturating_mul(self.width);
        self.values
            .get(start..start.saturating_add(self.width))
            .unwrap_or(&[])
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.values.len().checked_div(self.width).unwrap_or(0)
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(vals: &[Value]) -> String {
        EntityKey::encode(vals).as_str().to_owned()
    }

    #[test]
    fn single_string_key_is_verbatim() {
        assert_eq!(key(&["test-id-21".into()]), "test-id-21");
    }

    #[test]
    fn separators_are_escaped_so_keys_stay_distinct() {
        let a = key(&["a|b".into(), "c".into()]);
        let b = key(&["a".into(), "b|c".into()]);
        assert_ne!(a, b);
        assert_eq!(a, r"a\|b|c");
        assert_ne!(
            key(&[r"a\".into(), "b".into()]),
            key(&["a".into(), r"\b".into()])
        );
    }

    #[test]
    fn fields_undo_the_encoding() {
        for vals in [
            vec![Value::from("test-id-21")],
            vec![Value::from("a|b"), Value::from(r"c\|d\"), Value::Int(-7)],
            vec![Value::from(""), Value::from("")],
        ] {
            let fields: Vec<String> = vals
                .iter()
                .map(|v| match v {
                    Value::Int(n) => n.to_string(),
                    Value::String(s) => s.to_string(),
                    _ => unreachable!(),
                })
                .collect();
            assert_eq!(EntityKey::encode(&vals).fields(), fields);
        }
    }

    #[test]
    fn ints_and_unicode() {
        assert_eq!(key(&[Value::Int(-7), "ключ🔑".into()]), "-7|ключ🔑");
    }

    #[test]
    fn key_values_are_sliced_per_key() {
        let v = KeyValues::new(
            2,
            vec![
                Value::from("a"),
                Value::Int(1),
                Value::from("b"),
                Value::Null,
            ],
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v.of(0), [Value::from("a"), Value::Int(1)]);
        assert_eq!(v.of(1), [Value::from("b"), Value::Null]);
        assert!(v.of(2).is_empty() && v.of(usize::MAX).is_empty());
        assert!(KeyValues::new(0, Vec::new()).is_empty());
    }
}
