//! A deliberately small stand-in for cel-go's type checker, run at install:
//! field selections on values whose schema is known must name declared
//! properties, and identifiers must be declared.

use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue};
use kube_cel::cel::parser::Expression;

use super::super::node::Node;
use super::escape;

/// Identifiers that are CEL type names or library namespaces, not variables.
const BUILTIN_IDENTS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional",
    "sets",
    "math",
    "base64",
    "strings",
    "lists",
    "cel",
    "google",
    "duration",
    "timestamp",
];

/// Checks `expr` with `self` (and `oldSelf`) typed by `node`; the first problem found, if any.
pub(super) fn check_expr(
    expr: &Expression,
    node: &Node,
    root: bool,
    optional_old_self: bool,
) -> Option<String> {
    let mut checker = Checker {
        errs: Vec::new(),
        vars: Vec::new(),
    };
    checker.vars.push(("self".into(), Ty::Node(node, root)));
    // With optionalOldSelf, oldSelf is an optional (`oldSelf.value().x`): not checked.
    let old_ty = if optional_old_self {
        Ty::Dyn
    } else {
        Ty::Node(node, root)
    };
    checker.vars.push(("oldSelf".into(), old_ty));
    checker.check(expr);
    checker.errs.into_iter().next()
}

/// What the checker knows about an expression's value.
#[derive(Clone, Copy)]
enum Ty<'a> {
    /// A value of this schema node (`true` for the resource root).
    Node(&'a Node, bool),
    /// Anything: not checked.
    Dyn,
}

/// A deliberately small static check: field selections on values whose
/// schema is known (`self`, `oldSelf`, list items in comprehensions) must name
/// declared properties, and identifiers must be declared. Everything else is
/// left to evaluation.
struct Checker<'a> {
    errs: Vec<String>,
    vars: Vec<(String, Ty<'a>)>,
}

impl<'a> Checker<'a> {
    fn lookup(&self, name: &str) -> Option<Ty<'a>> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| *t)
    }

    fn select(&mut self, t: Ty<'a>, field: &str) -> Ty<'a> {
        let Ty::Node(n, root) = t else { return Ty::Dyn };
        if root && matches!(field, "apiVersion" | "kind" | "metadata") {
            return Ty::Dyn;
        }
        if !n.properties.is_empty() {
            match n.cel_fields.get(field) {
                Some(name) => Ty::Node(&n.properties[name], false),
                None if n.embedded && matches!(field, "apiVersion" | "kind" | "metadata") => {
                    Ty::Dyn
                }
                None => {
                    self.errs.push(format!("undefined field '{field}'"));
                    Ty::Dyn
                }
            }
        } else if let Some(add) = &n.additional {
            Ty::Node(add, false)
        } else {
            Ty::Dyn
        }
    }

    fn check(&mut self, e: &Expression) -> Ty<'a> {
        match &e.expr {
            Expr::Ident(name) => match self.lookup(name) {
                Some(t) => t,
                None => {
                    if !name.starts_with('@') && !BUILTIN_IDENTS.contains(&name.as_str()) {
                        self.errs.push(format!("undeclared reference to '{name}'"));
                    }
                    Ty::Dyn
                }
            },
            Expr::Select(s) => {
                let t = self.check(&s.operand);
                self.select(t, &s.field)
            }
            Expr::Call(c) => {
                if let Some(target) = &c.target {
                    let namespace =
                        matches!(&target.expr, Expr::Ident(n) if self.lookup(n).is_none());
                    if !namespace {
                        self.check(target);
                    }
                }
                let arg_tys: Vec<Ty<'a>> = c.args.iter().map(|a| self.check(a)).collect();
                if c.func_name == "_[_]"
                    && c.target.is_none()
                    && c.args.len() == 2
                    && let Ty::Node(n, root) = arg_tys[0]
                {
                    {
                        if let Some(items) = &n.items {
                            return Ty::Node(items, false);
                        }
                        if let Some(add) = &n.additional {
                            return Ty::Node(add, false);
                        }
                        if let Expr::Literal(LiteralValue::String(s)) = &c.args[1].expr {
                            // `self['a-b']` indexes by the unescaped name.
                            let field = escape(s.inner()).unwrap_or_default();
                            return self.select(Ty::Node(n, root), &field);
                        }
                    }
                }
                Ty::Dyn
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let (first, second) = match range {
                    Ty::Node(n, _) if n.items.is_some() => {
                        (Ty::Node(n.items.as_deref().unwrap_or(n), false), Ty::Dyn)
                    }
                    Ty::Node(n, _) if n.additional.is_some() => (
                        Ty::Dyn,
                        Ty::Node(n.additional.as_deref().unwrap_or(n), false),
                    ),
                    _ => (Ty::Dyn, Ty::Dyn),
                };
                self.check(&c.accu_init);
                let depth = self.vars.len();
                self.vars.push((c.accu_var.clone(), Ty::Dyn));
                match &c.iter_var2 {
                    // Two-variable form: (index or key, value).
                    Some(v2) => {
                        self.vars.push((c.iter_var.clone(), Ty::Dyn));
                        let value_ty = if matches!(range, Ty::Node(n, _) if n.items.is_some()) {
                            first
                        } else {
                            second
                        };
                        self.vars.push((v2.clone(), value_ty));
                    }
                    None => self.vars.push((c.iter_var.clone(), first)),
                }
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                self.check(&c.result);
                self.vars.truncate(depth);
                Ty::Dyn
            }
            Expr::List(l) => {
                for el in &l.elements {
                    self.check(el);
                }
                Ty::Dyn
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        self.check(&me.key);
                        self.check(&me.value);
                    }
                }
                Ty::Dyn
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                Ty::Dyn
            }
            Expr::Literal(_) | Expr::Unspecified => Ty::Dyn,
        }
    }
}
