//! One sampled request's spans, recorded as it runs and emitted when it ends.
//!
//! The request path already reads the clock at each phase boundary (for
//! `Server-Timing`) and after each store call (for its metrics); a trace keeps
//! those instants and, at [`RequestTrace::finish`], turns them into spans: the
//! server span, one per phase (`parse`, `storage`, `udf`, `encode`, named as in
//! `Server-Timing`) and, under a phase, one per store call or UDF.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

use super::{Span, Tracer};

/// A phase of a feature request (its `Server-Timing` entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Body read, JSON parsing and validation against the plan.
    Parse,
    /// The store reads (concurrent).
    Storage,
    /// The UDFs.
    Udf,
    /// Encoding the answer.
    Encode,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 4] = [Phase::Parse, Phase::Storage, Phase::Udf, Phase::Encode];

    /// The span's name (the `Server-Timing` entry's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Parse => "parse",
            Self::Storage => "storage",
            Self::Udf => "udf",
            Self::Encode => "encode",
        }
    }
}

/// A child span, recorded.
#[derive(Debug)]
struct Child {
    id: SpanId,
    parent: SpanId,
    name: Cow<'static, str>,
    start: Instant,
    end: Instant,
    attributes: Vec<KeyValue>,
    status: Status,
}

#[derive(Debug, Default)]
struct Recorded {
    children: Vec<Child>,
    /// Phases recorded (bit per [`Phase`]): a phase never reached (the request
    /// failed first) has no span, so its children hang from the request's.
    phases: u8,
    /// The request span's attributes learnt on the way.
    attributes: Vec<KeyValue>,
}

/// A sampled request's trace (see the module's documentation).
#[derive(Debug)]
pub struct RequestTrace {
    /// The server span's context.
    context: SpanContext,
    /// The caller's span, from `traceparent`.
    parent: Option<SpanContext>,
    /// The phases' span ids, known before the phases end (store calls name
    /// theirs as parent).
    phases: [SpanId; 4],
    /// A wall-clock instant and the monotonic one read with it.
    anchor: (SystemTime, Instant),
    started: Instant,
    recorded: Mutex<Recorded>,
}

impl RequestTrace {
    pub(crate) fn new(
        context: SpanContext,
        parent: Option<&Context>,
        ids: &RandomIdGenerator,
        started: Instant,
    ) -> Self {
        Self {
            context,
            parent: parent.map(|cx| cx.span().span_context().clone()),
            phases: Phase::ALL.map(|_| ids.new_span_id()),
            anchor: (SystemTime::now(), Instant::now()),
            started,
            recorded: Mutex::default(),
        }
    }

    /// Records a span under `phase` (or under the request's span), from
    /// `start` to `end`, failed with `error` if any.
    pub fn record(
        &self,
        phase: Option<Phase>,
        name: impl Into<Cow<'static, str>>,
        (start, end): (Instant, Instant),
        attributes: Vec<KeyValue>,
        error: Option<String>,
    ) {
        let parent = phase.map_or(self.context.span_id(), |p| self.phases[p as usize]);
        let child = Child {
            id: RandomIdGenerator::default().new_span_id(),
            parent,
            name: name.into(),
            start,
            end,
            attributes,
            status: error.map_or(Status::Unset, Status::error),
        };
        if let Ok(mut r) = self.recorded.lock() {
            r.children.push(child);
        }
    }

    /// Adds an attribute to the request's span.
    pub fn attribute(&self, attribute: KeyValue) {
        if let Ok(mut r) = self.recorded.lock() {
            r.attributes.push(attribute);
        }
    }

    /// Records the phases, back to back from the request's start, with their
    /// lengths (a request's `Server-Timing`).
    pub fn phases(&self, lengths: [Duration; 4]) {
        let Ok(mut r) = self.recorded.lock() else {
            return;
        };
        let mut at = self.started;
        for (phase, length) in Phase::ALL.into_iter().zip(lengths) {
            let end = at + length;
            r.children.push(Child {
                id: self.phases[phase as usize],
                parent: self.context.span_id(),
                name: Cow::Borrowed(phase.name()),
                start: at,
                end,
                attributes: Vec::new(),
                status: Status::Unset,
            });
            r.phases |= 1 << phase as u8;
            at = end;
        }
    }

    /// Ends the request's span at `end` as `name` with `attributes` (and those
    /// added on the way), failed with `error` if any, and emits it and
    /// everything recorded under it. What is recorded after is not emitted.
    pub fn finish(
        &self,
        tracer: &Tracer,
        name: impl Into<Cow<'static, str>>,
        end: Instant,
        mut attributes: Vec<KeyValue>,
        error: Option<String>,
    ) {
        let recorded = match self.recorded.lock() {
            Ok(mut r) => std::mem::take(&mut *r),
            Err(e) => std::mem::take(&mut *e.into_inner()),
        };
        attributes.extend(recorded.attributes);
        let me = self.context.span_id();
        let wall = |t: Instant| at(self.anchor, t);
        for c in recorded.children {
            // A child of a phase that never ended hangs from the request.
            let parent = match self.phases.iter().position(|p| *p == c.parent) {
                Some(i) if recorded.phases & (1 << i) == 0 => me,
                _ => c.parent,
            };
            tracer.emit(Span {
                context: SpanContext::new(
                    self.context.trace_id(),
                    c.id,
                    self.context.trace_flags(),
                    false,
                    self.context.trace_state().clone(),
                ),
                parent: Some((parent, false)),
                kind: SpanKind::Internal,
                name: c.name,
                start: wall(c.start),
                end: wall(c.end),
                attributes: c.attributes,
                status: c.status,
            });
        }
        tracer.emit(Span {
            parent: self.parent.as_ref().map(|p| (p.span_id(), p.is_remote())),
            context: self.context.clone(),
            kind: SpanKind::Server,
            name: name.into(),
            start: wall(self.started),
            end: wall(end),
            attributes,
            status: error.map_or(Status::Unset, Status::error),
        });
    }
}

/// The wall-clock time of `t`, from an anchor pair read together.
fn at((wall, mono): (SystemTime, Instant), t: Instant) -> SystemTime {
    if t >= mono {
        wall + (t - mono)
    } else {
        wall.checked_sub(mono - t).unwrap_or(wall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_map_to_wall_time_on_both_sides_of_the_anchor() {
        let mono = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let later = mono + Duration::from_millis(5);
        assert_eq!(at((wall, mono), later), wall + Duration::from_millis(5));
        if let Some(earlier) = mono.checked_sub(Duration::from_millis(3)) {
            assert_eq!(at((wall, mono), earlier), wall - Duration::from_millis(3));
        }
    }
}
