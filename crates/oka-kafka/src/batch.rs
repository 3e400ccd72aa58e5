//! A batch: the records of consecutive messages (any partitions), the messages
//! that were rejected, and for each partition the offset to commit once the
//! batch is written.

use std::collections::BTreeMap;

use oka_core::{EntityKey, Row};
use tokio::time::Instant;

use crate::message::Rejection;

/// A message that is not a record, kept for the log and the dead-letter topic.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Why.
    pub rejection: Rejection,
    /// Its key, kept only for a dead-letter topic.
    pub key: Option<Vec<u8>>,
    /// Its value, kept only for a dead-letter topic.
    pub payload: Option<Vec<u8>>,
}

/// A message that carried a sampled trace context (`traceparent`): its write
/// gets a span in that trace.
#[derive(Debug, Clone)]
pub struct Traced {
    /// The producer's span, the write span's parent.
    pub parent: oka_telemetry::trace::SpanContext,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// When it was received (the write span's start).
    pub received: std::time::SystemTime,
}

/// One partition's messages in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The offset after its last message: what is committed once written.
    pub next: i64,
    /// The Kafka timestamp (ms) of its last message.
    pub last_ms: i64,
}

/// Messages received, to be written together.
#[derive(Debug)]
pub struct Batch {
    /// Its number: batches are acknowledged in this order.
    pub seq: u64,
    /// When it is handed over even if not full.
    pub deadline: Instant,
    /// The records.
    pub rows: Vec<(EntityKey, Row)>,
    /// Each record's Kafka timestamp (ms), parallel to `rows`.
    pub kafka_ms: Vec<i64>,
    /// The rejected messages.
    pub rejected: Vec<Rejected>,
    /// Per partition: where its messages end.
    pub spans: BTreeMap<i32, Span>,
    /// Messages in it, records and rejected.
    pub messages: usize,
    /// Its messages that carried a sampled trace context (only with a tracer).
    pub traced: Vec<Traced>,
}

impl Batch {
    /// An empty batch number `seq`, due at `deadline`.
    pub fn new(seq: u64, deadline: Instant) -> Self {
        Self {
            seq,
            deadline,
            rows: Vec::new(),
            kafka_ms: Vec::new(),
            rejected: Vec::new(),
            spans: BTreeMap::new(),
            messages: 0,
            traced: Vec::new(),
        }
    }

    /// Adds the message at `partition`/`offset` with Kafka timestamp `ts_ms`;
    /// true when it is the batch's first of that partition.
    pub fn add(
        &mut self,
        partition: i32,
        offset: i64,
        ts_ms: i64,
        outcome: Result<(EntityKey, Row), Rejected>,
    ) -> bool {
        self.messages += 1;
        match outcome {
            Ok(record) => {
                self.rows.push(record);
                self.kafka_ms.push(ts_ms);
            }
            Err(rejected) => self.rejected.push(rejected),
        }
        let span = Span {
            next: offset.saturating_add(1),
            last_ms: ts_ms,
        };
        match self.spans.insert(partition, span) {
            // After a rebalance a partition may restart from an earlier offset
            // within the batch: what is committed is the furthest point reached.
            Some(before) if before.next > span.next => {
                self.spans.insert(partition, before);
                false
            }
            Some(_) => false,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Reason, Rejection};

    #[test]
    fn spans_end_after_each_partitions_furthest_message() {
        let mut b = Batch::new(1, Instant::now());
        let row = || {
            Ok((
                EntityKey::encode(&[oka_core::Value::from("a")]),
                Row::new(oka_core::Timestamp(0), vec![]),
            ))
        };
        assert!(b.add(0, 10, 100, row()));
        assert!(b.add(1, 5, 101, row()));
        let bad = Rejected {
            partition: 0,
            offset: 11,
            rejection: Rejection {
                reason: Reason::NotJson,
                message: "x".into(),
            },
            key: None,
            payload: None,
        };
        assert!(!b.add(0, 11, 102, Err(bad)));
        assert!(!b.add(1, 3, 103, row()), "a replay after a rebalance");
        assert_eq!(
            b.spans[&0],
            Span {
                next: 12,
                last_ms: 102
            }
        );
        assert_eq!(
            b.spans[&1],
            Span {
                next: 6,
                last_ms: 101
            }
        );
        assert_eq!((b.messages, b.rows.len(), b.rejected.len()), (4, 3, 1));
    }
}
