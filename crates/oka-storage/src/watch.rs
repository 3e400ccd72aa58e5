//! A store's state as its callers see it: available, or out (with the cause),
//! and each change logged once. Every process that talks to a store (`oka serve`,
//! `oka source kafka`) keeps one and reports each call's outcome to it; the
//! per-request path costs one atomic load while the store is available.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::store::{StoreError, StoreErrorKind};

/// The state of one store, fed by the outcomes of its calls.
#[derive(Debug)]
pub struct StoreWatch {
    /// Names the store in the log lines (its URL, password redacted).
    name: String,
    /// The backend (`redis`, `scylla`, `memory`), for the log lines.
    backend: &'static str,
    /// How long transient failures must go on, without a success between them,
    /// before they are an outage.
    confirm: Duration,
    /// Set while calls fail (confirmed or not): the success path looks only here.
    failing: AtomicBool,
    /// Set while an outage is declared.
    out: AtomicBool,
    state: Mutex<State>,
    outages: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// When the current run of failures began.
    failing_since: Option<Instant>,
    /// The outage declared, if any.
    outage: Option<Outage>,
}

/// How long transient failures must last to be an outage, by default: a store
/// going down answers some calls still while it closes its connections (a Redis
/// shutting down did for 0.2 s in a test), which would otherwise be logged as an
/// outage, a recovery and an outage again.
pub const CONFIRM_AFTER: Duration = Duration::from_millis(500);

/// Why and since when the store is out.
#[derive(Debug, Clone)]
pub struct Outage {
    /// The kind of the failure that started it (or of the latest, if the cause
    /// changed).
    pub kind: StoreErrorKind,
    /// The failure in words (the backend's message, never a password).
    pub cause: String,
    /// When it started.
    pub since: Instant,
}

impl Outage {
    /// One line for operators: what is wrong, and what to check.
    pub fn reason(&self) -> String {
        StoreError::new(self.kind, self.cause.clone()).explain()
    }
}

impl StoreWatch {
    /// A watch of the store `name` (its URL, redacted) of `backend`; the store is
    /// taken to be available (it was just opened).
    pub fn new(name: impl Into<String>, backend: &'static str) -> Self {
        Self {
            name: name.into(),
            backend,
            confirm: CONFIRM_AFTER,
            failing: AtomicBool::new(false),
            out: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            outages: AtomicU64::new(0),
        }
    }

    /// The same, confirming transient failures after `confirm` instead of
    /// [`CONFIRM_AFTER`].
    #[must_use]
    pub fn confirm_after(mut self, confirm: Duration) -> Self {
        self.confirm = confirm;
        self
    }

    /// Reports a call's outcome and hands it back: a failure of the store as a
    /// whole ([`StoreErrorKind::is_outage`]) starts an outage, logged once at
    /// `warn` with its cause (and again only if its kind changes): at once when
    /// it is not transient (credentials refused, misconfigured), after failures
    /// lasting [`CONFIRM_AFTER`] when it is. A success ends one (logged at `info`
    /// with its length).
    pub fn observe<T>(&self, outcome: Result<T, StoreError>) -> Result<T, StoreError> {
        match &outcome {
            Ok(_) => self.available(),
            Err(e) => self.failed(e),
        }
        outcome
    }

    /// A call succeeded.
    pub fn available(&self) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        self.failing.store(false, Ordering::Release);
        self.out.store(false, Ordering::Release);
        state.failing_since = None;
        let Some(outage) = state.outage.take() else {
            return;
        };
        let secs = outage.since.elapsed().as_secs_f64();
        tracing::info!(
            store = %self.name,
            backend = self.backend,
            out_for_s = (secs * 10.0).round() / 10.0,
            "the store is available again"
        );
    }

    /// A call failed.
    pub fn failed(&self, e: &StoreError) {
        if !e.kind.is_outage() {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        self.failing.store(true, Ordering::Release);
        let now = Instant::now();
        let since = *state.failing_since.get_or_insert(now);
        if let Some(o) = &state.outage {
            if o.kind == e.kind {
                return;
            }
        } else if e.kind.is_transient() && now.duration_since(since) < self.confirm {
            return;
        }
        if state.outage.is_none() {
            self.outages.fetch_add(1, Ordering::Relaxed);
        }
        let outage = Outage {
            kind: e.kind,
            cause: e.message.clone(),
            since,
        };
        tracing::warn!(
            store = %self.name,
            backend = self.backend,
            kind = e.kind.label(),
            cause = %outage.cause,
            advice = e.kind.advice(),
            "{}",
            e.kind.describe()
        );
        state.outage = Some(outage);
        self.out.store(true, Ordering::Release);
    }

    /// The store's name (its URL, password redacted).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The outage in progress, if the store is out.
    pub fn outage(&self) -> Option<Outage> {
        if !self.out.load(Ordering::Acquire) {
            return None;
        }
        self.state.lock().ok().and_then(|s| s.outage.clone())
    }

    /// Outages begun so far (for metrics).
    pub fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: StoreErrorKind) -> StoreError {
        StoreError::new(kind, "redis: the connection was refused")
    }

    #[test]
    fn an_outage_starts_once_changes_cause_and_ends() {
        let w = StoreWatch::new("redis://h:1", "redis").confirm_after(Duration::ZERO);
        assert!(w.outage().is_none());
        let _ = w.observe::<()>(Err(err(StoreErrorKind::Unavailable)));
        let _ = w.observe::<()>(Err(err(StoreErrorKind::Unavailable)));
        assert_eq!(w.outages(), 1);
        let o = w.outage().expect("out");
        assert_eq!(o.kind, StoreErrorKind::Unavailable);
        assert!(
            o.reason().contains("check that the store is running"),
            "{}",
            o.reason()
        );
        // A new cause within the same outage: the kind changes, the outage goes on.
        w.failed(&err(StoreErrorKind::Unauthorized));
        assert_eq!(
            w.outage().map(|o| o.kind),
            Some(StoreErrorKind::Unauthorized)
        );
        assert_eq!(w.outages(), 1);
        // One call's data failing is no outage.
        assert!(w.observe(Ok(1)).is_ok());
        assert!(w.outage().is_none());
        w.failed(&err(StoreErrorKind::Corrupt));
        assert!(w.outage().is_none());
        w.failed(&err(StoreErrorKind::Timeout));
        assert_eq!(w.outages(), 2);
    }

    #[test]
    fn transient_failures_are_an_outage_once_they_last() {
        let w = StoreWatch::new("redis://h:1", "redis").confirm_after(Duration::from_millis(50));
        w.failed(&err(StoreErrorKind::Unavailable));
        assert!(w.outage().is_none(), "one failure is not yet an outage");
        // A success between failures: the run starts again.
        w.available();
        w.failed(&err(StoreErrorKind::Unavailable));
        std::thread::sleep(Duration::from_millis(60));
        w.failed(&err(StoreErrorKind::Unavailable));
        let o = w.outage().expect("out after 50 ms of failures");
        assert!(
            o.since.elapsed() >= Duration::from_millis(60),
            "since the first failure"
        );
        assert_eq!(w.outages(), 1);
        // Refused credentials are an outage at once.
        let w = StoreWatch::new("redis://h:1", "redis");
        w.failed(&err(StoreErrorKind::Unauthorized));
        assert_eq!(
            w.outage().map(|o| o.kind),
            Some(StoreErrorKind::Unauthorized)
        );
    }
}
