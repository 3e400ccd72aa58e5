//! The metric families more than one Oka process exposes, each defined once: its
//! name (`oka_<subsystem>_<name>_<unit>`, without the `_total` the exposition adds
//! to counters), its help (without a final period: `prometheus-client`'s registry
//! adds one, hand-written collectors add it with [`Family::help_line`]) and, for a
//! histogram, its buckets. `docs/metrics.md` documents each.

/// One metric family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    /// The name.
    pub name: &'static str,
    /// The help text, without a final period.
    pub help: &'static str,
    /// A histogram's bucket bounds (empty for counters and gauges).
    pub buckets: &'static [f64],
}

impl Family {
    /// The help text as a `# HELP` line carries it (with its final period).
    pub fn help_line(&self) -> String {
        format!("{}.", self.help)
    }
}

/// Latency buckets, seconds: 50 µs to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Rows per batch: 1 to 10,000 (a Kafka batch's `max_records` reaches 10,000).
pub const BATCH_BUCKETS: &[f64] = &[
    1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
];

/// Event-time lag buckets, seconds: 1 ms to a day.
pub const LAG_BUCKETS: &[f64] = &[
    0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 86400.0,
];

/// `oka_storage_write_duration_seconds` (label `backend`).
pub const STORAGE_WRITE_DURATION: Family = Family {
    name: "oka_storage_write_duration_seconds",
    help: "Time of one store write of a batch",
    buckets: LATENCY_BUCKETS,
};

/// `oka_storage_errors_total` (label `backend`).
pub const STORAGE_ERRORS: Family = Family {
    name: "oka_storage_errors",
    help: "Failed store calls, reads and writes",
    buckets: &[],
};

/// `oka_ingest_rows_total` (label `result`: `written`, `rejected`).
pub const INGEST_ROWS: Family = Family {
    name: "oka_ingest_rows",
    help: "Pipeline rows by result: written to the store, or rejected before it",
    buckets: &[],
};

/// `oka_ingest_lag_seconds`.
pub const INGEST_LAG: Family = Family {
    name: "oka_ingest_lag_seconds",
    help: "For each row written: the time of the write minus its event time",
    buckets: LAG_BUCKETS,
};

/// `oka_ingest_batch_rows`.
pub const INGEST_BATCH_ROWS: Family = Family {
    name: "oka_ingest_batch_rows",
    help: "Rows per store write of the batched write path",
    buckets: BATCH_BUCKETS,
};

/// `oka_ingest_retries_total`.
pub const INGEST_RETRIES: Family = Family {
    name: "oka_ingest_retries",
    help: "Batch writes retried by the write path after a transient store error",
    buckets: &[],
};

/// `oka_http_connections_accepted_total`.
pub const HTTP_CONNECTIONS_ACCEPTED: Family = Family {
    name: "oka_http_connections_accepted",
    help: "Client connections accepted (including the ones then refused)",
    buckets: &[],
};

/// `oka_http_connection_timeouts_total` (label `phase`).
pub const HTTP_CONNECTION_TIMEOUTS: Family = Family {
    name: "oka_http_connection_timeouts",
    help: "Connections closed by a timeout, by phase (header_read: a request head too slow; idle: nothing sent between requests)",
    buckets: &[],
};

/// `oka_http_refused_total` (label `reason`).
pub const HTTP_REFUSED: Family = Family {
    name: "oka_http_refused",
    help: "Connections and requests refused by a limit, by reason (the in-flight limit is oka_http_requests_shed_total)",
    buckets: &[],
};

/// `oka_http_accept_errors_total` (label `kind`: `fd_limit`, `other`).
pub const HTTP_ACCEPT_ERRORS: Family = Family {
    name: "oka_http_accept_errors",
    help: "Failed accepts, by kind (fd_limit: the process was out of file descriptors)",
    buckets: &[],
};

/// `oka_http_shutdown_unanswered_connections_total`.
pub const HTTP_SHUTDOWN_UNANSWERED: Family = Family {
    name: "oka_http_shutdown_unanswered_connections",
    help: "Connections a shutdown closed while complete requests on them were unanswered",
    buckets: &[],
};

/// `oka_http_tls_failures_total` (label `reason`: `plain_http`, `handshake`).
pub const HTTP_TLS_FAILURES: Family = Family {
    name: "oka_http_tls_failures",
    help: "Connections to a TLS port that ended before a request could be read, by reason (plain_http: the client spoke plain HTTP; handshake: no common protocol, a client certificate missing or untrusted, a malformed message); a handshake too slow is a header_read timeout",
    buckets: &[],
};

/// `oka_trace_spans_total` (label `result`: `exported`, `failed`).
pub const TRACE_SPANS: Family = Family {
    name: "oka_trace_spans",
    help: "Spans sent to the OTLP collector (with --otlp-endpoint), by result (exported: the collector took them; failed: refused or unreachable, lost); spans beyond the export queue (OTEL_BSP_MAX_QUEUE_SIZE) are dropped uncounted",
    buckets: &[],
};

/// Every shared family, for checks that walk them.
pub const ALL: &[Family] = &[
    STORAGE_WRITE_DURATION,
    STORAGE_ERRORS,
    INGEST_ROWS,
    INGEST_LAG,
    INGEST_BATCH_ROWS,
    INGEST_RETRIES,
    HTTP_CONNECTIONS_ACCEPTED,
    HTTP_CONNECTION_TIMEOUTS,
    HTTP_REFUSED,
    HTTP_ACCEPT_ERRORS,
    HTTP_SHUTDOWN_UNANSWERED,
    HTTP_TLS_FAILURES,
    TRACE_SPANS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_well_formed_and_buckets_ascend() {
        for (i, f) in ALL.iter().enumerate() {
            assert!(
                f.name.starts_with("oka_") && !f.name.ends_with("_total"),
                "{}",
                f.name
            );
            assert!(
                !f.help.ends_with('.'),
                "{}: the period is added where shown",
                f.name
            );
            assert!(
                ALL[i + 1..].iter().all(|g| g.name != f.name),
                "{} twice",
                f.name
            );
            assert!(f.buckets.windows(2).all(|w| w[0] < w[1]), "{}", f.name);
        }
    }
}
