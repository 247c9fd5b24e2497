//! The invariants the model check holds in every state, and in every quiescent one.

use super::*;

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

pub(super) fn phase_of(claim: &CachedClaim) -> Option<ClaimPhase> {
    claim.status.as_ref().and_then(|s| s.phase)
}

pub(super) fn server_ref_name(claim: &CachedClaim) -> Option<&str> {
    claim.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

/// Invariants 1 and 4, in every reachable state.
pub(super) fn check_always(state: &State, user: &UserRefs) -> Result<(), String> {
    let truth = &state.truth;
    check_quota(truth, &state.over_at_creation)?;
    let mut bound_on: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, claim) in &truth.claims {
        if phase_of(claim) != Some(ClaimPhase::Bound) {
            continue;
        }
        let Some(server) = server_ref_name(claim) else {
            return Err(format!(
                "invariant 1: claim {name} is Bound without a serverRef"
            ));
        };
        if let Some(other) = bound_on.insert(server, name) {
            return Err(format!(
                "invariant 1: claims {other} and {name} are both Bound to {server}"
            ));
        }
        // A Bound claim's server names it by uid, or has lost its ref for a moment
        // (the server controller restores it): never another claim.
        if let Some(s) = truth.servers.get(server)
            && let Some(r) = &s.spec.server_claim_ref
            && (r.name != *name || ref_uid(r) != meta::uid(claim))
        {
            return Err(format!(
                "invariant 1: claim {name} is Bound to {server}, whose ref is {}",
                describe_ref(r)
            ));
        }
    }
    for (sname, server) in &truth.servers {
        let released = server.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released);
        let Some(r) = server.spec.server_claim_ref.as_ref().filter(|_| released) else {
            continue;
        };
        let holder_lives = ref_uid(r).is_none_or(|uid| {
            truth
                .claims
                .get(&r.name)
                .is_some_and(|c| meta::uid(c) == Some(uid))
        });
        if holder_lives {
            return Err(format!(
                "invariant 2: server {sname} is Released though its claim {} was never gone",
                describe_ref(r)
            ));
        }
    }
    // Invariant 5: no claim is bound to a server with a gate not passed since its
    // last tenant left.
    for (sname, gate, _) in &state.dirty {
        let Some(r) = truth
            .servers
            .get(sname)
            .and_then(|s| s.spec.server_claim_ref.as_ref())
        else {
            continue;
        };
        let live = truth.claims.get(&r.name).and_then(|c| meta::uid(c));
        if ref_uid(r).is_some() && ref_uid(r) == live {
            return Err(format!(
                "invariant 5: server {sname} is bound to {} before its release gate {gate} passed",
                describe_ref(r)
            ));
        }
    }
    if let Some(violation) = &state.entitlement {
        return Err(violation.clone());
    }
    for (claim, (uid, server)) in &state.user_claim_refs {
        if let Some(c) = truth.claims.get(claim)
            && meta::uid(c) == uid.as_deref()
            && server_ref_name(c) != Some(server)
        {
            return Err(format!(
                "invariant 4: claim {claim}'s user-written serverRef {server} was changed"
            ));
        }
    }
    for (server, claim) in &user.servers {
        if let Some(s) = truth.servers.get(server)
            && s.spec.server_claim_ref.as_ref().map(|r| r.name.as_str()) != Some(claim)
        {
            return Err(format!(
                "invariant 4: server {server}'s reservation for {claim} was changed"
            ));
        }
    }
    Ok(())
}

/// A claim's class, if it is one the world has (`ClassCheck::Of`: only then does a quota
/// count it).
pub(super) fn class_of<'c>(truth: &Truth, claim: &'c CachedClaim) -> Option<&'c str> {
    let name = claim.spec.server_class_name.as_deref()?;
    truth
        .classes
        .iter()
        .any(|c| meta::name(c) == name)
        .then_some(name)
}

/// Whether a server's ref carries the claim's name and uid: the claim holds it.
pub(super) fn holds_a_server(truth: &Truth, claim: &CachedClaim) -> bool {
    truth.servers.values().any(|s| {
        s.spec.server_claim_ref.as_ref().is_some_and(|r| {
            r.name == meta::name(claim) && ref_uid(r).is_some() && ref_uid(r) == meta::uid(claim)
        })
    })
}

/// Each (quota, class) with more live claims of its namespace and class holding a server
/// than its `hard`.
pub(super) fn over_quota(truth: &Truth) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (name, quota) in &truth.quotas {
        for (class, hard) in &quota.spec.hard {
            let bound = truth
                .claims
                .values()
                .filter(|c| meta::namespace(*c) == meta::namespace(quota))
                .filter(|c| class_of(truth, c) == Some(class.as_str()))
                .filter(|c| holds_a_server(truth, c))
                .count() as i64;
            if bound > *hard {
                out.insert((name.clone(), class.clone()));
            }
        }
    }
    out
}

/// Invariant 7: no quota has more claims of a class bound than it allows, but for a
/// quota and class that came to exist so (counted from a world with nothing above it
/// bound).
pub(super) fn check_quota(
    truth: &Truth,
    over_at_creation: &BTreeSet<(String, String)>,
) -> Result<(), String> {
    match over_quota(truth).difference(over_at_creation).next() {
        Some((quota, class)) => Err(format!(
            "invariant 7: quota {quota} allows {} of class {class}, but more are bound",
            truth.quotas[quota].spec.hard[class]
        )),
        None => Ok(()),
    }
}

/// Whether a full quota holds `claim` back, rightly: a quota of its namespace limits its
/// class, does not charge it, and charges as many live claims as it allows (a charge of
/// a gone claim does not count: the recount must drop it).
pub(super) fn held_by_quota(truth: &Truth, claim: &CachedClaim) -> bool {
    let Some(class) = class_of(truth, claim) else {
        return false;
    };
    let live = |c: &QuotaCharge| {
        truth
            .claims
            .get(&c.claim)
            .is_some_and(|l| meta::uid(l) == Some(c.uid.as_str()))
    };
    truth
        .quotas
        .values()
        .filter(|q| meta::namespace(*q) == meta::namespace(claim))
        .any(|q| {
            let Some(hard) = quota::limit(q, class) else {
                return false;
            };
            let charges = quota::charges(q);
            let charged = |c: &&QuotaCharge| c.class == class && live(c);
            !charges
                .iter()
                .any(|c| Some(c.uid.as_str()) == meta::uid(claim))
                && charges.iter().filter(charged).count() as i64 >= hard
        })
}

/// In a quiescent state no quota charges a claim that is gone: the recount freed it.
pub(super) fn check_charges(truth: &Truth) -> Result<(), String> {
    for (name, quota) in &truth.quotas {
        for c in quota::charges(quota) {
            let live = truth.claims.get(&c.claim);
            if live.is_none_or(|l| meta::uid(l) != Some(c.uid.as_str())) {
                return Err(format!(
                    "liveness: quota {name} still charges claim {} (uid {}), which is gone",
                    c.claim, c.uid
                ));
            }
        }
    }
    Ok(())
}

/// The scenario's `one_bound_of` claims: exactly one of them is bound.
pub(super) fn check_one_bound(truth: &Truth, claims: &[&str]) -> Result<(), String> {
    if claims.is_empty() {
        return Ok(());
    }
    let bound: Vec<&&str> = claims
        .iter()
        .filter(|n| {
            truth
                .claims
                .get(**n)
                .is_some_and(|c| holds_a_server(truth, c) && claim_phase(c) == ClaimPhase::Bound)
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
    check_converged(&state.truth, never_bind)?;
    check_charges(&state.truth)?;
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
        if let Some(quota) = recount_now(state, who).first() {
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
        let held = truth.servers.values().any(|s| {
            s.spec
                .server_claim_ref
                .as_ref()
                .is_some_and(|r| r.name == *name && ref_uid(r) == meta::uid(claim))
        });
        if !held || claim_phase(claim) != ClaimPhase::Bound {
            return Err(format!(
                "liveness: claim {name} is not bound in a quiescent state (must_bind)"
            ));
        }
    }
    Ok(())
}

/// Invariant 2 (and phase consistency) on the stored objects.
pub(super) fn check_converged(truth: &Truth, never_bind: &[&str]) -> Result<(), String> {
    let holds = |server: &CachedServer, claim: &CachedClaim| {
        server
            .spec
            .server_claim_ref
            .as_ref()
            .is_some_and(|r| r.name == meta::name(claim) && ref_uid(r) == meta::uid(claim))
    };
    for (name, claim) in &truth.claims {
        let bound_pair = server_ref_name(claim)
            .and_then(|s| truth.servers.get(s))
            .is_some_and(|s| holds(s, claim));
        let is_bound = phase_of(claim) == Some(ClaimPhase::Bound);
        if is_bound != (bound_pair && meta::is_bind_completed(claim)) {
            return Err(format!(
                "invariant 2: claim {name} has phase {:?} but its binding says otherwise",
                phase_of(claim)
            ));
        }
        // A claim that was bound once and lost its server needs a human; any other
        // claim (a copied `bind-completed` included) must get a free server it can use.
        let was_bound = claim
            .status
            .as_ref()
            .is_some_and(|s| s.bound_time.is_some());
        if is_bound
            || (meta::is_bind_completed(claim) && was_bound)
            || never_bind.contains(&name.as_str())
            || held_by_quota(truth, claim)
        {
            continue;
        }
        let user_choice = (!is_controller_chosen(claim))
            .then(|| server_ref_name(claim))
            .flatten();
        for (sname, server) in &truth.servers {
            let free = server.spec.server_claim_ref.is_none()
                || matches!(
                    ref_match(server, claim),
                    RefMatch::NameOnly | RefMatch::SameUid
                );
            if free && eligibility(server, claim).is_ok() && user_choice.is_none_or(|u| u == sname)
            {
                return Err(format!(
                    "invariant 2: claim {name} is not Bound though server {sname} is free for it"
                ));
            }
        }
    }
    for (sname, server) in &truth.servers {
        let Some(r) = &server.spec.server_claim_ref else {
            continue;
        };
        let claim = truth.claims.get(&r.name);
        let phase = server.status.as_ref().and_then(|s| s.phase);
        if ref_uid(r).is_some() && claim.is_none_or(|c| meta::uid(c) != ref_uid(r)) {
            let ok = server.spec.reclaim_policy == ReclaimPolicy::Retain
                && phase == Some(ServerPhase::Released);
            if !ok {
                return Err(format!(
                    "invariant 2: server {sname} still holds gone claim {}",
                    describe_ref(r)
                ));
            }
            continue;
        }
        if !is_user_made_ref(server)
            && claim.is_none_or(|c| server_ref_name(c) != Some(sname.as_str()))
        {
            return Err(format!(
                "invariant 2: orphaned reservation: server {sname} has a controller-made ref to {}, which does not name it",
                describe_ref(r)
            ));
        }
    }
    Ok(())
}
