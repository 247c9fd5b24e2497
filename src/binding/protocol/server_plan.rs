//! Turning a server decision into writes, like the claim side.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::names::{
    ANNOTATION_BOUND_BY_CONTROLLER, ANNOTATION_BOUND_CLASS, ANNOTATION_CLEANING,
    ANNOTATION_CLEANING_GATES, CONDITION_CLEANING, FINALIZER_SERVER_PROTECTION,
};
use crate::api::{CachedServer, ReclaimPolicy, ServerClaimRef, ServerPhase, ServerStatus};

use crate::binding::effects::{BindingEvent, Outcome, Related, RepairCase};
use crate::binding::meta::{self, ClaimKey};
use crate::binding::protocol::describe::{available_message, waiting_for_gates};
use crate::binding::protocol::server_decision::ServerDecision;
use crate::binding::reasons::ServerEventReason as Event;
use crate::binding::state::eligibility::describe_ref;
use crate::binding::state::gates::{Pending, gates_annotation, release_generation};
use crate::binding::state::status::{BoundCondition, with_bound, with_condition};

/// The writes and side effects of one server decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerPlan {
    /// The server's new metadata and spec (main resource), if they change.
    pub object: Option<CachedServer>,
    /// The server's new status (`/status`, after `object`), if it changes.
    pub status: Option<ServerStatus>,
    pub event: Option<BindingEvent>,
    pub outcome: Option<Outcome>,
    /// Read this claim live and decide again before doing anything.
    pub confirm_claim: Option<ServerClaimRef>,
}

impl ServerPlan {
    pub fn is_noop(&self) -> bool {
        self.object.is_none() && self.status.is_none() && self.confirm_claim.is_none()
    }
}

/// Whether a user (not the server controller) wrote the server's `serverClaimRef`.
pub fn is_user_made_ref(server: &CachedServer) -> bool {
    !meta::has_annotation(server, ANNOTATION_BOUND_BY_CONTROLLER)
}

/// The plan for `decision` on `server`, at time `now`; its event names the claim the
/// decision is about as `related`.
pub fn plan_server(server: &CachedServer, decision: &ServerDecision, now: &Time) -> ServerPlan {
    let mut plan = plan_row(server, decision, now);
    if let Some(event) = &mut plan.event {
        event.related = claim_of(server, decision).cloned().map(Related::Claim);
    }
    plan
}

/// The claim a server decision is about: the one it binds or fills in, the one blocking
/// a deletion, else the one the server's ref names (the claim it releases or rolls back).
pub fn claim_of<'a>(
    server: &'a CachedServer,
    decision: &'a ServerDecision,
) -> Option<&'a ServerClaimRef> {
    use ServerDecision::*;
    match decision {
        ClaimForWinner { winner, .. } => Some(winner),
        FillUid { claim } | ConfirmClaimGone { claim } => Some(claim),
        DeletionBlocked { holder } => Some(holder),
        _ => server.spec.server_claim_ref.as_ref(),
    }
}

/// One arm per decision, in the order of docs/binding.md's server table.
fn plan_row(server: &CachedServer, decision: &ServerDecision, now: &Time) -> ServerPlan {
    use ServerDecision::*;
    let note = || decision.describe(server);
    match decision {
        Available => ServerPlan {
            // Also drop a `bound-by-controller` left behind when an admin cleared the ref
            // (after a Retain release), or a later user reservation would look
            // controller-made and be cleared on release; and gates recorded for a
            // cleaning an admin ended by removing its `cleaning` annotation.
            object: changed(server, |s| {
                meta::remove_finalizer(s, FINALIZER_SERVER_PROTECTION);
                meta::remove_annotation(s, ANNOTATION_BOUND_BY_CONTROLLER);
                meta::remove_annotation(s, ANNOTATION_BOUND_CLASS);
                meta::remove_annotation(s, ANNOTATION_CLEANING_GATES);
            }),
            status: available(server, now),
            ..ServerPlan::default()
        },
        ClaimForWinner { winner, restoring } => ServerPlan {
            outcome: restoring.then_some(Outcome::Repair(RepairCase::ServerRefRestored)),
            ..claim_for(server, winner, true, note(), now)
        },
        ReservedClaimMissing
        | ReservedAwaitingAdoption
        | ReservedAwaitingQuota
        | ReservedClaimElsewhere => ServerPlan {
            status: after_unbind(server, now),
            ..ServerPlan::default()
        },
        FillUid { claim } => claim_for(server, claim, false, note(), now),
        ConfirmClaimGone { claim } => ServerPlan {
            confirm_claim: Some(claim.clone()),
            ..ServerPlan::default()
        },
        Release { policy } => release(server, *policy, (note(), "is gone"), now),
        BoundConfirmed | EvictionHeld { .. } => bound(server, "Bound", note(), now),
        BoundAwaitingAdoption => bound(server, "AwaitingClaim", note(), now),
        RollBack { .. } => roll_back(server, note(), now),
        DeletionBlocked { .. } => deletion_blocked(server, note(), now),
        ReleaseToCleaning { gates } => release_to_cleaning(server, gates, note(), now),
        RepairCleaningRecord { release, gates, .. } => {
            repair_cleaning_record(server, *release, gates, note(), now)
        }
        Cleaning { release, pending } => ServerPlan {
            status: cleaning_status(server, *release, pending, now),
            ..ServerPlan::default()
        },
        Cleaned => cleaned(server, note(), now),
        StampTaints => ServerPlan {
            object: Some(stamped(server, now)),
            ..ServerPlan::default()
        },
        Evict { policy, gates, .. } => {
            let plan = match gates.is_empty() {
                true => release(server, *policy, (note(), "was evicted"), now),
                false => release_to_cleaning(server, gates, note(), now),
            };
            ServerPlan {
                event: Some(BindingEvent::normal(Event::Evicted, "Evicting", note())),
                ..plan
            }
        }
        DeletionAllowed => ServerPlan {
            object: changed(server, |s| {
                meta::remove_finalizer(s, FINALIZER_SERVER_PROTECTION)
            }),
            ..ServerPlan::default()
        },
    }
}

/// The ref `server` holds, or an empty one (a decision that reads it implies one).
fn holder(server: &CachedServer) -> ServerClaimRef {
    server.spec.server_claim_ref.clone().unwrap_or_default()
}

/// Phase Bound to the claim the server holds (the condition's `message` says so), and
/// the protection finalizer if it is missing.
fn bound(server: &CachedServer, reason: &'static str, message: String, now: &Time) -> ServerPlan {
    let holder = holder(server);
    let condition = BoundCondition {
        bound: true,
        reason,
        message,
    };
    let status = server_status(server, ServerPhase::Bound, Some(&holder), condition, now);
    let object = changed(server, |s| {
        meta::add_finalizer(s, FINALIZER_SERVER_PROTECTION)
    });
    ServerPlan {
        outcome: object
            .is_some()
            .then_some(Outcome::Repair(RepairCase::Finalizer)),
        object,
        status,
        ..ServerPlan::default()
    }
}

/// Undoes a server side whose claim will never complete it: the server is free again,
/// and its event's `note` says why.
fn roll_back(server: &CachedServer, note: String, now: &Time) -> ServerPlan {
    let object = unbind(server);
    ServerPlan {
        status: after_unbind(&object, now),
        object: Some(object),
        event: Some(BindingEvent::normal(Event::RolledBack, "Binding", note)),
        outcome: Some(Outcome::Repair(RepairCase::RolledBack)),
        confirm_claim: None,
    }
}

/// A server being deleted while a live claim holds it: it stays, and says why
/// (`message`).
fn deletion_blocked(server: &CachedServer, message: String, now: &Time) -> ServerPlan {
    let condition = BoundCondition {
        bound: true,
        reason: "DeletionBlocked",
        message: message.clone(),
    };
    let held = server.spec.server_claim_ref.as_ref();
    let status = server_status(server, ServerPhase::Bound, held, condition, now);
    ServerPlan {
        event: status
            .is_some()
            .then(|| BindingEvent::warning(Event::DeletionBlocked, "Deleting", message)),
        status,
        ..ServerPlan::default()
    }
}

/// Binds the server to `claim` in one write (the ref with uid and the finalizer, plus
/// `bound-by-controller` when the controller, not a user, chose the claim), then Bound;
/// its event's `note` says so.
fn claim_for(
    server: &CachedServer,
    claim: &ServerClaimRef,
    by_controller: bool,
    note: String,
    now: &Time,
) -> ServerPlan {
    let mut object = server.clone();
    object.spec.server_claim_ref = Some(claim.clone());
    if by_controller {
        meta::set_annotation(&mut object, ANNOTATION_BOUND_BY_CONTROLLER);
    }
    meta::add_finalizer(&mut object, FINALIZER_SERVER_PROTECTION);
    let status = server_status(
        &object,
        ServerPhase::Bound,
        Some(claim),
        BoundCondition {
            bound: true,
            reason: "Bound",
            message: format!("bound to claim {}", describe_ref(claim)),
        },
        now,
    );
    ServerPlan {
        object: Some(object),
        status,
        event: Some(BindingEvent::normal(Event::Claimed, "Binding", note)),
        ..ServerPlan::default()
    }
}

/// Releases a server whose bound claim is gone (or was evicted: `what`, how the `Retain`
/// status says it); its event's `note` says so.
fn release(
    server: &CachedServer,
    policy: ReclaimPolicy,
    (note, what): (String, &str),
    now: &Time,
) -> ServerPlan {
    let holder = server.spec.server_claim_ref.clone().unwrap_or_default();
    let (object, status) = match policy {
        ReclaimPolicy::Recycle => {
            let object = unbind(server);
            let status = after_unbind(&object, now);
            (Some(object), status)
        }
        ReclaimPolicy::Retain => {
            let object = changed(server, |s| {
                meta::remove_finalizer(s, FINALIZER_SERVER_PROTECTION)
            });
            let status = server_status(
                server,
                ServerPhase::Released,
                Some(&holder),
                BoundCondition {
                    bound: false,
                    reason: "Released",
                    message: format!(
                        "claim {} {what}; reclaimPolicy Retain keeps the server until an admin clears serverClaimRef",
                        describe_ref(&holder)
                    ),
                },
                now,
            );
            (object, status)
        }
    };
    let wrote = object.is_some() || status.is_some();
    ServerPlan {
        object,
        status,
        event: wrote.then(|| BindingEvent::normal(Event::Released, "Releasing", note)),
        outcome: wrote.then_some(Outcome::Released(policy)),
        confirm_claim: None,
    }
}

/// `server` with `now` as the `timeAdded` of each `Evict` taint that has none.
fn stamped(server: &CachedServer, now: &Time) -> CachedServer {
    let mut object = server.clone();
    for taint in &mut object.spec.taints {
        if taint.effect.is_timed() && taint.time_added.is_none() {
            taint.time_added = Some(now.clone());
        }
    }
    object
}

/// The server without its binding: a controller-made ref is cleared with its annotation;
/// a user-made ref keeps the name (the user's reservation) and loses the uid. The
/// finalizer goes, since no live claim holds the server any more.
fn unbind(server: &CachedServer) -> CachedServer {
    let mut object = server.clone();
    if is_user_made_ref(server) {
        if let Some(r) = object.spec.server_claim_ref.as_mut() {
            r.uid = None;
        }
    } else {
        object.spec.server_claim_ref = None;
        meta::remove_annotation(&mut object, ANNOTATION_BOUND_BY_CONTROLLER);
    }
    meta::remove_finalizer(&mut object, FINALIZER_SERVER_PROTECTION);
    // The bind's class record ends with the bind: its gates were read for this release.
    meta::remove_annotation(&mut object, ANNOTATION_BOUND_CLASS);
    object
}

/// The status of a server that no claim holds: Available, and reserved if a user's
/// reservation by name remains.
fn after_unbind(server: &CachedServer, now: &Time) -> Option<ServerStatus> {
    match &server.spec.server_claim_ref {
        None => available(server, now),
        Some(r) => server_status(
            server,
            ServerPhase::Available,
            Some(r),
            BoundCondition {
                bound: false,
                reason: "Reserved",
                message: format!("reserved for claim {}", ClaimKey::of_ref(r)),
            },
            now,
        ),
    }
}

fn available(server: &CachedServer, now: &Time) -> Option<ServerStatus> {
    server_status(
        server,
        ServerPhase::Available,
        None,
        BoundCondition {
            bound: false,
            reason: "Available",
            message: available_message(server).into(),
        },
        now,
    )
}

/// The server with `edit` applied, or `None` if that changes nothing.
fn changed(server: &CachedServer, edit: impl FnOnce(&mut CachedServer)) -> Option<CachedServer> {
    let mut object = server.clone();
    edit(&mut object);
    (object != *server).then_some(object)
}

/// The server's status with `phase`, the claim it shows and the `Bound` condition, or
/// `None` if unchanged.
fn server_status(
    server: &CachedServer,
    phase: ServerPhase,
    claim: Option<&ServerClaimRef>,
    condition: BoundCondition,
    now: &Time,
) -> Option<ServerStatus> {
    let claim = claim.map(|r| ClaimKey::of_ref(r).to_string());
    let current = server.status.clone().unwrap_or_default();
    let generation = server.meta().generation;
    let conditions = with_bound(&current.conditions, &condition, generation, now);
    if conditions.is_none()
        && current.phase == Some(phase)
        && current.claim == claim
        && current.observed_generation == generation
    {
        return None;
    }
    Some(ServerStatus {
        phase: Some(phase),
        claim,
        observed_generation: generation,
        conditions: conditions.unwrap_or(current.conditions),
        ..current
    })
}

/// Releases a recycled server with release gates, and starts its cleaning in the same
/// write: the ref cleared as `Release` clears it, the `cleaning` annotation set to the
/// release's id (the generation this write produces) and the gates in force recorded
/// (docs/binding.md, "Release gates"). Its event's `note` says so.
fn release_to_cleaning(
    server: &CachedServer,
    gates: &[String],
    note: String,
    now: &Time,
) -> ServerPlan {
    let release = release_generation(server);
    let object = with_record(&unbind(server), release, gates);
    let pending: Vec<Pending> = gates.iter().map(|g| Pending::named(g)).collect();
    ServerPlan {
        status: cleaning_status(&object, release, &pending, now),
        object: Some(object),
        event: Some(BindingEvent::normal(Event::Cleaning, "Releasing", note)),
        outcome: Some(Outcome::Released(ReclaimPolicy::Recycle)),
        confirm_claim: None,
    }
}

/// `server` with the record of a cleaning: the release's id and the gates in force.
fn with_record(server: &CachedServer, release: i64, gates: &[String]) -> CachedServer {
    let mut object = server.clone();
    let annotations = object.annotations_mut();
    annotations.insert(ANNOTATION_CLEANING.into(), release.to_string());
    annotations.insert(ANNOTATION_CLEANING_GATES.into(), gates_annotation(gates));
    object
}

/// Rewrites a cleaning record no cleaner can match (one write of the annotations), then
/// the Cleaning status; a Warning's `note` says what was wrong and what a cleaner copies
/// now.
fn repair_cleaning_record(
    server: &CachedServer,
    release: i64,
    gates: &[String],
    note: String,
    now: &Time,
) -> ServerPlan {
    let object = with_record(server, release, gates);
    let pending: Vec<Pending> = gates.iter().map(|g| Pending::named(g)).collect();
    ServerPlan {
        status: cleaning_status(&object, release, &pending, now),
        object: Some(object),
        event: Some(BindingEvent::warning(
            Event::CleaningRecordRepaired,
            "Releasing",
            note,
        )),
        ..ServerPlan::default()
    }
}

/// Phase Cleaning, the `Bound` condition saying so, and the `Cleaning` condition naming
/// the gates still to pass and the release a pass must name, or `None` if the status
/// says that already.
fn cleaning_status(
    server: &CachedServer,
    release: i64,
    pending: &[Pending],
    now: &Time,
) -> Option<ServerStatus> {
    let names: Vec<&str> = pending.iter().map(|p| p.gate.as_str()).collect();
    let bound = BoundCondition {
        bound: false,
        reason: "Cleaning",
        message: format!("released; waiting for release gates: {}", names.join(", ")),
    };
    let cleaning = BoundCondition {
        bound: true,
        reason: "WaitingForGates",
        message: waiting_for_gates(release, pending),
    };
    let reserved = server.spec.server_claim_ref.as_ref();
    let status = server_status(server, ServerPhase::Cleaning, reserved, bound, now);
    with_cleaning_condition(server, status, &cleaning, now)
}

/// Every gate passed: the record of the cleaning goes (the server is claimable again),
/// then phase Available (or reserved) with the `Cleaning` condition False; the event's
/// `note` says so.
fn cleaned(server: &CachedServer, note: String, now: &Time) -> ServerPlan {
    let mut object = server.clone();
    meta::remove_annotation(&mut object, ANNOTATION_CLEANING);
    meta::remove_annotation(&mut object, ANNOTATION_CLEANING_GATES);
    let done = BoundCondition {
        bound: false,
        reason: "Cleaned",
        message: "every release gate passed".into(),
    };
    let status = with_cleaning_condition(&object, after_unbind(&object, now), &done, now);
    ServerPlan {
        object: Some(object),
        status,
        event: Some(BindingEvent::normal(Event::Cleaned, "Releasing", note)),
        ..ServerPlan::default()
    }
}

/// `status` (or the server's current status, when `status` changes nothing) with the
/// `Cleaning` condition set, or `status` if that condition says so already.
fn with_cleaning_condition(
    server: &CachedServer,
    status: Option<ServerStatus>,
    condition: &BoundCondition,
    now: &Time,
) -> Option<ServerStatus> {
    let base = status
        .clone()
        .unwrap_or_else(|| server.status.clone().unwrap_or_default());
    let generation = server.meta().generation;
    match with_condition(
        &base.conditions,
        CONDITION_CLEANING,
        condition,
        generation,
        now,
    ) {
        Some(conditions) => Some(ServerStatus { conditions, ..base }),
        None => status,
    }
}
