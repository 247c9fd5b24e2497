//! The invariants the model check holds in every state, and in every quiescent one.

use std::borrow::Cow;

use super::*;
use crate::common::invariants::{self as shared, History, Snapshot, holds};
use server_binder::binding::state::eviction::was_evicted;
use server_binder::binding::world::budgets::{allowed_unavailable, covers};

/// The reservations admins wrote on servers at the start, which no controller may
/// overwrite (invariant 4; the claims' refs are the `user_claim_refs` ghost).
pub(super) struct UserRefs {
    /// (server, claim name) for users' name-only reservations.
    servers: Vec<(String, String)>,
}

impl UserRefs {
    pub(super) fn of(scenario: &Scenario) -> Self {
        Self {
            servers: scenario
                .servers
                .iter()
                .filter(|s| is_user_made_ref(s))
                .filter_map(|s| {
                    let r = s.spec.server_claim_ref.as_ref()?;
                    Some((meta::name(s).to_string(), r.name.clone()))
                })
                .collect(),
        }
    }
}

pub(super) use crate::common::invariants::{phase_of, server_ref_name};

/// The model's truth, as the shared invariants read it.
pub(super) fn snapshot(truth: &Truth) -> Snapshot<'_> {
    Snapshot {
        servers: truth.servers.values().collect(),
        claims: truth.claims.values().collect(),
        classes: &truth.classes,
        quotas: truth.quotas.values().collect(),
    }
}

fn first(violations: Vec<String>) -> Result<(), String> {
    violations.into_iter().next().map_or(Ok(()), Err)
}

/// Invariants 7, 1, 2 (release), 5, 6 and 4, in every reachable state.
pub(super) fn check_always(state: &State, user: &UserRefs) -> Result<(), String> {
    let history = History {
        user_claim_refs: state
            .user_claim_refs
            .iter()
            .map(|(claim, (uid, server))| (claim.as_str(), uid.as_deref(), server.as_str()))
            .collect(),
        user_server_refs: user
            .servers
            .iter()
            .map(|(server, claim)| (server.as_str(), claim.as_str()))
            .collect(),
        dirty: state
            .dirty
            .iter()
            .map(|(server, gate, _)| (server.as_str(), Cow::Borrowed(gate.as_str())))
            .collect(),
        misgiven: state.entitlement.as_deref(),
        over_at_creation: Some(&state.over_at_creation),
        ..History::default()
    };
    let mut violated = shared::always(&snapshot(&state.truth), &history);
    violated.extend(budgets_hold(&state.truth));
    violated.extend(state.early_eviction.clone());
    first(violated)
}

/// Invariant 8: no eviction breaks a disruption budget. Of the claims a budget covers,
/// no more were evicted than it allows to be without a server (other reasons a claim
/// has none, such as waiting for its first bind, are not the binder's doing).
fn budgets_hold(truth: &Truth) -> Vec<String> {
    let mut violated = Vec::new();
    for budget in truth.budgets.values() {
        let covered: Vec<&CachedClaim> = truth
            .claims
            .values()
            .filter(|c| covers(budget, c))
            .collect();
        let evicted = covered.iter().filter(|c| was_evicted(c)).count();
        let allowed = allowed_unavailable(budget, covered.len());
        if evicted > allowed {
            violated.push(format!(
                "invariant 8: {evicted} claims covered by disruption budget {} were evicted, it allows {allowed}",
                meta::name(budget)
            ));
        }
    }
    violated
}

/// Each (quota, class) with more live claims of its namespace and class holding a server
/// than its `hard`.
pub(super) fn over_quota(truth: &Truth) -> BTreeSet<(String, String)> {
    shared::over_quota(&snapshot(truth))
}

/// The scenario's `one_bound_of` claims: exactly one of them is bound.
pub(super) fn check_one_bound(truth: &Truth, claims: &[&str]) -> Result<(), String> {
    if claims.is_empty() {
        return Ok(());
    }
    let bound: Vec<&&str> = claims
        .iter()
        .filter(|n| {
            truth.claims.get(**n).is_some_and(|c| {
                snapshot(truth).holds_a_server(c) && claim_phase(c) == ClaimPhase::Bound
            })
        })
        .collect();
    match bound.len() {
        1 => Ok(()),
        n => Err(format!(
            "liveness: {n} of {claims:?} are bound in a quiescent state (one_bound_of: {bound:?})"
        )),
    }
}

/// Where a full assignment exists, every claim ends Bound (issue: placement).
pub(super) fn check_all_bound(truth: &Truth) -> Result<(), String> {
    match truth
        .claims
        .iter()
        .find(|(_, c)| phase_of(c) != Some(ClaimPhase::Bound))
    {
        Some((name, _)) => Err(format!(
            "placement: claim {name} is stranded though every claim could be bound"
        )),
        None => Ok(()),
    }
}

/// Invariant 2 (and phase consistency), once nothing is left to do.
pub(super) fn check_quiescent(state: &State, never_bind: &[&str]) -> Result<(), String> {
    let snap = snapshot(&state.truth);
    first(shared::converged(&snap, never_bind))?;
    first(shared::charges_live(&snap))?;
    check_nothing_left(state)
}

/// In a quiescent state every reconcile, were something to wake it, would write nothing:
/// no decision is left waiting for a wake-up that never comes.
pub(super) fn check_nothing_left(state: &State) -> Result<(), String> {
    for who in BOTH {
        let mut woken = state.clone();
        woken.ctl(who).woken = everything(&state.truth, who);
        if let Some((label, _)) = reconciles(&woken, who)
            .into_iter()
            .find(|(label, _)| !label.contains("finds nothing to do"))
        {
            return Err(format!(
                "liveness: nothing woke an object that has work left: {label}"
            ));
        }
        let quotas = state.ctl_ref(who).binder.world().quotas();
        let counts_anew = |q: &&ServerQuota| {
            let seen = quotas.quota(meta::namespace(*q), meta::name(*q));
            seen.is_none_or(|seen| quota::changes_the_count(seen, q))
        };
        if let Some(quota) = recount_now(state, who).iter().find(counts_anew) {
            return Err(format!(
                "liveness: nothing rang the {who:?} process's recount, which would write quota {}",
                meta::name(quota)
            ));
        }
    }
    Ok(())
}

/// The scenario's `must_bind` claims are bound (their server holds their uid).
pub(super) fn check_bound(truth: &Truth, scenario: &Scenario) -> Result<(), String> {
    for name in &scenario.must_bind {
        let claim = truth.claim(name);
        let held = truth.servers.values().any(|s| holds(s, claim));
        if !held || claim_phase(claim) != ClaimPhase::Bound {
            return Err(format!(
                "liveness: claim {name} is not bound in a quiescent state (must_bind)"
            ));
        }
    }
    Ok(())
}

/// Liveness beside invariant 9: these claims' due evictions happened.
pub(super) fn check_evicted(truth: &Truth, names: &[&str]) -> Result<(), String> {
    for name in names {
        let evicted = truth
            .claims
            .get(*name)
            .is_some_and(server_binder::binding::state::eviction::was_evicted);
        if !evicted {
            return Err(format!(
                "liveness: claim {name}'s eviction was due, but it is not evicted at rest"
            ));
        }
    }
    Ok(())
}
