//! CEL UDFs: one compiled expression per output field.
//!
//! Variables visible to an expression: each dependency by its feature name (a map of
//! its columns for `latest`, a list of such maps for `range`/`last_n`), each UDF
//! argument by name, and `now` (the request time, a timestamp). Expressions are
//! compiled once at load; names, fields and types are checked then by walking the
//! expression and by a dry run over typed placeholder values.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelTimestamp,
};
use cel::common::value::Val;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program};
use chrono::{DateTime, FixedOffset};

use crate::entity::Entity;
use crate::udf::{Input, UdfCall, UdfError};
use crate::value::{FieldType, Row, Timestamp, Value};

/// The variable holding the request time.
pub const NOW: &str = "now";

/// The shared CEL environment, built once per registry: the standard library plus
/// the `math` (`math.greatest`, `math.least`, `math.round`, …), `strings` and `lists`
/// extensions.
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
}

/// An expression of plain `double` arithmetic, evaluated without the interpreter.
/// CEL's `double` operators are IEEE 754 operations, so the results are the same
/// bits; any operand that turns out not to be a double at run time (a null field)
/// makes the whole call fall back to the interpreter, which then reports CEL's own
/// error.
#[derive(Debug, Clone)]
enum Fast {
    /// A `double` literal.
    Lit(f64),
    /// `input.field` of a `latest` dependency: (input index, column index).
    Field(usize, usize),
    /// A `double` argument, by index.
    Arg(usize),
    /// `-x`.
    Neg(Box<Fast>),
    /// `a op b`.
    Bin(FastOp, Box<Fast>, Box<Fast>),
    /// The whole expression is `now`.
    Now,
}

#[derive(Debug, Clone, Copy)]
enum FastOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl Fast {
    /// Builds the fast form of `e`, if it has one.
    fn of(
        e: &IdedExpr,
        inputs: &HashMap<&str, (usize, &Entity)>,
        args: &HashMap<&str, usize>,
    ) -> Option<Self> {
        use cel::common::ast::LiteralValue;
        match &e.expr {
            Expr::Literal(LiteralValue::Double(d)) => Some(Self::Lit(*d.inner())),
            Expr::Ident(name) => args.get(name.as_str()).map(|i| Self::Arg(*i)),
            Expr::Select(sel) if !sel.test => {
                let Expr::Ident(name) = &sel.operand.expr else {
                    return None;
                };
                let (input, entity) = inputs.get(name.as_str())?;
                let column = entity.column_index(&sel.field)?;
                (entity.columns[column].ty == FieldType::Float)
                    .then_some(Self::Field(*input, column))
            }
            Expr::Call(call) if call.target.is_none() => {
                let op = match call.func_name.as_str() {
                    "_+_" => FastOp::Add,
                    "_-_" => FastOp::Sub,
                    "_*_" => FastOp::Mul,
                    "_/_" => FastOp::Div,
                    "-_" if call.args.len() == 1 => {
                        return Some(Self::Neg(Box::new(Self::of(&call.args[0], inputs, args)?)));
                    }
                    _ => return None,
                };
                let [a, b] = call.args.as_slice() else {
                    return None;
                };
                Some(Self::Bin(
                    op,
                    Box::new(Self::of(a, inputs, args)?),
                    Box::new(Self::of(b, inputs, args)?),
                ))
            }
            _ => None,
        }
    }

    /// The value, or `None` when an operand is not a double (fall back).
    fn eval(&self, call: &UdfCall<'_>) -> Option<f64> {
        match self {
            Self::Lit(f) => Some(*f),
            Self::Field(input, column) => match call.inputs.get(*input)? {
                Input::One(row) => match row.columns.get(*column)? {
                    Value::Float(f) => Some(*f),
                    _ => None,
                },
                Input::Many(_) => None,
            },
            Self::Arg(i) => match call.args.get(*i)? {
                Value::Float(f) => Some(*f),
                _ => None,
            },
            Self::Neg(x) => Some(-x.eval(call)?),
            Self::Bin(op, a, b) => {
                let (a, b) = (a.eval(call)?, b.eval(call)?);
                Some(match op {
                    FastOp::Add => a + b,
                    FastOp::Sub => a - b,
                    FastOp::Mul => a * b,
                    FastOp::Div => a / b,
                })
            }
            Self::Now => None,
        }
    }
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
    /// Compiles and checks `exprs` (output field → expression) for `output`, with
    /// `bindings` visible by name (in the order the inputs and args are bound).
    pub fn compile(
        env: &Arc<Env>,
        output: &Entity,
        exprs: &indexmap::IndexMap<String, String>,
        bindings: &[(Arc<str>, Binding)],
    ) -> Result<Self, Vec<ExprProblem>> {
        let mut problems = Vec::new();
        let mut programs: Vec<Option<Program>> = std::iter::repeat_with(|| None)
            .take(output.columns.len())
            .collect();
        let names: HashMap<&str, &Binding> = bindings.iter().map(|(n, b)| (&**n, b)).collect();
        // (variable, field selected directly on it) for every reference.
        let mut used: Vec<(String, Option<String>)> = Vec::new();

        for (field, source) in exprs {
            let problem = |message: String| ExprProblem {
                field: Some(field.clone()),
                message,
            };
            let Some(col) = output.column_index(field) else {
                problems.push(problem(format!(
                    "`{field}` is not a field of entity `{}`",
                    output.name
                )));
                continue;
            };
            let program = match env.compile(source) {
                Ok(p) => p,
                Err(e) => {
                    problems.push(problem(format!(
                        "does not compile: {}",
                        one_line(&e.to_string())
                    )));
                    continue;
                }
            };
            let mut refs = Vec::new();
            free_references(program.expression(), &mut Vec::new(), &mut refs);
            used.extend(
                refs.iter()
                    .map(|r| (r.var.to_owned(), r.field.map(str::to_owned))),
            );
            let mut ok = true;
            for r in &refs {
                match (names.get(r.var), r.field) {
                    (None, _) => {
                        ok = false;
                        problems.push(problem(format!(
                            "references unknown name `{}` (known: {})",
                            r.var,
                            known_names(bindings)
                        )));
                    }
                    (Some(Binding::Record(e)), Some(f)) if e.column_index(f).is_none() => {
                        ok = false;
                        problems.push(problem(format!(
                            "`{}.{f}`: entity `{}` has no field `{f}`",
                            r.var, e.name
                        )));
                    }
                    _ => {}
                }
            }
            if ok {
                let expected = &output.columns[col].ty;
                if let Err(message) = dry_run(env, &program, bindings, expected) {
                    problems.push(problem(message));
                    continue;
                }
            }
            programs[col] = Some(program);
        }
        for (i, c) in output.columns.iter().enumerate() {
            let defaulted = i == output.timestamp_index || output.key_index.contains(&i);
            if !defaulted && !exprs.contains_key(&*c.name) {
                problems.push(ExprProblem {
                    field: None,
                    message: format!("no expression for output field `{}`", c.name),
                });
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // Bind only what the expressions read: unread inputs and scalars are skipped,
        // and a record read only through `dep.field` gets only those fields.
        fn reads<'a>(
            used: &'a [(String, Option<String>)],
            name: &'a str,
        ) -> impl Iterator<Item = &'a (String, Option<String>)> + 'a {
            used.iter().filter(move |(v, _)| v == name)
        }
        let mut inputs = Vec::new();
        let mut args_used = Vec::new();
        let mut now_used = false;
        for (name, b) in bindings {
            match b {
                Binding::Record(e) | Binding::Records(e) => {
                    let mut refs = reads(&used, name).peekable();
                    if refs.peek().is_none() {
                        inputs.push(None);
                        continue;
                    }
                    let whole = matches!(b, Binding::Records(_))
                        || reads(&used, name).any(|(_, f)| f.is_none());
                    let columns = e
                        .columns
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| {
                            whole || reads(&used, name).any(|(_, f)| f.as_deref() == Some(&*c.name))
                        })
                        .map(|(i, c)| (i, Arc::clone(&c.name)))
                        .collect();
                    inputs.push(Some(columns));
                }
                Binding::Scalar(_) if &**name == NOW => {
                    now_used = reads(&used, name).next().is_some()
                }
                Binding::Scalar(_) => args_used.push(reads(&used, name).next().is_some()),
            }
        }
        // The fast forms: inputs by their index among the dependencies (only
        // `latest` ones qualify), `double` arguments by their index among the args.
        let (mut fast_inputs, mut fast_args) = (HashMap::new(), HashMap::new());
        let (mut n_inputs, mut n_args) = (0, 0);
        for (name, b) in bindings {
            match b {
                Binding::Record(e) => {
                    fast_inputs.insert(&**name, (n_inputs, &**e));
                    n_inputs += 1;
                }
                Binding::Records(_) => n_inputs += 1,
                Binding::Scalar(_) if &**name == NOW => {}
                Binding::Scalar(ty) => {
                    if *ty == FieldType::Float {
                        fast_args.insert(&**name, n_args);
                    }
                    n_args += 1;
                }
            }
        }
        let fast = programs
            .iter()
            .map(|p| match p {
                None => Some(None),
                Some(p) => match &p.expression().expr {
                    Expr::Ident(name) if name == NOW => Some(Some(Fast::Now)),
                    _ => Fast::of(p.expression(), &fast_inputs, &fast_args).map(Some),
                },
            })
            .collect::<Option<Vec<_>>>();
        Ok(Self {
            env: Arc::clone(env),
            programs,
            inputs,
            args_used,
            now_used,
            fast,
        })
    }

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
        let mut out = call.output();
        for (i, f) in fast.iter().enumerate() {
            let v = match f {
                None => continue,
                Some(Fast::Now) => Value::Timestamp(call.now),
                // An operand that is not a double: back to the interpreter.
                Some(f) => Value::Float(f.eval(call)?),
            };
            out = match out.set_at(i, v) {
                Ok(out) => out,
                Err(e) => return Some(Err(e)),
            };
        }
        Some(Ok(out.build()))
    }

    /// Evaluates the expressions for one key.
    pub fn call(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
        if let Some(fast) = &self.fast
            && let Some(row) = self.call_fast(fast, call)
        {
            return row.map(|r| vec![r]);
        }
        self.call_interpreted(call)
    }

    /// Evaluates the expressions for one key with the CEL interpreter.
    pub fn call_interpreted(&self, call: &UdfCall<'_>) -> Result<Vec<Row>, UdfError> {
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
                .map_err(|e| UdfError::Failed(e.to_string()))?;
            let v = from_cel(v).map_err(UdfError::Failed)?;
            out = out.set_at(i, v)?;
        }
        Ok(vec![out.build()])
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn known_names(bindings: &[(Arc<str>, Binding)]) -> String {
    let names: Vec<&str> = bindings.iter().map(|(n, _)| &**n).collect();
    names.join(", ")
}

fn column_keys(e: &Entity) -> Arc<[Key]> {
    e.columns
        .iter()
        .map(|c| Key::String(Arc::new(c.name.to_string())))
        .collect()
}

/// A free variable, and the field selected on it directly if any (`x.f`).
struct Reference<'e> {
    var: &'e str,
    field: Option<&'e str>,
}

/// Collects free variables (not bound by a comprehension) and direct field selections.
fn free_references<'e>(e: &'e IdedExpr, bound: &mut Vec<&'e str>, out: &mut Vec<Reference<'e>>) {
    match &e.expr {
        Expr::Ident(name) => {
            if !name.starts_with('@') && !bound.contains(&name.as_str()) {
                out.push(Reference {
                    var: name,
                    field: None,
                });
            }
        }
        Expr::Select(sel) => {
            if let Expr::Ident(name) = &sel.operand.expr
                && !name.starts_with('@')
                && !bound.contains(&name.as_str())
            {
                out.push(Reference {
                    var: name,
                    field: Some(&sel.field),
                });
                return;
            }
            free_references(&sel.operand, bound, out);
        }
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                free_references(t, bound, out);
            }
            for a in &call.args {
                free_references(a, bound, out);
            }
        }
        Expr::Comprehension(c) => {
            free_references(&c.iter_range, bound, out);
            free_references(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(&c.iter_var);
            if let Some(v2) = &c.iter_var2 {
                bound.push(v2);
            }
            bound.push(&c.accu_var);
            free_references(&c.loop_cond, bound, out);
            free_references(&c.loop_step, bound, out);
            free_references(&c.result, bound, out);
            bound.truncate(depth);
        }
        Expr::List(l) => {
            for x in &l.elements {
                free_references(x, bound, out);
            }
        }
        Expr::Map(m) => entries(&m.entries, bound, out),
        Expr::Struct(s) => entries(&s.entries, bound, out),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entries<'e>(
    es: &'e [cel::common::ast::IdedEntryExpr],
    bound: &mut Vec<&'e str>,
    out: &mut Vec<Reference<'e>>,
) {
    for entry in es {
        match &entry.expr {
            EntryExpr::StructField(f) => free_references(&f.value, bound, out),
            EntryExpr::MapEntry(m) => {
                free_references(&m.key, bound, out);
                free_references(&m.value, bound, out);
            }
        }
    }
}

/// Runs `program` once over typed placeholders to catch type errors at load: an
/// operator applied to the wrong types, or a result that does not fit the field.
/// Errors that depend on the data (division by zero, an index out of range) pass.
fn dry_run(
    env: &Arc<Env>,
    program: &Program,
    bindings: &[(Arc<str>, Binding)],
    expected: &FieldType,
) -> Result<(), String> {
    let mut ctx = Context::with_env(Arc::clone(env));
    for (name, b) in bindings {
        let v = match b {
            Binding::Record(e) => placeholder_record(e),
            Binding::Records(e) => cel::Value::List(Arc::new(vec![placeholder_record(e)])),
            Binding::Scalar(ty) => to_cel(&placeholder(ty)),
        };
        ctx.add_variable_from_value(&**name, v);
    }
    match program.execute(&ctx) {
        Ok(v) => {
            let got = from_cel(v).map_err(|e| format!("result {e}"))?;
            if expected.coerce(got.clone()).is_none() {
                return Err(format!(
                    "type mismatch: the expression gives {}, the field is {expected}",
                    value_type_name(&got)
                ));
            }
            Ok(())
        }
        Err(ExecutionError::NoSuchOverload(o)) => Err(format!(
            "type mismatch: no `{}` for ({})",
            o.function(),
            o.argument_types().join(", ")
        )),
        Err(ExecutionError::UndeclaredReference(name)) => {
            Err(format!("references unknown function or name `{name}`"))
        }
        // Failures that depend on the values, not their types, pass: the
        // placeholders are not the data.
        Err(
            ExecutionError::FunctionError { .. }
            | ExecutionError::DivisionByZero(_)
            | ExecutionError::RemainderByZero(_)
            | ExecutionError::Overflow(..)
            | ExecutionError::IndexOutOfBounds(_)
            | ExecutionError::NoSuchKey(_)
            | ExecutionError::DuplicateKey(_),
        ) => Ok(()),
        Err(other) => Err(format!("type mismatch: {}", one_line(&other.to_string()))),
    }
}

fn value_type_name(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Int(_) => "int".into(),
        Value::Float(_) => "float".into(),
        Value::String(_) => "string".into(),
        Value::Timestamp(_) => "timestamp".into(),
        Value::List(items) => match items.first() {
            Some(x) => format!("list<{}>", value_type_name(x)),
            None => "list".into(),
        },
    }
}

fn placeholder(ty: &FieldType) -> Value {
    match ty {
        FieldType::String => Value::String("x".into()),
        FieldType::Int => Value::Int(1),
        FieldType::Float => Value::Float(1.0),
        FieldType::Bool => Value::Bool(true),
        FieldType::Timestamp => Value::Timestamp(Timestamp(1_700_000_000_000_000)),
        FieldType::List(inner) => Value::List(vec![placeholder(inner)].into()),
    }
}

fn placeholder_record(e: &Entity) -> cel::Value {
    let columns: Vec<Value> = e.columns.iter().map(|c| placeholder(&c.ty)).collect();
    let keys: Vec<(usize, Key)> = column_keys(e).iter().cloned().enumerate().collect();
    record_to_cel(&keys, &Row::new(Timestamp(0), columns))
}

/// A record as a CEL map of the given (column index, key) pairs.
fn record_to_cel(columns: &[(usize, Key)], row: &Row) -> cel::Value {
    let map: HashMap<Key, cel::Value> = columns
        .iter()
        .map(|(i, k)| (k.clone(), to_cel(&row.columns[*i])))
        .collect();
    cel::Value::Map(Map { map: Arc::new(map) })
}

/// A record's `columns` (index, name) as a CEL map, borrowing its strings.
fn record_to_val<'v>(columns: &'v [(usize, Arc<str>)], row: &'v Row) -> Box<dyn Val + 'v> {
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = columns
        .iter()
        .map(|(i, name)| (CelMapKey::from(&**name), to_val(&row.columns[*i])))
        .collect();
    Box::new(CelMap::from(map))
}

/// An Oka value as the interpreter's `Val`, borrowing strings: the same CEL value
/// as [`to_cel`].
fn to_val(v: &Value) -> Box<dyn Val + '_> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Int(i) => Box::new(CelInt::from(*i)),
        Value::Float(f) => Box::new(CelDouble::from(*f)),
        Value::String(s) => Box::new(CelString::from(&**s)),
        Value::Timestamp(t) => match t.to_datetime() {
            Some(dt) => Box::new(CelTimestamp::from(dt.fixed_offset())),
            None => Box::new(CelNull),
        },
        Value::List(items) => Box::new(CelList::from(items.iter().map(to_val).collect::<Vec<_>>())),
    }
}

/// An Oka value as a CEL value.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Int(i) => cel::Value::Int(*i),
        Value::Float(f) => cel::Value::Float(*f),
        Value::String(s) => cel::Value::String(Arc::new(s.to_string())),
        Value::Timestamp(t) => match t.to_datetime() {
            Some(dt) => cel::Value::Timestamp(dt.fixed_offset()),
            None => cel::Value::Null,
        },
        Value::List(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
    }
}

/// A CEL result as an Oka value; maps, bytes and durations have no Oka type.
pub fn from_cel(v: cel::Value) -> Result<Value, String> {
    Ok(match v {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(b),
        cel::Value::Int(i) => Value::Int(i),
        cel::Value::UInt(u) => {
            Value::Int(i64::try_from(u).map_err(|_| format!("uint {u} overflows int"))?)
        }
        cel::Value::Float(f) => Value::Float(f),
        cel::Value::String(s) => Value::String(s.as_str().into()),
        cel::Value::Timestamp(t) => Value::Timestamp(from_datetime(&t)),
        cel::Value::List(items) => Value::List(
            items
                .iter()
                .cloned()
                .map(from_cel)
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        ),
        other => return Err(format!("of type {:?} has no feature type", other.type_of())),
    })
}

fn from_datetime(t: &DateTime<FixedOffset>) -> Timestamp {
    Timestamp(t.timestamp_micros())
}

/// Names CEL reserves; they cannot name features or arguments.
pub fn is_reserved(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
        NOW,
    ];
    RESERVED.contains(&name)
}

/// Compiles a standalone expression of the given scalar bindings (used by the mock
/// source's generators) and checks its free names.
pub fn compile_scalar(env: &Arc<Env>, source: &str, names: &[&str]) -> Result<Program, String> {
    let program = env
        .compile(source)
        .map_err(|e| format!("does not compile: {}", one_line(&e.to_string())))?;
    let mut refs = Vec::new();
    free_references(program.expression(), &mut Vec::new(), &mut refs);
    let known: HashSet<&str> = names.iter().copied().collect();
    if let Some(r) = refs.iter().find(|r| !known.contains(r.var)) {
        return Err(format!(
            "references unknown name `{}` (known: {})",
            r.var,
            names.join(", ")
        ));
    }
    Ok(program)
}

/// Evaluates a standalone expression with integer bindings.
pub fn eval_scalar(
    env: &Arc<Env>,
    program: &Program,
    vars: &[(&str, i64)],
) -> Result<Value, String> {
    let mut ctx = Context::with_env(Arc::clone(env));
    for (n, v) in vars {
        ctx.add_variable_from_value(*n, cel::Value::Int(*v));
    }
    from_cel(program.execute(&ctx).map_err(|e| e.to_string())?)
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

    /// The fast path gives exactly the interpreter's answer (same bits, same errors),
    /// over awkward doubles and nulls.
    #[test]
    fn fast_path_matches_the_interpreter() {
        let r = Registry::from_yaml("t", SPEC, &NativeUdfs::new()).unwrap();
        let (arith, _) = udf(&r, "arith");
        let (fast, feature) = udf(&r, "fast_only");
        assert!(!arith.is_fast(), "a function call has no fast form");
        assert!(fast.is_fast());
        let FeatureKind::OnDemand {
            input_names,
            input_entities,
            arg_names,
            ..
        } = &feature.kind
        else {
            panic!()
        };
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
                        let call = UdfCall {
                            feature: &feature.name,
                            input_names,
                            input_entities,
                            inputs: &inputs,
                            arg_names,
                            args: &args,
                            output: &feature.entity,
                            key: &key,
                            now: Timestamp(1_744_970_400_123_456),
                        };
                        let got = fast.call(&call);
                        let want = fast.call_interpreted(&call);
                        match (&got, &want) {
                            (Ok(g), Ok(w)) => {
                                assert_eq!(g.len(), 1);
                                assert_eq!(g[0].event_time, w[0].event_time);
                                for (x, y) in g[0].columns.iter().zip(w[0].columns.iter()) {
                                    match (x, y) {
                                        (Value::Float(x), Value::Float(y)) => {
                                            assert_eq!(x.to_bits(), y.to_bits(), "{a:?} {b} {m:?}")
                                        }
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
