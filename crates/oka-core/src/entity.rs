//! Entities: the schema of a feature's records (key fields, a timestamp, values).

use std::sync::Arc;

use crate::value::FieldType;

/// A column of an entity.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Field name.
    pub name: Arc<str>,
    /// Field type.
    pub ty: FieldType,
}

/// The position of the one item of `items` that `matches` (items named uniquely,
/// such as columns), trying `hint` first.
pub fn position_near<T>(items: &[T], hint: usize, matches: impl Fn(&T) -> bool) -> Option<usize> {
    match items.get(hint) {
        Some(item) if matches(item) => Some(hint),
        _ => items.iter().position(matches),
    }
}

/// Each column of `order` with the bytes before its value in a record:
/// the object's `{` or a `,`, then its JSON key (`json_keys`).
fn answer_fields(json_keys: &[Box<[u8]>], order: &[usize]) -> Box<[(usize, Box<[u8]>)]> {
    (order.iter().enumerate())
        .map(|(i, &c)| {
            let key = json_keys.get(c).map_or(&[][..], |k| k);
            let before = [if i == 0 { &b"{"[..] } else { b"," }, key].concat();
            (c, before.into_boxed_slice())
        })
        .collect()
}

/// An entity schema. Columns are the key fields, then the timestamp, then the value
/// fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// Entity name.
    pub name: Arc<str>,
    /// All columns.
    pub columns: Vec<Column>,
    /// Indices of the key columns, in key order.
    pub key_index: Vec<usize>,
    /// Index of the timestamp column.
    pub timestamp_index: usize,
    /// Each column's name as a JSON object key with its colon (`"name":`), written
    /// once per record on the response path.
    pub(crate) json_keys: Box<[Box<[u8]>]>,
    /// The columns in the order a record is answered (JSON): a permutation of the
    /// column indices.
    pub(crate) answer_order: Box<[usize]>,
    /// Each column of [`Self::answer_order`] with the bytes a record writes
    /// before its value: `{"name":` for the first, `,"name":` for the others.
    answer_fields: Box<[(usize, Box<[u8]>)]>,
}

impl Entity {
    /// An entity of `columns` (keys at `key_index`, the timestamp at
    /// `timestamp_index`).
    pub fn new(
        name: &str,
        columns: Vec<Column>,
        key_index: Vec<usize>,
        timestamp_index: usize,
    ) -> Self {
        let json_keys: Box<[Box<[u8]>]> = columns
            .iter()
            .map(|c| {
                let mut k = Vec::with_capacity(c.name.len() + 3);
                crate::value::write_json_str(&mut k, &c.name);
                k.push(b':');
                k.into_boxed_slice()
            })
            .collect();
        let answer_order: Box<[usize]> = (0..columns.len()).collect();
        let answer_fields = answer_fields(&json_keys, &answer_order);
        Self {
            name: name.into(),
            columns,
            key_index,
            timestamp_index,
            json_keys,
            answer_order,
            answer_fields,
        }
    }

    /// The same entity answering its records' columns in `order` (column indices,
    /// each once); `None` when `order` is not a permutation of the columns.
    #[must_use]
    pub fn answering_in(mut self, order: Vec<usize>) -> Option<Self> {
        let mut seen = vec![false; self.columns.len()];
        for &i in &order {
            if std::mem::replace(seen.get_mut(i)?, true) {
                return None;
            }
        }
        if order.len() != self.columns.len() {
            return None;
        }
        self.answer_order = order.into();
        self.answer_fields = answer_fields(&self.json_keys, &self.answer_order);
        Some(self)
    }

    /// The column indices in the order a record is answered.
    pub fn answer_order(&self) -> &[usize] {
        &self.answer_order
    }

    /// The columns in the order a record is answered, each with the bytes
    /// written before its value (`{"name":` for the first, `,"name":` after).
    pub fn answer_fields(&self) -> &[(usize, Box<[u8]>)] {
        &self.answer_fields
    }

    /// The column names that appear more than once (each repetition).
    pub fn duplicate_columns(&self) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        self.columns
            .iter()
            .map(|c| &*c.name)
            .filter(|n| !seen.insert(*n))
            .collect()
    }

    /// A column's index by name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| &*c.name == name)
    }

    /// A column's index by name, looking at `hint` first: a caller walking
    /// columns in the entity's order (the next index after the last found)
    /// finds each with one comparison instead of a scan.
    pub fn column_index_near(&self, name: &str, hint: usize) -> Option<usize> {
        position_near(&self.columns, hint, |c| &*c.name == name)
    }

    /// Column `i`'s name as a JSON object key followed by `:`.
    pub fn json_key(&self, i: usize) -> &[u8] {
        self.json_keys.get(i).map_or(b"", |k| k)
    }

    /// The key columns' indices.
    pub fn key_columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.key_index.iter().copied()
    }

    /// The key columns.
    pub fn keys(&self) -> impl Iterator<Item = &Column> + '_ {
        self.key_index.iter().map(|&i| &self.columns[i])
    }

    /// The timestamp column's name.
    pub fn timestamp_name(&self) -> &str {
        &self.columns[self.timestamp_index].name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_found_from_its_hint_or_by_a_scan() {
        let column = |name: &str| Column {
            name: name.into(),
            ty: FieldType::Float,
        };
        let columns = vec![column("id"), column("ts"), column("a"), column("b")];
        let e = Entity::new("e", columns, vec![0], 1);
        assert_eq!(e.column_index_near("b", 3), Some(3), "the hint");
        assert_eq!(e.column_index_near("a", 3), Some(2), "behind the hint");
        assert_eq!(
            e.column_index_near("id", 99),
            Some(0),
            "a hint past the end"
        );
        assert_eq!(e.column_index_near("c", 0), None);
    }
}
