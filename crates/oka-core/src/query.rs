//! Storage queries with their parameters resolved.

use crate::value::Timestamp;

/// The largest `n` a `last_n` query may ask for.
pub const MAX_LAST_N: usize = 10_000;

/// A storage query for many keys of one feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Query {
    /// The newest record per key (none if the key was never written).
    Latest,
    /// Records with `start <= event_time <= end`, oldest first.
    Range {
        /// Inclusive lower bound.
        start: Timestamp,
        /// Inclusive upper bound.
        end: Timestamp,
    },
    /// The newest `n` records, oldest first.
    LastN {
        /// How many.
        n: usize,
    },
}

impl Query {
    /// The query's name (a bounded metrics label).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::Range { .. } => "range",
            Self::LastN { .. } => "last_n",
        }
    }

    /// Whether an empty answer means "missing" (`latest`) rather than "no records in
    /// the window" (`range`, `last_n`, which UDFs receive as an empty list).
    pub fn empty_is_missing(&self) -> bool {
        matches!(self, Self::Latest)
    }
}
