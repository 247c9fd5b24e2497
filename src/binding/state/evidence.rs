//! What the binder takes as evidence of a bind (docs/binding.md, "Trust"). Tenants write
//! their claims' spec, labels and annotations, so none of those is evidence: a
//! `bind-completed` annotation can be copied, forged or kept after the bind it was
//! written for is gone. Evidence is only what the controllers (or admins) write:
//!
//! - the server's `spec.serverClaimRef` carrying the claim's uid (the lock), and
//! - the claim's `status.boundServerRef`, naming the server object (name and uid) its
//!   Bound status was written for.
//!
//! A claim may take or keep a server it is not eligible for only with such evidence:
//! an existing binding stays when the server is cordoned, tainted or relabelled, but no
//! annotation makes one.

use crate::api::{BoundServerRef, CachedClaim, CachedServer};

use crate::binding::meta;
use crate::binding::state::eligibility::{
    Ineligible, RefMatch, eligibility, ref_match, server_is_claimable,
};
use crate::binding::state::eviction::was_evicted;
use crate::binding::state::gates;

/// The server object the claim's status records it as bound to, if any.
pub fn bound_record(claim: &CachedClaim) -> Option<&BoundServerRef> {
    claim.status.as_ref()?.bound_server_ref.as_ref()
}

/// The record a Bound status of `claim` on `server` carries.
pub fn record_of(server: &CachedServer) -> BoundServerRef {
    BoundServerRef {
        name: meta::name(server).to_string(),
        uid: meta::uid(server).unwrap_or_default().to_string(),
    }
}

/// Whether the claim's status records a bind to this very server object (its name and
/// its uid: a server re-created under the same name is another server).
pub fn records_bind_to(claim: &CachedClaim, server: &CachedServer) -> bool {
    bound_record(claim).is_some_and(|r| *r == record_of(server))
}

/// Whether the claim gave this very server object back after its completing write was
/// refused (`status.givenBackServerRef`, controller-written): while the server's ref
/// still carries the claim's uid, the server controller frees it and the claim does not
/// adopt it (a reservation by name that the freeing leaves behind is adopted anew).
pub fn gave_back(claim: &CachedClaim, server: &CachedServer) -> bool {
    let given_back = claim
        .status
        .as_ref()
        .and_then(|s| s.given_back_server_ref.as_ref());
    given_back.is_some_and(|r| *r == record_of(server))
}

/// Whether the claim's status records a bind to a server of this name (for a server
/// that is gone, whose uid nobody can compare).
pub fn records_bind_named(claim: &CachedClaim, server: &str) -> bool {
    bound_record(claim).is_some_and(|r| r.name == server)
}

/// Whether `server` and `claim` name each other across a restore: the server's ref names
/// the claim's namespace and name with a uid that is not the claim's (an incarnation of
/// that name that is gone: a name holds one object at a time), and the claim's
/// `serverRef` names the server. Such a server belongs to the claim now living under the
/// name, as a reservation by name would (docs/binding.md, "Restore"): its namespace held
/// it ([`can_restore`]), and its quota still applies. A claim that does not name the
/// server, whose status records a bind (a restore drops status), or of another class
/// than the bind's ([`class_agrees`]), never inherits it.
pub fn pair_agrees(server: &CachedServer, claim: &CachedClaim) -> bool {
    let names_server = claim
        .spec
        .server_ref
        .as_ref()
        .is_some_and(|r| r.name == meta::name(server));
    // A claim whose status records a bind is no restored claim: its server holding
    // another uid of its name is misbound, and it goes Lost.
    names_server
        && bound_record(claim).is_none()
        && ref_match(server, claim) == RefMatch::OtherUid
        && class_agrees(server, claim)
}

/// Whether `claim` is of the class the server's bind was recorded under
/// ([`gates::bound_class`]; no record: a bind of no class). A restore brings the claim
/// back as it was, class and all (a bound claim's class cannot change); a claim
/// re-created under another class would make the release wait for that class's gates,
/// not the ones the data on the server was left under.
fn class_agrees(server: &CachedServer, claim: &CachedClaim) -> bool {
    let class = claim
        .spec
        .server_class_name
        .as_deref()
        .filter(|c| !c.is_empty());
    match gates::bound_class(server) {
        Some(record) => class == Some(record.class.as_str()),
        None => class.is_none(),
    }
}

/// Whether a claim whose pair agrees with `server` across a restore ([`pair_agrees`])
/// may have it back: the server's ref, which only controllers and admins write, is the
/// evidence that the claim's namespace and name held it, so, as a bind with evidence
/// ([`can_take_back`]), it keeps it through a cordon, a taint, a relabel or a class that
/// no longer takes it in; not a server being deleted, released or cleaned.
pub fn can_restore(server: &CachedServer) -> Result<(), Ineligible> {
    match server_is_claimable(server) {
        Err(Ineligible::Unclaimable) | Ok(()) => Ok(()),
        Err(why) => Err(why),
    }
}

/// Whether `claim` may take (or keep) `server`, whose ref is empty or names it: with
/// evidence of a bind to this server it keeps it whatever happened to the server since
/// (cordon, taint, relabel: an existing binding stays), unless the server is being
/// deleted, was released, or is being cleaned; without, the server must be eligible.
pub fn can_take_back(server: &CachedServer, claim: &CachedClaim) -> Result<(), Ineligible> {
    if was_evicted(claim) {
        return Err(Ineligible::Evicted);
    }
    if !records_bind_to(claim, server) {
        return eligibility(server, claim);
    }
    match server_is_claimable(server) {
        Err(Ineligible::Unclaimable) | Ok(()) => Ok(()),
        Err(why) => Err(why),
    }
}
