//! The model check's steps: what either controller, the user and the scheduler may do next.

use super::*;

pub(super) const BOTH: [Who; 2] = [Who::ClaimController, Who::ServerController];

pub(super) fn successors(state: &State, scenario: &Scenario) -> Vec<(String, State)> {
    let mut out = Vec::new();
    for who in BOTH {
        out.extend(deliveries(state, who));
        let ctl = match who {
            Who::ClaimController => &state.claim_ctl,
            Who::ServerController => &state.server_ctl,
        };
        if ctl.in_flight.is_some() {
            out.extend(perform_write(state.clone(), who));
            if state.faults > 0 {
                let mut next = state.clone();
                next.faults -= 1;
                let failed = injected_failure(state, who);
                abandon(&mut next, who, failed);
                out.push((format!("{who:?} write fails (injected)"), next));
            }
        } else {
            out.extend(reconciles(state, who));
        }
        out.extend(restarts(state, who));
        out.extend(recount_steps(state, who));
    }
    out.extend(handed_over_write(state));
    out.extend(backoffs_end(state));
    if let Some(op) = scenario
        .user_ops
        .get(state.next_user_op)
        .filter(|op| user_op_enabled(state, op))
    {
        let mut next = state.clone();
        next.next_user_op += 1;
        apply_user_op(&mut next, op);
        out.push((format!("user: {op:?}"), next));
    }
    if let Some(tenant) = scenario.tenant.as_ref().filter(|_| state.tenant_budget > 0) {
        for edit in &tenant.edits {
            if let Some(next) = tenant_edit(state, tenant.claim, edit) {
                out.push((format!("tenant: {edit:?} on claim {}", tenant.claim), next));
            }
        }
    }
    out
}

/// The tenant's `edit` of its claim, if it changes the claim and admission lets it in.
/// It writes with the resourceVersion it read, as `kubectl edit` does, so the stored
/// status stays and the generation moves with the spec.
pub(super) fn tenant_edit(state: &State, name: &str, edit: &TenantEdit) -> Option<State> {
    let old = state.truth.claims.get(name)?;
    let mut new = old.clone();
    match edit {
        TenantEdit::Annotate(key) => meta::set_annotation(&mut new, key),
        TenantEdit::Unannotate(key) => meta::remove_annotation(&mut new, key),
        TenantEdit::Point(server) => new = new.names(server),
        TenantEdit::Unpoint => new.spec.server_ref = None,
        TenantEdit::Select(key, value) => new = new.selects(&[(key, value)]),
    }
    if new == *old || !admits_claim_update(old, &new) {
        return None;
    }
    let mut next = state.clone();
    next.tenant_budget -= 1;
    next.truth_mut().write_claim(&new).ok()?;
    next.note_user_ref(name);
    next.claim_changed(name);
    Some(next)
}

/// The next watch event of the other kind, or of the quotas, reaches the controller's
/// cache.
pub(super) fn deliveries(state: &State, who: Who) -> Vec<(String, State)> {
    let mut out = Vec::new();
    if !state.ctl_ref(who).quota_events.is_empty() {
        let mut next = state.clone();
        let ctl = next.ctl(who);
        let (name, obj) = ctl.quota_events.pop_front().expect("an event");
        ctl.see_quota(who, &name, obj);
        out.push((format!("{who:?} sees quota {name} change"), next));
        // Or the watch expires (410) and lists again: every change at once, no event
        // of its own (`Feed::relist`).
        let mut next = state.clone();
        let quotas = next.truth.quotas.values().cloned().map(Arc::new).collect();
        let ctl = next.ctl(who);
        ctl.quota_events.clear();
        // A relist rings the recount, as the binary's watch does.
        ctl.recount_due = true;
        let wake = ctl.binder_mut().relist(quotas);
        ctl.wake(who, wake);
        out.push((format!("{who:?} lists the quotas again"), next));
    }
    match who {
        Who::ServerController => {
            if !state.server_ctl.claim_events.is_empty() {
                let mut next = state.clone();
                let (name, obj) = next.server_ctl.claim_events.pop_front().expect("an event");
                next.server_ctl.see_claim(who, &name, obj);
                out.push((format!("{who:?} sees claim {name} change"), next));
            }
        }
        Who::ClaimController => {
            if !state.claim_ctl.budget_events.is_empty() {
                let mut next = state.clone();
                let ctl = &mut next.claim_ctl;
                let (name, obj) = ctl.budget_events.pop_front().expect("an event");
                if let Some(budget) = obj {
                    ctl.see_budget(budget);
                }
                out.push((format!("{who:?} sees budget {name} change"), next));
            }
            if !state.claim_ctl.server_events.is_empty() {
                let mut next = state.clone();
                let (name, obj) = next.claim_ctl.server_events.pop_front().expect("an event");
                next.claim_ctl.see_server(who, &name, obj);
                out.push((format!("{who:?} sees server {name} change"), next));
            }
        }
    }
    out
}

/// A crash (the controller relists and wakes everything) or a resync (everything of its
/// kind is woken), while their budgets last.
pub(super) fn restarts(state: &State, who: Who) -> Vec<(String, State)> {
    let mut out = Vec::new();
    if state.crashes > 0 {
        let mut next = state.clone();
        next.crashes -= 1;
        *next.ctl(who) = Ctl::fresh(&next.truth, who, &next.protocol, &next.default_gates);
        out.push((format!("{who:?} crashes and restarts"), next));
    }
    if let Some(next) = hand_over(state, who) {
        out.push((
            format!("{who:?} hands over to a new process, its plan still in flight"),
            next,
        ));
    }
    let all = everything(&state.truth, who);
    if state.resyncs > 0 && !all.is_subset(&state.ctl_ref(who).woken) {
        let mut next = state.clone();
        next.resyncs -= 1;
        next.ctl(who).woken.extend(all);
        out.push((format!("{who:?} resyncs"), next));
    }
    out
}

/// The quotas' recount of this process (`src/controllers/quota.rs`), in two steps: it
/// reads (its cache, then each charge's claim the cache does not show, live) and
/// decides each quota's status; later, it writes them one by one, each at the
/// resourceVersion it read. A conflict leaves the quota to the next round (the
/// periodic one, here: the recount is due again).
pub(super) fn recount_steps(state: &State, who: Who) -> Vec<(String, State)> {
    let ctl = state.ctl_ref(who);
    let mut out = Vec::new();
    if ctl.recount_due && ctl.recounts.is_empty() {
        let mut next = state.clone();
        let recounts = recount_now(state, who);
        let ctl = next.ctl(who);
        ctl.recount_due = false;
        ctl.recounts = recounts;
        out.push((format!("{who:?} process recounts the quotas"), next));
    }
    if let Some(quota) = ctl.recounts.first() {
        let mut next = state.clone();
        next.ctl(who).recounts.remove(0);
        let name = meta::name(quota).to_string();
        let charged: Vec<&str> = quota::charges(quota)
            .iter()
            .map(|c| c.claim.as_str())
            .collect();
        let label = match next.truth_mut().write_quota_status(quota, true) {
            Ok(_) => {
                next.quota_changed(&name);
                format!("{who:?} process's recount writes quota {name}: {charged:?}")
            }
            Err(Conflict) => {
                next.ctl(who).recount_due = true;
                format!("{who:?} process's recount of quota {name} conflicts")
            }
        };
        out.push((label, next));
    }
    out
}

/// What the recount of this process would write now: each quota its cache shows, with
/// its status counted anew by `quota::recount` from a live list of the claims (the
/// truth) and the claims the cache shows holding servers.
pub(super) fn recount_now(state: &State, who: Who) -> Vec<ServerQuota> {
    let binder = &state.ctl_ref(who).binder;
    let mut out = Vec::new();
    for mut seen in binder.world().recounts() {
        let namespace = meta::namespace(&seen.quota);
        let of_namespace = |c: &&CachedClaim| meta::namespace(*c) == namespace;
        let live = match state.protocol.recount_reads_live {
            true => quota::live_claims(state.truth.claims.values().filter(of_namespace)),
            // The mutant: the recount trusts the cache for what lives.
            false => quota::live_claims(binder.world().claims().iter().filter(of_namespace)),
        };
        if !state.protocol.restored_within_hard {
            seen.holders
                .iter_mut()
                .for_each(|h| h.holds = quota::Holds::Bound);
        }
        out.extend(seen.recounted(&live));
    }
    out
}

/// The claim controller's process hands over to a fresh one (it lists everything) while
/// its claim plan is still in flight, if the world allows one more hand-over.
fn hand_over(state: &State, who: Who) -> Option<State> {
    let claim_plan = matches!(state.ctl_ref(who).in_flight, Some(InFlight::Claim { .. }));
    if state.handovers == 0 || !claim_plan || state.handed_over.is_some() {
        return None;
    }
    let mut next = state.clone();
    next.handovers -= 1;
    next.handed_over = next.ctl(who).in_flight.take();
    *next.ctl(who) = Ctl::fresh(&next.truth, who, &next.protocol, &next.default_gates);
    Some(next)
}

/// The next write of the plan the claim controller's old process handed over with: it
/// lands at the version its decision read, as the binary's would after a hand-over on a
/// slow network, and reports to nobody; a conflict drops the rest, as in the binary.
pub(super) fn handed_over_write(state: &State) -> Vec<(String, State)> {
    let Some(InFlight::Claim {
        base,
        object,
        status,
        assumed,
        work,
        mut charges,
        mut records,
    }) = state.handed_over.clone()
    else {
        return Vec::new();
    };
    let mut next = state.clone();
    next.handed_over = None;
    let name = meta::name(&base).to_string();
    let protocol = next.protocol;
    let rest = |base, object, status, charges, records| InFlight::Claim {
        base,
        object,
        status,
        assumed: assumed.clone(),
        work: work.clone(),
        charges,
        records,
    };
    let label = if !records.is_empty() {
        let budget = records.remove(0);
        let on = meta::name(&budget).to_string();
        let written = next
            .truth_mut()
            .write_budget_status(&budget, protocol.record_precondition);
        if written.is_err() {
            return vec![(
                format!("the old process's record of claim {name} on budget {on} conflicts"),
                next,
            )];
        }
        next.budget_changed(&on);
        next.handed_over = Some(rest(base, object, status, charges, records));
        format!("the old process records claim {name}'s eviction on budget {on}")
    } else if !charges.is_empty() {
        let quota = charges.remove(0);
        let on = meta::name(&quota).to_string();
        let written = next
            .truth_mut()
            .write_quota_status(&quota, protocol.charge_precondition);
        if written.is_err() {
            return vec![(
                format!("the old process's charge of claim {name} conflicts"),
                next,
            )];
        }
        next.quota_changed(&on);
        next.handed_over = Some(rest(base, object, status, charges, records));
        format!("the old process charges claim {name} to quota {on}")
    } else if let Some(obj) = object {
        let Ok(written) = next.truth_mut().write_claim(&obj) else {
            return vec![(
                format!("the old process's write to claim {name} conflicts"),
                next,
            )];
        };
        next.claim_changed(&name);
        next.handed_over = status.map(|s| {
            let status = Some(Box::new(claim_status_after(&s, &base, &written)));
            rest(written, None, status, Vec::new(), Vec::new())
        });
        format!("the old process writes claim {name}")
    } else if let Some(s) = status {
        if next.truth_mut().write_claim_status(&base, &s).is_err() {
            return vec![(
                format!("the old process's status write to claim {name} conflicts"),
                next,
            )];
        }
        next.claim_changed(&name);
        format!("the old process writes claim {name}'s status")
    } else {
        "the old process has nothing left to write".to_string()
    };
    vec![(label, next)]
}

/// How many back-offs may end in one run: a claim refused for good retries, gives back,
/// picks again, and each round moves its generation, so the rounds are bounded as crashes
/// are. A back-off that never ends leaves a state that is never quiescent (unless its
/// claim can never bind), so no check is skipped wrongly, only not reached.
pub(super) const BACKOFF_ENDS: u8 = 2;

/// A claim's back-off ends: the claim controller's timer wakes it. A state where only
/// timers are left counts as quiescent (a timer fires later, like a resync), so what
/// must hold while a claim backs off is checked there.
pub(super) fn backoffs_end(state: &State) -> Vec<(String, State)> {
    if state.backoff_ends == 0 {
        return Vec::new();
    }
    let backing_off = state.backing_off();
    backing_off
        .into_iter()
        .map(|key| {
            let mut next = state.clone();
            next.backoff_ends -= 1;
            next.claim_ctl.binder_mut().end_backoff(&key, now().0);
            next.claim_ctl.woken.insert(key.name.clone());
            (format!("the back-off of claim {} ends", key.name), next)
        })
        .collect()
}

impl State {
    pub(super) fn ctl_ref(&self, who: Who) -> &Ctl {
        match who {
            Who::ClaimController => &self.claim_ctl,
            Who::ServerController => &self.server_ctl,
        }
    }
}

/// A claim plan's write failed (`failed`: how its object write ended, if that was it):
/// the plan is abandoned.
pub(super) fn fail_claim_write(
    next: &mut State,
    base: CachedClaim,
    (assumed, work): (Option<String>, Arc<ClaimWork>),
    failed: Option<ObjectWrite<'_>>,
) {
    next.claim_ctl.in_flight = Some(InFlight::Claim {
        base,
        object: None,
        status: None,
        assumed,
        work,
        charges: Vec::new(),
        records: Vec::new(),
    });
    abandon(next, Who::ClaimController, failed);
}

/// A failed or conflicting write: the rest of the plan is dropped, the object is woken
/// again (the controller requeues it), and a failed claim object write is reported to
/// the binder (a pick's assumption ends; a refusal starts a back-off).
pub(super) fn abandon(state: &mut State, who: Who, failed: Option<ObjectWrite<'_>>) {
    let ctl = state.ctl(who);
    let Some(in_flight) = ctl.in_flight.take() else {
        return;
    };
    let name = in_flight.name();
    if let (InFlight::Claim { work, base, .. }, Some(failed)) = (&in_flight, failed) {
        ctl.claim_object_written(work, base, failed);
    }
    ctl.woken.insert(name);
}

/// How an injected failure of the controller's next write is reported: a claim's object
/// write is refused (the binary backs off after any failure but a conflict); a failed
/// charge ends the pick as a conflict would.
pub(super) fn injected_failure(state: &State, who: Who) -> Option<ObjectWrite<'static>> {
    match &state.ctl_ref(who).in_flight {
        Some(InFlight::Claim {
            charges, records, ..
        }) if !charges.is_empty() || !records.is_empty() => Some(ObjectWrite::Conflict),
        Some(InFlight::Claim {
            object: Some(_), ..
        }) => Some(ObjectWrite::Refused("refused (injected)")),
        _ => None,
    }
}

pub(super) fn reconciles(state: &State, who: Who) -> Vec<(String, State)> {
    let ctl = state.ctl_ref(who);
    let mut out = Vec::new();
    for name in &ctl.woken {
        out.extend(match who {
            Who::ClaimController => claim_reconciles(state, name),
            Who::ServerController => server_reconcile(state, name),
        });
    }
    out
}

/// The reconcile of a woken object that finds nothing to write.
pub(super) fn nothing_to_do(state: &State, who: Who, name: &str) -> (String, State) {
    let mut next = state.clone();
    next.ctl(who).woken.remove(name);
    (format!("{who:?} finds nothing to do for {name}"), next)
}

/// The steps a claim reconcile may reach, through the binder, with the live read when it
/// asks: every pick is explored both seeing and not yet seeing the claims that name its
/// server (the real claim cache lags a little, and another process's claims more).
/// Hiding them never makes a claim wait, so the blind branch adds no waiting the real
/// cache would not later wake.
pub(super) fn claim_steps(state: &State, claim: &CachedClaim) -> Vec<(ClaimStep, Sight)> {
    let binder = &state.claim_ctl.binder;
    let read = |server: &str| state.truth.servers.get(server).cloned();
    let mut out: Vec<(ClaimStep, Sight)> = Vec::new();
    let mut decisions: Vec<ClaimDecision> = Vec::new();
    for sight in [Sight::All, Sight::NotYetRivals] {
        let step = |live: LiveServer<'_>| binder.claim_step(claim, live, sight, now().0);
        let step = claim_step_reading(step, read);
        let decision = match &step {
            ClaimStep::Act(work) => work.decision.clone(),
            ClaimStep::Wait { decision, .. } => (**decision).clone(),
            ClaimStep::Idle | ClaimStep::ReadServer(_) => continue,
        };
        if !decisions.contains(&decision) {
            decisions.push(decision);
            out.push((step, sight));
        }
    }
    out
}

/// Whether a step changes nothing: it writes nothing and takes up no pick (a step that
/// waits or idles).
pub(super) fn writes_nothing(step: &ClaimStep) -> bool {
    match step {
        ClaimStep::Act(work) => {
            work.plan.is_noop() && work.picked.is_none() && work.charges.is_empty()
        }
        _ => true,
    }
}

/// A claim reconcile: each step the binder may take, started on the claim controller's
/// binder (a pick starts its assumption there).
pub(super) fn claim_reconciles(state: &State, name: &str) -> Vec<(String, State)> {
    let Some(claim) = claim_as_is(state, name) else {
        return vec![nothing_to_do(state, Who::ClaimController, name)];
    };
    let mut out = Vec::new();
    for (step, sight) in claim_steps(state, claim) {
        let ClaimStep::Act(work) = &step else {
            out.push(nothing_to_do(state, Who::ClaimController, name));
            continue;
        };
        if writes_nothing(&step) {
            out.push(nothing_to_do(state, Who::ClaimController, name));
            continue;
        }
        let mut next = state.clone();
        next.claim_ctl.woken.remove(name);
        next.claim_ctl.binder_mut().start(claim, &step);
        // One process: what starting the step wakes reaches the server controller too.
        next.server_ctl
            .wake(Who::ServerController, work.wakes.clone());
        let blind = match sight {
            Sight::All => "",
            Sight::NotYetRivals => " (not yet seeing the claims naming it)",
        };
        let label = format!("decides {:?} for claim {name}{blind}", work.decision);
        if work.plan.is_noop() && work.charges.is_empty() && work.records.is_empty() {
            out.push((format!("ClaimController {label}"), next));
            continue;
        }
        // A pick taken up without a write has nothing to report of an object write.
        let assumed = work.picked.clone().filter(|_| work.plan.object.is_some());
        next.claim_ctl.in_flight = Some(InFlight::Claim {
            base: claim.clone(),
            object: work.plan.object.clone(),
            status: work.plan.status.clone().map(Box::new),
            assumed,
            work: Arc::new((**work).clone()),
            // The quotas as charged: at the version read, a patch of the charge stores
            // exactly these.
            charges: work.charges.iter().map(|c| c.charged.clone()).collect(),
            // The budgets as recorded, likewise; none when the mutant records nothing.
            records: match next.protocol.record_evictions {
                true => work.records.iter().map(|r| r.recorded.clone()).collect(),
                false => Vec::new(),
            },
        });
        push_decided(&mut out, next, Who::ClaimController, label);
    }
    out
}

/// The server controller's step for a server it caches, through its binder, beside the
/// claim controller's picks in flight: in the binary both controllers share one binder.
pub(super) fn server_work(state: &State, server: &CachedServer) -> ServerWork {
    let binder = &state.server_ctl.binder;
    let claim_side = &state.claim_ctl.binder;
    let read = |r: &ServerClaimRef| state.truth.claims.get(&r.name).cloned();
    let step = |live: LiveClaim<'_>| binder.server_step(Some(claim_side), server, live, now().0);
    match server_step_reading(step, read) {
        ServerStep::Act(work) => *work,
        ServerStep::ReadClaim(_) => unreachable!("a step after a live read asks no more"),
    }
}

/// Whether reconciling `name` now would write nothing, whichever way it looks.
pub(super) fn would_do_nothing(state: &State, who: Who, name: &str) -> bool {
    match who {
        // Each sight in turn, as `claim_steps` takes them: the first that writes answers.
        Who::ClaimController => claim_as_is(state, name).is_none_or(|c| {
            let binder = &state.claim_ctl.binder;
            let read = |server: &str| state.truth.servers.get(server).cloned();
            let mut decisions: Vec<ClaimDecision> = Vec::new();
            [Sight::All, Sight::NotYetRivals].into_iter().all(|sight| {
                let step = |live: LiveServer<'_>| binder.claim_step(c, live, sight, now().0);
                let step = claim_step_reading(step, read);
                let decision = match &step {
                    ClaimStep::Act(work) => work.decision.clone(),
                    ClaimStep::Wait { decision, .. } => (**decision).clone(),
                    ClaimStep::Idle | ClaimStep::ReadServer(_) => return true,
                };
                if decisions.contains(&decision) {
                    return true;
                }
                decisions.push(decision);
                writes_nothing(&step)
            })
        }),
        Who::ServerController => state
            .server_ctl
            .binder
            .world()
            .server_as_is(name)
            .is_none_or(|s| server_work(state, s).plan.is_noop()),
    }
}

/// What [`reconcile_idle`] found of states that share their binders and truth (the same
/// objects, not equal ones): whether a woken object would do nothing, and whether a
/// recount would write nothing, follow from those alone. Successors of one state share
/// most of them, and each holds on to what it shares, so an entry never outlives them.
#[derive(Clone, Default)]
pub(super) struct IdleMemo(Vec<IdleEntry>);

#[derive(Clone)]
struct IdleEntry {
    claim_binder: Arc<Binder>,
    server_binder: Arc<Binder>,
    truth: Arc<Truth>,
    who: Who,
    /// The object woken; `None`: the process's recount.
    name: Option<String>,
    idle: bool,
}

impl IdleEntry {
    /// Whether this entry answers for `state` (a recount reads only its own binder).
    fn is_of(&self, state: &State) -> bool {
        let claim_side = Arc::ptr_eq(&self.claim_binder, &state.claim_ctl.binder);
        let server_side = Arc::ptr_eq(&self.server_binder, &state.server_ctl.binder);
        Arc::ptr_eq(&self.truth, &state.truth)
            && match (self.who, &self.name) {
                (Who::ClaimController, Some(_)) => claim_side,
                (Who::ServerController, Some(_)) => claim_side && server_side,
                (Who::ClaimController, None) => claim_side,
                (Who::ServerController, None) => server_side,
            }
    }
}

impl IdleMemo {
    fn idle(&mut self, state: &State, who: Who, name: Option<&str>) -> bool {
        let found = self
            .0
            .iter()
            .find(|e| e.who == who && e.name.as_deref() == name && e.is_of(state));
        if let Some(e) = found {
            return e.idle;
        }
        let idle = match name {
            Some(name) => would_do_nothing(state, who, name),
            None => recount_now(state, who).is_empty(),
        };
        self.0.push(IdleEntry {
            claim_binder: state.claim_ctl.binder.clone(),
            server_binder: state.server_ctl.binder.clone(),
            truth: state.truth.clone(),
            who,
            name: name.map(str::to_string),
            idle,
        });
        idle
    }

    /// The entries that answer for `state`.
    pub(super) fn of(&self, state: &State) -> Self {
        Self(self.0.iter().filter(|e| e.is_of(state)).cloned().collect())
    }
}

/// A reduction: a woken object whose reconcile would write nothing is reconciled at
/// once. This loses no behaviour the check cares about: if a later step changes what it
/// would decide, that step must wake it again, and a missing wake-up then shows up as a
/// state that does not converge, sooner than without the reduction.
pub(super) fn reconcile_idle(state: &mut State, memo: &mut IdleMemo) -> bool {
    let mut changed = false;
    for who in BOTH {
        let idle: Vec<String> = state
            .ctl_ref(who)
            .woken
            .iter()
            .filter(|name| memo.idle(state, who, Some(name)))
            .cloned()
            .collect();
        changed |= !idle.is_empty();
        for name in idle {
            state.ctl(who).woken.remove(&name);
        }
        // Likewise a recount that would write nothing runs at once: only a claim gone
        // (or a conflict) rings it again.
        let ctl = state.ctl_ref(who);
        if ctl.recount_due && ctl.recounts.is_empty() && memo.idle(state, who, None) {
            state.ctl(who).recount_due = false;
            changed = true;
        }
    }
    changed
}

pub(super) fn server_reconcile(state: &State, name: &str) -> Vec<(String, State)> {
    // The server as it is, as the binary's watch hands it over: never the classes' view,
    // whose labels no write may carry.
    let Some(server) = state.server_ctl.binder.world().server_as_is(name) else {
        return vec![nothing_to_do(state, Who::ServerController, name)];
    };
    let ServerWork { decision, plan, .. } = server_work(state, server);
    if plan.is_noop() {
        return vec![nothing_to_do(state, Who::ServerController, name)];
    }
    let mut next = state.clone();
    next.server_ctl.woken.remove(name);
    next.server_ctl.in_flight = Some(InFlight::CachedServer {
        base: server.clone(),
        object: plan.object,
        status: plan.status,
    });
    let mut out = Vec::new();
    let label = format!("decides {decision:?} for server {name}");
    push_decided(&mut out, next, Who::ServerController, label);
    out
}

/// A decision and its first write form one step: the write's precondition is on the
/// controller's own kind, which nobody else writes (users aside), so writing later would
/// only look like the other controller lagging, which the model explores anyway. The
/// second write of a plan (the status after the object) stays a step of its own, so a
/// crash can fall between them. A hand-over is the exception: a new process deciding
/// before the old one's first write lands is no lag, so in worlds with hand-overs the
/// process may also hand over with its whole plan in flight.
pub(super) fn push_decided(
    out: &mut Vec<(String, State)>,
    decided: State,
    who: Who,
    label: String,
) {
    if let Some(handed) = hand_over(&decided, who) {
        out.push((
            format!("{who:?} {label}; hands over before writing"),
            handed,
        ));
    }
    if decided.faults > 0 {
        let mut failed = decided.clone();
        failed.faults -= 1;
        let injected = injected_failure(&failed, who);
        abandon(&mut failed, who, injected);
        out.push((
            format!("{who:?} {label}; its write fails (injected)"),
            failed,
        ));
    }
    for (wrote, next) in perform_write(decided, who) {
        out.push((format!("{who:?} {label}; {wrote}"), next));
    }
}

/// Performs the next write of the controller's plan against the truth. A pick's claim
/// write yields two successors: its watch event before its response, and after; with a
/// fault budget, a third where the write happens but its response is lost.
pub(super) fn perform_write(mut next: State, who: Who) -> Vec<(String, State)> {
    let Some(in_flight) = next.ctl(who).in_flight.take() else {
        return Vec::new();
    };
    match in_flight {
        InFlight::Claim {
            base,
            object,
            status,
            assumed,
            work,
            mut charges,
            mut records,
        } => {
            if !records.is_empty() {
                let budget = records.remove(0);
                let rest = InFlight::Claim {
                    base,
                    object,
                    status,
                    assumed,
                    work,
                    charges,
                    records,
                };
                return record_write(next, budget, rest);
            }
            if charges.is_empty() {
                return claim_write(next, base, object, status.map(|s| *s), (assumed, work));
            }
            let quota = charges.remove(0);
            let rest = InFlight::Claim {
                base,
                object,
                status,
                assumed,
                work,
                charges,
                records,
            };
            charge_write(next, quota, rest)
        }
        InFlight::CachedServer {
            base,
            object,
            status,
        } => {
            let name = meta::name(&base).to_string();
            if let Some(obj) = &object {
                next.judge_server_write(&base, obj);
            }
            let result = match object {
                Some(obj) => {
                    next.truth_mut()
                        .write_server(&obj)
                        .map(|written| match (written, status) {
                            (Some(written), Some(status)) => Some(InFlight::CachedServer {
                                status: Some(server_status_after(&status, &base, &written)),
                                base: written,
                                object: None,
                            }),
                            _ => None,
                        })
                }
                None => {
                    let s = status.expect("a plan in flight writes something");
                    next.truth_mut()
                        .write_server_status(&base, &s)
                        .map(|_| None)
                }
            };
            match result {
                Ok(rest) => {
                    next.note_holders();
                    next.server_changed(&name);
                    next.server_ctl.in_flight = rest;
                    vec![(format!("writes server {name}"), next)]
                }
                Err(Conflict) => {
                    next.server_ctl.in_flight = Some(InFlight::CachedServer {
                        base,
                        object: None,
                        status: None,
                    });
                    abandon(&mut next, who, None);
                    vec![(format!("write to server {name} conflicts"), next)]
                }
            }
        }
    }
}

/// A budget record of a claim plan, before any other of its writes: the budget's status
/// with the eviction recorded, at the resourceVersion the decision read. A conflict drops
/// the rest of the plan, as a conflicting charge does (`src/controllers/claim.rs`).
pub(super) fn record_write(
    mut next: State,
    budget: ServerDisruptionBudget,
    rest: InFlight,
) -> Vec<(String, State)> {
    let (name, claim) = (meta::name(&budget).to_string(), rest.name());
    let precondition = next.protocol.record_precondition;
    next.claim_ctl.in_flight = Some(rest);
    if next
        .truth_mut()
        .write_budget_status(&budget, precondition)
        .is_err()
    {
        abandon(&mut next, Who::ClaimController, Some(ObjectWrite::Conflict));
        return vec![(
            format!("record of claim {claim}'s eviction on budget {name} conflicts"),
            next,
        )];
    }
    next.budget_changed(&name);
    vec![(
        format!("records claim {claim}'s eviction on budget {name}"),
        next,
    )]
}

/// A charge of a claim plan, before any other of its writes: the quota's status with the
/// charge added, at the resourceVersion the decision read. A conflict drops the rest of
/// the plan and tells the binder as a conflicting object write would
/// (`src/controllers/claim.rs`).
pub(super) fn charge_write(
    mut next: State,
    quota: ServerQuota,
    rest: InFlight,
) -> Vec<(String, State)> {
    let (name, claim) = (meta::name(&quota).to_string(), rest.name());
    let precondition = next.protocol.charge_precondition;
    next.claim_ctl.in_flight = Some(rest);
    if next
        .truth_mut()
        .write_quota_status(&quota, precondition)
        .is_err()
    {
        abandon(&mut next, Who::ClaimController, Some(ObjectWrite::Conflict));
        return vec![(
            format!("charge of claim {claim} to quota {name} conflicts"),
            next,
        )];
    }
    next.quota_changed(&name);
    if let Some(InFlight::Claim {
        object: None,
        status: None,
        charges,
        ..
    }) = &next.claim_ctl.in_flight
        && charges.is_empty()
    {
        next.claim_ctl.in_flight = None;
    }
    vec![(format!("charges claim {claim} to quota {name}"), next)]
}

/// The next write of a claim plan. `pick` is the server the plan's pick assumed (until
/// its object write's result) and the binder's step.
pub(super) fn claim_write(
    mut next: State,
    base: CachedClaim,
    object: Option<CachedClaim>,
    status: Option<ServerClaimStatus>,
    pick: (Option<String>, Arc<ClaimWork>),
) -> Vec<(String, State)> {
    let (assumed, work) = pick;
    let name = meta::name(&base).to_string();
    if let Some(obj) = &object
        && next.refuses.is_some_and(|refuses| refuses(&base, obj))
    {
        let refused = ObjectWrite::Refused("denied by admission");
        fail_claim_write(&mut next, base, (assumed, work), Some(refused));
        return vec![(format!("write to claim {name} is refused"), next)];
    }
    let object_write = object.is_some();
    let result = match object {
        Some(obj) => next.truth_mut().write_claim(&obj).map(|written| {
            status.map(|s| InFlight::Claim {
                status: Some(Box::new(claim_status_after(&s, &base, &written))),
                base: written,
                object: None,
                assumed: None,
                work: work.clone(),
                charges: Vec::new(),
                records: Vec::new(),
            })
        }),
        None => {
            let s = status.expect("a plan in flight writes something");
            let written = next.truth_mut().write_claim_status(&base, &s).map(|_| None);
            if written.is_ok() {
                next.claim_ctl
                    .binder_mut()
                    .claim_status_written(&work, now().0);
            }
            written
        }
    };
    let rest = match result {
        Ok(rest) => rest,
        Err(Conflict) => {
            let failed = object_write.then_some(ObjectWrite::Conflict);
            fail_claim_write(&mut next, base, (assumed, work), failed);
            return vec![(format!("write to claim {name} conflicts"), next)];
        }
    };
    next.claim_ctl.in_flight = rest;
    if assumed.is_none() {
        next.claim_changed(&name);
        return vec![(format!("writes claim {name}"), next)];
    }
    let written = next.truth.claim(&name).clone();
    let mut out = Vec::new();
    let mut response_first = next.clone();
    response_first
        .claim_ctl
        .claim_object_written(&work, &base, ObjectWrite::Written(&written));
    response_first.claim_changed(&name);
    out.push((
        format!("writes claim {name} (response, then event)"),
        response_first,
    ));
    if next.faults > 0 {
        let mut lost = next.clone();
        lost.faults -= 1;
        lost.claim_changed(&name);
        let lost_response = ObjectWrite::Refused("response lost (injected)");
        lost.claim_ctl
            .claim_object_written(&work, &base, lost_response);
        lost.claim_ctl.in_flight = None;
        lost.claim_ctl.woken.insert(name.clone());
        out.push((
            format!("writes claim {name}, but the response is lost (injected)"),
            lost,
        ));
    }
    next.claim_changed(&name);
    next.claim_ctl
        .claim_object_written(&work, &base, ObjectWrite::Written(&written));
    out.push((format!("writes claim {name} (event, then response)"), next));
    out
}

/// Whether the next user action can happen now: time passing ages a taint's grace only
/// once the server controller stamped it (before, the stamp would take the later time).
fn user_op_enabled(state: &State, op: &UserOp) -> bool {
    match op {
        UserOp::EditServer(name, ServerEdit::GraceRunsOut) => {
            let server = state.truth.servers.get(*name);
            server.is_some_and(|s| s.spec.taints.iter().any(|t| t.time_added.is_some()))
        }
        _ => true,
    }
}

pub(super) fn apply_user_op(state: &mut State, op: &UserOp) {
    match op {
        UserOp::DeleteClaim(name) => {
            state.truth_mut().delete_claim(name);
            state.claim_changed(name);
        }
        UserOp::StartCleaner(cleaner, server, gate) => start_cleaner(state, cleaner, server, gate),
        UserOp::FinishCleaner(cleaner) => finish_cleaner(state, cleaner),
        UserOp::SetGates(name, gates) => {
            let admitted = gates.iter().all(|g| (state.protocol.gate_admitted)(g));
            if admitted && let Some(s) = state.truth.servers.get(*name).cloned() {
                state.truth_mut().put_server(s.gates(gates));
                state.server_changed(name);
            }
        }
        UserOp::RestartServerController(gates) => {
            state.default_gates = gates.iter().map(|g| g.to_string()).collect();
            let (p, gates) = (&state.protocol, &state.default_gates);
            state.server_ctl = Ctl::fresh(&state.truth, Who::ServerController, p, gates);
        }
        UserOp::CreateQuota(quota) => create_quota(state, quota),
        UserOp::EditClass(name, class) => edit_class(state, name, class.as_deref()),
        UserOp::DeleteQuota(name) => {
            state.truth_mut().quotas.remove(*name);
            state.over_at_creation.retain(|(q, _)| q != name);
            state.quota_changed(name);
        }
        UserOp::WipeQuotaStatus(name) => {
            if let Some(mut wiped) = state.truth.quotas.get(*name).cloned() {
                wiped.status = None;
                let _ = state.truth_mut().write_quota_status(&wiped, false);
                state.quota_changed(name);
            }
        }
        UserOp::CreateClaim(claim) => {
            state.truth_mut().put_claim((**claim).clone());
            state.note_user_ref(meta::name(&**claim));
            state.claim_changed(meta::name(&**claim));
        }
        UserOp::AddSelector(name, key, value) => {
            if let Some(c) = state.truth.claims.get(*name).cloned() {
                state.truth_mut().put_claim(c.selects(&[(*key, *value)]));
                state.claim_changed(name);
            }
        }
        UserOp::EditServer(name, edit) => {
            if let Some(mut s) = state.truth.servers.get(*name).cloned() {
                match edit {
                    ServerEdit::Cordon => s.spec.unclaimable = true,
                    ServerEdit::Uncordon => s.spec.unclaimable = false,
                    ServerEdit::Taint(key) => s = s.taint(key),
                    ServerEdit::Evict(key) => s.spec.taints.push(Taint {
                        key: key.to_string(),
                        value: None,
                        effect: TaintEffect::Evict,
                        time_added: None,
                        hard_deadline: None,
                    }),
                    ServerEdit::Untaint => s.spec.taints.clear(),
                    ServerEdit::Label(k, v) => s = s.labelled(&[(k, v)]),
                    ServerEdit::ClearRef => s.spec.server_claim_ref = None,
                    ServerEdit::GraceRunsOut => {
                        let hour_ago = now().0 - k8s_openapi::jiff::SignedDuration::from_hours(1);
                        for t in &mut s.spec.taints {
                            if t.time_added.is_some() {
                                t.time_added = Some(
                                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(hour_ago),
                                );
                            }
                        }
                    }
                }
                state.truth_mut().put_server(s);
                state.server_changed(name);
                if matches!(edit, ServerEdit::GraceRunsOut) {
                    // The claim controller's timer at the deadline.
                    let all = everything(&state.truth, Who::ClaimController);
                    state.claim_ctl.woken.extend(all);
                }
            }
        }
    }
}

/// A quota exists for the binder once the server controller, which binds, has seen it:
/// a bind it decides on a cache that does not show the quota yet counts like a claim
/// bound before the quota existed (as Kubernetes' quota admits what its informer has not
/// seen a quota for). Until then, what the quota's namespace holds above it is exempt.
/// Whether it noted any.
pub(super) fn note_quotas_unseen(state: &mut State) -> bool {
    let seen = state.server_ctl.binder.world().quotas();
    let unseen: Vec<String> = state
        .truth
        .quotas
        .values()
        .filter(|q| seen.quota(meta::namespace(*q), meta::name(*q)).is_none())
        .map(|q| meta::name(q).to_string())
        .collect();
    if unseen.is_empty() {
        return false;
    }
    let over = over_quota(&state.truth).into_iter();
    let over = over.filter(|(q, _)| unseen.contains(q));
    let before = state.over_at_creation.len();
    state.over_at_creation.extend(over.collect::<Vec<_>>());
    state.over_at_creation.len() != before
}

/// An admin edits or deletes a class; both binders see it at once.
pub(super) fn edit_class(state: &mut State, name: &str, class: Option<&ServerClass>) {
    state.truth_mut().classes.retain(|c| meta::name(c) != name);
    state.truth_mut().classes.extend(class.cloned());
    for who in [Who::ClaimController, Who::ServerController] {
        let ctl = state.ctl(who);
        let wake = match class {
            Some(class) => ctl.binder_mut().apply(Arc::new(class.clone())),
            // A deletion is fed by the class's name alone.
            None => ctl
                .binder_mut()
                .delete(Arc::new(ServerClass::new(name, Default::default()))),
        };
        ctl.wake(who, wake);
    }
}

/// An admin creates a quota: a new object, no status, generation 1. What its namespace
/// holds above it now is not the binder's doing (invariant 7 counts from here).
pub(super) fn create_quota(state: &mut State, quota: &ServerQuota) {
    let name = meta::name(quota).to_string();
    let mut created = quota.clone();
    created.status = None;
    created.metadata.generation = Some(1);
    state.truth_mut().put_quota(created);
    let over = over_quota(&state.truth)
        .into_iter()
        .filter(|(q, _)| *q == name);
    state.over_at_creation.extend(over);
    state.quota_changed(&name);
}

/// A cleaner reads the server: the release it is being cleaned after (or, if none, the
/// generation, as a sloppy cleaner would), and the dirt its work will clean.
pub(super) fn start_cleaner(state: &mut State, cleaner: &'static str, server: &str, gate: &str) {
    let Some(s) = state.truth.servers.get(server) else {
        return;
    };
    let read = gates::release_record(s).and_then(|r| r.release);
    let release = read.unwrap_or(s.meta().generation.unwrap_or(0));
    let cleans = state
        .dirty
        .iter()
        .filter(|(s, g, _)| s == server && g == gate)
        .cloned()
        .collect();
    let work = Cleaner {
        server: server.to_string(),
        gate: gate.to_string(),
        release,
        cleans,
    };
    state.cleaners.insert(cleaner, work);
}

/// The cleaner passes its gate, naming the release it read: the dirt it cleaned is clean.
pub(super) fn finish_cleaner(state: &mut State, cleaner: &str) {
    let Some(work) = state.cleaners.remove(cleaner) else {
        return;
    };
    for dirt in &work.cleans {
        state.dirty.remove(dirt);
    }
    if let Some(mut s) = state.truth.servers.get(&work.server).cloned() {
        let pass = gates::pass_condition(&work.gate, work.release, &now());
        let status = s.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != work.gate);
        status.conditions.push(pass);
        state.truth_mut().put_server(s);
        state.server_changed(&work.server);
    }
}
