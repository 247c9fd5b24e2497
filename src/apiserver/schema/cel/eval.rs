//! Evaluation of the compiled rules at admission, walking the object like
//! apiextensions' CEL validator (transition rules, ratcheting, messages).

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Value as CelValue};
use serde_json::Value;

use super::super::node::Node;
use super::super::{FieldError, FieldErrorKind, json_eq, path};
use super::values::{to_cel, to_cel_root};
use super::{AS_OPTIONAL, CompiledRule};

fn as_optional(_ftx: &FunctionContext, value: CelValue) -> Result<CelValue, ExecutionError> {
    if <&OptionalValue>::try_from(&value).is_ok() {
        return Ok(value);
    }
    Ok(CelValue::Opaque(Arc::new(OptionalValue::of(value))))
}

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
        Some(o) => json_eq(o, v),
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
