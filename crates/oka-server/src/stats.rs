//! Windowed request statistics for `/stats`, in Volga's field names: `qps`,
//! `server_p50/p75/p95/p99/avg` and `db_p50/p75/p95/p99/avg` (milliseconds) over the
//! last [`WINDOW_S`] complete seconds.
//!
//! Each second has a slot of log-linear latency buckets (8 per power of two, so a
//! percentile is within ~9% of the true value, not Volga's 10 ms steps). Slots are
//! reused round-robin; recording is lock-free.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Seconds in the window.
pub const WINDOW_S: u64 = 5;
const SLOTS: usize = 8;
const SUB: f64 = 8.0;
const BUCKETS: usize = 8 * 40; // up to 2^40 µs

#[derive(Debug)]
struct Slot {
    second: AtomicU64,
    counts: Box<[AtomicU64]>,
    sum_us: AtomicU64,
    n: AtomicU64,
}

impl Slot {
    fn new() -> Self {
        Self {
            second: AtomicU64::new(0),
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            n: AtomicU64::new(0),
        }
    }
}

/// A latency distribution over a sliding window of seconds.
#[derive(Debug)]
pub struct Window {
    slots: Box<[Slot]>,
}

fn bucket(us: f64) -> usize {
    if us <= 1.0 {
        return 0;
    }
    ((us.log2() * SUB) as usize).min(BUCKETS - 1)
}

fn bucket_upper_us(i: usize) -> f64 {
    2f64.powf((i as f64 + 1.0) / SUB)
}

/// The stats clock in whole seconds: the wall clock's at the first reading,
/// advanced by the monotonic clock since, so a recorder that has read
/// [`Instant::now`] for its latency need not read a second clock ([`Window::record_at`]).
fn second_at(at: Instant) -> u64 {
    static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();
    let (start, wall) = *EPOCH.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        (Instant::now(), wall)
    });
    wall + at.saturating_duration_since(start).as_secs()
}

fn now_s() -> u64 {
    second_at(Instant::now())
}

impl Default for Window {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| Slot::new()).collect(),
        }
    }
}

/// A window's summary, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Events per second.
    pub rate: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub avg: f64,
}

impl Window {
    /// Records one latency now.
    pub fn record(&self, d: Duration) {
        self.record_in(now_s(), d);
    }

    /// Records one latency that ended at `at`.
    pub fn record_at(&self, at: Instant, d: Duration) {
        self.record_in(second_at(at), d);
    }

    fn record_in(&self, sec: u64, d: Duration) {
        let slot = &self.slots[(sec as usize) % SLOTS];
        let seen = slot.second.load(Ordering::Acquire);
        if seen != sec
            && slot
                .second
                .compare_exchange(seen, sec, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // This slot last held an older second: clear it. A recorder racing with
            // the clear may lose one sample; that is acceptable for a stats window.
            for c in slot.counts.iter() {
                c.store(0, Ordering::Relaxed);
            }
            slot.sum_us.store(0, Ordering::Relaxed);
            slot.n.store(0, Ordering::Relaxed);
        }
        let us = d.as_secs_f64() * 1e6;
        slot.counts[bucket(us)].fetch_add(1, Ordering::Relaxed);
        slot.sum_us.fetch_add(us as u64, Ordering::Relaxed);
        slot.n.fetch_add(1, Ordering::Relaxed);
    }

    /// The last [`WINDOW_S`] complete seconds.
    pub fn summary(&self) -> Summary {
        self.summary_at(now_s())
    }

    fn summary_at(&self, now: u64) -> Summary {
        let mut counts = vec![0u64; BUCKETS];
        let (mut n, mut sum) = (0u64, 0u64);
        for s in self.slots.iter() {
            let sec = s.second.load(Ordering::Acquire);
            if sec < now && sec + WINDOW_S >= now {
                for (acc, c) in counts.iter_mut().zip(s.counts.iter()) {
                    *acc += c.load(Ordering::Relaxed);
                }
                n += s.n.load(Ordering::Relaxed);
                sum += s.sum_us.load(Ordering::Relaxed);
            }
        }
        if n == 0 {
            return Summary::default();
        }
        let pct = |p: f64| {
            let rank = ((p * n as f64).ceil() as u64).max(1);
            let mut cum = 0;
            for (i, c) in counts.iter().enumerate() {
                cum += c;
                if cum >= rank {
                    return round3(bucket_upper_us(i) / 1e3);
                }
            }
            0.0
        };
        Summary {
            rate: n as f64 / WINDOW_S as f64,
            p50: pct(0.50),
            p75: pct(0.75),
            p95: pct(0.95),
            p99: pct(0.99),
            avg: round3(sum as f64 / n as f64 / 1e3),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// Events per second over a sliding window of seconds (no latencies): errors,
/// shed requests. Recording is one or two atomic operations.
#[derive(Debug, Default)]
pub struct Counts {
    slots: [(AtomicU64, AtomicU64); SLOTS],
}

impl Counts {
    /// Records `n` events now.
    pub fn add(&self, n: u64) {
        self.add_at(now_s(), n);
    }

    fn add_at(&self, sec: u64, n: u64) {
        let (second, count) = &self.slots[(sec as usize) % SLOTS];
        let seen = second.load(Ordering::Acquire);
        if seen != sec
            && second
                .compare_exchange(seen, sec, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            count.store(0, Ordering::Relaxed);
        }
        count.fetch_add(n, Ordering::Relaxed);
    }

    /// Events per second over the last [`WINDOW_S`] complete seconds.
    pub fn rate(&self) -> f64 {
        self.rate_at(now_s())
    }

    /// Every event still in the window's slots, the current second's included.
    #[cfg(test)]
    pub(crate) fn recorded(&self) -> u64 {
        self.slots
            .iter()
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum()
    }

    fn rate_at(&self, now: u64) -> f64 {
        let n: u64 = self
            .slots
            .iter()
            .filter(|(s, _)| {
                let sec = s.load(Ordering::Acquire);
                sec < now && sec + WINDOW_S >= now
            })
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum();
        n as f64 / WINDOW_S as f64
    }
}

/// One feature's live statistics, kept while a console watches (`/ui`).
#[derive(Debug, Default)]
pub struct FeatureLive {
    /// Requests that targeted the feature: their latency up to the UDFs' end.
    pub requests: Window,
    /// Keys answered `error` for it, and requests that failed after naming it.
    pub errors: Counts,
}

/// How long per-feature statistics are kept after the console last asked for
/// them: with nobody looking, the request path records none.
pub const WATCH_S: u64 = 30;

/// The reloads a console shows.
const RELOADS_KEPT: usize = 20;

/// One reload, as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ReloadEvent {
    /// When it finished, seconds since the Unix epoch.
    pub at_s: f64,
    /// `ok` or `invalid`.
    pub result: &'static str,
    /// What is served now (`ok`), or why the new spec was refused (`invalid`;
    /// with file paths).
    #[serde(skip)]
    pub message: String,
    /// The same without file paths, for a caller without an admin key.
    #[serde(skip)]
    pub public: String,
}

impl ReloadEvent {
    /// A reload that finished now.
    pub fn now(result: &'static str, message: String, public: String) -> Self {
        let at_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Self {
            at_s,
            result,
            message,
            public,
        }
    }
}

/// Server and store latency windows.
#[derive(Debug, Default)]
pub struct Stats {
    /// Whole feature requests, as the server saw them (parse to encode).
    pub server: Window,
    /// Store reads.
    pub db: Window,
    /// Feature requests answered with a server error (5xx), shedding aside.
    pub errors: Counts,
    /// Requests shed: refused at admission as overloaded (429/503).
    pub shed: Counts,
    /// Until when (Unix second) per-feature statistics are recorded.
    watched_until: AtomicU64,
    reloads: Mutex<VecDeque<ReloadEvent>>,
}

/// `/stats` body (Volga's names, milliseconds; 0 over a window without requests).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Stats)]
pub struct StatsBody {
    /// Window length in seconds.
    pub window_s: u64,
    /// Feature requests per second.
    pub qps: f64,
    /// Request latency, median, ms.
    pub server_p50: f64,
    /// Request latency, 75th percentile, ms.
    pub server_p75: f64,
    /// Request latency, 95th percentile, ms.
    pub server_p95: f64,
    /// Request latency, 99th percentile, ms.
    pub server_p99: f64,
    /// Request latency, mean, ms.
    pub server_avg: f64,
    /// Store reads per second.
    pub db_qps: f64,
    /// Store read latency, median, ms.
    pub db_p50: f64,
    /// Store read latency, 75th percentile, ms.
    pub db_p75: f64,
    /// Store read latency, 95th percentile, ms.
    pub db_p95: f64,
    /// Store read latency, 99th percentile, ms.
    pub db_p99: f64,
    /// Store read latency, mean, ms.
    pub db_avg: f64,
}

impl Stats {
    /// A console looks: record per-feature statistics for [`WATCH_S`] more seconds.
    pub fn watch(&self) {
        self.watched_until
            .fetch_max(now_s() + WATCH_S, Ordering::Relaxed);
    }

    /// Whether a console looked within [`WATCH_S`] seconds. With no console
    /// watching this is one atomic load: the clock is read only while one is, and
    /// once more when it has gone (which clears the mark).
    pub fn watched(&self) -> bool {
        let until = self.watched_until.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if now_s() <= until {
            return true;
        }
        let _ = self
            .watched_until
            .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed);
        false
    }

    /// Keeps a finished reload for the console (the last [`RELOADS_KEPT`]).
    pub fn reloaded(&self, event: ReloadEvent) {
        if let Ok(mut r) = self.reloads.lock() {
            if r.len() == RELOADS_KEPT {
                r.pop_front();
            }
            r.push_back(event);
        }
    }

    /// The reloads kept, oldest first.
    pub fn reloads(&self) -> Vec<ReloadEvent> {
        self.reloads
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The current window.
    pub fn body(&self) -> StatsBody {
        let s = self.server.summary();
        let d = self.db.summary();
        StatsBody {
            window_s: WINDOW_S,
            qps: s.rate,
            server_p50: s.p50,
            server_p75: s.p75,
            server_p95: s.p95,
            server_p99: s.p99,
            server_avg: s.avg,
            db_qps: d.rate,
            db_p50: d.p50,
            db_p75: d.p75,
            db_p95: d.p95,
            db_p99: d.p99,
            db_avg: d.avg,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_counts_complete_seconds_only() {
        let w = Window::default();
        for _ in 0..10 {
            w.record_in(100, Duration::from_millis(1));
        }
        w.record_in(101, Duration::from_millis(100));
        let s = w.summary_at(101);
        assert_eq!(s.rate, 2.0); // 10 events over 5 s; second 101 is not complete
        assert!((0.9..=1.2).contains(&s.p50), "{s:?}");
        assert_eq!(w.summary_at(200), Summary::default());
    }

    #[test]
    fn percentiles_are_close() {
        let w = Window::default();
        for i in 1..=100 {
            w.record_in(50, Duration::from_micros(i * 100));
        }
        let s = w.summary_at(51);
        assert!((9.0..=11.0).contains(&s.p99), "{s:?}");
        assert!((4.5..=5.6).contains(&s.p50), "{s:?}");
        assert!((5.0..=5.1).contains(&s.avg), "{s:?}");
    }

    #[test]
    fn counts_rate_over_complete_seconds() {
        let c = Counts::default();
        c.add_at(100, 3);
        c.add_at(101, 2);
        c.add_at(102, 7);
        assert_eq!(c.rate_at(102), 1.0); // 5 events over 5 s; 102 is not complete
        c.add_at(100 + SLOTS as u64, 1); // reuses 100's slot
        assert_eq!(c.rate_at(101 + SLOTS as u64), 0.2);
    }

    #[test]
    fn watching_lapses() {
        let s = Stats::default();
        assert!(!s.watched());
        s.watch();
        assert!(s.watched());
        s.watched_until.store(now_s() - 1, Ordering::Relaxed);
        assert!(!s.watched());
        assert_eq!(
            s.watched_until.load(Ordering::Relaxed),
            0,
            "the clock is not read again"
        );
    }

    #[test]
    fn reused_slots_are_cleared() {
        let w = Window::default();
        w.record_in(10, Duration::from_millis(1));
        w.record_in(10 + SLOTS as u64, Duration::from_millis(1));
        assert_eq!(w.summary_at(11 + SLOTS as u64).rate, 1.0 / WINDOW_S as f64);
    }
}
