//! Python's builtins and string methods as a translated UDF calls them:
//! `min`, `max`, `abs`, `round`, `len`, `sum`, `any`, `all`, the conversions,
//! `math`'s functions, and `str`'s case, strip and prefix methods. Each gives
//! exactly CPython's answer or [`Py`].

use std::cmp::Ordering;

use super::{Frame, Num, Py, R, Text, V, binary, eval, iterate, order, write_str};
use crate::compile::ir::{BinOp, Expr, Func, Method};
use crate::compile::num;

pub(super) fn method<'a>(m: Method, s: Text<'a>, arg: Option<&str>) -> R<V<'a>> {
    // Case maps and whitespace differ between Unicode versions: ASCII only.
    let ascii = s.is_ascii();
    Ok(match m {
        Method::Lower if ascii => V::Str(Text::Owned(s.to_ascii_lowercase())),
        Method::Upper if ascii => V::Str(Text::Owned(s.to_ascii_uppercase())),
        Method::Strip if ascii => {
            // str.isspace on ASCII: the C0 separators count too.
            let ws = |c: char| matches!(c, ' ' | '\t'..='\r' | '\x1c'..='\x1f');
            V::Str(Text::Owned(s.trim_matches(ws).to_owned()))
        }
        Method::StartsWith => V::Bool(s.starts_with(arg.ok_or(Py)?)),
        Method::EndsWith => V::Bool(s.ends_with(arg.ok_or(Py)?)),
        _ => return Err(Py),
    })
}

// long: one arm per function, each a few lines.
pub(super) fn call<'a>(func: Func, args: &'a [Expr], f: &mut Frame<'a, '_>) -> R<V<'a>> {
    let first = || args.first().ok_or(Py);
    Ok(match func {
        Func::Min | Func::Max => {
            let want = if func == Func::Min {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Option<V<'a>> = None;
            let mut take = |v: V<'a>| -> R<bool> {
                best = Some(match best.take() {
                    None => v,
                    Some(b) => {
                        if order(&v, &b)? == Some(want) {
                            v
                        } else {
                            b
                        }
                    }
                });
                Ok(true)
            };
            if args.len() == 1 {
                iterate(first()?, f, &mut take)?;
            } else {
                for a in args {
                    let v = eval(a, f)?;
                    take(v)?;
                }
            }
            best.ok_or(Py)?
        }
        Func::Abs => match eval(first()?, f)?.num().ok_or(Py)? {
            Num::I(i) => V::Int(i.checked_abs().ok_or(Py)?),
            Num::F(x) => V::Float(x.abs()),
        },
        Func::Round => {
            let x = eval(first()?, f)?.num().ok_or(Py)?;
            match (x, args.get(1)) {
                (Num::I(i), None) => V::Int(i),
                (Num::F(x), None) => V::Int(num::round_to_int(x).ok_or(Py)?),
                (x, Some(n)) => {
                    let V::Int(n) = eval(n, f)? else {
                        return Err(Py);
                    };
                    match x {
                        Num::I(i) if n >= 0 => V::Int(i),
                        Num::F(x) => V::Float(num::round_places(x, n).ok_or(Py)?),
                        Num::I(_) => return Err(Py),
                    }
                }
            }
        }
        Func::Len => V::Int(i64::try_from(eval(first()?, f)?.len()?).map_err(|_| Py)?),
        Func::Sum => {
            let mut total = V::Int(0);
            iterate(first()?, f, &mut |v| {
                total = binary(BinOp::Add, &total, &v)?;
                Ok(true)
            })?;
            // `sum` adds numbers only (a string start raises).
            if total.num().is_none() {
                return Err(Py);
            }
            total
        }
        Func::Any | Func::All => {
            let any = func == Func::Any;
            let mut found = !any;
            iterate(first()?, f, &mut |v| {
                let t = v.truthy()?;
                if t == any {
                    found = any;
                    return Ok(false);
                }
                Ok(true)
            })?;
            V::Bool(found)
        }
        Func::Float => match eval(first()?, f)? {
            V::Str(_) => return Err(Py),
            v => V::Float(v.num().ok_or(Py)?.f()),
        },
        Func::Int => match eval(first()?, f)?.num().ok_or(Py)? {
            Num::I(i) => V::Int(i),
            Num::F(x) => V::Int(num::to_int(x.trunc()).ok_or(Py)?),
        },
        Func::Bool => V::Bool(eval(first()?, f)?.truthy()?),
        Func::Str => match eval(first()?, f)? {
            V::Str(s) => V::Str(s),
            v => {
                let mut out = String::new();
                write_str(&v, &mut out)?;
                V::Str(Text::Owned(out))
            }
        },
        Func::Math(m) => {
            let x = eval(first()?, f)?.num().ok_or(Py)?.f();
            V::Float(num::math_1(x, m.apply(x)).ok_or(Py)?)
        }
        Func::Floor | Func::Ceil | Func::Trunc => match eval(first()?, f)?.num().ok_or(Py)? {
            Num::I(i) => V::Int(i),
            Num::F(x) => {
                let r = match func {
                    Func::Floor => x.floor(),
                    Func::Ceil => x.ceil(),
                    _ => x.trunc(),
                };
                V::Int(num::to_int(r).ok_or(Py)?)
            }
        },
        Func::Fabs => V::Float(eval(first()?, f)?.num().ok_or(Py)?.f().abs()),
        Func::IsNan | Func::IsInf | Func::IsFinite => {
            let x = eval(first()?, f)?.num().ok_or(Py)?.f();
            V::Bool(match func {
                Func::IsNan => x.is_nan(),
                Func::IsInf => x.is_infinite(),
                _ => x.is_finite(),
            })
        }
    })
}
