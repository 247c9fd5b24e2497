//! meta.k8s.io/v1 `Table` responses, which `kubectl get` asks for: a Name column, then
//! the CRD's additionalPrinterColumns evaluated by (simple) JSONPath, or a built-in's
//! own columns. Like the real server, `date` columns are rendered as an age ("5m").

use serde_json::{Value, json};

use super::meta::{age, name_of};
use super::registry::{Flavor, PrinterColumn, ResourceDef};

/// `includeObject` of the table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: &str) -> Self {
        match s {
            "None" => Self::None,
            "Object" => Self::Object,
            _ => Self::Metadata,
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(i64),
    All,
    /// `[?(@.a.b=="v")]` (or `!=`).
    Filter(Vec<String>, String, bool),
}

fn parse_path(path: &str) -> Vec<Step> {
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let (key, after) = field_name(r);
            if !key.is_empty() {
                steps.push(Step::Key(key));
            }
            rest = after;
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse::<i64>() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                let (lhs, rhs, negate) = match f.split_once("!=") {
                    Some((l, r)) => (l, r, true),
                    None => match f.split_once("==") {
                        Some((l, r)) => (l, r, false),
                        None => continue,
                    },
                };
                let keys = field_names(lhs.trim().trim_start_matches('@'));
                let want = rhs
                    .trim()
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_owned();
                steps.push(Step::Filter(keys, want, negate));
            } else {
                steps.push(Step::Key(
                    inner.trim_matches(|c| c == '"' || c == '\'').to_owned(),
                ));
            }
        } else {
            let (key, after) = field_name(rest);
            steps.push(Step::Key(key));
            rest = after;
        }
    }
    steps
}

/// The field name at the start of `path`, up to the first `.` or `[` not escaped with a
/// backslash, unescaped, and what follows it. Kubernetes' JSONPath reads
/// `.metadata.annotations.example\.com/x` as one key, `example.com/x`.
fn field_name(path: &str) -> (String, &str) {
    let mut key = String::new();
    let mut chars = path.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => key.push(escaped),
                None => key.push(c),
            },
            '.' | '[' => return (key, &path[i..]),
            _ => key.push(c),
        }
    }
    (key, "")
}

/// The keys of a dotted path such as a filter's `@.a.b`, escaped dots kept in their key.
fn field_names(mut path: &str) -> Vec<String> {
    let mut keys = Vec::new();
    while !path.is_empty() {
        let (key, after) = field_name(path.strip_prefix('.').unwrap_or(path));
        if !key.is_empty() {
            keys.push(key);
        }
        if after.len() == path.len() {
            break;
        }
        path = after;
    }
    keys
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every value `path` selects in `obj`.
pub(crate) fn eval<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut cur = vec![obj];
    for step in parse_path(path) {
        let mut next = Vec::new();
        for v in cur {
            match &step {
                Step::Key(k) => next.extend(v.get(k.as_str())),
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        next.extend(usize::try_from(idx).ok().and_then(|i| a.get(i)));
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(keys, want, negate) => {
                    if let Some(a) = v.as_array() {
                        next.extend(a.iter().filter(|item| {
                            let got = keys.iter().try_fold(*item, |x, k| x.get(k.as_str()));
                            got.map(scalar_text).is_some_and(|g| &g == want) != *negate
                        }));
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// Does `def` print like the real server's default table convertor (`Name`, then
/// `Created At` as the RFC 3339 time itself)? CustomResourceDefinitions do; custom
/// resources and the other built-ins print ages.
fn prints_timestamps(def: &ResourceDef) -> bool {
    matches!(def.flavor, Flavor::Crd)
}

/// A cell as the real server's CRD table convertor makes it (`cellForJSONValue`), or,
/// with `timestamps`, as the default table convertor does (a date as is).
fn cell(column: &PrinterColumn, obj: &Value, timestamps: bool) -> Value {
    let Some(v) = eval(obj, &column.json_path).into_iter().next() else {
        return Value::Null;
    };
    match (column.type_.as_str(), v) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .map(|i| json!(i))
            .or_else(|| n.as_f64().map(|f| json!(f as i64)))
            .unwrap_or(Value::Null),
        ("number", Value::Number(n)) => json!(n),
        ("boolean", Value::Bool(b)) => json!(b),
        ("string", Value::String(s)) => json!(s),
        ("date", Value::String(s)) if timestamps => json!(s),
        ("date", Value::String(s)) => json!(age(s)),
        // The real server drops values of the wrong type; kubectl shows <none>.
        (_, Value::String(_) | Value::Number(_) | Value::Bool(_)) if column.type_.is_empty() => {
            json!(scalar_text(v))
        }
        (_, other) if column.type_ == "string" && !other.is_null() => json!(other.to_string()),
        _ => Value::Null,
    }
}

fn column_def(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

fn is_event(def: &ResourceDef) -> bool {
    matches!(def.flavor, Flavor::CoreEvent | Flavor::EventsV1)
}

fn columns(def: &ResourceDef) -> Vec<Value> {
    if is_event(def) {
        return vec![
            column_def(
                "Last Seen",
                "string",
                "",
                "Time since the event was last observed",
                0,
            ),
            column_def("Type", "string", "", "Type of this event", 0),
            column_def("Reason", "string", "", "Why this event was generated", 0),
            column_def("Object", "string", "", "The object this event is about", 0),
            column_def("Message", "string", "", "A human-readable description", 0),
        ];
    }
    let mut cols = vec![column_def("Name", "string", "name", NAME_DESCRIPTION, 0)];
    cols.extend(def.columns.iter().map(|c| {
        // `date` cells are rendered as ages server-side, so they are strings on the
        // wire; the default convertor's `date` cells are timestamps kubectl shows as is.
        let type_ = if c.type_ == "date" && !prints_timestamps(def) {
            "string"
        } else {
            c.type_.as_str()
        };
        column_def(&c.name, type_, &c.format, &c.description, c.priority)
    }));
    cols
}

fn event_cells(obj: &Value) -> Vec<Value> {
    let s = |path: &str| {
        eval(obj, path)
            .into_iter()
            .next()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let last = [
        ".lastTimestamp",
        ".deprecatedLastTimestamp",
        ".series.lastObservedTime",
        ".eventTime",
        ".metadata.creationTimestamp",
    ]
    .iter()
    .map(|p| s(p))
    .find(|v| !v.is_empty())
    .map(|t| age(&t))
    .unwrap_or_else(|| "<unknown>".into());
    let target = obj.get("involvedObject").or_else(|| obj.get("regarding"));
    let object = target
        .map(|t| {
            format!(
                "{}/{}",
                t.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_lowercase(),
                t.get("name").and_then(Value::as_str).unwrap_or("")
            )
        })
        .unwrap_or_default();
    let message = obj
        .get("message")
        .or_else(|| obj.get("note"))
        .and_then(Value::as_str)
        .unwrap_or("");
    vec![
        json!(last),
        json!(s(".type")),
        json!(s(".reason")),
        json!(object),
        json!(message),
    ]
}

fn row(def: &ResourceDef, obj: &Value, include: IncludeObject) -> Value {
    let cells: Vec<Value> = if is_event(def) {
        event_cells(obj)
    } else {
        std::iter::once(json!(name_of(obj)))
            .chain(
                def.columns
                    .iter()
                    .map(|c| cell(c, obj, prints_timestamps(def))),
            )
            .collect()
    };
    let mut r = json!({"cells": cells});
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(partial_metadata(obj)),
        IncludeObject::Object => Some(obj.clone()),
    };
    if let (Some(o), Value::Object(m)) = (object, &mut r) {
        m.insert("object".into(), o);
    }
    r
}

/// The `PartialObjectMetadata` of an object.
pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// A Table of `objects` (in view form).
pub(crate) fn table<'a>(
    def: &ResourceDef,
    objects: impl IntoIterator<Item = &'a Value>,
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let rows: Vec<Value> = objects.into_iter().map(|o| row(def, o, include)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(def),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let o = json!({"spec": {"a": [1, 2, 3], "m": {"x.y": "z"}}, "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval(&o, ".spec.a[1]"), [&json!(2)]);
        assert_eq!(eval(&o, ".spec.a[-1]"), [&json!(3)]);
        assert_eq!(eval(&o, ".spec.a[*]").len(), 3);
        assert_eq!(eval(&o, ".spec.m['x.y']"), [&json!("z")]);
        assert_eq!(
            eval(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            [&json!("True")]
        );
        assert!(eval(&o, ".nope.x").is_empty());
        // An escaped dot is part of the key, as in an annotation's name.
        assert_eq!(eval(&o, ".spec.m.x\\.y"), [&json!("z")]);
        assert!(eval(&o, ".spec.m.x.y").is_empty());
        let filtered = json!({"l": [{"a.b": "1", "v": "one"}, {"a.b": "2", "v": "two"}]});
        assert_eq!(eval(&filtered, ".l[?(@.a\\.b==\"2\")].v"), [&json!("two")]);
    }
}
