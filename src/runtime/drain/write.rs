//! The writes: one JSON merge patch per server, of only what the verb changes, carrying
//! the resourceVersion read as a precondition. The taint list is replaced whole (a
//! merge patch cannot change one entry), so it is the list read, as JSON, with the
//! verb's changes made entry by entry: no other taint is lost or rewritten, not even a
//! field this binary does not know. A conflict (409: someone wrote the server since it
//! was read, the server controller stamping a taint perhaps) reads it again and retries.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::edit::{Edit, Verb, apply_ops, edit};
use super::error::DrainError;
use crate::api::Server;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The field manager the writes name, as kubectl names its own.
pub const FIELD_MANAGER: &str = "server-binder-drain";

/// How many times a write that conflicted is tried again before giving up.
const ATTEMPTS: usize = 10;

/// A server as the verb left it, and what the verb changed.
pub struct Written {
    pub server: Server,
    pub edit: Edit,
}

/// Applies `verb` to server `name`: reads it, and writes the edit unless there is
/// nothing to change.
pub async fn write(client: &Client, name: &str, verb: Verb) -> Result<Written, DrainError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<Server>(&()));
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    for _ in 0..ATTEMPTS {
        let read = api.get(name).await.map_err(|e| not_found(name, e))?;
        let server = typed(&read)?;
        let edit = edit(verb, &server.spec);
        if !edit.writes() {
            return Ok(Written { server, edit });
        }
        let patch = patch(&edit, &read);
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(written) => {
                let server = typed(&written)?;
                return Ok(Written { server, edit });
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(not_found(name, e)),
        }
    }
    Err(DrainError::Cluster(format!(
        "cannot write server {name}: it changed under every one of {ATTEMPTS} attempts"
    )))
}

/// The merge patch of `edit` on the server `read`, at its resourceVersion.
fn patch(edit: &Edit, read: &DynamicObject) -> Value {
    let mut spec = serde_json::Map::new();
    // Uncordoned, the field goes, as on a server never cordoned.
    if let Some(unclaimable) = edit.unclaimable {
        spec.insert("unclaimable".into(), json!(unclaimable.then_some(true)));
    }
    if !edit.taints.is_empty() {
        let taints = read.data["spec"]["taints"].as_array().cloned();
        let added = |t: &_| serde_json::to_value(t).unwrap_or(Value::Null);
        let with_deadline = |mut t: Value, at| {
            t["hardDeadline"] = serde_json::to_value(Time(at)).unwrap_or(Value::Null);
            t
        };
        let list = apply_ops(
            &edit.taints,
            &taints.unwrap_or_default(),
            added,
            with_deadline,
        );
        spec.insert("taints".into(), Value::Array(list));
    }
    json!({
        "metadata": {"resourceVersion": read.metadata.resource_version},
        "spec": spec,
    })
}

fn typed(object: &DynamicObject) -> Result<Server, DrainError> {
    let unreadable = |e: serde_json::Error| {
        DrainError::Cluster(format!(
            "the API server sent a server this binary cannot read: {e}"
        ))
    };
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(unreadable)
}

/// A server gone between the listing and its write is not found, as a name given that
/// does not exist.
fn not_found(name: &str, e: kube::Error) -> DrainError {
    match e {
        kube::Error::Api(s) if s.code == 404 => {
            DrainError::NotFound(format!("servers.metal.binder.dev {name:?} not found"))
        }
        e => DrainError::from_api(&format!("write server {name}"), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::drain::edit::drain_taint;
    use k8s_openapi::jiff::Timestamp;

    fn read(taints: Value) -> DynamicObject {
        let object = json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "Server",
            "metadata": {"name": "s1", "resourceVersion": "7"},
            "spec": {"taints": taints, "future": {"field": 1}},
        });
        serde_json::from_value(object).unwrap()
    }

    #[test]
    fn the_patch_keeps_every_other_taint_as_read_and_carries_the_version() {
        let other = json!({"key": "example.com/x", "effect": "NoBind", "someday": "kept"});
        let object = read(json!([other]));
        let server = typed(&object).unwrap();
        let hard = Timestamp::from_second(1_800_000_000).unwrap();
        let verb = Verb::Drain {
            hard_deadline: Some(hard),
        };
        let body = patch(&edit(verb, &server.spec), &object);
        assert_eq!(
            body,
            json!({
                "metadata": {"resourceVersion": "7"},
                "spec": {"unclaimable": true, "taints": [
                    other,
                    serde_json::to_value(drain_taint(Some(hard))).unwrap(),
                ]},
            })
        );
        let added = &body["spec"]["taints"][1];
        assert_eq!(added["hardDeadline"], "2027-01-15T08:00:00Z");
        assert!(added.get("timeAdded").is_none(), "{added}");
    }

    #[test]
    fn uncordon_removes_only_the_drain_taint() {
        let drain = json!({"key": "metal.binder.dev/drain", "effect": "Evict",
            "timeAdded": "2026-01-01T00:00:00Z"});
        let other = json!({"key": "example.com/x", "effect": "Evict"});
        let object = read(json!([drain, other]));
        let server = typed(&object).unwrap();
        let body = patch(&edit(Verb::Uncordon, &server.spec), &object);
        assert_eq!(body["spec"], json!({"taints": [other]}));
    }
}
