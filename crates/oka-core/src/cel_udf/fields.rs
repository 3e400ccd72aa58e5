//! Field checks: every `x.field` whose `x` is a record of a known entity names a
//! field of that entity — a `latest` dependency (`txn.amount`), and a record
//! inside a macro over a `range`/`last_n` dependency (`txn.map(r, r.amount)`,
//! `txn.filter(r, …).map(r, r.amount)`, `txn.exists(r, r.amount > 1.0)`,
//! `txn[0].amount`). What the walk cannot follow (a record built by an
//! expression) is left to the dry run and to request time.

use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use crate::entity::Entity;
use crate::error::did_you_mean;

use super::Binding;

/// What a name in scope holds, as far as fields are concerned.
#[derive(Clone, Copy)]
enum Holds<'b> {
    /// One record of a dependency (named), of this entity.
    Record(&'b str, &'b Arc<Entity>),
    /// A list of records of a dependency.
    Records(&'b str, &'b Arc<Entity>),
    /// Something else.
    Other,
}

/// The problems with field selections in `e`, one message each.
pub(super) fn check(e: &IdedExpr, bindings: &[(Arc<str>, Binding)]) -> Vec<String> {
    let mut walk = Walk {
        bindings,
        scope: Vec::new(),
        problems: Vec::new(),
    };
    walk.expr(e);
    walk.problems
}

struct Walk<'b> {
    bindings: &'b [(Arc<str>, Binding)],
    /// Comprehension variables, innermost last.
    scope: Vec<(&'b str, Holds<'b>)>,
    problems: Vec<String>,
}

impl<'b> Walk<'b> {
    fn ident(&self, name: &str) -> Holds<'b> {
        if let Some((_, h)) = self.scope.iter().rev().find(|(n, _)| *n == name) {
            return *h;
        }
        match self.bindings.iter().find(|(n, _)| &**n == name) {
            Some((n, Binding::Record(e))) => Holds::Record(n, e),
            Some((n, Binding::Records(e))) => Holds::Records(n, e),
            _ => Holds::Other,
        }
    }

    /// What `e` evaluates to, where the walk can tell.
    fn holds(&self, e: &'b IdedExpr) -> Holds<'b> {
        match &e.expr {
            Expr::Ident(name) => self.ident(name),
            // `txn[0]`: a record of the list.
            Expr::Call(call) if call.func_name == "_[_]" && call.args.len() == 2 => {
                match self.holds(&call.args[0]) {
                    Holds::Records(n, ent) => Holds::Record(n, ent),
                    _ => Holds::Other,
                }
            }
            // `txn.filter(r, …)`: the same records, fewer.
            Expr::Comprehension(c) if is_filter(c) => match self.holds(&c.iter_range) {
                h @ Holds::Records(..) => h,
                _ => Holds::Other,
            },
            _ => Holds::Other,
        }
    }

    fn expr(&mut self, e: &'b IdedExpr) {
        match &e.expr {
            Expr::Select(sel) => {
                if let Holds::Records(dep, _) = self.holds(&sel.operand) {
                    self.problems
                        .push(field_of_a_list(&sel.operand, dep, &sel.field));
                } else if let Holds::Record(dep, ent) = self.holds(&sel.operand)
                    && ent.column_index(&sel.field).is_none()
                {
                    let shown = match &sel.operand.expr {
                        Expr::Ident(n) => format!("{n}.{}", sel.field),
                        Expr::Call(c) => match c.args.first().map(|a| &a.expr) {
                            Some(Expr::Ident(n)) => format!("{n}[…].{}", sel.field),
                            _ => format!("….{}", sel.field),
                        },
                        _ => format!("….{}", sel.field),
                    };
                    self.problems.push(format!(
                        "`{shown}`: records of `{dep}` (entity `{}`) have no field `{}`{}",
                        ent.name,
                        sel.field,
                        did_you_mean(&sel.field, ent.columns.iter().map(|c| &*c.name))
                    ));
                }
                self.expr(&sel.operand);
            }
            Expr::Call(call) => {
                if let Some(t) = &call.target {
                    self.expr(t);
                }
                for a in &call.args {
                    self.expr(a);
                }
            }
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range);
                self.expr(&c.accu_init);
                let element = match self.holds(&c.iter_range) {
                    Holds::Records(n, ent) if c.iter_var2.is_none() => Holds::Record(n, ent),
                    _ => Holds::Other,
                };
                let depth = self.scope.len();
                self.scope.push((&c.iter_var, element));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2, Holds::Other));
                }
                self.scope.push((&c.accu_var, Holds::Other));
                self.expr(&c.loop_cond);
                self.expr(&c.loop_step);
                self.expr(&c.result);
                self.scope.truncate(depth);
            }
            Expr::List(l) => l.elements.iter().for_each(|x| self.expr(x)),
            Expr::Map(m) => self.entries(&m.entries),
            Expr::Struct(s) => self.entries(&s.entries),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entries(&mut self, es: &'b [cel::common::ast::IdedEntryExpr]) {
        for entry in es {
            match &entry.expr {
                EntryExpr::StructField(f) => self.expr(&f.value),
                EntryExpr::MapEntry(m) => {
                    self.expr(&m.key);
                    self.expr(&m.value);
                }
            }
        }
    }
}

/// `txn.amount` where `txn` is a list of records: what to write instead.
fn field_of_a_list(operand: &IdedExpr, dep: &str, field: &str) -> String {
    match &operand.expr {
        Expr::Ident(n) => format!(
            "`{n}.{field}`: `{n}` is a list of records (a `range` or `last_n` dependency), not one record: write `{n}.map(r, r.{field})` for every record's `{field}`, or `{n}[size({n}) - 1].{field}` for the newest"
        ),
        _ => format!(
            "`….{field}`: this is a list of records of `{dep}`, not one record: write `.map(r, r.{field})` for every record's `{field}`"
        ),
    }
}

/// Whether a comprehension is `filter`'s (or a three-argument `map` returning
/// the element): `cond ? @result + [x] : @result` over `x`.
fn is_filter(c: &cel::common::ast::ComprehensionExpr) -> bool {
    let Expr::Call(step) = &c.loop_step.expr else {
        return false;
    };
    if step.func_name != "_?_:_" || step.args.len() != 3 {
        return false;
    }
    let Expr::Call(add) = &step.args[1].expr else {
        return false;
    };
    add.func_name == "_+_"
        && matches!(add.args.as_slice(), [acc, list]
            if matches!(&acc.expr, Expr::Ident(a) if *a == c.accu_var)
            && matches!(&list.expr, Expr::List(l) if matches!(l.elements.as_slice(),
                [x] if matches!(&x.expr, Expr::Ident(v) if *v == c.iter_var))))
}
