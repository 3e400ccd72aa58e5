//! One source's consumer: receive messages into a batch, hand full (or due)
//! batches to the write path, and commit each batch's offsets once the store has
//! acknowledged it and every batch before it.
//!
//! At most `in_flight` batches are written at once. When they are all busy and
//! the next batch is full, the consumer stops taking messages (librdkafka's
//! pre-fetch queue is bounded by `queued.max.messages.kbytes`). If that lasts
//! [`PAUSE_AFTER`] (the store is slow or down), the assigned partitions are
//! paused and the consumer polls again, so that it serves rebalances and stays
//! in its group however long the store is down; they are resumed once a batch
//! is acknowledged. (Pausing drops librdkafka's pre-fetched messages, to be
//! fetched again on resume: too costly for every short wait.)

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use oka_core::{Entity, Registry, Timestamp};
use oka_ingest::{RecordParser, WritePath};
use oka_telemetry::trace::Tracer;
use rdkafka::Message;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Headers;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::batch::{Batch, Rejected, Traced};
use crate::commit::Committer;
use crate::context::Context;
use crate::dead_letter::DeadLetters;
use crate::error::{KafkaSourceError, reason};
use crate::lag::Partitions;
use crate::log_limit::LogLimit;
use crate::message::Decoder;
use crate::metrics::{FeatureMetrics, KafkaMetrics};
use crate::source::{KafkaSource, RunOptions};
use crate::write::{self, Target, Written};

/// A message as received: where it is, and its record or why it has none.
#[derive(Debug)]
struct Incoming {
    partition: i32,
    offset: i64,
    ts_ms: i64,
    outcome: Result<(oka_core::EntityKey, oka_core::Row), Rejected>,
    /// Its sampled trace context, when tracing.
    trace: Option<Traced>,
}

/// How long the consumer waits, not taking messages, for a batch in flight
/// before it pauses its partitions.
pub const PAUSE_AFTER: Duration = Duration::from_secs(1);

enum Event {
    Stop,
    Written(Result<Written, JoinError>),
    Due,
    Blocked,
    Message(Result<Incoming, KafkaError>),
}

/// A running consumer of one Kafka source.
pub struct Consumer {
    consumer: Arc<StreamConsumer<Context>>,
    committer: Committer,
    ctx: Arc<Context>,
    source: KafkaSource,
    target: Target,
    partitions: Arc<Partitions>,
    metrics: FeatureMetrics,
    opts: RunOptions,
    batch: Option<Batch>,
    pending: VecDeque<JoinHandle<Written>>,
    seq: u64,
    /// The assignment generation paused, while paused.
    paused: Option<u64>,
    /// Since when the next batch is full and cannot be handed over.
    blocked_since: Option<Instant>,
    rejections: LogLimit,
    errors: LogLimit,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("feature", &self.source.name)
            .field("topic", &self.source.spec.topic)
            .finish_non_exhaustive()
    }
}

impl Consumer {
    /// Creates the consumer (and the dead-letter producer) of `source` and
    /// subscribes to its topic; it joins its group once [`run`](Self::run).
    pub fn start(
        source: &KafkaSource,
        registry: &Arc<Registry>,
        writer: &WritePath,
        metrics: &KafkaMetrics,
        partitions: &Arc<Partitions>,
        opts: &RunOptions,
    ) -> Result<Self, KafkaSourceError> {
        let feature = source.name.to_string();
        let config = source.consumer_config(opts)?;
        let fm = metrics.feature(&source.name);
        let topic: Arc<str> = source.spec.topic.as_str().into();
        let ctx = Context::new(
            Arc::clone(&source.name),
            Arc::clone(&topic),
            fm.clone(),
            Arc::clone(partitions),
        );
        let consumer: StreamConsumer<Context> =
            config
                .create_with_context(ctx)
                .map_err(|e| KafkaSourceError::Client {
                    feature: feature.clone(),
                    client: "consumer",
                    reason: reason(&e),
                })?;
        consumer
            .subscribe(&[&topic])
            .map_err(|e| KafkaSourceError::Subscribe {
                feature: feature.clone(),
                topic: topic.to_string(),
                reason: reason(&e),
            })?;
        let dead_letters = dead_letters(source, opts)?;
        let ctx = Arc::clone(consumer.context());
        let consumer = Arc::new(consumer);
        let committer = Committer::spawn(
            Arc::clone(&consumer),
            Arc::clone(&topic),
            Arc::clone(&source.name),
            fm.clone(),
        )
        .map_err(|e| KafkaSourceError::Client {
            feature: feature.clone(),
            client: "offset committer",
            reason: e.to_string(),
        })?;
        let target = Target {
            writer: writer.clone(),
            registry: Arc::clone(registry),
            feature: source.feature,
            name: Arc::clone(&source.name),
            dead_letters,
            metrics: fm.clone(),
            retry_base: opts.retry_base,
            retry_max: opts.retry_max,
            store_watch: Arc::clone(&opts.store_watch),
            tracer: opts.tracer.clone(),
            topic: Arc::clone(&topic),
        };
        Ok(Self {
            consumer,
            committer,
            ctx,
            source: source.clone(),
            target,
            partitions: Arc::clone(partitions),
            metrics: fm,
            opts: opts.clone(),
            batch: None,
            pending: VecDeque::new(),
            seq: 0,
            paused: None,
            blocked_since: None,
            rejections: LogLimit::new(Duration::from_secs(1), 10),
            errors: LogLimit::new(Duration::from_secs(10), 1),
        })
    }

    /// What its callbacks share (readiness: [`Context::joined`]).
    pub fn context(&self) -> Arc<Context> {
        Arc::clone(&self.ctx)
    }

    /// Consumes until `stop` turns true (or its sender goes), then writes and
    /// commits what is in flight (up to the shutdown timeout) and leaves the
    /// group. An error means a batch was lost before it was written; nothing
    /// after it was committed.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), KafkaSourceError> {
        let entity = Arc::clone(&self.source.entity);
        let mut decoder = self.decoder(&entity);
        let keep = self.target.dead_letters.is_some();
        info!(feature = %self.source.name, topic = %self.source.spec.topic, group = %self.source.spec.group_or_default(&self.source.name), "consuming");
        while !*stop.borrow() {
            let receive = self.back_pressure();
            if self.batch.is_none() {
                decoder = self.decoder(&entity);
            }
            let due = (self.pending.len() < self.opts.in_flight.max(1))
                .then(|| self.batch.as_ref().map(|b| b.deadline))
                .flatten();
            let pause_at = self
                .blocked_since
                .filter(|_| !receive)
                .map(|t| t + PAUSE_AFTER);
            let event = {
                let (pending, consumer, decoder) = (&mut self.pending, &*self.consumer, &decoder);
                let tracer = self.target.tracer.as_deref();
                tokio::select! {
                    biased;
                    _ = stop.changed() => Event::Stop,
                    r = oldest(pending) => Event::Written(r),
                    () = sleep_until(due), if due.is_some() => Event::Due,
                    () = sleep_until(pause_at), if pause_at.is_some() => Event::Blocked,
                    m = receive_one(consumer, decoder, keep, tracer), if receive => Event::Message(m),
                }
            };
            match event {
                Event::Stop => break,
                Event::Written(r) => {
                    self.pending.pop_front();
                    self.written(r)?;
                }
                Event::Due => self.hand_over(),
                Event::Blocked => {}
                Event::Message(m) => self.take(m),
            }
        }
        self.drain().await
    }

    fn decoder<'e>(&self, entity: &'e Entity) -> Decoder<'e> {
        let now = Timestamp::now();
        Decoder {
            parser: RecordParser::new(entity, now, &self.opts.bounds),
            event_time: self.source.spec.event_time,
            now,
        }
    }

    /// Adds a received message to the batch (starting one if needed).
    fn take(&mut self, m: Result<Incoming, KafkaError>) {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                if let Some(more) = self.errors.admit() {
                    warn!(feature = %self.source.name, topic = %self.source.spec.topic, error = %reason(&e), similar_since = more, "consuming failed; retrying");
                }
                return;
            }
        };
        self.metrics.consumed(1);
        if let Err(r) = &m.outcome {
            self.metrics.rejected(r.rejection.reason);
            if let Some(more) = self.rejections.admit() {
                warn!(feature = %self.source.name, topic = %self.source.spec.topic, partition = r.partition, offset = r.offset, reason = r.rejection.reason.label(), error = %r.rejection.message, more_not_logged = more, "record rejected");
            }
        }
        let batch = self.batch.get_or_insert_with(|| {
            self.seq += 1;
            Batch::new(self.seq, Instant::now() + self.source.spec.max_wait())
        });
        batch.traced.extend(m.trace);
        if batch.add(m.partition, m.offset, m.ts_ms, m.outcome) {
            self.partitions
                .received(&self.source.name, m.partition, batch.seq, m.ts_ms);
        }
    }

    /// Hands the batch being filled to the write path.
    fn hand_over(&mut self) {
        if let Some(batch) = self.batch.take() {
            let job = write::write(self.target.clone(), batch);
            self.pending.push_back(tokio::spawn(job));
        }
    }

    /// Hands the next batch over if it is full and may be; whether to take
    /// messages: not while it is full and cannot be, until that has lasted
    /// [`PAUSE_AFTER`] and the partitions are paused.
    fn back_pressure(&mut self) -> bool {
        let max = self.source.spec.max_records();
        let full = |b: &Option<Batch>| b.as_ref().is_some_and(|b| b.messages >= max);
        if full(&self.batch) && self.pending.len() < self.opts.in_flight.max(1) {
            self.hand_over();
        }
        if !full(&self.batch) {
            self.blocked_since = None;
            if self.paused.take().is_some() {
                self.set_paused(false);
            }
            return true;
        }
        let since = *self.blocked_since.get_or_insert_with(Instant::now);
        let generation = self.ctx.generation();
        match self.paused {
            // Paused: poll, to serve rebalances; no messages come.
            Some(g) if g == generation => true,
            // Paused before a rebalance: a new assignment starts unpaused.
            Some(_) => {
                self.paused = Some(generation);
                self.set_paused(true);
                true
            }
            None if since.elapsed() >= PAUSE_AFTER => {
                self.paused = Some(generation);
                self.set_paused(true);
                true
            }
            None => false,
        }
    }

    fn set_paused(&self, paused: bool) {
        let assignment = self.ctx.assignment();
        let result = if paused {
            self.consumer.pause(&assignment)
        } else {
            self.consumer.resume(&assignment)
        };
        self.metrics.paused(paused);
        info!(feature = %self.source.name, partitions = assignment.count(), "{}", if paused {
            "the store is behind: fetching paused"
        } else {
            "fetching resumed"
        });
        if let Err(e) = result {
            warn!(feature = %self.source.name, error = %reason(&e), "pausing or resuming fetching failed");
        }
    }

    /// A batch was written: count it and commit its offsets.
    fn written(&mut self, r: Result<Written, JoinError>) -> Result<(), KafkaSourceError> {
        let w = r.map_err(|e| KafkaSourceError::BatchLost {
            feature: self.source.name.to_string(),
            why: if e.is_panic() {
                "it panicked"
            } else {
                "it was cancelled"
            },
        })?;
        if let Some(e) = w.refused {
            return Err(KafkaSourceError::StoreRefused {
                feature: self.source.name.to_string(),
                error: e,
            });
        }
        self.metrics.batch_written(w.messages, w.records, w.elapsed);
        let now_ms = Timestamp::now().0 / 1000;
        for ms in &w.kafka_ms {
            self.metrics.delivered((now_ms - ms) as f64 / 1e3);
        }
        for (p, span) in &w.spans {
            self.partitions
                .written(&self.source.name, *p, w.seq, span.next, span.last_ms);
        }
        let offsets = self
            .ctx
            .acknowledged(w.spans.iter().map(|(p, s)| (*p, s.next)));
        if !offsets.is_empty() {
            self.committer.commit(offsets);
        }
        Ok(())
    }

    /// Writes what was received (waiting up to the shutdown timeout), commits
    /// it, and leaves the group.
    async fn drain(mut self) -> Result<(), KafkaSourceError> {
        self.hand_over();
        let deadline = Instant::now() + self.opts.shutdown_timeout;
        info!(feature = %self.source.name, batches = self.pending.len(), "stopping: writing the batches received");
        while let Some(h) = self.pending.front_mut() {
            match tokio::time::timeout_at(deadline, h).await {
                Ok(r) => {
                    self.pending.pop_front();
                    self.written(r)?;
                }
                Err(_) => {
                    warn!(feature = %self.source.name, batches = self.pending.len(), timeout_s = self.opts.shutdown_timeout.as_secs(), "batches not written by the shutdown timeout; their records will be read again from the last commit");
                    self.pending.iter().for_each(JoinHandle::abort);
                    break;
                }
            }
        }
        let Self {
            consumer,
            committer,
            ctx,
            source,
            metrics,
            ..
        } = self;
        committer.finish();
        let topic = &source.spec.topic;
        let offsets = ctx.all_acknowledged();
        if crate::commit::commit(&*consumer, topic, &source.name, &metrics, &offsets) {
            info!(feature = %source.name, partitions = offsets.len(), "offsets committed");
        }
        // Closing the consumer leaves the group, so its partitions move at once.
        drop(consumer);
        Ok(())
    }
}

/// The dead-letter producer of `source`, if it names a topic.
fn dead_letters(
    source: &KafkaSource,
    opts: &RunOptions,
) -> Result<Option<Arc<DeadLetters>>, KafkaSourceError> {
    let Some(topic) = &source.spec.dead_letter_topic else {
        return Ok(None);
    };
    let config = source.producer_config(opts)?;
    DeadLetters::new(&config, topic, &source.spec.topic, &source.name).map(|d| Some(Arc::new(d)))
}

/// The oldest batch in flight's outcome; never, when there is none.
async fn oldest(pending: &mut VecDeque<JoinHandle<Written>>) -> Result<Written, JoinError> {
    match pending.front_mut() {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The next message, decoded; its key and value are kept only when rejected
/// and `keep` (a dead-letter topic wants them); with a `tracer`, its sampled
/// trace context (headers `traceparent`, `tracestate`).
async fn receive_one(
    consumer: &StreamConsumer<Context>,
    decoder: &Decoder<'_>,
    keep: bool,
    tracer: Option<&Tracer>,
) -> Result<Incoming, KafkaError> {
    let m = consumer.recv().await?;
    let kafka_ms = m.timestamp().to_millis();
    let (partition, offset) = (m.partition(), m.offset());
    let outcome = decoder
        .decode(m.payload(), kafka_ms)
        .map_err(|rejection| Rejected {
            partition,
            offset,
            rejection,
            key: m.key().filter(|_| keep).map(<[u8]>::to_vec),
            payload: m.payload().filter(|_| keep).map(<[u8]>::to_vec),
        });
    let trace = tracer
        .zip(m.headers())
        .and_then(|(tracer, headers)| {
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|h| h.key.eq_ignore_ascii_case(name))
                    .and_then(|h| h.value)
            };
            tracer.message_parent(header("traceparent")?, header("tracestate"))
        })
        .map(|parent| Traced {
            parent,
            partition,
            offset,
            received: std::time::SystemTime::now(),
        });
    Ok(Incoming {
        partition,
        offset,
        ts_ms: kafka_ms.unwrap_or(decoder.now.0 / 1000),
        outcome,
        trace,
    })
}
