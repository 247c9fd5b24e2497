//! The controllers' writes: each a JSON merge patch (RFC 7386) of what the plan changed
//! on the object the decision read, carrying that object's resourceVersion as a
//! precondition (a stale one is a 409 Conflict, as for an update), counted in
//! `api_writes_total`, and followed by the plan's event once all of a plan's writes
//! succeeded. A patch names only the fields the plan changed, so the controllers never
//! erase what they do not know: a field of a newer CRD (the typed objects drop it on
//! reading), another controller's annotation.

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::ObjectReference;

use crate::api::{CachedClaim, CachedServer};
use crate::binding::{BindingEvent, EventKind, Related, ref_uid};

use super::context::Context;
use super::error::{Error, Result, is_conflict};
use super::merge_patch;
use super::metrics::{ControllerKind, WriteResult};
use crate::api::Parts;

/// Which part of the object a write changes.
#[derive(Clone, Copy)]
pub enum Part {
    /// Metadata and spec (the main resource ignores status).
    Object,
    /// Status only, through the status subresource.
    Status,
}

/// Patches `read` into `wanted` (main resource or `/status`): sends what changed between
/// them, at `read`'s resourceVersion, failing with [`Error::Conflict`] when the object
/// changed since it was read. Returns what the answer told: the version and generation
/// written ([`Written::applied_to`] gives the object as written, for a caller that
/// writes again). Only those are built; the rest of the answer is skipped while parsing
/// (docs/performance.md, "CPU per bind").
pub async fn patch<K>(
    ctx: &Context,
    controller: ControllerKind,
    api: &Api<K>,
    read: &K,
    wanted: &K,
    part: Part,
) -> Result<Written>
where
    K: Resource<DynamicType = ()> + Parts,
{
    let name = read.name_any();
    let pp = PatchParams {
        field_manager: Some(super::context::REPORTING_CONTROLLER.into()),
        ..PatchParams::default()
    };
    let (resource, verb) = match part {
        Part::Object => (controller.resource().to_string(), "patch"),
        Part::Status => (format!("{}/status", controller.resource()), "patch status"),
    };
    let in_flight = ctx.informer.begin_write(read);
    let result = match patch_body(read, wanted, part) {
        Ok(body) => send(ctx, api, &name, &pp, &Patch::Merge(&body), part).await,
        Err(error) => Err(kube::Error::SerdeError(error)),
    };
    let version = result.as_ref().ok();
    in_flight.ended(version.and_then(|w| w.metadata.resource_version.as_deref()));
    let outcome = match &result {
        Ok(_) => WriteResult::Ok,
        Err(e) if is_conflict(e) => WriteResult::Conflict,
        Err(_) => WriteResult::Error,
    };
    ctx.metrics.write(controller, &resource, outcome);
    result.map_err(|e| Error::from_write(verb, controller.resource(), &name, e))
}

/// Sends the patch of `part` (as `Api::patch` or `Api::patch_status` would) and reads
/// the metadata of the object written.
async fn send<K>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    pp: &PatchParams,
    patch: &Patch<&Value>,
    part: Part,
) -> kube::Result<Written>
where
    K: Resource,
{
    let request = kube::core::Request::new(api.resource_url());
    let (request, operation) = match part {
        Part::Object => (request.patch(name, pp, patch), "patch"),
        Part::Status => (
            request.patch_subresource("status", name, pp, patch),
            "patch_status",
        ),
    };
    let mut request = request.map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert(operation);
    ctx.client.request::<Written>(request).await
}

/// What a write's answer tells that the plan did not know: the object's new version,
/// and its generation (a spec change raises it). The rest of the answer is skipped
/// unbuilt.
#[derive(Debug, Deserialize, PartialEq)]
pub struct Written {
    metadata: AnswerMeta,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct AnswerMeta {
    resource_version: Option<String>,
    generation: Option<i64>,
}

impl Written {
    /// `wanted` as the API server stored it: the precondition held, so the stored object
    /// was the one read (as far as the cache reads objects) and is now `wanted`.
    pub fn applied_to<K: Resource + Clone>(self, wanted: &K) -> K {
        let mut written = wanted.clone();
        let meta = written.meta_mut();
        meta.resource_version = self.metadata.resource_version;
        meta.generation = self.metadata.generation;
        written
    }
}

/// The merge patch from `read` to `wanted` on `part` (the main resource ignores status;
/// `/status` changes nothing else), with `read`'s resourceVersion as its precondition.
/// A plan that changes nothing on `part` still sends the precondition: what the
/// controller does after the write (its event, its metric) rests on the read being
/// current. Only `part` is serialised to be compared.
fn patch_body<K: Resource + Parts>(read: &K, wanted: &K, part: Part) -> serde_json::Result<Value> {
    let Some(version) = read.meta().resource_version.as_deref() else {
        // Every object a decision reads came from the API server; one without a
        // version would be written unconditionally, which the protocol never allows.
        return Err(serde::ser::Error::custom(
            "the object read has no resourceVersion",
        ));
    };
    let before = part_of(read, part)?;
    let after = part_of(wanted, part)?;
    let mut body = merge_patch::diff(&before, &after).unwrap_or_else(|| json!({}));
    body["metadata"]["resourceVersion"] = json!(version);
    Ok(body)
}

/// The JSON of `part` of `obj`: `metadata` and `spec`, or `status` (absent when unset).
fn part_of<K: Resource + Parts>(obj: &K, part: Part) -> serde_json::Result<Value> {
    let mut doc = serde_json::Map::new();
    match part {
        Part::Object => {
            doc.insert("metadata".into(), obj.metadata_json()?);
            doc.insert("spec".into(), serde_json::to_value(obj.spec())?);
        }
        Part::Status => {
            if let Some(status) = obj.status() {
                doc.insert("status".into(), serde_json::to_value(status)?);
            }
        }
    }
    Ok(Value::Object(doc))
}

/// Records `event` on `obj`. A failure is logged, not returned: the writes it reports
/// have happened, and the next transition's event will try again.
pub async fn record<K>(ctx: &Context, obj: &K, event: &BindingEvent)
where
    K: Resource<DynamicType = ()>,
{
    let reference = obj.object_ref(&());
    let ev = Event {
        type_: match event.kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: event.reason.into(),
        note: Some(event.note.clone()),
        action: event.action.into(),
        secondary: event.related.as_ref().map(related_ref),
    };
    if let Err(error) = ctx.recorder.publish(&ev, &reference).await {
        tracing::warn!(%error, reason = event.reason, "could not record an event");
    }
}

/// The object reference events.k8s.io `related` carries for `related`.
fn related_ref(related: &Related) -> ObjectReference {
    match related {
        Related::Claim(r) => ObjectReference {
            api_version: Some(CachedClaim::api_version(&()).into()),
            kind: Some(CachedClaim::kind(&()).into()),
            namespace: Some(r.namespace.clone()),
            name: Some(r.name.clone()),
            uid: ref_uid(r).map(str::to_string),
            ..ObjectReference::default()
        },
        Related::Server(name) => ObjectReference {
            api_version: Some(CachedServer::api_version(&()).into()),
            kind: Some(CachedServer::kind(&()).into()),
            name: Some(name.clone()),
            ..ObjectReference::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ServerPhase, ServerSpec, ServerStatus};

    fn read() -> CachedServer {
        let mut s = CachedServer::new("s1", ServerSpec::default());
        s.meta_mut().resource_version = Some("7".into());
        *s.labels_mut() = [("rack".to_string(), "r1".to_string())]
            .into_iter()
            .collect();
        s.status = Some(ServerStatus {
            phase: Some(ServerPhase::Available),
            ..ServerStatus::default()
        });
        s
    }

    #[test]
    fn an_object_patch_sends_the_spec_and_metadata_changed_at_the_version_read() {
        let mut wanted = read();
        wanted.spec.unclaimable = true;
        wanted.labels_mut().clear();
        wanted.status = None;
        let body = patch_body(&read(), &wanted, Part::Object).unwrap();
        assert_eq!(
            body,
            json!({
                "metadata": {"labels": {"rack": null}, "resourceVersion": "7"},
                "spec": {"unclaimable": true},
            }),
            "status is not the main resource's; labels that went are removed one by one"
        );
    }

    #[test]
    fn a_status_patch_sends_only_the_status_changed() {
        let mut wanted = read();
        wanted.spec.unclaimable = true;
        wanted.status.as_mut().unwrap().phase = Some(ServerPhase::Bound);
        let body = patch_body(&read(), &wanted, Part::Status).unwrap();
        assert_eq!(
            body,
            json!({"metadata": {"resourceVersion": "7"}, "status": {"phase": "Bound"}})
        );
    }

    #[test]
    fn a_write_without_a_change_still_carries_its_precondition() {
        let body = patch_body(&read(), &read(), Part::Status).unwrap();
        assert_eq!(body, json!({"metadata": {"resourceVersion": "7"}}));
    }

    #[test]
    fn an_object_without_a_version_is_not_written() {
        let mut unread = read();
        unread.meta_mut().resource_version = None;
        assert!(patch_body(&unread, &unread, Part::Object).is_err());
    }

    #[test]
    fn a_write_answer_gives_the_wanted_object_its_new_version_and_generation() {
        let answer = json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "Server",
            "metadata": {
                "name": "s1",
                "resourceVersion": "8",
                "generation": 3,
                "labels": {"rack": "r9"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"unclaimable": false, "taints": [{"key": "x", "effect": "NoBind"}]},
            "status": {"phase": "Bound"},
        });
        let answer: Written = serde_json::from_value(answer).unwrap();
        let mut wanted = read();
        wanted.spec.unclaimable = true;
        let written = answer.applied_to(&wanted);
        assert_eq!(written.meta().resource_version.as_deref(), Some("8"));
        assert_eq!(written.meta().generation, Some(3));
        let mut expected = wanted.clone();
        expected.meta_mut().resource_version = Some("8".into());
        expected.meta_mut().generation = Some(3);
        assert_eq!(written, expected, "everything else is the plan's");
    }
}
