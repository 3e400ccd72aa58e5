//! Scalar CEL expressions (mock sources' generators): reserved names, compile, evaluate.

use std::collections::HashSet;
use std::sync::Arc;

use cel::{Context, Env, ExecutionError, Program};

use crate::value::{FieldType, Value};

use super::compile::{check_result, free_references, short};
use super::convert::from_cel;
use super::{CelError, NOW};

/// Names CEL reserves; they cannot name features or arguments.
pub fn is_reserved(name: &str) -> bool {
    if super::FUNCTION_NAMESPACES.contains(&name) {
        return true;
    }
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
pub fn compile_scalar(env: &Arc<Env>, source: &str, names: &[&str]) -> Result<Program, CelError> {
    let program = env
        .compile(source)
        .map_err(|e| CelError::Compile(super::explain::syntax(&e.to_string(), source)))?;
    let mut refs = Vec::new();
    free_references(program.expression(), &mut Vec::new(), &mut refs);
    let known: HashSet<&str> = names.iter().copied().collect();
    if let Some(r) = refs.iter().find(|r| !known.contains(r.var)) {
        return Err(CelError::UnknownName {
            name: r.var.to_owned(),
            suggestion: crate::error::did_you_mean(r.var, names.iter().copied()),
            known: names.join(", "),
        });
    }
    Ok(program)
}

/// Evaluates a standalone expression with integer bindings.
pub fn eval_scalar(
    env: &Arc<Env>,
    program: &Program,
    vars: &[(&str, i64)],
) -> Result<Value, CelError> {
    from_cel(execute(env, program, vars)?)
}

fn execute(
    env: &Arc<Env>,
    program: &Program,
    vars: &[(&str, i64)],
) -> Result<cel::Value, CelError> {
    let mut ctx = Context::with_env(Arc::clone(env));
    for (n, v) in vars {
        ctx.add_variable_from_value(*n, cel::Value::Int(*v));
    }
    program.execute(&ctx).map_err(|e| match e {
        ExecutionError::UndeclaredReference(name) => CelError::UnknownReference(name.to_string()),
        e if super::explain::depends_on_data(&e) => {
            CelError::Evaluation(super::explain::explain(&e))
        }
        e => CelError::TypeMismatch(super::explain::explain(&e)),
    })
}

/// What is wrong with a mock generator's column of type `ty`, if anything:
/// `source` must compile over `i` and `tick` and give a value of the type for the
/// first record (i = 0, tick = 0).
pub(crate) fn generated_problem(env: &Arc<Env>, source: &str, ty: &FieldType) -> Option<String> {
    let checked = compile_scalar(env, source, &["i", "tick"])
        .and_then(|p| execute(env, &p, &[("i", 0), ("tick", 0)]))
        .and_then(|v| check_result(v, ty));
    Some(match checked.err()? {
        CelError::TypeMismatch(detail) => format!("type mismatch in `{}`: {detail}", short(source)),
        CelError::Evaluation(detail) => format!(
            "`{}` fails for the first record (i = 0, tick = 0): {detail}",
            short(source)
        ),
        other => other.to_string(),
    })
}
