//! Eligibility: can server S serve claim C? One function, shared by both controllers.

use std::fmt;

use crate::api::{CachedClaim, CachedServer, Labels, ServerClaimRef, ServerPhase, ServerSelector};

use crate::binding::meta::{self, ClaimKey};
use crate::binding::selector::{first_untolerated, requirement_matches, selector_matches};
use crate::binding::state::class_labels::{CLASSED_KEY, is_view_only};
use crate::binding::state::gates::is_cleaning;

/// Why a server cannot serve a claim, worded for an event or condition message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ineligible {
    /// The server has a deletionTimestamp.
    Deleting,
    /// `spec.unclaimable` is true (cordoned).
    Unclaimable,
    /// The claim does not tolerate this taint.
    UntoleratedTaint { key: String },
    /// The claim's `serverSelector` does not match the server's labels.
    SelectorMismatch,
    /// The claim has a server class, and the server is not of it (or the class is
    /// missing, or does not let the claim's namespace in; docs/binding.md, "Server
    /// classes").
    OutsideClass { class: String },
    /// The claim names no class and a class takes the server in: it is set aside for that
    /// class's claims.
    SetAside,
    /// `spec.serverClaimRef` names another claim (or another incarnation of this one).
    ClaimedByOther(ServerClaimRef),
    /// The server is `Released` and waits for an admin.
    Released,
    /// The server was released and waits for its release gates (a cleaner).
    Cleaning,
    /// An eviction ended the claim's bind: it takes no server again
    /// ([`crate::binding::state::eviction::was_evicted`]).
    Evicted,
}

impl fmt::Display for Ineligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deleting => write!(f, "the server is being deleted"),
            Self::Unclaimable => write!(f, "the server is marked unclaimable"),
            Self::UntoleratedTaint { key } => {
                write!(f, "the claim does not tolerate the server's taint {key:?}")
            }
            Self::SelectorMismatch => {
                write!(
                    f,
                    "the server's labels do not match the claim's serverSelector"
                )
            }
            Self::OutsideClass { class } => {
                write!(f, "the server is not of the claim's server class {class}")
            }
            Self::SetAside => write!(
                f,
                "the server is set aside for a server class, and the claim names none"
            ),
            Self::ClaimedByOther(r) => write!(f, "the server is claimed by {}", describe_ref(r)),
            Self::Released => write!(
                f,
                "the server was released under reclaimPolicy Retain and waits for an admin to clear its spec.serverClaimRef"
            ),
            Self::Cleaning => write!(
                f,
                "the server is being cleaned after its last release and waits for its release gates"
            ),
            Self::Evicted => write!(f, "the claim was evicted and takes no server again"),
        }
    }
}

/// The uid a `serverClaimRef` binds, if any. An empty uid is no uid: a reservation by
/// name, as the CRD documents and as Kubernetes treats an empty claimRef uid (tools that
/// serialise Go structs write `uid: ""`).
pub fn ref_uid(r: &ServerClaimRef) -> Option<&str> {
    r.uid.as_deref().filter(|uid| !uid.is_empty())
}

/// `namespace/name`, plus the uid when there is one.
pub fn describe_ref(r: &ServerClaimRef) -> String {
    match ref_uid(r) {
        Some(uid) => format!("{} (uid {uid})", ClaimKey::of_ref(r)),
        None => ClaimKey::of_ref(r).to_string(),
    }
}

/// How a server's `serverClaimRef` relates to a given claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefMatch {
    /// The server has no `serverClaimRef`.
    Empty,
    /// It names this claim's namespace/name without a uid (a reservation by name).
    NameOnly,
    /// It names this claim, with this claim's uid.
    SameUid,
    /// It names this claim's namespace/name with another uid: an older incarnation.
    OtherUid,
    /// It names a different claim.
    OtherClaim,
}

/// How `server.spec.serverClaimRef` relates to `claim`.
pub fn ref_match(server: &CachedServer, claim: &CachedClaim) -> RefMatch {
    let Some(r) = &server.spec.server_claim_ref else {
        return RefMatch::Empty;
    };
    if r.namespace != meta::namespace(claim) || r.name != meta::name(claim) {
        return RefMatch::OtherClaim;
    }
    match ref_uid(r) {
        None => RefMatch::NameOnly,
        Some(uid) if Some(uid) == claim.meta().uid.as_deref() => RefMatch::SameUid,
        Some(_) => RefMatch::OtherUid,
    }
}

/// The claim-independent half of eligibility: could this server serve *some* new claim?
/// The free-server index holds exactly the servers for which this is true and that carry
/// no `serverClaimRef` ([`not_free`]).
pub fn server_is_claimable(server: &CachedServer) -> Result<(), Ineligible> {
    claim_independent(server).next().map_or(Ok(()), Err)
}

/// A claim-independent check of eligibility: whether it applies to a server, and the
/// reason it gives then.
type Check = (fn(&CachedServer) -> bool, Ineligible);

/// The claim-independent reasons of eligibility, in its order. A check runs only once
/// every earlier one found nothing: a decision asks for the first reason alone, of every
/// server for every waiting claim.
fn claim_independent(server: &CachedServer) -> impl Iterator<Item = Ineligible> + '_ {
    let checks: [Check; 4] = [
        (meta::is_deleting, Ineligible::Deleting),
        (|s| s.spec.unclaimable, Ineligible::Unclaimable),
        (is_released, Ineligible::Released),
        (is_cleaning, Ineligible::Cleaning),
    ];
    let applies = move |(check, _): &Check| check(server);
    checks.into_iter().filter(applies).map(|(_, why)| why)
}

fn is_released(server: &CachedServer) -> bool {
    server.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released)
}

/// Why no new claim may take a server now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotFree<'a> {
    /// A claim-independent reason of eligibility: being deleted, unclaimable,
    /// `Released`, being cleaned.
    Ineligible(Ineligible),
    /// Its `serverClaimRef` binds it (with a uid) or reserves it by name: only that claim
    /// may take it.
    Held(&'a ServerClaimRef),
}

impl fmt::Display for NotFree<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ineligible(why) => why.fmt(f),
            // Said of the ref, not of a bind: a server released under Retain keeps
            // the ref of a claim that is gone.
            Self::Held(r) if ref_uid(r).is_some() => {
                write!(f, "its serverClaimRef holds it for {}", describe_ref(r))
            }
            Self::Held(r) => write!(
                f,
                "the server is reserved by name for {}",
                ClaimKey::of_ref(r)
            ),
        }
    }
}

/// Every reason no new claim may take `server` now, in eligibility's order (none: it is
/// free, and only its taints and labels decide which claims it suits). The free-server
/// index ([`crate::binding::is_free`]) and eligibility ([`server_is_claimable`]) apply this rule;
/// `explain server` lists it. Lazy, like [`server_is_claimable`]: a caller asking only
/// whether there is a reason pays for the first.
pub fn not_free(server: &CachedServer) -> impl Iterator<Item = NotFree<'_>> {
    let held = server.spec.server_claim_ref.iter().map(NotFree::Held);
    claim_independent(server)
        .map(NotFree::Ineligible)
        .chain(held)
}

/// Which part of a claim's selector `labels` fail, the classes' first (a class narrows
/// the claim by view-only requirements, [`is_view_only`]): a server outside the claim's
/// class is that, whatever the tenant selects.
fn selector_failure(selector: &ServerSelector, claim: &CachedClaim, labels: &Labels) -> Ineligible {
    let by_class = selector
        .match_expressions
        .iter()
        .filter(|r| is_view_only(&r.key))
        .find(|r| !requirement_matches(r, labels));
    match by_class {
        Some(r) if r.key == CLASSED_KEY => Ineligible::SetAside,
        Some(_) => Ineligible::OutsideClass {
            class: claim.spec.server_class_name.clone().unwrap_or_default(),
        },
        None => Ineligible::SelectorMismatch,
    }
}

/// Whether `server` can serve `claim`: not being deleted, not unclaimable, every taint
/// tolerated, the claim's selector matching (also when the claim names the server by ref),
/// `serverClaimRef` empty or naming this claim (uid empty or equal), and not `Released`.
pub fn eligibility(server: &CachedServer, claim: &CachedClaim) -> Result<(), Ineligible> {
    server_is_claimable(server)?;
    if let Some(taint) = first_untolerated(&server.spec.taints, &claim.spec.tolerations) {
        return Err(Ineligible::UntoleratedTaint {
            key: taint.key.clone(),
        });
    }
    if let Some(selector) = &claim.spec.server_selector
        && !selector_matches(selector, meta::labels(server))
    {
        return Err(selector_failure(selector, claim, meta::labels(server)));
    }
    match ref_match(server, claim) {
        RefMatch::Empty | RefMatch::NameOnly | RefMatch::SameUid => Ok(()),
        RefMatch::OtherUid | RefMatch::OtherClaim => Err(Ineligible::ClaimedByOther(
            server.spec.server_claim_ref.clone().unwrap_or_default(),
        )),
    }
}
