//! The common shape of a translated UDF, evaluated without the general
//! evaluator's Python values: a body that is one `return` of a record whose
//! fields are input fields copied, or float arithmetic (`+ - * /`, unary `-`)
//! over input fields, arguments and float literals. For a key whose values do
//! not fit (a leaf that is not a float, a division by zero, a value the
//! output's check would refuse) it answers `None`, and the general evaluator
//! runs the key — which gives Python's answer or hands the key to Python.
//! IEEE arithmetic on doubles is Python's float arithmetic, so where this
//! answers, it answers what CPython would.

use std::sync::Arc;

use oka_core::udf::{Input, UdfCall};
use oka_core::{Entity, FieldType, Row, Value};

use super::ir::{BinOp, Body, Expr, Lit, Stmt};
use crate::protocol::MAX_STR_CHARS;

/// A record's field.
#[derive(Debug)]
enum Field {
    /// Not given: a key from the request, or the timestamp `now`.
    Omitted,
    /// An input's field, copied.
    Copy { input: usize, col: usize },
    /// Float arithmetic.
    Num(Num),
}

/// Float arithmetic over leaves.
#[derive(Debug)]
enum Num {
    Field { input: usize, col: usize },
    Arg(usize),
    Const(f64),
    Neg(Box<Num>),
    Bin(BinOp, Box<Num>, Box<Num>),
}

/// A body of the fast shape.
#[derive(Debug)]
pub struct Fast {
    fields: Vec<Field>,
    /// Columns that may not be None (a Volga entity's `field(...)`s).
    required: Box<[usize]>,
}

impl Fast {
    /// The fast form of `body`, when it has the shape; `one`: per input,
    /// whether it is one record (not a window).
    pub fn of(body: &Body, one: &[bool]) -> Option<Self> {
        let [Stmt::Return(Expr::Record(given, required))] = body.stmts.as_slice() else {
            return None;
        };
        let fields = given
            .iter()
            .map(|g| match g {
                None => Some(Field::Omitted),
                Some(e) => match input_field(e, one) {
                    Some((input, col)) => Some(Field::Copy { input, col }),
                    None => num(e, one, 0).map(Field::Num),
                },
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            fields,
            required: required.clone(),
        })
    }

    /// One key's record, or `None`: run the general evaluator.
    pub fn row(&self, call: &UdfCall<'_>, output: &Entity) -> Option<Row> {
        let mut columns: Arc<[Value]> =
            std::iter::repeat_n(Value::Null, output.columns.len()).collect();
        let slots = Arc::get_mut(&mut columns)?;
        let mut event_time = call.now;
        for (i, ((f, c), slot)) in (self.fields.iter().zip(&output.columns))
            .zip(slots.iter_mut())
            .enumerate()
        {
            let v = match f {
                Field::Omitted => match output.key_index.iter().position(|&k| k == i) {
                    Some(k) => call.key.get(k).cloned().unwrap_or(Value::Null),
                    None => Value::Timestamp(call.now),
                },
                Field::Copy { input, col } => copy(field(call, *input, *col)?, &c.ty)?,
                Field::Num(n) => match c.ty {
                    FieldType::Float => {
                        Value::Float(Some(eval(n, call)?).filter(|x| x.is_finite())?)
                    }
                    _ => return None,
                },
            };
            if v.is_null() && self.required.contains(&i) {
                return None;
            }
            if i == output.timestamp_index
                && let Value::Timestamp(t) = v
            {
                event_time = t;
            }
            *slot = v;
        }
        Some(Row::new(event_time, columns))
    }
}

/// `input[col]` of a one-record input.
fn input_field(e: &Expr, one: &[bool]) -> Option<(usize, usize)> {
    match e {
        Expr::Field(of, col) => match **of {
            Expr::Input(i) if one.get(i) == Some(&true) => Some((i, *col)),
            _ => None,
        },
        _ => None,
    }
}

fn num(e: &Expr, one: &[bool], depth: usize) -> Option<Num> {
    if depth > 32 {
        return None;
    }
    Some(match e {
        Expr::Const(Lit::Float(x)) => Num::Const(*x),
        Expr::Arg(i) => Num::Arg(*i),
        Expr::Neg(x) => Num::Neg(Box::new(num(x, one, depth + 1)?)),
        Expr::Bin(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div), a, b) => Num::Bin(
            *op,
            Box::new(num(a, one, depth + 1)?),
            Box::new(num(b, one, depth + 1)?),
        ),
        e => {
            let (input, col) = input_field(e, one)?;
            Num::Field { input, col }
        }
    })
}

fn field<'a>(call: &UdfCall<'a>, input: usize, col: usize) -> Option<&'a Value> {
    match call.inputs.get(input)? {
        Input::One(row) => row.columns.get(col),
        Input::Many(_) => None,
    }
}

/// A float, or `None` (the general evaluator decides).
fn eval(n: &Num, call: &UdfCall<'_>) -> Option<f64> {
    let float = |v: Option<&Value>| match v {
        Some(Value::Float(x)) => Some(*x),
        _ => None,
    };
    match n {
        Num::Const(x) => Some(*x),
        Num::Field { input, col } => float(field(call, *input, *col)),
        Num::Arg(i) => float(call.args.get(*i)),
        Num::Neg(x) => Some(-eval(x, call)?),
        Num::Bin(op, a, b) => {
            let (a, b) = (eval(a, call)?, eval(b, call)?);
            match op {
                BinOp::Add => Some(a + b),
                BinOp::Sub => Some(a - b),
                BinOp::Mul => Some(a * b),
                _ => (b != 0.0).then(|| a / b),
            }
        }
    }
}

/// An input's value as a field of type `ty`, where the worker's check would
/// take it unchanged.
fn copy(v: &Value, ty: &FieldType) -> Option<Value> {
    match (ty, v) {
        (_, Value::Null) => Some(Value::Null),
        (FieldType::Float, Value::Float(x)) if x.is_finite() => Some(v.clone()),
        (FieldType::Float, Value::Int(i)) => Some(Value::Float(*i as f64)),
        (FieldType::Int, Value::Int(_)) | (FieldType::Bool, Value::Bool(_)) => Some(v.clone()),
        (FieldType::String, Value::String(s)) if s.len() <= MAX_STR_CHARS => Some(v.clone()),
        (FieldType::Timestamp, Value::Timestamp(t)) if t.is_rfc3339() => Some(v.clone()),
        _ => None,
    }
}
