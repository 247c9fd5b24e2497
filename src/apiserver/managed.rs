//! `metadata.managedFields`: which manager owns which fields, as structured-merge-diff
//! records it, simplified. A field set (`fieldsV1`) is a tree of `f:<key>` maps whose
//! leaves (empty maps) are the owned fields; lists are owned whole (atomic).
//!
//! Server-side apply records an `Apply` entry (see `patch::apply`). Every other write
//! records an `Update` entry for its manager: the fields it added or changed become its
//! own and stop being anyone else's, fields it removed are no one's. A later apply then
//! leaves those fields alone when its configuration omits them, and conflicts when it
//! sets them to something else, as on a real server.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use super::meta::{meta_mut, now_rfc3339};

/// A field's path: plain keys from the object's root.
pub(crate) type FieldPath = Vec<String>;

/// Metadata fields the server owns; never part of a manager's field set.
pub(crate) const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The longest manager name the real server accepts (`FieldManagerMaxLength`).
const MAX_MANAGER_LEN: usize = 128;

/// The manager of a write without `fieldManager`: the program name of the User-Agent
/// (`kubectl/v1.32.4 (linux/amd64)` → `kubectl`), unprintable characters dropped, at
/// most 128 bytes, as the real server derives it.
pub(crate) fn manager_from_user_agent(user_agent: &str) -> String {
    let program = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in program.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_MANAGER_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// The field set of a configuration or object: every map key, recursively; lists and
/// scalars are leaves. At the top, `apiVersion` and `kind` are left out, and so are the
/// metadata fields the server owns.
pub(crate) fn field_set(v: &Value, top: bool) -> Value {
    let Value::Object(m) = v else {
        return json!({});
    };
    let mut out = Map::new();
    for (k, child) in m {
        if top && (k == "apiVersion" || k == "kind") {
            continue;
        }
        let sub = if top && k == "metadata" {
            let mut meta = field_set(child, false);
            if let Value::Object(mm) = &mut meta {
                for f in SERVER_META {
                    mm.remove(&format!("f:{f}"));
                }
                if mm.is_empty() {
                    // Nothing of metadata is the manager's: never let a later apply
                    // treat `metadata` itself as a field it stopped applying.
                    continue;
                }
            }
            meta
        } else if child.is_object() {
            field_set(child, false)
        } else {
            json!({})
        };
        out.insert(format!("f:{k}"), sub);
    }
    Value::Object(out)
}

/// The owned fields (leaves) of a field set.
pub(crate) fn leaves(set: &Value) -> Vec<FieldPath> {
    fn walk(set: &Value, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
        let Value::Object(m) = set else { return };
        if m.is_empty() {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
            return;
        }
        for (k, v) in m {
            let Some(key) = k.strip_prefix("f:") else {
                continue;
            };
            prefix.push(key.to_owned());
            walk(v, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(set, &mut Vec::new(), &mut out);
    out
}

pub(crate) fn set_contains(set: &Value, path: &[String]) -> bool {
    let mut cur = set;
    for seg in path {
        match cur.get(format!("f:{seg}")) {
            Some(next) => cur = next,
            None => return false,
        }
    }
    true
}

/// Removes `path` and everything under it; parents left empty go too, so that they do
/// not turn into owned leaves.
pub(crate) fn set_remove(set: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let key = format!("f:{first}");
    let Some(m) = set.as_object_mut() else { return };
    if rest.is_empty() {
        m.remove(&key);
        return;
    }
    if let Some(child) = m.get_mut(&key) {
        let had_children = child.as_object().is_some_and(|c| !c.is_empty());
        set_remove(child, rest);
        if had_children && child.as_object().is_some_and(Map::is_empty) {
            m.remove(&key);
        }
    }
}

fn set_insert(set: &mut Value, path: &[String]) {
    let mut cur = set;
    for seg in path {
        let Some(m) = cur.as_object_mut() else { return };
        cur = m.entry(format!("f:{seg}")).or_insert_with(|| json!({}));
    }
}

/// `metadata.managedFields` of an object, as a list.
pub(crate) fn entries_of(obj: Option<&Value>) -> Vec<Value> {
    obj.and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn text<'a>(e: &'a Value, k: &str) -> &'a str {
    e.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Is `e` the entry of (manager, operation, subresource)? Update entries are also told
/// apart by apiVersion; apply entries are not (the real manager identifier).
pub(crate) fn is_entry(
    e: &Value,
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
) -> bool {
    text(e, "manager") == manager
        && text(e, "operation") == operation
        && (operation == "Apply" || text(e, "apiVersion") == api_version)
        && text(e, "subresource") == subresource.unwrap_or("")
}

/// A new entry, stamped now.
pub(crate) fn new_entry(
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
    set: Value,
) -> Value {
    let mut e = Map::new();
    if !manager.is_empty() {
        e.insert("manager".into(), json!(manager));
    }
    e.insert("operation".into(), json!(operation));
    e.insert("apiVersion".into(), json!(api_version));
    e.insert("time".into(), json!(now_rfc3339()));
    e.insert("fieldsType".into(), json!("FieldsV1"));
    e.insert("fieldsV1".into(), set);
    if let Some(sub) = subresource {
        e.insert("subresource".into(), json!(sub));
    }
    Value::Object(e)
}

/// How a conflict names a manager: `"bob"`, `"bob" with subresource "status"`, and for
/// an Update, `... using <apiVersion>`.
pub(crate) fn printed_manager(e: &Value) -> String {
    let mut s = format!("{:?}", text(e, "manager"));
    if let Some(sub) = e.get("subresource").and_then(Value::as_str) {
        s.push_str(&format!(" with subresource {sub:?}"));
    }
    if text(e, "operation") == "Update" {
        s.push_str(&format!(" using {}", text(e, "apiVersion")));
    }
    s
}

/// The real server's order: Apply before Update, then by time, manager, apiVersion,
/// subresource.
fn entry_order(a: &Value, b: &Value) -> Ordering {
    ["operation", "time", "manager", "apiVersion", "subresource"]
        .iter()
        .map(|k| text(a, k).cmp(text(b, k)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Stores `entries` as the object's managedFields: entries that own nothing are
/// dropped, the rest sorted.
pub(crate) fn store_entries(obj: &mut Value, mut entries: Vec<Value>) {
    entries.retain(|e| {
        e.get("fieldsV1")
            .and_then(Value::as_object)
            .is_some_and(|s| !s.is_empty())
    });
    entries.sort_by(entry_order);
    let meta = meta_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

/// The part of an object managers can own: no apiVersion/kind, no server metadata,
/// and with `status_elsewhere` (a main-resource write of a kind whose status is a
/// subresource), no status: the server sets or keeps it, as the real server's reset
/// fields leave it out.
fn manageable(obj: &Value, status_elsewhere: bool) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        if status_elsewhere {
            m.remove("status");
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in SERVER_META {
                meta.remove(*f);
            }
            // Nothing of metadata is any manager's: not even `metadata` itself.
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    v
}

/// What a write did: the fields it set (added or changed) and those it removed.
#[derive(Default)]
struct Changes {
    set: Vec<FieldPath>,
    removed: Vec<FieldPath>,
}

fn diff(old: Option<&Value>, new: Option<&Value>, path: &mut FieldPath, out: &mut Changes) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                path.push(k.clone());
                diff(a.get(k), b.get(k), path, out);
                path.pop();
            }
        }
        (Some(a), Some(b)) if a == b => {}
        (old, Some(b)) => {
            if old.is_some() {
                out.removed.push(path.clone());
            }
            match b {
                Value::Object(m) if !m.is_empty() => {
                    let mut sub = leaves(&field_set(b, false));
                    for p in &mut sub {
                        p.splice(0..0, path.iter().cloned());
                    }
                    out.set.extend(sub);
                }
                _ => out.set.push(path.clone()),
            }
        }
        (Some(_), None) => out.removed.push(path.clone()),
        (None, None) => {}
    }
}

/// Records a non-apply write by `manager` that turned `old` (none for a create) into
/// `new`: its Update entry gains what it set and loses what it removed, and other
/// managers lose all of it. A write that changes nothing leaves managedFields alone.
/// `status_elsewhere`: see [`manageable`].
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
    status_elsewhere: bool,
) {
    let mut entries = entries_of(Some(new));
    if entries.len() == 1 && entries[0].as_object().is_some_and(Map::is_empty) {
        // `[{}]` is how a client strips managedFields on purpose.
        meta_mut(new).remove("managedFields");
        return;
    }
    let mut changes = Changes::default();
    diff(
        old.map(|o| manageable(o, status_elsewhere)).as_ref(),
        Some(&manageable(new, status_elsewhere)),
        &mut Vec::new(),
        &mut changes,
    );
    if changes.set.is_empty() && changes.removed.is_empty() {
        return;
    }
    let ours = |e: &Value| is_entry(e, manager, "Update", api_version, subresource);
    let mut own = entries
        .iter()
        .find(|e| ours(e))
        .and_then(|e| e.get("fieldsV1").cloned())
        .unwrap_or_else(|| json!({}));
    entries.retain(|e| !ours(e));
    for e in &mut entries {
        if let Some(set) = e.get_mut("fieldsV1") {
            for p in changes.set.iter().chain(&changes.removed) {
                set_remove(set, p);
            }
        }
    }
    for p in &changes.removed {
        set_remove(&mut own, p);
    }
    for p in &changes.set {
        set_insert(&mut own, p);
    }
    entries.push(new_entry(manager, "Update", api_version, subresource, own));
    store_entries(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_come_from_the_user_agents_program_name() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07"),
            "kubectl"
        );
        assert_eq!(manager_from_user_agent("my\u{7}tool"), "mytool");
        assert_eq!(manager_from_user_agent(&"x".repeat(300)).len(), 128);
        assert_eq!(manager_from_user_agent(""), "");
    }

    #[test]
    fn an_update_takes_what_it_changed_from_others() {
        let old = json!({"metadata": {"name": "n", "managedFields": [
            new_entry("a", "Apply", "v1", None, json!({"f:spec": {"f:x": {}, "f:y": {}}}))
        ]}, "spec": {"x": 1, "y": 2}});
        let mut new = old.clone();
        new["spec"]["x"] = json!(5);
        new["spec"]["z"] = json!({"w": true});
        new["spec"].as_object_mut().unwrap().remove("y");
        record_update(Some(&old), &mut new, "b", "v1", None, false);
        let entries = entries_of(Some(&new));
        assert_eq!(entries.len(), 1, "a owns nothing more: {entries:?}");
        assert_eq!(entries[0]["manager"], "b");
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:spec": {"f:x": {}, "f:z": {"f:w": {}}}})
        );
    }

    #[test]
    fn a_create_owns_no_server_metadata_nor_a_subresources_status() {
        let mut new = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "uid": "u"}, "spec": {}, "status": {"phase": "Active"}});
        record_update(None, &mut new, "kubectl-create", "v1", None, true);
        assert_eq!(entries_of(Some(&new))[0]["fieldsV1"], json!({"f:spec": {}}));
    }

    #[test]
    fn removing_a_child_does_not_leave_its_parent_owned() {
        let mut set = json!({"f:spec": {"f:a": {}}, "f:status": {}});
        set_remove(&mut set, &["spec".into(), "a".into()]);
        assert_eq!(set, json!({"f:status": {}}));
        set_remove(&mut set, &["status".into()]);
        assert_eq!(set, json!({}));
    }
}
