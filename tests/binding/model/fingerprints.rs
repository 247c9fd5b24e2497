//! What distinguishes two states of the model check, with resourceVersions renamed by
//! rank (only their equality matters, and every new one is fresh).
//!
//! Every struct that feeds a fingerprint is destructured in full, without `..`: a field
//! added to a state, a controller, an object or a status is a compile error here until
//! someone decides whether it tells states apart, instead of two states silently merging.
//! A field bound to `_` was decided not to.

use super::*;

pub(super) fn fingerprint(state: &State) -> u64 {
    let State {
        truth,
        claim_ctl,
        server_ctl,
        // Fixed for a whole exploration.
        refuses: _,
        backoff_ends,
        crashes,
        faults,
        resyncs,
        handovers,
        handed_over,
        next_user_op,
        // Fixed for a whole exploration.
        protocol: _,
        default_gates,
        tenant_budget,
        cleaners,
        dirty,
        held,
        user_claim_refs,
        entitlement,
        eviction_due,
        evicted,
        early_eviction,
        over_at_creation,
        bound_class_gates,
    } = state;
    // Versions are renamed by rank, so the counter behind them does not count.
    let Truth {
        servers,
        claims,
        quotas,
        // Fixed for a whole exploration.
        classes: _,
        budgets,
        next_rv: _,
    } = &**truth;
    let ranks = Ranks::of(state);
    let mut h = FxHasher::default();
    claims.len().hash(&mut h);
    for c in claims.values() {
        claim_fp(c, &ranks, &mut h);
    }
    servers.len().hash(&mut h);
    for s in servers.values() {
        server_fp(s, &ranks, &mut h);
    }
    quotas.len().hash(&mut h);
    for q in quotas.values() {
        quota_fp(q, &ranks, &mut h);
    }
    for b in budgets.values() {
        budget_fp(b, &ranks, &mut h);
    }
    for ctl in [claim_ctl, server_ctl] {
        ctl_fp(ctl, &ranks, &mut h);
    }
    in_flight_fp(handed_over.as_ref(), &ranks, &mut h);
    (
        (*crashes, *faults, *resyncs, *handovers),
        *next_user_op,
        *tenant_budget,
    )
        .hash(&mut h);
    backoff_ends.hash(&mut h);
    (default_gates, cleaners, dirty, held, user_claim_refs).hash(&mut h);
    entitlement.is_some().hash(&mut h);
    (eviction_due, evicted, early_eviction.is_some()).hash(&mut h);
    (over_at_creation, bound_class_gates).hash(&mut h);
    h.finish()
}

/// A resourceVersion is only ever compared with other copies of the same object, so each
/// object's versions are renamed by their rank among that object's copies in the state.
pub(super) struct Ranks<'a> {
    /// Every (is a claim, name, version) of the state, sorted, without repeats: an
    /// object's versions are a run of it, in order. Built for every state reached, so
    /// one vector rather than a set per object.
    versions: Vec<(bool, &'a str, u64)>,
    /// The quotas' versions, by quota name, the same way.
    quota_versions: Vec<(&'a str, u64)>,
    /// The budgets' versions, by budget name, the same way.
    budget_versions: Vec<(&'a str, u64)>,
    /// Release gates apply in this world, even to servers that name none (the default
    /// gates): generations and the cleaners' conditions tell states apart.
    gated: bool,
}

impl<'a> Ranks<'a> {
    pub(super) fn of(state: &'a State) -> Self {
        let mut versions: Vec<(bool, &str, u64)> = Vec::with_capacity(32);
        for c in state_claims(state) {
            if let Some(rv) = parse_rv(&c.meta().resource_version) {
                versions.push((true, meta::name(c), rv));
            }
        }
        for s in state_servers(state) {
            if let Some(rv) = parse_rv(&s.meta().resource_version) {
                versions.push((false, meta::name(s), rv));
            }
        }
        versions.sort_unstable();
        versions.dedup();
        let mut quota_versions: Vec<(&str, u64)> = Vec::new();
        for q in state_quotas(state) {
            if let Some(rv) = parse_rv(&q.metadata.resource_version) {
                quota_versions.push((meta::name(q), rv));
            }
        }
        quota_versions.sort_unstable();
        quota_versions.dedup();
        let mut budget_versions: Vec<(&str, u64)> = Vec::new();
        for b in state_budgets(state) {
            if let Some(rv) = parse_rv(&b.metadata.resource_version) {
                budget_versions.push((meta::name(b), rv));
            }
        }
        budget_versions.sort_unstable();
        budget_versions.dedup();
        let gated = !state.default_gates.is_empty() || !state.cleaners.is_empty();
        Self {
            versions,
            quota_versions,
            budget_versions,
            gated,
        }
    }

    pub(super) fn quota_rank(&self, name: &str, rv: &Option<String>) -> Option<usize> {
        named_rank(&self.quota_versions, name, rv)
    }

    pub(super) fn budget_rank(&self, name: &str, rv: &Option<String>) -> Option<usize> {
        named_rank(&self.budget_versions, name, rv)
    }

    pub(super) fn rank(&self, is_claim: bool, name: &str, rv: &Option<String>) -> Option<usize> {
        let rv = parse_rv(rv)?;
        let at = self.versions.binary_search(&(is_claim, name, rv)).ok()?;
        let first = self
            .versions
            .partition_point(|(c, n, _)| (*c, *n) < (is_claim, name));
        Some(at - first)
    }
}

/// The rank of `rv` among the versions of the object named `name` in `versions`.
fn named_rank(versions: &[(&str, u64)], name: &str, rv: &Option<String>) -> Option<usize> {
    let rv = parse_rv(rv)?;
    let at = versions.binary_search(&(name, rv)).ok()?;
    Some(at - versions.partition_point(|(n, _)| *n < name))
}

pub(super) fn parse_rv(rv: &Option<String>) -> Option<u64> {
    rv.as_deref().and_then(|r| r.parse::<u64>().ok())
}

/// One controller: its caches, its undelivered events, what it woke, its assumed choices
/// and the plan it is carrying out.
pub(super) fn ctl_fp(ctl: &Ctl, ranks: &Ranks, h: &mut FxHasher) {
    let Ctl {
        binder,
        claim_events,
        server_events,
        quota_events,
        budget_events,
        woken,
        in_flight,
        recount_due,
        recounts,
    } = ctl;
    // The binder's rules and configuration are fixed per controller for a run, but for
    // the release gates, which the state holds; its summary clock never lets a refresh
    // through (STATUS_INTERVAL), so it tells no states apart.
    let (claims, servers, assumed) = (
        binder.world().claims(),
        binder.world().servers(),
        &binder.claim_side().assumed,
    );
    claims.len().hash(h);
    for c in claims.iter() {
        claim_fp(c, ranks, h);
    }
    servers.len().hash(h);
    for s in servers.iter() {
        server_fp(s, ranks, h);
    }
    claim_events.len().hash(h);
    for (n, c) in claim_events {
        n.hash(h);
        match c {
            Some(c) => claim_fp(c, ranks, h),
            None => 0u8.hash(h),
        }
    }
    server_events.len().hash(h);
    for (n, s) in server_events {
        n.hash(h);
        match s {
            Some(s) => server_fp(s, ranks, h),
            None => 0u8.hash(h),
        }
    }
    quota_events.len().hash(h);
    for (n, q) in quota_events {
        n.hash(h);
        match q {
            Some(q) => quota_fp(q, ranks, h),
            None => 0u8.hash(h),
        }
    }
    // The claims hashed above are as their class and quotas make them in the binder;
    // each is the claim as it is with a selector added at most, so they tell the claims
    // as they are apart too. The classes are fixed for a run.
    binder.world().quotas().iter().count().hash(h);
    for q in binder.world().quotas().iter() {
        quota_fp(q, ranks, h);
    }
    budget_events.len().hash(h);
    for (n, b) in budget_events {
        n.hash(h);
        match b {
            Some(b) => budget_fp(b, ranks, h),
            None => 0u8.hash(h),
        }
    }
    binder.world().budgets().all().count().hash(h);
    for b in binder.world().budgets().all() {
        budget_fp(b, ranks, h);
    }
    recount_due.hash(h);
    recounts.len().hash(h);
    for q in recounts {
        quota_fp(q, ranks, h);
    }
    woken.hash(h);
    // A refusal's count and time only set the back-off's length, which the model
    // abstracts (its end is a step); whether it is running tells states apart.
    for (key, refusal) in binder.claim_side().refused.iter() {
        let Refusal {
            uid,
            count: _,
            until,
            write,
            completing,
            message,
        } = refusal;
        (key, uid, *until > now().0, write, completing, message).hash(h);
    }
    for (server, a) in assumed.iter() {
        let Assumption {
            claim,
            based_on,
            written,
            seen,
        } = a;
        server.hash(h);
        claim.hash(h);
        ranks.rank(true, &claim.name, based_on).hash(h);
        ranks.rank(true, &claim.name, written).hash(h);
        seen.hash(h);
    }
    in_flight_fp(in_flight.as_ref(), ranks, h);
}

/// The rest of a plan: the object read, the object and status still to write, and the
/// server a pick assumed.
pub(super) fn in_flight_fp(in_flight: Option<&InFlight>, ranks: &Ranks, h: &mut FxHasher) {
    match in_flight {
        None => 0u8.hash(h),
        Some(InFlight::Claim {
            base,
            object,
            status,
            assumed,
            // What it decided is in `object` and `status`, and its pick in `assumed`.
            work: _,
            charges,
            records,
        }) => {
            1u8.hash(h);
            assumed.hash(h);
            charges.len().hash(h);
            for q in charges {
                quota_fp(q, ranks, h);
            }
            records.len().hash(h);
            for b in records {
                budget_fp(b, ranks, h);
            }
            claim_fp(base, ranks, h);
            if let Some(o) = object {
                claim_fp(o, ranks, h);
            }
            status
                .as_deref()
                .map(|status| {
                    let ServerClaimStatus {
                        phase,
                        conditions,
                        bound_time,
                        bound_server_ref,
                        given_back_server_ref,
                    } = status;
                    (
                        *phase,
                        bound_time.is_some(),
                        (bound_server_ref, given_back_server_ref),
                        conditions_fp(conditions),
                    )
                })
                .hash(h);
        }
        Some(InFlight::CachedServer {
            base,
            object,
            status,
        }) => {
            2u8.hash(h);
            server_fp(base, ranks, h);
            if let Some(o) = object {
                server_fp(o, ranks, h);
            }
            status
                .as_ref()
                .map(|status| {
                    // What `kubectl get` shows (summary, classes) no decision reads.
                    let ServerStatus {
                        phase,
                        claim,
                        observed_generation,
                        conditions,
                        summary: _,
                        classes: _,
                    } = status;
                    (phase, claim, observed_generation, conditions_fp(conditions))
                })
                .hash(h);
        }
    }
}

/// What of a claim the decisions read. Its status is kept as the decisions see it: the
/// phase, whether `boundTime` is set, and the `Bound` condition's reason and message.
pub(super) fn claim_fp(c: &CachedClaim, ranks: &Ranks, h: &mut FxHasher) {
    // The lean object's labels and annotations are apart from its metadata.
    let (metadata, _labels, annotations, spec, status) = c.parts();
    let ObjectMeta {
        name,
        uid,
        resource_version,
        annotations: _,
        // Claims carry no finalizer of ours and are deleted at once, so they are never
        // seen deleting.
        deletion_timestamp: _,
        deletion_grace_period_seconds: _,
        finalizers: _,
        // Set once per incarnation by the scenario; the uid tells incarnations apart.
        creation_timestamp: _,
        // Its value follows the spec's history; what the decisions read is whether the
        // `Bound` condition was written for it (`bound_fp`).
        generation,
        // The decisions read no labels, owners or bookkeeping of a claim.
        labels: _,
        generate_name: _,
        managed_fields: _,
        namespace: _,
        owner_references: _,
        self_link: _,
    } = metadata;
    let name = name.as_deref().unwrap_or("");
    name.hash(h);
    uid.as_deref().hash(h);
    ranks.rank(true, name, resource_version).hash(h);
    annotations.hash(h);
    let ServerClaimSpec {
        server_ref,
        server_selector,
        tolerations,
        server_class_name,
    } = spec;
    (server_ref, server_selector, tolerations, server_class_name).hash(h);
    let (phase, bound_time, record, bound) = match status {
        None => (None, false, None, None),
        Some(ServerClaimStatus {
            phase,
            conditions,
            bound_time,
            bound_server_ref,
            given_back_server_ref,
        }) => (
            *phase,
            bound_time.is_some(),
            Some((bound_server_ref.as_ref(), given_back_server_ref.as_ref())),
            bound_fp(conditions, *generation),
        ),
    };
    phase.hash(h);
    bound_time.hash(h);
    record.hash(h);
    bound.hash(h);
}

/// What of a server the decisions read.
pub(super) fn server_fp(s: &CachedServer, ranks: &Ranks, h: &mut FxHasher) {
    let (metadata, labels, annotations, spec, status) = s.parts();
    let ObjectMeta {
        name,
        resource_version,
        annotations: _,
        finalizers,
        deletion_timestamp,
        labels: _,
        // One incarnation per server name in every scenario.
        uid: _,
        creation_timestamp: _,
        // Follows the spec's history (see `claim_fp`).
        generation,
        deletion_grace_period_seconds: _,
        generate_name: _,
        managed_fields: _,
        namespace: _,
        owner_references: _,
        self_link: _,
    } = metadata;
    let name = name.as_deref().unwrap_or("");
    name.hash(h);
    ranks.rank(false, name, resource_version).hash(h);
    annotations.hash(h);
    finalizers.hash(h);
    deletion_timestamp.is_some().hash(h);
    let ServerSpec {
        server_claim_ref,
        unclaimable,
        taints,
        reclaim_policy,
        release_gates,
    } = spec;
    (server_claim_ref, *unclaimable, taints, release_gates).hash(h);
    reclaim_policy.hash(h);
    labels.hash(h);
    let (phase, claim, bound) = match status {
        None => (None, None, (false, None)),
        // What `kubectl get` shows (summary, classes) no decision reads.
        Some(ServerStatus {
            phase,
            claim,
            conditions,
            observed_generation,
            summary: _,
            classes: _,
        }) => (
            *phase,
            claim.as_deref(),
            (
                *observed_generation == *generation,
                bound_fp(conditions, *generation),
            ),
        ),
    };
    phase.hash(h);
    claim.hash(h);
    bound.hash(h);
    let gated = release_gates.as_ref().is_some_and(|g| !g.is_empty())
        || gates::is_cleaning(s)
        || ranks.gated;
    if gated {
        // With release gates, generations are compared with the `cleaning`
        // annotation's, so their values tell states apart, and so do the cleaner's
        // conditions.
        generation.hash(h);
        let others = status.iter().flat_map(|s| &s.conditions);
        conditions_fp(
            &others
                .filter(|c| c.type_ != "Bound")
                .cloned()
                .collect::<Vec<_>>(),
        )
        .hash(h);
    }
}

/// The `Bound` condition as the decisions read it: its reason and message, and whether
/// it was written for the object's current `generation` (the status rules compare the
/// two, never their values).
pub(super) fn bound_fp(
    conditions: &[Condition],
    generation: Option<i64>,
) -> Option<(&String, &String, bool)> {
    let Condition {
        reason,
        message,
        // Follow from the phase and the generation; the model's clock never moves.
        type_: _,
        status: _,
        observed_generation,
        last_transition_time: _,
    } = find_bound(conditions)?;
    Some((reason, message, *observed_generation == generation))
}

/// What of a plan's conditions a later write depends on (the transition time is the
/// model's constant `now`).
pub(super) fn conditions_fp(
    conditions: &[Condition],
) -> Vec<(&str, &str, &str, &str, Option<i64>)> {
    conditions
        .iter()
        .map(|c| {
            let Condition {
                type_,
                status,
                reason,
                message,
                observed_generation,
                last_transition_time: _,
            } = c;
            (
                type_.as_str(),
                status.as_str(),
                reason.as_str(),
                message.as_str(),
                *observed_generation,
            )
        })
        .collect()
}

/// What of a quota the decisions and the recount read: its limits and its charges (its
/// `used` and summary follow from them, but are hashed all the same).
pub(super) fn quota_fp(q: &ServerQuota, ranks: &Ranks, h: &mut FxHasher) {
    let ServerQuota {
        metadata,
        spec: ServerQuotaSpec { hard },
        status,
    } = q;
    let name = meta::name(q);
    name.hash(h);
    ranks.quota_rank(name, &metadata.resource_version).hash(h);
    hard.hash(h);
    metadata.generation.hash(h);
    if let Some(ServerQuotaStatus {
        observed_generation,
        used,
        charged,
        summary,
    }) = status
    {
        observed_generation.hash(h);
        used.hash(h);
        summary.hash(h);
        for QuotaCharge { class, claim, uid } in charged {
            (class, claim, uid).hash(h);
        }
    }
}

/// What of a budget the decisions read: its status (its spec is fixed for a run). A
/// record's claim version is ranked among the claim's copies.
pub(super) fn budget_fp(b: &ServerDisruptionBudget, ranks: &Ranks, h: &mut FxHasher) {
    let ServerDisruptionBudget {
        metadata,
        // Fixed for a whole exploration.
        spec: _,
        status,
    } = b;
    let name = meta::name(b);
    name.hash(h);
    ranks.budget_rank(name, &metadata.resource_version).hash(h);
    if let Some(ServerDisruptionBudgetStatus {
        observed_generation,
        expected_claims,
        current_available,
        desired_available,
        disruptions_allowed,
        disrupted_claims,
    }) = status
    {
        observed_generation.hash(h);
        (expected_claims, current_available, desired_available).hash(h);
        disruptions_allowed.hash(h);
        for DisruptedClaim {
            claim,
            uid,
            resource_version,
            // The model's clock is fixed.
            time: _,
        } in disrupted_claims
        {
            let version = Some(resource_version.clone());
            (claim, uid, ranks.rank(true, claim, &version)).hash(h);
        }
    }
}

/// Every copy of a budget the state holds.
pub(super) fn state_budgets(state: &State) -> Vec<&ServerDisruptionBudget> {
    let mut out: Vec<&ServerDisruptionBudget> = state.truth.budgets.values().collect();
    let ctl = &state.claim_ctl;
    out.extend(ctl.binder.world().budgets().all().map(|b| &**b));
    out.extend(ctl.budget_events.iter().filter_map(|(_, b)| b.as_ref()));
    for in_flight in [&ctl.in_flight, &state.handed_over] {
        if let Some(InFlight::Claim { records, .. }) = in_flight {
            out.extend(records.iter());
        }
    }
    out
}

/// Every copy of a quota the state holds.
pub(super) fn state_quotas(state: &State) -> Vec<&ServerQuota> {
    let mut out: Vec<&ServerQuota> = state.truth.quotas.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.world().quotas().iter().map(|q| &**q));
        out.extend(ctl.quota_events.iter().filter_map(|(_, q)| q.as_ref()));
        out.extend(ctl.recounts.iter());
        if let Some(InFlight::Claim { charges, .. }) = &ctl.in_flight {
            out.extend(charges.iter());
        }
    }
    if let Some(InFlight::Claim { charges, .. }) = &state.handed_over {
        out.extend(charges.iter());
    }
    out
}

pub(super) fn state_claims(state: &State) -> Vec<&CachedClaim> {
    let mut out: Vec<&CachedClaim> = state.truth.claims.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.world().claims().iter());
        out.extend(ctl.claim_events.iter().filter_map(|(_, c)| c.as_ref()));
        if let Some(InFlight::Claim { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    if let Some(InFlight::Claim { base, object, .. }) = &state.handed_over {
        out.push(base);
        out.extend(object.iter());
    }
    out
}

pub(super) fn state_servers(state: &State) -> Vec<&CachedServer> {
    let mut out: Vec<&CachedServer> = state.truth.servers.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.world().servers().iter());
        out.extend(ctl.server_events.iter().filter_map(|(_, s)| s.as_ref()));
        if let Some(InFlight::CachedServer { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    out
}
