//! The winner rule (docs/binding.md): among the claims naming a server, which one takes
//! it. The server controller applies it when it writes a ref ([`winner`]); the claim
//! controller reads it to pass over a server a pick could only lose ([`outranked_on`]).
//! Both decisions use this one order, so they cannot disagree on who wins.

use std::cmp::Reverse;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{Server, ServerClaim, ServerClaimRef};

use super::evidence::{can_take_back, records_bind_to};
use super::meta::{self, claim_ref_of, is_controller_chosen};
use super::view::ClaimView;

/// Among the claims naming `server` that may take it ([`can_take_back`]), the one that
/// wins it: a claim whose status records a bind to this server first (the server lost
/// its ref, and this restores it), then user-chosen, then controller-chosen, then the
/// oldest, then by namespace/name.
pub(super) fn winner(
    server: &Server,
    claims: &(impl ClaimView + ?Sized),
) -> Option<(ServerClaimRef, bool)> {
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| can_take_back(server, c).is_ok())
        .min_by_key(|c| rank(server, c, is_controller_chosen(c)))
        .map(|c| (claim_ref_of(c), records_bind_to(c, server)))
}

/// A claim's place in the winner rule for `server` (lower wins), were its `serverRef`
/// controller-chosen or not.
type Rank = (Reverse<bool>, bool, Option<Time>, String, String);

fn rank(server: &Server, claim: &ServerClaim, controller_chosen: bool) -> Rank {
    (
        Reverse(records_bind_to(claim, server)),
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
    let as_picked = rank(server, claim, true);
    claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| {
            meta::namespace(*c) != meta::namespace(claim) || meta::name(*c) != meta::name(claim)
        })
        .filter(|c| can_take_back(server, c).is_ok())
        .any(|c| rank(server, c, is_controller_chosen(c)) < as_picked)
}
