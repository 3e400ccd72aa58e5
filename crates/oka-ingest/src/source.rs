//! The mock periodic source (Volga's `MockOnlineConnector.with_periodic_items`):
//! every `period_s` it writes its records again with the emit time as event time,
//! in batches through the write path ([`crate::writer`]).

use std::sync::Arc;
use std::time::Duration;

use oka_core::registry::FeatureKind;
use oka_core::spec::MockSourceSpec;
use oka_core::{EntityKey, FeatureId, Registry, Row, Timestamp, Value, cel_udf};
use tracing::{info, warn};

use crate::record::{RecordParser, TimeBounds};
use crate::writer::WritePath;

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
                    source: Some(spec), ..
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
    ) -> Result<Vec<(EntityKey, Row)>, String> {
        let feature = registry.feature(self.feature);
        let entity = &feature.entity;
        let mut out = Vec::new();
        if let Some(items) = &self.spec.items {
            // Items go through the same parser and time bounds as ingested records.
            let parser = RecordParser::new(entity, now, &TimeBounds::default());
            for (i, item) in items.iter().enumerate() {
                let text = serde_json::to_vec(item).map_err(|e| format!("item {i}: {e}"))?;
                out.push(
                    parser
                        .parse_json(&text)
                        .map_err(|e| format!("item {i}: {e}"))?,
                );
            }
        } else if let Some(generate) = &self.spec.generate {
            let env = registry.cel_env();
            let programs: Vec<(usize, cel::Program)> = generate
                .columns
                .iter()
                .map(|(name, expr)| {
                    let col = entity
                        .column_index(name)
                        .ok_or_else(|| format!("no field `{name}`"))?;
                    Ok((col, cel_udf::compile_scalar(env, expr, &["i", "tick"])?))
                })
                .collect::<Result<_, String>>()?;
            let tick = i64::try_from(tick).unwrap_or(i64::MAX);
            for i in 0..generate.count {
                let mut columns = vec![Value::Null; entity.columns.len()];
                columns[entity.timestamp_index] = Value::Timestamp(now);
                let i = i64::try_from(i).unwrap_or(i64::MAX);
                for (col, program) in &programs {
                    let v = cel_udf::eval_scalar(env, program, &[("i", i), ("tick", tick)])?;
                    let ty = &entity.columns[*col].ty;
                    columns[*col] = ty.coerce(v).ok_or_else(|| {
                        format!("generated `{}` is not {ty}", entity.columns[*col].name)
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
    ) -> Result<usize, String> {
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
            r.map_err(|e| e.to_string())?;
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
) -> Result<impl Future<Output = ()> + Send + 'static, String> {
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
