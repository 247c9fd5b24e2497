//! Turning a claim decision into writes: the claim as it must be stored, its status, the
//! event and the outcome. The controller performs the writes in order (object, then
//! status), each with the resourceVersion it read as a precondition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND};
use crate::api::{ClaimPhase, ServerClaim, ServerClaimStatus, ServerRef};

use super::claim_decision::{ClaimDecision, is_controller_chosen};
use super::effects::{BindingEvent, LostReason, Outcome, RepairCase};
use super::eligibility::describe_ref;
use super::meta;
use super::status::{BoundCondition, with_bound};

/// The writes and side effects of one claim decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimPlan {
    /// The claim's new metadata and spec (written to the main resource), if they change.
    pub object: Option<ServerClaim>,
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
    /// Whether the plan writes nothing.
    pub fn is_noop(&self) -> bool {
        self.object.is_none() && self.status.is_none() && self.confirm_server.is_none()
    }
}

/// The plan for `decision` on `claim`, at time `now`.
pub fn plan_claim(claim: &ServerClaim, decision: &ClaimDecision, now: &Time) -> ClaimPlan {
    use ClaimDecision::*;

    let status = |phase, bound, reason, message: String| {
        claim_status(
            claim,
            phase,
            BoundCondition {
                bound,
                reason,
                message,
            },
            now,
        )
    };
    let pending = |reason, message: String| status(ClaimPhase::Pending, false, reason, message);

    match decision {
        BoundServerRefCleared => lost(
            status(
                ClaimPhase::Lost,
                false,
                "ServerRefCleared",
                "the claim was bound but its serverRef was cleared".into(),
            ),
            BindingEvent::warning(
                "ClaimLost",
                "Binding",
                "claim is lost: it was bound but its serverRef was cleared",
            ),
            LostReason::ServerRefCleared,
        ),
        ConfirmServerMissing { server } => ClaimPlan {
            confirm_server: Some(server.clone()),
            ..ClaimPlan::default()
        },
        BoundServerMissing { server } => lost(
            status(
                ClaimPhase::Lost,
                false,
                "ServerMissing",
                format!("bound server {server} no longer exists"),
            ),
            BindingEvent::warning(
                "ClaimLost",
                "Binding",
                format!("claim is lost: bound server {server} no longer exists"),
            ),
            LostReason::ServerMissing,
        ),
        // The server side is incomplete; the server controller restores it. Nothing here.
        BoundServerRefLost { .. } => ClaimPlan::default(),
        BoundConfirmed { server } => {
            let current = claim.status.clone().unwrap_or_default();
            // No boundTime: the crash fell between CompleteBind's two writes, so this is
            // the bind itself finishing, not a repair of a status that was lost later.
            let finishing_bind = current.bound_time.is_none();
            let mut new_status = status(
                ClaimPhase::Bound,
                true,
                "Bound",
                format!("bound to server {server}"),
            );
            if finishing_bind {
                let mut s = new_status.unwrap_or(current);
                s.bound_time = Some(now.clone());
                new_status = Some(s);
            }
            let was_bound = claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound);
            let (note, outcome) = if finishing_bind {
                (format!("claim is bound to server {server}"), Outcome::Bound)
            } else {
                (
                    format!("claim is bound to server {server} again"),
                    Outcome::Repair(RepairCase::ClaimStatus),
                )
            };
            ClaimPlan {
                event: (new_status.is_some() && (finishing_bind || !was_bound))
                    .then(|| BindingEvent::normal("Bound", "Binding", note)),
                outcome: new_status.is_some().then_some(outcome),
                status: new_status,
                ..ClaimPlan::default()
            }
        }
        BoundMisbound { server, holder } => lost(
            status(
                ClaimPhase::Lost,
                false,
                "ServerMisbound",
                format!("bound server {server} now serves {}", describe_ref(holder)),
            ),
            BindingEvent::warning(
                "ClaimMisbound",
                "Binding",
                format!(
                    "claim is lost: bound server {server} now serves {}",
                    describe_ref(holder)
                ),
            ),
            LostReason::ServerMisbound,
        ),
        AdoptReservedServer { server } => ClaimPlan {
            object: Some(choose(claim, server)),
            outcome: Some(Outcome::Repair(RepairCase::Adopted)),
            ..ClaimPlan::default()
        },
        PickBestFit { server } => ClaimPlan {
            object: Some(choose(claim, server)),
            ..ClaimPlan::default()
        },
        NoMatchingServer => {
            let message = "no available server matches the claim's selector and tolerations";
            let mut plan = with_event(
                pending("NoMatchingServer", message.into()),
                BindingEvent::normal("FailedBinding", "Binding", message),
            );
            // A user cleared a controller-chosen serverRef: drop the stale `pre-bound` too,
            // or a serverRef the user writes next would look controller-chosen.
            if is_controller_chosen(claim) {
                let mut object = claim.clone();
                meta::remove_annotation(&mut object, ANNOTATION_PRE_BOUND);
                plan.object = Some(object);
            }
            plan
        }
        WithdrawMissingServer { server } => withdraw(
            claim,
            format!("chosen server {server} no longer exists; choosing again"),
        ),
        ServerNotFound { server } => {
            let message = format!("server {server} named by serverRef does not exist");
            with_event(
                pending("ServerNotFound", message.clone()),
                BindingEvent::warning("FailedBinding", "Binding", message),
            )
        }
        WaitForServer { server } | WaitForUid { server } => ClaimPlan {
            status: pending(
                "WaitingForServer",
                format!("waiting for server {server} to record this claim"),
            ),
            ..ClaimPlan::default()
        },
        WithdrawIneligibleServer { server, why } => withdraw(
            claim,
            format!("chosen server {server} can no longer serve this claim: {why}; choosing again"),
        ),
        ServerMismatch { server, why } => {
            let message = format!("server {server} cannot serve this claim: {why}");
            with_event(
                pending("ServerMismatch", message.clone()),
                BindingEvent::warning("ServerMismatch", "Binding", message),
            )
        }
        CompleteBind { server } => {
            let mut object = claim.clone();
            meta::set_annotation(&mut object, ANNOTATION_BIND_COMPLETED);
            let mut new_status = status(
                ClaimPhase::Bound,
                true,
                "Bound",
                format!("bound to server {server}"),
            )
            .unwrap_or_else(|| claim.status.clone().unwrap_or_default());
            new_status.bound_time = Some(now.clone());
            ClaimPlan {
                object: Some(object),
                status: Some(new_status),
                event: Some(BindingEvent::normal(
                    "Bound",
                    "Binding",
                    format!("claim is bound to server {server}"),
                )),
                outcome: Some(Outcome::Bound),
                confirm_server: None,
            }
        }
        WithdrawTakenServer { server, holder } => withdraw(
            claim,
            format!(
                "chosen server {server} was taken by {}; choosing again",
                describe_ref(holder)
            ),
        ),
        ServerAlreadyClaimed { server, holder } => {
            let message = format!(
                "server {server} named by serverRef is already claimed by {}",
                describe_ref(holder)
            );
            with_event(
                pending("ServerAlreadyClaimed", message.clone()),
                BindingEvent::warning("FailedBinding", "Binding", message),
            )
        }
    }
}

/// The claim's status with `phase` and the `Bound` condition, or `None` if unchanged.
fn claim_status(
    claim: &ServerClaim,
    phase: ClaimPhase,
    condition: BoundCondition,
    now: &Time,
) -> Option<ServerClaimStatus> {
    let current = claim.status.clone().unwrap_or_default();
    let conditions = with_bound(
        &current.conditions,
        &condition,
        claim.metadata.generation,
        now,
    );
    if conditions.is_none() && current.phase == Some(phase) {
        return None;
    }
    Some(ServerClaimStatus {
        phase: Some(phase),
        conditions: conditions.unwrap_or(current.conditions),
        bound_time: current.bound_time,
    })
}

/// The claim with `serverRef` set to `server` by the controller (with `pre-bound`).
fn choose(claim: &ServerClaim, server: &str) -> ServerClaim {
    let mut object = claim.clone();
    object.spec.server_ref = Some(ServerRef {
        name: server.to_string(),
    });
    meta::set_annotation(&mut object, ANNOTATION_PRE_BOUND);
    object
}

/// Gives up a controller-chosen server: clears `serverRef` and `pre-bound` in one write.
fn withdraw(claim: &ServerClaim, note: String) -> ClaimPlan {
    let mut object = claim.clone();
    object.spec.server_ref = None;
    meta::remove_annotation(&mut object, ANNOTATION_PRE_BOUND);
    ClaimPlan {
        object: Some(object),
        event: Some(BindingEvent::normal("Rebinding", "Binding", note)),
        outcome: Some(Outcome::Rebind),
        ..ClaimPlan::default()
    }
}

fn lost(status: Option<ServerClaimStatus>, event: BindingEvent, reason: LostReason) -> ClaimPlan {
    ClaimPlan {
        event: status.is_some().then_some(event),
        outcome: status.is_some().then_some(Outcome::Lost(reason)),
        status,
        ..ClaimPlan::default()
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
