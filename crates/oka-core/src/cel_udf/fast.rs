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
    pub(super) fn eval<O: Operands>(&self, operands: &O) -> Option<f64> {
        let double = |v: Option<&Value>| match v? {
            Value::Float(f) => Some(*f),
            _ => None,
        };
        match self {
            Self::Lit(f) => Some(*f),
            Self::Field(input, column) => double(operands.field(*input, *column)),
            Self::Arg(i) => double(operands.arg(*i)),
            Self::Neg(x) => Some(-x.eval(operands)?),
            Self::Bin(op, a, b) => {
                let (a, b) = (a.eval(operands)?, b.eval(operands)?);
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

/// Where a fast form reads its fields and arguments: a UDF call, or a step's
/// records for one key ([`super::KeyOperands`]).
pub(super) trait Operands {
    /// Column `column` of input `input`'s one record (`None` for an input of
    /// several records).
    fn field(&self, input: usize, column: usize) -> Option<&Value>;
    /// Argument `i`.
    fn arg(&self, i: usize) -> Option<&Value>;
}

impl Operands for UdfCall<'_> {
    fn field(&self, input: usize, column: usize) -> Option<&Value> {
        match self.inputs.get(input)? {
            Input::One(row) => row.columns.get(column),
            Input::Many(_) => None,
        }
    }

    fn arg(&self, i: usize) -> Option<&Value> {
        self.args.get(i)
    }
}
