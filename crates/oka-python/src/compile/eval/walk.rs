//! Iterating a value: what a `for` loop, a comprehension or a generator walks.

use super::{R, Text, V, item};

/// The elements of a value being iterated, one at a time: a sequence's by
/// index, a string's characters as they are reached (no list of them built,
/// however long the string: the loop's steps are what is bounded).
pub(super) enum Walk<'a> {
    Seq {
        items: V<'a>,
        next: usize,
        len: usize,
    },
    Chars {
        text: Text<'a>,
        at: usize,
    },
}

impl<'a> Walk<'a> {
    pub(super) fn of(v: V<'a>) -> R<Self> {
        Ok(match v {
            V::Str(text) => Walk::Chars { text, at: 0 },
            items => Walk::Seq {
                len: items.len()?,
                items,
                next: 0,
            },
        })
    }

    /// The next element, or `None` past the last.
    pub(super) fn next(&mut self) -> R<Option<V<'a>>> {
        match self {
            Walk::Seq { items, next, len } => {
                if *next >= *len {
                    return Ok(None);
                }
                *next += 1;
                item(items, *next - 1).map(Some)
            }
            Walk::Chars { text, at } => {
                let Some(c) = text.get(*at..).and_then(|rest| rest.chars().next()) else {
                    return Ok(None);
                };
                *at += c.len_utf8();
                Ok(Some(V::Str(Text::Owned(c.to_string()))))
            }
        }
    }
}
