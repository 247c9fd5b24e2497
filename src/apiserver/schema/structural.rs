//! OpenAPI value validation as kube-openapi's `SchemaValidator` does it for
//! apiextensions-apiserver (`ValidateCustomResource`), plus the
//! `x-kubernetes-list-type` invariants (`structurallisttype`).
//!
//! For every node, in kube-openapi's order: type (with `nullable` and
//! `x-kubernetes-int-or-string`), `allOf`/`anyOf`/`oneOf`/`not`, string
//! length/pattern/format, number bounds, array items and sizes, `enum`, and
//! object sizes, `additionalProperties`, `properties`, `required`. Messages
//! and error kinds are those the real server produces, e.g.
//! `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
//!
//! On update, a value deep-equal to its correlated old value is not
//! re-validated (validation ratcheting, on by default since Kubernetes 1.30):
//! objects correlate by property / map key, `list-type: map` items by their
//! keys, other list items not at all.

use serde_json::Value;

use super::cel::find_by_keys;
use super::node::Node;
use super::{FieldError, FieldErrorKind, format, json_eq, path};

fn err(field: &str, kind: FieldErrorKind, bad_value: Option<String>, detail: String) -> FieldError {
    FieldError {
        field: path::or_nil(field),
        kind,
        bad_value,
        detail,
    }
}

fn type_error(at: &str, type_name: &str, found: &str) -> FieldError {
    err(
        at,
        FieldErrorKind::TypeInvalid,
        Some(path::go_quote(found)),
        format!(
            "{at} in body must be of type {type_name}: {}",
            path::go_quote(found)
        ),
    )
}

fn invalid(at: &str, bad: &Value, detail: String) -> FieldError {
    err(
        at,
        FieldErrorKind::Invalid,
        Some(path::go_value(bad)),
        detail,
    )
}

/// Validates `v` against `node`; `old` is the correlated old value on update.
pub(crate) fn validate(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    if old.is_some_and(|o| json_eq(o, v)) {
        return; // ratcheting: unchanged values keep whatever they were
    }
    if v.is_null() {
        if let Some(types) = node.type_names()
            && !node.nullable
        {
            errs.push(type_error(at, &types, "null"));
        }
        check_enum(node, v, at, errs);
        return;
    }
    check_type(node, v, at, errs);
    check_junctors(node, v, old, at, errs);
    match v {
        Value::String(s) => check_string(node, v, s, at, errs),
        Value::Number(n) => check_number(node, v, n, at, errs),
        Value::Array(items) => check_array(node, items, old, at, errs),
        _ => {}
    }
    check_enum(node, v, at, errs);
    if let Value::Object(map) = v {
        check_object(node, map, old, at, errs);
    }
}

fn check_type(node: &Node, v: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let Some(types) = node.type_names() else {
        return;
    };
    let contains = |t: &str| types.split(',').any(|x| x == t);
    let found = path::json_type(v);
    let is_float_int =
        found == "number" && v.as_f64().is_some_and(|f| f.fract() == 0.0) && contains("integer");
    let is_int_float = found == "integer" && contains("number");
    let scalar_or_object = !v.is_string() && !v.is_array();
    if let Some(fmt) = &node.format {
        // kube-openapi's format/type cross-check, quirks included: a value
        // that is not a string is reported against the format name, and
        // strings and arrays skip the type check of formatted non-numbers.
        let data_format = match v {
            Value::Number(n) if n.is_f64() => "float64",
            Value::Number(_) => "int64",
            _ => "",
        };
        if scalar_or_object
            && !(contains(found) || data_format == fmt || is_float_int || is_int_float)
        {
            errs.push(type_error(at, fmt, data_format));
            return;
        }
        if !(contains("number") || contains("integer") || scalar_or_object) {
            return;
        }
    }
    if !(contains(found) || is_float_int || is_int_float) {
        errs.push(type_error(at, &types, found));
    }
}

/// `allOf`/`anyOf`/`oneOf`/`not`. Their summary errors are not
/// `openapierrors.Validation`s, so the real server reports them at the nil
/// path with an empty bad value, e.g.
/// `<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid`.
fn check_junctors(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    let run = |branch: &Node| {
        let mut e = Vec::new();
        validate(branch, v, old, at, &mut e);
        e
    };
    let summary = |detail: String| FieldError {
        field: path::NIL_PATH.into(),
        kind: FieldErrorKind::Invalid,
        bad_value: Some(path::go_quote("")),
        detail,
    };
    if !node.any_of.is_empty() {
        let results: Vec<_> = node.any_of.iter().map(run).collect();
        if !results.iter().any(Vec::is_empty) {
            errs.push(summary(format!(
                "{} must validate at least one schema (anyOf)",
                path::go_quote(at)
            )));
            errs.extend(results.into_iter().next().unwrap_or_default());
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<_> = node.one_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            let extra = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errs.push(summary(format!(
                "{} must validate one and only one schema (oneOf). {extra}",
                path::go_quote(at)
            )));
            if valid == 0 {
                errs.extend(results.into_iter().next().unwrap_or_default());
            }
        }
    }
    if !node.all_of.is_empty() {
        let results: Vec<_> = node.all_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        let n = results.len();
        errs.extend(results.into_iter().flatten());
        if valid != n {
            let extra = if valid == 0 { ". None validated" } else { "" };
            errs.push(summary(format!(
                "{} must validate all the schemas (allOf){extra}",
                path::go_quote(at)
            )));
        }
    }
    if let Some(not) = &node.not
        && run(not).is_empty()
    {
        errs.push(summary(format!(
            "{} must not validate the schema (not)",
            path::go_quote(at)
        )));
    }
}

fn check_string(node: &Node, v: &Value, s: &str, at: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as u64;
    if let Some(max) = node.max_length
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(err(
            at,
            FieldErrorKind::TooLong,
            None,
            format!("may not be more than {max} {unit}"),
        ));
    }
    if let Some(min) = node.min_length
        && len < min
    {
        errs.push(invalid(
            at,
            v,
            format!("{at} in body should be at least {min} chars long"),
        ));
    }
    if let Some((src, re)) = &node.pattern
        && !re.is_match(s)
    {
        errs.push(invalid(at, v, format!("{at} in body should match '{src}'")));
    }
    if let Some(fmt) = &node.format
        && !format::validates(fmt, s)
    {
        errs.push(err(
            at,
            FieldErrorKind::TypeInvalid,
            Some(path::go_value(v)),
            format!("{at} in body must be of type {fmt}: {}", path::go_quote(s)),
        ));
    }
}

fn check_number(
    node: &Node,
    v: &Value,
    n: &serde_json::Number,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    // Integers are compared (and bounds printed) as int64, floats as float64,
    // like kube-openapi's *NativeType validators.
    let int = n.as_i64();
    let f = n.as_f64().unwrap_or(f64::NAN);
    let bound = |b: f64| match int {
        Some(_) => (b as i64).to_string(),
        None => path::go_float(b),
    };
    if let Some(m) = node.multiple_of
        && m != 0.0
    {
        let bad = match int {
            Some(i) if m.fract() == 0.0 => i % (m as i64) != 0,
            _ => (f / m).fract() != 0.0,
        };
        if bad {
            errs.push(invalid(
                at,
                v,
                format!("{at} in body should be a multiple of {}", bound(m)),
            ));
        }
    }
    if let Some(max) = node.maximum {
        let over = match int {
            Some(i) => i > max as i64 || (node.exclusive_maximum && i == max as i64),
            None => f > max || (node.exclusive_maximum && f == max),
        };
        if over {
            let rel = if node.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(invalid(
                at,
                v,
                format!("{at} in body should be {rel} {}", bound(max)),
            ));
        }
    }
    if let Some(min) = node.minimum {
        let under = match int {
            Some(i) => i < min as i64 || (node.exclusive_minimum && i == min as i64),
            None => f < min || (node.exclusive_minimum && f == min),
        };
        if under {
            let rel = if node.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(invalid(
                at,
                v,
                format!("{at} in body should be {rel} {}", bound(min)),
            ));
        }
    }
}

fn check_array(
    node: &Node,
    items: &[Value],
    old: Option<&Value>,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(item_node) = &node.items {
        let old_items = old.and_then(Value::as_array).filter(|_| node.is_list_map());
        for (i, item) in items.iter().enumerate() {
            let old_item = old_items.and_then(|oa| find_by_keys(oa, item, &node.list_map_keys));
            validate(item_node, item, old_item, &path::index(at, i), errs);
        }
    }
    let size = items.len() as u64;
    if let Some(min) = node.min_items
        && size < min
    {
        errs.push(invalid(
            at,
            &Value::from(size),
            format!("{at} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = node.max_items
        && size > max
    {
        let unit = if max == 1 { "item" } else { "items" };
        errs.push(err(
            at,
            FieldErrorKind::TooMany,
            Some(size.to_string()),
            format!("must have at most {max} {unit}"),
        ));
    }
    if node.unique_items
        && items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_eq(a, b)))
    {
        errs.push(invalid(
            at,
            &Value::String(String::new()),
            format!("{at} in body shouldn't contain duplicates"),
        ));
    }
}

fn check_enum(node: &Node, v: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let Some(values) = &node.enum_values else {
        return;
    };
    if values.is_empty() || values.iter().any(|e| json_eq(e, v)) {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|e| match e {
            Value::String(s) => path::go_quote(s),
            other => path::go_quote(&other.to_string()),
        })
        .collect();
    errs.push(err(
        at,
        FieldErrorKind::NotSupported,
        Some(path::go_value(v)),
        format!("supported values: {}", supported.join(", ")),
    ));
}

fn check_object(
    node: &Node,
    map: &serde_json::Map<String, Value>,
    old: Option<&Value>,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    let n = map.len() as u64;
    if let Some(min) = node.min_properties
        && n < min
    {
        errs.push(invalid(
            at,
            &Value::from(n),
            format!("{at} in body should have at least {min} properties"),
        ));
        return;
    }
    if let Some(max) = node.max_properties
        && n > max
    {
        let unit = if max == 1 { "item" } else { "items" };
        errs.push(err(
            at,
            FieldErrorKind::TooMany,
            Some(n.to_string()),
            format!("must have at most {max} {unit}"),
        ));
        return;
    }
    let old_of = |k: &str| old.and_then(|o| o.get(k));
    if node.additional_false {
        for k in map.keys().filter(|k| !node.properties.contains_key(*k)) {
            errs.push(invalid(
                at,
                &Value::String(k.clone()),
                format!("{at}.{k} in body is a forbidden property"),
            ));
        }
    } else if let Some(add) = &node.additional {
        for (k, cv) in map
            .iter()
            .filter(|(k, _)| !node.properties.contains_key(*k))
        {
            validate(add, cv, old_of(k), &path::child(at, k), errs);
        }
    }
    for (k, prop) in &node.properties {
        if let Some(cv) = map.get(k) {
            validate(prop, cv, old_of(k), &path::child(at, k), errs);
        }
    }
    for k in &node.required {
        if !map.contains_key(k) {
            errs.push(err(
                &path::child(at, k),
                FieldErrorKind::Required,
                None,
                String::new(),
            ));
        }
    }
}

/// `x-kubernetes-list-type: set` items must be unique and `map` items unique
/// by their `x-kubernetes-list-map-keys` (`field.Duplicate` at `list[i]`).
pub(crate) fn validate_list_types(node: &Node, v: &Value, at: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => {
            match node.list_type.as_deref() {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].iter().any(|prev| json_eq(prev, item)) {
                            let bad = Some(path::go_value(item));
                            errs.push(err(
                                &path::index(at, i),
                                FieldErrorKind::Duplicate,
                                bad,
                                String::new(),
                            ));
                        }
                    }
                }
                Some("map") => {
                    let key_of = |item: &Value| {
                        let mut key = serde_json::Map::new();
                        for k in &node.list_map_keys {
                            if let Some(kv) = item.get(k).or_else(|| {
                                node.items.as_ref()?.properties.get(k)?.default.as_ref()
                            }) {
                                key.insert(k.clone(), kv.clone());
                            }
                        }
                        Value::Object(key)
                    };
                    let keys: Vec<Value> = items.iter().map(key_of).collect();
                    for (i, key) in keys.iter().enumerate() {
                        if items[i].is_object() && keys[..i].iter().any(|prev| prev == key) {
                            let bad = Some(key.to_string());
                            errs.push(err(
                                &path::index(at, i),
                                FieldErrorKind::Duplicate,
                                bad,
                                String::new(),
                            ));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_node) = &node.items {
                for (i, item) in items.iter().enumerate() {
                    validate_list_types(item_node, item, &path::index(at, i), errs);
                }
            }
        }
        Value::Object(map) => {
            for (k, cv) in map {
                if at.is_empty() && k == "metadata" {
                    continue;
                }
                if let Some(prop) = node.properties.get(k) {
                    validate_list_types(prop, cv, &path::child(at, k), errs);
                } else if let Some(add) = &node.additional {
                    validate_list_types(add, cv, &path::key(at, k), errs);
                }
            }
        }
        _ => {}
    }
}

/// Embedded resources (`x-kubernetes-embedded-resource`, below the root) need a
/// non-empty string `apiVersion` of the form `group/version` or `version`,
/// and a non-empty string `kind` (apiextensions' `schemaobjectmeta.Validate`).
pub(crate) fn validate_embedded(
    node: &Node,
    v: &Value,
    at: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    match v {
        Value::Object(map) => {
            if node.embedded && !root {
                for k in ["apiVersion", "kind"] {
                    match map.get(k) {
                        None => errs.push(err(
                            &path::child(at, k),
                            FieldErrorKind::Required,
                            None,
                            "must not be empty".into(),
                        )),
                        Some(Value::String(s)) if s.is_empty() => errs.push(invalid(
                            &path::child(at, k),
                            &map[k],
                            "must not be empty".into(),
                        )),
                        Some(Value::String(s))
                            if k == "apiVersion" && s.matches('/').count() > 1 =>
                        {
                            errs.push(invalid(
                                &path::child(at, k),
                                &map[k],
                                format!("unexpected GroupVersion string: {s}"),
                            ))
                        }
                        Some(Value::String(_)) => {}
                        Some(other) => errs.push(invalid(
                            &path::child(at, k),
                            other,
                            "must be a string".into(),
                        )),
                    }
                }
            }
            for (k, cv) in map {
                if root && k == "metadata" {
                    continue;
                }
                if let Some(prop) = node.properties.get(k) {
                    validate_embedded(prop, cv, &path::child(at, k), false, errs);
                } else if let Some(add) = &node.additional {
                    validate_embedded(add, cv, &path::key(at, k), false, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = &node.items {
                for (i, item) in items.iter().enumerate() {
                    validate_embedded(item_node, item, &path::index(at, i), false, errs);
                }
            }
        }
        _ => {}
    }
}
