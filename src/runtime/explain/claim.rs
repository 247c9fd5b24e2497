//! `explain serverclaim`: the claim's state, its row of the protocol, and for a claim
//! that waits, every server's verdict, best candidates first.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::error::ExplainError;
use super::world::World;
use crate::api::{CachedClaim, ServerQuota};
use crate::binding::claim_side::backoff::{WRITE_REFUSED, backs_off};
use crate::binding::world::classes::ClassCheck;
use crate::binding::world::quota;
use crate::binding::{
    Binder, CLAIM_BEING_DELETED, Cause, ClaimDecision, ClaimStep, LiveServer, PickState,
    ServerView, Sight, Unavailability, claim_step_reading, find_bound, hindrance, meta,
    selector_text,
};

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimExplanation {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub phase: String,
    pub reason: String,
    pub message: String,
    pub server_ref: Option<String>,
    pub chosen_by: &'static str,
    /// The claim's server class, and how it stands with it (docs/binding.md, "Server
    /// classes"); `None`: no class applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The quotas that limit the claim's class, how full each is, and whether the claim
    /// is charged (docs/binding.md, "Server quotas").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<String>,
    pub bind_completed: bool,
    pub bound_time: Option<String>,
    /// The decision the claim controller would make now, and its row in words.
    pub decision: String,
    pub row: String,
    /// For a claim that waits: the summary its condition carries, and every server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<Verdict>,
    /// Claims of other namespaces could not be listed: the fair order was judged from
    /// this namespace alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One server's verdict for a claim, as JSON and YAML print it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub name: String,
    pub usable: bool,
    /// The cause it is counted under in the summary, if it cannot serve the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The first reason, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A pick would take this server now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub picked: bool,
}

pub fn explain(world: &World, ns: &str, name: &str) -> Result<ClaimExplanation, ExplainError> {
    let claim = world
        .claims
        .iter()
        .find(|c| meta::namespace(*c) == ns && meta::name(*c) == name)
        .ok_or_else(|| {
            ExplainError::NotFound(format!(
                "serverclaims.metal.binder.dev {name:?} not found in namespace {ns:?}"
            ))
        })?;
    let binder = world.binder();
    let decision = decide(claim, &binder);
    let (summary, verdicts) = match &decision {
        Some(decision) if decision.weighs_servers() => {
            let (summary, verdicts) = verdicts(claim, &binder, decision);
            (Some(summary), verdicts)
        }
        _ => (None, Vec::new()),
    };
    let status = claim.status.clone().unwrap_or_default();
    let bound = find_bound(&status.conditions);
    Ok(ClaimExplanation {
        kind: "ServerClaimExplanation",
        namespace: ns.to_string(),
        name: name.to_string(),
        uid: meta::uid(claim).unwrap_or_default().to_string(),
        phase: status
            .phase
            .map_or("(none yet)".into(), |p| format!("{p:?}")),
        reason: bound.map(|c| c.reason.clone()).unwrap_or_default(),
        message: bound.map(|c| c.message.clone()).unwrap_or_default(),
        server_ref: claim.spec.server_ref.as_ref().map(|r| r.name.clone()),
        chosen_by: chosen_by(claim),
        class: class_of(claim, &binder),
        quotas: quotas_of(claim, &binder),
        bind_completed: meta::is_bind_completed(claim),
        bound_time: status.bound_time.map(|t| t.0.to_string()),
        decision: if backs_off(claim) {
            WRITE_REFUSED.into()
        } else {
            decision.as_ref().map_or("None", ClaimDecision::name).into()
        },
        row: decision
            .as_ref()
            .map_or_else(|| CLAIM_BEING_DELETED.into(), |d| row(claim, d)),
        summary,
        servers: verdicts,
        partial: world.partial,
    })
}

/// The claim controller's decision on what was read: what was listed is what exists,
/// so a server missing from the list is confirmed missing. `None`: it decides nothing
/// (the claim is being deleted).
fn decide(claim: &CachedClaim, binder: &Binder) -> Option<ClaimDecision> {
    let now = Timestamp::now();
    let step = |live: LiveServer<'_>| binder.claim_step(claim, live, Sight::All, now);
    match claim_step_reading(step, |_| None) {
        ClaimStep::Act(work) => Some(work.decision),
        ClaimStep::Wait { decision, .. } => Some(*decision),
        ClaimStep::Idle | ClaimStep::ReadServer(_) => None,
    }
}

/// The claim's class in words: which, and whether it can serve the claim.
fn class_of(claim: &CachedClaim, binder: &Binder) -> Option<String> {
    let check = binder.world().classes().check(claim);
    let class = check.class()?;
    Some(match check {
        ClassCheck::Default(_) => {
            format!("{class} (the default class, to be written into the claim)")
        }
        ClassCheck::Missing(_) => format!("{class} (no such class)"),
        ClassCheck::NotAllowed(_) => {
            let classes = binder.world().classes();
            let selector = classes
                .class(class)
                .and_then(|c| c.spec.namespace_selector.as_ref())
                .map_or_else(String::new, selector_text);
            format!(
                "{class} (does not let namespace {} in: its namespaceSelector is {selector})",
                meta::namespace(claim)
            )
        }
        ClassCheck::NoClass | ClassCheck::Of(_) => class.to_string(),
    })
}

/// The quotas of the claim's namespace that limit its class, in words: which, how
/// full, and whether they charge the claim.
fn quotas_of(claim: &CachedClaim, binder: &Binder) -> Vec<String> {
    let ClassCheck::Of(class) = binder.world().classes().check(claim) else {
        return Vec::new();
    };
    let uid = meta::uid(claim).unwrap_or_default();
    let quotas = binder.world().quotas().of_namespace(meta::namespace(claim));
    quotas
        .filter_map(|q| {
            let hard = quota::limit(q, &class)?;
            let charges = quota::charges(q);
            let used = quota::used_in(q, &class);
            let charged = match charges.iter().any(|c| c.uid == uid) {
                true => "this claim is charged",
                false if quota::holds_bind(claim) => "this claim holds one of them",
                false if !quota::has_room(used, hard) => "full: this claim is not charged",
                false => "this claim is not charged yet",
            };
            let name = meta::name(&**q);
            let held = match quota::has_room(used, hard) {
                true => String::new(),
                false => format!("; held by {}", holders(binder, claim, q, &class)),
            };
            Some(format!(
                "ServerQuota {name}: {used} of {hard} servers of class {class} ({charged}){held}"
            ))
        })
        .collect()
}

/// The claims of `claim`'s namespace that hold servers of `class` under `quota`: those
/// holding their bind, and those charged on their way to one; the first three by name,
/// then a count.
fn holders(binder: &Binder, claim: &CachedClaim, quota: &ServerQuota, class: &str) -> String {
    let charges = quota::charges(quota);
    let namespace = meta::namespace(claim);
    let mut names: Vec<&str> = binder
        .world()
        .claims()
        .in_namespace(namespace)
        .filter(|c| c.spec.server_class_name.as_deref() == Some(class))
        .filter(|c| {
            let uid = meta::uid(&***c).unwrap_or_default();
            quota::holds_bind(c) || charges.iter().any(|ch| ch.uid == uid)
        })
        .map(|c| meta::name(&**c))
        .collect();
    if names.is_empty() {
        return "no claim listed now: it counts claims since deleted, which its next recount drops"
            .into();
    }
    let more = names.len().saturating_sub(3);
    names.truncate(3);
    let mut text = names.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

fn chosen_by(claim: &CachedClaim) -> &'static str {
    match (
        &claim.spec.server_ref,
        crate::binding::is_controller_chosen(claim),
    ) {
        (None, _) => "nobody yet",
        (Some(_), true) => "the claim controller (pre-bound)",
        (Some(_), false) => "a user",
    }
}

/// The summary and every server's verdict, usable first, then closest to serving: the
/// claim as its class makes it, weighed with what the claim controller's decision weighs.
fn verdicts(
    claim: &CachedClaim,
    binder: &Binder,
    decision: &ClaimDecision,
) -> (String, Vec<Verdict>) {
    let servers = binder.world().servers();
    binder.with_claim_inputs(claim, Timestamp::now(), |claim, inputs| {
        let state = PickState {
            skip: inputs.pick.skip,
            refuses: inputs.pick.refuses,
            waits_turn: matches!(decision, ClaimDecision::WaitForTurn { .. }),
        };
        // The summary the condition carries: a claim waiting its turn also names the
        // claims ahead of it, which only the decision knows.
        let summary = match decision {
            ClaimDecision::WaitForTurn { why } => why.to_string(),
            _ => Unavailability::of(claim, servers.all(), state).to_string(),
        };
        let picked = match decision {
            ClaimDecision::PickBestFit { server } => Some(server.as_str()),
            _ => None,
        };
        let mut out: Vec<(u8, Verdict)> = servers
            .iter()
            .map(|s| {
                let name = meta::name(s).to_string();
                let h = hindrance(s, claim, state);
                let rank = h.as_ref().map_or(0, |h| 1 + Cause::of(h).distance());
                let verdict = Verdict {
                    picked: picked == Some(name.as_str()),
                    usable: h.is_none(),
                    cause: h.as_ref().map(|h| format!("{:?}", Cause::of(h))),
                    reason: h.map(|h| h.to_string()),
                    name,
                };
                (rank, verdict)
            })
            .collect();
        out.sort_by(|a, b| (!a.1.picked, a.0, &a.1.name).cmp(&(!b.1.picked, b.0, &b.1.name)));
        (summary, out.into_iter().map(|(_, v)| v).collect())
    })
}

/// The decision's row of docs/binding.md's claim table, in the words the claim
/// controller's condition or event uses. A claim whose status says it backs off after a
/// refused write is not tried again before its back-off ends (the controller's memory,
/// which explain cannot read): the row says so, then what its next try does.
fn row(claim: &CachedClaim, decision: &ClaimDecision) -> String {
    let next = format!(
        "{} (docs/binding.md, \"The claim controller's table\", row {})",
        decision.describe(),
        decision.name()
    );
    if backs_off(claim) {
        return format!(
            "backing off after the API server refused its write (the message above quotes it), ahead of nobody and holding no server; at its next try: {next}"
        );
    }
    next
}
