//! Read coalescing: concurrent reads of the same (feature, query) share one store
//! call.
//!
//! [`Coalescing`] wraps a networked store. A read of (feature, query) that finds no
//! read of that pair in flight goes straight to the store: at low load nothing
//! waits. One that finds a read in flight queues its keys; when the in-flight read
//! returns, its caller hands the whole queue to the first queued reader, which sends
//! every queued key in one call (one `MGET` on Redis) and gives each reader its
//! part. Under load, a worker's concurrent requests thus cost the store one command
//! per round trip instead of one each; a queued reader waits at most for the
//! in-flight call to return before its own keys are sent.
//!
//! Failures are shared: a failed batch fails every reader in it with the same error.
//! Cancellation is safe: a reader dropped while leading (its request's deadline, a
//! sibling read failing) releases its batch (each reader in it then reads on its
//! own) and hands the queue on; a dropped queued reader is skipped.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use oka_core::{EntityKey, Feature, KeyedRows, Query, Row};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::store::{FeatureStore, StoreError, StoreErrorKind};

/// The most keys one coalesced call carries; larger reads are not coalesced.
pub const DEFAULT_MAX_BATCH_KEYS: usize = 512;

type Rows = Result<KeyedRows, StoreError>;

/// What a queued reader is told.
enum Msg {
    /// Its rows (or the batch's error).
    Rows(Rows),
    /// Lead the next batch: read your keys and the baton's readers'.
    Lead(Baton),
}

/// A queued reader.
struct Waiter {
    keys: Vec<EntityKey>,
    tx: oneshot::Sender<Msg>,
}

/// The (feature, query) pairs with a read in flight, and their queued readers.
type Slots = HashMap<(Arc<str>, Query), Vec<Waiter>, foldhash::fast::RandomState>;

#[derive(Debug)]
struct State {
    max_batch_keys: usize,
    slots: Mutex<Slots>,
    /// Reads answered by another read's call; shared with the workers' wrappers.
    coalesced: Arc<AtomicU64>,
}

/// A store wrapper that coalesces concurrent reads; see the module docs.
pub struct Coalescing {
    inner: Arc<dyn FeatureStore>,
    state: Arc<State>,
    /// Whether the workers' handles share one queue per (feature, query), so that
    /// reads from different workers share a call, or coalesce each on their own.
    across_workers: bool,
}

impl fmt::Debug for Coalescing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coalescing")
            .field("inner", &self.inner)
            .field("max_batch_keys", &self.state.max_batch_keys)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl Coalescing {
    /// Wraps `inner`; a coalesced call carries at most `max_batch_keys` keys.
    pub fn new(inner: Arc<dyn FeatureStore>, max_batch_keys: usize) -> Self {
        Self::with_counter(inner, max_batch_keys, Arc::default())
    }

    fn with_counter(
        inner: Arc<dyn FeatureStore>,
        max_batch_keys: usize,
        coalesced: Arc<AtomicU64>,
    ) -> Self {
        Self {
            inner,
            state: Arc::new(State {
                max_batch_keys: max_batch_keys.max(1),
                slots: Mutex::new(Slots::default()),
                coalesced,
            }),
            across_workers: false,
        }
    }

    /// The same, with every worker's handle sharing one queue per (feature,
    /// query): a read queued by one worker can go out in a call another worker
    /// leads (on the leader's connection), at the price of waking the queued
    /// worker's thread from the leader's.
    #[must_use]
    pub fn across_workers(mut self, on: bool) -> Self {
        self.across_workers = on;
        self
    }
}

impl State {
    /// Takes the next batch off `id`'s queue and hands it to its first live reader;
    /// with nobody left, `id` has no read in flight any more.
    fn hand_over(self: &Arc<Self>, id: &(Arc<str>, Query)) {
        let mut slots = self.slots.lock();
        let Some(queue) = slots.get_mut(id) else {
            return;
        };
        loop {
            if queue.is_empty() {
                slots.remove(id);
                return;
            }
            // The next batch: readers from the front while their keys fit.
            let mut total = 0;
            let take = queue
                .iter()
                .take_while(|w| {
                    total += w.keys.len();
                    total <= self.max_batch_keys
                })
                .count()
                .max(1);
            let mut batch: Vec<Waiter> = queue.drain(..take).collect();
            let leader = batch.remove(0);
            let baton = Baton {
                state: Arc::clone(self),
                id: id.clone(),
                batch,
                armed: true,
            };
            match leader.tx.send(Msg::Lead(baton)) {
                Ok(()) => return,
                // That reader is gone: its batch goes back to the front, and the
                // baton is disarmed (we hold the lock its drop would take).
                Err(msg) => {
                    if let Msg::Lead(mut baton) = msg {
                        baton.armed = false;
                        queue.splice(0..0, std::mem::take(&mut baton.batch));
                    }
                }
            }
        }
    }
}

/// The duty to lead one batch of (feature, query) and then hand the queue on. If
/// dropped unfinished (its reader cancelled while reading, or before it even got
/// the baton), it releases its batch (each of those readers then reads on its own)
/// and hands the queue on, so nobody waits forever.
struct Baton {
    state: Arc<State>,
    id: (Arc<str>, Query),
    batch: Vec<Waiter>,
    armed: bool,
}

impl Baton {
    /// Splits `result` between the leader (its first `own` entries, returned) and
    /// its batch, then hands the queue on.
    fn finish(mut self, result: Rows, own: usize) -> Rows {
        self.armed = false;
        let batch = std::mem::take(&mut self.batch);
        let expected = own + batch.iter().map(|w| w.keys.len()).sum::<usize>();
        let result = match result {
            Ok(rows) if rows.len() != expected => Err(StoreError::new(
                StoreErrorKind::Internal,
                format!(
                    "the store answered {} keys for a read of {expected}",
                    rows.len()
                ),
            )),
            other => other,
        };
        let mine = match result {
            Ok(rows) => {
                let mut rows = rows.into_keys();
                let mine: KeyedRows = rows.by_ref().take(own).collect();
                for w in batch {
                    let part: KeyedRows = rows.by_ref().take(w.keys.len()).collect();
                    // A reader that went away just misses its rows.
                    let _ = w.tx.send(Msg::Rows(Ok(part)));
                }
                Ok(mine)
            }
            Err(e) => {
                for w in batch {
                    let _ = w.tx.send(Msg::Rows(Err(e.clone())));
                }
                Err(e)
            }
        };
        self.state.hand_over(&self.id);
        mine
    }
}

impl Drop for Baton {
    fn drop(&mut self) {
        if self.armed {
            // Dropping the batch's senders sends each of its readers to the store
            // on its own.
            self.batch.clear();
            self.state.hand_over(&self.id);
        }
    }
}

#[async_trait]
impl FeatureStore for Coalescing {
    fn inner(&self) -> Option<&dyn FeatureStore> {
        Some(&*self.inner)
    }

    async fn read(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<KeyedRows, StoreError> {
        if keys.is_empty() || keys.len() >= self.state.max_batch_keys {
            return self.inner.read(feature, keys, query).await;
        }
        let id = (Arc::clone(&feature.name), *query);
        let queued = {
            let mut slots = self.state.slots.lock();
            match slots.get_mut(&id) {
                None => {
                    slots.insert(id.clone(), Vec::new());
                    None
                }
                Some(queue) => {
                    let (tx, rx) = oneshot::channel();
                    queue.push(Waiter {
                        keys: keys.to_vec(),
                        tx,
                    });
                    Some(rx)
                }
            }
        };
        let baton = match queued {
            None => Baton {
                state: Arc::clone(&self.state),
                id,
                batch: Vec::new(),
                armed: true,
            },
            Some(rx) => match rx.await {
                Ok(Msg::Rows(rows)) => {
                    self.state.coalesced.fetch_add(1, Ordering::Relaxed);
                    return rows;
                }
                Ok(Msg::Lead(baton)) => baton,
                // Our leader was dropped before it read for us: read on our own.
                Err(_) => return self.inner.read(feature, keys, query).await,
            },
        };
        let result = if baton.batch.is_empty() {
            self.inner.read(feature, keys, query).await
        } else {
            let all: Vec<EntityKey> = keys
                .iter()
                .chain(baton.batch.iter().flat_map(|w| w.keys.iter()))
                .cloned()
                .collect();
            self.inner.read(feature, &all, query).await
        };
        baton.finish(result, keys.len())
    }

    async fn write(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        self.inner.write(feature, records).await
    }

    async fn for_worker(&self) -> Result<Option<Arc<dyn FeatureStore>>, StoreError> {
        // Each worker reads over its own handle (or the shared one), and coalesces
        // its own reads, or joins the shared queues.
        let inner = match self.inner.for_worker().await? {
            Some(own) => own,
            None => Arc::clone(&self.inner),
        };
        if self.across_workers {
            return Ok(Some(Arc::new(Self {
                inner,
                state: Arc::clone(&self.state),
                across_workers: true,
            })));
        }
        Ok(Some(Arc::new(Self::with_counter(
            inner,
            self.state.max_batch_keys,
            Arc::clone(&self.state.coalesced),
        ))))
    }

    fn coalesced_reads(&self) -> Option<u64> {
        Some(self.state.coalesced.load(Ordering::Relaxed))
    }
}
