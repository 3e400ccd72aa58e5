//! The batched write path shared by every writer (`POST /v1/ingest`, the mock
//! source, `oka ingest`).
//!
//! Writers submit jobs (rows of one feature) to a bounded queue and await their
//! acknowledgement. One task drains the queue into batches of up to `batch_size`
//! rows, or whatever arrived within `flush` of the first job, and writes each
//! feature's rows in one store call. At most `max_in_flight` batches are written at
//! once; when all are busy the task stops draining, the queue fills, and writers wait
//! (back-pressure, never an unbounded queue). Transient store errors (timeouts,
//! unavailability) are retried with exponential backoff; anything else, or running
//! out of retries, fails the batch's jobs with the error — nothing is dropped
//! silently.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oka_core::{EntityKey, Feature, FeatureId, Registry, Row, Timestamp};
use oka_storage::{FeatureStore, StoreError, StoreErrorKind};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::debug;

use crate::metrics::IngestMetrics;

/// Settings of the write path.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Rows per store call.
    pub batch_size: usize,
    /// How long a batch waits for more rows after its first.
    pub flush: Duration,
    /// Batches written concurrently.
    pub max_in_flight: usize,
    /// Jobs queued before writers wait.
    pub queue: usize,
    /// Retries of a batch on a transient error.
    pub retries: u32,
    /// First retry delay; doubles each retry, capped at 2 s.
    pub retry_base: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            batch_size: 500,
            flush: Duration::from_millis(20),
            max_in_flight: 4,
            queue: 256,
            retries: 5,
            retry_base: Duration::from_millis(50),
        }
    }
}

/// Tells a writer how its job ended.
type Ack = oneshot::Sender<Result<(), StoreError>>;

struct Job {
    registry: Arc<Registry>,
    feature: FeatureId,
    rows: Vec<(EntityKey, Row)>,
    done: Ack,
}

enum Msg {
    Write(Job),
    /// Acknowledged once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// A handle on the write path; clone it freely.
#[derive(Clone)]
pub struct WritePath {
    tx: mpsc::Sender<Msg>,
    batch_size: usize,
}

impl std::fmt::Debug for WritePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritePath").finish_non_exhaustive()
    }
}

impl WritePath {
    /// Starts the batching task on the current tokio runtime.
    pub fn spawn(
        store: Arc<dyn FeatureStore>,
        metrics: Arc<dyn IngestMetrics>,
        config: WriterConfig,
    ) -> Self {
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let batch_size = config.batch_size.max(1);
        tokio::spawn(run(rx, store, metrics, config));
        Self { tx, batch_size }
    }

    /// Rows per store write: the size of job that fills a batch by itself.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Writes `rows` of `feature` through the batcher; returns once they are stored
    /// (or failed for good).
    pub async fn write(
        &self,
        registry: &Arc<Registry>,
        feature: FeatureId,
        rows: Vec<(EntityKey, Row)>,
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let (done, ack) = oneshot::channel();
        let job = Job {
            registry: Arc::clone(registry),
            feature,
            rows,
            done,
        };
        let closed = || StoreError::new(StoreErrorKind::Unavailable, "the write path is shut down");
        self.tx.send(Msg::Write(job)).await.map_err(|_| closed())?;
        ack.await.map_err(|_| closed())?
    }

    /// Waits until every job queued before this call is written (or failed).
    pub async fn flush(&self) {
        let (done, ack) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            let _ = ack.await;
        }
    }
}

async fn run(
    mut rx: mpsc::Receiver<Msg>,
    store: Arc<dyn FeatureStore>,
    metrics: Arc<dyn IngestMetrics>,
    config: WriterConfig,
) {
    let in_flight = config.max_in_flight.max(1);
    let slots = Arc::new(Semaphore::new(in_flight));
    let mut next = rx.recv().await;
    while let Some(msg) = next.take() {
        let first = match msg {
            Msg::Write(job) => job,
            Msg::Flush(done) => {
                // Every earlier batch holds a slot until written: take them all.
                if let Ok(all) = slots
                    .acquire_many(u32::try_from(in_flight).unwrap_or(u32::MAX))
                    .await
                {
                    drop(all);
                }
                let _ = done.send(());
                next = rx.recv().await;
                continue;
            }
        };
        let mut rows = first.rows.len();
        let mut jobs = vec![first];
        let deadline = tokio::time::Instant::now() + config.flush;
        while rows < config.batch_size {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Msg::Write(job))) => {
                    rows += job.rows.len();
                    jobs.push(job);
                }
                Ok(Some(flush @ Msg::Flush(_))) => {
                    // Write this batch first; the flush comes next.
                    next = Some(flush);
                    break;
                }
                Ok(None) | Err(_) => break,
            }
        }
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let store = Arc::clone(&store);
        let metrics = Arc::clone(&metrics);
        let config = config.clone();
        tokio::spawn(async move {
            write_jobs(&*store, &*metrics, &config, jobs).await;
            drop(permit);
        });
        if next.is_none() {
            next = rx.recv().await;
        }
    }
}

/// One feature's rows from several jobs.
struct Group {
    registry: Arc<Registry>,
    feature: FeatureId,
    rows: Vec<(EntityKey, Row)>,
    acks: Vec<Ack>,
}

/// Writes the jobs' rows grouped by feature and acknowledges each job.
async fn write_jobs(
    store: &dyn FeatureStore,
    metrics: &dyn IngestMetrics,
    config: &WriterConfig,
    jobs: Vec<Job>,
) {
    let mut groups: Vec<Group> = Vec::new();
    for job in jobs {
        match groups
            .iter_mut()
            .find(|g| Arc::ptr_eq(&g.registry, &job.registry) && g.feature == job.feature)
        {
            Some(g) => {
                g.rows.extend(job.rows);
                g.acks.push(job.done);
            }
            None => groups.push(Group {
                registry: job.registry,
                feature: job.feature,
                rows: job.rows,
                acks: vec![job.done],
            }),
        }
    }
    for g in groups {
        let feature = g.registry.feature(g.feature);
        let mut result = Ok(());
        for chunk in g.rows.chunks(config.batch_size.max(1)) {
            metrics.batch(chunk.len());
            if let Err(e) = write_with_retries(store, metrics, config, feature, chunk).await {
                result = Err(e);
                break;
            }
        }
        for ack in g.acks {
            let _ = ack.send(result.clone());
        }
    }
}

async fn write_with_retries(
    store: &dyn FeatureStore,
    metrics: &dyn IngestMetrics,
    config: &WriterConfig,
    feature: &Feature,
    rows: &[(EntityKey, Row)],
) -> Result<(), StoreError> {
    let mut attempt = 0;
    let started = Instant::now();
    loop {
        match write_batch(store, metrics, feature, rows).await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind.is_transient() && attempt < config.retries => {
                let delay = config
                    .retry_base
                    .saturating_mul(1 << attempt.min(16))
                    .min(Duration::from_secs(2));
                attempt += 1;
                metrics.retry();
                // The caller reports what stays failed (oka ingest per batch, the
                // servers' store watch once per outage).
                debug!(feature = %feature.name, attempt, error = %e, delay_ms = delay.as_millis() as u64, "store write failed; retrying");
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                debug!(feature = %feature.name, rows = rows.len(), attempts = attempt + 1, elapsed_ms = started.elapsed().as_millis() as u64, error = %e, "store write failed");
                return Err(e);
            }
        }
    }
}

/// Writes one batch and reports its timing, and each row's lag once written.
async fn write_batch(
    store: &dyn FeatureStore,
    metrics: &dyn IngestMetrics,
    feature: &Feature,
    rows: &[(EntityKey, Row)],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let t = Instant::now();
    let result = store.write(feature, rows).await;
    metrics.store_write(t.elapsed(), result.is_ok());
    if result.is_ok() {
        let now = Timestamp::now();
        metrics.rows_written(
            rows.len() as u64,
            &mut rows
                .iter()
                .map(|(_, r)| (now.0 - r.event_time.0) as f64 / 1e6),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use oka_core::{NativeUdfs, Query, Value};

    use crate::metrics::NoMetrics;
    use oka_storage::MemoryStore;

    use super::*;

    /// Fails the first `fail` writes as unavailable; counts write calls and rows.
    #[derive(Debug, Default)]
    struct Flaky {
        inner: MemoryStore,
        fail: AtomicUsize,
        calls: AtomicUsize,
        permanent: bool,
    }

    #[async_trait]
    impl FeatureStore for Flaky {
        fn backend(&self) -> &'static str {
            "flaky"
        }
        async fn read(
            &self,
            f: &oka_core::Feature,
            k: &[EntityKey],
            q: &Query,
        ) -> Result<oka_core::KeyedRows, StoreError> {
            self.inner.read(f, k, q).await
        }
        async fn write(
            &self,
            f: &oka_core::Feature,
            r: &[(EntityKey, Row)],
        ) -> Result<(), StoreError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.permanent {
                return Err(StoreError::new(StoreErrorKind::Internal, "broken"));
            }
            if self.fail.load(Ordering::SeqCst) > 0 {
                self.fail.fetch_sub(1, Ordering::SeqCst);
                return Err(StoreError::new(StoreErrorKind::Unavailable, "down"));
            }
            self.inner.write(f, r).await
        }
        async fn health(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }

    fn registry() -> Arc<Registry> {
        let yaml = "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}\nfeatures:\n  p: {kind: pipeline, entity: E}\n";
        Arc::new(Registry::from_yaml("t", yaml, &NativeUdfs::new()).unwrap())
    }

    fn rows(from: usize, n: usize) -> Vec<(EntityKey, Row)> {
        (from..from + n)
            .map(|i| {
                let id = format!("k{i}");
                let ts = Timestamp(1);
                (
                    EntityKey::encode(&[Value::from(id.as_str())]),
                    Row::new(
                        ts,
                        vec![
                            Value::from(id.as_str()),
                            Value::Timestamp(ts),
                            Value::Float(i as f64),
                        ],
                    ),
                )
            })
            .collect()
    }

    fn config() -> WriterConfig {
        WriterConfig {
            batch_size: 100,
            flush: Duration::from_millis(20),
            retry_base: Duration::from_millis(1),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn small_jobs_are_batched_together() {
        let store = Arc::new(Flaky::default());
        let w = WritePath::spawn(store.clone(), Arc::new(NoMetrics), config());
        let r = registry();
        let writes = (0..50).map(|i| w.write(&r, 0, rows(i * 2, 2)));
        for res in futures::future::join_all(writes).await {
            res.unwrap();
        }
        let calls = store.calls.load(Ordering::SeqCst);
        assert!(calls <= 5, "50 jobs of 2 rows took {calls} store calls");
        let got = store
            .inner
            .read(
                r.feature(0),
                &rows(0, 100).into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
                &Query::Latest,
            )
            .await
            .unwrap();
        assert!(got.iter().all(|r| r.len() == 1), "every row written");
    }

    #[tokio::test]
    async fn flush_waits_for_queued_writes() {
        let store = Arc::new(Flaky::default());
        store.fail.store(2, Ordering::SeqCst);
        let w = WritePath::spawn(store.clone(), Arc::new(NoMetrics), config());
        let r = registry();
        let (w2, r2) = (w.clone(), Arc::clone(&r));
        let pending = tokio::spawn(async move { w2.write(&r2, 0, rows(0, 10)).await });
        tokio::task::yield_now().await;
        w.flush().await;
        let keys: Vec<_> = rows(0, 10).into_iter().map(|(k, _)| k).collect();
        let got = store
            .inner
            .read(r.feature(0), &keys, &Query::Latest)
            .await
            .unwrap();
        assert!(
            got.iter().all(|x| x.len() == 1),
            "written (after two retries) before flush returned"
        );
        pending.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn transient_errors_are_retried() {
        let store = Arc::new(Flaky::default());
        store.fail.store(3, Ordering::SeqCst);
        let w = WritePath::spawn(store.clone(), Arc::new(NoMetrics), config());
        w.write(&registry(), 0, rows(0, 10)).await.unwrap();
        assert_eq!(store.calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn permanent_errors_reach_the_writer() {
        let store = Arc::new(Flaky {
            permanent: true,
            ..Default::default()
        });
        let w = WritePath::spawn(store.clone(), Arc::new(NoMetrics), config());
        let e = w.write(&registry(), 0, rows(0, 10)).await.unwrap_err();
        assert_eq!(e.kind, StoreErrorKind::Internal);
        assert_eq!(store.calls.load(Ordering::SeqCst), 1, "not retried");
    }
}
