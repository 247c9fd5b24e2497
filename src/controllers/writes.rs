//! The controllers' writes: every one with the resourceVersion it read as a precondition
//! (the object it sends carries it), counted in `api_writes_total`, and followed by the
//! plan's event once all of a plan's writes succeeded.

use kube::api::PostParams;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::api::{Server, ServerClaim};
use crate::binding::{BindingEvent, EventKind, Related, ref_uid};

use super::context::Context;
use super::error::{Error, Result, is_conflict};
use super::metrics::{ControllerKind, WriteResult};

/// Which part of the object a write replaces.
#[derive(Clone, Copy)]
pub enum Part {
    /// Metadata and spec (the main resource ignores status).
    Object,
    /// Status only, through the status subresource.
    Status,
}

/// PUTs `obj` (main resource or `/status`), failing with [`Error::Conflict`] when it
/// changed since it was read.
pub async fn replace<K>(
    ctx: &Context,
    controller: ControllerKind,
    api: &Api<K>,
    obj: &K,
    part: Part,
) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.name_any();
    let pp = PostParams {
        field_manager: Some(super::context::REPORTING_CONTROLLER.into()),
        ..PostParams::default()
    };
    let (result, resource, verb) = match part {
        Part::Object => (
            api.replace(&name, &pp, obj).await,
            controller.resource().to_string(),
            "update",
        ),
        Part::Status => (
            api.replace_status(&name, &pp, obj).await,
            format!("{}/status", controller.resource()),
            "update status",
        ),
    };
    let outcome = match &result {
        Ok(_) => WriteResult::Ok,
        Err(e) if is_conflict(e) => WriteResult::Conflict,
        Err(_) => WriteResult::Error,
    };
    ctx.metrics.write(controller, &resource, outcome);
    if let Ok(written) = &result {
        ctx.caches.wrote(written);
    }
    result.map_err(|e| Error::from_write(verb, controller.resource(), &name, e))
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
            api_version: Some(ServerClaim::api_version(&()).into()),
            kind: Some(ServerClaim::kind(&()).into()),
            namespace: Some(r.namespace.clone()),
            name: Some(r.name.clone()),
            uid: ref_uid(r).map(str::to_string),
            ..ObjectReference::default()
        },
        Related::Server(name) => ObjectReference {
            api_version: Some(Server::api_version(&()).into()),
            kind: Some(Server::kind(&()).into()),
            name: Some(name.clone()),
            ..ObjectReference::default()
        },
    }
}
