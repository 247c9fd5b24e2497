//! Staging half-bound states through the API (as a crashed controller or a user would
//! leave them) with the controllers stopped, and reading back what the controllers did:
//! objects, events, metrics and the live reads they made.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use server_binder::api::names::*;
use server_binder::api::*;

use crate::controllers::support::{DEADLINE, Env, wait_for};

// The one fixture builder (shared with tests/binding).
pub use crate::common::fixtures::{ClaimExt, DELETED_UID, ServerExt, claim, server};

/// The object as a client sends it to be created: without the uid, resourceVersion,
/// generation and creation time the fixture builder gives a stored object (the API
/// server sets them). A status is the caller's to write through `/status`: a create
/// drops it.
pub fn as_new<K: kube::Resource>(mut object: K) -> K {
    let meta = object.meta_mut();
    meta.uid = None;
    meta.resource_version = None;
    meta.generation = None;
    meta.creation_timestamp = None;
    object
}

/// What the controllers recorded about one object.
#[derive(Debug)]
pub struct Recorded {
    pub type_: String,
    pub reason: String,
    pub note: String,
    /// How often it happened (a repeat is recorded once, as a series).
    pub count: usize,
}

impl Env {
    /// Creates the server, then its status; claims staged before it whose status
    /// records a bind to a server of its name get its uid in that record, as the claim
    /// controller would have written it.
    pub async fn put_server(&self, mut server: Server) -> Server {
        let status = server.status.take();
        let server = put(&self.servers(), &as_new(server), status).await;
        let claims = self.claims().list(&ListParams::default()).await;
        for c in claims.expect("list claims").items {
            let record = c.status.as_ref().and_then(|s| s.bound_server_ref.as_ref());
            if record.is_some_and(|r| r.name == server.name_any() && r.uid.is_empty()) {
                let record = json!({"name": server.name_any(), "uid": server.uid()});
                self.claims()
                    .patch_status(
                        &c.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"boundServerRef": record}})),
                    )
                    .await
                    .expect("the staged claim's record written");
            }
        }
        server
    }

    /// Creates the claim, then its status; a status recording a bound server gets that
    /// server's uid if the server exists by then (else a record no server matches).
    pub async fn put_claim(&self, mut claim: ServerClaim) -> ServerClaim {
        let mut status = claim.status.take();
        let record = status.as_mut().and_then(|s| s.bound_server_ref.as_mut());
        if let Some(record) = record
            && let Some(server) = self.server(&record.name).await
        {
            record.uid = server.uid().unwrap_or_default();
        }
        put(&self.claims(), &as_new(claim), status).await
    }

    /// Asks for the server's deletion; a finalizer keeps it, marked as deleting.
    pub async fn delete_server(&self, name: &str) {
        self.servers()
            .delete(name, &DeleteParams::default())
            .await
            .expect("server delete accepted");
    }

    pub async fn server(&self, name: &str) -> Option<Server> {
        self.servers().get_opt(name).await.expect("get server")
    }

    pub async fn claim(&self, name: &str) -> Option<ServerClaim> {
        self.claims().get_opt(name).await.expect("get claim")
    }

    /// Waits until the server satisfies `check`, and returns it.
    pub async fn wait_server(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Server) -> bool,
    ) -> Server {
        let what = format!("server {name}: {what}");
        let found = wait_for(
            &what,
            DEADLINE,
            || self.server(name),
            |s| s.as_ref().is_some_and(&check),
        )
        .await;
        found.expect("the server that satisfied the check")
    }

    /// Waits until the claim satisfies `check`, and returns it.
    pub async fn wait_claim(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ServerClaim) -> bool,
    ) -> ServerClaim {
        let what = format!("claim {name}: {what}");
        let found = wait_for(
            &what,
            DEADLINE,
            || self.claim(name),
            |c| c.as_ref().is_some_and(&check),
        )
        .await;
        found.expect("the claim that satisfied the check")
    }

    /// Waits until the claim is in this phase with this `Bound` condition reason.
    pub async fn wait_claim_phase(
        &self,
        name: &str,
        phase: ClaimPhase,
        reason: &str,
    ) -> ServerClaim {
        self.wait_claim(name, &format!("{phase:?} / {reason}"), |c| {
            is(c, phase, reason)
        })
        .await
    }

    /// Waits until the server is in this phase with this `Bound` condition reason.
    pub async fn wait_server_phase(&self, name: &str, phase: ServerPhase, reason: &str) -> Server {
        self.wait_server(name, &format!("{phase:?} / {reason}"), |s| {
            server_is(s, phase, reason)
        })
        .await
    }

    /// Every event recorded about the object (`kind` Server or ServerClaim), oldest first.
    pub async fn events(&self, kind: &str, name: &str) -> Vec<Recorded> {
        let events = Api::<Event>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items;
        events
            .into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .map(|e| Recorded {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                note: e.message.unwrap_or_default(),
                count: e.count.map_or(1, |n| n.max(1) as usize),
            })
            .collect()
    }

    /// Waits for an event of this type and reason on the object and returns its note.
    pub async fn wait_event(&self, kind: &str, name: &str, type_: &str, reason: &str) -> String {
        let wanted = |e: &Recorded| e.type_ == type_ && e.reason == reason;
        let what = format!("{type_} {reason} on {kind} {name}");
        let events = wait_for(
            &what,
            DEADLINE,
            || self.events(kind, name),
            |events| events.iter().any(wanted),
        )
        .await;
        events
            .into_iter()
            .find(wanted)
            .expect("the awaited event")
            .note
    }

    /// How often an event of this reason happened to the object, repeats included.
    pub async fn count_events(&self, kind: &str, name: &str, reason: &str) -> usize {
        self.events(kind, name)
            .await
            .iter()
            .filter(|e| e.reason == reason)
            .map(|e| e.count)
            .sum()
    }

    /// Merge-patches a stored claim (`what` names the edit in a failure).
    async fn merge_claim(&self, name: &str, what: &str, patch: serde_json::Value) {
        self.claims()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("{what} on claim {name}: {e}"));
    }

    /// Removes one annotation from a stored claim, as `kubectl annotate c key-` does.
    pub async fn remove_claim_annotation(&self, name: &str, key: &str) {
        let patch = json!({ "metadata": { "annotations": { key: null } } });
        self.merge_claim(name, &format!("remove annotation {key}"), patch)
            .await;
    }

    /// Sets one annotation on a stored claim.
    pub async fn annotate_claim(&self, name: &str, key: &str, value: &str) {
        let patch = json!({ "metadata": { "annotations": { key: value } } });
        self.merge_claim(name, &format!("set annotation {key}"), patch)
            .await;
    }

    /// Adds `serverSelector.matchLabels: {key: value}` to a stored claim that has no
    /// selector (admission allows adding one, not changing one).
    pub async fn add_claim_selector(&self, name: &str, key: &str, value: &str) {
        let patch = json!({ "spec": { "serverSelector": { "matchLabels": { key: value } } } });
        self.merge_claim(name, "add a selector", patch).await;
    }

    /// Waits until the server is gone from the API.
    pub async fn wait_server_gone(&self, name: &str) {
        let what = format!("server {name} gone");
        wait_for(&what, DEADLINE, || self.server(name), Option::is_none).await;
    }

    /// The value of one sample of the operator's metrics (see [`sample`]).
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let text = self.operator.as_ref().expect("running").metrics.encode();
        sample(&text, name, labels)
    }

    /// Whether a controller read the object live (a GET by name, not a list or watch).
    pub fn read_live(&self, resource: &str, name: &str) -> bool {
        self.apiserver
            .request_log()
            .entries()
            .iter()
            .any(|r| r.verb == "get" && r.resource == resource && r.name.as_deref() == Some(name))
    }
}

/// Creates the object, then writes its status through `/status`, as the controllers do.
async fn put<K>(api: &Api<K>, object: &K, status: Option<impl serde::Serialize>) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let created = api
        .create(&PostParams::default(), object)
        .await
        .expect("staged object created");
    match status {
        None => created,
        Some(status) => api
            .patch_status(
                &created.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect("staged status written"),
    }
}

// ---- What the tests assert on ----

/// The value of one sample in a Prometheus text exposition (`labels` in any order), or 0
/// when the series was never touched.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let found: BTreeMap<&str, &str> = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k, v.trim_matches('"')))
                .collect();
            (metric == name && found == wanted).then(|| value.parse().expect("a number"))
        })
        .unwrap_or(0.0)
}

pub fn claim_phase_reason(c: &ServerClaim) -> (Option<ClaimPhase>, Option<String>) {
    (
        crate::controllers::support::phase(c),
        crate::controllers::support::bound_reason(c),
    )
}

pub fn server_phase_reason(s: &Server) -> (Option<ServerPhase>, Option<String>) {
    let status = s.status.as_ref();
    (
        status.and_then(|s| s.phase),
        status
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_BOUND))
            .map(|c| c.reason.clone()),
    )
}

pub fn is(c: &ServerClaim, phase: ClaimPhase, reason: &str) -> bool {
    claim_phase_reason(c) == (Some(phase), Some(reason.to_string()))
}

pub fn server_is(s: &Server, phase: ServerPhase, reason: &str) -> bool {
    server_phase_reason(s) == (Some(phase), Some(reason.to_string()))
}

pub fn server_ref(c: &ServerClaim) -> Option<&str> {
    c.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

pub fn claim_ref(s: &Server) -> Option<(&str, Option<&str>)> {
    s.spec
        .server_claim_ref
        .as_ref()
        .map(|r| (r.name.as_str(), r.uid.as_deref()))
}

pub fn has_annotation(obj: &impl ResourceExt, key: &str) -> bool {
    obj.annotations().contains_key(key)
}

pub fn has_finalizer(s: &Server) -> bool {
    s.finalizers()
        .iter()
        .any(|f| f == FINALIZER_SERVER_PROTECTION)
}

/// A claim bound to `server` as docs/binding.md defines it (invariant 1), with the server's
/// side agreeing.
pub fn bound_pair(c: &ServerClaim, s: &Server) -> bool {
    is(c, ClaimPhase::Bound, "Bound")
        && server_ref(c) == Some(s.name_any().as_str())
        && has_annotation(c, ANNOTATION_BIND_COMPLETED)
        && claim_ref(s) == Some((c.name_any().as_str(), c.uid().as_deref()))
        && has_finalizer(s)
        && server_is(s, ServerPhase::Bound, "Bound")
}

/// Waits until claim `c` and server `s` are bound to each other, and returns both.
pub async fn wait_bound(env: &Env, c: &str, s: &str) -> (ServerClaim, Server) {
    let what = format!("{c} and {s} bound to each other");
    let read = || async { (env.claim(c).await, env.server(s).await) };
    let pair = wait_for(
        &what,
        DEADLINE,
        read,
        |pair| matches!(pair, (Some(claim), Some(server)) if bound_pair(claim, server)),
    )
    .await;
    match pair {
        (Some(claim), Some(server)) => (claim, server),
        _ => unreachable!("wait_for returns the pair it checked"),
    }
}

impl Env {
    /// A fleet in which a claim selecting `rack=r1` finds every kind of reason: `held`
    /// servers in rack r1 bound to claims `holds-NAME`, `m1` in rack r2, `t1` tainted
    /// `gpu`, `u1` cordoned and `d1` being deleted (a foreign finalizer keeps it).
    pub async fn stage_mixed_reasons(&self, held: &[&str]) {
        for name in held {
            self.put_server(server(name).labelled(&[("rack", "r1")]))
                .await;
            self.put_claim(claim(&format!("holds-{name}")).names(name))
                .await;
        }
        self.put_server(server("m1").labelled(&[("rack", "r2")]))
            .await;
        self.put_server(server("t1").labelled(&[("rack", "r1")]).taint("gpu"))
            .await;
        self.put_server(server("u1").labelled(&[("rack", "r1")]).unclaimable())
            .await;
        self.put_server(server("d1").labelled(&[("rack", "r1")]).foreign_finalizer())
            .await;
        self.delete_server("d1").await;
        for name in held {
            self.wait_claim_phase(&format!("holds-{name}"), ClaimPhase::Bound, "Bound")
                .await;
        }
    }
}
