//! Scalar CEL expressions (mock sources' generators): reserved names, compile, evaluate.

use std::collections::HashSet;
use std::sync::Arc;

use cel::{Context, Env, Program};

use crate::value::Value;

use super::compile::free_references;
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
    let mut ctx = Context::with_env(Arc::clone(env));
    for (n, v) in vars {
        ctx.add_variable_from_value(*n, cel::Value::Int(*v));
    }
    from_cel(
        program
            .execute(&ctx)
            .map_err(|e| CelError::Evaluation(e.to_string()))?,
    )
}
