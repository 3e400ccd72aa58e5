//! The mock periodic source (Volga's `MockOnlineConnector.with_periodic_items`):
//! every `period_s` it writes its records again with the emit time as event time,
//! in batches through the write path ([`crate::writer`]).

use std::sync::Arc;
use std::time::Duration;

use oka_core::cel_udf::{self, CelError};
use oka_core::feature::Source;
use oka_core::registry::FeatureKind;
use oka_core::spec::MockSourceSpec;
use oka_core::{EntityKey, FeatureId, FieldType, Registry, Row, Timestamp, Value};
use oka_storage::StoreError;
use tracing::{info, warn};

use crate::record::{RecordError, RecordParser, TimeBounds};
use crate::writer::WritePath;

/// Why a mock source could not emit.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// An item of `items` is not a record of the feature's entity.
    #[error("item {index}: {error}")]
    Item {
        /// Its position in `items`.
        index: usize,
        /// What is wrong with it.
        #[source]
        error: RecordError,
    },
    /// `generate` names a field the entity does not have.
    #[error("no field `{0}`")]
    NoField(String),
    /// A `generate` expression did not compile or evaluate.
    #[error("field `{field}`: {error}")]
    Generate {
        /// The field it generates.
        field: String,
        /// The CEL error.
        #[source]
        error: CelError,
    },
    /// A `generate` expression gave a value of another type.
    #[error("generated `{field}` is not {ty}")]
    WrongType {
        /// The field.
        field: String,
        /// Its type.
        ty: FieldType,
    },
    /// The store failed a batch after the writer's retries.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Rows per job handed to the write path.
const BATCH: usize = 1000;

/// A pipeline feature's mock source, compiled.
#[derive(Debug)]
pub struct MockSource {
    feature: FeatureId,
    spec: MockSourceSpec,
}

impl MockSource {
    /// Every mock source declared in `registry`.
    pub fn all(registry: &Registry) -> Vec<Self> {
        registry
            .features()
            .iter()
            .filter_map(|f| match &f.kind {
                FeatureKind::Pipeline {
                    source: Some(Source::Mock(spec)),
                    ..
                } => Some(Self {
                    feature: f.id,
                    spec: spec.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The emission period, if periodic.
    pub fn period(&self) -> Option<Duration> {
        self.spec
            .period_s
            .filter(|p| *p > 0.0)
            .map(Duration::from_secs_f64)
    }

    /// The records of emission number `tick` at time `now`.
    pub fn records(
        &self,
        registry: &Registry,
        tick: u64,
        now: Timestamp,
    ) -> Result<Vec<(EntityKey, Row)>, SourceError> {
        let feature = registry.feature(self.feature);
        let entity = &feature.entity;
        let mut out = Vec::new();
        if let Some(items) = &self.spec.items {
            // Items go through the same parser and time bounds as ingested records.
            let parser = RecordParser::new(entity, now, &TimeBounds::default());
            for (i, item) in items.iter().enumerate() {
                let item_error = |error: RecordError| SourceError::Item { index: i, error };
                let text = serde_json::to_vec(item)
                    .map_err(|e| item_error(RecordError::NotAnObject(e.to_string())))?;
                out.push(parser.parse_json(&text).map_err(item_error)?);
            }
        } else if let Some(generate) = &self.spec.generate {
            let env = registry.cel_env();
            let programs: Vec<(usize, cel::Program)> = generate
                .columns
                .iter()
                .map(|(name, expr)| {
                    let col = entity
                        .column_index(name)
                        .ok_or_else(|| SourceError::NoField(name.clone()))?;
                    let program =
                        cel_udf::compile_scalar(env, expr, &["i", "tick"]).map_err(|error| {
                            SourceError::Generate {
                                field: name.clone(),
                                error,
                            }
                        })?;
                    Ok((col, program))
                })
                .collect::<Result<_, SourceError>>()?;
            let tick = i64::try_from(tick).unwrap_or(i64::MAX);
            for i in 0..generate.count {
                let mut columns = vec![Value::Null; entity.columns.len()];
                columns[entity.timestamp_index] = Value::Timestamp(now);
                let i = i64::try_from(i).unwrap_or(i64::MAX);
                for (col, program) in &programs {
                    let column = &entity.columns[*col];
                    let v = cel_udf::eval_scalar(env, program, &[("i", i), ("tick", tick)])
                        .map_err(|error| SourceError::Generate {
                            field: column.name.to_string(),
                            error,
                        })?;
                    columns[*col] = column.ty.coerce(v).ok_or_else(|| SourceError::WrongType {
                        field: column.name.to_string(),
                        ty: column.ty.clone(),
                    })?;
                }
                let key = EntityKey::encode(entity.key_index.iter().map(|&k| &columns[k]));
                out.push((key, Row::new(now, columns)));
            }
        }
        Ok(out)
    }

    /// Writes emission `tick` now, through the batched write path. `registry` is
    /// the one the source was found in (a reload does not move it to another
    /// feature).
    pub async fn emit(
        &self,
        writer: &WritePath,
        registry: &Arc<Registry>,
        tick: u64,
    ) -> Result<usize, SourceError> {
        let records = self.records(registry, tick, Timestamp::now())?;
        let n = records.len();
        let mut chunks = Vec::new();
        let mut records = records.into_iter().peekable();
        while records.peek().is_some() {
            chunks.push(records.by_ref().take(BATCH).collect::<Vec<_>>());
        }
        let writes = chunks
            .into_iter()
            .map(|c| writer.write(registry, self.feature, c));
        for r in futures::future::join_all(writes).await {
            r?;
        }
        Ok(n)
    }

    /// The feature's name.
    pub fn feature_name<'r>(&self, registry: &'r Registry) -> &'r str {
        &registry.feature(self.feature).name
    }
}

/// Writes every source of `registry` once (so data is there before serving
/// starts), then returns a future that keeps the periodic ones going.
pub async fn start(
    writer: WritePath,
    registry: Arc<Registry>,
) -> Result<impl Future<Output = ()> + Send + 'static, SourceError> {
    let sources = MockSource::all(&registry);
    for s in &sources {
        let n = s.emit(&writer, &registry, 0).await?;
        info!(
            feature = s.feature_name(&registry),
            records = n,
            "mock source wrote its first emission"
        );
    }
    Ok(async move {
        let tasks = sources.into_iter().filter_map(|s| {
            let period = s.period()?;
            let writer = writer.clone();
            let registry = Arc::clone(&registry);
            Some(async move {
                let mut interval = tokio::time::interval(period);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval.tick().await; // the first tick is immediate: emission 0 is done
                for tick in 1u64.. {
                    interval.tick().await;
                    if let Err(e) = s.emit(&writer, &registry, tick).await {
                        warn!(feature = s.feature_name(&registry), error = %e, "mock source emission failed");
                    }
                }
            })
        });
        futures::future::join_all(tasks).await;
    })
}
