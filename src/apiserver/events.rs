//! Events are stored once, in core/v1 form, and served through both core/v1 and
//! events.k8s.io/v1 with the field mapping of the real server's conversion
//! (`involvedObject` ↔ `regarding`, `message` ↔ `note`, `source` ↔ `deprecatedSource`, ...).

use serde_json::{Map, Value, json};

use super::schema::{FieldError, FieldErrorKind};

/// The longest text an event with an `eventTime` may carry, in bytes (kube-apiserver's
/// `NoteLengthLimit`): `message` in core/v1, `note` in events.k8s.io/v1.
pub(crate) const NOTE_LENGTH_LIMIT: usize = 1024;

/// kube-apiserver's check of an event's text on create and update, through either API:
/// an event with an `eventTime` (every events.k8s.io/v1 event; a core/v1 event written
/// by a new client) carries at most [`NOTE_LENGTH_LIMIT`] bytes. Its error names the
/// core/v1 field, `message`, through both APIs, as the real server validates the one
/// internal form. `stored` is the core/v1 form.
pub(crate) fn validate(stored: &Value) -> Vec<FieldError> {
    let has_time = stored.get("eventTime").is_some_and(|t| !t.is_null());
    let message = stored.get("message").and_then(Value::as_str).unwrap_or("");
    if !has_time || message.len() <= NOTE_LENGTH_LIMIT {
        return Vec::new();
    }
    vec![FieldError {
        field: "message".into(),
        kind: FieldErrorKind::Invalid,
        bad_value: Some("\"\"".into()),
        detail: format!("can have at most {NOTE_LENGTH_LIMIT} characters"),
    }]
}

/// (core/v1 field, events.k8s.io/v1 field) for every field that only changes name.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

const SAME: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "action",
    "related",
    "reportingInstance",
    "eventTime",
    "series",
];

fn convert(from: &Value, api_version: &str, to_v1: bool) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    let Some(src) = from.as_object() else {
        return Value::Object(out);
    };
    for key in SAME {
        if let Some(v) = src.get(*key) {
            out.insert((*key).into(), v.clone());
        }
    }
    for (core, v1) in RENAMES {
        let (a, b) = if to_v1 { (core, v1) } else { (v1, core) };
        if let Some(v) = src.get(*a) {
            out.insert((*b).into(), v.clone());
        }
    }
    Value::Object(out)
}

/// Stored (core/v1) → events.k8s.io/v1.
pub(crate) fn core_to_v1(core: &Value) -> Value {
    convert(core, "events.k8s.io/v1", true)
}

/// events.k8s.io/v1 → stored (core/v1).
pub(crate) fn v1_to_core(v1: &Value) -> Value {
    convert(v1, "v1", false)
}

/// The core/v1 view: events written through events.k8s.io only carry `eventTime`,
/// `series` and `reportingController`; old clients (and `kubectl describe`'s age and
/// "From" columns) read `firstTimestamp`/`lastTimestamp`/`count`/`source.component`, so
/// fill those in when absent. Reads only: nothing derived is stored.
pub(crate) fn core_view(stored: &Value) -> Value {
    let mut v = stored.clone();
    let Some(m) = v.as_object_mut() else {
        return v;
    };
    let event_time = m.get("eventTime").and_then(Value::as_str).map(|t| {
        t.split('.')
            .next()
            .unwrap_or(t)
            .trim_end_matches('Z')
            .to_owned()
            + "Z"
    });
    let series_last = m
        .get("series")
        .and_then(|s| s.get("lastObservedTime"))
        .and_then(Value::as_str)
        .map(|t| {
            t.split('.')
                .next()
                .unwrap_or(t)
                .trim_end_matches('Z')
                .to_owned()
                + "Z"
        });
    let series_count = m
        .get("series")
        .and_then(|s| s.get("count"))
        .and_then(Value::as_i64);
    if let Some(et) = &event_time {
        if m.get("firstTimestamp").is_none_or(Value::is_null) {
            m.insert("firstTimestamp".into(), json!(et));
        }
        if m.get("lastTimestamp").is_none_or(Value::is_null) {
            m.insert(
                "lastTimestamp".into(),
                json!(series_last.clone().unwrap_or_else(|| et.clone())),
            );
        }
        if m.get("count").is_none_or(Value::is_null) {
            m.insert("count".into(), json!(series_count.unwrap_or(1)));
        }
    }
    let component = m
        .get("source")
        .and_then(|s| s.get("component"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if component.is_empty()
        && let Some(rc) = m
            .get("reportingComponent")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    {
        let source = m.entry("source").or_insert_with(|| json!({}));
        if let Some(s) = source.as_object_mut() {
            s.insert("component".into(), json!(rc));
        }
    }
    v
}

/// A field selector term on the stored form: `involvedObject.name`, `regarding.name`
/// (events.k8s.io spelling), `reason`, `type`, `source`, `reportingComponent`, ...
/// `None` for an unsupported field.
pub(crate) fn field(stored: &Value, field: &str) -> Option<String> {
    let s = |v: Option<&Value>| -> String {
        match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let involved = field
        .strip_prefix("involvedObject.")
        .or_else(|| field.strip_prefix("regarding."));
    if let Some(sub) = involved {
        return match sub {
            "kind" | "namespace" | "name" | "uid" | "apiVersion" | "resourceVersion"
            | "fieldPath" => Some(s(stored.get("involvedObject").and_then(|o| o.get(sub)))),
            _ => None,
        };
    }
    match field {
        "metadata.name" | "metadata.namespace" => {
            Some(s(stored.get("metadata").and_then(|m| m.get(&field[9..]))))
        }
        "reason" | "type" | "reportingComponent" => Some(s(stored.get(field))),
        "reportingController" => Some(s(stored.get("reportingComponent"))),
        "source" | "deprecatedSource" => {
            Some(s(stored.get("source").and_then(|x| x.get("component"))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_event_over_the_note_limit_is_invalid() {
        let event = |len: usize, time: bool| {
            let mut e = json!({"message": "n".repeat(len)});
            if time {
                e["eventTime"] = json!("2024-01-01T00:00:00.000000Z");
            }
            e
        };
        assert!(validate(&event(NOTE_LENGTH_LIMIT, true)).is_empty());
        assert!(
            validate(&event(NOTE_LENGTH_LIMIT + 1, false)).is_empty(),
            "legacy"
        );
        let errors = validate(&event(NOTE_LENGTH_LIMIT + 1, true));
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["message: Invalid value: \"\": can have at most 1024 characters"]
        );
        // Bytes, not characters: 513 two-byte characters are 1026 bytes.
        let wide = json!({"message": "é".repeat(513), "eventTime": "2024-01-01T00:00:00Z"});
        assert_eq!(validate(&wide).len(), 1);
    }

    #[test]
    fn both_ways_keep_every_field() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Widget", "name": "w"},
            "note": "hello", "reason": "Made", "type": "Normal", "action": "Make",
            "reportingController": "ctl", "reportingInstance": "ctl-1",
            "eventTime": "2024-01-01T00:00:00.123456Z",
            "series": {"count": 3, "lastObservedTime": "2024-01-01T00:01:00.000000Z"}
        });
        let core = v1_to_core(&v1);
        assert_eq!(core["involvedObject"]["name"], "w");
        assert_eq!(core["message"], "hello");
        assert_eq!(core_to_v1(&core), v1);
        let view = core_view(&core);
        assert_eq!(view["firstTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(view["lastTimestamp"], "2024-01-01T00:01:00Z");
        assert_eq!(view["count"], 3);
        assert_eq!(view["source"]["component"], "ctl");
        assert_eq!(field(&core, "involvedObject.name").as_deref(), Some("w"));
        assert_eq!(field(&core, "regarding.kind").as_deref(), Some("Widget"));
        assert_eq!(field(&core, "bogus"), None);
    }
}
