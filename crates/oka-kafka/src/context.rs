//! The consumer's callbacks from librdkafka: rebalances (commit what the store
//! acknowledged before partitions go), statistics (the lag
//! gauges) and logs, all run inside the consumer's poll on the source's task.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, TopicPartitionList};
use tracing::{debug, info, warn};

use crate::commit::{self, Offsets};
use crate::error::reason;
use crate::lag::Partitions;
use crate::metrics::FeatureMetrics;

/// What the source's task and its callbacks share.
#[derive(Debug)]
pub struct Context {
    feature: Arc<str>,
    topic: Arc<str>,
    metrics: FeatureMetrics,
    partitions: Arc<Partitions>,
    held: parking_lot::Mutex<Held>,
    generation: AtomicU64,
    joined: AtomicBool,
}

/// The partitions held now, and the offsets the store acknowledged for them.
#[derive(Debug, Default)]
struct Held {
    assigned: BTreeSet<i32>,
    acked: BTreeMap<i32, i64>,
}

impl Context {
    /// The context of the source of `feature` reading `topic`.
    pub fn new(
        feature: Arc<str>,
        topic: Arc<str>,
        metrics: FeatureMetrics,
        partitions: Arc<Partitions>,
    ) -> Self {
        Self {
            feature,
            topic,
            metrics,
            partitions,
            held: parking_lot::Mutex::default(),
            generation: AtomicU64::new(0),
            joined: AtomicBool::new(false),
        }
    }

    /// Bumped at every assignment (a new assignment starts unpaused).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether the consumer has been through its first assignment.
    pub fn joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    /// The partitions held now, as a list for pause and resume.
    pub fn assignment(&self) -> TopicPartitionList {
        let held = self.held.lock();
        let mut tpl = TopicPartitionList::with_capacity(held.assigned.len());
        for &p in &held.assigned {
            tpl.add_partition(&self.topic, p);
        }
        tpl
    }

    /// Records that the store acknowledged everything of each partition before
    /// its offset; the offsets to commit: those of partitions still assigned.
    pub fn acknowledged(&self, spans: impl Iterator<Item = (i32, i64)>) -> Offsets {
        let mut held = self.held.lock();
        let mut out = Offsets::new();
        for (p, next) in spans {
            if held.assigned.contains(&p) {
                held.acked.insert(p, next);
                out.insert(p, next);
            }
        }
        out
    }

    /// Every acknowledged offset of the partitions held now.
    pub fn all_acknowledged(&self) -> Offsets {
        self.held.lock().acked.clone()
    }

    fn partitions_of(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect()
    }

    fn revoked(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let gone = self.partitions_of(tpl);
        let commit = {
            let mut held = self.held.lock();
            let mut commit = Offsets::new();
            for p in &gone {
                held.assigned.remove(p);
                if let Some(next) = held.acked.remove(p) {
                    commit.insert(*p, next);
                }
            }
            commit
        };
        // Commit what the store acknowledged before another member takes over;
        // what was not acknowledged is read again there.
        commit::commit(consumer, &self.topic, &self.feature, &self.metrics, &commit);
        self.partitions.revoke(&self.feature, &gone);
        let held = self.held.lock().assigned.len();
        self.metrics.rebalance(false, held);
        info!(feature = %self.feature, topic = %self.topic, partitions = ?gone, "partitions revoked");
    }

    fn assigned(&self, tpl: &TopicPartitionList) {
        let got = self.partitions_of(tpl);
        let held = {
            let mut held = self.held.lock();
            held.assigned.extend(got.iter().copied());
            held.assigned.len()
        };
        self.partitions.assign(&self.feature, &self.topic, &got);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.joined.store(true, Ordering::Release);
        self.metrics.rebalance(true, held);
        info!(feature = %self.feature, topic = %self.topic, partitions = ?got, "partitions assigned");
    }
}

impl ClientContext for Context {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error | L::Warning => {
                warn!(feature = %self.feature, facility = fac, "kafka: {message}");
            }
            L::Notice | L::Info => {
                info!(feature = %self.feature, facility = fac, "kafka: {message}")
            }
            L::Debug => debug!(feature = %self.feature, facility = fac, "kafka: {message}"),
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, why: &str) {
        warn!(feature = %self.feature, topic = %self.topic, error = %reason(&error), detail = why, "kafka client error");
    }

    fn stats(&self, stats: Statistics) {
        let Some(topic) = stats.topics.get(&*self.topic) else {
            return;
        };
        for (p, s) in &topic.partitions {
            if *p >= 0 {
                self.partitions
                    .watermark(&self.feature, *p, s.hi_offset, s.committed_offset);
            }
        }
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => self.revoked(consumer, tpl),
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => {
                warn!(feature = %self.feature, topic = %self.topic, error = %reason(e), "consumer group rebalance failed");
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            self.assigned(tpl);
        }
    }

    // Commits are synchronous (`commit.rs`): librdkafka reports nothing here
    // for them, so this callback is left to its default.
}
