//! A read's records per key ([`KeyedRows`]): what a store answers, what the
//! executor reads its inputs from.

use crate::value::Row;

/// The records of one read, per key in the read's order, in one vector for all
/// keys: a read of 100 keys is two allocations, not one per key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyedRows {
    rows: Vec<Row>,
    /// Where each key's records end in `rows`.
    ends: Vec<usize>,
}

impl KeyedRows {
    /// Room for `keys` keys and `rows` records.
    pub fn with_capacity(keys: usize, rows: usize) -> Self {
        Self {
            rows: Vec::with_capacity(rows),
            ends: Vec::with_capacity(keys),
        }
    }

    /// `keys` keys without records.
    pub fn empty(keys: usize) -> Self {
        Self {
            rows: Vec::new(),
            ends: vec![0; keys],
        }
    }

    /// Appends the next key's records.
    pub fn push(&mut self, rows: impl IntoIterator<Item = Row>) {
        self.rows.extend(rows);
        self.ends.push(self.rows.len());
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Key `k`'s records (none past the last key).
    pub fn of(&self, k: usize) -> &[Row] {
        let Some(&end) = self.ends.get(k) else {
            return &[];
        };
        let start = k.checked_sub(1).map_or(0, |p| self.ends[p]);
        self.rows.get(start..end).unwrap_or_default()
    }

    /// Each key's records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[Row]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let rows = self.rows.get(start..end).unwrap_or_default();
            start = end;
            rows
        })
    }

    /// Each key's records as a vector of its own, in order.
    pub fn into_keys(self) -> impl ExactSizeIterator<Item = Vec<Row>> {
        let mut rows = self.rows.into_iter();
        let mut start = 0;
        self.ends.into_iter().map(move |end| {
            let key: Vec<Row> = rows.by_ref().take(end - start).collect();
            start = end;
            key
        })
    }
}

/// Key `k`'s records, as [`KeyedRows::of`] (none past the last key).
impl std::ops::Index<usize> for KeyedRows {
    type Output = [Row];

    fn index(&self, k: usize) -> &[Row] {
        self.of(k)
    }
}

/// The same records per key as a vector per key (for tests and callers that
/// hold the nested form).
impl PartialEq<Vec<Vec<Row>>> for KeyedRows {
    fn eq(&self, other: &Vec<Vec<Row>>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_slice())
    }
}

/// One key's records per item.
impl FromIterator<Vec<Row>> for KeyedRows {
    fn from_iter<I: IntoIterator<Item = Vec<Row>>>(keys: I) -> Self {
        let keys = keys.into_iter();
        let mut out = Self::with_capacity(keys.size_hint().0, keys.size_hint().0);
        for rows in keys {
            out.push(rows);
        }
        out
    }
}

impl From<Vec<Vec<Row>>> for KeyedRows {
    fn from(keys: Vec<Vec<Row>>) -> Self {
        keys.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Timestamp, Value};

    fn row(n: i64) -> Row {
        Row::new(Timestamp(n), vec![Value::Int(n)])
    }

    #[test]
    fn records_are_kept_per_key_in_order() {
        let keys = vec![vec![row(1), row(2)], vec![], vec![row(3)], vec![]];
        let flat = KeyedRows::from(keys.clone());
        assert_eq!(flat.len(), 4);
        assert_eq!(flat.of(0), [row(1), row(2)]);
        assert!(flat.of(1).is_empty());
        assert_eq!(flat.of(2), [row(3)]);
        assert!(flat.of(3).is_empty() && flat.of(4).is_empty());
        assert_eq!(flat.iter().map(<[Row]>::to_vec).collect::<Vec<_>>(), keys);
        assert_eq!(flat, keys);
        assert_ne!(flat, keys[..3].to_vec());
        assert_eq!(flat.clone().into_keys().collect::<Vec<_>>(), keys);
        let empty = KeyedRows::empty(3);
        assert_eq!(empty.len(), 3);
        assert!(empty.iter().all(<[Row]>::is_empty));
        assert!(KeyedRows::default().is_empty());
    }
}
