//! Features as the registry holds them: pipeline features (read from the store)
//! and on-demand features (a UDF over their dependencies), by [`FeatureId`].

use std::fmt;
use std::sync::Arc;

use crate::aggregate::AggregateUdf;
use crate::batch::BatchUdf;
use crate::cel_udf::CelUdf;
use crate::entity::Entity;
use crate::spec::{KafkaSourceSpec, MockSourceSpec};
pub use crate::udf::Arg;
use crate::udf::NativeUdf;

pub type FeatureId = usize;

/// How many records of history a pipeline feature keeps per key unless the spec says.
pub const DEFAULT_HISTORY: usize = 100;

/// A storage query kind with its spec-level defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueryKind {
    /// The newest record.
    Latest,
    /// A time range; `lookback_s` gives `start = now - lookback` when the request
    /// does not pass `start`.
    Range {
        /// Default window in seconds.
        lookback_s: Option<f64>,
    },
    /// The newest `n` records; `n` is the default when the request does not pass one.
    LastN {
        /// Default count.
        n: Option<usize>,
    },
}

impl QueryKind {
    /// The query's name as in the spec.
    pub fn name(self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::Range { .. } => "range",
            Self::LastN { .. } => "last_n",
        }
    }
}

/// One dependency of an on-demand feature.
#[derive(Debug, Clone)]
pub struct Dependency {
    /// The feature read.
    pub feature: FeatureId,
    /// The query (pipeline dependencies only; on-demand ones are always `Latest`).
    pub query: QueryKind,
}

/// How an on-demand feature is computed.
#[derive(Clone)]
pub enum UdfImpl {
    /// CEL expressions.
    Cel(Arc<CelUdf>),
    /// A declarative window aggregation (`aggregate:`).
    Aggregate(Arc<AggregateUdf>),
    /// A native Rust function.
    Native {
        /// The registered name.
        name: Arc<str>,
        /// The function.
        udf: Arc<dyn NativeUdf>,
    },
    /// A function run elsewhere a batch of keys at a time (Python).
    Batch(Arc<dyn BatchUdf>),
}

impl fmt::Debug for UdfImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cel(c) => c.fmt(f),
            Self::Aggregate(a) => a.fmt(f),
            Self::Native { name, .. } => write!(f, "Native({name})"),
            Self::Batch(b) => write!(f, "Batch({}: {})", b.kind(), b.source()),
        }
    }
}

/// A pipeline feature's source, as declared.
#[derive(Debug, Clone)]
pub enum Source {
    /// Written by the server itself (and `oka source mock`).
    Mock(MockSourceSpec),
    /// Consumed from a Kafka topic by `oka source kafka`.
    Kafka(KafkaSourceSpec),
}

impl Source {
    /// Its kind as the spec names it: `mock` or `kafka`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Mock(_) => "mock",
            Self::Kafka(_) => "kafka",
        }
    }
}

/// What a feature is.
#[derive(Debug, Clone)]
pub enum FeatureKind {
    /// Stored; read with a query.
    Pipeline {
        /// Records of history kept per key.
        history: usize,
        /// How long after its last write a key expires.
        ttl: Option<std::time::Duration>,
        /// The source writing into it, if any.
        source: Option<Source>,
    },
    /// Computed at request time.
    OnDemand {
        /// Inputs, in spec order.
        dependencies: Vec<Dependency>,
        /// The dependencies' names (also the CEL variable names), parallel.
        input_names: Vec<Arc<str>>,
        /// The dependencies' entities, parallel.
        input_entities: Vec<Arc<Entity>>,
        /// Declared arguments, in spec order.
        args: Vec<Arg>,
        /// The arguments' names, parallel.
        arg_names: Vec<Arc<str>>,
        /// The function.
        udf: UdfImpl,
    },
}

/// A validated feature.
#[derive(Debug, Clone)]
pub struct Feature {
    /// Its id (index in the registry).
    pub id: FeatureId,
    /// Its name.
    pub name: Arc<str>,
    /// The entity it holds or returns.
    pub entity: Arc<Entity>,
    /// Free-form description.
    pub description: Option<String>,
    /// Pipeline or on-demand.
    pub kind: FeatureKind,
}

impl Feature {
    /// Whether it is a pipeline feature.
    pub fn is_pipeline(&self) -> bool {
        matches!(self.kind, FeatureKind::Pipeline { .. })
    }

    /// What a store keeps of it: the history bound (at least one record per key)
    /// and the TTL. Every backend applies this one rule, in its own units.
    pub fn retention(&self) -> Retention {
        match self.kind {
            FeatureKind::Pipeline { history, ttl, .. } => Retention {
                history: history.max(1),
                ttl,
            },
            FeatureKind::OnDemand { .. } => Retention {
                history: DEFAULT_HISTORY,
                ttl: None,
            },
        }
    }
}

/// What a store keeps of a feature ([`Feature::retention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Records kept per key, newest by event time; at least 1.
    pub history: usize,
    /// How long after its last write a key expires; `None`: never.
    pub ttl: Option<std::time::Duration>,
}
