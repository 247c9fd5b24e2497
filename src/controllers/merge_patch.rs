//! JSON merge patches (RFC 7386) computed from two versions of a document: the patch
//! holds only what changed, so a write never mentions (and so never erases) a field the
//! writer did not change, whoever put it there.
//!
//! RFC 7386 cannot express a `null` value: `null` means "remove the key". So a key that
//! is `null` on either side counts as absent. Arrays and scalars are replaced whole;
//! objects are compared key by key.

use serde_json::{Map, Value};

/// The merge patch that turns `before` into `after`, or `None` when applying it would
/// change nothing.
pub fn diff(before: &Value, after: &Value) -> Option<Value> {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => diff_objects(before, after),
        _ if before == after => None,
        _ => Some(without_nulls(after)),
    }
}

fn diff_objects(before: &Map<String, Value>, after: &Map<String, Value>) -> Option<Value> {
    let present = |v: &&Value| !v.is_null();
    let mut patch = Map::new();
    for (key, _) in before.iter().filter(|(_, v)| present(v)) {
        if after.get(key).filter(present).is_none() {
            patch.insert(key.clone(), Value::Null);
        }
    }
    for (key, new) in after.iter().filter(|(_, v)| present(v)) {
        let change = match before.get(key).filter(present) {
            None => Some(without_nulls(new)),
            Some(old) => diff(old, new),
        };
        if let Some(change) = change {
            patch.insert(key.clone(), change);
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// `value` as a merge patch sets it where nothing was: an object's `null` members would
/// be read as removals (of nothing), so they go; arrays are values and stay as they are.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386's MergePatch, to check that each diff turns `before` into `after`.
    fn apply(target: &Value, patch: &Value) -> Value {
        let Value::Object(patch) = patch else {
            return patch.clone();
        };
        let mut out = match target {
            Value::Object(t) => t.clone(),
            _ => Map::new(),
        };
        for (key, value) in patch {
            if value.is_null() {
                out.remove(key);
            } else {
                let merged = apply(out.get(key).unwrap_or(&Value::Null), value);
                out.insert(key.clone(), merged);
            }
        }
        Value::Object(out)
    }

    /// The diff, and a check that it applies back to `after` (nulls counted as absent).
    fn check(before: Value, after: Value) -> Option<Value> {
        let patch = diff(&before, &after);
        let applied = match &patch {
            Some(p) => apply(&before, p),
            None => before.clone(),
        };
        assert_eq!(without_nulls(&applied), without_nulls(&after), "{patch:?}");
        patch
    }

    #[test]
    fn equal_documents_need_no_patch() {
        let doc = json!({"a": 1, "b": {"c": [1, 2]}, "d": null});
        assert_eq!(check(doc.clone(), doc), None);
        assert_eq!(check(json!({"a": null}), json!({})), None);
        assert_eq!(check(json!({}), json!({"a": null})), None);
    }

    #[test]
    fn only_changed_keys_are_sent() {
        let before =
            json!({"metadata": {"name": "s1", "labels": {"x": "1"}}, "spec": {"a": 1, "b": 2}});
        let after =
            json!({"metadata": {"name": "s1", "labels": {"x": "1"}}, "spec": {"a": 1, "b": 3}});
        assert_eq!(check(before, after), Some(json!({"spec": {"b": 3}})));
    }

    #[test]
    fn removed_keys_become_null() {
        let before = json!({"metadata": {"annotations": {"keep": "y", "gone": "y"}}, "spec": {"ref": {"name": "s1"}}});
        let after = json!({"metadata": {"annotations": {"keep": "y"}}, "spec": {"ref": null}});
        assert_eq!(
            check(before, after),
            Some(json!({"metadata": {"annotations": {"gone": null}}, "spec": {"ref": null}}))
        );
    }

    #[test]
    fn arrays_are_replaced_whole() {
        let before =
            json!({"finalizers": ["a"], "conditions": [{"type": "Bound", "status": "False"}]});
        let after =
            json!({"finalizers": ["a", "b"], "conditions": [{"type": "Bound", "status": "True"}]});
        assert_eq!(check(before.clone(), after.clone()), Some(after));
        assert_eq!(
            check(json!({"list": [1, null]}), json!({"list": [null]})),
            Some(json!({"list": [null]})),
            "a null inside an array is a value"
        );
    }

    #[test]
    fn added_objects_lose_their_null_members() {
        let before = json!({"spec": {}});
        let after =
            json!({"spec": {"ref": {"name": "s1", "uid": null, "deep": {"x": null, "y": [null]}}}});
        assert_eq!(
            check(before, after),
            Some(json!({"spec": {"ref": {"name": "s1", "deep": {"y": [null]}}}}))
        );
    }

    #[test]
    fn a_changed_type_is_replaced() {
        assert_eq!(
            check(json!({"a": {"b": 1}}), json!({"a": [1]})),
            Some(json!({"a": [1]}))
        );
        assert_eq!(
            check(json!({"a": "x"}), json!({"a": {"b": null, "c": 1}})),
            Some(json!({"a": {"c": 1}}))
        );
        assert_eq!(check(json!(1), json!("x")), Some(json!("x")));
    }

    #[test]
    fn an_emptied_object_stays_an_object() {
        // A typed struct that keeps `annotations: {}` after removing the last one: the
        // patch removes the key inside, and the stored map is left empty.
        let before = json!({"annotations": {"pre-bound": "yes"}});
        let after = json!({"annotations": {}});
        assert_eq!(
            check(before, after),
            Some(json!({"annotations": {"pre-bound": null}}))
        );
    }
}
