//! JSON -> CEL values, typed by the schema, with apiextensions' field-name escaping.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use super::super::format;
use super::super::node::Node;

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
pub(super) fn to_cel_root(v: &Value, node: &Node) -> CelValue {
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
