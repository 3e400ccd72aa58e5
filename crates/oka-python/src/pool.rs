//! The pool: worker processes, the calls waiting for one, and how calls become
//! batches.
//!
//! A call (one request's keys for one UDF) is sent at once when a worker is
//! idle, by the caller's own thread; otherwise it waits in the queue, and the
//! worker that finishes a batch next takes every queued call of the UDF at the
//! queue's head (up to [`MAX_BATCH_KEYS`] keys) as its next batch. So batches
//! form from the calls that arrive while the previous one runs: under load they
//! grow, an idle pool adds no wait, and a slow UDF's batch holds no other UDF's
//! keys. Each worker has a thread of its own that reads its answers,
//! watches its time limits and replaces it when it dies
//! ([`supervise`](crate::supervise)).

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use oka_core::UdfError;
use oka_core::batch::{BatchError, BatchFuture, BatchUdf, KeyResult, UdfBatch};

use crate::decl::UdfEntry;
use crate::marshal::Writer;
use crate::process::{Launch, RuntimeDir};
use crate::protocol::write_frame;
use crate::stats::{Health, Stats};

/// Keys in one batch, at most (a bigger call goes alone).
pub const MAX_BATCH_KEYS: usize = 4096;
/// Keys waiting for a worker, at most; past it calls are refused (overloaded).
pub const MAX_QUEUE_KEYS: usize = 100_000;
/// How often a call may be sent again after the worker running its batch died.
pub(crate) const MAX_ATTEMPTS: u8 = 2;
/// A UDF whose calls killed [`QUARANTINE_AFTER`] workers within
/// [`QUARANTINE_WINDOW`] fails fast for [`QUARANTINE_FOR`].
const QUARANTINE_AFTER: usize = 10;
const QUARANTINE_WINDOW: Duration = Duration::from_secs(60);
const QUARANTINE_FOR: Duration = Duration::from_secs(30);

/// Holds a pool once started; stops it when the last runner and handle drop.
#[derive(Debug, Default)]
pub struct PoolCell(OnceLock<Arc<Pool>>);

impl PoolCell {
    /// The pool, once started.
    pub fn pool(&self) -> Option<&Arc<Pool>> {
        self.0.get()
    }

    pub(crate) fn set(&self, pool: Arc<Pool>) {
        let _ = self.0.set(pool);
    }
}

impl Drop for PoolCell {
    fn drop(&mut self) {
        if let Some(pool) = self.0.get() {
            pool.stop();
        }
    }
}

/// One call waiting for its answer.
#[derive(Debug)]
pub(crate) struct Pending {
    pub udf: usize,
    pub batch: UdfBatch,
    /// Per key: its result once known.
    pub done: Vec<Option<KeyResult>>,
    reply: Option<oneshot::Sender<Result<Vec<KeyResult>, BatchError>>>,
    pub enqueued: Instant,
    pub attempts: u8,
}

impl Pending {
    /// The keys still to run, in order.
    pub fn left(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        let left: Vec<usize> = (0..self.done.len())
            .filter(|&k| self.done[k].is_none())
            .collect();
        left.into_iter()
    }

    /// How many keys are still to run.
    pub fn left_count(&self) -> usize {
        self.done.iter().filter(|d| d.is_none()).count()
    }

    /// Whether nobody waits for the answer any more.
    pub fn abandoned(&self) -> bool {
        self.reply.as_ref().is_none_or(oneshot::Sender::is_canceled)
    }

    /// Answers the call when every key has its result.
    pub fn finish_if_done(&mut self) -> bool {
        if self.done.iter().any(Option::is_none) {
            return false;
        }
        let results = self.done.iter_mut().filter_map(Option::take).collect();
        self.answer(Ok(results));
        true
    }

    /// Answers the call.
    pub fn answer(&mut self, answer: Result<Vec<KeyResult>, BatchError>) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(answer);
        }
    }

    /// Fails every key still to run with `error`, and answers.
    pub fn fail_left(&mut self, error: &UdfError) {
        for d in self.done.iter_mut().filter(|d| d.is_none()) {
            *d = Some(Err(error.clone()));
        }
        self.finish_if_done();
    }
}

/// What a worker slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Its process is starting.
    Starting,
    /// Waiting for a batch.
    Idle,
    /// Running a batch.
    Busy,
    /// Dead; the next process starts at this time.
    Down(Instant),
}

/// One worker's place in the pool.
#[derive(Debug)]
pub(crate) struct Slot {
    pub phase: Phase,
    /// Its last start failed (a module that no longer imports, a missing
    /// interpreter): calls do not wait for it.
    pub failing: bool,
    pub writer: Option<Arc<UnixStream>>,
    /// The calls of the batch it runs, in the batch's order.
    pub in_flight: Vec<Pending>,
    pub batch_started: Instant,
}

/// A worker dead for longer than this is gone: calls do not wait for it.
pub(crate) const WAIT_FOR_RESTART: Duration = Duration::from_secs(1);

impl Slot {
    /// Whether the worker is dead and will not be back within
    /// [`WAIT_FOR_RESTART`], or its last start failed (a call waiting for it
    /// would likely miss its deadline: it is refused at once instead).
    pub(crate) fn gone(&self) -> bool {
        match self.phase {
            Phase::Down(at) => self.failing || at > Instant::now() + WAIT_FOR_RESTART,
            _ => false,
        }
    }
}

/// Crashes and time-outs a UDF caused lately.
#[derive(Debug, Default)]
pub(crate) struct Strikes {
    recent: VecDeque<Instant>,
    until: Option<Instant>,
}

/// The pool's shared state.
#[derive(Debug)]
pub(crate) struct State {
    pub queue: VecDeque<Pending>,
    pub queued_keys: usize,
    pub slots: Vec<Slot>,
    pub strikes: Vec<Strikes>,
    /// Why the last worker died or did not start.
    pub last_failure: Option<String>,
}

/// A batch ready to go: the frame, and where to write it.
#[derive(Debug)]
pub(crate) struct Job {
    pub writer: Arc<UnixStream>,
    pub frame: Vec<u8>,
}

/// The pool of Python workers and the UDFs they run.
#[derive(Debug)]
pub struct Pool {
    pub(crate) udfs: Vec<UdfEntry>,
    pub(crate) launch: Launch,
    /// The `load` message, the same for every worker.
    pub(crate) load: Vec<u8>,
    pub(crate) state: Mutex<State>,
    pub(crate) stats: Stats,
    pub(crate) stopping: AtomicBool,
    /// How often a worker's thread looks at its worker.
    pub(crate) tick: Duration,
    _dir: RuntimeDir,
}

impl Pool {
    pub(crate) fn new(
        udfs: Vec<UdfEntry>,
        launch: Launch,
        dir: RuntimeDir,
        workers: usize,
    ) -> Self {
        let shim = launch.dir.join(crate::process::VOLGA_SHIM);
        let load = crate::decl::load_message(&udfs, launch.memory_mib, &shim);
        let shortest = udfs
            .iter()
            .map(UdfEntry::timeout)
            .min()
            .unwrap_or(Duration::from_secs(1));
        let slots = (0..workers)
            .map(|_| Slot {
                phase: Phase::Starting,
                failing: false,
                writer: None,
                in_flight: Vec::new(),
                batch_started: Instant::now(),
            })
            .collect();
        Self {
            stats: Stats::new(&udfs),
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued_keys: 0,
                slots,
                strikes: udfs.iter().map(|_| Strikes::default()).collect(),
                last_failure: None,
            }),
            tick: (shortest / 4).clamp(Duration::from_millis(2), Duration::from_millis(25)),
            udfs,
            launch,
            load,
            stopping: AtomicBool::new(false),
            _dir: dir,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data: go on with it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `batch` with UDF `udf`.
    pub(crate) fn submit(self: &Arc<Self>, udf: usize, batch: UdfBatch) -> BatchFuture {
        let (tx, rx) = oneshot::channel();
        let keys = batch.len();
        let pending = Pending {
            udf,
            done: (0..keys).map(|_| None).collect(),
            batch,
            reply: Some(tx),
            enqueued: Instant::now(),
            attempts: 0,
        };
        self.enqueue(pending);
        let label = self
            .udfs
            .get(udf)
            .map(|u| u.label().to_owned())
            .unwrap_or_default();
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                Err(BatchError::Unavailable(format!(
                    "the Python worker pool stopped before `{label}` answered"
                )))
            })
        })
    }

    fn enqueue(self: &Arc<Self>, mut pending: Pending) {
        if pending.done.is_empty() {
            pending.answer(Ok(Vec::new()));
            return;
        }
        let mut st = self.lock();
        if let Some(why) = self.quarantined(&mut st, pending.udf) {
            drop(st);
            pending.fail_left(&UdfError::failed(why));
            return;
        }
        if self.stopping.load(Ordering::Acquire) {
            drop(st);
            pending.answer(Err(BatchError::Unavailable(
                "the Python worker pool is stopping".to_owned(),
            )));
            return;
        }
        if st.slots.iter().all(Slot::gone) {
            let why = self.unavailable(&st);
            drop(st);
            pending.answer(Err(BatchError::Unavailable(why)));
            return;
        }
        let keys = pending.done.len();
        if st.queued_keys + keys > MAX_QUEUE_KEYS && !st.queue.is_empty() {
            drop(st);
            pending.answer(Err(BatchError::Overloaded(format!(
                "{MAX_QUEUE_KEYS} keys already wait for a Python worker; retry later, or add workers (--python-workers)"
            ))));
            return;
        }
        st.queued_keys += keys;
        st.queue.push_back(pending);
        let job = (0..st.slots.len())
            .find(|&i| st.slots[i].phase == Phase::Idle)
            .and_then(|i| self.take_batch(&mut st, i));
        drop(st);
        if let Some(job) = job {
            send(job);
        }
    }

    /// Gives idle worker `i` the queued calls of the UDF at the head of the
    /// queue (up to [`MAX_BATCH_KEYS`] keys; calls nobody waits for are
    /// dropped): their frame, and where to send it. `None` leaves it idle.
    /// One UDF per batch: a slow UDF's batch holds no other UDF's keys.
    pub(crate) fn take_batch(&self, st: &mut State, i: usize) -> Option<Job> {
        // A worker without its socket (not started yet) takes nothing.
        let writer = st.slots[i].writer.clone()?;
        let mut calls: Vec<Pending> = Vec::new();
        let mut keys = 0;
        let mut rest = VecDeque::with_capacity(st.queue.len());
        while let Some(call) = st.queue.pop_front() {
            let n = call.left_count();
            let fits = calls.is_empty() || keys + n <= MAX_BATCH_KEYS;
            let same = calls.first().is_none_or(|c| c.udf == call.udf);
            if call.abandoned() {
                st.queued_keys = st.queued_keys.saturating_sub(call.done.len());
            } else if same && fits {
                st.queued_keys = st.queued_keys.saturating_sub(call.done.len());
                keys += n;
                calls.push(call);
            } else {
                rest.push_back(call);
            }
        }
        st.queue = rest;
        let slot = &mut st.slots[i];
        if calls.is_empty() {
            slot.phase = Phase::Idle;
            return None;
        }
        let now = Instant::now();
        for c in &calls {
            self.stats
                .queue_wait
                .observe(now.duration_since(c.enqueued));
        }
        self.stats.batch_keys.observe_count(keys);
        let frame = self.frame(&calls);
        slot.phase = Phase::Busy;
        slot.in_flight = calls;
        slot.batch_started = now;
        Some(Job { writer, frame })
    }

    /// The `batch` message for `calls`: per call its UDF, arguments and the
    /// inputs of the keys still to run.
    fn frame(&self, calls: &[Pending]) -> Vec<u8> {
        // Room for a key's inputs as the seed's records need (about 60 bytes),
        // so a batch is written without growing its buffer.
        let keys: usize = calls.iter().map(Pending::left_count).sum();
        let mut out = Vec::with_capacity(256 + 96 * keys);
        let mut w = Writer::new(&mut out);
        w.tuple(2);
        w.str("batch");
        w.list(3 * calls.len());
        for c in calls {
            self.udfs[c.udf].write_call(&mut w, c.udf, &c.batch, c.left());
        }
        out
    }

    /// Why a call of `udf` fails without running, while its UDF is quarantined.
    fn quarantined(&self, st: &mut State, udf: usize) -> Option<String> {
        let strikes = st.strikes.get_mut(udf)?;
        let until = strikes.until?;
        let left = until.checked_duration_since(Instant::now());
        let Some(left) = left else {
            strikes.until = None;
            strikes.recent.clear();
            return None;
        };
        Some(format!(
            "`{}` crashed or timed out its worker {QUARANTINE_AFTER} times within {} s, so its calls fail without running for {} s more",
            self.udfs[udf].label(),
            QUARANTINE_WINDOW.as_secs(),
            left.as_secs() + 1
        ))
    }

    /// Records that a call of `udf` crashed or timed out its worker.
    pub(crate) fn strike(&self, st: &mut State, udf: usize) {
        let Some(strikes) = st.strikes.get_mut(udf) else {
            return;
        };
        let now = Instant::now();
        strikes.recent.push_back(now);
        while strikes
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > QUARANTINE_WINDOW)
        {
            strikes.recent.pop_front();
        }
        if strikes.recent.len() >= QUARANTINE_AFTER && strikes.until.is_none() {
            strikes.until = Some(now + QUARANTINE_FOR);
            tracing::warn!(
                udf = %self.udfs[udf].label(),
                feature = %self.udfs[udf].feature(),
                "a Python UDF crashed or timed out {QUARANTINE_AFTER} workers within {} s: its calls fail without running for {} s",
                QUARANTINE_WINDOW.as_secs(),
                QUARANTINE_FOR.as_secs()
            );
        }
    }

    /// Why no worker can take a call now.
    fn unavailable(&self, st: &State) -> String {
        let next = st
            .slots
            .iter()
            .filter_map(|s| match s.phase {
                Phase::Down(at) => Some(at),
                _ => None,
            })
            .min()
            .map(|at| at.saturating_duration_since(Instant::now()));
        let why = st
            .last_failure
            .as_deref()
            .unwrap_or("no worker has started");
        match next {
            Some(wait) => format!(
                "no Python worker is running: {why}; the next starts in {:.1} s",
                wait.as_secs_f64()
            ),
            None => format!("no Python worker is running: {why}"),
        }
    }

    /// The pool's health.
    pub fn health(&self) -> Health {
        let st = self.lock();
        Health {
            alive: st
                .slots
                .iter()
                .filter(|s| matches!(s.phase, Phase::Idle | Phase::Busy))
                .count(),
            starting: st
                .slots
                .iter()
                .filter(|s| s.phase == Phase::Starting)
                .count(),
            workers: st.slots.len(),
            last_failure: st.last_failure.clone(),
        }
    }

    /// Stops the workers; calls waiting are answered `Unavailable`.
    pub fn stop(&self) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut st = self.lock();
        let queued: Vec<Pending> = st.queue.drain(..).collect();
        st.queued_keys = 0;
        for slot in &st.slots {
            if let Some(w) = &slot.writer {
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
        }
        drop(st);
        for mut call in queued {
            call.answer(Err(BatchError::Unavailable(
                "the Python worker pool stopped".to_owned(),
            )));
        }
    }
}

/// Writes a batch. A failure means the worker died: its thread sees the
/// closed socket and sends the batch's calls again.
pub(crate) fn send(job: Job) {
    if write_frame(&mut &*job.writer, &job.frame).is_err() {
        let _ = job.writer.shutdown(std::net::Shutdown::Both);
    }
}

/// The runner a registry keeps for one Python UDF.
#[derive(Debug)]
pub struct PythonUdf {
    pub(crate) cell: Arc<PoolCell>,
    pub(crate) index: usize,
    pub(crate) label: String,
    /// Its translation, once proven equal to CPython at start.
    pub(crate) compiled: Arc<OnceLock<crate::compile::Compiled>>,
}

impl BatchUdf for PythonUdf {
    fn kind(&self) -> &'static str {
        "python"
    }

    fn source(&self) -> &str {
        &self.label
    }

    fn call(&self, batch: UdfBatch) -> BatchFuture {
        match self.cell.pool() {
            Some(pool) => pool.submit(self.index, batch),
            None => Box::pin(std::future::ready(Err(BatchError::Unavailable(format!(
                "Python UDF `{}` has no worker pool: it was loaded but not started",
                self.label
            ))))),
        }
    }

    fn inline(&self) -> Option<&dyn oka_core::batch::InlineUdf> {
        self.compiled
            .get()
            .map(|c| c as &dyn oka_core::batch::InlineUdf)
    }
}
