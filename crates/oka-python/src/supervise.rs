//! Each worker's thread, a supervisor in the manner of Erlang's and gunicorn's:
//! it starts the worker, reads its answers and hands them to their callers,
//! watches the row it runs against its UDF's time limit, and when the worker
//! dies or overruns, kills it, answers or re-queues what it held, and starts
//! another after a backoff that grows while workers keep dying young.

use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use oka_core::UdfError;
use oka_core::batch::BatchError;
use tracing::{error, warn};

use crate::marshal::Reader;
use crate::pool::{Pending, Phase, Pool, Slot, send};
use crate::process::{Process, StartError, describe_exit};
use crate::protocol::{Done, FrameError};
use crate::results::{self, KeyContext};
use crate::stats::Restart;

/// A worker that lived this long is healthy: the backoff starts over.
const HEALTHY_AFTER: Duration = Duration::from_secs(10);
/// The longest wait before starting a worker again.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A batch whose worker is outside any row this long (its answer is not
/// coming) ends the worker.
const HUNG_AFTER: Duration = Duration::from_secs(60);

/// Why a worker's time ended.
enum Ended {
    /// The pool is stopping.
    Stopping,
    /// It was killed or died, and is to be replaced.
    Replaced { reason: Restart, why: String },
}

/// Why the calls a worker held lost it.
enum Cause {
    /// Its row ran past the UDF's limit.
    TimedOut,
    /// It died, as said.
    Died(String),
}

/// Worker `i`'s thread. Its first start's outcome goes to `started`; if that
/// start fails, the thread ends. (Workers are started from this thread, which
/// lives as long as the pool: the kernel kills a worker when the thread that
/// started it ends.)
pub(crate) fn run(pool: Arc<Pool>, i: usize, started: mpsc::Sender<Result<(), StartError>>) {
    let mut next = match start(&pool, i) {
        Ok(p) => {
            let _ = started.send(Ok(()));
            Some(p)
        }
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    drop(started);
    let mut fails: u32 = 0;
    while !pool.stopping.load(Ordering::Acquire) {
        let mut process = match next.take() {
            Some(p) => p,
            None => match start(&pool, i) {
                Ok(p) => p,
                Err(e) => {
                    let why = start_failure(&pool, &e);
                    error!(worker = i, reason = %why, "a Python worker did not start");
                    pool.stats.restarted(Restart::StartFailed);
                    fails += 1;
                    pool.lock().slots[i].failing = true;
                    down(&pool, i, why, backoff(fails));
                    continue;
                }
            },
        };
        if process.stream.set_read_timeout(Some(pool.tick)).is_err() {
            process.kill();
            continue;
        }
        up(&pool, i, &process);
        match serve(&pool, i, &mut process) {
            Ended::Stopping => {
                process.kill();
                let mut st = pool.lock();
                let held = std::mem::take(&mut st.slots[i].in_flight);
                drop(st);
                for mut call in held {
                    call.answer(Err(BatchError::Unavailable(
                        "the Python worker pool stopped".to_owned(),
                    )));
                }
                return;
            }
            Ended::Replaced { reason, why } => {
                pool.stats.restarted(reason);
                if process.started.elapsed() >= HEALTHY_AFTER {
                    fails = 0;
                }
                if reason != Restart::Memory {
                    fails += 1;
                }
                warn!(
                    worker = i,
                    pid = process.pid,
                    reason = reason.label(),
                    "{why}; replacing the worker"
                );
                down(&pool, i, why, backoff(fails));
            }
        }
    }
}

/// Starts worker `i`'s process (the slot says so meanwhile: calls wait).
fn start(pool: &Pool, i: usize) -> Result<Process, StartError> {
    pool.lock().slots[i].phase = Phase::Starting;
    Process::start(&pool.launch, i, &pool.load)
}

/// How long to wait before starting a worker after `fails` young deaths.
fn backoff(fails: u32) -> Duration {
    match fails {
        0 | 1 => Duration::ZERO,
        n => (Duration::from_millis(100) * 2u32.pow((n - 2).min(8))).min(MAX_BACKOFF),
    }
}

fn start_failure(pool: &Pool, e: &StartError) -> String {
    match e {
        StartError::Interpreter(why) => why.clone(),
        StartError::Load(problems) => crate::decl::describe_problems(&pool.udfs, problems),
    }
}

/// Marks worker `i` ready and gives it what waits.
fn up(pool: &Pool, i: usize, process: &Process) {
    let mut st = pool.lock();
    let slot = &mut st.slots[i];
    slot.writer = Some(Arc::clone(&process.writer));
    slot.phase = Phase::Idle;
    slot.failing = false;
    let job = pool.take_batch(&mut st, i);
    drop(st);
    if let Some(job) = job {
        send(job);
    }
}

/// Marks worker `i` dead until `delay` has passed, then waits that long. With
/// no worker left, the calls waiting are answered: none would run soon.
fn down(pool: &Pool, i: usize, why: String, delay: Duration) {
    let until = Instant::now() + delay;
    let mut st = pool.lock();
    st.slots[i].phase = Phase::Down(until);
    st.slots[i].writer = None;
    st.last_failure = Some(why);
    let orphans: Vec<Pending> = if st.slots.iter().all(Slot::gone) {
        st.queued_keys = 0;
        st.queue.drain(..).collect()
    } else {
        Vec::new()
    };
    let message = format!(
        "no Python worker is running: {}; the next starts in {:.1} s",
        st.last_failure.as_deref().unwrap_or("they died"),
        delay.as_secs_f64()
    );
    drop(st);
    for mut call in orphans {
        call.answer(Err(BatchError::Unavailable(message.clone())));
    }
    while Instant::now() < until && !pool.stopping.load(Ordering::Acquire) {
        std::thread::sleep(
            pool.tick
                .min(until.saturating_duration_since(Instant::now())),
        );
    }
}

/// Reads worker `i`'s answers until it ends.
fn serve(pool: &Pool, i: usize, process: &mut Process) -> Ended {
    loop {
        if pool.stopping.load(Ordering::Acquire) {
            return Ended::Stopping;
        }
        match process.frames.read(&mut process.stream) {
            Ok(frame) => {
                if let Some(end) = answered(pool, i, process, &frame) {
                    return end;
                }
            }
            Err(FrameError::Waiting) => {
                if let Some(end) = overdue(pool, i, process) {
                    return end;
                }
            }
            Err(e) => {
                if pool.stopping.load(Ordering::Acquire) {
                    return Ended::Stopping;
                }
                let row = process.last_row();
                let how = match e {
                    FrameError::TooLarge(_) => {
                        process.kill();
                        e.to_string()
                    }
                    _ => describe_exit(process.reap()),
                };
                let culprit = recover(pool, i, &Cause::Died(how.clone()), row);
                let why = match culprit {
                    Some(label) => format!("a Python worker died ({how}) while running `{label}`"),
                    None => format!("a Python worker died ({how})"),
                };
                return Ended::Replaced {
                    reason: Restart::Crashed,
                    why,
                };
            }
        }
    }
}

/// A batch's answer: handed to its callers. `Some` when the worker must go.
fn answered(pool: &Pool, i: usize, process: &mut Process, frame: &[u8]) -> Option<Ended> {
    let done = Done::parse(frame);
    let mut st = pool.lock();
    let expected: usize = st.slots[i].in_flight.iter().map(Pending::left_count).sum();
    let done = match done {
        Ok(d) if d.answers == expected => d,
        other => {
            drop(st);
            let what = match other {
                Ok(d) => format!("{} answers to a batch of {expected} keys", d.answers),
                Err(e) => e.to_string(),
            };
            process.kill();
            recover(pool, i, &Cause::Died(format!("it sent {what}")), None);
            return Some(Ended::Replaced {
                reason: Restart::Protocol,
                why: format!("a Python worker broke the protocol: it sent {what}"),
            });
        }
    };
    let calls = std::mem::take(&mut st.slots[i].in_flight);
    let next = if done.out_of_memory {
        st.slots[i].phase = Phase::Down(Instant::now());
        None
    } else {
        st.slots[i].phase = Phase::Idle;
        pool.take_batch(&mut st, i)
    };
    drop(st);
    if let Some(job) = next {
        send(job);
    }
    if !deliver(pool, calls, &done, frame) {
        process.kill();
        recover(
            pool,
            i,
            &Cause::Died("it sent an answer that cannot be read".to_owned()),
            None,
        );
        return Some(Ended::Replaced {
            reason: Restart::Protocol,
            why: "a Python worker broke the protocol: it sent an answer that cannot be read"
                .to_owned(),
        });
    }
    done.out_of_memory.then(|| Ended::Replaced {
        reason: Restart::Memory,
        why: format!(
            "a Python UDF ran out of memory (the limit is {} MiB a worker, --python-memory-mib)",
            pool.launch.memory_mib
        ),
    })
}

/// Decodes each key's answer and answers each call. An answer that cannot be
/// read fails its key and every key after it (the worker is replaced).
fn deliver(pool: &Pool, calls: Vec<Pending>, done: &Done, frame: &[u8]) -> bool {
    let mut r = Reader::new(frame.get(done.answers_at..).unwrap_or_default());
    let mut broken = None;
    for mut call in calls {
        let udf = &pool.udfs[call.udf];
        let left: Vec<usize> = call.left().collect();
        for k in left {
            let ctx = KeyContext {
                key: call.batch.key(k),
                now: call.batch.now,
            };
            let decoded = match broken {
                None => results::decode(udf, &mut r, ctx).map_err(|e| e.to_string()),
                Some(ref e) => Err(String::clone(e)),
            };
            call.done[k] = Some(match decoded {
                Ok((result, notes)) => {
                    if let Some(tb) = notes.traceback {
                        warn!(feature = %udf.feature(), udf = %udf.label(), "a Python UDF raised (its traceback; later ones within 10 s are not logged):\n{}", tb.trim_end());
                    }
                    result
                }
                Err(e) => {
                    let error = udf.worker_fault(&format!("an answer that cannot be read ({e})"));
                    broken = Some(e);
                    Err(error)
                }
            });
        }
        call.finish_if_done();
    }
    for &(u, ns) in &done.times {
        pool.stats.udf_time(u, Duration::from_nanos(ns));
    }
    broken.is_none()
}

/// Whether worker `i`'s row has run past its UDF's limit (then the worker is
/// killed and its calls answered or re-queued).
fn overdue(pool: &Pool, i: usize, process: &mut Process) -> Option<Ended> {
    let st = pool.lock();
    let slot = &st.slots[i];
    if slot.phase != Phase::Busy {
        return None;
    }
    let progress = process.progress(slot.batch_started)?;
    let Some(row) = progress.row else {
        if slot.batch_started.elapsed() < HUNG_AFTER {
            return None;
        }
        drop(st);
        process.kill();
        let how = "it stopped answering".to_owned();
        recover(pool, i, &Cause::Died(how), None);
        return Some(Ended::Replaced {
            reason: Restart::Hung,
            why: format!(
                "a Python worker gave no answer to a batch for {} s",
                HUNG_AFTER.as_secs()
            ),
        });
    };
    let udf = locate(&slot.in_flight, row)?.0;
    let limit = pool.udfs[udf].timeout();
    let since = progress.since.max(slot.batch_started);
    if since.elapsed() < limit {
        return None;
    }
    drop(st);
    process.kill();
    let label = recover(pool, i, &Cause::TimedOut, Some(row)).unwrap_or_default();
    Some(Ended::Replaced {
        reason: Restart::TimedOut,
        why: format!(
            "`{label}` ran past its limit of {} ms for a key (timeout_ms)",
            limit.as_millis()
        ),
    })
}

/// The call (its UDF) and key that row `row` of a batch of `calls` is.
fn locate(calls: &[Pending], row: usize) -> Option<(usize, usize)> {
    let mut start = 0;
    for call in calls {
        let left: Vec<usize> = call.left().collect();
        if row < start + left.len() {
            return Some((call.udf, left[row - start]));
        }
        start += left.len();
    }
    None
}

/// Answers or re-queues the calls worker `i` held when it ended; the key it
/// was running (`row`), if any, is the one to blame. The blamed UDF's label.
fn recover(pool: &Pool, i: usize, cause: &Cause, row: Option<usize>) -> Option<String> {
    let mut st = pool.lock();
    let calls = std::mem::take(&mut st.slots[i].in_flight);
    st.slots[i].writer = None;
    st.slots[i].phase = Phase::Down(Instant::now());
    let blamed = row.and_then(|r| locate(&calls, r));
    if let Some((udf, _)) = blamed {
        pool.strike(&mut st, udf);
    }
    drop(st);
    let mut again = Vec::new();
    let mut start = 0;
    for mut call in calls {
        let left: Vec<usize> = call.left().collect();
        let hit = row
            .filter(|r| (start..start + left.len()).contains(r))
            .map(|r| left[r - start]);
        start += left.len();
        let udf = &pool.udfs[call.udf];
        match (cause, hit) {
            (Cause::TimedOut, Some(_)) => {
                call.answer(Err(BatchError::TimedOut(format!(
                    "Python UDF `{}` (feature `{}`) ran past its limit of {} ms for a key of this request (timeout_ms in the spec); its worker was killed and replaced",
                    udf.label(),
                    udf.feature(),
                    udf.timeout().as_millis()
                ))));
                continue;
            }
            (Cause::Died(how), Some(k)) => {
                call.done[k] = Some(Err(UdfError::failed(format!(
                    "the Python worker running `{}` for this key died ({how}); it was replaced",
                    udf.label()
                ))));
            }
            _ => {}
        }
        if call.finish_if_done() || call.abandoned() {
            continue;
        }
        call.attempts += 1;
        if call.attempts > crate::pool::MAX_ATTEMPTS {
            let how = match cause {
                Cause::TimedOut => "it was killed: another key ran past its limit".to_owned(),
                Cause::Died(how) => how.clone(),
            };
            call.fail_left(&UdfError::failed(format!(
                "the Python worker running `{}` ended ({how}) while this key waited in its batch, {} times",
                udf.label(),
                crate::pool::MAX_ATTEMPTS
            )));
            continue;
        }
        again.push(call);
    }
    let mut st = pool.lock();
    for call in again.into_iter().rev() {
        st.queued_keys += call.done.len();
        st.queue.push_front(call);
    }
    let job = (0..st.slots.len())
        .find(|&j| st.slots[j].phase == Phase::Idle)
        .and_then(|j| pool.take_batch(&mut st, j));
    drop(st);
    if let Some(job) = job {
        send(job);
    }
    blamed.map(|(udf, _)| pool.udfs[udf].label().to_owned())
}
