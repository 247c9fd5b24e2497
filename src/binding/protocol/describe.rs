//! Each decision in words: its name, as docs/binding.md's tables write it, and what it
//! says of the object. The plans write these words into the conditions and events the
//! controllers leave, and `explain` prints them as the object's row, so what an operator
//! reads in `kubectl describe` and in `explain` cannot drift apart.

use crate::api::names::{
    ANNOTATION_BIND_COMPLETED, ANNOTATION_CLEANING, ANNOTATION_CLEANING_GATES,
};
use crate::api::{CachedServer, ReclaimPolicy, ServerClaimRef};

use crate::binding::meta::ClaimKey;
use crate::binding::placement::Ahead;
use crate::binding::protocol::claim_decision::ClaimDecision;
use crate::binding::protocol::server_decision::{RecordProblem, RollBackCause, ServerDecision};
use crate::binding::protocol::why::names_ahead;
use crate::binding::state::eligibility::describe_ref;
use crate::binding::state::eviction::Eviction;
use crate::binding::state::gates::{Pending, release_generation};
use crate::binding::world::budgets::BudgetHold;

/// What a claim being deleted gets from the claim controller (no decision: `Idle`).
pub const CLAIM_BEING_DELETED: &str =
    "being deleted: the claim controller does nothing, and its server is released once it is gone";

impl ClaimDecision {
    /// The variant's name, as docs/binding.md's claim table writes it
    /// (tests/binding/decision_rows.rs holds each arm to its variant).
    pub fn name(&self) -> &'static str {
        use ClaimDecision::*;
        match self {
            RestoreServerRef { .. } => "RestoreServerRef",
            ClearStaleBindCompleted => "ClearStaleBindCompleted",
            BoundServerRefCleared => "BoundServerRefCleared",
            ConfirmServerMissing { .. } => "ConfirmServerMissing",
            BoundServerMissing { .. } => "BoundServerMissing",
            BoundServerRefLost { .. } => "BoundServerRefLost",
            BoundConfirmed { .. } => "BoundConfirmed",
            BoundMisbound { .. } => "BoundMisbound",
            Evicted { .. } => "Evicted",
            WriteRefused { .. } => "WriteRefused",
            GiveBackServer { .. } => "GiveBackServer",
            AssignDefaultClass { .. } => "AssignDefaultClass",
            ClassNotFound { .. } => "ClassNotFound",
            ClassNotAllowed { .. } => "ClassNotAllowed",
            QuotaExceeded { .. } => "QuotaExceeded",
            RestoreAwaitingQuota { .. } => "RestoreAwaitingQuota",
            QuotaNotCounted { .. } => "QuotaNotCounted",
            AdoptReservedServer { .. } => "AdoptReservedServer",
            PickBestFit { .. } => "PickBestFit",
            WaitForTurn { .. } => "WaitForTurn",
            NoMatchingServer { .. } => "NoMatchingServer",
            WithdrawMissingServer { .. } => "WithdrawMissingServer",
            ServerNotFound { .. } => "ServerNotFound",
            WaitForServer { .. } => "WaitForServer",
            WithdrawIneligibleServer { .. } => "WithdrawIneligibleServer",
            WithdrawOutOfTurn { .. } => "WithdrawOutOfTurn",
            ResumePick { .. } => "ResumePick",
            ServerMismatch { .. } => "ServerMismatch",
            WaitForUid { .. } => "WaitForUid",
            CompleteBind { .. } => "CompleteBind",
            WithdrawTakenServer { .. } => "WithdrawTakenServer",
            WithdrawRefusingServer { .. } => "WithdrawRefusingServer",
            ServerRefusesWrites { .. } => "ServerRefusesWrites",
            ServerAlreadyClaimed { .. } => "ServerAlreadyClaimed",
        }
    }

    /// What the decision says of the claim: the message of the `Bound` condition its
    /// plan writes, or else of its event (a withdrawal, a repair), or else (a decision
    /// that writes neither) what the controller does. A waiting claim's condition
    /// carries its summary instead ([`crate::binding::Unavailability`]); this says that it waits.
    pub fn describe(&self) -> String {
        use ClaimDecision::*;
        match self {
            RestoreServerRef { server } => format!(
                "serverRef was cleared while the claim is bound to server {server}; it is written back (delete the claim to release the server)"
            ),
            ClearStaleBindCompleted => format!(
                "{ANNOTATION_BIND_COMPLETED} dropped: no bind of this claim is recorded for the server it names (status.boundServerRef, or the server's serverClaimRef); it binds as a new claim"
            ),
            BoundServerRefCleared => "the claim was bound but its serverRef was cleared".into(),
            ConfirmServerMissing { server } => format!(
                "bound server {server} is missing from the cache: it is read live before the claim is lost"
            ),
            BoundServerMissing { server } => format!("bound server {server} no longer exists"),
            BoundServerRefLost { server } => format!(
                "bound to server {server}, which lost its serverClaimRef: the server controller restores it"
            ),
            confirmed @ BoundConfirmed { .. } => bound_confirmed_message(confirmed),
            BoundMisbound { server, holder } => {
                format!("bound server {server} now serves {}", describe_ref(holder))
            }
            Evicted { server, eviction } => evicted_message(server, eviction.as_ref()),
            WriteRefused { refusal } | GiveBackServer { refusal, .. } => refusal.describe(),
            AssignDefaultClass { class } => {
                format!("the claim names no class: it gets the default class {class}")
            }
            ClassNotFound { class } => format!(
                "server class {class} named by serverClassName does not exist; the claim waits for it"
            ),
            ClassNotAllowed { class } => format!(
                "server class {class} does not let this namespace use it (its namespaceSelector); the claim waits until it does"
            ),
            QuotaExceeded { full } => format!(
                "{full}: the claim waits until one of them is deleted or the quota is raised"
            ),
            RestoreAwaitingQuota { server, full } => format!(
                "server {server} held this claim's name before a restore and is kept for it; {full}: the claim binds once one of them is deleted or the quota is raised"
            ),
            QuotaNotCounted { quota } => format!(
                "{quota}: the claim waits for the controller to count them before the quota admits it"
            ),
            AdoptReservedServer { server } => {
                format!("server {server} is reserved for this claim: the claim adopts it")
            }
            PickBestFit { server } => format!("waiting for a server: a pick takes {server} now"),
            WaitForTurn { .. } => "waiting its turn: the servers it could take are kept for claims ahead of it (served oldest first, namespaces in turn)".into(),
            NoMatchingServer { .. } => "waiting: no free server can serve it now".into(),
            WithdrawMissingServer { server } => withdrawal(server, "no longer exists"),
            ServerNotFound { server } => {
                format!("server {server} named by serverRef does not exist")
            }
            // As a pick in flight says it: taking a pick up changes nothing the claim shows.
            WaitForServer { server } | WaitForUid { server } | ResumePick { server } => {
                format!("waiting for server {server} to record this claim")
            }
            WithdrawIneligibleServer { server, why } => {
                withdrawal(server, &format!("can no longer serve this claim: {why}"))
            }
            WithdrawOutOfTurn { server, ahead } => out_of_turn(server, ahead),
            ServerMismatch { server, why } => {
                format!("server {server} cannot serve this claim: {why}")
            }
            CompleteBind { server, .. } => bound_message(server, (false, false), None, None),
            WithdrawRefusingServer { server, message } => refusing(server, message, true),
            ServerRefusesWrites { server, message } => refusing(server, message, false),
            WithdrawTakenServer { server, holder } => {
                withdrawal(server, &format!("was taken by {}", describe_ref(holder)))
            }
            ServerAlreadyClaimed { server, holder } => format!(
                "server {server} named by serverRef is already claimed by {}",
                describe_ref(holder)
            ),
        }
    }
}

/// A claim naming a server whose writes the API server refuses (`message`): a
/// controller-chosen one is withdrawn, a user-chosen one waits for an admin's fix.
fn refusing(server: &str, message: &str, controller_chosen: bool) -> String {
    let refuses = format!("refuses the server controller's writes ({message})");
    match controller_chosen {
        true => withdrawal(server, &refuses),
        false => format!(
            "server {server} named by serverRef {refuses}: the claim binds once an admin fixes the server"
        ),
    }
}

/// The withdrawal of a pick this controller does not have in flight, out of its turn.
fn out_of_turn(server: &str, ahead: &Ahead) -> String {
    let ahead = names_ahead(ahead).map(|n| format!(" ({n})"));
    withdrawal(
        server,
        &format!(
            "is not a pick this controller has in flight (it was made before a restart, by another replica, or by hand), and claims ahead of this one need it{}",
            ahead.unwrap_or_default()
        ),
    )
}

/// A withdrawal of a controller-chosen server: its event, and the condition of a claim
/// whose status still says Bound.
fn withdrawal(server: &str, what: &str) -> String {
    format!("chosen server {server} {what}; choosing again")
}

/// The message of an evicted claim's condition: the eviction that ended its bind, or
/// (a claim whose status already says so) that it takes no server again.
fn evicted_message(server: &str, eviction: Option<&Eviction>) -> String {
    match eviction {
        Some(eviction) => format!("evicted from server {server}: {}", eviction.ended()),
        None => format!(
            "evicted from server {server}: the claim takes no server again; create a new claim for a new one"
        ),
    }
}

/// The message of a bound claim's condition: its server, and what the binding keeps
/// despite (a selector added after the bind, the server's deletion), or until when (an
/// eviction).
/// The message of a [`ClaimDecision::BoundConfirmed`].
fn bound_confirmed_message(decision: &ClaimDecision) -> String {
    let ClaimDecision::BoundConfirmed {
        server,
        selector_mismatch,
        server_deleting,
        eviction,
        held,
        ..
    } = decision
    else {
        return String::new();
    };
    let notes = (*selector_mismatch, *server_deleting);
    bound_message(server, notes, eviction.as_ref(), held.as_deref())
}

fn bound_message(
    server: &str,
    (selector_mismatch, server_deleting): (bool, bool),
    eviction: Option<&Eviction>,
    held: Option<&BudgetHold>,
) -> String {
    let mut message = format!("bound to server {server}");
    if selector_mismatch {
        message.push_str("; the server's labels no longer match the claim's serverSelector (the server was relabelled, or the selector added, after the bind), and the binding stays");
    }
    if server_deleting {
        message.push_str("; the server is being deleted, and is kept until this claim is deleted");
    }
    if let Some(eviction) = eviction {
        message.push_str(&format!("; {eviction}"));
    }
    if let Some(hold) = held {
        message.push_str(&format!("; the eviction is due, but {hold}"));
    }
    message
}

impl ServerDecision {
    /// The variant's name, as docs/binding.md's server table writes it
    /// (tests/binding/decision_rows.rs holds each arm to its variant).
    pub fn name(&self) -> &'static str {
        use ServerDecision::*;
        match self {
            Available => "Available",
            ClaimForWinner { .. } => "ClaimForWinner",
            ReservedClaimMissing => "ReservedClaimMissing",
            FillUid { .. } => "FillUid",
            ReservedAwaitingAdoption => "ReservedAwaitingAdoption",
            ReservedAwaitingQuota => "ReservedAwaitingQuota",
            ReservedClaimElsewhere => "ReservedClaimElsewhere",
            ConfirmClaimGone { .. } => "ConfirmClaimGone",
            Release { .. } => "Release",
            BoundConfirmed => "BoundConfirmed",
            EvictionHeld { .. } => "EvictionHeld",
            BoundAwaitingAdoption => "BoundAwaitingAdoption",
            RollBack { .. } => "RollBack",
            DeletionBlocked { .. } => "DeletionBlocked",
            DeletionAllowed => "DeletionAllowed",
            ReleaseToCleaning { .. } => "ReleaseToCleaning",
            RepairCleaningRecord { .. } => "RepairCleaningRecord",
            Cleaning { .. } => "Cleaning",
            Cleaned => "Cleaned",
            StampTaints => "StampTaints",
            Evict { .. } => "Evict",
        }
    }

    /// What the decision on `server` (as read) says of it: the message of the condition
    /// its plan writes about the change, or else of its event, or else what the
    /// controller does. The claim it names is the server's ref unless the decision
    /// carries one.
    pub fn describe(&self, server: &CachedServer) -> String {
        use ServerDecision::*;
        let held = || holder(server);
        match self {
            Available => available_message(server).into(),
            ClaimForWinner {
                winner,
                restoring: false,
            } => format!("server is claimed by {}", describe_ref(winner)),
            ClaimForWinner {
                winner,
                restoring: true,
            } => format!(
                "server is claimed by {} again: the claim's status records its bind to this server",
                describe_ref(winner)
            ),
            ReservedClaimMissing => format!("reserved for claim {}, which does not exist", held()),
            FillUid { claim } => {
                format!("server is claimed by {}, as reserved", describe_ref(claim))
            }
            ReservedAwaitingAdoption => format!(
                "reserved for claim {}, which names no server: it waits for the claim to adopt it",
                held()
            ),
            ReservedClaimElsewhere => format!(
                "reserved for claim {}, which names another server or cannot take this one",
                held()
            ),
            ReservedAwaitingQuota => format!(
                "reserved for claim {}, which its namespace's quota has not charged yet: it waits for the charge",
                held()
            ),
            ConfirmClaimGone { claim } => format!(
                "claim {} is missing from the cache: it is read live before the server is released",
                describe_ref(claim)
            ),
            Release { policy } => released(server, *policy),
            BoundConfirmed => format!("bound to claim {}", describe_ref(&held_ref(server))),
            EvictionHeld { hold } => format!(
                "bound to claim {}, whose eviction waits: {}",
                describe_ref(&held_ref(server)),
                hold
            ),
            BoundAwaitingAdoption => format!(
                "bound to claim {}, which has yet to record this server",
                describe_ref(&held_ref(server))
            ),
            RollBack { cause } => rolled_back(server, cause),
            DeletionBlocked { holder } => format!(
                "server is being deleted but claim {} still holds it; delete the claim first",
                describe_ref(holder)
            ),
            DeletionAllowed => {
                "server is being deleted and no live claim holds it: its finalizer goes".into()
            }
            ReleaseToCleaning { gates } => format!(
                "{}; no claim may bind until the release gates pass for release {}: {}",
                released(server, ReclaimPolicy::Recycle),
                release_generation(server),
                gates.join(", ")
            ),
            RepairCleaningRecord {
                release,
                gates,
                problem,
            } => repaired(*release, gates, problem),
            Cleaning { release, pending } => waiting_for_gates(*release, pending),
            Cleaned => "every release gate passed; the server is available again".into(),
            StampTaints => {
                "an Evict taint has no timeAdded: the time now is written into it, and its grace periods count from it".into()
            }
            Evict {
                holder,
                policy,
                gates,
            } => evicted(holder, *policy, gates, server),
        }
    }
}

/// The message of a free server's condition.
pub(super) const AVAILABLE: &str = "free for any claim that can use it";

/// The `Available` condition's message: [`AVAILABLE`], unless a cordon keeps every new
/// claim off the server, which the message then says instead.
pub(super) fn available_message(server: &CachedServer) -> &'static str {
    match server.spec.unclaimable {
        true => "free, but cordoned (spec.unclaimable): no new claim binds until it is uncordoned",
        false => AVAILABLE,
    }
}

/// The ref `server` holds, or an empty one (a decision that names it implies one).
fn held_ref(server: &CachedServer) -> ServerClaimRef {
    server.spec.server_claim_ref.clone().unwrap_or_default()
}

/// The claim the server's ref names, without a uid (a reservation has none).
fn holder(server: &CachedServer) -> ClaimKey {
    ClaimKey::of_ref(&held_ref(server))
}

fn released(server: &CachedServer, policy: ReclaimPolicy) -> String {
    let holder = describe_ref(&held_ref(server));
    match policy {
        ReclaimPolicy::Recycle => {
            format!("released from claim {holder}, which is gone (reclaimPolicy Recycle)")
        }
        ReclaimPolicy::Retain => format!(
            "released from claim {holder}, which is gone (reclaimPolicy Retain: clear spec.serverClaimRef to reuse)"
        ),
    }
}

fn evicted(
    holder: &ServerClaimRef,
    policy: ReclaimPolicy,
    gates: &[String],
    server: &CachedServer,
) -> String {
    let holder = describe_ref(holder);
    let then = match (policy, gates) {
        (ReclaimPolicy::Retain, _) => {
            "reclaimPolicy Retain: clear spec.serverClaimRef to reuse".to_string()
        }
        (ReclaimPolicy::Recycle, []) => "reclaimPolicy Recycle".to_string(),
        (ReclaimPolicy::Recycle, gates) => format!(
            "no claim may bind until the release gates pass for release {}: {}",
            release_generation(server),
            gates.join(", ")
        ),
    };
    format!("released from claim {holder}, which an Evict taint evicted ({then})")
}

fn rolled_back(server: &CachedServer, cause: &RollBackCause) -> String {
    let holder = describe_ref(&held_ref(server));
    match cause {
        RollBackCause::NamesAnother(other) => {
            format!("claim {holder} names server {other} now; this server is free again")
        }
        RollBackCause::CannotAdopt(why) => format!(
            "claim {holder} names no server and cannot take this one ({why}); this server is free again"
        ),
        RollBackCause::GivenBack => format!(
            "claim {holder} gave this server back: the API server refused the write that would have completed its bind; this server is free again"
        ),
    }
}

fn repaired(release: i64, gates: &[String], problem: &RecordProblem) -> String {
    let what = match problem {
        RecordProblem::UnusableRelease(raw) => format!(
            "{ANNOTATION_CLEANING} was {raw:?}, which no cleaner can copy into observedGeneration"
        ),
        RecordProblem::GatesNotRecorded => format!("{ANNOTATION_CLEANING_GATES} was missing"),
    };
    format!(
        "{what}; recorded release {release} with gates {}: a cleaner passes each with observedGeneration {release}",
        gates.join(", ")
    )
}

/// The message of a server's `Cleaning` condition while gates are pending: each gate,
/// and what a cleaner writes to pass it.
pub(super) fn waiting_for_gates(release: i64, pending: &[Pending]) -> String {
    let detailed: Vec<String> = pending.iter().map(Pending::to_string).collect();
    format!(
        "waiting for release gates: {} (a cleaner passes a gate by setting the condition of its name to True with observedGeneration {release}, the value of {ANNOTATION_CLEANING} when it started)",
        detailed.join(", ")
    )
}
