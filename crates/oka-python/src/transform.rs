//! A Feast on-demand view with `write_to_online_store=True`, run on what is
//! written to it: the pool runs it as one more UDF, one call per write, whose
//! one input is the written `df` (JSON text) and whose one output is the columns
//! to store (JSON text). So a write's transformation has the pool's limits —
//! its own time limit, the worker's memory limit, a crash costing the worker
//! only — and its metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oka_core::batch::{
    BatchError, PythonDecl, PythonInput, PythonStyle, TransformError, TransformFuture, UdfBatch,
    WriteTransform,
};
use oka_core::entity::Column;
use oka_core::key::KeyValues;
use oka_core::udf::Input;
use oka_core::{Entity, FieldType, Row, Timestamp, UdfError, Value};

use crate::pool::PoolCell;

/// How long one write's transformation may run (a write carries many rows).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The column holding the JSON text, in and out.
const JSON: &str = "json";

/// The entity of the call's input and output: the JSON text, and a timestamp
/// (every entity has one; the worker leaves it to Oka).
fn text_entity(name: &str) -> Arc<Entity> {
    let columns = vec![
        Column {
            name: JSON.into(),
            ty: FieldType::String,
        },
        Column {
            name: "at".into(),
            ty: FieldType::Timestamp,
        },
    ];
    Arc::new(Entity::new(name, columns, Vec::new(), 1))
}

/// The declaration of view `name`'s transformation on writes (`repo`: the
/// Feast repository's feature_store.yaml, named in messages).
pub(crate) fn decl(name: &str, repo: &std::path::Path) -> PythonDecl {
    PythonDecl {
        feature: name.into(),
        origin: repo.display().to_string(),
        path: format!("on-demand feature view `{name}` (write_to_online_store=True)"),
        file: repo.to_path_buf(),
        function: name.to_owned(),
        timeout: WRITE_TIMEOUT,
        inputs: vec![PythonInput {
            name: "df".into(),
            entity: text_entity("df"),
            many: false,
        }],
        args: Vec::new(),
        output: text_entity(name),
        style: PythonStyle::Feast,
    }
}

/// The runner a server keeps for one view's transformation on writes.
#[derive(Debug)]
pub struct FeastWrite {
    pub(crate) cell: Arc<PoolCell>,
    pub(crate) index: usize,
    pub(crate) label: String,
}

impl WriteTransform for FeastWrite {
    fn source(&self) -> &str {
        &self.label
    }

    fn transform(&self, columns: String, deadline: Option<Instant>) -> TransformFuture {
        let Some(pool) = self.cell.pool() else {
            let why = format!(
                "{} has no worker pool: it was loaded but not started",
                self.label
            );
            return Box::pin(std::future::ready(Err(BatchError::Unavailable(why).into())));
        };
        let now = Timestamp::now();
        let input = Row::new(now, vec![Value::String(columns.into()), Value::Null]);
        let batch = UdfBatch {
            args: Vec::new(),
            now,
            inputs: vec![Input::One(input)],
            width: 1,
            keys: vec![0],
            key_values: KeyValues::default(),
            deadline,
        };
        let call = pool.submit(self.index, batch);
        let label = self.label.clone();
        Box::pin(async move {
            let mut results = call.await?;
            let rows = results.pop().ok_or_else(|| {
                UdfError::failed(format!(
                    "the Python worker running {label} answered nothing"
                ))
            })??;
            match rows.first().and_then(|r| r.columns.first()) {
                Some(Value::String(s)) => Ok(s.to_string()),
                _ => Err(TransformError::Failed(UdfError::failed(format!(
                    "the Python worker running {label} answered no columns"
                )))),
            }
        })
    }
}
