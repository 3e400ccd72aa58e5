//! Compiling a CEL UDF: parse each output expression, check its names and fields
//! against the bindings, and dry-run it over typed placeholders.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Program};

use crate::entity::Entity;
use crate::value::{FieldType, Row, Timestamp, Value};

use super::convert::{from_cel, record_to_cel, to_cel};
use super::explain::one_line;
use super::fast::Fast;
use super::{Binding, CelError, CelUdf, ExprProblem, NOW, ReadColumns};

impl CelUdf {
    /// Compiles and checks `exprs` (output field → expression) for `output`, with
    /// `bindings` visible by name (in the order the inputs and args are bound).
    /// `in_place`: the output's fields are declared under the feature's `output`
    /// (not by a named entity), which messages say.
    pub fn compile(
        env: &Arc<Env>,
        output: &Entity,
        in_place: bool,
        exprs: &indexmap::IndexMap<String, String>,
        bindings: &[(Arc<str>, Binding)],
    ) -> Result<Self, Vec<ExprProblem>> {
        let mut problems = Vec::new();
        let mut programs: Vec<Option<Program>> = std::iter::repeat_with(|| None)
            .take(output.columns.len())
            .collect();
        // (variable, field selected directly on it) for every reference.
        let mut used: Vec<(String, Option<String>)> = Vec::new();
        for (field, source) in exprs {
            let Some(col) = output.column_index(field) else {
                problems.push(ExprProblem {
                    field: Some(field.clone()),
                    message: not_an_output_field(output, in_place, field),
                });
                continue;
            };
            let ty = &output.columns[col].ty;
            match compile_one(env, ty, bindings, field, source, &mut used) {
                Ok(program) => programs[col] = Some(program),
                Err(found) => problems.extend(found),
            }
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
        let (inputs, args_used, now_used) = bound_reads(bindings, &used);
        let fast = fast_forms(bindings, &programs);
        // Every fast value fits its column (a double into a `float` one, `now` into
        // the `timestamp` one): its records need not be checked column by column.
        let fast_fits = fast.as_ref().is_some_and(|fast| {
            fast.iter().zip(&output.columns).all(|(f, c)| match f {
                None => true,
                Some(Fast::Now) => c.ty == FieldType::Timestamp,
                Some(_) => c.ty == FieldType::Float,
            })
        });
        let fast_record = (fast.as_deref())
            .filter(|_| fast_fits)
            .map(|fast| super::record_sources(fast, output));
        Ok(Self {
            env: Arc::clone(env),
            programs,
            inputs,
            args_used,
            now_used,
            fast,
            fast_record,
        })
    }
}

/// Compiles the expression of output `field` (of type `ty`) and checks its names
/// and fields against `bindings` (adding what it reads to `used`), then dry-runs
/// it if those hold: the program, or every problem found.
fn compile_one(
    env: &Arc<Env>,
    ty: &FieldType,
    bindings: &[(Arc<str>, Binding)],
    field: &str,
    source: &str,
    used: &mut Vec<(String, Option<String>)>,
) -> Result<Program, Vec<ExprProblem>> {
    let problem = |message: String| ExprProblem {
        field: Some(field.to_owned()),
        message,
    };
    let program = env.compile(source).map_err(|e| {
        vec![problem(format!(
            "does not compile: {}",
            super::explain::syntax(&e.to_string(), source)
        ))]
    })?;
    let mut refs = Vec::new();
    free_references(program.expression(), &mut Vec::new(), &mut refs);
    used.extend(
        refs.iter()
            .map(|r| (r.var.to_owned(), r.field.map(str::to_owned))),
    );
    let mut problems = Vec::new();
    for r in &refs {
        if !bindings.iter().any(|(n, _)| &**n == r.var) {
            problems.push(problem(format!(
                "references unknown name `{}`{} (known: {})",
                r.var,
                crate::error::did_you_mean(r.var, bindings.iter().map(|(n, _)| &**n)),
                known_names(bindings)
            )));
        }
    }
    problems.extend(
        super::fields::check(program.expression(), bindings)
            .into_iter()
            .map(problem),
    );
    if !problems.is_empty() {
        return Err(problems);
    }
    dry_run(env, &program, bindings, ty, source).map_err(|e| {
        vec![problem(match e {
            CelError::TypeMismatch(detail) => {
                format!("type mismatch in `{}`: {detail}", short(source))
            }
            CelError::UnknownReference(name) => {
                super::explain::unknown_reference(program.expression(), &name)
            }
            other => other.to_string(),
        })]
    })?;
    Ok(program)
}

/// Why `field`, given an expression, is not one of `output`'s fields.
fn not_an_output_field(output: &Entity, in_place: bool, field: &str) -> String {
    let names = || output.columns.iter().map(|c| &*c.name);
    let hint = match crate::error::closest(field, names()) {
        Some(c) => format!(" (did you mean `{c}`?)"),
        None => format!(" ({})", names().collect::<Vec<_>>().join(", ")),
    };
    if in_place {
        format!("`{field}` is not a field of the output{hint}; declare it under `output.fields`")
    } else {
        format!("`{field}` is not a field of entity `{}`{hint}", output.name)
    }
}

/// An expression on one line, cut to about 60 characters, for messages.
pub(super) fn short(source: &str) -> String {
    let line = one_line(source);
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// What the expressions read of each binding, so that only that is bound: per
/// input, the columns read (`None`: not read at all; a record read only through
/// `dep.field` gets only those fields); per argument, whether it is read; and
/// whether `now` is.
fn bound_reads(
    bindings: &[(Arc<str>, Binding)],
    used: &[(String, Option<String>)],
) -> (Vec<Option<ReadColumns>>, Vec<bool>, bool) {
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
                if reads(used, name).next().is_none() {
                    inputs.push(None);
                    continue;
                }
                let whole =
                    matches!(b, Binding::Records(_)) || reads(used, name).any(|(_, f)| f.is_none());
                let columns = e
                    .columns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| {
                        whole || reads(used, name).any(|(_, f)| f.as_deref() == Some(&*c.name))
                    })
                    .map(|(i, c)| (i, Arc::clone(&c.name)))
                    .collect();
                inputs.push(Some(columns));
            }
            Binding::Scalar(_) if &**name == NOW => now_used = reads(used, name).next().is_some(),
            Binding::Scalar(_) => args_used.push(reads(used, name).next().is_some()),
        }
    }
    (inputs, args_used, now_used)
}

/// The native form of each program where it has one ([`Fast`]); `None` when any
/// program lacks one. Inputs are named by their index among the dependencies
/// (only `latest` ones qualify), `double` arguments by their index among the args.
fn fast_forms(
    bindings: &[(Arc<str>, Binding)],
    programs: &[Option<Program>],
) -> Option<Vec<Option<Fast>>> {
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
    programs
        .iter()
        .map(|p| match p {
            None => Some(None),
            Some(p) => match &p.expression().expr {
                Expr::Ident(name) if name == NOW => Some(Some(Fast::Now)),
                _ => Fast::of(p.expression(), &fast_inputs, &fast_args).map(Some),
            },
        })
        .collect()
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
pub(super) struct Reference<'e> {
    pub(super) var: &'e str,
    pub(super) field: Option<&'e str>,
}

/// Collects free variables (not bound by a comprehension) and direct field selections.
pub(super) fn free_references<'e>(
    e: &'e IdedExpr,
    bound: &mut Vec<&'e str>,
    out: &mut Vec<Reference<'e>>,
) {
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
            // `math.sum(…)`: `math` names the function's namespace, not a variable.
            let namespace = call.target.as_deref().is_some_and(|t| {
                matches!(&t.expr, Expr::Ident(n)
                    if super::FUNCTION_NAMESPACES.contains(&n.as_str()) && !bound.contains(&n.as_str()))
            });
            if let Some(t) = &call.target
                && !namespace
            {
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
/// `source` is the program's text, for messages.
fn dry_run(
    env: &Arc<Env>,
    program: &Program,
    bindings: &[(Arc<str>, Binding)],
    expected: &FieldType,
    source: &str,
) -> Result<(), CelError> {
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
        Ok(v) => check_result(v, expected),
        Err(ExecutionError::UndeclaredReference(name)) => {
            Err(CelError::UnknownReference(name.to_string()))
        }
        // Failures that depend on the values, not their types, pass: the
        // placeholders are not the data.
        Err(e) if super::explain::depends_on_data(&e) => Ok(()),
        Err(other) => Err(CelError::TypeMismatch(super::explain::explain_in(
            &other, source,
        ))),
    }
}

/// Whether an expression's value `v` fits a field of type `expected`; a type
/// mismatch saying what it gives if not.
pub(super) fn check_result(v: cel::Value, expected: &FieldType) -> Result<(), CelError> {
    let got = from_cel(v).map_err(|e| match e {
        CelError::NoFeatureType(t) => CelError::TypeMismatch(format!(
            "the expression gives {t}, the field is {expected}; {} cannot be a field value{}",
            match t {
                "bytes" => "bytes",
                "map" => "a map",
                "duration" => "a duration",
                _ => "such a value",
            },
            if t == "duration" {
                " (`.getSeconds()` gives its whole seconds as an int)"
            } else {
                ""
            }
        )),
        other => CelError::Result(Box::new(other)),
    })?;
    match expected.try_coerce(got) {
        Ok(_) => Ok(()),
        Err(got) => Err(CelError::TypeMismatch(format!(
            "the expression gives {}, the field is {expected}",
            value_type_name(&got)
        ))),
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
        Value::List(items) => {
            let mut types: Vec<String> = Vec::new();
            for t in items.iter().filter(|x| !x.is_null()).map(value_type_name) {
                if !types.contains(&t) {
                    types.push(t);
                }
            }
            match types.as_slice() {
                [] => "list".into(),
                [t] => format!("list<{t}>"),
                _ => format!("a list of {}", types.join(" and ")),
            }
        }
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
