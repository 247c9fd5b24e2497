//! Field paths and value rendering the way the Go API server prints them.
//!
//! Two path flavours exist in the real server and both are reproduced:
//! - the OpenAPI (kube-openapi) validator joins map keys with a dot
//!   (`spec.labels.foo`) and indexes arrays as `spec.items[0]`;
//! - CEL validation and list-type checks use `field.Path`, which renders map
//!   keys as `spec.labels[foo]`.
//!
//! An empty path is the nil `field.Path`, which Go renders as `<nil>`.

use serde_json::Value;

/// The rendering of a nil `field.Path` (an error on the object root).
pub(crate) const NIL_PATH: &str = "<nil>";

/// Appends a property name: `a` + `b` = `a.b`.
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// Appends an array index: `a` + 3 = `a[3]`.
pub(crate) fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// Appends a map key the `field.Path.Key` way: `a` + `k` = `a[k]`.
pub(crate) fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

/// The path as a `field.Error.Field`: `<nil>` for the root.
pub(crate) fn or_nil(path: &str) -> String {
    if path.is_empty() {
        NIL_PATH.to_string()
    } else {
        path.to_string()
    }
}

/// Quotes a string like Go's `strconv.Quote` (`%q`).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Formats a float like Go's `%v` (`strconv.FormatFloat(f, 'g', -1, 64)`):
/// shortest digits, exponent form when the exponent is < -4 or >= 6
/// (`1e+06`, `2.5e-05`), plain otherwise (`123456`, `0.5`).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{f:e}"); // e.g. "-1.234567e6", shortest round-trip digits
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// Renders a number the way Go prints the decoded JSON value (`int64` or `float64`).
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Renders a bad value like `field.Error` does: strings quoted, numbers and
/// booleans bare, `null` as `"null"`. Objects and arrays are rendered as JSON
/// (Go prints them with `%#v`, e.g. `map[string]interface {}{...}`, which is
/// not worth imitating).
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => go_quote("null"),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

/// The JSON type name of a value, as kube-openapi's type validator names it.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_matches_fmt_v() {
        assert_eq!(go_float(10.0), "10");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(2147483647.0), "2.147483647e+09");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-1.5), "-1.5");
    }

    #[test]
    fn quoting_and_paths() {
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(go_value(&Value::Null), "\"null\"");
        assert_eq!(child("", "spec"), "spec");
        assert_eq!(index(&child("spec", "items"), 2), "spec.items[2]");
        assert_eq!(key("spec.labels", "a.b"), "spec.labels[a.b]");
        assert_eq!(or_nil(""), "<nil>");
    }
}
