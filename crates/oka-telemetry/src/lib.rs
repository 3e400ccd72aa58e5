//! Oka's telemetry, shared by every process (`oka serve`, `oka source kafka`, and
//! what comes next), so that a port, a metric family and an error read the same
//! everywhere.
//!
//! - [`http`]: the bounded HTTP listener every port is served by (connection cap,
//!   header-read and idle timeouts, descriptor exhaustion, drain on shutdown);
//! - [`families`]: one definition (name, help, buckets) of each metric family more
//!   than one process exposes; each process registers its handles under these;
//! - [`trace`]: W3C trace context in, spans out over OTLP (when configured);
//! - [`words`]: failures in words for a person.

pub mod families;
pub mod http;
pub mod trace;
pub use oka_core::words;
