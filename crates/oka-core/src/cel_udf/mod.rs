//! CEL UDFs: one compiled expression per output field.
//!
//! Variables visible to an expression: each dependency by its feature name (a map of
//! its columns for `latest`, a list of such maps for `range`/`last_n`), each UDF
//! argument by name, and `now` (the request time, a timestamp). Expressions are
//! compiled once at load; names, fields and types are checked then by walking the
//! expression and by a dry run over typed placeholder values.
//!
//! Layout: the environment, bindings and the compiled UDF with its calls here;
//! [`compile`](CelUdf::compile) and its checks (names, a typed dry run) in
//! `compile`; field checks through records and macro variables (`txn.map(r,
//! r.amount)`) in `fields`; Oka's aggregation functions (`math.sum`, …) in
//! `functions`; evaluation errors in CEL's words in `explain`; the arithmetic fast
//! path in `fast`; value conversion between Oka and CEL in `convert`; the scalar
//! expressions of mock sources in `scalar`.

use std::fmt;
use std::sync::Arc;

use cel::common::types::CelList;
use cel::common::value::Val;
use cel::{Context, Env, Program};

use crate::entity::Entity;
use crate::udf::{Input, Preset, UdfCall, UdfError};
use crate::value::{FieldType, Row, Timestamp, Value};

use convert::{record_to_val, to_val};
use fast::Fast;

mod compile;
mod convert;
mod explain;
mod fast;
mod fields;
mod functions;
mod scalar;

pub use convert::{from_cel, to_cel};
pub(crate) use scalar::generated_problem;
pub use scalar::{compile_scalar, eval_scalar, is_reserved};

/// What went wrong compiling or evaluating a CEL expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CelError {
    /// The expression does not parse.
    #[error("does not compile: {0}")]
    Compile(String),
    /// A name that is not bound.
    #[error("references unknown name `{name}`{suggestion} (known: {known})")]
    UnknownName {
        /// The name.
        name: String,
        /// ` (did you mean `x`?)` when a known name is close, else empty.
        suggestion: String,
        /// The names that are bound, comma-separated.
        known: String,
    },
    /// A function or name the environment does not have (found by the dry run).
    #[error("references unknown function or name `{0}`")]
    UnknownReference(String),
    /// Operand or result types that do not fit.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// Evaluation failed.
    #[error("{0}")]
    Evaluation(String),
    /// An unsigned result beyond `int`.
    #[error("uint {0} overflows int")]
    UintOverflow(u64),
    /// A result of a CEL type with no field type (a map, bytes, a duration), by
    /// its CEL name.
    #[error(
        "of type {0} has no field type (a field holds null, bool, int, float, string, timestamp or a list of these)"
    )]
    NoFeatureType(&'static str),
    /// The result of an expression (checking it at load).
    #[error("result {0}")]
    Result(Box<CelError>),
}

/// The namespaces of the extension functions (`math.sum(…)`, `strings.quote(…)`,
/// `lists.range(…)`): names of functions, not variables, so they cannot name
/// features or arguments.
pub const FUNCTION_NAMESPACES: [&str; 3] = ["math", "strings", "lists"];

/// The variable holding the request time.
pub const NOW: &str = "now";

/// The shared CEL environment, built once per registry: the standard library plus
/// the `math` (`math.greatest`, `math.least`, `math.round`, …), `strings` and `lists`
/// extensions, and Oka's aggregation functions (`math.sum`, `math.mean`, …;
/// `cel_udf/functions.rs`).
pub fn env() -> Arc<Env> {
    let mut env = Env::stdlib();
    for ext in [
        cel::extensions::math as fn(&mut Env) -> Result<(), cel::DeclarationError>,
        cel::extensions::strings,
        cel::extensions::lists,
    ] {
        // The extensions declare disjoint names, so registering them cannot clash.
        let _ = env.add_extension(ext);
    }
    // Oka's names are not among the extensions' (`math.@max` and `math.@min` back
    // `greatest` and `least`), so declaring them cannot clash either.
    let _ = functions::register(&mut env);
    Arc::new(env)
}

/// A name visible to expressions, with what it holds (for load-time checks).
#[derive(Debug, Clone)]
pub enum Binding {
    /// A `latest` dependency: one record of this entity.
    Record(Arc<Entity>),
    /// A `range`/`last_n` dependency: a list of records of this entity.
    Records(Arc<Entity>),
    /// A scalar of this type (UDF arguments, `now`).
    Scalar(FieldType),
}

/// The columns of an input that expressions read: (index, name).
type ReadColumns = Vec<(usize, Arc<str>)>;

/// A compiled CEL UDF.
pub struct CelUdf {
    env: Arc<Env>,
    /// Per output column: its program, or `None` to default (request key / `now`).
    programs: Vec<Option<Program>>,
    /// Per input (dependency, in order): the columns the expressions read, by index
    /// and name; `None` when no expression reads the input.
    inputs: Vec<Option<ReadColumns>>,
    /// Per argument: whether an expression reads it.
    args_used: Vec<bool>,
    /// Whether an expression reads `now`.
    now_used: bool,
    /// Per output column, the expression in [`Fast`] form, when every expression of
    /// the UDF has one (plain `double` arithmetic over fields, arguments and
    /// literals, or `now`).
    fast: Option<Vec<Option<Fast>>>,
    /// Where each column of a fast record comes from, decided at load: when
    /// every column has a fast form and every fast value fits its column.
    fast_record: Option<Box<[Source]>>,
}

impl fmt::Debug for CelUdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelUdf")
            .field("columns", &self.programs.len())
            .finish()
    }
}

/// A problem with one expression, found at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprProblem {
    /// The output field whose expression is wrong (`None` for the UDF as a whole).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl CelUdf {
    /// Whether every expression has a fast form (for tests and benchmarks).
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// The row from the fast forms, or `None` to fall back to the interpreter.
    fn call_fast(
        &self,
        fast: &[Option<Fast>],
        call: &UdfCall<'_>,
    ) -> Option<Result<Row, UdfError>> {
        if let Some(step) = self.fast_step(call.output, call.now) {
            // An operand that is not a double: back to the interpreter.
            return step.row_of(call, call.key).map(Ok);
        }
        let mut out = call.output();
        for (i, f) in fast.iter().enumerate() {
            let v = match f {
                None => continue,
                Some(Fast::Now) => Value::Timestamp(call.now),
                Some(f) => Value::Float(f.eval(call)?),
            };
            out = match out.set_at(i, v) {
                Ok(out) => out,
                Err(e) => return Some(Err(e)),
            };
        }
        Some(Ok(out.build()))
    }

    /// The fast forms of the whole record, for a step to evaluate key by key
    /// without a [`UdfCall`] each: when every column has one, every value fits
    /// its column (decided at load) and `now` is within RFC 3339's years.
    pub fn fast_step(&self, output: &Entity, now: Timestamp) -> Option<FastStep<'_>> {
        let sources = self.fast_record.as_deref()?;
        let whole = sources.len() == output.columns.len() && now.is_rfc3339();
        whole.then_some(FastStep { sources, now })
    }

    /// Evaluates the expressions for one key.
    pub fn call(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
        self.row(call).map(|r| vec![r])
    }

    /// Evaluates the expressions for one key: its one record.
    pub fn row(&self, call: &UdfCall<'_>) -> Result<Row, UdfError> {
        if let Some(fast) = &self.fast
            && let Some(row) = self.call_fast(fast, call)
        {
            return row;
        }
        self.interpreted_row(call)
    }

    /// Evaluates the expressions for one key with the CEL interpreter.
    pub fn call_interpreted(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
        self.interpreted_row(call).map(|r| vec![r])
    }

    fn interpreted_row(&self, call: &UdfCall<'_>) -> Result<Row, UdfError> {
        // Values are bound as the interpreter's own `Val`s, borrowing strings from
        // the records: no intermediate `cel::Value` maps to build and convert.
        let now = Value::Timestamp(call.now);
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        for ((name, input), columns) in call.input_names.iter().zip(call.inputs).zip(&self.inputs) {
            let Some(columns) = columns else { continue };
            let value: Box<dyn Val + '_> = match input {
                Input::One(row) => record_to_val(columns, row),
                Input::Many(rows) => Box::new(CelList::from(
                    rows.iter()
                        .map(|r| record_to_val(columns, r))
                        .collect::<Vec<_>>(),
                )),
            };
            ctx.add_variable_as_val(&**name, value);
        }
        for ((name, v), used) in call.arg_names.iter().zip(call.args).zip(&self.args_used) {
            if *used {
                ctx.add_variable_as_val(&**name, to_val(v));
            }
        }
        if self.now_used {
            ctx.add_variable_as_val(NOW, to_val(&now));
        }

        let mut out = call.output();
        for (i, program) in self.programs.iter().enumerate() {
            let Some(program) = program else { continue };
            let v = program
                .execute(&ctx)
                .map_err(|e| UdfError::Failed(explain::explain(&e)))?;
            let v = from_cel(v).map_err(|e| UdfError::Failed(e.to_string()))?;
            out = out.set_at(i, v)?;
        }
        Ok(out.build())
    }
}

/// A CEL UDF's records from their fast forms ([`CelUdf::fast_step`]): the
/// same record [`CelUdf::row`] makes for a key, built in one pass, without the
/// row builder's checks (which would pass).
#[derive(Debug, Clone, Copy)]
pub struct FastStep<'a> {
    /// Where each column of a record comes from, in column order.
    sources: &'a [Source],
    now: Timestamp,
}

/// Where one column of a fast record comes from: what it holds before a UDF
/// sets it, for a column without an expression, or its fast form.
#[derive(Debug, Clone)]
enum Source {
    /// A column without an expression.
    Preset(Preset),
    /// The column's expression.
    Fast(Fast),
}

/// Where each column of an `output` record comes from, given the columns'
/// fast forms (`None`: the column has no expression).
fn record_sources(fast: &[Option<Fast>], output: &Entity) -> Box<[Source]> {
    let source = |(c, f): (usize, &Option<Fast>)| match f {
        Some(Fast::Now) => Source::Preset(Preset::Now),
        Some(f) => Source::Fast(f.clone()),
        None => Source::Preset(Preset::of(output, c)),
    };
    fast.iter().enumerate().map(source).collect()
}

impl FastStep<'_> {
    /// The record of the key whose inputs' records are `records` (one per
    /// input, each a `latest` read's), with the step's `args` and the key's
    /// values `key`; `None` when an operand is not a double (the key's UDF
    /// call then falls back to the interpreter, which reports CEL's error).
    pub fn row(&self, records: &[&Row], args: &[Value], key: &[Value]) -> Option<Row> {
        self.row_of(&KeyOperands { records, args }, key)
    }

    fn row_of<O: fast::Operands>(&self, operands: &O, key: &[Value]) -> Option<Row> {
        let column = |source: &Source| {
            Some(match source {
                Source::Preset(p) => p.value(key, self.now),
                Source::Fast(f) => Value::Float(f.eval(operands)?),
            })
        };
        // The common widths built in place, as an array the record keeps;
        // wider records through an iterator.
        let columns: Arc<[Value]> = match self.sources {
            [a] => Arc::new([column(a)?]),
            [a, b] => Arc::new([column(a)?, column(b)?]),
            [a, b, c] => Arc::new([column(a)?, column(b)?, column(c)?]),
            [a, b, c, d] => Arc::new([column(a)?, column(b)?, column(c)?, column(d)?]),
            sources => sources.iter().map(column).collect::<Option<_>>()?,
        };
        Some(Row::new(self.now, columns))
    }
}

/// One key's operands in a step: each input's record, and the arguments.
struct KeyOperands<'a> {
    records: &'a [&'a Row],
    args: &'a [Value],
}

impl fast::Operands for KeyOperands<'_> {
    fn field(&self, input: usize, column: usize) -> Option<&Value> {
        self.records.get(input)?.columns.get(column)
    }

    fn arg(&self, i: usize) -> Option<&Value> {
        self.args.get(i)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use crate::registry::{FeatureKind, UdfImpl};
    use crate::udf::{Input, UdfCall};
    use crate::value::{Row, Timestamp, Value};
    use crate::{NativeUdfs, Registry};

    const SPEC: &str = r#"
version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {a: float, b: float}
features:
  base:
    kind: pipeline
    entity: E
  other:
    kind: pipeline
    entity: E
  arith:
    kind: on_demand
    entity: E
    dependencies: [base, other]
    args: {m: {type: float, default: 1.5}}
    udf:
      expr:
        a: "-(base.a * m + other.b) / (base.b - 0.5) - -base.a"
        b: "math.greatest(base.a, other.a)"
        ts: "now"
  fast_only:
    kind: on_demand
    entity: E
    dependencies: [base]
    args: {m: {type: float, default: 1.5}}
    udf:
      expr: {a: "-(base.a * m + base.b) / (base.b - 0.5) - -base.a", b: "2.0 - base.b", ts: "now"}
"#;

    fn udf<'r>(r: &'r Registry, name: &str) -> (&'r super::CelUdf, &'r crate::Feature) {
        let f = r.feature(r.feature_id(name).unwrap());
        match &f.kind {
            FeatureKind::OnDemand {
                udf: UdfImpl::Cel(c),
                ..
            } => (c, f),
            _ => panic!("{name} is not a CEL feature"),
        }
    }

    fn row(a: Value, b: Value) -> Row {
        Row::new(
            Timestamp(5),
            vec![Value::from("k"), Value::Timestamp(Timestamp(5)), a, b],
        )
    }

    /// The call of on-demand `feature` for one key.
    fn call_of<'a>(
        feature: &'a crate::Feature,
        (inputs, args): (&'a [Input], &'a [Value]),
        key: &'a [Value],
        now: Timestamp,
    ) -> UdfCall<'a> {
        let FeatureKind::OnDemand {
            input_names,
            input_entities,
            arg_names,
            ..
        } = &feature.kind
        else {
            panic!("{} is not on-demand", feature.name)
        };
        UdfCall {
            feature: &feature.name,
            input_names,
            input_entities,
            inputs,
            arg_names,
            args,
            output: &feature.entity,
            key,
            now,
        }
    }

    /// A step's fast record is the interpreter's for records of every width:
    /// the widths built as arrays and the wider ones, two key fields, a
    /// timestamp before or among the fields.
    #[test]
    fn a_fast_record_of_any_width_is_the_interpreters() {
        const WIDTHS: &str = r#"
version: 1
entities:
  B:
    keys: {id: string}
    timestamp: ts
    fields: {x: float}
  W3:
    keys: {id: string}
    timestamp: ts
    fields: {v: float}
  W5:
    keys: {id: string, n: int}
    timestamp: ts
    fields: {a: float, b: float}
  W6:
    keys: {id: string}
    timestamp: ts
    fields: {a: float, b: float, c: float, d: float}
features:
  base:
    kind: pipeline
    entity: B
  w3:
    kind: on_demand
    entity: W3
    dependencies: [base]
    udf: {expr: {v: "base.x * 2.0"}}
  w5:
    kind: on_demand
    entity: W5
    dependencies: [base]
    udf: {expr: {a: "base.x + 1.0", b: "base.x - 1.0", ts: "now"}}
  w6:
    kind: on_demand
    entity: W6
    dependencies: [base]
    udf: {expr: {a: "base.x", b: "-base.x", c: "base.x / 4.0", d: "3.0"}}
"#;
        let r = Registry::from_yaml("t", WIDTHS, &NativeUdfs::new()).unwrap();
        let now = Timestamp(1_744_970_400_123_456);
        let base = Row::new(
            now,
            vec![Value::from("k"), Value::Timestamp(now), Value::Float(1.25)],
        );
        for (name, key) in [
            ("w3", vec![Value::from("k")]),
            ("w5", vec![Value::from("k"), Value::Int(7)]),
            ("w6", vec![Value::from("k")]),
        ] {
            let (udf, feature) = udf(&r, name);
            let inputs = [Input::One(base.clone())];
            let call = call_of(feature, (&inputs, &[]), &key, now);
            let step = udf.fast_step(&feature.entity, now).expect(name);
            let got = step.row(&[&base], &[], &key).expect(name);
            let want = udf.call_interpreted(&call).unwrap();
            assert_eq!(format!("{:?}", [got]), format!("{want:?}"), "{name}");
        }
    }

    /// The fast path gives exactly the interpreter's answer (same bits, same errors),
    /// over awkward doubles and nulls.
    #[test]
    fn fast_path_matches_the_interpreter() {
        let r = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        let (arith, _) = udf(&r, "arith");
        let (fast, feature) = udf(&r, "fast_only");
        assert!(!arith.is_fast(), "a function call has no fast form");
        assert!(fast.is_fast());
        let doubles = [
            0.0,
            -0.0,
            1.0,
            -2.5,
            1e308,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NAN,
        ];
        let mut compared = 0;
        for a in doubles {
            for b in doubles {
                for m in [Value::Float(1.5), Value::Float(-0.0), Value::Null] {
                    for a in [Value::Float(a), Value::Null] {
                        let inputs = [Input::One(row(a.clone(), Value::Float(b)))];
                        let args = [m.clone()];
                        let key = [Value::from("k")];
                        let now = Timestamp(1_744_970_400_123_456);
                        let call = call_of(feature, (&inputs, &args), &key, now);
                        let got = fast.call(&call);
                        let want = fast.call_interpreted(&call);
                        // A step's record for the key, from the same record and
                        // arguments without the call: the call's own, or none
                        // where the call falls back to the interpreter.
                        let step = fast.fast_step(&feature.entity, call.now).unwrap();
                        let Input::One(record) = &inputs[0] else {
                            panic!()
                        };
                        match (step.row(&[record], &args, &key), &got) {
                            (Some(s), Ok(g)) => assert_eq!(
                                format!("{:?}", [s]),
                                format!("{g:?}"),
                                "{a:?} {b} {m:?}"
                            ),
                            (None, _) => assert!(a.is_null() || m.is_null(), "{a:?} {m:?}"),
                            (Some(s), Err(e)) => panic!("step {s:?} vs call {e}"),
                        }
                        match (&got, &want) {
                            (Ok(g), Ok(w)) => {
                                assert_eq!(g.len(), 1);
                                assert_eq!(g[0].event_time, w[0].event_time);
                                for (x, y) in g[0].columns.iter().zip(w[0].columns.iter()) {
                                    match (x, y) {
                                        // The same bits; a NaN's sign and payload are
                                        // not specified by Rust's arithmetic (they follow
                                        // the machine code), so any NaN matches a NaN.
                                        (Value::Float(x), Value::Float(y))
                                            if !(x.is_nan() && y.is_nan()) =>
                                        {
                                            assert_eq!(x.to_bits(), y.to_bits(), "{a:?} {b} {m:?}")
                                        }
                                        (Value::Float(_), Value::Float(_)) => {}
                                        _ => assert_eq!(x, y),
                                    }
                                }
                            }
                            (Err(g), Err(w)) => assert_eq!(g.to_string(), w.to_string()),
                            _ => panic!("fast {got:?} vs interpreter {want:?}"),
                        }
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 8 * 8 * 3 * 2);
    }
}
