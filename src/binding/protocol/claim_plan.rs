//! Turning a claim decision into writes: the claim as it must be stored, its status, the
//! event and the outcome. The controller performs the writes in order (object, then
//! status), each with the resourceVersion it read as a precondition.

use crate::binding::world::budgets::BudgetHold;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::names::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND, CONDITION_DISRUPTION_TARGET,
    REASON_EVICTION_BY_TAINT, REASON_EVICTION_HELD_BY_BUDGET,
};
use crate::api::{BoundServerRef, CachedClaim, ClaimPhase, ServerClaimStatus, ServerRef};

use crate::binding::claim_side::backoff::{Refusal, backs_off};
use crate::binding::effects::{BindingEvent, LostReason, Outcome, Related, RepairCase};
use crate::binding::meta::{self, is_controller_chosen};
use crate::binding::protocol::claim_decision::ClaimDecision;
use crate::binding::protocol::why::Unavailability;
use crate::binding::reasons::{ClaimEventReason as Event, PendingReason as Pending};
use crate::binding::state::eviction::{Eviction, was_evicted};
use crate::binding::state::status::{BoundCondition, with_bound, with_condition};

/// The writes and side effects of one claim decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimPlan {
    /// The claim's new metadata and spec (written to the main resource), if they change.
    pub object: Option<CachedClaim>,
    /// The claim's new status (written to `/status` after `object`), if it changes.
    pub status: Option<ServerClaimStatus>,
    /// Recorded on the claim once the writes succeed.
    pub event: Option<BindingEvent>,
    /// Counted once the writes succeed.
    pub outcome: Option<Outcome>,
    /// Read this server live and decide again before doing anything.
    pub confirm_server: Option<String>,
}

impl ClaimPlan {
    /// A plan that writes `object` and nothing else.
    fn write(object: CachedClaim) -> Self {
        Self {
            object: Some(object),
            ..Self::default()
        }
    }

    /// Whether the plan writes nothing.
    pub fn is_noop(&self) -> bool {
        self.object.is_none() && self.status.is_none() && self.confirm_server.is_none()
    }
}

/// The plan for `decision` on `claim`, at time `now`; its event names the server the
/// decision is about as `related`.
pub fn plan_claim(claim: &CachedClaim, decision: &ClaimDecision, now: &Time) -> ClaimPlan {
    let mut plan = plan_row(claim, decision, now);
    if let Some(event) = &mut plan.event {
        event.related = decision.server().map(|s| Related::Server(s.to_string()));
    }
    plan
}

/// One arm per decision, in the order of docs/binding.md's claim table: the bound path
/// here, the unbound path in [`plan_unbound_row`].
fn plan_row(claim: &CachedClaim, decision: &ClaimDecision, now: &Time) -> ClaimPlan {
    use ClaimDecision::*;
    match decision {
        RestoreServerRef { server } => restore_server_ref(claim, server, decision.describe()),
        ClearStaleBindCompleted => drop_bind_completed(claim, decision.describe()),
        BoundServerRefCleared => server_ref_cleared(claim, decision.describe(), now),
        ConfirmServerMissing { server } => ClaimPlan {
            confirm_server: Some(server.clone()),
            ..ClaimPlan::default()
        },
        BoundServerMissing { .. } => {
            lost(claim, LostReason::ServerMissing, decision.describe(), now)
        }
        // The server side is incomplete; the server controller restores it. Nothing here.
        BoundServerRefLost { .. } => ClaimPlan::default(),
        BoundConfirmed {
            server,
            server_uid,
            selector_mismatch,
            server_deleting,
            eviction,
            held,
        } => {
            let notes = BoundNotes {
                selector_mismatch: *selector_mismatch,
                server_deleting: *server_deleting,
            };
            let record = bound_to(server, server_uid);
            let plan = bound_confirmed(claim, &record, notes, decision.describe(), now);
            let disruption = eviction.as_ref().map(|e| (e, held.as_deref()));
            with_disruption(claim, plan, disruption, now)
        }
        // Once: a claim whose status says so already stays as it is.
        Evicted { .. } if was_evicted(claim) => ClaimPlan::default(),
        Evicted { .. } => lost(claim, LostReason::Evicted, decision.describe(), now),
        BoundMisbound { .. } => lost(claim, LostReason::ServerMisbound, decision.describe(), now),
        // Every other decision is on the unbound path.
        unbound => plan_unbound_row(claim, unbound, now),
    }
}

/// The unbound path's arms of [`plan_row`], in the table's order.
fn plan_unbound_row(claim: &CachedClaim, decision: &ClaimDecision, now: &Time) -> ClaimPlan {
    use ClaimDecision::*;
    // Pending with a Warning, the decision's words in both.
    let warn = |reasons| pending_with_warning(claim, reasons, decision.describe(), now);
    // The same, and a controller-chosen serverRef withdrawn.
    let class = |reasons| class_problem(claim, reasons, decision.describe(), now);
    match decision {
        GiveBackServer {
            server,
            server_uid,
            refusal,
        } => give_back(claim, &bound_to(server, server_uid), refusal, now),
        WriteRefused { .. } => warn((Pending::WriteRefused, Event::WriteRefused)),
        AssignDefaultClass { class } => {
            let mut object = claim.clone();
            object.spec.server_class_name = Some(class.clone());
            ClaimPlan {
                object: Some(object),
                ..ClaimPlan::default()
            }
        }
        ClassNotFound { .. } => class((Pending::ClassNotFound, Event::ClassNotFound)),
        ClassNotAllowed { .. } => class((Pending::ClassNotAllowed, Event::ClassNotAllowed)),
        QuotaExceeded { .. } => class((Pending::QuotaExceeded, Event::QuotaExceeded)),
        // The server stays reserved for the claim: nothing is withdrawn.
        RestoreAwaitingQuota { .. } => warn((Pending::QuotaExceeded, Event::QuotaExceeded)),
        // Transient (the count follows at once): the claim keeps any ref it has, and the
        // server side binds nothing of it until the quota charges it.
        QuotaNotCounted { .. } => warn((Pending::QuotaNotCounted, Event::QuotaNotCounted)),
        AdoptReservedServer { server } => ClaimPlan {
            outcome: Some(Outcome::Repair(RepairCase::Adopted)),
            ..choose(claim, server, now)
        },
        PickBestFit { server } => choose(claim, server, now),
        WaitForTurn { why } => wait_for_turn(claim, why, now),
        NoMatchingServer { why } => no_matching_server(claim, why, now),
        WithdrawMissingServer { .. }
        | WithdrawIneligibleServer { .. }
        | WithdrawOutOfTurn { .. }
        | WithdrawTakenServer { .. } => withdraw(claim, decision.describe(), now),
        WithdrawRefusingServer { .. } => {
            let note = decision.describe();
            let mut plan = withdraw(claim, note.clone(), now);
            if plan.event.is_some() {
                plan.event = Some(BindingEvent::warning(
                    Event::ServerWriteRefused,
                    "Binding",
                    note,
                ));
            }
            plan
        }
        ServerRefusesWrites { .. } => {
            warn((Pending::ServerWriteRefused, Event::ServerWriteRefused))
        }
        ServerNotFound { .. } => warn((Pending::ServerNotFound, Event::FailedBinding)),
        WaitForServer { .. } | WaitForUid { .. } | ResumePick { .. } => {
            waiting_for_server(claim, decision.describe(), now)
        }
        ServerMismatch { .. } => warn((Pending::ServerMismatch, Event::ServerMismatch)),
        CompleteBind { server, server_uid } => complete_bind(
            claim,
            &bound_to(server, server_uid),
            decision.describe(),
            now,
        ),
        ServerAlreadyClaimed { .. } => warn((Pending::ServerAlreadyClaimed, Event::FailedBinding)),
        bound => unreachable!("{} is on the bound path: plan_row plans it", bound.name()),
    }
}

/// Drops a `bind-completed` with no bind behind it for the server the claim names (a
/// copy, a forgery, a bind that ended), and tells the tenant why (`note`).
fn drop_bind_completed(claim: &CachedClaim, note: String) -> ClaimPlan {
    ClaimPlan {
        event: Some(BindingEvent::warning(
            Event::BindCompletedDropped,
            "Binding",
            note,
        )),
        ..ClaimPlan::write(without_annotation(claim, ANNOTATION_BIND_COMPLETED))
    }
}

/// Lost: a bound claim whose `serverRef` was cleared while no server holds it. The ref
/// `pre-bound` marked is gone too, so the annotation goes: a ref the tenant writes next
/// is its own.
fn server_ref_cleared(claim: &CachedClaim, what: String, now: &Time) -> ClaimPlan {
    let mut plan = lost(claim, LostReason::ServerRefCleared, what, now);
    if is_controller_chosen(claim) {
        plan.object = Some(without_annotation(claim, ANNOTATION_PRE_BOUND));
    }
    plan
}

/// Writes `serverRef` back on a bound claim whose ref was cleared while a server still
/// holds its uid (a bound claim never moves); the Warning's `note` says so.
fn restore_server_ref(claim: &CachedClaim, server: &str, note: String) -> ClaimPlan {
    let mut object = claim.clone();
    object.spec.server_ref = Some(ServerRef {
        name: server.to_string(),
    });
    ClaimPlan {
        object: Some(object),
        event: Some(BindingEvent::warning(
            Event::ServerRefRestored,
            "Binding",
            note,
        )),
        outcome: Some(Outcome::Repair(RepairCase::ClaimRefRestored)),
        ..ClaimPlan::default()
    }
}

/// Pending `WaitingForServer`, but only over an earlier status. A claim that shows none
/// yet (a new claim, just picked) keeps none: its server side completes within moments,
/// and a Pending written now would be overwritten by Bound at once, one write per bind
/// for nothing. A claim that shows an earlier status (it waited for a match, or lost its
/// server) is told what it waits for now (`message`).
fn waiting_for_server(claim: &CachedClaim, message: String, now: &Time) -> ClaimPlan {
    if claim.status.as_ref().is_none_or(|s| s.phase.is_none()) {
        return ClaimPlan::default();
    }
    ClaimPlan {
        status: pending(claim, Pending::WaitingForServer, message, now),
        ..ClaimPlan::default()
    }
}

/// Pending with `reason` and a Warning of that reason; a controller-chosen `serverRef`
/// goes in the same step (the class leaves the claim no server to take).
fn class_problem(
    claim: &CachedClaim,
    reasons: (Pending, Event),
    message: String,
    now: &Time,
) -> ClaimPlan {
    let mut plan = pending_with_warning(claim, reasons, message, now);
    if claim.spec.server_ref.is_some() && is_controller_chosen(claim) {
        let mut object = claim.clone();
        object.spec.server_ref = None;
        meta::remove_annotation(&mut object, ANNOTATION_PRE_BOUND);
        plan.object = Some(object);
    }
    plan
}

/// Pending `WaitingForTurn` with a Normal event of that reason, saying why server by
/// server (the servers it could take "are kept for claims ahead of it").
fn wait_for_turn(claim: &CachedClaim, why: &Unavailability, now: &Time) -> ClaimPlan {
    let message = why.to_string();
    let plan = with_event(
        pending(claim, Pending::WaitingForTurn, message.clone(), now),
        BindingEvent::normal(Event::WaitingForTurn, "Binding", message),
    );
    without_stale_pre_bound(claim, plan)
}

/// A claim that waits in the queue names no server: a `pre-bound` left on it (a user
/// cleared a controller-chosen serverRef, or wrote the annotation alone) is dropped, or
/// a serverRef the user writes next would look controller-chosen.
fn without_stale_pre_bound(claim: &CachedClaim, mut plan: ClaimPlan) -> ClaimPlan {
    if claim.spec.server_ref.is_none() && is_controller_chosen(claim) {
        plan.object = Some(without_annotation(claim, ANNOTATION_PRE_BOUND));
    }
    plan
}

/// Pending `NoMatchingServer` with a Normal `FailedBinding`, saying why server by server.
fn no_matching_server(claim: &CachedClaim, why: &Unavailability, now: &Time) -> ClaimPlan {
    let message = why.to_string();
    let plan = with_event(
        pending(claim, Pending::NoMatchingServer, message.clone(), now),
        BindingEvent::normal(Event::FailedBinding, "Binding", message),
    );
    without_stale_pre_bound(claim, plan)
}

/// Phase Lost with a condition and a Warning event saying `what` happened.
fn lost(claim: &CachedClaim, reason: LostReason, what: String, now: &Time) -> ClaimPlan {
    let event_reason = match reason {
        LostReason::ServerRefCleared | LostReason::ServerMissing => Event::ClaimLost,
        LostReason::ServerMisbound => Event::ClaimMisbound,
        LostReason::Evicted => Event::ClaimEvicted,
    };
    let event = BindingEvent::warning(event_reason, "Binding", format!("claim is lost: {what}"));
    let condition = BoundCondition {
        bound: false,
        reason: reason.as_str(),
        message: what,
    };
    let mut status = claim_status(claim, ClaimPhase::Lost, condition, now);
    if let Some(status) = status.as_mut() {
        // The bind ended: no disruption runs against it any more (a hold included).
        status
            .conditions
            .retain(|c| c.type_ != CONDITION_DISRUPTION_TARGET);
    }
    ClaimPlan {
        event: status.is_some().then_some(event),
        outcome: status.is_some().then_some(Outcome::Lost(reason)),
        status,
        ..ClaimPlan::default()
    }
}

/// Pending with the condition reason `reasons.0` and a Warning `reasons.1` with the same
/// message.
fn pending_with_warning(
    claim: &CachedClaim,
    (condition_reason, event_reason): (Pending, Event),
    message: String,
    now: &Time,
) -> ClaimPlan {
    with_event(
        pending(claim, condition_reason, message.clone(), now),
        BindingEvent::warning(event_reason, "Binding", message),
    )
}

/// Phase Pending with a false `Bound` condition of `reason`, or `None` if unchanged.
/// Every Pending status of a claim is written here, so its reason is a [`Pending`].
fn pending(
    claim: &CachedClaim,
    reason: Pending,
    message: String,
    now: &Time,
) -> Option<ServerClaimStatus> {
    let condition = BoundCondition {
        bound: false,
        reason: reason.as_str(),
        message,
    };
    claim_status(claim, ClaimPhase::Pending, condition, now)
}

fn without_annotation(claim: &CachedClaim, key: &str) -> CachedClaim {
    let mut object = claim.clone();
    meta::remove_annotation(&mut object, key);
    object
}

/// What a bound claim's condition adds about its server, and warns of.
#[derive(Clone, Copy)]
struct BoundNotes {
    selector_mismatch: bool,
    server_deleting: bool,
}

impl BoundNotes {
    /// The Warning for a note, the deletion first: it is what the tenant must act on.
    fn warning(self, server: &str) -> Option<BindingEvent> {
        if self.server_deleting {
            let note = format!(
                "server {server} is being deleted; it stays bound to this claim until the claim is deleted"
            );
            return Some(BindingEvent::warning(
                Event::ServerDeleting,
                "Binding",
                note,
            ));
        }
        self.selector_mismatch.then(|| {
            let note = format!(
                "server {server}'s labels no longer match this claim's serverSelector (the server was relabelled, or the selector added, after the bind); the binding stays"
            );
            BindingEvent::warning(Event::SelectorMismatch, "Binding", note)
        })
    }
}

/// `plan` with the claim's `DisruptionTarget` condition as `eviction` makes it: True,
/// reason `EvictionByTaint`, while an eviction runs (a Warning `EvictionScheduled` when it
/// starts or its deadline moves); gone once it is cancelled (a Normal
/// `EvictionCancelled`). The condition is the claim's own; the Bound condition says
/// the bind stands.
fn with_disruption(
    claim: &CachedClaim,
    mut plan: ClaimPlan,
    disruption: Option<(&Eviction, Option<&BudgetHold>)>,
    now: &Time,
) -> ClaimPlan {
    // Read in place: every bound claim's reconcile passes here, and most change nothing.
    let current = plan.status.as_ref().or(claim.status.as_ref());
    let conditions = current.map_or(&[][..], |s| s.conditions.as_slice());
    let running = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET);
    let (edited, event) = match disruption {
        Some((eviction, held)) => {
            let (reason, message) = match held {
                None => (REASON_EVICTION_BY_TAINT, eviction.to_string()),
                Some(hold) => (REASON_EVICTION_HELD_BY_BUDGET, held_message(eviction, hold)),
            };
            let desired = BoundCondition {
                bound: true,
                reason,
                message: message.clone(),
            };
            let generation = claim.meta().generation;
            let set = with_condition(
                conditions,
                CONDITION_DISRUPTION_TARGET,
                &desired,
                generation,
                now,
            );
            let warning = match held {
                None => {
                    let note = format!(
                        "{eviction}, unless the taint goes or the claim tolerates it for ever"
                    );
                    BindingEvent::warning(Event::EvictionScheduled, "Evicting", note)
                }
                Some(_) => BindingEvent::warning(Event::EvictionHeldByBudget, "Evicting", message),
            };
            // A hold's counts change as claims come and go: told when it starts only.
            let news = held.is_none() || running.is_none_or(|c| c.reason != reason);
            (set, news.then_some(warning))
        }
        None if running.is_some() => {
            let kept = conditions
                .iter()
                .filter(|c| c.type_ != CONDITION_DISRUPTION_TARGET)
                .cloned()
                .collect();
            let note = "the eviction is cancelled: the server's taint is gone or tolerated now; the bind stays".to_string();
            (
                Some(kept),
                Some(BindingEvent::normal(
                    Event::EvictionCancelled,
                    "Evicting",
                    note,
                )),
            )
        }
        None => (None, None),
    };
    if let Some(conditions) = edited {
        let mut status = current.cloned().unwrap_or_default();
        status.conditions = conditions;
        plan.status = Some(status);
        plan.event = plan.event.or(event);
    }
    plan
}

/// The condition's message while a budget holds a due eviction.
fn held_message(eviction: &Eviction, hold: &BudgetHold) -> String {
    let mut message = format!("{eviction}, but {hold}; the eviction waits");
    match eviction.hard_deadline {
        Some(hard) => message.push_str(&format!(
            " until {hard} at the latest (the taint's hardDeadline)"
        )),
        None => message.push_str(" until a claim it covers is Bound again or the budget changes"),
    }
    message
}

/// The record of a bind to the server `name` with uid `uid`.
fn bound_to(name: &str, uid: &str) -> BoundServerRef {
    BoundServerRef {
        name: name.to_string(),
        uid: uid.to_string(),
    }
}

/// The status of a claim whose server holds its uid, on the bound path; its condition's
/// `message` says so, with the `notes`.
fn bound_confirmed(
    claim: &CachedClaim,
    record: &BoundServerRef,
    notes: BoundNotes,
    message: String,
    now: &Time,
) -> ClaimPlan {
    let server = record.name.as_str();
    let current = claim.status.clone().unwrap_or_default();
    // No boundTime: the crash fell between CompleteBind's two writes, so this is the bind
    // itself finishing, not a repair of a status that was lost later.
    let finishing_bind = current.bound_time.is_none();
    let condition = BoundCondition {
        bound: true,
        reason: "Bound",
        message,
    };
    let mut new_status = bound_status(claim, record, condition, now);
    if finishing_bind {
        let mut s = new_status.unwrap_or(current);
        s.bound_time = Some(now.clone());
        new_status = Some(s);
    }
    let was_bound = claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound);
    let (event, outcome) = if finishing_bind {
        let note = format!("claim is bound to server {server}");
        (
            Some(BindingEvent::normal(Event::Bound, "Binding", note)),
            Some(Outcome::Bound),
        )
    } else if let Some(warning) = notes.warning(server) {
        // A deletion under a bound claim is news, not a repair.
        let repair = (!notes.server_deleting).then_some(Outcome::Repair(RepairCase::ClaimStatus));
        (Some(warning), repair)
    } else {
        let note = format!("claim is bound to server {server} again");
        let event = (!was_bound).then(|| BindingEvent::normal(Event::Bound, "Binding", note));
        (event, Some(Outcome::Repair(RepairCase::ClaimStatus)))
    };
    ClaimPlan {
        event: new_status.as_ref().and(event),
        outcome: new_status.as_ref().and(outcome),
        status: new_status,
        ..ClaimPlan::default()
    }
}

/// `bind-completed`, then the Bound status recording the server. A claim whose status
/// already records this bind lost only its annotation (a hand edit): it keeps its
/// boundTime and counts a repair, not a second bind. Any other claim is bound anew; its
/// condition's `message` says so.
fn complete_bind(
    claim: &CachedClaim,
    record: &BoundServerRef,
    message: String,
    now: &Time,
) -> ClaimPlan {
    let server = record.name.as_str();
    let mut object = claim.clone();
    meta::set_annotation(&mut object, ANNOTATION_BIND_COMPLETED);
    let condition = BoundCondition {
        bound: true,
        reason: "Bound",
        message,
    };
    let same_bind = claim
        .status
        .as_ref()
        .is_some_and(|s| s.bound_time.is_some() && s.bound_server_ref.as_ref() == Some(record));
    let mut new_status = bound_status(claim, record, condition, now)
        .unwrap_or_else(|| claim.status.clone().unwrap_or_default());
    if !same_bind {
        new_status.bound_time = None;
    }
    let (note, outcome) = match new_status.bound_time {
        Some(_) => (
            format!("claim is bound to server {server} again"),
            Outcome::Repair(RepairCase::ClaimStatus),
        ),
        None => (format!("claim is bound to server {server}"), Outcome::Bound),
    };
    new_status.bound_time.get_or_insert_with(|| now.clone());
    ClaimPlan {
        object: Some(object),
        status: Some(new_status),
        event: Some(BindingEvent::normal(Event::Bound, "Binding", note)),
        outcome: Some(outcome),
        confirm_server: None,
    }
}

/// The claim's status with `phase` (not Bound: [`bound_status`]) and the `Bound`
/// condition, or `None` if unchanged. A Lost claim keeps the record of the server it
/// was bound to (it may get that very server back, and no other); a Pending one holds
/// no server, so its status records none.
fn claim_status(
    claim: &CachedClaim,
    phase: ClaimPhase,
    condition: BoundCondition,
    now: &Time,
) -> Option<ServerClaimStatus> {
    let kept = claim
        .status
        .as_ref()
        .and_then(|s| s.bound_server_ref.clone());
    let record = kept.filter(|_| phase == ClaimPhase::Lost);
    status_with(claim, phase, record.as_ref(), condition, now)
}

/// The claim's Bound status recording `record` as the server it is bound to, or `None`
/// if unchanged.
fn bound_status(
    claim: &CachedClaim,
    record: &BoundServerRef,
    condition: BoundCondition,
    now: &Time,
) -> Option<ServerClaimStatus> {
    status_with(claim, ClaimPhase::Bound, Some(record), condition, now)
}

fn status_with(
    claim: &CachedClaim,
    phase: ClaimPhase,
    record: Option<&BoundServerRef>,
    condition: BoundCondition,
    now: &Time,
) -> Option<ServerClaimStatus> {
    let current = claim.status.clone().unwrap_or_default();
    let conditions = with_bound(
        &current.conditions,
        &condition,
        claim.meta().generation,
        now,
    );
    let record = record.cloned();
    // A bound claim has given nothing back.
    let given_back = current
        .given_back_server_ref
        .clone()
        .filter(|_| phase != ClaimPhase::Bound);
    if conditions.is_none()
        && current.phase == Some(phase)
        && current.bound_server_ref == record
        && current.given_back_server_ref == given_back
    {
        return None;
    }
    Some(ServerClaimStatus {
        phase: Some(phase),
        conditions: conditions.unwrap_or(current.conditions),
        bound_time: current.bound_time,
        bound_server_ref: record,
        given_back_server_ref: given_back,
    })
}

/// Sets `serverRef` to `server` by the controller (with `pre-bound`). A claim whose
/// status says it backs off after a refused write is tried again now: its status says it
/// waits for the server instead, or the server controller would not bind it.
fn choose(claim: &CachedClaim, server: &str, now: &Time) -> ClaimPlan {
    let mut object = claim.clone();
    object.spec.server_ref = Some(ServerRef {
        name: server.to_string(),
    });
    meta::set_annotation(&mut object, ANNOTATION_PRE_BOUND);
    let status = backs_off(claim)
        .then(|| {
            let message = format!("waiting for server {server} to record this claim");
            pending(claim, Pending::WaitingForServer, message, now)
        })
        .flatten();
    ClaimPlan {
        status,
        ..ClaimPlan::write(object)
    }
}

/// Gives up a controller-chosen server: clears `serverRef` and `pre-bound` in one write.
///
/// A claim whose status still says `Bound` (its `bind-completed` was removed by hand)
/// first gets a `Pending` status: admission refuses removing `serverRef` from a `Bound`
/// claim, so the withdraw itself waits for the next pass. `note` says why, in the event
/// or in that status.
fn withdraw(claim: &CachedClaim, note: String, now: &Time) -> ClaimPlan {
    if claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound) {
        return ClaimPlan {
            status: pending(claim, Pending::WaitingForServer, note, now),
            ..ClaimPlan::default()
        };
    }
    let mut object = claim.clone();
    object.spec.server_ref = None;
    meta::remove_annotation(&mut object, ANNOTATION_PRE_BOUND);
    ClaimPlan {
        object: Some(object),
        event: Some(BindingEvent::normal(Event::Rebinding, "Binding", note)),
        outcome: Some(Outcome::Rebind),
        ..ClaimPlan::default()
    }
}

/// Gives back a server whose completing write was refused: clears `serverRef` and
/// `pre-bound` in one write, then `Pending` / `WriteRefused` recording the server given
/// back (the server controller frees it; the claim does not adopt it again). The
/// condition says what the refusal says, so the back-off's next rows write nothing.
fn give_back(
    claim: &CachedClaim,
    server: &BoundServerRef,
    refusal: &Refusal,
    now: &Time,
) -> ClaimPlan {
    let mut object = claim.clone();
    object.spec.server_ref = None;
    meta::remove_annotation(&mut object, ANNOTATION_PRE_BOUND);
    // Already withdrawn (a give-back whose status write failed): the status only.
    let object = (object != *claim).then_some(object);
    let mut status = pending(claim, Pending::WriteRefused, refusal.describe(), now)
        .unwrap_or_else(|| claim.status.clone().unwrap_or_default());
    status.given_back_server_ref = Some(server.clone());
    let note = format!(
        "{}; it gave back server {}, which its bind could not complete",
        refusal.describe(),
        server.name
    );
    ClaimPlan {
        object,
        status: Some(status),
        event: Some(BindingEvent::warning(Event::WriteRefused, "Binding", note)),
        outcome: Some(Outcome::Rebind),
        confirm_server: None,
    }
}

/// A status-only plan whose event fires only when the status actually changes, so a
/// claim that stays Pending does not repeat its event on every resync.
fn with_event(status: Option<ServerClaimStatus>, event: BindingEvent) -> ClaimPlan {
    ClaimPlan {
        event: status.is_some().then_some(event),
        status,
        ..ClaimPlan::default()
    }
}
