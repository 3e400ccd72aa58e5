//! The IR `translate.py` writes (JSON), read and checked against the UDF's
//! declaration — every field read resolved to its column, every output field
//! to the output's, every call to a function with an exact counterpart. What
//! does not check stays in Python, with the reason.

use oka_core::Entity;
use oka_core::batch::PythonDecl;
use serde_json::Value as Json;

use super::ir::{BinOp, Body, CmpOp, Comp, Expr, Func, Lit, MathFn, Method, Stmt};

/// The deepest expression Oka evaluates (the evaluator recurses).
const MAX_DEPTH: usize = 48;

/// What a value is, as far as reading its fields needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Value,
    Record(usize),
    Records(usize),
}

/// Why a body stays in Python.
pub type Why = super::NotCompiled;

fn no(why: impl Into<String>) -> Why {
    Why::new(why)
}

struct Checker<'d> {
    decl: &'d PythonDecl,
    shapes: Vec<Option<Shape>>,
    now_columns: Vec<usize>,
}

/// Reads and checks `ir` (`{"slots", "body"}`) for `decl`.
pub fn check(decl: &PythonDecl, ir: &Json) -> Result<Body, Why> {
    let slots = ir["slots"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= 4096)
        .ok_or_else(|| no("the translation has no slot count"))?;
    let mut c = Checker {
        decl,
        shapes: vec![None; slots],
        now_columns: Vec::new(),
    };
    let stmts = c.block(&ir["body"], 0)?;
    if !stmts.iter().any(returns) {
        return Err(no("the function has no `return` Oka can follow"));
    }
    c.now_columns.sort_unstable();
    c.now_columns.dedup();
    Ok(Body {
        slots,
        stmts,
        now_columns: c.now_columns,
    })
}

fn returns(s: &Stmt) -> bool {
    match s {
        Stmt::Return(_) => true,
        Stmt::If(_, a, b) => a.iter().any(returns) || b.iter().any(returns),
        Stmt::For(_, _, body) => body.iter().any(returns),
        Stmt::Assign(..) => false,
    }
}

fn items(j: &Json) -> Result<&[Json], Why> {
    j.as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| no("the translation is not well formed"))
}

fn text(j: &Json) -> Result<&str, Why> {
    j.as_str()
        .ok_or_else(|| no("the translation is not well formed"))
}

fn index(j: &Json) -> Result<usize, Why> {
    j.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| no("the translation is not well formed"))
}

impl Checker<'_> {
    fn slot(&self, j: &Json) -> Result<usize, Why> {
        let s = index(j)?;
        if s < self.shapes.len() {
            Ok(s)
        } else {
            Err(no("the translation names a local it did not count"))
        }
    }

    fn bind(&mut self, slot: usize, shape: Shape) -> Result<(), Why> {
        match self.shapes[slot] {
            None => {
                self.shapes[slot] = Some(shape);
                Ok(())
            }
            Some(s) if s == shape => Ok(()),
            Some(_) => Err(no(
                "a local holds a record at one place and a value at another",
            )),
        }
    }

    fn block(&mut self, j: &Json, depth: usize) -> Result<Vec<Stmt>, Why> {
        items(j)?.iter().map(|s| self.stmt(s, depth)).collect()
    }

    fn stmt(&mut self, j: &Json, depth: usize) -> Result<Stmt, Why> {
        let parts = items(j)?;
        let arg = |i: usize| parts.get(i).unwrap_or(&Json::Null);
        if depth > MAX_DEPTH {
            return Err(no(format!("statements nested more than {MAX_DEPTH} deep")));
        }
        Ok(match text(arg(0))? {
            "assign" => {
                let slot = self.slot(arg(1))?;
                let (e, shape) = self.expr(arg(2), depth + 1)?;
                self.bind(slot, shape)?;
                Stmt::Assign(slot, e)
            }
            "if" => {
                let (test, _) = self.expr(arg(1), depth + 1)?;
                Stmt::If(
                    test,
                    self.block(arg(2), depth + 1)?,
                    self.block(arg(3), depth + 1)?,
                )
            }
            "for" => {
                let slot = self.slot(arg(1))?;
                let (iter, shape) = self.expr(arg(2), depth + 1)?;
                self.bind(slot, element(shape))?;
                Stmt::For(slot, iter, self.block(arg(3), depth + 1)?)
            }
            "return" => {
                let (e, _) = self.expr(arg(1), depth + 1)?;
                Stmt::Return(e)
            }
            other => return Err(no(format!("the statement `{other}`"))),
        })
    }

    fn exprs(&mut self, j: &Json, depth: usize) -> Result<Vec<Expr>, Why> {
        items(j)?
            .iter()
            .map(|e| self.expr(e, depth).map(|(e, _)| e))
            .collect()
    }

    // long: one arm per kind of IR node, each reading its parts.
    fn expr(&mut self, j: &Json, depth: usize) -> Result<(Expr, Shape), Why> {
        if depth > MAX_DEPTH {
            return Err(no(format!(
                "an expression nested more than {MAX_DEPTH} deep"
            )));
        }
        let parts = items(j)?;
        let arg = |i: usize| parts.get(i).unwrap_or(&Json::Null);
        let d = depth + 1;
        let value = |e: Expr| Ok((e, Shape::Value));
        match text(arg(0))? {
            "const" => value(Expr::Const(literal(text(arg(1))?, arg(2))?)),
            "input" => {
                let i = index(arg(1))?;
                let input =
                    self.decl.inputs.get(i).ok_or_else(|| {
                        no("the translation names an input the UDF does not have")
                    })?;
                let shape = if input.many {
                    Shape::Records(i)
                } else {
                    Shape::Record(i)
                };
                Ok((Expr::Input(i), shape))
            }
            "arg" => {
                let name = text(arg(1))?;
                let i = (self.decl.args.iter())
                    .position(|a| &*a.name == name)
                    .ok_or_else(|| no(format!("the argument `{name}` is not declared")))?;
                value(Expr::Arg(i))
            }
            "local" => {
                let slot = self.slot(arg(1))?;
                Ok((Expr::Local(slot), self.shapes[slot].unwrap_or(Shape::Value)))
            }
            kind @ ("field" | "get") => {
                let (of, shape) = self.expr(arg(1), d)?;
                let name = text(arg(2))?;
                let Shape::Record(i) = shape else {
                    return Err(no(format!(
                        "`{name}` is read of something that is not an input's record"
                    )));
                };
                let input = &self.decl.inputs[i];
                match input.entity.columns.iter().position(|c| &*c.name == name) {
                    Some(col) => value(Expr::Field(Box::new(of), col)),
                    None if kind == "get" => value(Expr::Const(Lit::None)),
                    None => Err(no(format!(
                        "input `{}` ({}) has no field `{name}`",
                        input.name, input.entity.name
                    ))),
                }
            }
            "index" => {
                let (of, shape) = self.expr(arg(1), d)?;
                let (at, _) = self.expr(arg(2), d)?;
                Ok((Expr::Index(Box::new(of), Box::new(at)), element(shape)))
            }
            "bin" => {
                let op = match text(arg(1))? {
                    "add" => BinOp::Add,
                    "sub" => BinOp::Sub,
                    "mul" => BinOp::Mul,
                    "div" => BinOp::Div,
                    "floordiv" => BinOp::FloorDiv,
                    "mod" => BinOp::Mod,
                    "pow" => BinOp::Pow,
                    other => return Err(no(format!("the operator `{other}`"))),
                };
                let (l, _) = self.expr(arg(2), d)?;
                let (r, _) = self.expr(arg(3), d)?;
                value(Expr::Bin(op, Box::new(l), Box::new(r)))
            }
            "neg" => value(Expr::Neg(Box::new(self.expr(arg(1), d)?.0))),
            "pos" => value(Expr::Pos(Box::new(self.expr(arg(1), d)?.0))),
            "not" => value(Expr::Not(Box::new(self.expr(arg(1), d)?.0))),
            "cmp" => {
                let ops = items(arg(1))?
                    .iter()
                    .map(|o| {
                        Ok(match text(o)? {
                            "eq" => CmpOp::Eq,
                            "ne" => CmpOp::Ne,
                            "lt" => CmpOp::Lt,
                            "le" => CmpOp::Le,
                            "gt" => CmpOp::Gt,
                            "ge" => CmpOp::Ge,
                            "in" => CmpOp::In,
                            "notin" => CmpOp::NotIn,
                            "is" => CmpOp::IsNone,
                            "isnot" => CmpOp::IsNotNone,
                            other => return Err(no(format!("the comparison `{other}`"))),
                        })
                    })
                    .collect::<Result<Vec<_>, Why>>()?;
                let args = self.exprs(arg(2), d)?;
                if args.len() != ops.len() + 1 {
                    return Err(no("the translation is not well formed"));
                }
                value(Expr::Cmp(ops, args))
            }
            "and" => value(Expr::And(self.exprs(arg(1), d)?)),
            "or" => value(Expr::Or(self.exprs(arg(1), d)?)),
            "ifexp" => {
                let (t, _) = self.expr(arg(1), d)?;
                let (a, sa) = self.expr(arg(2), d)?;
                let (b, sb) = self.expr(arg(3), d)?;
                let shape = if sa == sb { sa } else { Shape::Value };
                Ok((Expr::IfExp(Box::new((t, a, b))), shape))
            }
            "call" => self.call(text(arg(1))?, arg(2), d),
            "method" => {
                let (of, _) = self.expr(arg(1), d)?;
                let (m, arity) = match text(arg(2))? {
                    "lower" => (Method::Lower, 0),
                    "upper" => (Method::Upper, 0),
                    "strip" => (Method::Strip, 0),
                    "startswith" => (Method::StartsWith, 1),
                    "endswith" => (Method::EndsWith, 1),
                    other => return Err(no(format!("the method `.{other}`"))),
                };
                let args = self.exprs(arg(3), d)?;
                if args.len() != arity {
                    return Err(no(format!(
                        "`.{}` with {} arguments",
                        text(arg(2))?,
                        args.len()
                    )));
                }
                value(Expr::Method(Box::new(of), m, args))
            }
            "fstr" => value(Expr::FStr(self.exprs(arg(1), d)?)),
            "list" => value(Expr::List(self.exprs(arg(1), d)?)),
            "comp" => {
                let list = text(arg(1))? == "list";
                let slot = self.slot(arg(2))?;
                let (iter, shape) = self.expr(arg(3), d)?;
                self.bind(slot, element(shape))?;
                let (elt, elt_shape) = self.expr(arg(4), d)?;
                let conds = self.exprs(arg(5), d)?;
                let shape = match elt_shape {
                    Shape::Record(i) if list => Shape::Records(i),
                    _ => Shape::Value,
                };
                Ok((
                    Expr::Comp(Box::new(Comp {
                        list,
                        slot,
                        iter,
                        elt,
                        conds,
                    })),
                    shape,
                ))
            }
            "record" => self.record(
                arg(1),
                text(arg(2)).unwrap_or("dict") == "entity",
                arg(3),
                d,
            ),
            "now" => Err(no("`datetime.now()` other than as a field of the output")),
            other => Err(no(format!("the expression `{other}`"))),
        }
    }

    fn call(&mut self, name: &str, args: &Json, d: usize) -> Result<(Expr, Shape), Why> {
        let f = match name {
            "min" => Func::Min,
            "max" => Func::Max,
            "abs" => Func::Abs,
            "round" => Func::Round,
            "len" => Func::Len,
            "sum" => Func::Sum,
            "any" => Func::Any,
            "all" => Func::All,
            "float" => Func::Float,
            "int" => Func::Int,
            "bool" => Func::Bool,
            "str" => Func::Str,
            "math.sqrt" => Func::Math(MathFn::Sqrt),
            "math.exp" => Func::Math(MathFn::Exp),
            "math.log" => Func::Math(MathFn::Log),
            "math.log10" => Func::Math(MathFn::Log10),
            "math.log2" => Func::Math(MathFn::Log2),
            "math.sin" => Func::Math(MathFn::Sin),
            "math.cos" => Func::Math(MathFn::Cos),
            "math.tan" => Func::Math(MathFn::Tan),
            "math.atan" => Func::Math(MathFn::Atan),
            "math.tanh" => Func::Math(MathFn::Tanh),
            "math.floor" => Func::Floor,
            "math.ceil" => Func::Ceil,
            "math.trunc" => Func::Trunc,
            "math.fabs" => Func::Fabs,
            "math.isnan" => Func::IsNan,
            "math.isinf" => Func::IsInf,
            "math.isfinite" => Func::IsFinite,
            other => return Err(no(format!("a call of `{other}`"))),
        };
        let args = self.exprs(args, d)?;
        let ok = match f {
            Func::Min | Func::Max => !args.is_empty(),
            Func::Round => (1..=2).contains(&args.len()),
            _ => args.len() == 1,
        };
        if !ok {
            return Err(no(format!("`{name}` with {} arguments", args.len())));
        }
        Ok((Expr::Call(f, args), Shape::Value))
    }

    fn record(
        &mut self,
        fields: &Json,
        entity: bool,
        required: &Json,
        d: usize,
    ) -> Result<(Expr, Shape), Why> {
        let out: &Entity = &self.decl.output;
        let mut given: Vec<Option<Expr>> = vec![None; out.columns.len()];
        for f in items(fields)? {
            let pair = items(f)?;
            let name = text(pair.first().unwrap_or(&Json::Null))?;
            let e = pair.get(1).unwrap_or(&Json::Null);
            let col = (out.columns.iter())
                .position(|c| &*c.name == name)
                .ok_or_else(|| no(format!("the output {} has no field `{name}`", out.name)))?;
            let expr = if items(e)?.first().and_then(Json::as_str) == Some("now") {
                self.now_columns.push(col);
                Expr::Now
            } else {
                self.expr(e, d)?.0
            };
            given[col] = Some(expr);
        }
        for (i, (g, c)) in given.iter().zip(&out.columns).enumerate() {
            let omittable = out.key_index.contains(&i) || i == out.timestamp_index;
            if g.is_none() && (entity || !omittable) {
                return Err(no(format!("the output's field `{}` is not given", c.name)));
            }
        }
        let required = if entity {
            items(required)?
                .iter()
                .map(|n| {
                    let n = text(n)?;
                    (out.columns.iter())
                        .position(|c| &*c.name == n)
                        .ok_or_else(|| no(format!("the output {} has no field `{n}`", out.name)))
                })
                .collect::<Result<Vec<_>, Why>>()?
        } else {
            Vec::new()
        };
        Ok((Expr::Record(given.into(), required.into()), Shape::Value))
    }
}

/// The shape of an element of something of `shape`.
fn element(shape: Shape) -> Shape {
    match shape {
        Shape::Records(i) => Shape::Record(i),
        _ => Shape::Value,
    }
}

fn literal(kind: &str, v: &Json) -> Result<Lit, Why> {
    let bad = || no("the translation is not well formed");
    Ok(match kind {
        "none" => Lit::None,
        "bool" => Lit::Bool(v.as_bool().ok_or_else(bad)?),
        "int" => Lit::Int(v.as_i64().ok_or_else(bad)?),
        "float" => Lit::Float(f64::from_bits(v.as_i64().ok_or_else(bad)? as u64)),
        "str" => Lit::Str(v.as_str().ok_or_else(bad)?.into()),
        other => return Err(no(format!("a literal of kind `{other}`"))),
    })
}
