//! The UDF interface: what a UDF receives and returns, and the registry of native
//! (Rust) UDFs a binary provides.
//!
//! A native UDF is any `Fn(&UdfCall) -> Result<Vec<Row>, UdfError>`:
//!
//! ```
//! use oka_core::udf::{NativeUdfs, UdfCall, UdfError};
//!
//! let mut udfs = NativeUdfs::new();
//! udfs.register("double_it", |call: &UdfCall<'_>| {
//!     let v = call.input("test_feature")?.one()?.float("value")?;
//!     Ok(vec![call.output().set("value", v * 2.0)?.build()])
//! });
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::entity::Entity;
use crate::value::{FieldType, Row, Timestamp, Value};

/// A declared UDF argument.
#[derive(Debug, Clone)]
pub struct Arg {
    /// Argument name.
    pub name: Arc<str>,
    /// Its type.
    pub ty: FieldType,
    /// The default, if the argument is optional.
    pub default: Option<Value>,
}

/// Why a UDF did not produce a value for one key. It affects only that key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UdfError {
    /// The UDF's own error.
    #[error("{0}")]
    Failed(String),
    /// An input, argument or field the UDF asked for does not exist.
    #[error("no input, argument or field `{0}`")]
    NoSuch(String),
    /// A value had another type than the UDF expected.
    #[error("`{name}`: expected {expected}, got {got}")]
    Type {
        /// The input, field or argument.
        name: String,
        /// What was expected.
        expected: &'static str,
        /// What it was.
        got: String,
    },
    /// The UDF panicked; the panic was caught.
    #[error("udf panicked: {0}")]
    Panicked(String),
}

impl UdfError {
    /// A UDF's own failure.
    pub fn failed(msg: impl Into<String>) -> Self {
        Self::Failed(msg.into())
    }
}

/// One dependency's data for one key.
#[derive(Debug, Clone)]
pub enum Input {
    /// A `latest` dependency (or an on-demand one): its first record.
    One(Row),
    /// A `range` or `last_n` dependency: its records, oldest first (may be empty).
    Many(Arc<[Row]>),
}

/// Everything a UDF gets for one key.
#[derive(Debug)]
pub struct UdfCall<'a> {
    /// The feature being computed.
    pub feature: &'a str,
    /// Dependency names, in spec order (parallel to `inputs`).
    pub input_names: &'a [Arc<str>],
    /// Dependency entities (parallel to `inputs`).
    pub input_entities: &'a [Arc<Entity>],
    /// Dependency data (parallel to `input_names`).
    pub inputs: &'a [Input],
    /// Argument names, in spec order (parallel to `args`).
    pub arg_names: &'a [Arc<str>],
    /// Argument values: from `udf_args`, or the spec's defaults.
    pub args: &'a [Value],
    /// The output entity.
    pub output: &'a Arc<Entity>,
    /// The request's key values for the output entity's key fields (`Null` where
    /// the request's key object lacks one).
    pub key: &'a [Value],
    /// The request time.
    pub now: Timestamp,
}

impl<'a> UdfCall<'a> {
    /// A dependency's input by name.
    pub fn input(&self, name: &str) -> Result<InputRef<'a>, UdfError> {
        let i = self
            .input_names
            .iter()
            .position(|n| &**n == name)
            .ok_or_else(|| UdfError::NoSuch(name.to_owned()))?;
        Ok(InputRef {
            name: &self.input_names[i],
            entity: &self.input_entities[i],
            input: &self.inputs[i],
        })
    }

    /// An argument by name.
    pub fn arg(&self, name: &str) -> Result<&'a Value, UdfError> {
        self.arg_names
            .iter()
            .position(|n| &**n == name)
            .map(|i| &self.args[i])
            .ok_or_else(|| UdfError::NoSuch(name.to_owned()))
    }

    /// A float argument (ints are widened).
    pub fn arg_float(&self, name: &str) -> Result<f64, UdfError> {
        as_float(name, self.arg(name)?)
    }

    /// Column `c` of an output record before a UDF sets it: the request's key
    /// value for a key field, `now` for the timestamp, else null.
    pub fn default_column(&self, c: usize) -> Value {
        Preset::of(self.output, c).value(self.key, self.now)
    }

    /// Starts an output record: keys from the request, timestamp `now`, value
    /// fields null until set.
    pub fn output(&self) -> RowBuilder<'a> {
        let entity = self.output;
        // Built where the row will keep it (one allocation, no copy at `build`).
        let columns: Arc<[Value]> = (0..entity.columns.len())
            .map(|c| self.default_column(c))
            .collect();
        RowBuilder {
            entity,
            columns,
            event_time: self.now,
        }
    }
}

/// One dependency's data with its schema, for reading fields by name.
#[derive(Debug, Clone, Copy)]
pub struct InputRef<'a> {
    name: &'a str,
    entity: &'a Entity,
    input: &'a Input,
}

impl<'a> InputRef<'a> {
    /// The single record of a `latest` dependency.
    pub fn one(&self) -> Result<RecordRef<'a>, UdfError> {
        match self.input {
            Input::One(row) => Ok(RecordRef {
                entity: self.entity,
                row,
            }),
            Input::Many(_) => Err(UdfError::Type {
                name: self.name.to_owned(),
                expected: "one record",
                got: "a list of records".to_owned(),
            }),
        }
    }

    /// The records of a `range`/`last_n` dependency (one for `latest`).
    pub fn many(&self) -> Vec<RecordRef<'a>> {
        match self.input {
            Input::One(row) => vec![RecordRef {
                entity: self.entity,
                row,
            }],
            Input::Many(rows) => rows
                .iter()
                .map(|row| RecordRef {
                    entity: self.entity,
                    row,
                })
                .collect(),
        }
    }
}

/// A record with its schema.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    entity: &'a Entity,
    row: &'a Row,
}

impl<'a> RecordRef<'a> {
    /// A column by name.
    pub fn get(&self, field: &str) -> Result<&'a Value, UdfError> {
        self.entity
            .column_index(field)
            .map(|i| &self.row.columns[i])
            .ok_or_else(|| UdfError::NoSuch(field.to_owned()))
    }

    /// A float column (ints are widened).
    pub fn float(&self, field: &str) -> Result<f64, UdfError> {
        as_float(field, self.get(field)?)
    }

    /// The record's event time.
    pub fn event_time(&self) -> Timestamp {
        self.row.event_time
    }

    /// The underlying row.
    pub fn row(&self) -> &'a Row {
        self.row
    }
}

fn as_float(name: &str, v: &Value) -> Result<f64, UdfError> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        other => Err(UdfError::Type {
            name: name.to_owned(),
            expected: "float",
            got: format!("{other:?}"),
        }),
    }
}

/// Builds an output record of the feature's entity.
#[derive(Debug)]
pub struct RowBuilder<'a> {
    entity: &'a Entity,
    /// Only this builder holds it: setting a column writes in place.
    columns: Arc<[Value]>,
    event_time: Timestamp,
}

impl RowBuilder<'_> {
    /// Sets a column; the value is checked against (and widened to) its type.
    pub fn set(self, field: &str, value: impl Into<Value>) -> Result<Self, UdfError> {
        let i = self
            .entity
            .column_index(field)
            .ok_or_else(|| UdfError::NoSuch(field.to_owned()))?;
        self.set_at(i, value.into())
    }

    /// Sets the column at index `i` of the entity's columns (as [`Self::set`] does
    /// by name).
    pub fn set_at(mut self, i: usize, value: Value) -> Result<Self, UdfError> {
        let Some(column) = self.entity.columns.get(i) else {
            return Err(UdfError::NoSuch(format!("column #{i}")));
        };
        let value = column.ty.try_coerce(value).map_err(|v| UdfError::Type {
            name: column.name.to_string(),
            expected: "the field's type",
            got: format!("{v:?}"),
        })?;
        if !timestamps_in_range(&value) {
            return Err(UdfError::Failed(format!(
                "`{}`: a timestamp outside the years 0000–9999 (RFC 3339 cannot write it)",
                column.name
            )));
        }
        if i == self.entity.timestamp_index
            && let Value::Timestamp(t) = value
        {
            self.event_time = t;
        }
        Arc::make_mut(&mut self.columns)[i] = value;
        Ok(self)
    }

    /// The finished row.
    pub fn build(self) -> Row {
        Row::new(self.event_time, self.columns)
    }
}

/// Whether every timestamp in `value` is one RFC 3339 can write.
fn timestamps_in_range(value: &Value) -> bool {
    match value {
        Value::Timestamp(t) => t.is_rfc3339(),
        Value::List(items) => items.iter().all(timestamps_in_range),
        _ => true,
    }
}

/// A native UDF.
pub trait NativeUdf: Send + Sync {
    /// Computes the feature for one key. Return one row for a plain value.
    fn call(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError>;
}

impl<F> NativeUdf for F
where
    F: Fn(&UdfCall<'_>) -> Result<Vec<Row>, UdfError> + Send + Sync,
{
    fn call(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
        self(call)
    }
}

/// The native UDFs a binary offers to specs (`udf: {native: NAME}`).
#[derive(Clone, Default)]
pub struct NativeUdfs {
    by_name: HashMap<String, Arc<dyn NativeUdf>>,
}

impl NativeUdfs {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `udf` under `name`, replacing an earlier one of that name.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        udf: impl NativeUdf + 'static,
    ) -> &mut Self {
        self.by_name.insert(name.into(), Arc::new(udf));
        self
    }

    /// Looks a UDF up.
    pub fn get(&self, name: &str) -> Option<Arc<dyn NativeUdf>> {
        self.by_name.get(name).cloned()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for NativeUdfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeUdfs")
            .field("names", &self.names())
            .finish()
    }
}

/// What a column of an output record holds before a UDF sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// The key's value of the entity's key field at this position (in key
    /// order).
    Key(usize),
    /// The request's time (the timestamp column).
    Now,
    /// Null (a value field).
    Null,
}

impl Preset {
    /// What column `c` of an `entity` record holds before a UDF sets it.
    pub fn of(entity: &Entity, c: usize) -> Self {
        if c == entity.timestamp_index {
            return Self::Now;
        }
        entity
            .key_columns()
            .position(|k| k == c)
            .map_or(Self::Null, Self::Key)
    }

    /// The value, for the key whose key field values are `key` (in the
    /// entity's key order) at time `now`.
    pub fn value(self, key: &[Value], now: Timestamp) -> Value {
        match self {
            Self::Key(p) => key.get(p).cloned().unwrap_or(Value::Null),
            Self::Now => Value::Timestamp(now),
            Self::Null => Value::Null,
        }
    }
}
