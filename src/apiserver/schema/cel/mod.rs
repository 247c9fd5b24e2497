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

mod check;
mod eval;
mod values;

use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr};
use kube_cel::cel::parser::{Expression, Parser};
use serde_json::Value;

use super::node::Node;
use super::{FieldError, FieldErrorKind, path};

pub(crate) use eval::{find_by_keys, validate};
pub(crate) use values::escape;

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

fn parse(src: &str) -> Result<Expression, String> {
    let mut expr = Parser::new()
        .enable_optional_syntax(true)
        .parse(src)
        .map_err(|e| e.to_string())?;
    wrap_optional_selects(&mut expr);
    Ok(expr)
}

/// The function [`wrap_optional_selects`] inserts.
pub(super) const AS_OPTIONAL: &str = "kubeAsOptional";

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
        let type_error = check::check_expr(&expr, node, root, optional_old_self);
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
                    if let Some(type_error) = check::check_expr(&e, node, root, optional_old_self) {
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
