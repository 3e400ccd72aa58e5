//! The entity file: one row per training example, with the key columns of
//! every entity the features need, a time column, optional columns for
//! on-demand arguments (`<feature>.<arg>`, `<feature>__<arg>`, or `<arg>` for
//! every feature that declares it) and any other columns (labels, ids), which
//! are passed through.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use oka_core::{Timestamp, Value};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::convert;
use crate::error::TrainingError;
use crate::inputs::Format;
use crate::job::{ArgInput, Job};

/// Rows per batch read.
pub const BATCH_ROWS: usize = 8192;

/// CSV rows read to infer the types of pass-through columns.
const CSV_INFER_ROWS: usize = 100_000;

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>;

/// An open entity file, its columns resolved.
pub struct EntityReader {
    file: PathBuf,
    batches: Batches,
    schema: SchemaRef,
    /// Rows in the file, when its format says (Parquet).
    pub total_rows: Option<u64>,
    layout: Layout,
    rows_read: u64,
}

/// Where a job's inputs are among a table's columns.
#[derive(Debug, Clone)]
pub struct Layout {
    keys: Vec<usize>,
    time: usize,
    args: Vec<Option<usize>>,
}

impl std::fmt::Debug for EntityReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntityReader")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// One batch of entity rows, converted.
#[derive(Debug)]
pub struct EntityBatch {
    /// The rows as read (passed through to the output).
    pub batch: RecordBatch,
    /// The 1-based number of the batch's first row in the file.
    pub first_row: u64,
    /// Per key field of the job: its value in each row.
    pub keys: Vec<Vec<Value>>,
    /// Each row's time.
    pub times: Vec<Timestamp>,
    /// Per argument of the job: its value in each row (`Null`: the default).
    pub args: Vec<Vec<Value>>,
}

impl EntityReader {
    /// Opens `file` and finds the job's columns in it.
    pub fn open(file: &Path, job: &Job<'_>, time_column: &str) -> Result<Self, TrainingError> {
        let (batches, schema, total_rows) = match Format::of(file)? {
            Format::Parquet => open_parquet(file)?,
            Format::Csv => open_csv(file, job, time_column)?,
            Format::JsonLines => {
                return Err(TrainingError::Input {
                    path: file.display().to_string(),
                    why: "an entity file is Parquet or CSV".to_owned(),
                });
            }
        };
        let layout = Layout::find(&schema, job, time_column, file)?;
        Ok(Self {
            file: file.to_owned(),
            batches,
            schema,
            total_rows,
            layout,
            rows_read: 0,
        })
    }

    /// The file's schema (its columns pass through to the output).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The next batch, converted; `None` at the end.
    pub fn next_batch(&mut self, job: &Job<'_>) -> Result<Option<EntityBatch>, TrainingError> {
        let Some(batch) = self.batches.next() else {
            return Ok(None);
        };
        let batch = batch.map_err(|e| TrainingError::io(&self.file, e))?;
        let first_row = self.rows_read + 1;
        self.rows_read += batch.num_rows() as u64;
        self.layout
            .convert(batch, job, &self.file, first_row)
            .map(Some)
    }
}

impl Layout {
    /// Finds the job's key, time and argument columns in `schema` (of `file`).
    pub fn find(
        schema: &Schema,
        job: &Job<'_>,
        time_column: &str,
        file: &Path,
    ) -> Result<Self, TrainingError> {
        let column = |name: &str, what: &str| {
            schema.index_of(name).map_err(|_| TrainingError::Column {
                file: file.to_owned(),
                column: name.to_owned(),
                why: format!("missing: {what}"),
            })
        };
        let keys = (job.keys.iter())
            .map(|k| {
                let what = format!(
                    "the key field `{}` ({}) of the features' entities",
                    k.name, k.ty
                );
                column(&k.name, &what)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let time = column(time_column, "the row's time (name it with --time-column)")?;
        let args = (job.args.iter())
            .map(|a| {
                arg_columns(a)
                    .iter()
                    .find_map(|name| schema.index_of(name).ok())
            })
            .collect();
        Ok(Self { keys, time, args })
    }

    /// A batch's keys, times and arguments, converted; `first_row` is the
    /// 1-based number of its first row, for messages.
    pub fn convert(
        &self,
        batch: RecordBatch,
        job: &Job<'_>,
        file: &Path,
        first_row: u64,
    ) -> Result<EntityBatch, TrainingError> {
        let schema = batch.schema();
        let column_error = |i: usize, why: String| TrainingError::Column {
            file: file.to_owned(),
            column: schema.field(i).name().clone(),
            why,
        };
        let mut keys = Vec::with_capacity(self.keys.len());
        for (&i, k) in self.keys.iter().zip(&job.keys) {
            let values = convert::values(batch.column(i), &k.ty)
                .map_err(|why| column_error(i, why.to_string()))?;
            if let Some(row) = values.iter().position(Value::is_null) {
                return Err(TrainingError::Row {
                    file: file.to_owned(),
                    row: first_row + row as u64,
                    why: format!("the key `{}` is null", k.name),
                });
            }
            keys.push(values);
        }
        let times = convert::times(batch.column(self.time)).map_err(|(row, why)| match row {
            Some(r) => TrainingError::Row {
                file: file.to_owned(),
                row: first_row + r as u64,
                why: format!("column `{}`: {why}", schema.field(self.time).name()),
            },
            None => column_error(self.time, why),
        })?;
        let mut args = Vec::with_capacity(self.args.len());
        for (a, col) in job.args.iter().zip(&self.args) {
            args.push(match col {
                Some(i) => convert::values(batch.column(*i), &a.ty)
                    .map_err(|why| column_error(*i, why.to_string()))?,
                None => vec![Value::Null; batch.num_rows()],
            });
        }
        Ok(EntityBatch {
            batch,
            first_row,
            keys,
            times,
            args,
        })
    }
}

type Opened = (Batches, SchemaRef, Option<u64>);

fn open_parquet(file: &Path) -> Result<Opened, TrainingError> {
    let input = File::open(file).map_err(|e| TrainingError::os(file, &e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(input)
        .map_err(|e| TrainingError::io(file, format!("not a readable Parquet file: {e}")))?;
    let total = u64::try_from(builder.metadata().file_metadata().num_rows()).ok();
    let schema = Arc::clone(builder.schema());
    let reader = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| TrainingError::io(file, e))?;
    Ok((Box::new(reader), schema, total))
}

/// A CSV file's reader: key and argument columns typed by the spec, the time
/// column as text (RFC 3339 or epoch seconds), the others as inferred from the
/// first rows.
fn open_csv(file: &Path, job: &Job<'_>, time_column: &str) -> Result<Opened, TrainingError> {
    let mut input = File::open(file).map_err(|e| TrainingError::os(file, &e))?;
    let format = arrow::csv::reader::Format::default().with_header(true);
    let (inferred, _) = format
        .infer_schema(BufReader::new(&mut input), Some(CSV_INFER_ROWS))
        .map_err(|e| TrainingError::io(file, format!("not a readable CSV file: {e}")))?;
    input.rewind().map_err(|e| TrainingError::os(file, &e))?;
    let fields: Vec<Field> = inferred
        .fields()
        .iter()
        .map(|f| {
            let name = f.name();
            let ty = if name == time_column {
                Some(DataType::Utf8)
            } else if let Some(k) = job.keys.iter().find(|k| *k.name == **name) {
                Some(convert::arrow_type(&k.ty))
            } else {
                (job.args.iter())
                    .find(|a| arg_columns(a).contains(name))
                    .map(|a| convert::arrow_type(&a.ty))
            };
            Field::new(name, ty.unwrap_or_else(|| f.data_type().clone()), true)
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let reader = arrow::csv::ReaderBuilder::new(Arc::clone(&schema))
        .with_header(true)
        .with_batch_size(BATCH_ROWS)
        .build(BufReader::with_capacity(1 << 16, input))
        .map_err(|e| TrainingError::io(file, e))?;
    Ok((Box::new(reader), schema, None))
}

/// The names an argument's column may have, in the order they are looked for:
/// `<feature>.<arg>`, `<feature>__<arg>` (where a dot in a column name is a
/// path, as in Spark SQL), `<arg>`.
fn arg_columns(a: &ArgInput) -> [String; 3] {
    [
        format!("{}.{}", a.feature, a.arg),
        format!("{}__{}", a.feature, a.arg),
        a.arg.clone(),
    ]
}
