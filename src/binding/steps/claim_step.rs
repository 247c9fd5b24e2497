//! One step of a claim: its decision as the world and the claim side show it, the plan
//! that carries it out, and what holds the writes back (a back-off, a summary written
//! too recently).

use std::borrow::Cow;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::CachedClaim;
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta;
use crate::binding::placement::PickInputs;
use crate::binding::protocol::claim_decision::{
    ClaimDecision, ClaimInputs, assumption_for, pass_over, restoring,
};
use crate::binding::protocol::claim_plan::plan_claim;
use crate::binding::protocol::coalesce::is_summary_refresh;
use crate::binding::protocol::winner::may_take_named;
use crate::binding::wakeups::Wake;
use crate::binding::world::World;
use crate::binding::world::classes::{ClassCheck, rebase};
use crate::binding::world::quota::QuotaCheck;
use crate::binding::world::view::{ClaimCatalog, ClaimView, Liveness, WithLiveServer};

use super::inputs::StepInputs;
use super::rules::Sight;
use super::turns::{FirstNamed, has_turn};
use super::work::{ClaimStep, ClaimWork, LiveServer};

/// The step for `claim` (as the cache or a live read shows it). `live` is the server a
/// previous [`ClaimStep::ReadServer`] named, as read (`None` inside: the API server says
/// NotFound). Starts nothing: the binder assumes a pick chosen when it starts the step.
pub fn claim_step(
    inputs: &StepInputs<'_>,
    claim: &CachedClaim,
    live: LiveServer<'_>,
    sight: Sight,
    now: Timestamp,
) -> ClaimStep {
    if meta::is_deleting(claim) {
        return ClaimStep::Idle;
    }
    let (world, claim_side) = (inputs.world, inputs.claim_side);
    let key = claim_key(claim);
    let (effective, class, quota) = as_its_class_makes_it(world, claim);
    let decision = decide(inputs, &effective, (&class, &quota), live, sight, now);
    let mut plan = plan_claim(&effective, &decision, &Time(now));
    // The plan starts from the view; the write, from the claim as it is.
    if let (false, Some(object)) = (std::ptr::eq(&*effective, claim), plan.object.as_mut()) {
        *object = rebase(object, claim);
    }
    if let Some(server) = plan.confirm_server {
        return ClaimStep::ReadServer(server);
    }
    let backing_off = claim_side.refused.backing_off(&key, now);
    let repeats_refused = backing_off.is_some_and(|r| r.write == decision.name());
    if let Some(after) = backing_off.and_then(|r| remaining(r.until, now))
        && (plan.is_noop() || repeats_refused && plan.object.is_some())
    {
        // Its status already says it backs off, or the plan would send the very
        // write the API server refused: look again when the back-off ends.
        let decision = Box::new(decision);
        return ClaimStep::Wait { decision, after };
    }
    if is_summary_refresh(claim, &plan)
        && let Some(after) = claim_side.summaries.delay(&key, now)
    {
        // At most one summary write per claim per interval (binding::protocol::coalesce).
        let decision = Box::new(decision);
        return ClaimStep::Wait { decision, after };
    }
    // A claim that waits is looked at again once its summary may be rewritten, so
    // the summary follows the servers within about one interval.
    let then = match backing_off {
        Some(r) => remaining(r.until, now),
        None => decision.waits().then(|| claim_side.summaries.interval()),
    };
    // A bind an eviction runs against is looked at again when it is due; one a budget
    // holds, at the hard deadline, and meanwhile as often as a waiting claim's summary.
    let due = decision.eviction_deadline().and_then(|d| remaining(d, now));
    let held = decision.budget_holds_until().map(|hard| {
        let interval = claim_side.summaries.interval();
        hard.and_then(|h| remaining(h, now))
            .map_or(interval, |h| h.min(interval))
    });
    let then = then.into_iter().chain(due).chain(held).min();
    // A restored pair is charged as a claim moving toward its bind (the server
    // controller completes it once it is).
    let moves = decision.moves_toward_bind() || restoring(claim, world.servers()).is_some();
    let charges = match (&quota, class.class()) {
        (QuotaCheck::Room(quotas), Some(class)) if moves => world.charges_for(claim, class, quotas),
        _ => Vec::new(),
    };
    // An eviction is recorded on the budgets covering the claim before it is written.
    let records = match decision.ends_a_bind_by_eviction() {
        true => world.budget_records(claim, &Time(now)),
        false => Vec::new(),
    };
    ClaimStep::Act(Box::new(ClaimWork {
        key,
        charges,
        records,
        wakes: wakes_on_start(&decision),
        picked: assumption_for(&decision).map(str::to_string),
        since_created: seconds_since_created(claim, now),
        decision,
        plan,
        then,
    }))
}

/// `claim` as its class makes it (and without servers while a full quota holds it),
/// with how it stands with its class and its quotas: what its decision reads. What the
/// decision writes goes onto the claim as it is ([`rebase`]).
pub fn as_its_class_makes_it<'a>(
    world: &'a World,
    claim: &'a CachedClaim,
) -> (Cow<'a, CachedClaim>, ClassCheck, QuotaCheck) {
    let class = world.classes().check(claim);
    let quota = world.quota_check_of(claim, &class);
    if let Some(view) = view_held_for(world, claim) {
        debug_assert_eq!(
            view,
            &*world.view_of(claim, &class),
            "the view the catalog holds, and the claim resolved again"
        );
        return (Cow::Borrowed(view), class, quota);
    }
    (world.view_of(claim, &class), class, quota)
}

/// The catalog's view of `claim` if `claim` is the very object the catalog resolved
/// (the watch's copy, which the controllers' store shares): the catalog resolves its
/// claims again whenever a class, a namespace or a quota changes, so its view is the
/// claim resolved now, without a copy.
fn view_held_for<'w>(world: &'w World, claim: &CachedClaim) -> Option<&'w CachedClaim> {
    let (namespace, name) = (meta::namespace(claim), meta::name(claim));
    let as_is = world.claim_as_is(namespace, name)?;
    std::ptr::eq(as_is, claim)
        .then(|| world.claims().claim(namespace, name))
        .flatten()
}

/// The decision for `claim` as its class makes it, by the claim's decider with what the
/// world and the claim side give it ([`with_claim_inputs`]).
fn decide(
    inputs: &StepInputs<'_>,
    claim: &CachedClaim,
    checks: (&ClassCheck, &QuotaCheck),
    live: LiveServer<'_>,
    sight: Sight,
    now: Timestamp,
) -> ClaimDecision {
    let world = inputs.world;
    let decide = inputs.rules.claim;
    with_claim_inputs(
        inputs,
        claim,
        checks,
        sight,
        now,
        |claim_inputs| match live {
            None => decide(claim, world.servers(), claim_inputs, Liveness::Cached),
            Some((name, live)) => {
                let live_view = live.and_then(|s| world.classes().resolve_server(s));
                let view = WithLiveServer {
                    base: world.servers(),
                    name,
                    live: live_view.as_ref().or(live),
                };
                decide(claim, &view, claim_inputs, Liveness::Confirmed)
            }
        },
    )
}

/// What a decision for `claim` (as its class makes it) weighs besides the servers, as
/// the world and the claim side show it: its class and quota `checks`, the servers
/// refusing writes, and the pick's inputs (the servers it passes over, the claims
/// waiting, the picks in flight). `decide` is called with them.
pub fn with_claim_inputs<R>(
    inputs: &StepInputs<'_>,
    claim: &CachedClaim,
    (class, quota): (&ClassCheck, &QuotaCheck),
    sight: Sight,
    now: Timestamp,
    decide: impl FnOnce(&ClaimInputs<'_>) -> R,
) -> R {
    let (world, claim_side) = (inputs.world, inputs.claim_side);
    let key = claim_key(claim);
    let held_back = claim_side.refused.held_back(now);
    let nobody;
    let (claims, waiting) = match sight {
        Sight::All => (world.claims(), world.claims().waiting()),
        Sight::NotYetRivals => {
            // Not their refs (their namespaces' turns count them as served).
            nobody = ClaimCatalog::new();
            (&nobody, world.claims().waiting_unseen())
        }
    };
    let assumed = &claim_side.assumed;
    let chosen_for_others = |server: &str| assumed.chosen_for_other(server, &key);
    let first = FirstNamed::default();
    let turn = |rival: &CachedClaim, server: &str| {
        may_take_named(server, rival, assumed, || {
            has_turn(inputs, rival, server, now, &first)
        })
    };
    let servers = world.servers();
    let passed_over = pass_over(claim, servers, claims, &chosen_for_others, &turn);
    let refuses = |server: &str| claim_side.refusing.contains(server, now);
    let skip = |server: &str| refuses(server) || passed_over(server);
    let refusing = claim_side.refusal_of(now);
    let evicting = |c: &CachedClaim| claim_side.evicting.contains(c);
    let budget_hold = |c: &CachedClaim| world.budget_hold(c, &evicting);
    decide(&ClaimInputs {
        class,
        quota,
        refusing: &refusing,
        pick: PickInputs {
            skip: &skip,
            refuses: &refuses,
            waiting,
            assumed,
            held_back: &held_back,
            refused: claim_side.refused.backing_off(&key, now),
            in_flight: inputs.in_flight,
        },
        now,
        budget_hold: &budget_hold,
    })
}

/// Whom a decision wakes as soon as it starts: a pick taken up without a write wakes its
/// server.
fn wakes_on_start(decision: &ClaimDecision) -> Wake {
    let mut wake = Wake::default();
    if let ClaimDecision::ResumePick { server } = decision {
        wake.servers.insert(server.clone());
    }
    wake
}

/// How long from `now` until `until`, if it is later.
fn remaining(until: Timestamp, now: Timestamp) -> Option<Duration> {
    let left = Duration::try_from(until.duration_since(now)).ok()?;
    (!left.is_zero()).then_some(left)
}

/// Seconds from the claim's creation until `now`.
fn seconds_since_created(claim: &CachedClaim, now: Timestamp) -> Option<f64> {
    let created = claim.meta().creation_timestamp.as_ref()?.0;
    let elapsed = Duration::try_from(now.duration_since(created)).ok()?;
    Some(elapsed.as_secs_f64())
}
