//! Offset commits, off the consumer's task: a thread of its own commits each
//! request synchronously, in order, so its outcome is known (librdkafka reports
//! nothing back for an asynchronous manual commit) and the consumer never
//! waits for the broker. Requests that queue up while one is in flight are
//! merged into one commit, the later offset of a partition winning.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, warn};

use crate::error::reason;
use crate::metrics::FeatureMetrics;

/// Offsets to commit: partition → the next offset to read.
pub type Offsets = BTreeMap<i32, i64>;

/// The committing thread of one consumer.
#[derive(Debug)]
pub struct Committer {
    tx: Option<mpsc::Sender<Offsets>>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// Starts the thread committing for `consumer`, which reads `topic`.
    pub fn spawn<X, C>(
        consumer: Arc<C>,
        topic: Arc<str>,
        feature: Arc<str>,
        metrics: FeatureMetrics,
    ) -> std::io::Result<Self>
    where
        X: ConsumerContext,
        C: Consumer<X> + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::channel::<Offsets>();
        let thread = std::thread::Builder::new()
            .name(format!("oka-commit-{feature}"))
            .spawn(move || {
                while let Ok(mut offsets) = rx.recv() {
                    while let Ok(more) = rx.try_recv() {
                        offsets.extend(more);
                    }
                    commit::<X, C>(&consumer, &topic, &feature, &metrics, &offsets);
                }
            })?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a commit of `offsets`.
    pub fn commit(&self, offsets: Offsets) {
        if let Some(tx) = &self.tx {
            // The thread ends only after `finish`; a send cannot fail before.
            let _ = tx.send(offsets);
        }
    }

    /// Commits what is queued and ends the thread.
    pub fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Commits `offsets` of `topic` and waits for the broker's answer; counted and,
/// on failure, logged.
pub fn commit<X: ConsumerContext, C: Consumer<X>>(
    consumer: &C,
    topic: &str,
    feature: &str,
    metrics: &FeatureMetrics,
    offsets: &Offsets,
) -> bool {
    if offsets.is_empty() {
        return true;
    }
    let mut tpl = TopicPartitionList::with_capacity(offsets.len());
    for (&p, &next) in offsets {
        // A valid offset: adding it cannot fail.
        let _ = tpl.add_partition_offset(topic, p, Offset::Offset(next));
    }
    match consumer.commit(&tpl, CommitMode::Sync) {
        Ok(()) => {
            metrics.commit(true);
            debug!(feature, partitions = offsets.len(), "offsets committed");
            true
        }
        Err(e) => {
            metrics.commit(false);
            warn!(feature, topic, error = %reason(&e), "committing offsets failed; the next commit includes them, or their records are read again");
            false
        }
    }
}
