//! A store's state as its callers see it: available, or out (with the cause),
//! and each change logged once. Every process that talks to a store (`oka serve`,
//! `oka source kafka`) keeps one and reports each call's outcome to it; the
//! per-request path costs one atomic load while the store is available.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::store::{StoreError, StoreErrorKind};

/// The state of one store, fed by the outcomes of its calls.
#[derive(Debug)]
pub struct StoreWatch {
    /// Names the store in the log lines (its URL, password redacted).
    name: String,
    /// The backend (`redis`, `scylla`, `memory`), for the log lines.
    backend: &'static str,
    out: AtomicBool,
    outage: Mutex<Option<Outage>>,
    outages: AtomicU64,
}

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
            out: AtomicBool::new(false),
            outage: Mutex::new(None),
            outages: AtomicU64::new(0),
        }
    }

    /// Reports a call's outcome and hands it back: a failure of the store as a
    /// whole ([`StoreErrorKind::is_outage`]) starts an outage (logged once at
    /// `warn` with its cause, and again only if the cause changes); a success
    /// ends one (logged at `info` with its length).
    pub fn observe<T>(&self, outcome: Result<T, StoreError>) -> Result<T, StoreError> {
        match &outcome {
            Ok(_) => self.available(),
            Err(e) => self.failed(e),
        }
        outcome
    }

    /// A call succeeded.
    pub fn available(&self) {
        if !self.out.load(Ordering::Acquire) || !self.out.swap(false, Ordering::AcqRel) {
            return;
        }
        let outage = self.outage.lock().ok().and_then(|mut o| o.take());
        let secs = outage.map_or(0.0, |o| o.since.elapsed().as_secs_f64());
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
        let Ok(mut outage) = self.outage.lock() else {
            return;
        };
        let cause = e.message.clone();
        let same = outage
            .as_ref()
            .is_some_and(|o| o.kind == e.kind && self.out.load(Ordering::Acquire));
        if same {
            return;
        }
        let since = match outage.as_ref() {
            Some(o) if self.out.load(Ordering::Acquire) => o.since,
            _ => {
                self.outages.fetch_add(1, Ordering::Relaxed);
                Instant::now()
            }
        };
        let now = Outage {
            kind: e.kind,
            cause,
            since,
        };
        tracing::warn!(
            store = %self.name,
            backend = self.backend,
            kind = e.kind.label(),
            cause = %now.cause,
            advice = e.kind.advice(),
            "{}",
            e.kind.describe()
        );
        *outage = Some(now);
        self.out.store(true, Ordering::Release);
    }

    /// The outage in progress, if the store is out.
    pub fn outage(&self) -> Option<Outage> {
        if !self.out.load(Ordering::Acquire) {
            return None;
        }
        self.outage.lock().ok().and_then(|o| o.clone())
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
        let w = StoreWatch::new("redis://h:1", "redis");
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
}
