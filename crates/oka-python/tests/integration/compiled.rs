//! Compiled Python UDFs: the corpus (`tests/corpus/udfs.py`, 280-odd small
//! UDFs, each with the runtime it must get) loaded with compilation on — every
//! translated UDF proven equal to CPython at load, every refused one refused
//! for its stated reason, none left in Python for a difference — and its
//! answers compared once more, through the executor, with the same corpus run
//! wholly in Python on other inputs than the proof's.

use std::fmt::Write as _;
use std::path::PathBuf;

use oka_core::execute::{Fetched, Outcome, execute};
use oka_core::request::RequestLimits;
use oka_core::{Row, Timestamp, Value};
use oka_python::{Config, Runtime};
use serde_json::json;

use super::{folder, load_dir, python};

/// One UDF of the corpus: its function, output type, window or not, and
/// what the translation must do (`compiled`, or `refused: REASON`).
struct Case {
    name: String,
    out: String,
    many: bool,
    expect: String,
}

fn corpus() -> (String, Vec<Case>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/udfs.py");
    let source = std::fs::read_to_string(path).unwrap();
    let mut cases = Vec::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("#: ") else {
            continue;
        };
        let mut parts = rest.splitn(3, ' ');
        let out = parts.next().unwrap().to_owned();
        let many = parts.next().unwrap() == "many";
        let expect = parts.next().unwrap().to_owned();
        let def = lines
            .by_ref()
            .find(|l| l.starts_with("def ") || l.starts_with("async def "))
            .unwrap();
        let name = def
            .trim_start_matches("async ")
            .trim_start_matches("def ")
            .split('(')
            .next()
            .unwrap()
            .to_owned();
        cases.push(Case {
            name,
            out,
            many,
            expect,
        });
    }
    (source, cases)
}

fn spec(cases: &[Case]) -> String {
    let mut s = String::from(
        "version: 1
entities:
  Rec:
    keys: {id: string}
    timestamp: ts
    fields: {a: float, b: float, i: int, j: int, s: string, t: string, flag: bool, xs: list<float>, ns: list<int>}
    order: [id, a, b, i, j, s, t, flag, xs, ns, ts]
",
    );
    for (name, ty) in [
        ("float", "float"),
        ("int", "int"),
        ("string", "string"),
        ("bool", "bool"),
        ("list", "list<float>"),
    ] {
        let _ = write!(
            s,
            "  Out_{name}:\n    keys: {{id: string}}\n    timestamp: ts\n    fields: {{v: {ty}}}\n    order: [id, v, ts]\n"
        );
    }
    s.push_str("features:\n  rec: {kind: pipeline, entity: Rec}\n");
    for c in cases {
        let dep = if c.many {
            "{feature: rec, query: last_n, n: 4}"
        } else {
            "rec"
        };
        let _ = write!(
            s,
            "  {name}:
    kind: on_demand
    entity: Out_{out}
    dependencies: [{dep}]
    args: {{x: {{type: float, default: 2.0}}, n: {{type: int, default: 3}}, word: {{type: string, default: ab}}}}
    udf: {{python: {{file: udfs.py, function: {name}}}}}
",
            name = c.name,
            out = c.out
        );
    }
    s
}

/// `Rec`'s columns, in the order its records hold them.
const REC_COLUMNS: [&str; 11] = ["id", "ts", "a", "b", "i", "j", "s", "t", "flag", "xs", "ns"];

/// A small generator for the test's own inputs.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[(self.next() as usize) % xs.len()].clone()
    }

    fn float(&mut self) -> Value {
        match self.next() % 8 {
            0 => Value::Null,
            1 => Value::Float(self.pick(&[0.0, -0.0, 2.5, 0.5, 1e300, -3.0, 7.25])),
            _ => Value::Float((self.next() as f64 - 2_147_483_648.0) / 1_000_000.0),
        }
    }

    fn int(&mut self) -> Value {
        match self.next() % 8 {
            0 => Value::Null,
            1 => Value::Int(self.pick(&[0, 1, -1, i64::MAX, i64::MIN, 1 << 40])),
            _ => Value::Int(self.next() as i64 % 2_000_001 - 1_000_000),
        }
    }

    fn string(&mut self) -> Value {
        Value::String(
            self.pick(&["", "ON_SALE", "abc", "Zebra", " x ", "ünï", "ab", "A"])
                .into(),
        )
    }
}

fn record(rng: &mut Lcg, id: &str, t: i64) -> Row {
    let xs: Vec<Value> = (0..rng.next() % 4).map(|_| rng.float()).collect();
    let ns: Vec<Value> = (0..rng.next() % 4).map(|_| rng.int()).collect();
    Row::new(
        Timestamp(t),
        vec![
            Value::from(id),
            Value::Timestamp(Timestamp(t)),
            rng.float(),
            rng.float(),
            rng.int(),
            rng.int(),
            rng.string(),
            rng.string(),
            Value::Bool(rng.next().is_multiple_of(2)),
            Value::List(xs.into()),
            Value::List(ns.into()),
        ],
    )
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

/// Equal outcomes; `skip_ts`: but for the timestamp (column 1), which a
/// UDF giving `datetime.now()` takes from the wall clock in Python.
fn same_outcome(a: &Outcome, b: &Outcome, skip_ts: bool) -> bool {
    match (a, b) {
        (Outcome::Present(x), Outcome::Present(y)) => {
            x.len() == y.len()
                && x.iter().zip(y.iter()).all(|(r, s)| {
                    (r.columns.iter().zip(s.columns.iter()).enumerate())
                        .all(|(i, (u, v))| (skip_ts && i == 1) || same(u, v))
                })
        }
        (Outcome::Error(x), Outcome::Error(y)) => x == y,
        (Outcome::Missing, Outcome::Missing) => true,
        _ => false,
    }
}

#[test]
fn the_corpus_compiles_as_stated_and_answers_as_cpython_does() {
    let (source, cases) = corpus();
    assert!(cases.len() >= 200, "the corpus has {} UDFs", cases.len());
    let compiled = check_module("compiled-corpus", &source, &cases);
    eprintln!("compiled {compiled} of {} corpus UDFs", cases.len());
}

/// Expression trees over a record's numbers and the arguments, drawn at
/// random (seeded): each translated one must be proven equal to CPython, and
/// answer as CPython does through the executor; none may be left in Python
/// for a difference.
#[test]
fn random_expressions_compile_to_cpythons_answers() {
    let mut rng = Lcg(0x5eed);
    let mut source = String::from("import math\n\n");
    let mut cases = Vec::new();
    for k in 0..160 {
        let name = format!("p{k:03}");
        let expr = expression(&mut rng, 4);
        let _ = write!(
            source,
            "def {name}(r, x, n, word):\n    return {{\"v\": {expr}}}\n\n\n"
        );
        cases.push(Case {
            name,
            out: "float".to_owned(),
            many: false,
            expect: "*".to_owned(),
        });
    }
    let compiled = check_module("compiled-random", &source, &cases);
    eprintln!("compiled {compiled} of {} random expressions", cases.len());
    assert!(compiled * 2 > cases.len(), "only {compiled} compiled");
}

/// A random Python expression of numbers, `depth` deep at most.
fn expression(rng: &mut Lcg, depth: u32) -> String {
    const LEAVES: [&str; 14] = [
        "r['a']", "r['b']", "r['i']", "r['j']", "x", "n", "0", "1", "-2", "0.5", "3.0", "-0.0",
        "1e308", "7",
    ];
    if depth == 0 || rng.next().is_multiple_of(4) {
        return rng.pick(&LEAVES).to_owned();
    }
    let mut sub = || expression(rng, depth - 1);
    let (a, b) = (sub(), sub());
    match rng.next() % 16 {
        0 => format!("({a} + {b})"),
        1 => format!("({a} - {b})"),
        2 => format!("({a} * {b})"),
        3 => format!("({a} / {b})"),
        4 => format!("({a} // {b})"),
        5 => format!("({a} % {b})"),
        6 => format!("(-{a})"),
        7 => format!("abs({a})"),
        8 => format!("min({a}, {b})"),
        9 => format!("max({a}, {b}, 0)"),
        10 => format!("round({a})"),
        11 => format!("({a} if {a} < {b} else {b})"),
        12 => format!("({a} ** 2)"),
        13 => format!("math.floor({a})"),
        14 => format!("({a} or {b})"),
        _ => format!("round({a}, 2)"),
    }
}

/// Loads `source` as `udfs.py` with a feature per case, compiled and wholly
/// in Python; checks each UDF's runtime against its case and every compiled
/// one's answers against Python's. How many compiled.
fn check_module(name: &str, source: &str, cases: &[Case]) -> usize {
    let dir = folder(name);
    std::fs::write(dir.join("udfs.py"), source).unwrap();
    std::fs::write(dir.join("spec.yaml"), spec(cases)).unwrap();
    let config = |compile| Config {
        python: python(),
        workers: 1,
        memory_mib: 1024,
        compile,
    };
    let on = load_dir(&dir, config(true)).unwrap();
    let runtimes = on.pool.as_ref().unwrap().udfs();
    let mut wrong = Vec::new();
    let mut compiled = Vec::new();
    for c in cases {
        let (_, _, runtime) = runtimes.iter().find(|(f, ..)| *f == c.name).unwrap();
        let ok = match (c.expect.as_str(), runtime) {
            ("compiled" | "*", Runtime::Compiled { .. }) => true,
            ("*", Runtime::Python(why)) => !why.contains("differs"),
            (expect, Runtime::Python(why)) => expect
                .strip_prefix("refused: ")
                .is_some_and(|reason| why.contains(reason) && !why.contains("differs")),
            _ => false,
        };
        if !ok {
            wrong.push(format!("{}: expected {}, got {runtime}", c.name, c.expect));
        }
        if matches!(runtime, Runtime::Compiled { .. }) {
            compiled.push(c.name.as_str());
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The same requests, compiled and wholly in Python.
    let off = load_dir(&dir, config(false)).unwrap();
    let rec = off.registry.entities().find(|e| &*e.name == "Rec").unwrap();
    let names: Vec<&str> = rec.columns.iter().map(|c| &*c.name).collect();
    assert_eq!(names, REC_COLUMNS);
    let mut rng = Lcg(46);
    let ids: Vec<String> = (0..48).map(|k| format!("k{k}")).collect();
    let data: Vec<(String, Vec<Row>)> = ids
        .iter()
        .map(|id| {
            let n = rng.next() % 5;
            let rows = (0..n)
                .map(|t| record(&mut rng, id, 1_700_000_000_000_000 + t as i64))
                .collect();
            (id.clone(), rows)
        })
        .collect();
    let keys: Vec<_> = ids.iter().map(|i| json!({"id": i})).collect();
    let now = Timestamp::now();
    for args in [
        json!({"x": 2.0, "n": 3, "word": "ab"}),
        json!({"x": -0.5, "n": -7, "word": ""}),
        json!({"x": 0.0, "n": 0, "word": "ON"}),
    ] {
        let udf_args: serde_json::Map<String, serde_json::Value> = compiled
            .iter()
            .map(|n| ((*n).to_owned(), args.clone()))
            .collect();
        let request = json!({"target_features": compiled, "keys": keys, "udf_args": udf_args});
        let answer = |registry: &oka_core::Registry| {
            let req: oka_core::FeatureRequest = serde_json::from_value(request.clone()).unwrap();
            let prepared = registry
                .prepare_with(&req, now, &RequestLimits::default())
                .unwrap();
            let fetched = Fetched::read_all(&prepared, |f| {
                f.keys
                    .iter()
                    .map(|k| {
                        (data.iter())
                            .find(|(id, _)| k.as_str() == id)
                            .map(|(_, rows)| rows.iter().rev().cloned().collect::<Vec<_>>())
                            .unwrap_or_default()
                    })
                    .collect::<oka_core::KeyedRows>()
            })
            .unwrap();
            let outputs = execute(registry, &prepared, &fetched, None).unwrap();
            (prepared.targets.iter())
                .map(|t| outputs.of(t).to_vec())
                .collect::<Vec<_>>()
        };
        let (a, b) = (answer(&on.registry), answer(&off.registry));
        for ((name, x), y) in compiled.iter().zip(&a).zip(&b) {
            for (k, (o, p)) in x.iter().zip(y).enumerate() {
                assert!(
                    same_outcome(o, p, *name == "utc_now"),
                    "{name}, key {k}, args {args}: compiled {o:?}, Python {p:?}"
                );
            }
        }
    }
    compiled.len()
}

fn load_one(name: &str, module: &str) -> Runtime {
    load_named(name, module, &["f"])[0].clone()
}

/// Loads `module` with a feature per function of `functions` (each of the
/// seed's record): their runtimes.
fn load_named(name: &str, module: &str, functions: &[&str]) -> Vec<Runtime> {
    let dir = folder(name);
    std::fs::write(dir.join("udfs.py"), module).unwrap();
    std::fs::write(
        dir.join("patch_math.py"),
        "import math\nmath.sqrt = lambda v: -1.0\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("spec.yaml"),
        super::spec(
            &functions
                .iter()
                .map(|f| format!("  {f}:\n    kind: on_demand\n    entity: TestEntity\n    dependencies: [test_feature]\n    udf: {{python: {{file: udfs.py, function: {f}}}}}\n"))
                .collect::<String>(),
        ),
    )
    .unwrap();
    let config = Config {
        python: python(),
        workers: 1,
        memory_mib: 1024,
        compile: true,
    };
    let l = load_dir(&dir, config).unwrap();
    let udfs = l.pool.as_ref().unwrap().udfs();
    functions
        .iter()
        .map(|f| udfs.iter().find(|u| u.0 == *f).unwrap().2.clone())
        .collect()
}

#[test]
fn a_deeply_nested_expression_is_refused_alone() {
    let deep = format!(
        "def deep(dep):\n    return {{\"value\": {}dep[\"value\"]{}}}\n\n",
        "(1.0 + ".repeat(60),
        ")".repeat(60)
    );
    let module = format!("{deep}def plain(dep):\n    return {{\"value\": dep[\"value\"] * 2}}\n");
    let runtimes = load_named("compiled-deep", &module, &["deep", "plain"]);
    assert_eq!(
        runtimes[0],
        Runtime::Python("an expression nested more than 40 deep (line 2)".to_owned())
    );
    assert!(
        matches!(runtimes[1], Runtime::Compiled { .. }),
        "{}",
        runtimes[1]
    );
}

#[test]
fn a_translation_that_differs_stays_in_python_and_says_where() {
    // A module it imports replaces `math.sqrt`: the translator, which reads
    // only the UDF's module, takes `math.sqrt` for Python's, and the proof
    // finds the difference.
    let runtime = load_one(
        "compiled-differs",
        "import math\nimport patch_math\n\ndef f(dep):\n    return {\"value\": math.sqrt(dep[\"value\"])}\n",
    );
    let Runtime::Python(why) = runtime else {
        panic!("compiled: {runtime}");
    };
    assert!(
        why.starts_with("the translation differs from CPython on test_feature = {id: "),
        "{why}"
    );
    assert!(
        why.contains("field `value`: CPython gave -1.0, the translation "),
        "{why}"
    );
}

#[test]
fn a_builtin_the_module_redefines_is_not_translated() {
    let runtime = load_one(
        "compiled-shadow",
        "def abs(v):\n    return v * 2\n\ndef f(dep):\n    return {\"value\": abs(dep[\"value\"])}\n",
    );
    assert_eq!(
        runtime,
        Runtime::Python("a call of `abs` (line 5)".to_owned())
    );
}
