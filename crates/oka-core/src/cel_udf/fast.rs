//! The fast path: expressions that are plain float arithmetic over record fields and
//! arguments, evaluated without the CEL interpreter.

use std::collections::HashMap;

use cel::common::ast::{Expr, IdedExpr};

use crate::entity::Entity;
use crate::udf::{Input, UdfCall};
use crate::value::{FieldType, Value};

/// An expression of plain `double` arithmetic, evaluated without the interpreter.
/// CEL's `double` operators are IEEE 754 operations, so the results are the same
/// bits; any operand that turns out not to be a double at run time (a null field)
/// makes the whole call fall back to the interpreter, which then reports CEL's own
/// error.
#[derive(Debug, Clone)]
pub(super) enum Fast {
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
pub(super) enum FastOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl Fast {
    /// Builds the fast form of `e`, if it has one.
    pub(super) fn of(
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
    pub(super) fn eval(&self, call: &UdfCall<'_>) -> Option<f64> {
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
