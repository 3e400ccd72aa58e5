//! Where each assigned partition stands, for the lag gauges: the broker's high
//! watermark (from librdkafka's statistics), the next offset to commit (from
//! the batches the store acknowledged), and the Kafka timestamps of the records
//! received and not yet written.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use oka_core::Timestamp;

/// One partition's lag, as exposed.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLag {
    /// The feature consuming it.
    pub feature: Arc<str>,
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// Records produced and not yet written.
    pub records: i64,
    /// Seconds the oldest record not yet written has waited; 0 when caught up.
    pub seconds: f64,
}

#[derive(Debug)]
struct State {
    topic: Arc<str>,
    /// The high watermark, when the statistics have given one.
    high: Option<i64>,
    /// The next offset to commit: written batches', else the group's committed one.
    next: Option<i64>,
    /// The Kafka timestamp (ms) of the last record written.
    last_written_ms: Option<i64>,
    /// (batch number, Kafka timestamp in ms of its first record of this
    /// partition) for every batch received and not yet written, oldest first.
    outstanding: VecDeque<(u64, i64)>,
}

/// The assigned partitions of every consumer in the process.
#[derive(Debug, Default)]
pub struct Partitions {
    inner: parking_lot::Mutex<HashMap<(Arc<str>, i32), State>>,
}

impl Partitions {
    /// `partitions` of `topic` were assigned to the consumer of `feature`.
    pub fn assign(&self, feature: &Arc<str>, topic: &Arc<str>, partitions: &[i32]) {
        let mut inner = self.inner.lock();
        for &p in partitions {
            inner.insert(
                (Arc::clone(feature), p),
                State {
                    topic: Arc::clone(topic),
                    high: None,
                    next: None,
                    last_written_ms: None,
                    outstanding: VecDeque::new(),
                },
            );
        }
    }

    /// `partitions` were taken from the consumer of `feature`.
    pub fn revoke(&self, feature: &Arc<str>, partitions: &[i32]) {
        let mut inner = self.inner.lock();
        for &p in partitions {
            inner.remove(&(Arc::clone(feature), p));
        }
    }

    /// The statistics' view of a partition: its high watermark and the group's
    /// committed offset (negative when unknown).
    pub fn watermark(&self, feature: &Arc<str>, partition: i32, high: i64, committed: i64) {
        if let Some(s) = self.inner.lock().get_mut(&(Arc::clone(feature), partition)) {
            s.high = (high >= 0).then_some(high);
            if s.next.is_none() && committed >= 0 {
                s.next = Some(committed);
            }
        }
    }

    /// Batch `batch` holds records of `partition`, the first with Kafka timestamp
    /// `ts_ms`.
    pub fn received(&self, feature: &Arc<str>, partition: i32, batch: u64, ts_ms: i64) {
        if let Some(s) = self.inner.lock().get_mut(&(Arc::clone(feature), partition)) {
            s.outstanding.push_back((batch, ts_ms));
        }
    }

    /// Batch `batch` was written: its records of `partition` end before `next`,
    /// the last with Kafka timestamp `last_ms`.
    pub fn written(&self, feature: &Arc<str>, partition: i32, batch: u64, next: i64, last_ms: i64) {
        if let Some(s) = self.inner.lock().get_mut(&(Arc::clone(feature), partition)) {
            while s.outstanding.front().is_some_and(|(b, _)| *b <= batch) {
                s.outstanding.pop_front();
            }
            s.next = Some(next);
            s.last_written_ms = Some(last_ms);
        }
    }

    /// Every known partition's lag at `now`, by feature and partition.
    pub fn lags(&self, now: Timestamp) -> Vec<PartitionLag> {
        let now_ms = now.0 / 1000;
        let age = |ms: i64| ((now_ms - ms) as f64 / 1e3).max(0.0);
        let mut out: Vec<PartitionLag> = self
            .inner
            .lock()
            .iter()
            .filter_map(|((feature, partition), s)| {
                let records = (s.high? - s.next.unwrap_or(0)).max(0);
                let seconds = match (s.outstanding.front(), s.last_written_ms) {
                    (Some((_, ts)), _) => age(*ts),
                    (None, Some(last)) if records > 0 => age(last),
                    _ => 0.0,
                };
                Some(PartitionLag {
                    feature: Arc::clone(feature),
                    topic: Arc::clone(&s.topic),
                    partition: *partition,
                    records,
                    seconds,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.feature, a.partition).cmp(&(&b.feature, b.partition)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_follows_watermarks_writes_and_waiting_records() {
        let p = Partitions::default();
        let (f, t): (Arc<str>, Arc<str>) = ("f".into(), "t".into());
        p.assign(&f, &t, &[0, 1]);
        assert!(p.lags(Timestamp(0)).is_empty(), "no watermark yet");
        p.watermark(&f, 0, 100, 40);
        p.watermark(&f, 1, 10, -1);
        let now = Timestamp(1_000_000_000); // 1000 s
        let lags = p.lags(now);
        assert_eq!((lags[0].records, lags[0].seconds), (60, 0.0));
        assert_eq!(lags[1].records, 10, "nothing committed: all of it");
        p.received(&f, 0, 7, 990_000);
        assert_eq!(p.lags(now)[0].seconds, 10.0, "waiting since 990 s");
        p.written(&f, 0, 7, 100, 995_000);
        let lags = p.lags(now);
        assert_eq!((lags[0].records, lags[0].seconds), (0, 0.0), "caught up");
        p.watermark(&f, 0, 150, 100);
        assert_eq!(
            p.lags(now)[0].seconds,
            5.0,
            "behind: at most since the last written"
        );
        p.revoke(&f, &[0]);
        assert_eq!(p.lags(now).len(), 1);
    }
}
