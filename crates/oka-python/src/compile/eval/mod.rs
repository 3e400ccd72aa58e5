//! Evaluates a translated body for one key with Python's semantics. Every
//! operation either gives exactly what CPython gives, or answers [`Py`]: "run
//! this key in Python" — an exception, an int past 64 bits, a type the
//! translation does not model. Python then gives the real answer or raises
//! the real exception, so a translated UDF never answers differently; it only
//! sometimes does not answer here.

use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::Arc;

use oka_core::udf::Input;
use oka_core::{Entity, Row, Timestamp, Value};

mod builtins;
mod record;
mod walk;

use record::record;
use walk::Walk;

use super::ir::{BinOp, Body, CmpOp, Comp, Expr, Lit, Stmt};
use super::num;

/// A string: one of an input's or a literal's (shared, answered without a
/// copy), or one built here.
#[derive(Debug, Clone)]
pub enum Text<'a> {
    Shared(&'a Arc<str>),
    Owned(String),
}

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Text::Shared(s) => s,
            Text::Owned(s) => s,
        }
    }
}

impl Text<'_> {
    /// The string as a value: a shared one without a copy.
    fn value(&self) -> Arc<str> {
        match self {
            Text::Shared(s) => Arc::clone(s),
            Text::Owned(s) => s.as_str().into(),
        }
    }
}

/// This key must run in Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Py;

pub(super) type R<T> = Result<T, Py>;

/// The most loop and comprehension steps one key may take here; past it, the
/// key runs in Python (under its time limit).
const MAX_STEPS: u64 = 1_000_000;
/// The longest string built here, in bytes.
pub(super) const MAX_BUILT: usize = 1 << 20;

/// A Python value, as the evaluator holds it.
#[derive(Debug, Clone)]
pub enum V<'a> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Text<'a>),
    Time(Timestamp),
    /// A list read from an input.
    Vals(&'a [Value]),
    /// A list built here.
    List(Rc<Vec<V<'a>>>),
    Record(&'a Row),
    RowSlice(&'a [Row]),
    RowList(Rc<Vec<&'a Row>>),
    /// The output record.
    Out(Rc<Row>),
}

impl<'a> V<'a> {
    fn of(v: &'a Value) -> Self {
        match v {
            Value::Null => V::None,
            Value::Bool(b) => V::Bool(*b),
            Value::Int(i) => V::Int(*i),
            Value::Float(f) => V::Float(*f),
            Value::String(s) => V::Str(Text::Shared(s)),
            Value::Timestamp(t) => V::Time(*t),
            Value::List(items) => V::Vals(items),
        }
    }

    pub(super) fn truthy(&self) -> R<bool> {
        Ok(match self {
            V::None => false,
            V::Bool(b) => *b,
            V::Int(i) => *i != 0,
            V::Float(f) => *f != 0.0,
            V::Str(s) => !s.is_empty(),
            V::Vals(v) => !v.is_empty(),
            V::List(v) => !v.is_empty(),
            V::RowSlice(v) => !v.is_empty(),
            V::RowList(v) => !v.is_empty(),
            V::Time(_) | V::Record(_) | V::Out(_) => true,
        })
    }

    /// The value as a number: an int (bools are ints) or a float.
    pub(super) fn num(&self) -> Option<Num> {
        match self {
            V::Bool(b) => Some(Num::I(i64::from(*b))),
            V::Int(i) => Some(Num::I(*i)),
            V::Float(f) => Some(Num::F(*f)),
            _ => None,
        }
    }

    pub(super) fn len(&self) -> R<usize> {
        match self {
            V::Str(s) => Ok(s.chars().count()),
            V::Vals(v) => Ok(v.len()),
            V::List(v) => Ok(v.len()),
            V::RowSlice(v) => Ok(v.len()),
            V::RowList(v) => Ok(v.len()),
            _ => Err(Py),
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Num {
    I(i64),
    F(f64),
}

impl Num {
    pub(super) fn f(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

fn num_v<'a>(n: Num) -> V<'a> {
    match n {
        Num::I(i) => V::Int(i),
        Num::F(f) => V::Float(f),
    }
}

/// What one key's evaluation reads.
pub struct Frame<'a, 'b> {
    pub inputs: &'a [Input],
    pub args: &'a [Value],
    pub key: &'a [Value],
    pub now: Timestamp,
    pub output: &'b Entity,
    slots: Vec<Option<V<'a>>>,
    steps: u64,
    /// The record a `return {...}` built (the common case: no `V::Out`).
    out: Option<Row>,
}

impl<'a, 'b> Frame<'a, 'b> {
    pub fn new(
        body: &Body,
        inputs: &'a [Input],
        args: &'a [Value],
        key: &'a [Value],
        now: Timestamp,
        output: &'b Entity,
    ) -> Self {
        Self {
            inputs,
            args,
            key,
            now,
            output,
            slots: if body.slots == 0 {
                Vec::new()
            } else {
                vec![None; body.slots]
            },
            steps: 0,
            out: None,
        }
    }

    fn step(&mut self) -> R<()> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            Err(Py)
        } else {
            Ok(())
        }
    }
}

/// Runs `body`: the output record, or [`Py`].
pub fn run<'a>(body: &'a Body, f: &mut Frame<'a, '_>) -> R<Row> {
    match block(&body.stmts, f)? {
        _ if f.out.is_some() => f.out.take().ok_or(Py),
        Some(V::Out(row)) => Ok(Rc::try_unwrap(row).unwrap_or_else(|rc| (*rc).clone())),
        _ => Err(Py),
    }
}

fn block<'a>(stmts: &'a [Stmt], f: &mut Frame<'a, '_>) -> R<Option<V<'a>>> {
    for s in stmts {
        match s {
            Stmt::Assign(slot, e) => {
                let v = eval(e, f)?;
                f.slots[*slot] = Some(v);
            }
            Stmt::If(test, then, other) => {
                let branch = if eval(test, f)?.truthy()? {
                    then
                } else {
                    other
                };
                if let Some(v) = block(branch, f)? {
                    return Ok(Some(v));
                }
            }
            Stmt::For(slot, iter, body) => {
                let mut items = Walk::of(eval(iter, f)?)?;
                while let Some(v) = items.next()? {
                    f.step()?;
                    f.slots[*slot] = Some(v);
                    if let Some(v) = block(body, f)? {
                        return Ok(Some(v));
                    }
                }
            }
            Stmt::Return(Expr::Record(given, required)) => {
                f.out = Some(record(given, required, f)?);
                return Ok(Some(V::None));
            }
            Stmt::Return(e) => return Ok(Some(eval(e, f)?)),
        }
    }
    Ok(None)
}

/// Element `i` of a sequence (`0 <= i < len`).
pub(super) fn item<'a>(seq: &V<'a>, i: usize) -> R<V<'a>> {
    match seq {
        V::Vals(v) => v.get(i).map(V::of).ok_or(Py),
        V::List(v) => v.get(i).cloned().ok_or(Py),
        V::RowSlice(v) => v.get(i).map(V::Record).ok_or(Py),
        V::RowList(v) => v.get(i).map(|r| V::Record(r)).ok_or(Py),
        V::Str(s) => s
            .chars()
            .nth(i)
            .map(|c| V::Str(Text::Owned(c.to_string())))
            .ok_or(Py),
        _ => Err(Py),
    }
}

// long: one arm per kind of expression, each a line or a few.
pub(super) fn eval<'a>(e: &'a Expr, f: &mut Frame<'a, '_>) -> R<V<'a>> {
    Ok(match e {
        Expr::Const(l) => match l {
            Lit::None => V::None,
            Lit::Bool(b) => V::Bool(*b),
            Lit::Int(i) => V::Int(*i),
            Lit::Float(x) => V::Float(*x),
            Lit::Str(s) => V::Str(Text::Shared(s)),
        },
        Expr::Input(i) => match f.inputs.get(*i).ok_or(Py)? {
            Input::One(row) => V::Record(row),
            Input::Many(rows) => V::RowSlice(rows),
        },
        Expr::Arg(i) => V::of(f.args.get(*i).ok_or(Py)?),
        Expr::Local(s) => f.slots.get(*s).cloned().flatten().ok_or(Py)?,
        Expr::Field(of, col) => match eval(of, f)? {
            V::Record(row) => V::of(row.columns.get(*col).ok_or(Py)?),
            _ => return Err(Py),
        },
        Expr::Index(of, at) => {
            let seq = eval(of, f)?;
            let Some(Num::I(i)) = eval(at, f)?.num() else {
                return Err(Py);
            };
            let n = i64::try_from(seq.len()?).map_err(|_| Py)?;
            let i = if i < 0 { i + n } else { i };
            if !(0..n).contains(&i) {
                return Err(Py);
            }
            item(&seq, i as usize)?
        }
        Expr::Bin(op, l, r) => {
            let a = eval(l, f)?;
            let b = eval(r, f)?;
            binary(*op, &a, &b)?
        }
        Expr::Neg(x) => match eval(x, f)?.num().ok_or(Py)? {
            Num::I(i) => V::Int(i.checked_neg().ok_or(Py)?),
            Num::F(x) => V::Float(-x),
        },
        Expr::Pos(x) => num_v(eval(x, f)?.num().ok_or(Py)?),
        Expr::Not(x) => V::Bool(!eval(x, f)?.truthy()?),
        Expr::Cmp(ops, args) => {
            let mut left = eval(&args[0], f)?;
            for (op, e) in ops.iter().zip(&args[1..]) {
                let right = eval(e, f)?;
                if !compare(*op, &left, &right)? {
                    return Ok(V::Bool(false));
                }
                left = right;
            }
            V::Bool(true)
        }
        Expr::And(xs) => {
            let mut v = V::Bool(true);
            for x in xs {
                v = eval(x, f)?;
                if !v.truthy()? {
                    break;
                }
            }
            v
        }
        Expr::Or(xs) => {
            let mut v = V::Bool(false);
            for x in xs {
                v = eval(x, f)?;
                if v.truthy()? {
                    break;
                }
            }
            v
        }
        Expr::IfExp(parts) => {
            let (t, a, b) = &**parts;
            if eval(t, f)?.truthy()? {
                eval(a, f)?
            } else {
                eval(b, f)?
            }
        }
        Expr::Call(func, args) => builtins::call(*func, args, f)?,
        Expr::Method(of, m, args) => {
            let V::Str(s) = eval(of, f)? else {
                return Err(Py);
            };
            let arg = match args.first() {
                Some(a) => match eval(a, f)? {
                    V::Str(x) => Some(x),
                    _ => return Err(Py),
                },
                None => None,
            };
            builtins::method(*m, s, arg.as_deref())?
        }
        Expr::FStr(parts) => {
            let mut out = String::new();
            for p in parts {
                write_str(&eval(p, f)?, &mut out)?;
                if out.len() > MAX_BUILT {
                    return Err(Py);
                }
            }
            V::Str(Text::Owned(out))
        }
        Expr::List(xs) => {
            let items = xs.iter().map(|x| eval(x, f)).collect::<R<Vec<_>>>()?;
            V::List(Rc::new(items))
        }
        Expr::Comp(c) => {
            let mut rows: Vec<&'a Row> = Vec::new();
            let mut vals: Vec<V<'a>> = Vec::new();
            let mut records = true;
            comprehend(c, f, &mut |v| {
                match v {
                    V::Record(r) if records && vals.is_empty() => rows.push(r),
                    other => {
                        if records {
                            records = false;
                            vals.extend(rows.drain(..).map(V::Record));
                        }
                        vals.push(other);
                    }
                }
                Ok(true)
            })?;
            if records && !rows.is_empty() {
                V::RowList(Rc::new(rows))
            } else {
                V::List(Rc::new(vals))
            }
        }
        Expr::Record(given, required) => V::Out(Rc::new(record(given, required, f)?)),
        Expr::Now => V::Time(f.now),
    })
}

/// Runs a comprehension, giving each element to `each` until it answers false.
fn comprehend<'a>(
    c: &'a Comp,
    f: &mut Frame<'a, '_>,
    each: &mut dyn FnMut(V<'a>) -> R<bool>,
) -> R<()> {
    let mut items = Walk::of(eval(&c.iter, f)?)?;
    'items: while let Some(v) = items.next()? {
        f.step()?;
        f.slots[c.slot] = Some(v);
        for cond in &c.conds {
            if !eval(cond, f)?.truthy()? {
                continue 'items;
            }
        }
        let v = eval(&c.elt, f)?;
        if !each(v)? {
            break;
        }
    }
    Ok(())
}

/// Each element of the iterable `e` (a generator's lazily), until `each`
/// answers false.
pub(super) fn iterate<'a>(
    e: &'a Expr,
    f: &mut Frame<'a, '_>,
    each: &mut dyn FnMut(V<'a>) -> R<bool>,
) -> R<()> {
    if let Expr::Comp(c) = e
        && !c.list
    {
        return comprehend(c, f, each);
    }
    let mut items = Walk::of(eval(e, f)?)?;
    while let Some(v) = items.next()? {
        f.step()?;
        if !each(v)? {
            break;
        }
    }
    Ok(())
}

/// `str(v)` appended to `out`, for the values whose text the translation
/// writes exactly (strings, ints, bools, None, floats as `repr`).
pub(super) fn write_str(v: &V<'_>, out: &mut String) -> R<()> {
    match v {
        V::Str(s) => out.push_str(s),
        V::Int(i) => out.push_str(&i.to_string()),
        V::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        V::None => out.push_str("None"),
        V::Float(x) => out.push_str(&num::float_repr(*x)),
        _ => return Err(Py),
    }
    Ok(())
}

pub(super) fn binary<'a>(op: BinOp, a: &V<'a>, b: &V<'a>) -> R<V<'a>> {
    if let (BinOp::Add, V::Str(x), V::Str(y)) = (op, a, b) {
        if x.len() + y.len() > MAX_BUILT {
            return Err(Py);
        }
        return Ok(V::Str(Text::Owned(format!("{}{}", &**x, &**y))));
    }
    let (Some(x), Some(y)) = (a.num(), b.num()) else {
        return Err(Py);
    };
    Ok(match (x, y) {
        (Num::I(x), Num::I(y)) => match op {
            BinOp::Add => V::Int(x.checked_add(y).ok_or(Py)?),
            BinOp::Sub => V::Int(x.checked_sub(y).ok_or(Py)?),
            BinOp::Mul => V::Int(x.checked_mul(y).ok_or(Py)?),
            BinOp::Div => V::Float(num::int_div(x, y).ok_or(Py)?),
            BinOp::FloorDiv => V::Int(num::int_floordiv(x, y).ok_or(Py)?),
            BinOp::Mod => V::Int(num::int_mod(x, y).ok_or(Py)?),
            BinOp::Pow => V::Int(num::int_pow(x, y).ok_or(Py)?),
        },
        (x, y) => {
            let (x, y) = (x.f(), y.f());
            V::Float(match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div => num::float_div(x, y).ok_or(Py)?,
                BinOp::FloorDiv => num::float_floordiv(x, y).ok_or(Py)?,
                BinOp::Mod => num::float_mod(x, y).ok_or(Py)?,
                BinOp::Pow => num::float_pow(x, y).ok_or(Py)?,
            })
        }
    })
}

/// How two values order, as Python's `<` sees them; `None` when unordered
/// (a NaN). `Err` where Python raises (or the translation does not model it).
pub(super) fn order(a: &V<'_>, b: &V<'_>) -> R<Option<Ordering>> {
    if let (V::Str(x), V::Str(y)) = (a, b) {
        return Ok(Some((**x).cmp(&**y)));
    }
    let (Some(x), Some(y)) = (a.num(), b.num()) else {
        return Err(Py);
    };
    Ok(match (x, y) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(x), Num::F(y)) => num::cmp_int_float(x, y),
        (Num::F(x), Num::I(y)) => num::cmp_int_float(y, x).map(Ordering::reverse),
    })
}

/// `a == b`.
fn equal(a: &V<'_>, b: &V<'_>) -> R<bool> {
    match (a, b) {
        (V::None, V::None) => Ok(true),
        (V::None, _) | (_, V::None) => Ok(false),
        (V::Str(x), V::Str(y)) => Ok(**x == **y),
        (V::Str(_), x) | (x, V::Str(_)) if x.num().is_some() => Ok(false),
        _ if a.num().is_some() && b.num().is_some() => Ok(order(a, b)? == Some(Ordering::Equal)),
        _ => Err(Py),
    }
}

fn compare(op: CmpOp, a: &V<'_>, b: &V<'_>) -> R<bool> {
    Ok(match op {
        CmpOp::Eq => equal(a, b)?,
        CmpOp::Ne => !equal(a, b)?,
        CmpOp::Lt => order(a, b)? == Some(Ordering::Less),
        CmpOp::Le => matches!(order(a, b)?, Some(Ordering::Less | Ordering::Equal)),
        CmpOp::Gt => order(a, b)? == Some(Ordering::Greater),
        CmpOp::Ge => matches!(order(a, b)?, Some(Ordering::Greater | Ordering::Equal)),
        CmpOp::In => contains(b, a)?,
        CmpOp::NotIn => !contains(b, a)?,
        CmpOp::IsNone => matches!(a, V::None),
        CmpOp::IsNotNone => !matches!(a, V::None),
    })
}

/// `x in seq`.
fn contains(seq: &V<'_>, x: &V<'_>) -> R<bool> {
    if let (V::Str(s), V::Str(x)) = (seq, x) {
        return Ok(s.contains(&**x));
    }
    // Python checks identity first: a NaN may be "in" a list it is not equal
    // to anything of. Those run in Python.
    if matches!(x, V::Float(f) if f.is_nan()) {
        return Err(Py);
    }
    let n = match seq {
        V::Vals(_) | V::List(_) => seq.len()?,
        _ => return Err(Py),
    };
    for i in 0..n {
        let it = item(seq, i)?;
        if matches!(it, V::Float(f) if f.is_nan()) {
            return Err(Py);
        }
        if equal(&it, x)? {
            return Ok(true);
        }
    }
    Ok(false)
}
