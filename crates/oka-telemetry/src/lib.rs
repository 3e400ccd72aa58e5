//! Oka's telemetry, shared by every process (`oka serve`, `oka source kafka`, and
//! what comes next), so that a metric family means the same everywhere.
//!
//! - [`families`]: one definition (name, help, buckets) of each metric family more
//!   than one process exposes; each process registers its handles under these.
//!
//! The bounded admin listener (connection cap, timeouts, `/healthz`, `/readyz`,
//! `/metrics`) is to move here from `oka-server` and `oka-kafka` next (issue 27,
//! item 1; see the closing note).

pub mod families;
