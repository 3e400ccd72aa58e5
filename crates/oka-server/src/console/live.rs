//! `GET /ui/api/live`: what the health page draws, from the same windows as
//! `/stats` (the last complete seconds). Asking turns on the per-feature
//! statistics for a while ([`WATCH_S`](crate::stats::WATCH_S)); with nobody
//! looking, the request path records none.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use crate::state::AppState;
use crate::stats::{ReloadEvent, StatsBody, WINDOW_S};

/// One poll of the live statistics.
#[derive(Debug, Serialize)]
struct Live {
    /// When, in seconds since the Unix epoch.
    at_s: f64,
    window_s: u64,
    /// Exactly what `/stats` answers now.
    stats: StatsBody,
    /// Feature requests answered with a server error, per second (shedding aside).
    errors_per_s: f64,
    /// Requests shed as overloaded, per second.
    shed_per_s: f64,
    /// Requests being served now.
    in_flight: i64,
    /// Whether shutdown began.
    draining: bool,
    /// Every feature a request named since the console began watching.
    features: Vec<FeatureLiveBody>,
    store: StoreLive,
    /// The read cache (`--cache`), or `null` without one. Counters since start.
    cache: Option<CacheLive>,
    /// The last reloads, oldest first.
    reloads: Vec<ReloadBody>,
    /// The runtimes of UDFs run outside the process (the Python pool): workers,
    /// how many are alive, why the last one died, the UDFs each runs.
    udf_runtimes: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct FeatureLiveBody {
    name: String,
    qps: f64,
    p50: f64,
    p99: f64,
    errors_per_s: f64,
}

#[derive(Debug, Serialize)]
struct StoreLive {
    backend: &'static str,
    available: bool,
    /// Why it is out, and what to check.
    reason: Option<String>,
    /// For how long it has been out, seconds.
    out_for_s: Option<f64>,
    /// Outages since start.
    outages: u64,
}

#[derive(Debug, Serialize)]
struct CacheLive {
    enabled: bool,
    hits: u64,
    misses: u64,
    bytes: u64,
    max_bytes: u64,
    entries: u64,
    evictions: u64,
    invalidations: u64,
    resets: u64,
}

#[derive(Debug, Serialize)]
struct ReloadBody {
    at_s: f64,
    result: &'static str,
    message: String,
}

fn reload_body(e: ReloadEvent, with_paths: bool) -> ReloadBody {
    ReloadBody {
        at_s: e.at_s,
        result: e.result,
        message: if with_paths { e.message } else { e.public },
    }
}

/// `GET /ui/api/live`.
pub(super) async fn live(State(state): State<AppState>) -> Response {
    let shared = &state.shared;
    shared.stats.watch();
    let loaded = shared.loaded.load();
    let features = loaded
        .registry
        .features()
        .iter()
        .zip(&loaded.metrics.features)
        .filter_map(|(f, m)| {
            let live = m.live_if_kept()?;
            let s = live.requests.summary();
            Some(FeatureLiveBody {
                name: f.name.to_string(),
                qps: s.rate,
                p50: s.p50,
                p99: s.p99,
                errors_per_s: live.errors.rate(),
            })
        })
        .collect();
    let outage = shared.store_watch.outage();
    let store = StoreLive {
        backend: shared.store.backend(),
        available: outage.is_none(),
        reason: outage.as_ref().map(oka_storage::Outage::reason),
        out_for_s: outage.as_ref().map(|o| o.since.elapsed().as_secs_f64()),
        outages: shared.store_watch.outages(),
    };
    let cache = shared.store.cache_stats().map(|c| CacheLive {
        enabled: c.enabled,
        hits: c.hits,
        misses: c.misses,
        bytes: c.bytes,
        max_bytes: c.max_bytes,
        entries: c.entries,
        evictions: c.evictions,
        invalidations: c.invalidations,
        resets: c.resets,
    });
    // Without an admin key configured the console is open: no file paths then,
    // as `POST /admin/reload` answers an unauthenticated caller.
    let with_paths = loaded.keys.admin_enabled();
    let reloads = shared
        .stats
        .reloads()
        .into_iter()
        .map(|e| reload_body(e, with_paths))
        .collect();
    super::json(&Live {
        at_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        window_s: WINDOW_S,
        stats: shared.stats.body(),
        errors_per_s: shared.stats.errors.rate(),
        shed_per_s: shared.stats.shed.rate(),
        in_flight: shared.metrics.in_flight().get(),
        draining: shared.is_draining(),
        features,
        store,
        cache,
        reloads,
        udf_runtimes: loaded.runtimes.iter().map(|r| r.summary()).collect(),
    })
}
