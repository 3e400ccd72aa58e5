//! Help text shared by several commands.

/// What `OKA_LOG` does: the logging part of the help of `oka`, `oka serve` and
/// `oka ingest`.
pub const LOGGING: &str = "Logging: OKA_LOG sets what is logged, as a tracing filter (default `info,scylla=off,fred=off`; e.g. OKA_LOG=debug, or OKA_LOG=oka_redis=debug,info); logs go to standard error (`oka serve --log-format json` for JSON).";
