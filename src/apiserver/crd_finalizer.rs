//! Deleting a CustomResourceDefinition as apiextensions does: the DELETE marks the CRD
//! (deletionTimestamp, the `customresourcecleanup` finalizer, a `Terminating`
//! condition) and its custom resources are deleted, each as a DELETE would (those with
//! finalizers get a deletionTimestamp and stay); while it terminates its kind takes no
//! new objects; when the last instance is gone the finalizer comes off and, with no
//! other finalizers, the CRD goes and its resources stop being served.
//!
//! The real server's CRD finalizer is a controller that polls; here each step runs in
//! the write that makes it possible, under the same lock, so nothing is half-done.

use serde_json::{Value, json};

use super::meta::{finalizers_of, meta_mut, meta_str, name_of, now_rfc3339, path_get};
use super::registry::{ResourceDef, StorageKey, storage_key};
use super::status::ApiError;
use super::store::{EventKind, State};

/// The finalizer apiextensions puts on a CRD being deleted.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn crds_key() -> StorageKey {
    storage_key("apiextensions.k8s.io", "customresourcedefinitions")
}

/// The collection holding a CRD's custom resources.
fn instances_key(crd: &Value) -> StorageKey {
    let s = |p: &str| path_get(crd, p).and_then(Value::as_str).unwrap_or("");
    storage_key(s("spec.group"), s("spec.names.plural"))
}

/// Is the CRD `name` being deleted?
pub(crate) fn terminating(st: &State, name: &str) -> bool {
    st.get(&crds_key(), "", name)
        .is_some_and(|crd| meta_str(crd, "deletionTimestamp").is_some())
}

/// What a create of `def`'s kind gets while its CRD terminates (the real handler's
/// MethodNotSupported, with its own message).
pub(crate) fn create_refused(def: &ResourceDef) -> ApiError {
    ApiError {
        details: Some(json!({"group": def.group, "kind": def.plural})),
        ..ApiError::new(
            405,
            "MethodNotAllowed",
            "create not allowed while custom resource definition is terminating",
        )
    }
}

/// Sets the `Terminating` condition, keeping its transition time while its status holds.
fn set_terminating(crd: &mut Value, status: &str, reason: &str, message: &str) {
    let Some(root) = crd.as_object_mut() else {
        return;
    };
    let conditions = root
        .entry("status")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else {
        return;
    };
    let old = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some("Terminating"));
    let since = old
        .map(|i| &conditions[i])
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now_rfc3339()));
    let condition = json!({"type": "Terminating", "status": status, "lastTransitionTime": since, "reason": reason, "message": message});
    match old {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

/// The first DELETE of a CRD (stored form `crd`): marks it, deletes its instances, and
/// finishes at once if none of them has to wait. Returns the CRD as it then is, and
/// whether it is gone. With `dry_run`, only the marked CRD, nothing written.
pub(crate) fn start_deletion(st: &mut State, crd: &Value, dry_run: bool) -> (Value, bool) {
    let mut marked = crd.clone();
    let mut finalizers = finalizers_of(&marked);
    if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
        finalizers.push(CLEANUP_FINALIZER.to_owned());
    }
    let meta = meta_mut(&mut marked);
    meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    meta.insert("finalizers".into(), json!(finalizers));
    set_terminating(
        &mut marked,
        "True",
        "InstanceDeletionInProgress",
        "CustomResource deletion is in progress",
    );
    if dry_run {
        return (marked, false);
    }
    st.commit(&crds_key(), EventKind::Modified, marked.clone());
    delete_instances(st, &instances_key(crd));
    let name = name_of(crd).to_owned();
    match finish_if_drained(st, &name) {
        Some(gone) => (gone, true),
        None => {
            let now = st.get(&crds_key(), "", &name).map(|c| (**c).clone());
            (now.unwrap_or(marked), false)
        }
    }
}

/// Deletes every object of a collection as a DELETE would: those without finalizers
/// go, the others get a deletionTimestamp (once) and wait for their finalizers.
fn delete_instances(st: &mut State, key: &StorageKey) {
    let all: Vec<Value> = st.list(key, None, None).map(|o| (**o).clone()).collect();
    for mut obj in all {
        if finalizers_of(&obj).is_empty() {
            st.commit(key, EventKind::Deleted, obj);
            continue;
        }
        if meta_str(&obj, "deletionTimestamp").is_some() {
            continue;
        }
        let generation = path_get(&obj, "metadata.generation").and_then(Value::as_i64);
        let meta = meta_mut(&mut obj);
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(g) = generation {
            meta.insert("generation".into(), json!(g + 1));
        }
        st.commit(key, EventKind::Modified, obj);
    }
}

/// If the CRD `name` is terminating and its last instance is gone: takes the cleanup
/// finalizer off and, when no other finalizer remains, deletes the CRD. Returns the
/// deleted CRD (stored form), if it went.
pub(crate) fn finish_if_drained(st: &mut State, name: &str) -> Option<Value> {
    let crd = st.get(&crds_key(), "", name)?;
    let waiting = meta_str(crd, "deletionTimestamp").is_some()
        && finalizers_of(crd).iter().any(|f| f == CLEANUP_FINALIZER);
    if !waiting || st.list(&instances_key(crd), None, None).next().is_some() {
        return None;
    }
    let mut crd = (**crd).clone();
    let rest: Vec<String> = finalizers_of(&crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    set_terminating(
        &mut crd,
        "False",
        "InstanceDeletionCompleted",
        "removed all instances",
    );
    let meta = meta_mut(&mut crd);
    if rest.is_empty() {
        meta.remove("finalizers");
        let stored = st.commit(&crds_key(), EventKind::Deleted, crd);
        stop_serving(st, &stored);
        return Some((*stored).clone());
    }
    meta.insert("finalizers".into(), json!(rest));
    st.commit(&crds_key(), EventKind::Modified, crd);
    None
}

/// Once a CRD is gone: its resources are no longer served, whatever is left of its
/// objects goes (as when its finalizer was removed by hand), and watches on them end.
pub(crate) fn stop_serving(st: &mut State, crd: &Value) {
    let key = instances_key(crd);
    st.registry.remove_crd(name_of(crd));
    let left: Vec<Value> = st.list(&key, None, None).map(|o| (**o).clone()).collect();
    for obj in left {
        st.commit(&key, EventKind::Deleted, obj);
    }
    st.close_channel(&key);
}

/// After objects were deleted without their CRD knowing (a namespace's cascade): every
/// terminating CRD that has no instance left finishes.
pub(crate) fn finish_all_drained(st: &mut State) {
    let names: Vec<String> = st
        .list(&crds_key(), None, None)
        .filter(|c| meta_str(c, "deletionTimestamp").is_some())
        .map(|c| name_of(c).to_owned())
        .collect();
    for name in names {
        finish_if_drained(st, &name);
    }
}

/// The `Terminating` condition of `old`, if it has one: an update of a terminating CRD
/// keeps it.
pub(crate) fn terminating_condition(old: &Value) -> Option<Value> {
    path_get(old, "status.conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Terminating"))
        .cloned()
}
