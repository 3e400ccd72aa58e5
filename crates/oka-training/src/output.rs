//! The output file: the entity rows as read, then per feature its fields and
//! `<feature>__status`, written to a temporary file beside the output and
//! renamed into place only when complete (an error or Ctrl-C leaves nothing).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use oka_core::Value;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::convert;
use crate::error::TrainingError;
use crate::job::{Job, RowResult};

/// The output being written.
pub struct Output {
    path: PathBuf,
    tmp: PathBuf,
    schema: SchemaRef,
    writer: Option<ArrowWriter<File>>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Each target's output fields: `<feature>__<field>`, then `<feature>__status`.
pub fn result_fields(job: &Job<'_>) -> Vec<Field> {
    let mut fields = Vec::new();
    for t in &job.targets {
        for c in &t.columns {
            fields.push(Field::new(&c.name, convert::arrow_type(&c.ty), true));
        }
        fields.push(Field::new(
            format!("{}__status", t.name),
            DataType::Utf8,
            false,
        ));
    }
    fields
}

/// The columns of [`result_fields`] for `results` (per row, per target).
pub fn result_columns(job: &Job<'_>, results: &[RowResult]) -> Vec<ArrayRef> {
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (ti, t) in job.targets.iter().enumerate() {
        for c in &t.columns {
            let values: Vec<Value> = results
                .iter()
                .map(|r| match &r[ti].1 {
                    Some(row) => row.columns.get(c.index).cloned().unwrap_or(Value::Null),
                    None => Value::Null,
                })
                .collect();
            columns.push(convert::array(&c.ty, &values));
        }
        let status: StringArray = results.iter().map(|r| Some(r[ti].0.text())).collect();
        columns.push(Arc::new(status));
    }
    columns
}

/// The output's schema: the entity file's columns, then each target's.
pub fn schema(input: &Schema, job: &Job<'_>) -> Result<SchemaRef, TrainingError> {
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(result_fields(job));
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = fields.iter().find(|f| !seen.insert(f.name().clone())) {
        return Err(TrainingError::Input {
            path: "the output".to_owned(),
            why: format!(
                "two columns would be named `{}` (an entity file column and a feature's, or a feature field named `status`): rename the entity file's column",
                dup.name()
            ),
        });
    }
    Ok(Arc::new(Schema::new(fields)))
}

impl Output {
    /// Starts writing `path` (through a temporary file beside it).
    pub fn create(path: &Path, schema: SchemaRef) -> Result<Self, TrainingError> {
        let name = path.file_name().ok_or_else(|| TrainingError::Input {
            path: path.display().to_string(),
            why: "not a file name".to_owned(),
        })?;
        let tmp = path.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = File::create(&tmp).map_err(|e| TrainingError::os(&tmp, &e))?;
        // Row groups of 64 Ki rows: the writer buffers one, so memory stays
        // bounded whatever the row count (the default, 1 Mi rows of every
        // feature's columns, is hundreds of MiB).
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(1 << 16))
            .build();
        let writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(props))
            .map_err(|e| TrainingError::io(&tmp, e));
        let mut out = Self {
            path: path.to_owned(),
            tmp,
            schema,
            writer: None,
        };
        out.writer = Some(writer?);
        Ok(out)
    }

    /// Writes a batch: the entity rows as read and each row's results (per
    /// row, per target of `job`, its status and record).
    pub fn write(
        &mut self,
        job: &Job<'_>,
        input: &RecordBatch,
        results: &[RowResult],
    ) -> Result<(), TrainingError> {
        let mut columns: Vec<ArrayRef> = input.columns().to_vec();
        columns.extend(result_columns(job, results));
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)
            .map_err(|e| TrainingError::io(&self.tmp, e))?;
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| TrainingError::io(&self.tmp, "closed"))?;
        writer
            .write(&batch)
            .map_err(|e| TrainingError::io(&self.tmp, e))
    }

    /// Completes the file and moves it into place.
    pub fn finish(mut self) -> Result<(), TrainingError> {
        if let Some(writer) = self.writer.take() {
            let file = writer
                .into_inner()
                .map_err(|e| TrainingError::io(&self.tmp, e))?;
            file.sync_all()
                .map_err(|e| TrainingError::os(&self.tmp, &e))?;
        }
        std::fs::rename(&self.tmp, &self.path).map_err(|e| TrainingError::os(&self.path, &e))
    }
}

impl Drop for Output {
    /// An output not finished is removed.
    fn drop(&mut self) {
        if self.tmp.exists() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
