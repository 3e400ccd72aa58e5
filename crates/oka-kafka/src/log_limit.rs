//! A bound on how often a repeated warning is logged: a stream of bad records
//! is counted in full by the metrics, but only a few per window reach the log.

use std::time::Duration;

use std::time::Instant;

/// Admits up to `per_window` events per window.
#[derive(Debug)]
pub struct LogLimit {
    window: Duration,
    per_window: u32,
    started: Option<Instant>,
    admitted: u32,
    dropped: u64,
}

impl LogLimit {
    /// At most `per_window` events every `window`.
    pub fn new(window: Duration, per_window: u32) -> Self {
        Self {
            window,
            per_window,
            started: None,
            admitted: 0,
            dropped: 0,
        }
    }

    /// `Some(n)` when this event is to be logged, `n` being how many were not
    /// since the last one logged; `None` when it is not.
    pub fn admit(&mut self) -> Option<u64> {
        self.admit_at(Instant::now())
    }

    fn admit_at(&mut self, now: Instant) -> Option<u64> {
        if self
            .started
            .is_none_or(|s| now.duration_since(s) >= self.window)
        {
            self.started = Some(now);
            self.admitted = 0;
        }
        if self.admitted < self.per_window {
            self.admitted += 1;
            Some(std::mem::take(&mut self.dropped))
        } else {
            self.dropped += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_per_window_then_the_count_of_the_rest() {
        let mut l = LogLimit::new(Duration::from_secs(1), 2);
        let t = Instant::now();
        assert_eq!(l.admit_at(t), Some(0));
        assert_eq!(l.admit_at(t), Some(0));
        assert_eq!(l.admit_at(t), None);
        assert_eq!(l.admit_at(t + Duration::from_millis(500)), None);
        assert_eq!(l.admit_at(t + Duration::from_secs(1)), Some(2));
        assert_eq!(l.admit_at(t + Duration::from_secs(1)), Some(0));
    }
}
