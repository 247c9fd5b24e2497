//! `explain server`: who holds the server and since when, why it is not Available,
//! which claims name it and who wins, and its row of the protocol.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::error::ExplainError;
use super::world::World;
use crate::api::{CachedClaim, CachedServer, ServerClaimRef};
use crate::binding::state::eviction::{eviction, would_evict};
use crate::binding::state::gates::bound_class;
use crate::binding::{
    Binder, ClaimView, LiveClaim, ServerDecision, ServerStep, describe_ref, find_bound,
    is_controller_chosen, meta, not_free, ref_uid, server_step_reading,
};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerExplanation {
    pub kind: &'static str,
    pub name: String,
    pub phase: String,
    pub reason: String,
    pub message: String,
    /// The claim the server's ref names, and whether it binds (a uid), reserves, or
    /// names a claim that is gone.
    pub holder: Option<String>,
    /// The classes whose selector takes the server in, and the class its claim bound
    /// under as the server records it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_class: Option<String>,
    /// When the server's `Bound` condition last changed, and its claim's bind time.
    pub since: Option<String>,
    pub claim_bound_time: Option<String>,
    /// The eviction an `Evict` taint starts for the claim holding it, or the one a
    /// report-only (`None`) taint previews.
    pub eviction: Option<String>,
    /// Why no new claim may take it, if any.
    pub not_available: Vec<String>,
    /// Its taints' keys: a free server still takes only claims that tolerate them (or
    /// whose class does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
    /// Claims whose `serverRef` names it, and which of them the winner rule picks.
    pub named_by: Vec<Naming>,
    pub decision: String,
    pub row: String,
}

#[derive(Debug, Serialize)]
pub struct Naming {
    pub claim: String,
    pub chosen_by: &'static str,
    pub wins: bool,
}

pub fn explain(world: &World, name: &str) -> Result<ServerExplanation, ExplainError> {
    let server = world
        .servers
        .iter()
        .find(|s| meta::name(*s) == name)
        .ok_or_else(|| {
            ExplainError::NotFound(format!("servers.metal.binder.dev {name:?} not found"))
        })?;
    let binder = world.binder();
    let claims = binder.world().claims();
    let decision = decide(server, &binder)?;
    let status = server.status.clone().unwrap_or_default();
    let bound = find_bound(&status.conditions);
    let r = server.spec.server_claim_ref.as_ref();
    let holder_claim = r.and_then(|r| claims.claim(&r.namespace, &r.name));
    let winner = match &decision {
        ServerDecision::ClaimForWinner { winner, .. } => Some(winner.clone()),
        _ => None,
    };
    let named_by = claims
        .claims_naming(name)
        .into_iter()
        .map(|c| Naming {
            claim: format!("{}/{}", meta::namespace(c), meta::name(c)),
            chosen_by: if is_controller_chosen(c) {
                "controller"
            } else {
                "user"
            },
            wins: winner.as_ref().is_some_and(|w| w.name == meta::name(c))
                || r.is_some_and(|r| r.name == meta::name(c) && ref_uid(r) == meta::uid(c)),
        })
        .collect();
    Ok(ServerExplanation {
        kind: "ServerExplanation",
        name: name.to_string(),
        phase: status
            .phase
            .map_or("(none yet)".into(), |p| format!("{p:?}")),
        reason: bound.map(|c| c.reason.clone()).unwrap_or_default(),
        message: bound.map(|c| c.message.clone()).unwrap_or_default(),
        holder: r.map(|r| holder_text(r, holder_claim)),
        classes: binder
            .world()
            .classes()
            .classes_of(server)
            .map(str::to_string)
            .collect(),
        bound_class: bound_class(server).map(|record| record.class),
        since: bound.map(|c| c.last_transition_time.0.to_string()),
        claim_bound_time: holder_claim
            .and_then(|c| c.status.as_ref()?.bound_time.as_ref())
            .map(|t| t.0.to_string()),
        eviction: holder_claim
            .filter(|c| r.is_some_and(|r| ref_uid(r) == meta::uid(*c)))
            .and_then(|c| eviction_of(server, c)),
        not_available: not_free(server).map(|why| why.to_string()).collect(),
        taints: server.spec.taints.iter().map(|t| t.key.clone()).collect(),
        named_by,
        row: row(&decision, server),
        decision: decision.name().to_string(),
    })
}

/// The claim a server's ref names, in words: bound to it, reserved for its name, or
/// bound to a claim that no longer exists (a release under `Retain` keeps the ref).
fn holder_text(r: &ServerClaimRef, claim: Option<&CachedClaim>) -> String {
    let Some(uid) = ref_uid(r) else {
        return format!("reserved by name for {}/{}", r.namespace, r.name);
    };
    match claim.is_some_and(|c| meta::uid(c) == Some(uid)) {
        true => format!("bound to {}", describe_ref(r)),
        false => format!("was bound to {}, which no longer exists", describe_ref(r)),
    }
}

/// The server controller's decision on what was read, with the release gates `explain`
/// was given for a server naming none (the operator's `--release-gates` cannot be read
/// from the cluster).
fn decide(server: &CachedServer, binder: &Binder) -> Result<ServerDecision, ExplainError> {
    let claims = binder.world().claims();
    let read = |r: &ServerClaimRef| claims.claim(&r.namespace, &r.name).cloned();
    let now = Timestamp::now();
    let step = |live: LiveClaim<'_>| binder.server_step(None, server, live, now);
    match server_step_reading(step, read) {
        ServerStep::Act(work) => Ok(work.decision),
        ServerStep::ReadClaim(r) => Err(ExplainError::Cluster(format!(
            "the server controller still asks to read claim {}/{} after reading it",
            r.namespace, r.name
        ))),
    }
}

/// What the server's taints do to `holder`: an eviction under way, or what a
/// report-only taint would start.
fn eviction_of(server: &CachedServer, holder: &CachedClaim) -> Option<String> {
    let who = format!("{}/{}", meta::namespace(holder), meta::name(holder));
    if let Some(e) = eviction(server, holder) {
        return Some(format!("{who}: {e}"));
    }
    let preview = would_evict(server, holder)?;
    Some(format!(
        "{who}, report only: were its effect Evict, {preview}"
    ))
}

/// The decision's row of docs/binding.md's server table, in the words the server
/// controller's condition or event uses.
fn row(decision: &ServerDecision, server: &CachedServer) -> String {
    format!(
        "{} (docs/binding.md, \"The server controller's table\", row {})",
        decision.describe(server),
        decision.name()
    )
}
