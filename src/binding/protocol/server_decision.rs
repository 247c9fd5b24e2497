//! The server controller's decisions: one variant, and one match arm, per row of the
//! server table in docs/binding.md. Pure, like the claim side.

use crate::api::names::FINALIZER_SERVER_PROTECTION;
use crate::binding::world::budgets::held_condition;

use crate::api::{CachedClaim, CachedServer, ReclaimPolicy, ServerClaimRef, Taint};

use crate::binding::meta::{self, claim_ref_of};
use crate::binding::protocol::winner::{Admit, Turn, winner};
use crate::binding::state::eligibility::{Ineligible, ref_uid};
use crate::binding::state::eviction::was_evicted;
use crate::binding::state::evidence::{
    can_restore, can_take_back, gave_back, pair_agrees, records_bind_to,
};
use crate::binding::state::gates::{Pending, pending_gates, release_record};
use crate::binding::world::view::{ClaimView, Liveness};

/// What the server controller does with a server. Variant names follow the table rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerDecision {
    /// No ref and no eligible claim in its turn names the server (a claim naming it out
    /// of its turn waits, `WaitingForTurn`): phase Available, drop the finalizer.
    Available,
    /// No ref, claims name the server: write the winner's ref (with uid), the
    /// `bound-by-controller` annotation and the finalizer; then phase Bound; Normal `Claimed`.
    /// `restoring`: the winner is a bound claim whose ref this server lost.
    ClaimForWinner {
        winner: ServerClaimRef,
        restoring: bool,
    },
    /// Name-only ref, no claim of that name: phase Available, still reserved.
    ReservedClaimMissing,
    /// Name-only ref, the claim exists and names this server: fill in the uid; phase Bound.
    FillUid { claim: ServerClaimRef },
    /// Name-only ref, the claim exists with no `serverRef`: wait for it to adopt the server.
    ReservedAwaitingAdoption,
    /// Name-only ref, the claim names this server and could take it, but a quota of its
    /// namespace limits its class and does not charge it yet: phase Available, still
    /// reserved, until the claim controller charges it (docs/binding.md, "Server quotas").
    ReservedAwaitingQuota,
    /// Name-only ref, the claim names another server (or this one, but the server cannot
    /// serve it): phase Available, still reserved.
    ReservedClaimElsewhere,
    /// Ref with uid, but the cache has no such claim (or another uid): read it live first.
    ConfirmClaimGone { claim: ServerClaimRef },
    /// Ref with uid, the claim is gone (confirmed live): release per the reclaim policy.
    Release { policy: ReclaimPolicy },
    /// Ref with the claim's uid, and the claim names this server: ensure phase Bound and
    /// the finalizer.
    BoundConfirmed,
    /// As `BoundConfirmed`, and the claim's status says a disruption budget holds the
    /// eviction of its bind (`hold`, the claim's `DisruptionTarget` message): the
    /// server's condition says so, so that whoever took it back sees what it waits for.
    EvictionHeld { hold: String },
    /// Ref with the claim's uid, the claim has no `serverRef` and will take the server:
    /// an unbound claim the server can serve adopts it (the claim write was lost in a
    /// crash), a bound claim restores its cleared `serverRef`.
    BoundAwaitingAdoption,
    /// Ref with the claim's uid, but the claim names another server, or names none and
    /// cannot adopt this one: roll back.
    RollBack { cause: RollBackCause },
    /// Being deleted while a live claim holds it: keep the finalizer, Warning `DeletionBlocked`.
    DeletionBlocked { holder: ServerClaimRef },
    /// Being deleted and no live claim holds it: drop the finalizer.
    DeletionAllowed,
    /// Ref with uid, the claim is gone (confirmed live), `Recycle`, and the server has
    /// release gates: release and start cleaning in one write (the ref cleared as by
    /// `Release`, the `cleaning` annotation set to the release's id and the gates in
    /// force recorded); then phase Cleaning.
    ReleaseToCleaning { gates: Vec<String> },
    /// Being cleaned, but the record cannot be matched: its release is no number a
    /// cleaner can copy, or its gates were not recorded (a restore, a hand edit). Write
    /// a usable record (`release`, `gates`), then phase Cleaning; Warning
    /// `CleaningRecordRepaired` says what was wrong.
    RepairCleaningRecord {
        release: i64,
        gates: Vec<String>,
        problem: RecordProblem,
    },
    /// Being cleaned, gates not passed for this release: phase Cleaning, saying which
    /// (and why, for a gate with a pass for another release).
    Cleaning { release: i64, pending: Vec<Pending> },
    /// Being cleaned, every gate passed for this release: drop the `cleaning` annotation
    /// (one write: the server is claimable again); then phase Available.
    Cleaned,
    /// An `Evict` taint has no `timeAdded`: write the time now into each such taint (its
    /// grace counts from it), then decide again.
    StampTaints,
    /// Ref with the claim's uid, and the claim's status says an eviction ended its bind
    /// (the claim side writes it at the deadline): release the server as for a claim
    /// gone, through cleaning when `gates` is not empty (`Recycle` with release gates);
    /// Normal `Evicted` (docs/binding.md, "Eviction").
    Evict {
        holder: ServerClaimRef,
        policy: ReclaimPolicy,
        gates: Vec<String>,
    },
}

/// What made a server's cleaning record unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordProblem {
    /// The `cleaning` annotation is not a whole number of at least 1 (this value).
    UnusableRelease(String),
    /// No `cleaning-gates` annotation: the gates in force were never recorded.
    GatesNotRecorded,
}

/// Why a server gives up a claim whose uid its ref carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RollBackCause {
    /// The claim names another server.
    NamesAnother(String),
    /// The claim names no server and cannot adopt this one.
    CannotAdopt(Ineligible),
    /// The claim gave this server back: its completing write was refused.
    GivenBack,
}

/// Decides what to do with `server`; `gates_now` are the release gates a release of it
/// would record now ([`crate::binding::state::gates::release_gates`]: its own and its bind's class's,
/// else `--release-gates`); `turn` whether the fair order lets a claim naming
/// the free server take it now ([`crate::binding::protocol::winner::turn_on`]); `admit` whether a claim's
/// quotas charge it, short of which it takes no server ([`Admit`]).
pub fn decide_server(
    server: &CachedServer,
    claims: &(impl ClaimView + ?Sized),
    liveness: Liveness,
    gates_now: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    use ServerDecision::*;

    let claim_ref = server.spec.server_claim_ref.as_ref();
    // The claim the ref names, but only the incarnation with the ref's uid.
    let holder = claim_ref.and_then(|r| {
        let uid = ref_uid(r)?;
        claims
            .claim(&r.namespace, &r.name)
            .filter(|c| meta::uid(*c) == Some(uid))
    });

    if meta::is_deleting(server) {
        return match (claim_ref, holder) {
            (Some(r), None) if ref_uid(r).is_some() && liveness == Liveness::Cached => {
                ConfirmClaimGone { claim: r.clone() }
            }
            (Some(r), Some(c)) if holds_server(server, c) => DeletionBlocked { holder: r.clone() },
            _ => DeletionAllowed,
        };
    }

    if needs_stamp(server) {
        return StampTaints;
    }

    // Cleaning comes before any ref: a reservation made meanwhile waits for it to end.
    if release_record(server).is_some() {
        return decide_cleaning(server, gates_now);
    }

    let Some(r) = claim_ref else {
        return match winner(server, claims, turn, admit) {
            Some((winner, restoring)) => ClaimForWinner { winner, restoring },
            None => Available,
        };
    };

    if ref_uid(r).is_none() {
        return decide_reserved(server, r, claims, admit);
    }

    let Some(c) = holder else {
        return match liveness {
            Liveness::Cached => ConfirmClaimGone { claim: r.clone() },
            Liveness::Confirmed => match restored(server, r, claims, admit) {
                Some(decision) => decision,
                None => release(server, gates_now),
            },
        };
    };
    decide_held(server, (r, c), gates_now)
}

/// The rows of a server whose ref carries the uid of claim `c`, which the cache holds:
/// an eviction ends the bind, else the claim keeps, adopts, restores or gives the
/// server back.
fn decide_held(
    server: &CachedServer,
    (r, c): (&ServerClaimRef, &CachedClaim),
    gates_now: &[String],
) -> ServerDecision {
    use ServerDecision::*;
    let name = meta::name(server);
    // The claim side ends the bind first (its status is the record, as its pick is),
    // then the server is released: no moment shows a `Bound` claim whose server went on.
    if was_evicted(c) {
        return evict(server, r, gates_now);
    }
    match c.spec.server_ref.as_ref().map(|s| s.name.as_str()) {
        Some(n) if n == name => match budget_hold_of(c) {
            Some(hold) => EvictionHeld { hold },
            None => BoundConfirmed,
        },
        Some(other) => RollBack {
            cause: RollBackCause::NamesAnother(other.to_string()),
        },
        // The claim names nothing: it restores its serverRef if bound, or adopts the
        // server if it can; a server it cannot adopt would be an orphaned reservation
        // forever, so it rolls back.
        None if gave_back(c, server) => RollBack {
            cause: RollBackCause::GivenBack,
        },
        None => match can_take_back(server, c) {
            Ok(()) => BoundAwaitingAdoption,
            Err(why) => RollBack {
                cause: RollBackCause::CannotAdopt(why),
            },
        },
    }
}

/// The release of a server whose claim is gone: through cleaning when it has release
/// gates and is recycled.
fn release(server: &CachedServer, gates_now: &[String]) -> ServerDecision {
    let policy = server.spec.reclaim_policy;
    if policy == ReclaimPolicy::Recycle && !gates_now.is_empty() {
        let gates = gates_now.to_vec();
        return ServerDecision::ReleaseToCleaning { gates };
    }
    ServerDecision::Release { policy }
}

/// The claim's own account of a budget holding its eviction (its `DisruptionTarget`
/// condition, controller-written), if it says so.
fn budget_hold_of(claim: &CachedClaim) -> Option<String> {
    held_condition(claim).map(|c| c.message.clone())
}

/// Whether an `Evict` (or report-only `None`) taint of `server` has no `timeAdded` yet.
pub fn needs_stamp(server: &CachedServer) -> bool {
    let unstamped = |t: &&Taint| t.time_added.is_none();
    server
        .spec
        .taints
        .iter()
        .filter(unstamped)
        .any(|t| t.effect.is_timed())
}

/// The release of a server whose claim an eviction ends: as [`release`], through
/// cleaning when it has release gates and is recycled.
fn evict(server: &CachedServer, holder: &ServerClaimRef, gates_now: &[String]) -> ServerDecision {
    let policy = server.spec.reclaim_policy;
    // `Retain` never cleans: an admin wipes before clearing the ref.
    let gates = match policy {
        ReclaimPolicy::Recycle => gates_now.to_vec(),
        ReclaimPolicy::Retain => Vec::new(),
    };
    ServerDecision::Evict {
        holder: holder.clone(),
        policy,
        gates,
    }
}

/// The rows of a server being cleaned: repair a record no cleaner can match, else wait
/// for the gates in force, else clean. The gates of a release now are read only to
/// repair a record that lacks its gates; a cleaning with a record never reads them.
fn decide_cleaning(server: &CachedServer, gates_now: &[String]) -> ServerDecision {
    let record = release_record(server).expect("a server being cleaned");
    let gates = || -> Vec<String> {
        let recorded = record.gates.clone();
        let gates = recorded.map(|g| g.into_iter().map(str::to_string).collect());
        gates.unwrap_or_else(|| gates_now.to_vec())
    };
    let problem = match (record.release, &record.gates) {
        (None, _) => Some(RecordProblem::UnusableRelease(record.raw.to_string())),
        (Some(_), None) => Some(RecordProblem::GatesNotRecorded),
        (Some(_), Some(_)) => None,
    };
    let release = match (problem, record.release) {
        (Some(problem), release) => {
            // A usable id no earlier pass can name: the generation now, which only
            // grows, unless the value recorded is usable.
            let release = release.unwrap_or_else(|| server.meta().generation.unwrap_or(1));
            return ServerDecision::RepairCleaningRecord {
                release,
                gates: gates(),
                problem,
            };
        }
        (None, release) => release.expect("a usable release"),
    };
    let pending = pending_gates(server, &record, release);
    if pending.is_empty() {
        ServerDecision::Cleaned
    } else {
        ServerDecision::Cleaning { release, pending }
    }
}

/// A server whose ref's claim is gone (confirmed by a live read) but whose pair agrees
/// with the claim now living under that name ([`pair_agrees`]: a restore): it is that
/// claim's, as a reservation by name would be, if it can serve it and its quotas charge
/// it (`FillUid`, the claim's uid into the ref); charged not yet, it waits
/// (`ReservedAwaitingQuota`). `None`: no such claim, or one it cannot serve: released.
fn restored(
    server: &CachedServer,
    r: &ServerClaimRef,
    claims: &(impl ClaimView + ?Sized),
    admit: Admit<'_>,
) -> Option<ServerDecision> {
    let c = claims.claim(&r.namespace, &r.name)?;
    if !pair_agrees(server, c) || can_restore(server).is_err() || was_evicted(c) {
        return None;
    }
    Some(match admit(c) {
        true => ServerDecision::FillUid {
            claim: claim_ref_of(c),
        },
        false => ServerDecision::ReservedAwaitingQuota,
    })
}

/// The rows for a reservation by name (a ref without a uid).
fn decide_reserved(
    server: &CachedServer,
    r: &ServerClaimRef,
    claims: &(impl ClaimView + ?Sized),
    admit: Admit<'_>,
) -> ServerDecision {
    use ServerDecision::*;
    let Some(c) = claims.claim(&r.namespace, &r.name) else {
        return ReservedClaimMissing;
    };
    match c.spec.server_ref.as_ref().map(|s| s.name.as_str()) {
        // The reservation binds only a claim the server can serve (its selector applies
        // also when it names the server); otherwise it stays a reservation and the claim
        // side reports the mismatch. A bound claim keeps its server whatever changed.
        Some(n) if n == meta::name(server) && can_take_back(server, c).is_ok() => {
            // A reservation is no way around a quota: the claim is charged first.
            match records_bind_to(c, server) || admit(c) {
                true => FillUid {
                    claim: claim_ref_of(c),
                },
                false => ReservedAwaitingQuota,
            }
        }
        Some(n) if n == meta::name(server) => ReservedClaimElsewhere,
        None => ReservedAwaitingAdoption,
        Some(_) => ReservedClaimElsewhere,
    }
}

/// Whether a claim whose uid a deleting server's ref carries still holds it: it names
/// the server, or its status records the bind and it will restore its cleared
/// `serverRef`. A claim that names nothing without such a record never adopts a deleting
/// server (it is not eligible), so it does not block the deletion.
fn holds_server(server: &CachedServer, claim: &CachedClaim) -> bool {
    if was_evicted(claim) {
        return false;
    }
    match &claim.spec.server_ref {
        Some(r) => r.name == meta::name(server),
        None => records_bind_to(claim, server),
    }
}

/// Whether the server carries the protection finalizer.
pub fn has_protection(server: &CachedServer) -> bool {
    meta::has_finalizer(server, FINALIZER_SERVER_PROTECTION)
}
