//! The records a prepared request's reads returned, by [`FetchId`], checked
//! against what each read asked for.

use crate::keyed::KeyedRows;
use crate::request::{Fetch, FetchId, Prepared};

use super::ExecuteError;

/// The records a prepared request's reads returned, by [`FetchId`].
#[derive(Debug)]
pub struct Fetched {
    /// Per fetch: per key, the records (`None` until given).
    rows: Vec<Option<KeyedRows>>,
    /// Per fetch: how many keys it reads.
    key_counts: Vec<usize>,
}

impl Fetched {
    /// Room for the results of every read of `prepared`.
    pub fn new(prepared: &Prepared) -> Self {
        Self {
            rows: prepared.fetches().map(|_| None).collect(),
            key_counts: prepared.fetches().map(|(_, f)| f.keys.len()).collect(),
        }
    }

    /// Performs every read of `prepared` with `read` (a synchronous source: a
    /// test's data, a benchmark's fixed records).
    pub fn read_all<R: Into<KeyedRows>>(
        prepared: &Prepared,
        mut read: impl FnMut(&Fetch) -> R,
    ) -> Result<Self, ExecuteError> {
        let mut fetched = Self::new(prepared);
        for (id, f) in prepared.fetches() {
            fetched.insert(id, read(f))?;
        }
        Ok(fetched)
    }

    /// Records read `id`'s result: per key of the read, in its order, the records.
    pub fn insert(&mut self, id: FetchId, rows: impl Into<KeyedRows>) -> Result<(), ExecuteError> {
        let rows = rows.into();
        let (Some(slot), Some(&expected)) = (
            self.rows.get_mut(id.index()),
            self.key_counts.get(id.index()),
        ) else {
            return Err(ExecuteError::NotFetched(id));
        };
        if rows.len() != expected {
            return Err(ExecuteError::WrongKeyCount {
                expected,
                got: rows.len(),
            });
        }
        *slot = Some(rows);
        Ok(())
    }

    pub(super) fn get(&self, id: FetchId) -> Result<&KeyedRows, ExecuteError> {
        self.rows
            .get(id.index())
            .and_then(Option::as_ref)
            .ok_or(ExecuteError::NotFetched(id))
    }
}
