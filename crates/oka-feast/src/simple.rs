//! Whether an on-demand view's Python is simple enough to write in CEL, for
//! `oka feast scaffold`: a body of arithmetic, comparisons and comprehensions
//! over its inputs, calling nothing but the builtins CEL has a counterpart for.
//! A conservative reading of the text, not a parse: a body it calls simple
//! still needs its CEL written and checked (the overlay's values are compared
//! with Feast's by `tests/feast`); one it does not stays in Python, run by
//! Feast's SDK in Oka's workers.

/// Calls with a CEL counterpart (or that only build the result).
const CALLS: &[&str] = &[
    "zip",
    "float",
    "int",
    "abs",
    "min",
    "max",
    "len",
    "str",
    "bool",
    "sum",
    "dict",
    "list",
    "DataFrame",
    "pd.DataFrame",
];

/// Statements that make a body more than an expression of its inputs.
const STATEMENTS: &[&str] = &[
    "import", "from", "for", "while", "try", "with", "raise", "global", "nonlocal", "class", "def",
    "async", "await", "yield", "lambda", "del", "assert",
];

/// `None` when `source` (a view's function, decorators and all) looks like
/// arithmetic over its inputs; else why not, in words.
pub fn why_not_cel(source: &str) -> Option<String> {
    let mut lines = source
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("def "));
    if lines.next().is_none() {
        return Some("its Python source is not in the registry".to_owned());
    }
    let mut calls: Vec<String> = Vec::new();
    // Open brackets at the start of the line: a `for` inside one is a
    // comprehension's, not a statement.
    let mut depth = 0i32;
    for line in lines {
        let code = strip_comment(line).trim();
        let first = code
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .next();
        if let Some(word) = first.filter(|w| depth == 0 && STATEMENTS.contains(w)) {
            return Some(format!("its body has `{word}`"));
        }
        depth += brackets(code);
        if code.contains("lambda") {
            return Some("its body has `lambda`".to_owned());
        }
        for call in called(code) {
            if !CALLS.contains(&call.as_str()) && !calls.contains(&call) {
                calls.push(call);
            }
        }
    }
    (!calls.is_empty()).then(|| format!("its body calls {}", calls.join(", ")))
}

/// The line without a trailing `# comment` (outside string literals).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Brackets opened less those closed in `code`, string literals skipped.
fn brackets(code: &str) -> i32 {
    let mut quote = None;
    let mut n = 0;
    for c in code.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => n += 1,
            (None, ')' | ']' | '}') => n -= 1,
            _ => {}
        }
    }
    n
}

/// The dotted names called in `code` (`np.sqrt(` gives `np.sqrt`), string
/// literals skipped; a call on an expression (`x[0].apply(`) gives `.apply`.
fn called(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut name = String::new();
    let mut quote = None;
    let mut after_close = false;
    for c in code.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                name.clear();
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' => name.push(c),
            '(' if !name.is_empty() && !name.starts_with(|d: char| d.is_ascii_digit()) => {
                out.push(std::mem::take(&mut name));
            }
            ']' | ')' => {
                name.clear();
                after_close = true;
                continue;
            }
            _ => name.clear(),
        }
        if after_close && c == '.' {
            name = ".".to_owned();
        }
        after_close = false;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_over_inputs_is_a_candidate_and_library_calls_are_not() {
        let fare = "@on_demand_feature_view(sources=[a], mode=\"python\")\ndef fare(inputs: dict) -> dict:\n    # d * s\n    return {\"fare\": [\n        d * s * (1.0 + a)\n        for d, s, a in zip(inputs[\"d\"], inputs[\"s\"], inputs[\"a\"])\n    ]}\n";
        assert_eq!(why_not_cel(fare), None);
        let pandas = "def p(inputs: pd.DataFrame) -> pd.DataFrame:\n    out = pd.DataFrame()\n    out[\"p\"] = inputs[\"a\"] * inputs[\"b\"]\n    return out\n";
        assert_eq!(why_not_cel(pandas), None);
        let numpy = "def m(inputs):\n    import numpy as np\n    return {\"x\": np.sqrt(inputs[\"a\"]).tolist()}\n";
        assert_eq!(why_not_cel(numpy).unwrap(), "its body has `import`");
        let calls = "def m(inputs):\n    return {\"x\": math.log1p(inputs[\"a\"]), \"y\": inputs[\"b\"].apply(f), \"s\": \"a(b)\"}\n";
        assert_eq!(
            why_not_cel(calls).unwrap(),
            "its body calls math.log1p, .apply"
        );
        let loop_ =
            "def m(inputs):\n    for d in inputs[\"d\"]:\n        pass\n    return inputs\n";
        assert_eq!(why_not_cel(loop_).unwrap(), "its body has `for`");
        assert!(why_not_cel("").is_some());
    }
}
