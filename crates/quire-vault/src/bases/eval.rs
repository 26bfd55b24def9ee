//! Evaluating a Bases expression for one note (a row): names resolve to the note's
//! properties, `file.*` to what the vault knows of its file, `formula.*` to the
//! base's formulas, and every step is paid from a [`Budget`], so a base costs what
//! its reader's page may spend whatever its formulas say.

use std::collections::HashMap;

use super::error::BaseError;
use super::func;
use super::parse::Expr;
use super::row::Row;
use super::value::Value;

/// Steps an evaluation may take; past them every value is an error and the view
/// says it was cut.
#[derive(Debug)]
pub struct Budget {
    left: u64,
    /// Whether the budget ran out.
    pub spent: bool,
}

impl Budget {
    /// A budget of `steps`.
    pub fn new(steps: u64) -> Budget {
        Budget {
            left: steps,
            spent: false,
        }
    }

    /// Pays `n` steps; false once the budget is spent.
    pub(crate) fn pay(&mut self, n: u64) -> bool {
        if self.left < n {
            self.left = 0;
            self.spent = true;
            return false;
        }
        self.left -= n;
        true
    }
}

/// What every row of one base shares: its formulas and the moment it renders.
#[derive(Debug)]
pub struct Env<'a> {
    /// The base's formulas by name, parsed (a formula that did not parse holds why).
    pub formulas: &'a HashMap<String, Result<Expr, BaseError>>,
    /// `now()`, in ms since the epoch: one instant for the whole render.
    pub now_ms: i64,
    /// Set when an expression read the clock (`now()`, `today()`, `relative()`): what
    /// it shows then changes with time, not only with the vault.
    pub clock_read: std::cell::Cell<bool>,
}

/// Formulas calling formulas, deep at most (a cycle ends here, as an error).
const FORMULA_DEPTH_MAX: usize = 16;

/// One evaluation: a row, the shared environment and the budget.
struct Eval<'a, 'b> {
    row: &'a dyn Row,
    env: &'a Env<'a>,
    budget: &'b mut Budget,
    formula_depth: usize,
}

/// The scopes a bare name can open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    File,
    Note,
    Formula,
}

/// Evaluates `expr` for `row`.
pub fn eval(expr: &Expr, row: &dyn Row, env: &Env<'_>, budget: &mut Budget) -> Value {
    Eval {
        row,
        env,
        budget,
        formula_depth: 0,
    }
    .value(expr)
}

impl Eval<'_, '_> {
    fn value(&mut self, e: &Expr) -> Value {
        if !self.budget.pay(1) {
            return Value::Error("evaluation budget spent".into());
        }
        match e {
            Expr::Null => Value::Null,
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Num(n) => Value::Num(*n),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::List(items) => Value::List(items.iter().map(|i| self.value(i)).collect()),
            Expr::Name(name) => match scope(name) {
                Some(_) => Value::Error(format!("`{name}` needs a field: `{name}.something`")),
                None if name == "this" => Value::Error("`this` is not supported".into()),
                None => self.row.property(name),
            },
            Expr::Member(target, field) => self.member(target, field),
            Expr::Index(target, index) => self.index(target, index),
            Expr::Call(callee, args) => self.call(callee, args),
            Expr::Unary(op, inner) => unary(op, self.value(inner)),
            Expr::Binary("&&", l, r) => {
                let l = self.value(l);
                if l.truthy() {
                    Value::Bool(self.value(r).truthy())
                } else {
                    Value::Bool(false)
                }
            }
            Expr::Binary("||", l, r) => {
                let l = self.value(l);
                if l.truthy() {
                    Value::Bool(true)
                } else {
                    Value::Bool(self.value(r).truthy())
                }
            }
            Expr::Binary(op, l, r) => {
                let (l, r) = (self.value(l), self.value(r));
                func::binary(op, l, r)
            }
        }
    }

    fn member(&mut self, target: &Expr, field: &str) -> Value {
        if let Expr::Name(name) = target {
            match scope(name) {
                Some(Scope::File) => {
                    return self.row.file_field(field).unwrap_or_else(|| {
                        Value::Error(format!("`file.{field}` is not supported"))
                    })
                }
                Some(Scope::Note) => return self.row.property(field),
                Some(Scope::Formula) => return self.formula(field),
                None => {}
            }
        }
        let v = self.value(target);
        func::field(&v, field)
    }

    fn index(&mut self, target: &Expr, index: &Expr) -> Value {
        let key = self.value(index);
        if let (Expr::Name(name), Value::Str(k)) = (target, &key) {
            if scope(name) == Some(Scope::Note) {
                return self.row.property(k);
            }
        }
        match (self.value(target), key) {
            (Value::List(l), Value::Num(i)) => {
                let i = if i < 0.0 { l.len() as f64 + i } else { i };
                l.get(i as usize)
                    .filter(|_| i >= 0.0)
                    .cloned()
                    .unwrap_or(Value::Null)
            }
            (Value::Str(s), Value::Num(i)) if i >= 0.0 => s
                .chars()
                .nth(i as usize)
                .map_or(Value::Null, |c| Value::Str(c.to_string())),
            (v, k) => Value::Error(format!(
                "cannot index a {} with a {}",
                v.type_name(),
                k.type_name()
            )),
        }
    }

    fn formula(&mut self, name: &str) -> Value {
        let Some(f) = self.env.formulas.get(name) else {
            return Value::Error(format!("no formula `{name}`"));
        };
        let f = match f {
            Ok(f) => f,
            Err(e) => return Value::Error(format!("formula `{name}`: {e}")),
        };
        if self.formula_depth >= FORMULA_DEPTH_MAX {
            return Value::Error(format!("formula `{name}` refers to itself"));
        }
        self.formula_depth += 1;
        let v = self.value(f);
        self.formula_depth -= 1;
        v
    }

    fn call(&mut self, callee: &Expr, args: &[Expr]) -> Value {
        match callee {
            // `if` evaluates one branch, so its arguments are not evaluated first.
            Expr::Name(name) if name == "if" => self.if_(args),
            Expr::Name(name) => {
                let args: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                if name == "now" || name == "today" {
                    self.env.clock_read.set(true);
                }
                func::global(name, &args, self.env.now_ms)
            }
            Expr::Member(target, method) => {
                if matches!(&**target, Expr::Name(n) if scope(n) == Some(Scope::File)) {
                    let args: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                    return func::file_method(self.row, method, &args);
                }
                let recv = self.value(target);
                let args: Vec<Value> = args.iter().map(|a| self.value(a)).collect();
                // Work that grows with the receiver pays by its size.
                let size = match &recv {
                    Value::Str(s) => s.len() as u64 / 64,
                    Value::List(l) => l.len() as u64,
                    _ => 0,
                };
                if !self.budget.pay(size) {
                    return Value::Error("evaluation budget spent".into());
                }
                if method == "relative" {
                    self.env.clock_read.set(true);
                }
                func::method(recv, method, &args, self.env.now_ms)
            }
            _ => Value::Error("only functions and methods can be called".into()),
        }
    }

    fn if_(&mut self, args: &[Expr]) -> Value {
        let Some(cond) = args.first() else {
            return Value::Error("`if` needs a condition".into());
        };
        let branch = if self.value(cond).truthy() {
            args.get(1)
        } else {
            args.get(2)
        };
        branch.map_or(Value::Null, |b| self.value(b))
    }
}

fn scope(name: &str) -> Option<Scope> {
    match name {
        "file" => Some(Scope::File),
        "note" => Some(Scope::Note),
        "formula" => Some(Scope::Formula),
        _ => None,
    }
}

fn unary(op: &str, v: Value) -> Value {
    match (op, v) {
        ("!", v) => Value::Bool(!v.truthy()),
        ("-", Value::Num(n)) => Value::Num(-n),
        ("-", Value::Duration(d)) => Value::Duration(-d),
        (_, v) => Value::Error(format!("cannot negate a {}", v.type_name())),
    }
}
