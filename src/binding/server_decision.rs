//! The server controller's decisions: one variant, and one match arm, per row of the
//! server table in docs/binding.md. Pure, like the claim side.

use std::cmp::Reverse;

use crate::api::names::FINALIZER_SERVER_PROTECTION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{ReclaimPolicy, Server, ServerClaim, ServerClaimRef};

use super::claim_decision::{Liveness, is_controller_chosen};
use super::eligibility::{Ineligible, eligibility, ref_uid, server_is_claimable};
use super::gates::{pending_gates, release_gates};
use super::meta;
use super::view::ClaimView;

/// What the server controller does with a server. Variant names follow the table rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerDecision {
    /// No ref and no eligible claim names the server: phase Available, drop the finalizer.
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
    /// `Release`, the `cleaning` annotation set); then phase Cleaning.
    ReleaseToCleaning { gates: Vec<String> },
    /// Being cleaned, gates not passed for this release: phase Cleaning, saying which.
    Cleaning { pending: Vec<String> },
    /// Being cleaned, every gate passed for this release: drop the `cleaning` annotation
    /// (one write: the server is claimable again); then phase Available.
    Cleaned,
}

/// Why a server gives up a claim whose uid its ref carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RollBackCause {
    /// The claim names another server.
    NamesAnother(String),
    /// The claim names no server and cannot adopt this one.
    CannotAdopt(Ineligible),
}

/// Decides what to do with `server`; `default_gates` are the release gates of a server
/// that names none (`--release-gates`).
pub fn decide_server(
    server: &Server,
    claims: &(impl ClaimView + ?Sized),
    liveness: Liveness,
    default_gates: &[String],
) -> ServerDecision {
    use ServerDecision::*;

    let name = meta::name(server);
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

    // Cleaning comes before any ref: a reservation made meanwhile waits for it to end.
    if let Some(pending) = pending_gates(server, default_gates) {
        return if pending.is_empty() {
            Cleaned
        } else {
            Cleaning { pending }
        };
    }

    let Some(r) = claim_ref else {
        return match winner(server, claims) {
            Some((winner, restoring)) => ClaimForWinner { winner, restoring },
            None => Available,
        };
    };

    if ref_uid(r).is_none() {
        return decide_reserved(server, r, claims);
    }

    let Some(c) = holder else {
        return match liveness {
            Liveness::Cached => ConfirmClaimGone { claim: r.clone() },
            Liveness::Confirmed => release(server, default_gates),
        };
    };
    match c.spec.server_ref.as_ref().map(|s| s.name.as_str()) {
        Some(n) if n == name => BoundConfirmed,
        Some(other) => RollBack {
            cause: RollBackCause::NamesAnother(other.to_string()),
        },
        // The claim names nothing: it restores its serverRef if bound, or adopts the
        // server if it can; a server it cannot adopt would be an orphaned reservation
        // forever, so it rolls back.
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
fn release(server: &Server, default_gates: &[String]) -> ServerDecision {
    let policy = server.spec.reclaim_policy;
    let gates = release_gates(server, default_gates);
    if policy == ReclaimPolicy::Recycle && !gates.is_empty() {
        let gates = gates.into_iter().map(str::to_string).collect();
        return ServerDecision::ReleaseToCleaning { gates };
    }
    ServerDecision::Release { policy }
}

/// The rows for a reservation by name (a ref without a uid).
fn decide_reserved(
    server: &Server,
    r: &ServerClaimRef,
    claims: &(impl ClaimView + ?Sized),
) -> ServerDecision {
    use ServerDecision::*;
    let Some(c) = claims.claim(&r.namespace, &r.name) else {
        return ReservedClaimMissing;
    };
    match c.spec.server_ref.as_ref().map(|s| s.name.as_str()) {
        // The reservation binds only a claim the server can serve (its selector applies
        // also when it names the server); otherwise it stays a reservation and the claim
        // side reports the mismatch. A bound claim keeps its server whatever changed.
        Some(n) if n == meta::name(server) && can_take_back(server, c).is_ok() => FillUid {
            claim: claim_ref_of(c),
        },
        Some(n) if n == meta::name(server) => ReservedClaimElsewhere,
        None => ReservedAwaitingAdoption,
        Some(_) => ReservedClaimElsewhere,
    }
}

/// Whether `claim` may take (or keep) `server` whose ref names it: a `bind-completed`
/// claim keeps its binding whatever happened to the server since (cordon, taint,
/// relabel: an existing binding stays), unless the server is being deleted or was
/// released; any other claim needs the server to be eligible.
pub fn can_take_back(server: &Server, claim: &ServerClaim) -> Result<(), Ineligible> {
    if !meta::is_bind_completed(claim) {
        return eligibility(server, claim);
    }
    match server_is_claimable(server) {
        Err(Ineligible::Unclaimable) | Ok(()) => Ok(()),
        Err(why) => Err(why),
    }
}

/// Whether a claim whose uid a deleting server's ref carries still holds it: it names
/// the server, or is bound and will restore its cleared `serverRef`. An unbound claim
/// that names nothing never adopts a deleting server (it is not eligible), so it does
/// not block the deletion.
fn holds_server(server: &Server, claim: &ServerClaim) -> bool {
    match &claim.spec.server_ref {
        Some(r) => r.name == meta::name(server),
        None => meta::is_bind_completed(claim),
    }
}

/// The reference that binds a server to this claim object.
pub fn claim_ref_of(claim: &ServerClaim) -> ServerClaimRef {
    ServerClaimRef {
        namespace: meta::namespace(claim).to_string(),
        name: meta::name(claim).to_string(),
        uid: meta::uid(claim).map(str::to_string),
    }
}

/// Among the claims naming `server` that it is eligible for, the one that wins it:
/// `bind-completed` claims first (their ref was lost and is restored), then user-chosen,
/// then controller-chosen, then the oldest, then by namespace/name.
fn winner(server: &Server, claims: &(impl ClaimView + ?Sized)) -> Option<(ServerClaimRef, bool)> {
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| can_take_back(server, c).is_ok())
        .min_by_key(|c| rank(c, is_controller_chosen(c)))
        .map(|c| (claim_ref_of(c), meta::is_bind_completed(c)))
}

/// A claim's place in the winner rule (lower wins), were its `serverRef` controller-chosen
/// or not.
type Rank = (Reverse<bool>, bool, Option<Time>, String, String);

fn rank(claim: &ServerClaim, controller_chosen: bool) -> Rank {
    (
        Reverse(meta::is_bind_completed(claim)),
        controller_chosen,
        claim.metadata.creation_timestamp.clone(),
        meta::namespace(claim).to_string(),
        meta::name(claim).to_string(),
    )
}

/// Whether another claim naming `server`, and eligible for it, would win it over `claim`
/// if `claim` picked it now (a pick is controller-chosen). Picking such a server could
/// only end in a withdrawal (`WithdrawTakenServer`), so the claim controller passes it
/// over.
pub fn outranked_on(
    server: &Server,
    claim: &ServerClaim,
    claims: &(impl ClaimView + ?Sized),
) -> bool {
    let as_picked = rank(claim, true);
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| {
            meta::namespace(*c) != meta::namespace(claim) || meta::name(*c) != meta::name(claim)
        })
        .filter(|c| can_take_back(server, c).is_ok())
        .any(|c| rank(c, is_controller_chosen(c)) < as_picked)
}

/// Whether the server carries the protection finalizer.
pub fn has_protection(server: &Server) -> bool {
    meta::has_finalizer(server, FINALIZER_SERVER_PROTECTION)
}
