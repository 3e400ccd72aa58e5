//! The proof at load: a translated UDF is run both ways — here and by the
//! pool's CPython — on generated inputs (zeros, negatives, NaN, ±inf, ints at
//! and past 53 and 64 bits, empty strings and lists, None), and served
//! compiled only when every answer it gives is bit-equal to CPython's. A key
//! the translation hands to Python is not compared: it runs in Python when
//! served too.
//!
//! One intended difference: `datetime.now()` is the request's time compiled
//! and the wall clock in Python; a field given it is equal when CPython's time
//! falls within the proof's call.

use std::sync::Arc;

use oka_core::batch::{BatchUdf, PythonDecl, UdfBatch, block_on};
use oka_core::key::KeyValues;
use oka_core::udf::{Input, UdfCall};
use oka_core::{FieldType, Row, Timestamp, Value};

use super::{Compiled, Runtime};

/// Argument sets tried (each a batch).
const ARG_SETS: usize = 12;
/// Keys per argument set.
const KEYS_PER_SET: usize = 24;

/// Proves `compiled` against `python` (the same UDF in the pool): its
/// [`Runtime`] — compiled, or Python with the first input that differed.
pub fn prove(decl: &PythonDecl, compiled: &Compiled, python: &dyn BatchUdf) -> Runtime {
    let mut rng = SplitMix(0x6f6b_615f_7079);
    let (mut cases, mut in_python) = (0, 0);
    for set in 0..ARG_SETS {
        let batch = generated(decl, set, &mut rng);
        let answers = block_on(python.call(batch.clone()));
        let after = Timestamp::now();
        let answers = match answers {
            Ok(a) => a,
            Err(e) => return Runtime::Python(format!("the proof's call in Python failed: {e}")),
        };
        let names: Vec<Arc<str>> = decl.inputs.iter().map(|i| Arc::clone(&i.name)).collect();
        let entities: Vec<_> = decl.inputs.iter().map(|i| Arc::clone(&i.entity)).collect();
        let arg_names: Vec<Arc<str>> = decl.args.iter().map(|a| Arc::clone(&a.name)).collect();
        for (k, answer) in answers.iter().enumerate() {
            cases += 1;
            let call = UdfCall {
                feature: &decl.feature,
                input_names: &names,
                input_entities: &entities,
                inputs: batch.inputs(k),
                arg_names: &arg_names,
                args: &batch.args,
                output: &decl.output,
                key: batch.key(k),
                now: batch.now,
            };
            let Some(mine) = compiled.row(&call) else {
                in_python += 1;
                continue;
            };
            let theirs = match answer {
                Ok(rows) if rows.len() == 1 => &rows[0],
                Ok(rows) => {
                    return differed(decl, &call, &format!("CPython gave {} records", rows.len()));
                }
                Err(e) => return differed(decl, &call, &format!("CPython raised ({e})")),
            };
            let span = (batch.now, after);
            if let Some(col) = first_difference(compiled, &mine, theirs, span) {
                let c = &decl.output.columns[col];
                let why = format!(
                    "field `{}`: CPython gave {}, the translation {}",
                    c.name,
                    show(&theirs.columns[col]),
                    show(&mine.columns[col])
                );
                return differed(decl, &call, &why);
            }
        }
    }
    if in_python == cases {
        return Runtime::Python(format!(
            "translated, but every one of {cases} generated inputs needed Python"
        ));
    }
    Runtime::Compiled {
        cases,
        python: in_python,
    }
}

/// Argument set `set` and its keys' generated inputs, as a batch.
fn generated(decl: &PythonDecl, set: usize, rng: &mut SplitMix) -> UdfBatch {
    let args: Vec<Value> = (decl.args.iter().enumerate())
        .map(|(d, a)| pick(&a.ty, set + d * 5, rng, true))
        .collect();
    let mut inputs = Vec::new();
    let mut keys = Vec::new();
    for k in 0..KEYS_PER_SET {
        let case = set * KEYS_PER_SET + k;
        for (d, input) in decl.inputs.iter().enumerate() {
            let record = |n: usize, rng: &mut SplitMix| {
                let e = &input.entity;
                let columns: Vec<Value> = (e.columns.iter().enumerate())
                    .map(|(c, col)| {
                        if c == e.timestamp_index {
                            Value::Timestamp(Timestamp(1_700_000_000_123_456 + n as i64))
                        } else {
                            pick(&col.ty, case + 3 * c + 7 * d + n, rng, true)
                        }
                    })
                    .collect();
                let t = Timestamp(1_700_000_000_123_456 + n as i64);
                Row::new(t, columns)
            };
            inputs.push(if input.many {
                let n = case % 4;
                Input::Many((0..n).map(|i| record(i, rng)).collect())
            } else {
                Input::One(record(0, rng))
            });
        }
        for (i, &c) in decl.output.key_index.iter().enumerate() {
            let ty = &decl.output.columns[c].ty;
            keys.push(pick(ty, case + i, rng, false));
        }
    }
    let width = decl.inputs.len();
    let key_width = decl.output.key_index.len();
    UdfBatch {
        args,
        now: Timestamp::now(),
        inputs,
        width,
        keys: (0..KEYS_PER_SET).collect(),
        key_values: KeyValues::new(key_width, keys),
        deadline: None,
    }
}

/// The first column where two records differ (floats by bits).
fn first_difference(
    compiled: &Compiled,
    mine: &Row,
    theirs: &Row,
    (from, to): (Timestamp, Timestamp),
) -> Option<usize> {
    (0..mine.columns.len()).find(|&c| {
        let (a, b) = (
            &mine.columns[c],
            theirs.columns.get(c).unwrap_or(&Value::Null),
        );
        if compiled.body.now_columns.contains(&c) {
            return !matches!(b, Value::Timestamp(t) if (from.0 - 1..=to.0 + 1).contains(&t.0));
        }
        !same(a, b)
    })
}

/// Bit-equality of values.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

fn differed(decl: &PythonDecl, call: &UdfCall<'_>, why: &str) -> Runtime {
    let mut input = Vec::new();
    for (name, i) in decl.inputs.iter().zip(call.inputs) {
        let rows: Vec<&Row> = match i {
            Input::One(r) => vec![r],
            Input::Many(rs) => rs.iter().collect(),
        };
        let text: Vec<String> = rows
            .iter()
            .map(|r| {
                let fields: Vec<String> = (name.entity.columns.iter().zip(r.columns.iter()))
                    .map(|(c, v)| format!("{}: {}", c.name, show(v)))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            })
            .collect();
        input.push(format!("{} = {}", name.name, text.join(", ")));
    }
    for (a, v) in decl.args.iter().zip(call.args) {
        input.push(format!("{} = {}", a.name, show(v)));
    }
    Runtime::Python(format!(
        "the translation differs from CPython on {}: {why}",
        input.join("; ")
    ))
}

/// A value as a person reads it (Python's spelling for the floats JSON lacks).
fn show(v: &Value) -> String {
    match v {
        Value::Float(f) if f.is_nan() => "nan".to_owned(),
        Value::Float(f) if f.is_infinite() => (if *f > 0.0 { "inf" } else { "-inf" }).to_owned(),
        Value::Float(f) => format!("{f:?}"),
        Value::List(items) => format!(
            "[{}]",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Value::Null => "None".to_owned(),
        other => other.to_json().to_string(),
    }
}

/// A value of `ty` for case `i`: the edge values in turn, then random ones.
fn pick(ty: &FieldType, i: usize, rng: &mut SplitMix, nulls: bool) -> Value {
    let edges = edges(ty);
    let n = edges.len() + usize::from(nulls);
    let at = if i < 2 * n {
        i % n
    } else {
        (rng.next() % n as u64) as usize
    };
    edges.into_iter().nth(at).unwrap_or(Value::Null)
}

fn edges(ty: &FieldType) -> Vec<Value> {
    match ty {
        FieldType::Float => [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.5,
            -2.5,
            0.5,
            1.5,
            0.1,
            3.0,
            7.0,
            2.675,
            0.125,
            1e16,
            -1e16,
            1e308,
            -1e308,
            5e-324,
            123.456,
            9007199254740993.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]
        .into_iter()
        .map(Value::Float)
        .collect(),
        FieldType::Int => [
            0,
            1,
            -1,
            2,
            -2,
            3,
            7,
            -7,
            10,
            100,
            1 << 31,
            -(1 << 31),
            (1 << 53) + 1,
            i64::MAX,
            i64::MIN,
            3_037_000_500,
        ]
        .into_iter()
        .map(Value::Int)
        .collect(),
        FieldType::Bool => vec![Value::Bool(true), Value::Bool(false)],
        FieldType::String => [
            "",
            "a",
            "ABC",
            "Hello World",
            "  padded \t",
            "héllo",
            "ON_SALE",
            "123",
        ]
        .into_iter()
        .map(|s| Value::String(s.into()))
        .collect(),
        FieldType::Timestamp => [0, 1_600_000_000_000_000, 1_700_000_000_123_456]
            .into_iter()
            .map(|t| Value::Timestamp(Timestamp(t)))
            .collect(),
        FieldType::List(inner) => {
            let e = edges(inner);
            let mut lists = vec![Value::List(Arc::from([]))];
            for chunk in e.chunks(3) {
                lists.push(Value::List(chunk.to_vec().into()));
            }
            lists
        }
    }
}

/// A small, seeded generator (SplitMix64): the same inputs on every load.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
