//! `explain server`: who holds the server and since when, why it is not Available,
//! which claims name it and who wins, and its row of the protocol.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::error::ExplainError;
use super::world::World;
use crate::api::{CachedClaim, CachedServer, ServerClaimRef};
use crate::binding::state::eviction::{eviction, would_evict};
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
    /// The claim the server's ref names, and whether it binds (a uid) or reserves.
    pub holder: Option<String>,
    /// When the server's `Bound` condition last changed, and its claim's bind time.
    pub since: Option<String>,
    pub claim_bound_time: Option<String>,
    /// The eviction an `Evict` taint starts for the claim holding it, or the one a
    /// report-only (`None`) taint previews.
    pub eviction: Option<String>,
    /// Why no new claim may take it, if any.
    pub not_available: Vec<String>,
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
        holder: r.map(|r| match ref_uid(r) {
            Some(_) => format!("bound to {}", describe_ref(r)),
            None => format!("reserved by name for {}/{}", r.namespace, r.name),
        }),
        since: bound.map(|c| c.last_transition_time.0.to_string()),
        claim_bound_time: holder_claim
            .and_then(|c| c.status.as_ref()?.bound_time.as_ref())
            .map(|t| t.0.to_string()),
        eviction: holder_claim
            .filter(|c| r.is_some_and(|r| ref_uid(r) == meta::uid(*c)))
            .and_then(|c| eviction_of(server, c)),
        not_available: not_available(server),
        named_by,
        row: row(&decision, server),
        decision: decision.name().to_string(),
    })
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

/// Every reason no new claim may take the server, by the rule the free-server index
/// applies ([`not_free`]); then its taints, which no rule counts against it but which
/// narrow the claims it suits. The gates a cleaning waits for are the decision's row.
fn not_available(server: &CachedServer) -> Vec<String> {
    let mut out: Vec<String> = not_free(server).map(|why| why.to_string()).collect();
    if !server.spec.taints.is_empty() {
        let keys: Vec<&str> = server.spec.taints.iter().map(|t| t.key.as_str()).collect();
        out.push(format!(
            "tainted ({}): only claims that tolerate it",
            keys.join(", ")
        ));
    }
    out
}

/// The decision's row of docs/binding.md's server table, in the words the server
/// controller's condition or event uses.
fn row(decision: &ServerDecision, server: &CachedServer) -> String {
    format!(
        "{} (docs/binding.md, server table: ServerDecision::{})",
        decision.describe(server),
        decision.name()
    )
}
