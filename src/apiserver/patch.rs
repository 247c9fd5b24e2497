//! The four patch types. JSON patch (RFC 6902) and JSON merge patch (RFC 7386) come from
//! the `json-patch` crate; strategic merge patch and server-side apply are simplified
//! versions of the real algorithms, enough for kubectl and kube-rs clients (see the
//! notes on each).

use serde_json::{Map, Value, json};

use super::managed;
use super::status::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// What the server lists as acceptable when it refuses a patch type.
pub(crate) fn accepted_types(strategic: bool) -> &'static str {
    if strategic {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    }
}

pub(crate) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: json: {e}")))
}

/// JSON or YAML (apply bodies and kubectl's YAML uploads).
pub(crate) fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    serde_saphyr::from_slice::<Value>(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

pub(crate) fn json_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    json_patch::patch(doc, &patch).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!("the server rejected our request due to an error in our request: {e}"),
        )
    })
}

pub(crate) fn merge_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let patch = parse_json(body)?;
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: a merge patch must be a JSON object",
        ));
    }
    json_patch::merge(doc, &patch);
    Ok(())
}

/// Lists that strategic merge patch merges instead of replacing, by path, with their
/// merge key (`None`: a list of scalars merged as a set). Everything else is replaced,
/// as merge patch does; that covers the built-in kinds we serve.
fn merge_key(path: &str) -> Option<Option<&'static str>> {
    match path {
        "metadata.finalizers" | "spec.finalizers" => Some(None),
        "metadata.ownerReferences" => Some(Some("uid")),
        "status.conditions" => Some(Some("type")),
        _ => None,
    }
}

/// A strategic merge patch: a merge patch that understands the `$patch`, `$retainKeys`,
/// `$setElementOrder/…` and `$deleteFromPrimitiveList/…` directives kubectl sends, and
/// merges the few keyed lists above.
pub(crate) fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding patch: not a JSON object",
        ));
    }
    smp(doc, patch, "");
    Ok(())
}

fn smp(doc: &mut Value, patch: &Value, path: &str) {
    let Value::Object(p) = patch else {
        *doc = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut clean = p.clone();
            clean.remove("$patch");
            *doc = Value::Object(clean);
            return;
        }
        Some("delete") => {
            *doc = Value::Null;
            return;
        }
        _ => {}
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Value::Object(d) = doc else { return };
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        d.retain(|k, _| keep.contains(&k.as_str()) || p.contains_key(k));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (d.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        let child = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if v.is_null() {
            d.remove(k);
            continue;
        }
        match (merge_key(&child), v, d.get_mut(k)) {
            (Some(None), Value::Array(add), Some(Value::Array(cur))) => {
                for x in add {
                    if !cur.contains(x) {
                        cur.push(x.clone());
                    }
                }
            }
            (Some(Some(key)), Value::Array(add), Some(Value::Array(cur))) => {
                for item in add {
                    let id = item.get(key).cloned();
                    let pos = cur
                        .iter()
                        .position(|c| id.is_some() && c.get(key) == id.as_ref());
                    let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                    match (pos, delete) {
                        (Some(i), true) => {
                            cur.remove(i);
                        }
                        (Some(i), false) => smp(&mut cur[i], item, &child),
                        (None, true) => {}
                        (None, false) => cur.push(item.clone()),
                    }
                }
            }
            (_, Value::Object(_), Some(existing)) if existing.is_object() => {
                smp(existing, v, &child);
                if existing.is_null() {
                    d.remove(k);
                }
            }
            _ => {
                let mut fresh = Value::Null;
                smp(&mut fresh, v, &child);
                if v.is_object() && fresh.is_null() {
                    d.remove(k);
                } else {
                    d.insert(k.clone(), strip_directives(fresh));
                }
            }
        }
    }
}

fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k, strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        match cur.get_mut(seg) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// Deep merge for apply: maps merge key by key, anything else is replaced.
fn deep_merge(doc: &mut Value, applied: &Value) {
    match (doc, applied) {
        (Value::Object(d), Value::Object(a)) => {
            for (k, v) in a {
                match d.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v)
                    }
                    _ => {
                        d.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (doc, applied) => *doc = applied.clone(),
    }
}

fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg.as_str()))
}

/// A field another manager owns with a different value: (the manager as a conflict
/// names it, `.spec.x`).
pub(crate) type ApplyConflict = (String, String);

/// Server-side apply, simplified: the applied configuration is merged into the live
/// object (maps by key, lists atomically); fields this manager applied last time and
/// no longer applies are removed unless another manager (apply or update) owns them;
/// the manager's `managedFields` entry is recorded. Applying a value to a field that
/// another manager owns with a different live value is a conflict, unless `force`
/// (which takes the field over).
pub(crate) fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    force: bool,
) -> Result<Value, Vec<ApplyConflict>> {
    let mut obj = live.cloned().unwrap_or_else(|| json!({}));
    let mut entries = managed::entries_of(live);
    let ours = |e: &Value| managed::is_entry(e, manager, "Apply", api_version, subresource);
    let new_set = managed::field_set(applied, true);
    let wanted = managed::leaves(&new_set);
    let conflicts = take_or_conflict(&mut entries, &obj, applied, &wanted, &ours, force);
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    if let Some(prev) = entries
        .iter()
        .find(|e| ours(e))
        .and_then(|e| e.get("fieldsV1"))
    {
        for path in managed::leaves(prev) {
            let owned_elsewhere = entries.iter().any(|e| {
                !ours(e)
                    && e.get("fieldsV1")
                        .is_some_and(|s| managed::set_contains(s, &path))
            });
            if !managed::set_contains(&new_set, &path) && !owned_elsewhere {
                remove_path(&mut obj, &path);
            }
        }
    }
    deep_merge(&mut obj, applied);
    entries.retain(|e| !ours(e));
    entries.push(managed::new_entry(
        manager,
        "Apply",
        api_version,
        subresource,
        new_set,
    ));
    managed::store_entries(&mut obj, entries);
    Ok(obj)
}

/// For each field the configuration sets that another manager owns with a different
/// live value: a conflict, or with `force`, the field leaves that manager.
fn take_or_conflict(
    entries: &mut [Value],
    obj: &Value,
    applied: &Value,
    wanted: &[managed::FieldPath],
    ours: &dyn Fn(&Value) -> bool,
    force: bool,
) -> Vec<ApplyConflict> {
    let mut conflicts = Vec::new();
    for e in entries.iter_mut().filter(|e| !ours(e)) {
        let other = managed::printed_manager(e);
        for path in wanted {
            let owned = e
                .get("fieldsV1")
                .is_some_and(|s| managed::set_contains(s, path));
            let live_value = value_at(obj, path);
            if !owned || live_value.is_none() || live_value == value_at(applied, path) {
                continue;
            }
            if force {
                if let Some(set) = e.get_mut("fieldsV1") {
                    managed::set_remove(set, path);
                }
            } else {
                conflicts.push((other.clone(), format!(".{}", path.join("."))));
            }
        }
    }
    conflicts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merges_finalizers_and_honours_directives() {
        let mut doc = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}}, "spec": {"a": 1, "b": 2}});
        let patch = json!({
            "metadata": {"finalizers": ["b"], "labels": {"y": null}, "$setElementOrder/finalizers": ["a", "b"]},
            "spec": {"$retainKeys": ["a"], "a": 3}
        });
        strategic_merge(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}}, "spec": {"a": 3}})
        );
        let del = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        strategic_merge(&mut doc, &del).unwrap();
        assert_eq!(doc["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn apply_removes_fields_a_manager_stopped_applying() {
        let base = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"a": 1, "b": 2}});
        let first = apply(None, &base, "m", "v1", None, false).unwrap();
        assert_eq!(first["spec"], json!({"a": 1, "b": 2}));
        let second = apply(
            Some(&first),
            &json!({"spec": {"a": 5}}),
            "m",
            "v1",
            None,
            false,
        )
        .unwrap();
        assert_eq!(second["spec"], json!({"a": 5}));
        let other = apply(
            Some(&second),
            &json!({"spec": {"c": 1}}),
            "n",
            "v1",
            None,
            false,
        )
        .unwrap();
        assert_eq!(other["spec"], json!({"a": 5, "c": 1}));
        let clash = apply(
            Some(&other),
            &json!({"spec": {"a": 6}}),
            "n",
            "v1",
            None,
            false,
        );
        assert_eq!(
            clash.unwrap_err(),
            vec![("\"m\"".to_owned(), ".spec.a".to_owned())]
        );
        let same = apply(
            Some(&other),
            &json!({"spec": {"a": 5}}),
            "n",
            "v1",
            None,
            false,
        );
        assert!(same.is_ok(), "equal values are shared, not a conflict");
        let forced = apply(
            Some(&other),
            &json!({"spec": {"a": 6}}),
            "n",
            "v1",
            None,
            true,
        )
        .unwrap();
        assert_eq!(forced["spec"]["a"], 6);
    }
}
