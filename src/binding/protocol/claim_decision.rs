//! The claim controller's decisions: one variant, and one match arm, per row of the claim
//! table in docs/binding.md. Pure: the caller supplies the claim, a view of the servers and
//! what it has chosen for other claims; the result says what to do, not how to do it.

use k8s_openapi::jiff::Timestamp;

use crate::api::{CachedClaim, CachedServer, ServerClaimRef, ServerPhase};

use crate::binding::claim_side::assumed::claim_key;
use crate::binding::claim_side::backoff::Refusal;
use crate::binding::meta::{self, is_controller_chosen};
use crate::binding::placement::{Ahead, PickInputs, Placement, WAITING_FOR_TURN};
use crate::binding::protocol::why::{PickState, Unavailability};
use crate::binding::protocol::winner::{is_picked, outranked_on, turn_on};
use crate::binding::reasons::PendingReason;
use crate::binding::selector::selector_matches;
use crate::binding::state::class_labels::own_part;
use crate::binding::state::eligibility::{Ineligible, RefMatch, eligibility, ref_match};
use crate::binding::state::eviction::{Eviction, eviction, is_noticed, was_evicted};
use crate::binding::state::evidence::{
    can_restore, gave_back, pair_agrees, records_bind_named, records_bind_to,
};
use crate::binding::world::budgets::BudgetHold;
use crate::binding::world::classes::ClassCheck;
use crate::binding::world::quota::{QuotaCheck, QuotaFull, QuotaUncounted};
use crate::binding::world::view::{ClaimView, Liveness, ServerView};

/// What the claim controller does with a claim. Variant names follow the table rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimDecision {
    // ---- Bound path: the claim carries `bind-completed`. ----
    /// Bound claim, `serverRef` empty, but a server still holds the claim's uid: write
    /// `serverRef` back (a bound claim never moves; a mistaken edit must not hand the
    /// tenant's machine to someone else).
    RestoreServerRef { server: String },
    /// `bind-completed` without a bind behind it for the server the claim names (the
    /// server does not hold the claim's uid and the status records no bind to it; or no
    /// server is named and the claim was never bound): copied, forged, or left from a
    /// bind that ended. Drop it; the claim takes the unbound path.
    ClearStaleBindCompleted,
    /// Bound claim, `serverRef` empty and no server holds it: phase Lost, Warning `ClaimLost`.
    BoundServerRefCleared,
    /// Bound claim, the server is missing from the cache: read it live before concluding.
    ConfirmServerMissing { server: String },
    /// Bound claim, the server is missing (confirmed live): phase Lost, Warning `ClaimLost`.
    BoundServerMissing { server: String },
    /// Bound claim whose status records this server, the server's `serverClaimRef` is
    /// empty (or names this claim without a uid): keep Bound; the server controller
    /// restores the ref.
    BoundServerRefLost { server: String },
    /// Bound claim, the server names this claim's uid: ensure phase Bound.
    /// `selector_mismatch`: the claim's selector (added after the bind) does not match
    /// the server; the binding stays, and the condition says so. `server_deleting`: the
    /// server has a deletionTimestamp (its protection finalizer keeps it while the claim
    /// lives); the condition and a Warning say so. `eviction`: an `Evict` taint ends the
    /// bind at its deadline; condition `DisruptionTarget` and a Warning say when, and
    /// the condition goes when the eviction is cancelled. `held`: the deadline passed
    /// but a disruption budget holds the eviction (the condition says which; the
    /// admin's hard deadline ends the hold). The status records the server
    /// (`server_uid`) as the evidence of the bind.
    BoundConfirmed {
        server: String,
        server_uid: String,
        selector_mismatch: bool,
        server_deleting: bool,
        eviction: Option<Eviction>,
        held: Option<Box<BudgetHold>>,
    },
    /// The claim's bind ended by an eviction: its server's `Evict` taint reached its
    /// deadline (`eviction`), or its status already says so (`None`). Phase Lost,
    /// reason `Evicted`, Warning `ClaimEvicted`, once; from then on the claim takes no
    /// server, as a `Lost` PersistentVolumeClaim (docs/binding.md, "Eviction").
    Evicted {
        server: String,
        eviction: Option<Eviction>,
    },
    /// Bound claim, the server names another claim or uid: phase Lost, Warning `ClaimMisbound`.
    BoundMisbound {
        server: String,
        holder: ServerClaimRef,
    },

    // ---- Unbound path. ----
    /// The claim's last write was refused and it backs off ([`crate::binding::claim_side::backoff`]): Pending
    /// `WriteRefused` with the API server's message, Warning `WriteRefused`; nothing else
    /// until the back-off ends.
    WriteRefused { refusal: Refusal },
    /// C backs off because its completing write (`CompleteBind`) was refused, and S, which
    /// it chose, holds its uid: give S back (clear `serverRef` and `pre-bound`), recording
    /// it in `status.givenBackServerRef`, Pending `WriteRefused`, Warning `WriteRefused`.
    GiveBackServer {
        server: String,
        server_uid: String,
        refusal: Refusal,
    },
    /// The claim names no class and a default class exists that lets its namespace in:
    /// write its name into `spec.serverClassName` (docs/binding.md, "Server classes").
    AssignDefaultClass { class: String },
    /// The claim's `serverClassName` names no class: Pending `ClassNotFound`, Warning of
    /// that reason; a controller-chosen `serverRef` is withdrawn.
    ClassNotFound { class: String },
    /// The claim's class (named, or the default) does not let its namespace in: Pending
    /// `ClassNotAllowed`, Warning of that reason; a controller-chosen `serverRef` is
    /// withdrawn.
    ClassNotAllowed { class: String },
    /// A quota of the claim's namespace limits its class, is full, and does not charge
    /// the claim: Pending `QuotaExceeded`, Warning of that reason; a controller-chosen
    /// `serverRef` is withdrawn (docs/binding.md, "Server quotas").
    QuotaExceeded { full: QuotaFull },
    /// The claim's named server is its across a restore ([`restoring`]), and a quota of
    /// its namespace limits its class, is full, and does not charge it: Pending
    /// `QuotaExceeded`, Warning of that reason; the claim keeps its `serverRef` and the
    /// server stays reserved for it until the quota has room (docs/binding.md, "Restore").
    RestoreAwaitingQuota { server: String, full: QuotaFull },
    /// A quota of the claim's namespace limits its class, does not charge the claim, and
    /// has not counted the namespace's holders since it was created, edited, or its
    /// status was lost: Pending `QuotaNotCounted`, Warning of that reason. Transient: the
    /// claim keeps any `serverRef` it has, and the server side binds nothing of it until
    /// the quota charges it. The count comes first, then admission.
    QuotaNotCounted { quota: QuotaUncounted },
    /// No `serverRef`, and a server is reserved for this claim and eligible: adopt it.
    AdoptReservedServer { server: String },
    /// No `serverRef`, an eligible free server exists: choose the best fit.
    PickBestFit { server: String },
    /// No `serverRef`, eligible free servers exist, but every maximum matching of the
    /// waiting claims needs them for claims ahead of this one in the fair order: Pending
    /// `WaitingForTurn`, Normal `WaitingForTurn`. `why` counts every server by its first
    /// reason, as the message says.
    WaitForTurn { why: Unavailability },
    /// No `serverRef`, nothing eligible: Pending `NoMatchingServer`, Normal `FailedBinding`,
    /// saying `why` server by server.
    NoMatchingServer { why: Unavailability },
    /// The controller-chosen server is missing: withdraw and pick again.
    WithdrawMissingServer { server: String },
    /// The user-chosen server is missing: Pending `ServerNotFound`.
    ServerNotFound { server: String },
    /// The server has no `serverClaimRef` and is eligible, and the claim's ref is this
    /// controller's pick in flight or the claim has its turn for it ([`turn_on`]): wait
    /// for the server controller.
    WaitForServer { server: String },
    /// The controller-chosen server has no ref and is eligible, the ref is not a pick this
    /// controller has in flight (made before a restart, by another replica, or written
    /// by hand), and the claim has its turn for the server ([`turn_on`]): take the pick
    /// up as this controller's own (assume it, no write) and wake the server, whose
    /// controller completes it (docs/binding.md, "Whose pick is it").
    ResumePick { server: String },
    /// The controller-chosen server has no ref and is eligible, but the ref is not a pick
    /// this controller has in flight (made before a restart, by another replica, or
    /// written by hand) and claims ahead of this one need the server: withdraw, and wait
    /// in the queue again (docs/binding.md, "Whose pick is it").
    WithdrawOutOfTurn { server: String, ahead: Ahead },
    /// The controller-chosen server has no ref but is not eligible: withdraw, pick again.
    WithdrawIneligibleServer { server: String, why: Ineligible },
    /// The user-chosen server has no ref but is not eligible: Pending, Warning `ServerMismatch`.
    ServerMismatch { server: String, why: Ineligible },
    /// The server names this claim without a uid: wait for the server controller to fill it.
    WaitForUid { server: String },
    /// The server names this claim's uid: write `bind-completed`, then status Bound,
    /// recording the server (`server_uid`) as the evidence of the bind.
    CompleteBind { server: String, server_uid: String },
    /// The controller-chosen server serves another claim: withdraw, Normal `Rebinding`.
    WithdrawTakenServer {
        server: String,
        holder: ServerClaimRef,
    },
    /// The controller-chosen server refuses the server controller's writes
    /// ([`decide_refusing`]): withdraw, Warning `ServerWriteRefused`; picks pass it over.
    WithdrawRefusingServer { server: String, message: String },
    /// The user-chosen server refuses the server controller's writes: Pending
    /// `ServerWriteRefused`, Warning of that reason, quoting the API server; the claim
    /// keeps its ref and binds once an admin fixes the server.
    ServerRefusesWrites { server: String, message: String },
    /// The user-chosen server serves another claim: Pending, Warning `FailedBinding`
    /// with reason `ServerAlreadyClaimed`.
    ServerAlreadyClaimed {
        server: String,
        holder: ServerClaimRef,
    },
}

/// The condition reason of a claim no free server can serve now (`NoMatchingServer`).
pub const NO_MATCHING_SERVER: &str = PendingReason::NoMatchingServer.as_str();

/// The reasons of a waiting claim's condition, whose message is a summary of the
/// servers ([`ClaimDecision::summary_reason`]).
pub const SUMMARY_REASONS: [&str; 2] = [NO_MATCHING_SERVER, WAITING_FOR_TURN];

impl ClaimDecision {
    /// Whether the claim waits for a server: its status shows a summary of why
    /// ([`crate::binding::protocol::coalesce`]), and it is looked at again once that may be rewritten.
    pub fn waits(&self) -> bool {
        self.summary_reason().is_some()
    }

    /// Whether the decision came from weighing every server against the claim: a pick,
    /// or a wait for one ([`ClaimDecision::waits`]).
    pub fn weighs_servers(&self) -> bool {
        self.waits() || matches!(self, ClaimDecision::PickBestFit { .. })
    }

    /// The `Bound` condition reason of a claim that waits, whose message is a summary
    /// of the servers; `None` for a decision that does not wait.
    pub fn summary_reason(&self) -> Option<&'static str> {
        match self {
            ClaimDecision::NoMatchingServer { .. } => Some(NO_MATCHING_SERVER),
            ClaimDecision::WaitForTurn { .. } => Some(WAITING_FOR_TURN),
            _ => None,
        }
    }

    /// Whether a refused write of this decision's plan makes the claim back off: the
    /// unbound path's writes of the claim object (a pick, an adoption, a withdrawal, the
    /// completing `bind-completed`). A bound claim's repairs are retried as any failure.
    pub fn backs_off_when_refused(&self) -> bool {
        use ClaimDecision::*;
        matches!(
            self,
            AdoptReservedServer { .. }
                | AssignDefaultClass { .. }
                | ClassNotFound { .. }
                | ClassNotAllowed { .. }
                | QuotaExceeded { .. }
                | RestoreAwaitingQuota { .. }
                | QuotaNotCounted { .. }
                | PickBestFit { .. }
                | WaitForTurn { .. }
                | NoMatchingServer { .. }
                | WithdrawMissingServer { .. }
                | WithdrawIneligibleServer { .. }
                | WithdrawOutOfTurn { .. }
                | CompleteBind { .. }
                | GiveBackServer { .. }
                | WithdrawTakenServer { .. }
        )
    }

    /// Whether the decision's object write completes a bind: refused, the claim gives
    /// back the server that holds its uid. A refused give-back is not a completion: the
    /// claim then keeps the server, backing off, and its status says why.
    pub fn completes_a_bind(&self) -> bool {
        matches!(self, ClaimDecision::CompleteBind { .. })
    }

    /// Whether the decision ends the claim's bind by an eviction now (its status says
    /// so next).
    pub fn ends_a_bind_by_eviction(&self) -> bool {
        matches!(
            self,
            ClaimDecision::Evicted {
                eviction: Some(_),
                ..
            }
        )
    }

    /// Whether a disruption budget holds the eviction of the claim's bind, and until
    /// when at the latest (the taint's hard deadline).
    pub fn budget_holds_until(&self) -> Option<Option<Timestamp>> {
        match self {
            ClaimDecision::BoundConfirmed {
                eviction: Some(eviction),
                held: Some(_),
                ..
            } => Some(eviction.hard_deadline),
            _ => None,
        }
    }

    /// When the eviction a bound claim's decision sees running ends its bind.
    pub fn eviction_deadline(&self) -> Option<Timestamp> {
        match self {
            ClaimDecision::BoundConfirmed {
                eviction: Some(eviction),
                ..
            } => Some(eviction.deadline),
            _ => None,
        }
    }

    /// The server the decision is about, if it names one.
    pub fn server(&self) -> Option<&str> {
        use ClaimDecision::*;
        match self {
            RestoreServerRef { server }
            | ConfirmServerMissing { server }
            | BoundServerMissing { server }
            | BoundServerRefLost { server }
            | BoundConfirmed { server, .. }
            | BoundMisbound { server, .. }
            | Evicted { server, .. }
            | AdoptReservedServer { server }
            | PickBestFit { server }
            | WithdrawMissingServer { server }
            | ServerNotFound { server }
            | WaitForServer { server }
            | WithdrawIneligibleServer { server, .. }
            | WithdrawOutOfTurn { server, .. }
            | ResumePick { server }
            | ServerMismatch { server, .. }
            | WaitForUid { server }
            | GiveBackServer { server, .. }
            | CompleteBind { server, .. }
            | WithdrawTakenServer { server, .. }
            | WithdrawRefusingServer { server, .. }
            | ServerRefusesWrites { server, .. }
            | ServerAlreadyClaimed { server, .. }
            | RestoreAwaitingQuota { server, .. } => Some(server),
            BoundServerRefCleared
            | AssignDefaultClass { .. }
            | ClassNotFound { .. }
            | ClassNotAllowed { .. }
            | QuotaExceeded { .. }
            | QuotaNotCounted { .. }
            | ClearStaleBindCompleted
            | WriteRefused { .. }
            | WaitForTurn { .. }
            | NoMatchingServer { .. } => None,
        }
    }
}

impl ClaimDecision {
    /// Whether the decision moves the claim toward a bind the server controller makes:
    /// a claim a quota limits is charged to it first ([`crate::binding::world::quota`]).
    pub fn moves_toward_bind(&self) -> bool {
        use ClaimDecision::*;
        matches!(
            self,
            PickBestFit { .. }
                | AdoptReservedServer { .. }
                | ResumePick { .. }
                | WaitForServer { .. }
                | WaitForUid { .. }
        )
    }
}

/// The server a decision assumes chosen for its claim, if it starts an assumption
/// ([`crate::binding::claim_side::assumed`]). Adopting a reservation does not: the server's ref already keeps
/// it from other picks.
pub fn assumption_for(decision: &ClaimDecision) -> Option<&str> {
    match decision {
        ClaimDecision::PickBestFit { server } | ClaimDecision::ResumePick { server } => {
            Some(server)
        }
        _ => None,
    }
}

/// The servers a pick for `claim` passes over: those this controller chose for another
/// claim and has not yet seen confirmed (`chosen_for_others`, the assumed-choice cache),
/// and those another claim naming them would win ([`outranked_on`]; `turn`: whether a
/// claim naming a server has its turn, [`crate::binding::protocol::winner::turn_on`]). The result is the
/// `chosen_for_others` argument of [`decide_claim`].
pub fn pass_over<'a>(
    claim: &'a CachedClaim,
    servers: &'a (impl ServerView + ?Sized),
    claims: &'a (impl ClaimView + ?Sized),
    chosen_for_others: &'a dyn Fn(&str) -> bool,
    turn: &'a dyn Fn(&CachedClaim, &str) -> bool,
) -> impl Fn(&str) -> bool + 'a {
    move |name| {
        let in_turn = |rival: &CachedClaim| turn(rival, name);
        chosen_for_others(name)
            || servers
                .server(name)
                .is_some_and(|s| outranked_on(s, claim, claims, &in_turn))
    }
}

/// What a claim's decision weighs besides the claim and the servers: how the claim
/// stands with its class and its quotas ([`crate::binding::world`]), the servers whose
/// last write the API server refused, and what a pick weighs.
#[derive(Clone, Copy)]
pub struct ClaimInputs<'a> {
    pub class: &'a ClassCheck,
    pub quota: &'a QuotaCheck,
    /// The message of a server's last refused write, while it is refused
    /// ([`crate::binding::claim_side::backoff::RefusingServers`]).
    pub refusing: &'a dyn Fn(&str) -> Option<String>,
    pub pick: PickInputs<'a>,
    /// The time an eviction's deadline is weighed against ([`eviction`]).
    pub now: Timestamp,
    /// The disruption budget an eviction of the claim would break now, if any
    /// ([`crate::binding::world::budgets::budget_hold`]).
    pub budget_hold: &'a dyn Fn(&CachedClaim) -> Option<BudgetHold>,
}

impl<'a> ClaimInputs<'a> {
    /// The inputs of a claim no class and no quota applies to, no server refusing writes.
    pub fn unclassed(pick: PickInputs<'a>) -> Self {
        Self {
            class: &ClassCheck::NoClass,
            quota: &QuotaCheck::Unlimited,
            refusing: &|_| None,
            pick,
            // No eviction is due at the epoch.
            now: Timestamp::UNIX_EPOCH,
            budget_hold: &|_| None,
        }
    }
}

/// Decides what to do with `claim`, row by row of the claim table: the class, quota and
/// refusing-server rows first ([`decide_entitlement`]) but for a claim backing off (its
/// refusal decides) and a bind that stands (it is completed again whatever its class or
/// quota says now), then the bound path, a bind that stands, and the unbound path.
/// `inputs.pick` is what a pick weighs besides the servers: the servers it passes over
/// ([`pass_over`]), the other waiting claims, and the picks still in flight (the
/// assumed-choice cache).
pub fn decide_claim(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    // Controller-written, so no tenant edit undoes it: not a stripped `bind-completed`,
    // nor a new `serverRef`.
    if was_evicted(claim) {
        return evicted_already(claim);
    }
    let standing = standing_bind(claim, servers);
    if inputs.pick.refused.is_none()
        && standing.is_none()
        && let Some(decision) = decide_entitlement(claim, servers, inputs)
    {
        return decision;
    }
    if meta::is_bind_completed(claim) {
        return decide_bound(claim, servers, liveness, inputs);
    }
    match standing {
        Some(bind) => restore_standing_bind(claim, bind),
        None => decide_unbound(claim, servers, &inputs.pick),
    }
}

/// The class rows, the quota rows and the refusing-server rows, in that order.
fn decide_entitlement(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    inputs: &ClaimInputs<'_>,
) -> Option<ClaimDecision> {
    decide_class(claim, inputs.class)
        .or_else(|| decide_quota(claim, inputs.quota, restoring(claim, servers)))
        .or_else(|| decide_refusing(claim, servers, inputs.refusing))
}

/// A bind that stands without `bind-completed`: the server holds the claim's uid and the
/// claim's status records that very server object ([`records_bind_to`]), both written
/// only by the controllers. A tenant that strips the annotation (or a restore that lost
/// it) changes nothing of it.
#[derive(Clone, Copy, Debug)]
pub struct StandingBind<'s> {
    pub server: &'s CachedServer,
    /// Whether the claim's `serverRef` names the server (else it is empty).
    pub named: bool,
}

/// The bind that stands for a claim without `bind-completed`, if any: on the server its
/// `serverRef` names, or, with no `serverRef`, the lowest-named server holding its uid
/// that its status records. Such a claim completes the bind again before any other row
/// (back-off, class, quota): the bind is real, so nothing may withdraw or give it back.
pub fn standing_bind<'s>(
    claim: &CachedClaim,
    servers: &'s (impl ServerView + ?Sized),
) -> Option<StandingBind<'s>> {
    if meta::is_bind_completed(claim) {
        return None;
    }
    let stands = |s: &&'s CachedServer| {
        ref_match(s, claim) == RefMatch::SameUid && records_bind_to(claim, s)
    };
    if let Some(r) = &claim.spec.server_ref {
        let server = servers.server(&r.name).filter(stands)?;
        return Some(StandingBind {
            server,
            named: true,
        });
    }
    let held = servers.reserved_for(meta::namespace(claim), meta::name(claim));
    let server = held
        .into_iter()
        .filter(stands)
        .min_by_key(|s| meta::name(*s))?;
    Some(StandingBind {
        server,
        named: false,
    })
}

/// The server `claim` names when it is the claim's across a restore: the pair agrees
/// ([`pair_agrees`]) and the server may be restored ([`can_restore`]), not released. The
/// quota charges such a claim before the server controller completes the pair.
pub fn restoring<'s>(
    claim: &CachedClaim,
    servers: &'s (impl ServerView + ?Sized),
) -> Option<&'s CachedServer> {
    let named = claim.spec.server_ref.as_ref()?;
    servers
        .server(&named.name)
        .filter(|s| pair_agrees(s, claim) && can_restore(s).is_ok())
}

/// The row of a standing bind: write `bind-completed` back (`CompleteBind`, which keeps
/// the recorded `boundTime`), or first the `serverRef` back when it is empty.
fn restore_standing_bind(claim: &CachedClaim, bind: StandingBind<'_>) -> ClaimDecision {
    let server = meta::name(bind.server).to_string();
    debug_assert!(!meta::is_bind_completed(claim));
    if !bind.named {
        return ClaimDecision::RestoreServerRef { server };
    }
    ClaimDecision::CompleteBind {
        server_uid: meta::uid(bind.server).unwrap_or_default().to_string(),
        server,
    }
}

/// The class rows, checked on the unbound path before every row but those of a claim
/// backing off ([`crate::binding::world::classes`]; docs/binding.md, "Server classes"): a claim without
/// a class gets the default one written, and a claim whose class is missing or does not
/// let its namespace in says so. A bound claim keeps its server whatever its class says
/// now, as it keeps it through a relabel.
fn decide_class(claim: &CachedClaim, check: &ClassCheck) -> Option<ClaimDecision> {
    if meta::is_bind_completed(claim) {
        return None;
    }
    let class = check.class().unwrap_or_default().to_string();
    match check {
        ClassCheck::NoClass | ClassCheck::Of(_) => None,
        ClassCheck::Default(_) => Some(ClaimDecision::AssignDefaultClass { class }),
        ClassCheck::Missing(_) => Some(ClaimDecision::ClassNotFound { class }),
        ClassCheck::NotAllowed(_) => Some(ClaimDecision::ClassNotAllowed { class }),
    }
}

/// The quota row, checked on the unbound path after the class rows, with the same
/// exception ([`crate::binding::world::quota`]; docs/binding.md, "Server quotas"): a claim that a full
/// quota does not charge waits. A bound claim keeps its server whatever its quota says
/// now, and counts in it. A claim `restoring` its server across a restore is no bound
/// claim, whatever annotations it carries: it waits for room keeping the server.
fn decide_quota(
    claim: &CachedClaim,
    check: &QuotaCheck,
    restoring: Option<&CachedServer>,
) -> Option<ClaimDecision> {
    match (check, restoring) {
        (QuotaCheck::Exceeded(full), Some(server)) => Some(ClaimDecision::RestoreAwaitingQuota {
            server: meta::name(server).to_string(),
            full: full.clone(),
        }),
        _ if meta::is_bind_completed(claim) && restoring.is_none() => None,
        (QuotaCheck::Exceeded(full), None) => {
            Some(ClaimDecision::QuotaExceeded { full: full.clone() })
        }
        (QuotaCheck::NotCounted(quota), _) => Some(ClaimDecision::QuotaNotCounted {
            quota: quota.clone(),
        }),
        _ => None,
    }
}

/// The row of a claim naming a server whose last write the API server refused
/// (`refusing`: its message, until the server changes), which holds no bind of it: the
/// server controller cannot complete a bind there, so the claim is told why, and a
/// controller-chosen ref is withdrawn. Checked on the unbound path after the quota row.
fn decide_refusing(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    refusing: &dyn Fn(&str) -> Option<String>,
) -> Option<ClaimDecision> {
    let named = claim.spec.server_ref.as_ref()?;
    let message = refusing(&named.name)?;
    let server = named.name.clone();
    let holds = servers
        .server(&server)
        .is_some_and(|s| ref_match(s, claim) == RefMatch::SameUid);
    match (holds, is_controller_chosen(claim)) {
        (true, _) => None,
        (false, true) => Some(ClaimDecision::WithdrawRefusingServer { server, message }),
        (false, false) => Some(ClaimDecision::ServerRefusesWrites { server, message }),
    }
}

/// The bound path, as the PV controller's `syncBoundClaim`. `bind-completed` is a
/// tenant-writable hint, so it counts only with evidence of a bind to the server it names
/// (`evidence`): that server's ref carrying the claim's uid, or the claim's status
/// recording that server. Without, it was copied, forged, or left from a bind that ended
/// (a `Lost` claim pointed elsewhere): it is dropped and the claim takes the unbound
/// path, where eligibility applies. `status.boundTime` (a bind's status was written)
/// tells a `Lost` claim from a copy where no server is named.
fn decide_bound(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    liveness: Liveness,
    inputs: &ClaimInputs<'_>,
) -> ClaimDecision {
    use ClaimDecision::*;
    let finished = claim
        .status
        .as_ref()
        .is_some_and(|s| s.bound_time.is_some());
    let Some(server) = claim.spec.server_ref.as_ref().map(|r| r.name.clone()) else {
        return match holding_server(claim, servers) {
            Some(server) => RestoreServerRef { server },
            None if finished => BoundServerRefCleared,
            None => ClearStaleBindCompleted,
        };
    };
    let Some(s) = servers.server(&server) else {
        return match liveness {
            Liveness::Cached => ConfirmServerMissing { server },
            Liveness::Confirmed if records_bind_named(claim, &server) => {
                BoundServerMissing { server }
            }
            Liveness::Confirmed => ClearStaleBindCompleted,
        };
    };
    let eviction = eviction(s, claim);
    let held = match due_eviction(claim, s, eviction.as_ref(), inputs) {
        Due::Ahead => None,
        Due::Held(hold) => Some(hold),
        // Whether or not the server controller released the server yet.
        Due::Ends => return Evicted { server, eviction },
    };
    match ref_match(s, claim) {
        RefMatch::SameUid => BoundConfirmed {
            // Read directly, not as eligibility's first reason: a server being deleted
            // or cordoned may also have stopped matching. The tenant's own selector
            // only: a class narrowed since the bind is not the claim's selector.
            selector_mismatch: claim
                .spec
                .server_selector
                .as_ref()
                .is_some_and(|sel| !selector_matches(&own_part(sel), meta::labels(s))),
            server_deleting: meta::is_deleting(s),
            server_uid: meta::uid(s).unwrap_or_default().to_string(),
            eviction,
            held,
            server,
        },
        _ if records_bind_to(claim, s) => match ref_match(s, claim) {
            RefMatch::Empty | RefMatch::NameOnly => BoundServerRefLost { server },
            _ => BoundMisbound {
                server,
                holder: s.spec.server_claim_ref.clone().unwrap_or_default(),
            },
        },
        // The server object the claim was bound to is gone; this one was created under
        // its name since. A Lost claim never takes another machine on its own.
        _ if records_bind_named(claim, &server) => BoundServerMissing { server },
        // A restore: the server names an incarnation of this claim's name that is gone,
        // and the claim names the server. The server controller gives it the claim's
        // uid if it may be restored, and nothing moves here meanwhile; one released,
        // being deleted or cleaned never is (as on the unbound path), so the copied
        // annotation goes and the unbound path says why.
        _ if pair_agrees(s, claim) && can_restore(s).is_ok() => BoundServerRefLost { server },
        _ => ClearStaleBindCompleted,
    }
}

/// Where a bind's eviction stands now ([`due_eviction`]).
enum Due {
    /// Not due (or not this bind's).
    Ahead,
    /// Due, and a disruption budget holds it (until the admin's hard deadline).
    Held(Box<BudgetHold>),
    /// Due: the bind ends now.
    Ends,
}

/// Whether the eviction of the bind of `claim` to `s` is due now, and held by a budget.
fn due_eviction(
    claim: &CachedClaim,
    s: &CachedServer,
    eviction: Option<&Eviction>,
    inputs: &ClaimInputs<'_>,
) -> Due {
    let now = inputs.now;
    let Some(due) = eviction.filter(|e| e.is_due(now)) else {
        return Due::Ahead;
    };
    if ref_match(s, claim) != RefMatch::SameUid && !records_bind_to(claim, s) {
        return Due::Ahead;
    }
    let held = (!due.is_forced(now))
        .then(|| (inputs.budget_hold)(claim))
        .flatten();
    let bound = ref_match(s, claim) == RefMatch::SameUid;
    match held {
        Some(hold) => Due::Held(Box::new(hold)),
        // A bound claim says an eviction runs before one ends its bind: the notice write
        // moves its resourceVersion, so a cancel later writes the claim again, and an
        // eviction a budget recorded on the noticed version can no longer land after it
        // (the budget's recount then drops the record, `budgets::record_ends`).
        None if bound && !is_noticed(claim) => Due::Ahead,
        None => Due::Ends,
    }
}

/// The row of a claim whose status says an eviction ended its bind: it stays so.
fn evicted_already(claim: &CachedClaim) -> ClaimDecision {
    let recorded = claim
        .status
        .as_ref()
        .and_then(|s| s.bound_server_ref.as_ref());
    let named = claim.spec.server_ref.as_ref().map(|r| &r.name);
    ClaimDecision::Evicted {
        server: recorded
            .map(|r| &r.name)
            .or(named)
            .cloned()
            .unwrap_or_default(),
        eviction: None,
    }
}

/// Why no server can take `claim` now, every server counted once.
fn unavailability(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    pick: &PickInputs<'_>,
    waits_turn: bool,
) -> Unavailability {
    let state = PickState {
        skip: pick.skip,
        refuses: pick.refuses,
        waits_turn,
    };
    Unavailability::of(claim, servers.all(), state)
}

/// The unbound path, as the PV controller's `syncUnboundClaim`.
fn decide_unbound(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
    pick: &PickInputs<'_>,
) -> ClaimDecision {
    use ClaimDecision::*;
    let controller_chosen = is_controller_chosen(claim);
    if let Some(refusal) = pick.refused {
        let refusal = refusal.clone();
        return match held_after_refused_completion(claim, servers, &refusal) {
            // A user's serverRef is the tenant's to clear; one already cleared (a
            // give-back whose status write failed) leaves only the status to write.
            Some(s) if controller_chosen || claim.spec.server_ref.is_none() => GiveBackServer {
                server: meta::name(s).to_string(),
                server_uid: meta::uid(s).unwrap_or_default().to_string(),
                refusal,
            },
            _ => WriteRefused { refusal },
        };
    }
    let Some(server) = claim.spec.server_ref.as_ref().map(|r| r.name.clone()) else {
        if let Some(reserved) = adoptable_reservation(claim, servers) {
            return AdoptReservedServer { server: reserved };
        }
        return match servers.place(claim, pick) {
            Placement::Pick(server) => PickBestFit {
                server: server.to_string(),
            },
            Placement::WaitForTurn(ahead) => WaitForTurn {
                why: unavailability(claim, servers, pick, true).with_ahead(ahead),
            },
            Placement::NoMatch => NoMatchingServer {
                why: unavailability(claim, servers, pick, false),
            },
        };
    };

    let Some(s) = servers.server(&server) else {
        return if controller_chosen {
            WithdrawMissingServer { server }
        } else {
            ServerNotFound { server }
        };
    };
    decide_named(claim, s, servers, pick)
}

/// The unbound rows of a claim whose `serverRef` names `s`, which the cache shows: by how
/// the server's ref relates to the claim.
fn decide_named(
    claim: &CachedClaim,
    s: &CachedServer,
    servers: &(impl ServerView + ?Sized),
    pick: &PickInputs<'_>,
) -> ClaimDecision {
    use ClaimDecision::*;
    let controller_chosen = is_controller_chosen(claim);
    let server = meta::name(s).to_string();
    match ref_match(s, claim) {
        // A reservation by name does not override the claim's selector: an ineligible
        // reserved server is withdrawn or reported like an unreserved one.
        found @ (RefMatch::Empty | RefMatch::NameOnly) => match eligibility(s, claim) {
            Ok(()) if found == RefMatch::Empty => wait_for_named_server(claim, s, servers, pick),
            Ok(()) => WaitForUid { server },
            Err(why) if controller_chosen => WithdrawIneligibleServer { server, why },
            Err(why) => ServerMismatch { server, why },
        },
        RefMatch::SameUid => CompleteBind {
            server_uid: meta::uid(s).unwrap_or_default().to_string(),
            server,
        },
        // A restore ([`pair_agrees`]): the ref names a gone incarnation of this claim's
        // name and the claim names the server: the server is this claim's, as a bind
        // with evidence ([`can_restore`]).
        RefMatch::OtherUid if pair_agrees(s, claim) && !is_released(s) => match can_restore(s) {
            Ok(()) => WaitForUid { server },
            Err(why) if controller_chosen => WithdrawIneligibleServer { server, why },
            Err(why) => ServerMismatch { server, why },
        },
        // A Released server's ref names a claim that is gone: nobody holds it, it waits
        // for an admin, and that is what the claim must be told.
        RefMatch::OtherUid | RefMatch::OtherClaim if is_released(s) => {
            let why = Ineligible::Released;
            if controller_chosen {
                WithdrawIneligibleServer { server, why }
            } else {
                ServerMismatch { server, why }
            }
        }
        RefMatch::OtherUid | RefMatch::OtherClaim => {
            let holder = s.spec.server_claim_ref.clone().unwrap_or_default();
            if controller_chosen {
                WithdrawTakenServer { server, holder }
            } else {
                ServerAlreadyClaimed { server, holder }
            }
        }
    }
}

/// A claim naming a free server it is eligible for waits for the server controller: this
/// controller's pick was made in its turn, and any other ref waits its turn first. A name
/// is not a place in the queue (docs/binding.md, "The matching"), nor is a `pre-bound`
/// this controller did not write: out of its turn it is withdrawn, as the controller's
/// to withdraw, and the claim queues again ("Whose pick is it").
fn wait_for_named_server(
    claim: &CachedClaim,
    s: &CachedServer,
    servers: &(impl ServerView + ?Sized),
    pick: &PickInputs<'_>,
) -> ClaimDecision {
    let server = meta::name(s).to_string();
    let controller_chosen = is_controller_chosen(claim);
    // Another claim's pick of it in flight: the server controller settles which wins.
    let picked_for_other = pick.assumed.chosen_for_other(&server, &claim_key(claim));
    if is_picked(&server, claim, pick.assumed) || controller_chosen && picked_for_other {
        return ClaimDecision::WaitForServer { server };
    }
    let Placement::WaitForTurn(ahead) = turn_on(&server, claim, servers, pick) else {
        return match controller_chosen {
            true => ClaimDecision::ResumePick { server },
            false => ClaimDecision::WaitForServer { server },
        };
    };
    if controller_chosen {
        return ClaimDecision::WithdrawOutOfTurn { server, ahead };
    }
    let state = PickState {
        skip: &|_| false,
        refuses: &|_| false,
        waits_turn: true,
    };
    let why = Unavailability::of(claim, [s], state).with_ahead(ahead);
    ClaimDecision::WaitForTurn { why }
}

/// The server that holds the claim's uid, when the write the claim backs off from was
/// the one completing that bind (or giving it back), and the claim has not recorded it
/// as given back yet: the one it names, or (a give-back whose status write failed) the
/// lowest-named one reserved for it.
fn held_after_refused_completion<'s>(
    claim: &CachedClaim,
    servers: &'s (impl ServerView + ?Sized),
    refusal: &Refusal,
) -> Option<&'s CachedServer> {
    if !refusal.completing {
        return None;
    }
    let holds = |s: &&CachedServer| ref_match(s, claim) == RefMatch::SameUid;
    match &claim.spec.server_ref {
        // Named again after an earlier give-back: a new bind, whatever the record says.
        Some(r) => servers.server(&r.name).filter(holds),
        None => servers
            .reserved_for(meta::namespace(claim), meta::name(claim))
            .into_iter()
            .filter(|s| holds(s) && !gave_back(claim, s))
            .min_by_key(|s| meta::name(*s)),
    }
}

fn is_released(server: &CachedServer) -> bool {
    server.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released)
}

/// The lowest-named server whose ref carries this claim's uid, if any.
fn holding_server(claim: &CachedClaim, servers: &(impl ServerView + ?Sized)) -> Option<String> {
    servers
        .reserved_for(meta::namespace(claim), meta::name(claim))
        .into_iter()
        .filter(|s| ref_match(s, claim) == RefMatch::SameUid)
        .map(|s| meta::name(s).to_string())
        .min()
}

/// The lowest-named server reserved for this claim (by name, uid empty or this claim's)
/// that is eligible for it: a user's reservation, or the server side of a bind whose claim
/// write was lost in a crash.
fn adoptable_reservation(
    claim: &CachedClaim,
    servers: &(impl ServerView + ?Sized),
) -> Option<String> {
    servers
        .reserved_for(meta::namespace(claim), meta::name(claim))
        .into_iter()
        .filter(|s| match ref_match(s, claim) {
            RefMatch::NameOnly => true,
            // Not the bind it gave back (its uid still on the server): that is freed.
            RefMatch::SameUid => !gave_back(claim, s),
            _ => false,
        })
        .filter(|s| eligibility(s, claim).is_ok())
        .map(|s| meta::name(s).to_string())
        .min()
}
