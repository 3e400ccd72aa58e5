//! CEL's evaluation errors in CEL's own terms, for people: operators as written
//! (`*`, not `mul` or `_*_`), types as CEL names them (`int`, `double`, `list`),
//! values never as Rust's debug form.

use cel::ExecutionError;
use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// `e` as one line a spec author can act on.
pub(super) fn explain(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchOverload(o) if o.function() == "_._" => {
            let t = o.argument_types().first().map_or("value", |t| type_name(t));
            let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            format!("cannot read a field of {article} {t}")
        }
        ExecutionError::NoSuchOverload(o) => {
            let types: Vec<&str> = o.argument_types().iter().map(|t| type_name(t)).collect();
            let hint = mixing_hint(types.iter().copied());
            let types = types.join(", ");
            let f = operator(o.function());
            if let Some(usage) = super::functions::usage(f) {
                format!("`{f}` does not take ({types}); write `{usage}`{hint}")
            } else if f.starts_with(|c: char| c.is_ascii_alphabetic()) {
                format!("no overload of `{f}` takes ({types}){hint}")
            } else {
                format!("`{f}` is not defined for ({types}){hint}")
            }
        }
        ExecutionError::UnsupportedBinaryOperator(op, l, r) => {
            let (l, r) = (type_of(l), type_of(r));
            format!(
                "`{}` is not defined for {l} and {r}{}",
                operator(op),
                mixing_hint([l, r].into_iter())
            )
        }
        ExecutionError::UnexpectedType { got, want } if want.starts_with("math.") => {
            format!("{want}: {got}")
        }
        // The condition of `?:` or `filter`.
        ExecutionError::UnexpectedType { got, want } if want == "bool" => {
            format!("a condition gives {got}; it must be a bool")
        }
        ExecutionError::UnexpectedType { got, want } => format!("expected {want}, got {got}"),
        ExecutionError::ValuesNotComparable(a, b) => {
            format!("cannot compare {} with {}", type_of(a), type_of(b))
        }
        ExecutionError::NoSuchKey(k) => format!("no field or map key `{k}`"),
        ExecutionError::UndeclaredReference(n) => format!("unknown name `{n}`"),
        ExecutionError::FunctionError { function, message } => format!("{function}: {message}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "remainder by zero (`%` by 0)".to_owned(),
        ExecutionError::Overflow(op, l, _) => {
            format!("`{}` overflows the range of {}", operator(op), type_of(l))
        }
        ExecutionError::IndexOutOfBounds(i) => match i {
            cel::Value::Int(i) => format!("index {i} is out of range"),
            _ => "index out of range".to_owned(),
        },
        ExecutionError::InvalidArgumentCount { expected, actual } => {
            format!("expected {expected} argument(s), got {actual}")
        }
        ExecutionError::NotSupportedAsMethod { method, target } => {
            format!("`{method}` cannot be called on a {}", type_of(target))
        }
        ExecutionError::UnsupportedTargetType { target } => {
            format!("a {} is not a valid argument here", type_of(target))
        }
        ExecutionError::UnsupportedKeyType(v) => {
            format!("a {} cannot be a map key", type_of(v))
        }
        ExecutionError::UnsupportedIndex(i, target) => {
            format!(
                "a {} cannot be indexed by a {}",
                type_of(target),
                type_of(i)
            )
        }
        ExecutionError::DuplicateKey(_) => "a map literal repeats a key".to_owned(),
        other => one_line(&other.to_string()),
    }
}

/// [`explain`] for an error of `source`: `all(r, cond)` runs `@result && cond` and
/// `exists(r, cond)` runs `@result || cond`, so a condition that is not a bool
/// fails on an operator the expression does not show; that is said as such.
pub(super) fn explain_in(e: &ExecutionError, source: &str) -> String {
    if let ExecutionError::NoSuchOverload(o) = e {
        let (op, mac) = match o.function() {
            "_&&_" => ("&&", "all"),
            "_||_" => ("||", "exists"),
            _ => return explain(e),
        };
        if !source.contains(op) {
            let got = o
                .argument_types()
                .iter()
                .map(|t| type_name(t))
                .find(|t| *t != "bool")
                .unwrap_or("value");
            return format!("the condition of `{mac}` gives {got}; it must be a bool");
        }
    }
    explain(e)
}

/// The functions of each namespace (CEL's extensions and Oka's aggregations).
const NAMESPACE_FUNCTIONS: [(&str, &[&str]); 3] = [
    (
        "math",
        &[
            "greatest",
            "least",
            "ceil",
            "floor",
            "round",
            "trunc",
            "abs",
            "sign",
            "sqrt",
            "isInf",
            "isNaN",
            "isFinite",
            "bitAnd",
            "bitOr",
            "bitXor",
            "bitNot",
            "bitShiftLeft",
            "bitShiftRight",
            "sum",
            "mean",
            "min",
            "max",
            "stddev",
            "percentile",
            "ewma",
        ],
    ),
    ("strings", &["quote"]),
    ("lists", &["range"]),
];

/// A name the dry run of `e` did not find, said for people: `math` (the run's
/// name for an unknown `math.avg(…)`) as the function written, with the closest
/// of the namespace's; an aggregation called without its namespace (`sum(l)`,
/// `l.sum()`) with its spelling.
pub(super) fn unknown_reference(e: &IdedExpr, name: &str) -> String {
    if let Some((ns, functions)) = NAMESPACE_FUNCTIONS.iter().find(|(ns, _)| *ns == name)
        && let Some(f) = namespace_call(e, ns)
    {
        let hint = match crate::error::closest(f, functions.iter().copied()) {
            Some(c) => format!("did you mean `{ns}.{c}`?"),
            None => format!("the {ns} functions: {}", functions.join(", ")),
        };
        return format!("`{ns}.{f}` is not a function ({hint})");
    }
    let hint = match super::functions::usage(&format!("math.{name}")) {
        Some(usage) => format!(" (did you mean `{usage}`?)"),
        None => String::new(),
    };
    format!("references unknown function or name `{name}`{hint}")
}

/// The function of the first call `ns.f(…)` in `e`.
fn namespace_call<'e>(e: &'e IdedExpr, ns: &str) -> Option<&'e str> {
    let children: Vec<&IdedExpr> = match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target
                && matches!(&t.expr, Expr::Ident(n) if n == ns)
            {
                return Some(&call.func_name);
            }
            call.target.iter().map(|t| &**t).chain(&call.args).collect()
        }
        Expr::Select(sel) => vec![&sel.operand],
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => (m.entries.iter())
            .filter_map(|en| match &en.expr {
                EntryExpr::MapEntry(m) => Some([&m.key, &m.value]),
                EntryExpr::StructField(_) => None,
            })
            .flatten()
            .collect(),
        _ => Vec::new(),
    };
    children.into_iter().find_map(|c| namespace_call(c, ns))
}

/// A type's name as the spec writes it (`timestamp`, not CEL's full
/// `google.protobuf.Timestamp`).
fn type_name(t: &str) -> &str {
    match t {
        "google.protobuf.Timestamp" => "timestamp",
        "google.protobuf.Duration" => "duration",
        "null_type" => "null",
        other => other,
    }
}

/// Whether `e` depends on the values rather than their types (a division by
/// zero, an index out of range, …): a run over placeholders proves nothing then.
pub(super) fn depends_on_data(e: &ExecutionError) -> bool {
    matches!(
        e,
        ExecutionError::FunctionError { .. }
            | ExecutionError::DivisionByZero(_)
            | ExecutionError::RemainderByZero(_)
            | ExecutionError::Overflow(..)
            | ExecutionError::IndexOutOfBounds(_)
            | ExecutionError::NoSuchKey(_)
            | ExecutionError::DuplicateKey(_)
    )
}

/// An operator's or function's name as written in an expression.
fn operator(name: &str) -> &str {
    match name {
        "add" | "_+_" => "+",
        "sub" | "_-_" => "-",
        "mul" | "_*_" => "*",
        "div" | "_/_" => "/",
        "rem" | "_%_" => "%",
        "negate" | "-_" => "- (negation)",
        "!_" => "!",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_&&_" => "&&",
        "_||_" => "||",
        "_[_]" => "[] (indexing)",
        "_._" => ". (field access)",
        "@in" => "in",
        "_?_:_" => "?:",
        other => other,
    }
}

/// A hint when `types` mix `int` and `double`, which CEL never converts.
fn mixing_hint<'a>(types: impl Iterator<Item = &'a str>) -> &'static str {
    let (mut int, mut double) = (false, false);
    for t in types {
        int |= matches!(t, "int" | "uint");
        double |= t == "double";
    }
    if int && double {
        " (CEL does not mix int and double: write 2.0 instead of 2, or double(x))"
    } else {
        ""
    }
}

/// A value's CEL type name.
pub(super) fn type_of(v: &cel::Value) -> &'static str {
    match v {
        cel::Value::List(_) => "list",
        cel::Value::Map(_) => "map",
        cel::Value::Function(..) => "function",
        cel::Value::Int(_) => "int",
        cel::Value::UInt(_) => "uint",
        cel::Value::Float(_) => "double",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "bytes",
        cel::Value::Bool(_) => "bool",
        cel::Value::Duration(_) => "duration",
        cel::Value::Timestamp(_) => "timestamp",
        cel::Value::Null => "null",
        _ => "value",
    }
}

/// `s` with its whitespace runs (line breaks included) as single spaces.
pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The parser's report on `source` (ANTLR's wording, every error with the whole
/// source and a caret line) as one sentence: what is wrong, in words, and where.
pub(super) fn syntax(report: &str, source: &str) -> String {
    let Some(first) = report
        .split("ERROR: ")
        .map(str::trim)
        .find(|e| !e.is_empty())
    else {
        return one_line(report);
    };
    // `<input>:LINE:COLUMN: Syntax error: MESSAGE | source | ...^`
    let mut parts = first.splitn(4, ':');
    let (_, line, column, rest) = (parts.next(), parts.next(), parts.next(), parts.next());
    let message = rest
        .unwrap_or(first)
        .split(" | ")
        .next()
        .unwrap_or_default()
        .trim()
        .trim_start_matches("Syntax error:")
        .trim();
    let quoted = |after: &str| -> Option<String> {
        let rest = message.strip_prefix(after)?;
        let rest = rest.strip_prefix('\'')?;
        Some(rest[..rest.find('\'').unwrap_or(rest.len())].to_owned())
    };
    let what = if let Some(t) = quoted("mismatched input ") {
        if t == "<EOF>" {
            "the expression ends where a value is expected".to_owned()
        } else {
            format!("unexpected `{t}`")
        }
    } else if let Some(t) = quoted("extraneous input ") {
        if message.ends_with("expecting <EOF>") {
            format!("unexpected `{t}` after a complete expression")
        } else {
            format!("unexpected `{t}`")
        }
    } else if let Some(t) = quoted("token recognition error at: ") {
        if t.starts_with(['"', '\'']) {
            "a string that is never closed".to_owned()
        } else {
            format!("`{t}` is not part of CEL")
        }
    } else if let Some(t) = quoted("missing ") {
        format!("a `{t}` is missing")
    } else if let Some(t) = quoted("no viable alternative at input ") {
        format!("cannot read `{t}`")
    } else {
        one_line(message).replace('\'', "`")
    };
    let at = match (line.map(str::trim), column.map(str::trim)) {
        (Some("1"), Some(c)) => format!("column {c}"),
        (Some(l), Some(c)) => format!("line {l}, column {c}"),
        _ => String::new(),
    };
    if at.is_empty() {
        format!("{what} in `{}`", one_line(source))
    } else {
        format!("{what}, at {at} of `{}`", one_line(source))
    }
}
