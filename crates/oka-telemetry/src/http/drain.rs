//! The drain: a flag the server sets once, that connections look at as they
//! answer and that an idle HTTP/2 connection waits on ([`Drain::started`]).

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Set once, when the server starts to drain: answers then carry `connection:
/// close`, HTTP/2 connections get their GOAWAY. A listener whose clients should
/// keep their connections (an admin port's probes and scrapers) is given one
/// never started.
#[derive(Debug, Default)]
pub struct Drain {
    started: AtomicBool,
    notify: Notify,
}

impl Drain {
    /// A drain not started.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the drain (again: nothing), waking whatever waits on
    /// [`Self::started`].
    pub fn start(&self) {
        self.started.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether the drain has started.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Resolves once the drain has started (at once if it has).
    pub async fn started(&self) {
        loop {
            // Registered before the flag is read: a start between the two
            // still wakes this waiter.
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            if self.is_started() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn waiters_wake_when_the_drain_starts_and_later_ones_at_once() {
        let drain = Arc::new(Drain::new());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let d = Arc::clone(&drain);
                tokio::spawn(async move { d.started().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        assert!(!drain.is_started());
        drain.start();
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("a waiter was not woken")
                .unwrap();
        }
        tokio::time::timeout(Duration::from_secs(1), drain.started())
            .await
            .expect("a wait after the start did not return at once");
        drain.start();
        assert!(drain.is_started());
    }
}
