//! One reconcile's pure part: decide on the caches, and, when the plan asks to confirm an
//! absence, decide again with the object read live. The controllers, the test world and
//! the model check all run a reconcile through these two functions; only the live read
//! itself (I/O) is the caller's.
//!
//! A caller runs `step(.., None)`; if the plan names an object to confirm
//! (`confirm_server`, `confirm_claim`), it reads that object live and runs
//! `step(.., Some(live))`, whose plan never asks again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{Server, ServerClaim, ServerClaimRef};

use super::assumed::{AssumedChoices, claim_key};
use super::claim_decision::{ClaimDecision, decide_claim, pass_over};
use super::claim_plan::{ClaimPlan, plan_claim};
use super::placement::{PickInputs, WaitingClaims};
use super::server_decision::{ServerDecision, decide_server};
use super::server_plan::{ServerPlan, plan_server};
use super::view::{ClaimView, Liveness, ServerView, WithLiveClaim, WithLiveServer};

/// The claim controller's decision function (swappable for the model check's mutants).
pub type ClaimDecider =
    fn(&ServerClaim, &dyn ServerView, &PickInputs<'_>, Liveness) -> ClaimDecision;
/// The server controller's decision function.
/// The server controller's decision function; the slice is the default release gates.
pub type ServerDecider = fn(&Server, &dyn ClaimView, Liveness, &[String]) -> ServerDecision;

/// The project's decision functions.
pub fn real_claim_decider(
    claim: &ServerClaim,
    servers: &dyn ServerView,
    pick: &PickInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    decide_claim(claim, servers, pick, liveness)
}

pub fn real_server_decider(
    server: &Server,
    claims: &dyn ClaimView,
    liveness: Liveness,
    default_gates: &[String],
) -> ServerDecision {
    decide_server(server, claims, liveness, default_gates)
}

/// What a claim reconcile decides with.
pub struct ClaimInputs<'a> {
    pub decide: ClaimDecider,
    /// The server cache.
    pub servers: &'a dyn ServerView,
    /// The claim cache, for the claims a pick passes over ([`pass_over`]).
    pub claims: &'a dyn ClaimView,
    /// The claim cache's waiting claims, which a pick leaves servers for.
    pub waiting: &'a WaitingClaims,
    /// The assumed-choice cache: servers chosen for claims whose writes may not show yet.
    pub assumed: &'a AssumedChoices,
}

/// Decides and plans for `claim`; `live` is the server named by the previous step's
/// `confirm_server`, as read live (`None` inside: the API server says NotFound).
pub fn claim_step(
    claim: &ServerClaim,
    inputs: &ClaimInputs<'_>,
    live: Option<(&str, Option<&Server>)>,
    now: &Time,
) -> (ClaimDecision, ClaimPlan) {
    let key = claim_key(claim);
    let chosen_for_others = |server: &str| inputs.assumed.chosen_for_other(server, &key);
    let skip = pass_over(claim, inputs.servers, inputs.claims, &chosen_for_others);
    let pick = PickInputs {
        skip: &skip,
        waiting: inputs.waiting,
        assumed: inputs.assumed,
    };
    let decision = match live {
        None => (inputs.decide)(claim, inputs.servers, &pick, Liveness::Cached),
        Some((name, live)) => {
            let view = WithLiveServer {
                base: inputs.servers,
                name,
                live,
            };
            (inputs.decide)(claim, &view, &pick, Liveness::Confirmed)
        }
    };
    let plan = plan_claim(claim, &decision, now);
    (decision, plan)
}

/// Decides and plans for `server`; `live` is the claim named by the previous step's
/// `confirm_claim`, as read live.
pub fn server_step(
    server: &Server,
    decide: ServerDecider,
    claims: &dyn ClaimView,
    default_gates: &[String],
    live: Option<(&ServerClaimRef, Option<&ServerClaim>)>,
    now: &Time,
) -> (ServerDecision, ServerPlan) {
    let decision = match live {
        None => decide(server, claims, Liveness::Cached, default_gates),
        Some((r, live)) => {
            let view = WithLiveClaim {
                base: claims,
                namespace: &r.namespace,
                name: &r.name,
                live,
            };
            decide(server, &view, Liveness::Confirmed, default_gates)
        }
    };
    let plan = plan_server(server, &decision, now);
    (decision, plan)
}
