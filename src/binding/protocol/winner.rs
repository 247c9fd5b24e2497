//! The winner rule (docs/binding.md): among the claims naming a server, which one takes
//! it. The server controller applies it when it writes a ref ([`winner`]); the claim
//! controller reads it to pass over a server a pick could only lose ([`outranked_on`]).
//! Both decisions use this one order, so they cannot disagree on who wins.
//!
//! A name is not a place in the queue: a user's claim that names a free server takes it
//! only when the fair order reaches it for that server ([`turn_on`]), unless its status
//! records a bind to it. A `pre-bound` ref counts as a pick only while it is one: this
//! process's claim controller made it and still has it in flight ([`may_take_named`]);
//! any other (from before a restart, another replica's, or a tenant's) is asked its turn
//! like a user's, and the claim controller withdraws it when that turn has not come.
//! Both sides ask the same question of the same function.

use std::cmp::Reverse;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{CachedClaim, CachedServer, ServerClaimRef};

use crate::binding::claim_side::assumed::{AssumedChoices, claim_key};
use crate::binding::meta::{self, claim_ref_of, is_controller_chosen};
use crate::binding::placement::{PickInputs, Placement};
use crate::binding::state::evidence::{can_take_back, records_bind_to};
use crate::binding::world::view::{ClaimView, ServerView};

/// Whether a claim naming a server, with no bind to it recorded, may take it now (the
/// binder answers it with [`may_take_named`]).
pub type Turn<'a> = &'a dyn Fn(&CachedClaim) -> bool;

/// Whether the server controller may bind a claim as far as its namespace's quotas go:
/// none limits its class, or each that does charges it (docs/binding.md, "Server
/// quotas"; the binder answers it with [`crate::binding::world::quota::QuotaCheck::admits`]).
pub type Admit<'a> = &'a dyn Fn(&CachedClaim) -> bool;

/// Whether `claim`, which names the free `server`, may take it now, short of a recorded
/// bind: it is this controller's pick in flight (`picks` holds it: a pick is made in its
/// turn), or the fair order reaches it for that server (`turn`, [`turn_on`]). A
/// `pre-bound` the picks do not hold was made before a restart, by another replica, or
/// by a tenant's hand: it is asked its turn as a user's ref is, never taken on its word
/// (docs/binding.md, "Whose pick is it").
pub fn may_take_named(
    server: &str,
    claim: &CachedClaim,
    picks: &AssumedChoices,
    turn: impl FnOnce() -> bool,
) -> bool {
    is_picked(server, claim, picks) || turn()
}

/// Whether `claim`'s ref to `server` is this controller's pick in flight: controller-
/// chosen, and held by its assumed choices.
pub fn is_picked(server: &str, claim: &CachedClaim, picks: &AssumedChoices) -> bool {
    is_controller_chosen(claim) && picks.holds(server, &claim_key(claim))
}

/// Where the fair order puts a user's claim, which names the free server `server`
/// itself: `Pick` when the claims ahead of it can do without that server, `WaitForTurn`
/// when they need it ([`crate::binding::placement::place_named`]).
pub fn turn_on<'s>(
    server: &str,
    claim: &CachedClaim,
    servers: &'s (impl ServerView + ?Sized),
    pick: &PickInputs<'_>,
) -> Placement<'s> {
    servers.place_named(claim, server, pick)
}

/// Whether a claim naming `server` may win it now: its status records a bind to it; or
/// `turn` says so ([`may_take_named`]: this controller's pick, or a user's claim in its
/// turn).
fn in_turn(server: &CachedServer, claim: &CachedClaim, turn: Turn<'_>) -> bool {
    records_bind_to(claim, server) || turn(claim)
}

/// Among the claims naming `server` that may take it ([`can_take_back`]), have their
/// turn ([`in_turn`]: every claim without a recorded bind is asked `turn`) and, short of
/// a recorded bind, are charged to their quotas (`admit`), the one that wins it:
/// a claim whose status records a bind to this server first (the server lost its ref,
/// and this restores it), then user-chosen, then controller-chosen, then the oldest,
/// then by namespace/name.
pub(super) fn winner(
    server: &CachedServer,
    claims: &(impl ClaimView + ?Sized),
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> Option<(ServerClaimRef, bool)> {
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| can_take_back(server, c).is_ok() && in_turn(server, c, turn))
        .filter(|c| records_bind_to(c, server) || admit(c))
        .min_by_key(|c| rank(server, c, is_controller_chosen(c)))
        .map(|c| (claim_ref_of(c), records_bind_to(c, server)))
}

/// A claim's place in the winner rule for `server` (lower wins), were its `serverRef`
/// controller-chosen or not.
type Rank = (Reverse<bool>, bool, Option<Time>, String, String);

fn rank(server: &CachedServer, claim: &CachedClaim, controller_chosen: bool) -> Rank {
    (
        Reverse(records_bind_to(claim, server)),
        controller_chosen,
        claim.meta().creation_timestamp.clone(),
        meta::namespace(claim).to_string(),
        meta::name(claim).to_string(),
    )
}

/// Whether another claim naming `server`, eligible for it and in its turn, would win it
/// over `claim` if `claim` picked it now (a pick is controller-chosen). Picking such a
/// server could only end in a withdrawal (`WithdrawTakenServer`), so the claim
/// controller passes it over. A claim naming it out of its turn wins nothing: the claims
/// ahead of it may take the server.
pub fn outranked_on(
    server: &CachedServer,
    claim: &CachedClaim,
    claims: &(impl ClaimView + ?Sized),
    turn: Turn<'_>,
) -> bool {
    let as_picked = rank(server, claim, true);
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| {
            meta::namespace(*c) != meta::namespace(claim) || meta::name(*c) != meta::name(claim)
        })
        .filter(|c| can_take_back(server, c).is_ok())
        .filter(|c| rank(server, c, is_controller_chosen(c)) < as_picked)
        .any(|c| in_turn(server, c, turn))
}
