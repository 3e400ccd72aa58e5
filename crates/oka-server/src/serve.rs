//! The one request path under every wire API ([`crate::api`]), in one walk of
//! [`compute`]: prepare ([`Registry::prepare_as`](oka_core::Registry::prepare_as):
//! plan lookup, validation, keys parsed once) → the reads
//! ([`Prepared::fetches`](oka_core::Prepared::fetches), batched, concurrent, results
//! by id into [`Fetched`]) → UDFs ([`Execution`], Python's batches awaited). Each
//! API parses its request into a [`Request`] before it and writes its answer
//! from the [`Outputs`] after it.

use std::time::{Duration, Instant};

use futures::future::try_join_all;
use oka_core::batch::BatchError;
use oka_core::execute::{ExecuteError, Execution, Fetched, Outputs};
use oka_core::request::{Prepared, RequestView};
use oka_core::{ErrorCode, FeatureRequest, KeyPolicy, Registry, Timestamp};
use oka_telemetry::trace::RequestTrace;
use tracing::debug;

use crate::error::ApiError;
use crate::metrics::Leniency;
use crate::spans;
use crate::state::{AppState, Loaded, Shared};

/// Where a request's time went (the `Server-Timing` header).
///
/// The phases follow each other, so each boundary is one clock read ([`Timing::lap`]):
/// the end of one phase is the start of the next.
#[derive(Debug, Default, Clone, Copy)]
pub struct Timing {
    /// JSON parsing and validation against the plan.
    pub parse: Duration,
    /// All store reads (concurrent; wall time).
    pub storage: Duration,
    /// All UDFs.
    pub udf: Duration,
    /// Response encoding.
    pub encode: Duration,
    /// The last phase boundary read ([`Timing::lap`]).
    mark: Option<Instant>,
}

impl Timing {
    /// Ends the phase that began at the last boundary (or at `started`, the
    /// request's start, for the first): its length, and the new boundary.
    pub fn lap(&mut self, started: Instant) -> (Duration, Instant) {
        let now = Instant::now();
        let since = self.mark.unwrap_or(started);
        self.mark = Some(now);
        (now.saturating_duration_since(since), now)
    }

    /// The phases' lengths, in order (parse, storage, udf, encode).
    pub fn phases(&self) -> [Duration; 4] {
        [self.parse, self.storage, self.udf, self.encode]
    }

    /// The `Server-Timing` header value (milliseconds, three decimals), written
    /// into a buffer on the stack: no float formatter (it cost more than the
    /// rest of the header handling on a 1-key request), no growing string.
    pub fn header(&self) -> HeaderText {
        let mut out = HeaderText {
            bytes: [0; HeaderText::CAP],
            len: 0,
        };
        for (name, d) in [
            (&b"parse;dur="[..], self.parse),
            (b", storage;dur=", self.storage),
            (b", udf;dur=", self.udf),
            (b", encode;dur=", self.encode),
        ] {
            out.push(name);
            // Microseconds, rounded to the nearest, in u64 arithmetic (u128
            // division is a library call: twelve of them cost more than the
            // rest of the header).
            let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            let micros = nanos.saturating_add(500) / 1000;
            out.push(itoa::Buffer::new().format(micros / 1000).as_bytes());
            let frac = (micros % 1000) as u16;
            out.push(&[
                b'.',
                b'0' + (frac / 100) as u8,
                b'0' + (frac / 10 % 10) as u8,
                b'0' + (frac % 10) as u8,
            ]);
        }
        out
    }
}

/// A `Server-Timing` value ([`Timing::header`]): ASCII, at most
/// [`HeaderText::CAP`] bytes (four names and four numbers of at most 20 digits).
#[derive(Debug, Clone, Copy)]
pub struct HeaderText {
    bytes: [u8; Self::CAP],
    len: usize,
}

impl HeaderText {
    /// Room for the longest value: 47 bytes of names and separators, four
    /// numbers of up to 20 digits and four fractions.
    const CAP: usize = 144;

    fn push(&mut self, part: &[u8]) {
        if let Some(to) = self.bytes.get_mut(self.len..self.len + part.len()) {
            to.copy_from_slice(part);
            self.len += part.len();
        }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

/// Deadlines a request may ask for, in milliseconds (header or body).
pub const DEADLINE_MS: std::ops::RangeInclusive<u64> = 1..=600_000;

/// A store answer that does not fit its read (the store broke its contract): the
/// details go to the log, the client gets `internal`.
fn execute_error(e: ExecuteError) -> ApiError {
    tracing::warn!(error = %e, "a feature request could not be executed");
    ApiError::new(ErrorCode::Internal, "internal error")
}

fn deadline_exceeded(deadline: Duration) -> ApiError {
    ApiError::new(
        ErrorCode::DeadlineExceeded,
        format!(
            "the request's deadline of {} ms passed",
            deadline.as_millis()
        ),
    )
}

/// A call of the request path: when it began, the deadline its caller set, and
/// its trace if it is sampled.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// When the request began (its deadline counts from here).
    pub started: Instant,
    /// The `X-Oka-Deadline-Ms` header's (or gRPC's `grpc-timeout`), if given:
    /// it overrides the body's `deadline_ms` and the server's default.
    pub deadline: Option<Duration>,
    /// The request's trace, if sampled.
    pub trace: Option<&'a RequestTrace>,
}

impl Call<'_> {
    /// A call begun now, without a deadline header or a trace.
    pub fn now() -> Self {
        Self {
            started: Instant::now(),
            deadline: None,
            trace: None,
        }
    }
}

/// A parsed feature request, whichever API it came in on.
pub(crate) struct Request<'a> {
    /// The request in Oka's terms (borrowed: a request moved into each future
    /// between its parse and its plan would be held by each of them), its key
    /// list perhaps held apart from a kept parse of the rest.
    pub request: RequestView<'a>,
    /// How keys that do not fit their entity are taken.
    pub keys: KeyPolicy,
    /// When the request began (its deadline counts from here).
    pub started: Instant,
    /// Its time budget.
    pub budget: Duration,
    /// Its trace, if sampled.
    pub trace: Option<&'a RequestTrace>,
}

/// Steps 1 (the plan), 2 (the reads) and 3 (the UDFs) of a feature request, for
/// every API (`/v1/features`, Volga's and Feast's routes, Feast's gRPC service):
/// one spec version, `loaded`, serves the whole request.
pub(crate) async fn compute(
    state: &AppState,
    loaded: &Loaded,
    request: Request<'_>,
    timing: &mut Timing,
) -> Result<(Prepared, Outputs), ApiError> {
    let shared = &state.shared;
    let registry = &loaded.registry;
    let Request {
        request,
        keys,
        started,
        budget,
        trace,
    } = request;
    let deadline_at = started + budget;
    let prepared = registry.prepare_as(request, Timestamp::now(), &shared.limits.request, keys)?;
    if prepared.invalid_keys() > 0 {
        shared.metrics.lenient(Leniency::InvalidKey);
    }
    let (parse, parsed) = timing.lap(started);
    timing.parse = parse;
    let outputs = read_and_run(
        state,
        registry,
        &prepared,
        (parsed, deadline_at),
        (budget, trace),
        timing,
    )
    .await;
    // Per-feature statistics only while a console looks (`/ui`).
    let watched = shared.stats.watched();
    if watched {
        record_targets(loaded, &prepared, started.elapsed(), outputs.is_err());
    }
    let outputs = outputs?;
    record_udfs(loaded, &outputs, watched);
    spans::udfs(trace, loaded, &outputs);
    Ok((prepared, outputs))
}

/// Steps 2 and 3 of [`compute`], from `parsed` (the end of step 1) to the
/// request's deadline.
async fn read_and_run(
    state: &AppState,
    registry: &Registry,
    prepared: &Prepared,
    (parsed, deadline_at): (Instant, Instant),
    (budget, trace): (Duration, Option<&RequestTrace>),
    timing: &mut Timing,
) -> Result<Outputs, ApiError> {
    // 2. The reads: one batched store call per (pipeline feature, query) of each
    //    key list, all concurrent, results kept by read id.
    let fetched = read_all(
        state,
        registry,
        prepared,
        (parsed, deadline_at),
        (budget, trace),
    )
    .await?;
    timing.storage = timing.lap(parsed).0;

    // 3. UDFs per key, in plan order; those run elsewhere (Python) a batch at a
    //    time, awaited under the deadline.
    let outputs = run_udfs(registry, prepared, &fetched, deadline_at, budget).await?;
    timing.udf = timing.lap(parsed).0;
    Ok(outputs)
}

/// Step 3: the executor driven to its end. A step run on this thread (CEL,
/// native, aggregations) runs inside [`Execution::advance`]; the batch calls it
/// hands back (Python UDFs; one per group waiting) are awaited together, under
/// the request's deadline.
async fn run_udfs(
    registry: &Registry,
    prepared: &Prepared,
    fetched: &Fetched,
    deadline_at: Instant,
    budget: Duration,
) -> Result<Outputs, ApiError> {
    let failed = |e: ExecuteError| match e {
        ExecuteError::Expired => deadline_exceeded(budget),
        ExecuteError::Batch(BatchError::TimedOut(m)) => ApiError::new(ErrorCode::UdfTimeout, m),
        ExecuteError::Batch(BatchError::Unavailable(m)) => {
            ApiError::new(ErrorCode::UdfUnavailable, m)
        }
        ExecuteError::Batch(BatchError::Overloaded(m)) => ApiError::new(ErrorCode::Overloaded, m),
        e => execute_error(e),
    };
    let mut run = Execution::new(registry, prepared, fetched, Some(deadline_at)).map_err(failed)?;
    loop {
        let mut calls = run.advance().map_err(failed)?;
        if calls.is_empty() {
            return Ok(run.finish());
        }
        let answers = async {
            match calls.pop() {
                // Mostly one call: awaited directly, without a join.
                Some(call) if calls.is_empty() => vec![(call.id, call.udf.call(call.batch).await)],
                last => {
                    let all = calls.into_iter().chain(last).map(|c| async move {
                        let answer = c.udf.call(c.batch).await;
                        (c.id, answer)
                    });
                    futures::future::join_all(all).await
                }
            }
        };
        let answers = tokio::time::timeout_at(deadline_at.into(), answers)
            .await
            .map_err(|_| deadline_exceeded(budget))?;
        for (id, answer) in answers {
            run.complete(id, answer).map_err(failed)?;
        }
    }
}

/// A request's latency (to the end of its UDFs) into each target's live
/// statistics, and a failure as one error of each.
fn record_targets(loaded: &Loaded, prepared: &Prepared, elapsed: Duration, failed: bool) {
    for t in &prepared.targets {
        let live = loaded.metrics.features[t.feature].live();
        live.requests.record(elapsed);
        if failed {
            live.errors.add(1);
        }
    }
}

/// Records a served request's latency (from its start to `done`) and key count.
pub(crate) fn computed(shared: &Shared, call: Call<'_>, done: Instant, keys: usize) {
    let elapsed = done.saturating_duration_since(call.started);
    shared.metrics.compute(elapsed, keys);
    shared.stats.server.record_at(done, elapsed);
    spans::keys(call.trace, keys);
}

/// The request's time budget: the `X-Oka-Deadline-Ms` header's, else the body's
/// `deadline_ms` (checked to be in range), else the server's default.
pub(crate) fn time_budget(
    request: &FeatureRequest,
    header: Option<Duration>,
    default: Duration,
) -> Result<Duration, ApiError> {
    if request
        .deadline_ms
        .is_some_and(|ms| !DEADLINE_MS.contains(&ms))
    {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "`deadline_ms` must be an integer from {} to {}",
                DEADLINE_MS.start(),
                DEADLINE_MS.end()
            ),
        ));
    }
    Ok(header
        .or(request.deadline_ms.map(Duration::from_millis))
        .unwrap_or(default))
}

/// Performs every read of `prepared` concurrently (one batched store call each,
/// all begun at `start`), timing each, and hands the results back by read id; past
/// `deadline_at` the request fails with the deadline's error.
async fn read_all(
    state: &AppState,
    registry: &Registry,
    prepared: &Prepared,
    (start, deadline_at): (Instant, Instant),
    (budget, trace): (Duration, Option<&RequestTrace>),
) -> Result<Fetched, ApiError> {
    let shared = &state.shared;
    let reads = prepared.fetches().map(|(id, f)| async move {
        let feature = registry.feature(f.feature);
        let r = state.store.read(feature, &f.keys, &f.query).await;
        let done = Instant::now();
        let elapsed = done.saturating_duration_since(start);
        shared
            .metrics
            .storage_read(f.query.name(), elapsed, r.is_ok());
        shared.stats.db.record_at(done, elapsed);
        if trace.is_some() {
            let call = spans::StoreCall {
                backend: state.store.backend(),
                feature: &feature.name,
                query: f.query.name(),
                keys: f.keys.len(),
            };
            let error = r.as_ref().err().map(ToString::to_string);
            spans::store_call(trace, call, (start, done), error);
        }
        r.map(|rows| (id, rows))
    });
    let mut reads: Vec<_> = reads.collect();
    let all = async {
        // Most requests make one read: await it directly, without a join.
        if reads.len() == 1
            && let Some(read) = reads.pop()
        {
            read.await.map(|r| vec![r])
        } else {
            try_join_all(reads).await
        }
    };
    let results = tokio::time::timeout_at(deadline_at.into(), all)
        .await
        .map_err(|_| deadline_exceeded(budget))?;
    let results = shared.store_watch.observe(results)?;
    let mut fetched = Fetched::new(prepared);
    for (id, rows) in results {
        fetched.insert(id, rows).map_err(execute_error)?;
    }
    Ok(fetched)
}

/// Each UDF's time and failures into its feature's metrics (and its live
/// statistics while `watched`); failures at debug level.
fn record_udfs(loaded: &Loaded, outputs: &Outputs, watched: bool) {
    for s in outputs.steps() {
        let m = &loaded.metrics.features[s.feature];
        m.udf_duration.observe_duration(s.elapsed);
        m.udf_errors.add(s.errors as u64);
        if watched && s.errors > 0 {
            m.live().errors.add(s.errors as u64);
        }
    }
    for f in outputs.failures() {
        debug!(feature = %loaded.registry.feature(f.feature).name, key = f.key, error = %f.error, "udf failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_is_milliseconds_with_three_decimals() {
        let t = Timing {
            parse: Duration::from_nanos(1_234_567),
            storage: Duration::ZERO,
            udf: Duration::from_nanos(999_999_600),
            encode: Duration::from_micros(42_007),
            mark: None,
        };
        assert_eq!(
            t.header().as_str(),
            "parse;dur=1.235, storage;dur=0.000, udf;dur=1000.000, encode;dur=42.007"
        );
        let longest = Timing {
            parse: Duration::MAX,
            storage: Duration::MAX,
            udf: Duration::MAX,
            encode: Duration::MAX,
            mark: None,
        };
        let text = longest.header();
        assert_eq!(text.as_str().matches(";dur=18446744073709.551").count(), 4);
        assert!(text.as_str().ends_with("encode;dur=18446744073709.551"));
    }
}
