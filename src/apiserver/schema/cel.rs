//! CEL `x-kubernetes-validations`: compilation at CRD install, evaluation at
//! admission.
//!
//! The expression language itself (parser, interpreter, the Kubernetes
//! extension libraries such as `quantity()`, `isURL()`, `sets.contains()`) comes
//! from the `cel` crate through `kube-cel` (`kube_cel::cel` + `KubeCelExt`).
//! The schema walk is ours rather than `kube_cel::Validator`, because that
//! walk differs from apiextensions-apiserver on points that matter here
//! (checked against kube-cel 0.8.0):
//!
//! - field-name escaping: kube-cel escapes every `_` as `__`, so a rule
//!   `self.log_level == 'x'` fails with "No such key: log_level". The real
//!   server only escapes `__` (as `__underscores__`), `.`, `-`, `/` and CEL
//!   keywords, so `self.log_level` works there and here ([`escape`]);
//! - list correlation: kube-cel pairs old and new list items by index, so
//!   transition rules on the items of an ordinary (atomic/set) list compare
//!   unrelated elements. The real server only correlates the items of
//!   `x-kubernetes-list-type: map` lists, by their keys, and refuses at install
//!   a transition rule on an uncorrelatable item ([`compile_rules`]);
//! - errors: kube-cel reports a root rule at path `""` with a message only; we
//!   need `field.Error`s (`<nil>`, kind from `reason`, bad value = the type
//!   name, `fieldPath` appended, runtime errors as "... evaluating rule: ...");
//! - install-time checks: kube-cel reports a rule that does not parse only when
//!   an object is validated; the real server refuses the CRD. We parse every
//!   rule in `CompiledSchema::new` and also check field selections on `self` /
//!   `oldSelf` against the schema (a small stand-in for cel-go's type
//!   checker), so `self.typo` fails at install like "undefined field 'typo'";
//! - `optionalOldSelf`: kube-cel binds `oldSelf` to `null` on create and to
//!   the plain old value on update; the real server binds an optional
//!   (`optional.none()` / `optional.of(old)`), so `oldSelf.hasValue()` and
//!   `oldSelf.value()` only work with the latter, which we do;
//! - junctors: kube-cel also runs rules found in `oneOf`/`anyOf` branches; the
//!   real server only runs those in `allOf` branches;
//! - defaults: `kube_cel::apply_defaults` does not default inside a default it
//!   just inserted, nor replace a non-nullable `null`; `defaults.rs` does both
//!   like `structuraldefaulting`;
//! - typing: values are converted by schema type (`number` always a double,
//!   `date-time` a timestamp, `duration` a duration, `byte` bytes), the root's
//!   `metadata` exposes only `name` and `generateName`, and unchanged values
//!   ratchet (a non-transition rule failing on a value equal to the correlated
//!   old value is not reported), as in the real server.
//!
//! The `cel` crate's `x.?f` on a plain map without `f` is fixed around at
//! parse time ([`wrap_optional_selects`]).
//!
//! Not reproduced: cel-go's full static type checker, cost estimation and the
//! runtime cost budget, and functions missing from the `cel` crate (e.g.
//! `sortBy`, `cel.bind`): those evaluate to an error that rejects the object.
//! Install-time errors carry the rule text as the bad value where the real
//! server prints the whole `ValidationRule` struct.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr, LiteralValue};
use kube_cel::cel::objects::{Key, Map, OptionalValue};
use kube_cel::cel::parser::{Expression, Parser};
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Value as CelValue};
use serde_json::Value;

use super::node::Node;
use super::{FieldError, FieldErrorKind, format, path};

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<Expression>,
    pub reason: Option<String>,
    /// `fieldPath`, normalized as a `field.Path` string (`ref.name`, `limits[cpu]`).
    pub field_path: Option<String>,
    pub optional_old_self: bool,
    pub expr: Expression,
    pub uses_old_self: bool,
}

/// The supported `reason`s, sorted as the real server lists them.
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// CEL keywords that apiextensions escapes as `__keyword__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

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

/// Escapes a property name for CEL the apiextensions way (`__` ->
/// `__underscores__`, `.` -> `__dot__`, `-` -> `__dash__`, `/` -> `__slash__`,
/// keywords -> `__kw__`). `None` if the name cannot be accessed from CEL.
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

fn parse(src: &str) -> Result<Expression, String> {
    let mut expr = Parser::new()
        .enable_optional_syntax(true)
        .parse(src)
        .map_err(|e| e.to_string())?;
    wrap_optional_selects(&mut expr);
    Ok(expr)
}

/// The function [`wrap_optional_selects`] inserts.
const AS_OPTIONAL: &str = "kubeAsOptional";

/// Works around the `cel` crate (0.13) evaluating `x.?f` on a plain map
/// without `f` to a "no such key" error instead of `optional.none()` (it only
/// handles a missing field when `x` is already an optional). Every operand of
/// `_?._` is wrapped in [`AS_OPTIONAL`], which turns a plain value into
/// `optional.of(value)` and leaves an optional alone, so the crate's optional
/// path (which gets this right) always applies.
fn wrap_optional_selects(e: &mut Expression) {
    match &mut e.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                wrap_optional_selects(t);
            }
            for a in &mut c.args {
                wrap_optional_selects(a);
            }
            if c.func_name == "_?._" && c.target.is_none() && c.args.len() == 2 {
                let operand = std::mem::take(&mut c.args[0]);
                c.args[0] = Expression {
                    id: operand.id,
                    expr: Expr::Call(CallExpr {
                        func_name: AS_OPTIONAL.into(),
                        target: None,
                        args: vec![operand],
                    }),
                };
            }
        }
        Expr::Select(sel) => wrap_optional_selects(&mut sel.operand),
        Expr::Comprehension(c) => {
            for sub in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                wrap_optional_selects(sub);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(wrap_optional_selects),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    wrap_optional_selects(&mut me.key);
                    wrap_optional_selects(&mut me.value);
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &mut st.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    wrap_optional_selects(&mut f.value);
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn as_optional(_ftx: &FunctionContext, value: CelValue) -> Result<CelValue, ExecutionError> {
    if <&OptionalValue>::try_from(&value).is_ok() {
        return Ok(value);
    }
    Ok(CelValue::Opaque(Arc::new(OptionalValue::of(value))))
}

/// Compiles the `x-kubernetes-validations` of `node` (at schema path `at`).
/// `uncorrelatable_at` is the schema path of the nearest enclosing list items
/// that cannot be correlated with the old object, if any.
pub(crate) fn compile_rules(
    rules: &Value,
    node: &Node,
    at: &str,
    uncorrelatable_at: Option<&str>,
    errs: &mut Vec<FieldError>,
) -> Vec<CompiledRule> {
    let Some(rules) = rules.as_array() else {
        errs.push(FieldError {
            field: at.to_string(),
            kind: FieldErrorKind::Invalid,
            bad_value: Some(path::go_value(rules)),
            detail: "must be a list of validation rules".into(),
        });
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, raw) in rules.iter().enumerate() {
        let at_i = path::index(at, i);
        let str_field = |k: &str| raw.get(k).and_then(Value::as_str).map(str::to_string);
        let rule = str_field("rule").unwrap_or_default();
        let mut ok = true;
        let mut err = |field: String, kind, bad_value: Option<String>, detail: String| {
            errs.push(FieldError {
                field,
                kind,
                bad_value,
                detail,
            });
        };
        if rule.trim().is_empty() {
            err(
                path::child(&at_i, "rule"),
                FieldErrorKind::Required,
                None,
                "rule is not specified".into(),
            );
            continue;
        }
        let expr = match parse(&rule) {
            Ok(e) => e,
            Err(e) => {
                let bad = Some(path::go_quote(&rule));
                err(
                    path::child(&at_i, "rule"),
                    FieldErrorKind::Invalid,
                    bad,
                    format!("compilation failed: {e}"),
                );
                continue;
            }
        };
        let uses_old_self = expr.references().has_variable("oldSelf");
        let optional_old_self = raw
            .get("optionalOldSelf")
            .and_then(Value::as_bool)
            .unwrap_or(false);

        let root = at == "openAPIV3Schema.x-kubernetes-validations" || node.embedded;
        let type_error = check_expr(&expr, node, root, optional_old_self);
        if let Some(first) = type_error {
            let bad = Some(path::go_quote(&rule));
            err(
                path::child(&at_i, "rule"),
                FieldErrorKind::Invalid,
                bad,
                format!("compilation failed: ERROR: <input>: {first}"),
            );
            ok = false;
        }
        if uses_old_self && let Some(unc) = uncorrelatable_at {
            let bad = Some(path::go_quote(&rule));
            let detail = format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {unc}"
            );
            err(
                path::child(&at_i, "rule"),
                FieldErrorKind::Invalid,
                bad,
                detail,
            );
            ok = false;
        }
        if optional_old_self && !uses_old_self {
            let detail = "may not be set if oldSelf is not used in rule".to_string();
            err(
                path::child(&at_i, "optionalOldSelf"),
                FieldErrorKind::Invalid,
                Some("true".into()),
                detail,
            );
            ok = false;
        }
        let message = str_field("message");
        if let Some(m) = &message
            && m.contains('\n')
        {
            let bad = Some(path::go_quote(m));
            err(
                path::child(&at_i, "message"),
                FieldErrorKind::Invalid,
                bad,
                "message must not contain line breaks".into(),
            );
            ok = false;
        }
        let message_expression = match str_field("messageExpression") {
            Some(src) if !src.trim().is_empty() => match parse(&src) {
                Ok(e) => {
                    if let Some(type_error) = check_expr(&e, node, root, optional_old_self) {
                        let bad = Some(path::go_quote(&src));
                        let detail = format!(
                            "messageExpression compilation failed: ERROR: <input>: {type_error}"
                        );
                        err(
                            path::child(&at_i, "messageExpression"),
                            FieldErrorKind::Invalid,
                            bad,
                            detail,
                        );
                        ok = false;
                    }
                    Some(e)
                }
                Err(e) => {
                    let bad = Some(path::go_quote(&src));
                    let detail = format!("messageExpression compilation failed: {e}");
                    err(
                        path::child(&at_i, "messageExpression"),
                        FieldErrorKind::Invalid,
                        bad,
                        detail,
                    );
                    ok = false;
                    None
                }
            },
            _ => None,
        };
        let reason = str_field("reason");
        if let Some(r) = &reason
            && !REASONS.contains(&r.as_str())
        {
            let detail = format!(
                "supported values: {}",
                REASONS
                    .iter()
                    .map(|r| path::go_quote(r))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            err(
                path::child(&at_i, "reason"),
                FieldErrorKind::NotSupported,
                Some(path::go_quote(r)),
                detail,
            );
            ok = false;
        }
        let mut field_path = None;
        if let Some(fp) = str_field("fieldPath") {
            let at_fp = path::child(&at_i, "fieldPath");
            let problem = if fp.trim().is_empty() {
                Some("fieldPath must be non-empty if specified".to_string())
            } else if fp.contains(['\n', '\r']) {
                Some("fieldPath must not contain line breaks".to_string())
            } else {
                match valid_field_path(&fp, node) {
                    Ok(normalized) => {
                        field_path = Some(normalized);
                        None
                    }
                    Err(e) => Some(format!("fieldPath must be a valid path: {e}")),
                }
            };
            if let Some(detail) = problem {
                err(
                    at_fp,
                    FieldErrorKind::Invalid,
                    Some(path::go_quote(&fp)),
                    detail,
                );
                ok = false;
            }
        }
        if ok {
            out.push(CompiledRule {
                rule,
                message,
                message_expression,
                reason,
                field_path,
                optional_old_self,
                expr,
                uses_old_self,
            });
        }
    }
    out
}

/// apiextensions' `ValidFieldPath`: `.name` and `['name']` steps that must
/// exist in the schema (map keys where the node is a map), normalized as a
/// `field.Path` string (`a.b`, `a[key]`).
fn valid_field_path(fp: &str, node: &Node) -> Result<String, String> {
    let mut tokens = Vec::new();
    let mut rest = fp;
    while !rest.is_empty() {
        let len = if rest.starts_with('\'') {
            let bytes = rest.as_bytes();
            (1..bytes.len())
                .find(|&i| bytes[i] == b'\'' && bytes[i - 1] != b'\\')
                .map(|i| i + 1)
                .unwrap_or(rest.len())
        } else if rest.starts_with(['.', '[', ']']) {
            1
        } else {
            rest.find(['.', '[', ']']).unwrap_or(rest.len())
        };
        tokens.push(&rest[..len]);
        rest = &rest[len..];
    }
    let mut out = String::new();
    let mut n = node;
    let mut it = tokens.into_iter();
    while let Some(tok) = it.next() {
        let name = match tok {
            "[" => {
                let quoted = it.next().ok_or("unexpected end of JSON path")?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {quoted}"));
                }
                let name = quoted[1..quoted.len() - 1]
                    .replace("\\'", "'")
                    .replace("\\\\", "\\");
                match it.next() {
                    Some("]") => {}
                    Some(t) => return Err(format!("expected ] but got {t}")),
                    None => return Err("unexpected end of JSON path".into()),
                }
                name
            }
            "." => it.next().ok_or("unexpected end of JSON path")?.to_string(),
            other => return Err(format!("expected [ or . but got: {other}")),
        };
        if !n.properties.is_empty() {
            n = n
                .properties
                .get(&name)
                .ok_or("does not refer to a valid field")?;
            out = path::child(&out, &name);
        } else if let Some(add) = &n.additional {
            n = add;
            out = path::key(&out, &name);
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    Ok(out)
}

/// Checks `expr` with `self` (and `oldSelf`) typed by `node`; the first problem found, if any.
fn check_expr(
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

// ── values ────────────────────────────────────────────────────────────────

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

fn cel_number(n: &serde_json::Number, node: Option<&Node>) -> CelValue {
    let ty = node.and_then(|n| n.ty.as_deref());
    if ty == Some("number") {
        return CelValue::Float(n.as_f64().unwrap_or(f64::NAN));
    }
    if let Some(i) = n.as_i64() {
        CelValue::Int(i)
    } else if let Some(u) = n.as_u64() {
        CelValue::UInt(u)
    } else {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if ty == Some("integer") && f.fract() == 0.0 && f.abs() < 9.2e18 {
            CelValue::Int(f as i64)
        } else {
            CelValue::Float(f)
        }
    }
}

fn cel_string(s: &str, node: Option<&Node>) -> CelValue {
    let fallback = || CelValue::String(Arc::new(s.to_string()));
    let Some(n) = node.filter(|n| !n.int_or_string) else {
        return fallback();
    };
    match n.raw_format.as_deref() {
        Some("date-time") => format::parse_date_time(s)
            .map(CelValue::Timestamp)
            .unwrap_or_else(fallback),
        Some("duration") => format::parse_go_duration(s)
            .map(CelValue::Duration)
            .unwrap_or_else(fallback),
        Some("byte") => format::decode_base64(s)
            .map(|b| CelValue::Bytes(Arc::new(b)))
            .unwrap_or_else(fallback),
        _ => fallback(),
    }
}

/// Converts a JSON value to CEL, typed by its schema node.
pub(crate) fn to_cel(v: &Value, node: Option<&Node>) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => cel_number(n, node),
        Value::String(s) => cel_string(s, node),
        Value::Array(a) => {
            let items = node.and_then(|n| n.items.as_deref());
            CelValue::List(Arc::new(a.iter().map(|x| to_cel(x, items)).collect()))
        }
        Value::Object(o) => {
            let mut map = HashMap::with_capacity(o.len());
            match node {
                Some(n) if !n.properties.is_empty() => {
                    // An object with declared properties exposes exactly those, escaped.
                    for (escaped, name) in &n.cel_fields {
                        if let Some(cv) = o.get(name) {
                            map.insert(key(escaped), to_cel(cv, n.properties.get(name)));
                        }
                    }
                    if n.embedded {
                        for meta in ["apiVersion", "kind", "metadata"] {
                            if let (Some(cv), false) =
                                (o.get(meta), n.properties.contains_key(meta))
                            {
                                map.insert(key(meta), to_cel(cv, None));
                            }
                        }
                    }
                }
                Some(n) if n.additional.is_some() => {
                    // A map: keys are data, not field names, and are not escaped.
                    for (k, cv) in o {
                        map.insert(key(k), to_cel(cv, n.additional.as_deref()));
                    }
                }
                _ => {
                    for (k, cv) in o {
                        map.insert(key(k), to_cel(cv, None));
                    }
                }
            }
            CelValue::Map(Map { map: Arc::new(map) })
        }
    }
}

/// `self` at the resource root: the declared properties plus `apiVersion`,
/// `kind` and a `metadata` that exposes only `name` and `generateName`.
fn to_cel_root(v: &Value, node: &Node) -> CelValue {
    let CelValue::Map(m) = to_cel(v, Some(node)) else {
        return to_cel(v, Some(node));
    };
    let mut map: HashMap<Key, CelValue> = (*m.map).clone();
    for k in ["apiVersion", "kind"] {
        if let Some(Value::String(s)) = v.get(k) {
            map.insert(key(k), CelValue::String(Arc::new(s.clone())));
        }
    }
    if let Some(meta) = v.get("metadata").and_then(Value::as_object) {
        let mut md = HashMap::new();
        for k in ["name", "generateName"] {
            if let Some(Value::String(s)) = meta.get(k) {
                md.insert(key(k), CelValue::String(Arc::new(s.clone())));
            }
        }
        map.insert(key("metadata"), CelValue::Map(Map { map: Arc::new(md) }));
    }
    CelValue::Map(Map { map: Arc::new(map) })
}

// ── evaluation ────────────────────────────────────────────────────────────

thread_local! {
    /// The standard CEL functions plus the Kubernetes libraries, built once per thread.
    static BASE: Context<'static> = {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.add_function(AS_OPTIONAL, as_optional);
        ctx
    };
}

/// Evaluates every rule in the schema against `obj` (and `old` on update),
/// walking the object like apiextensions' CEL validator does.
pub(crate) fn validate(root: &Node, obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    BASE.with(|base| walk(base, root, obj, old, "", true, false, errs));
}

/// `parent_unchanged`: whether the nearest correlatable ancestor equals its old value.
#[allow(clippy::too_many_arguments)]
fn walk(
    base: &Context<'_>,
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    root: bool,
    parent_unchanged: bool,
    errs: &mut Vec<FieldError>,
) {
    // Rules only validate non-null values; a rule that cares about null or
    // absence must sit on the parent.
    if !node.has_rules_below || v.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    // Ratcheting (CRDValidationRatcheting, on by default): failures of
    // non-transition rules are dropped for a value equal to its correlated old
    // value or, where there is none (items of atomic/set lists), when the
    // nearest correlatable ancestor is unchanged.
    let unchanged = match old {
        Some(o) => super::json_eq(o, v),
        None => parent_unchanged,
    };
    // Embedded resources are resource roots too (typed apiVersion/kind/metadata).
    let resource_root = root || node.embedded;
    if !node.rules.is_empty() {
        eval_rules(
            base,
            &node.rules,
            node,
            v,
            old,
            at,
            resource_root,
            unchanged,
            errs,
        );
    }
    // Rules inside `allOf` branches run against the same value; upstream does
    // not ratchet them on the node itself, only through its parent.
    for branch in node.all_of.iter().filter(|b| !b.rules.is_empty()) {
        eval_rules(
            base,
            &branch.rules,
            node,
            v,
            old,
            at,
            resource_root,
            parent_unchanged,
            errs,
        );
    }
    match v {
        Value::Object(o) => {
            if let Some(add) = &node.additional {
                for (k, cv) in o.iter().filter(|(k, _)| !node.properties.contains_key(*k)) {
                    walk(
                        base,
                        add,
                        cv,
                        old.and_then(|x| x.get(k)),
                        &path::key(at, k),
                        false,
                        unchanged,
                        errs,
                    );
                }
            }
            for (k, prop) in &node.properties {
                if let Some(cv) = o.get(k) {
                    walk(
                        base,
                        prop,
                        cv,
                        old.and_then(|x| x.get(k)),
                        &path::child(at, k),
                        false,
                        unchanged,
                        errs,
                    );
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &node.items {
                let old_items = old.and_then(Value::as_array).filter(|_| node.is_list_map());
                for (i, item) in a.iter().enumerate() {
                    let old_item =
                        old_items.and_then(|oa| find_by_keys(oa, item, &node.list_map_keys));
                    walk(
                        base,
                        items,
                        item,
                        old_item,
                        &path::index(at, i),
                        false,
                        unchanged,
                        errs,
                    );
                }
            }
        }
        _ => {}
    }
}

/// The old item of a `list-type: map` list with the same key values as `item`.
pub(crate) fn find_by_keys<'v>(
    old: &'v [Value],
    item: &Value,
    keys: &[String],
) -> Option<&'v Value> {
    if keys.is_empty() {
        return None;
    }
    let key_of = |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
    let wanted = key_of(item);
    old.iter().find(|o| key_of(o) == wanted)
}

#[allow(clippy::too_many_arguments)]
fn eval_rules(
    base: &Context<'_>,
    rules: &[CompiledRule],
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    root: bool,
    unchanged: bool,
    errs: &mut Vec<FieldError>,
) {
    let convert = |x: &Value| {
        if root {
            to_cel_root(x, node)
        } else {
            to_cel(x, Some(node))
        }
    };
    let self_val = convert(v);
    let old_val = old.map(convert);
    let mut scope = base.new_inner_scope();
    scope.add_variable_from_value("self", self_val);
    let type_name = node.cel_type_name();
    for rule in rules {
        if rule.uses_old_self && old_val.is_none() && !rule.optional_old_self {
            // Transition rules only run when there is an old value to compare with.
            continue;
        }
        let mut rule_scope = scope.new_inner_scope();
        if rule.uses_old_self {
            let old_self = match (&old_val, rule.optional_old_self) {
                (Some(o), false) => o.clone(),
                (Some(o), true) => CelValue::Opaque(Arc::new(OptionalValue::of(o.clone()))),
                (None, _) => CelValue::Opaque(Arc::new(OptionalValue::none())),
            };
            rule_scope.add_variable_from_value("oldSelf", old_self);
        }
        match rule_scope.resolve(&rule.expr) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                if !rule.uses_old_self && unchanged {
                    continue;
                }
                let detail = failure_message(rule, &rule_scope);
                let field = match &rule.field_path {
                    Some(fp) => path::child(at, fp),
                    None => path::or_nil(at),
                };
                errs.push(error_for_reason(
                    field,
                    type_name,
                    detail,
                    rule.reason.as_deref(),
                ));
            }
            Ok(other) => errs.push(FieldError {
                field: path::or_nil(at),
                kind: FieldErrorKind::Invalid,
                bad_value: Some(path::go_quote(type_name)),
                detail: format!(
                    "rule did not evaluate to a bool (got {}) evaluating rule: {}",
                    other.type_of(),
                    rule_error_string(rule)
                ),
            }),
            Err(e) => errs.push(FieldError {
                field: path::or_nil(at),
                kind: FieldErrorKind::Invalid,
                bad_value: Some(path::go_quote(type_name)),
                detail: runtime_error_detail(&e, rule),
            }),
        }
    }
}

/// `message`, or `failed rule: <rule>`, trimmed (apiextensions' `ruleErrorString`).
fn rule_error_string(rule: &CompiledRule) -> String {
    match rule.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => rule.rule.trim().to_string(),
    }
}

/// The detail of a failed rule: the `messageExpression` result if it yields a
/// usable string (non-empty, one line), else `message`, else `failed rule: <rule>`.
fn failure_message(rule: &CompiledRule, ctx: &Context<'_>) -> String {
    if let Some(me) = &rule.message_expression
        && let Ok(CelValue::String(s)) = ctx.resolve(me)
    {
        let s = s.trim();
        if !s.is_empty() && !s.contains('\n') {
            return s.to_string();
        }
    }
    match rule.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed rule: {}", rule.rule.trim()),
    }
}

/// A runtime evaluation error, worded like cel-go's.
fn runtime_error_detail(e: &ExecutionError, rule: &CompiledRule) -> String {
    let res = rule_error_string(rule);
    let msg = match e {
        ExecutionError::NoSuchOverload => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {res}"
            );
        }
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {i:?}"),
        ExecutionError::UndeclaredReference(name) => {
            format!(
                "undeclared reference to '{name}' (not supported by this server's CEL implementation)"
            )
        }
        other => other.to_string(),
    };
    format!("{msg} evaluating rule: {res}")
}

fn error_for_reason(
    field: String,
    type_name: &str,
    detail: String,
    reason: Option<&str>,
) -> FieldError {
    let (kind, bad_value, detail) = match reason {
        Some("FieldValueForbidden") => (FieldErrorKind::Forbidden, None, detail),
        Some("FieldValueRequired") => (FieldErrorKind::Required, None, detail),
        Some("FieldValueDuplicate") => (
            FieldErrorKind::Duplicate,
            Some(path::go_quote(type_name)),
            String::new(),
        ),
        _ => (
            FieldErrorKind::Invalid,
            Some(path::go_quote(type_name)),
            detail,
        ),
    };
    FieldError {
        field,
        kind,
        bad_value,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escaping_matches_apiextensions() {
        assert_eq!(escape("log_level").as_deref(), Some("log_level"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(
            escape("x-y.z/w").as_deref(),
            Some("x__dash__y__dot__z__slash__w")
        );
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1st"), None);
        assert_eq!(escape("a b"), None);
    }
}
