//! Training sets: every requested feature of a spec computed as of each row of
//! an entity file, from history files, by the planner and executor that serve
//! requests (so a model is trained on the values it will be served).
//!
//! Modules, in the order a run uses them:
//! - [`inputs`]: paths and globs, formats by extension.
//! - [`job`]: the requested features, the key, time and argument columns they
//!   need, and one row computed through `oka-core`'s prepare and execute.
//! - [`compute`]: a batch of rows through the job, reads from a [`compute::Reads`].
//! - [`history`]: a pipeline feature's history by key, and its as-of answers
//!   (the in-memory store's rules, [`oka_storage::history`]).
//! - [`entities`]: the entity file, read in batches.
//! - [`convert`]: Arrow columns ↔ Oka values by spec type.
//! - [`output`]: the Parquet output, renamed into place when complete.
//! - [`run`](mod@run): the whole of `oka training-set`.
//! - [`spill`]: the reads answered on disk when the history passes the
//!   memory budget.
//! - [`engine`]: the last step alone, over a table that holds the pipeline
//!   features (the Python package `oka-engine`).

pub mod compute;
pub mod convert;
pub mod engine;
pub mod entities;
pub mod error;
pub mod history;
pub mod inputs;
pub mod job;
pub mod output;
pub mod run;
pub mod spill;
mod together;

pub use error::TrainingError;
pub use job::{Job, RowInput, Status};
pub use run::{Options, Progress, Summary, run};
