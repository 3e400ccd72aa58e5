//! Declarative window aggregations (`aggregate:` in the spec): outputs such as
//! `{mean: amount}` over the records of one `range` or `last_n` dependency,
//! computed natively in one pass by the [`crate::stats`] kernels.

use std::sync::Arc;

use indexmap::IndexMap;

use crate::entity::Entity;
use crate::error::did_you_mean;
use crate::kernels::{Acc, Stat, StatError, Takes};
use crate::spec::AggOutputSpec;
use crate::udf::{Input, UdfCall, UdfError};
use crate::value::{FieldType, Row, Value};

/// What one output aggregates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Operand {
    /// The records themselves (`count`).
    Records,
    /// A column of the window's entity, by index.
    Column(usize),
}

/// One output column.
#[derive(Debug, Clone)]
struct Output {
    stat: Stat,
    source: Operand,
}

/// A compiled aggregation: one [`Output`] per value field of the output entity,
/// in its order.
#[derive(Debug, Clone)]
pub struct AggregateUdf {
    outputs: Vec<Output>,
    /// The output entity's value columns, parallel to `outputs`.
    columns: Vec<usize>,
}

/// A problem with one output of an aggregation, found at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputProblem {
    /// The output field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The checked outputs of an aggregation, before the output entity exists.
#[derive(Debug, Clone)]
pub struct AggregateOutputs {
    outputs: Vec<Output>,
    /// Output field → type, in spec order.
    pub fields: IndexMap<String, FieldType>,
}

impl AggregateOutputs {
    /// Checks `specs` against the window's entity `over`: the fields exist and
    /// have types the aggregations take, the parameters are in range. Every
    /// problem is reported.
    pub fn check(
        over: &Entity,
        specs: &IndexMap<String, AggOutputSpec>,
    ) -> Result<Self, Vec<OutputProblem>> {
        let mut outputs = Vec::new();
        let mut fields = IndexMap::new();
        let mut problems = Vec::new();
        for (field, spec) in specs {
            match output(over, spec) {
                Ok((o, ty)) => {
                    outputs.push(o);
                    fields.insert(field.clone(), ty);
                }
                Err(e) => problems.push(OutputProblem {
                    field: field.clone(),
                    message: e.to_string(),
                }),
            }
        }
        if problems.is_empty() {
            Ok(Self { outputs, fields })
        } else {
            Err(problems)
        }
    }

    /// The aggregation writing into `output`, the entity built from `fields`.
    pub fn compile(self, output: &Entity) -> AggregateUdf {
        let columns = self
            .fields
            .keys()
            .map(|f| output.column_index(f).unwrap_or(usize::MAX))
            .collect();
        AggregateUdf {
            outputs: self.outputs,
            columns,
        }
    }
}

/// Why an aggregate output is rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OutputError {
    /// A bare name other than `count`.
    #[error(
        "`{0}` is not an aggregation: write `count` (the records in the window) or a mapping such as `{{mean: amount}}`"
    )]
    NotAnAggregation(String),
    /// None or several aggregations in one mapping.
    #[error(
        "give exactly one aggregation (count, sum, mean, min, max, stddev, percentile, ewma, first or last), got {0}"
    )]
    NotOne(String),
    /// `percentile` without `p`.
    #[error("`percentile` needs `p`, the quantile in [0, 1] (`p: 0.9` for the 90th percentile)")]
    NeedsP,
    /// `ewma` without `half_life_s`.
    #[error("`ewma` needs `half_life_s`, the seconds after which a value weighs half")]
    NeedsHalfLife,
    /// A parameter given to an aggregation that has no such parameter.
    #[error("`{param}` applies only to `{only}`")]
    Misplaced {
        /// The parameter.
        param: &'static str,
        /// The aggregation it belongs to.
        only: &'static str,
    },
    /// A parameter out of range.
    #[error("{name}: {error}")]
    Parameter {
        /// The aggregation.
        name: &'static str,
        /// What is wrong.
        error: StatError,
    },
    /// A field the window's entity lacks.
    #[error("entity `{entity}` has no field `{field}`{suggestion}")]
    NoField {
        /// The window's entity.
        entity: String,
        /// The field named.
        field: String,
        /// ` (did you mean …?)` or nothing.
        suggestion: String,
    },
    /// A field of a type the aggregation does not take.
    #[error("`{name}` takes a field of type {}; `{field}` is {ty}", .takes.describe())]
    FieldType {
        /// The aggregation.
        name: &'static str,
        /// What it takes.
        takes: Takes,
        /// The field.
        field: String,
        /// Its type.
        ty: FieldType,
    },
}

/// One output checked: what it computes and its type.
fn output(over: &Entity, spec: &AggOutputSpec) -> Result<(Output, FieldType), OutputError> {
    let of = match spec {
        AggOutputSpec::Name(n) if n == "count" => {
            let o = Output {
                stat: Stat::Count,
                source: Operand::Records,
            };
            return Ok((o, FieldType::Int));
        }
        AggOutputSpec::Name(n) => return Err(OutputError::NotAnAggregation(n.clone())),
        AggOutputSpec::Of(of) => of,
    };
    let given = of.given();
    let [(name, field)] = given.as_slice() else {
        return Err(OutputError::NotOne(if given.is_empty() {
            "none".to_owned()
        } else {
            given.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        }));
    };
    let stat = match *name {
        "count" => Stat::Count,
        "sum" => Stat::Sum,
        "mean" => Stat::Mean,
        "min" => Stat::Min,
        "max" => Stat::Max,
        "stddev" => Stat::Stddev,
        "first" => Stat::First,
        "last" => Stat::Last,
        "percentile" => Stat::Percentile(of.p.ok_or(OutputError::NeedsP)?),
        _ => Stat::Ewma {
            half_life_s: of.half_life_s.ok_or(OutputError::NeedsHalfLife)?,
        },
    };
    for (param, given, only) in [
        ("p", of.p.is_some(), "percentile"),
        ("half_life_s", of.half_life_s.is_some(), "ewma"),
    ] {
        if given && *name != only {
            return Err(OutputError::Misplaced { param, only });
        }
    }
    stat.check()
        .map_err(|error| OutputError::Parameter { name, error })?;
    let Some(col) = over.column_index(field) else {
        return Err(OutputError::NoField {
            entity: over.name.to_string(),
            field: (*field).to_owned(),
            suggestion: did_you_mean(field, over.columns.iter().map(|c| &*c.name)),
        });
    };
    let ty = &over.columns[col].ty;
    let out_ty = result_type(stat, ty).ok_or_else(|| OutputError::FieldType {
        name,
        takes: stat.takes(),
        field: (*field).to_owned(),
        ty: ty.clone(),
    })?;
    Ok((
        Output {
            stat,
            source: Operand::Column(col),
        },
        out_ty,
    ))
}

/// The type of `stat` over a field of type `ty`, if it takes that type.
fn result_type(stat: Stat, ty: &FieldType) -> Option<FieldType> {
    let numeric = matches!(ty, FieldType::Int | FieldType::Float);
    match stat.takes() {
        Takes::Any if stat == Stat::Count => Some(FieldType::Int),
        Takes::Any => Some(ty.clone()),
        Takes::Ordered if numeric || *ty == FieldType::Timestamp => Some(ty.clone()),
        Takes::Numbers if stat == Stat::Sum && numeric => Some(ty.clone()),
        Takes::Numbers if numeric => Some(FieldType::Float),
        _ => None,
    }
}

impl AggregateUdf {
    /// Aggregates the window (the call's one input) for one key: one pass over
    /// its records, every output at once.
    pub fn call(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
        let rows: &[Row] = match call.inputs.first() {
            Some(Input::Many(rows)) => rows,
            Some(Input::One(row)) => std::slice::from_ref(row),
            None => &[],
        };
        let mut accs: Vec<Acc> = self
            .outputs
            .iter()
            .map(|o| Acc::new(o.stat, call.now))
            .collect();
        for row in rows {
            for (i, (acc, o)) in accs.iter_mut().zip(&self.outputs).enumerate() {
                let v = match o.source {
                    Operand::Records => &Value::Bool(true),
                    Operand::Column(c) => row.columns.get(c).unwrap_or(&Value::Null),
                };
                acc.push(v, row.event_time)
                    .map_err(|e| self.failed(call, i, &e))?;
            }
        }
        let mut out = call.output();
        for (i, (acc, &col)) in accs.into_iter().zip(&self.columns).enumerate() {
            let v = acc.finish().map_err(|e| self.failed(call, i, &e))?;
            out = out.set_at(col, v)?;
        }
        Ok(vec![out.build()])
    }

    /// Output `i` failed for this key.
    fn failed(&self, call: &UdfCall<'_>, i: usize, e: &StatError) -> UdfError {
        let field = self
            .columns
            .get(i)
            .and_then(|&c| call.output.columns.get(c))
            .map_or("?", |c| &*c.name);
        let stat = self.outputs.get(i).map_or("?", |o| o.stat.name());
        UdfError::Failed(format!("`{field}` ({stat}): {e}"))
    }
}

/// The output entity of an on-demand feature named `name` whose output fields are
/// declared in place: `from`'s keys and timestamp, then `fields`. Clashes with the
/// key or timestamp names are the caller's to report (see
/// [`Entity::duplicate_columns`]).
pub fn inline_entity(
    name: &str,
    from: &Entity,
    fields: &IndexMap<String, FieldType>,
) -> Arc<Entity> {
    let mut columns: Vec<crate::entity::Column> = from
        .key_index
        .iter()
        .chain(std::iter::once(&from.timestamp_index))
        .filter_map(|&i| from.columns.get(i).cloned())
        .collect();
    let key_index = (0..from.key_index.len()).collect();
    let timestamp_index = from.key_index.len();
    columns.extend(fields.iter().map(|(n, ty)| crate::entity::Column {
        name: n.as_str().into(),
        ty: ty.clone(),
    }));
    Arc::new(Entity::new(name, columns, key_index, timestamp_index))
}
