//! The protocol's invariants (docs/binding.md, "Invariants"), each stated once, as pure
//! functions over a [`Snapshot`] of servers, claims, classes and quotas; what a snapshot
//! cannot show (who wrote a ref, which releases are not cleaned yet, ...) comes in as
//! [`History`]. Each returns its violations, each message led by the invariant's number
//! ("invariant 1: ..."). The model check holds them over its in-memory state, the chaos
//! test and the end-to-end tests over the objects read from the API server; a caller
//! that holds a subset calls the functions of that subset, [`always`] and [`converged`]
//! are the lot. They judge by the binary's own rules (`ref_match`, `eligibility`, the
//! class catalog, `evidence::pair_agrees`, `quota::{limit, charges}`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use server_binder::api::{
    CachedClaim, CachedServer, ClaimPhase, QuotaCharge, ReclaimPolicy, Server, ServerClaim,
    ServerClaimRef, ServerClass, ServerPhase, ServerQuota,
};
use server_binder::binding::state::eviction::was_evicted;
use server_binder::binding::state::{evidence, gates};
use server_binder::binding::world::classes::ClassCatalog;
use server_binder::binding::world::quota::{self, QUOTA_EXCEEDED};
use server_binder::binding::*;

/// The objects the invariants judge, as of one moment.
pub struct Snapshot<'a> {
    pub servers: Vec<&'a CachedServer>,
    pub claims: Vec<&'a CachedClaim>,
    pub classes: &'a [ServerClass],
    pub quotas: Vec<&'a ServerQuota>,
}

/// Objects read from the API server, kept to take a [`Snapshot`] of.
#[derive(Default)]
pub struct Stored {
    pub servers: Vec<CachedServer>,
    pub claims: Vec<CachedClaim>,
    pub classes: Vec<ServerClass>,
    pub quotas: Vec<ServerQuota>,
}

impl Stored {
    /// Servers and claims as listed (no classes, no quotas).
    pub fn new(servers: &[Server], claims: &[ServerClaim]) -> Self {
        Self {
            servers: servers.iter().cloned().map(CachedServer::from).collect(),
            claims: claims.iter().cloned().map(CachedClaim::from).collect(),
            ..Self::default()
        }
    }

    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            servers: self.servers.iter().collect(),
            claims: self.claims.iter().collect(),
            classes: &self.classes,
            quotas: self.quotas.iter().collect(),
        }
    }
}

impl<'a> Snapshot<'a> {
    pub fn server(&self, name: &str) -> Option<&'a CachedServer> {
        self.servers
            .iter()
            .copied()
            .find(|s| meta::name(*s) == name)
    }

    /// The claim living under a ref's namespace and name (any uid).
    pub fn claim_of(&self, r: &ServerClaimRef) -> Option<&'a CachedClaim> {
        self.claim_in(&r.namespace, &r.name)
    }

    pub fn claim_in(&self, namespace: &str, name: &str) -> Option<&'a CachedClaim> {
        let found =
            |c: &&&CachedClaim| meta::namespace(**c) == namespace && meta::name(**c) == name;
        self.claims.iter().find(found).copied()
    }

    /// A claim's class, if it is one that exists (only then does a quota count it).
    pub fn class_of<'c>(&self, claim: &'c CachedClaim) -> Option<&'c str> {
        let name = claim.spec.server_class_name.as_deref()?;
        self.classes
            .iter()
            .any(|c| meta::name(c) == name)
            .then_some(name)
    }

    /// Whether some server's ref carries the claim's name and uid: the claim holds it.
    pub fn holds_a_server(&self, claim: &CachedClaim) -> bool {
        self.servers.iter().any(|s| holds(s, claim))
    }

    /// The live claims of `namespace` and `class` holding a server (invariant 7's count).
    pub fn bound_of_class(&self, namespace: &str, class: &str) -> Vec<&'a CachedClaim> {
        let of_it = |c: &&&CachedClaim| {
            meta::namespace(**c) == namespace && self.class_of(c) == Some(class)
        };
        let held = |c: &&&CachedClaim| self.holds_a_server(c);
        self.claims
            .iter()
            .filter(of_it)
            .filter(held)
            .copied()
            .collect()
    }
}

/// What the invariants that look back need, which no snapshot shows.
#[derive(Default)]
pub struct History<'a> {
    /// Invariant 4: (claim name, its uid, server) for each `serverRef` a user wrote.
    pub user_claim_refs: Vec<(&'a str, Option<&'a str>, &'a str)>,
    /// Invariant 4: (server, claim name) for each reservation a user wrote on a server.
    pub user_server_refs: Vec<(&'a str, &'a str)>,
    /// Invariant 5: (server, the release gate) for each release whose gate no cleaner
    /// that started after the tenant left has passed.
    pub dirty: Vec<(&'a str, Cow<'a, str>)>,
    /// Invariant 6: servers no claim may ever be given.
    pub forbidden: Vec<&'a str>,
    /// Invariant 6: a write that gave a server to a claim it may not have, as found when
    /// the write landed (the snapshot after it cannot tell).
    pub misgiven: Option<&'a str>,
    /// Invariant 7: the (quota, class) pairs above `hard` when the quota came to exist.
    pub over_at_creation: Option<&'a BTreeSet<(String, String)>>,
}

/// Every invariant that holds in every state: 7, 1, 2 (release), 5, 6, 4, in that order.
pub fn always(snap: &Snapshot, history: &History) -> Vec<String> {
    let mut v = quota_holds(snap, history.over_at_creation);
    v.extend(one_claim_per_server(snap));
    v.extend(released_only_when_gone(snap));
    v.extend(clean_before_reuse(snap, &history.dirty));
    v.extend(entitlement(snap, history));
    v.extend(user_refs_stay(snap, history));
    v
}

/// What holds once nothing is left to do: invariant 2 (and phase consistency), for
/// every claim but `never_bind`.
pub fn converged(snap: &Snapshot, never_bind: &[&str]) -> Vec<String> {
    let mut v = claims_converged(snap, never_bind);
    v.extend(servers_converged(snap));
    v
}

// ---- In every state ----

/// Invariant 1: no two claims `Bound` to one server; a `Bound` claim names a server, and
/// that server's ref, if it has one, names the claim with its uid (an empty ref is
/// allowed for a moment: the server controller restores it).
pub fn one_claim_per_server(snap: &Snapshot) -> Vec<String> {
    let mut v = Vec::new();
    let mut bound_on: BTreeMap<&str, &str> = BTreeMap::new();
    for claim in snap
        .claims
        .iter()
        .filter(|c| phase_of(c) == Some(ClaimPhase::Bound))
    {
        let name = meta::name(*claim);
        let Some(server) = server_ref_name(claim) else {
            v.push(format!(
                "invariant 1: claim {name} is Bound without a serverRef"
            ));
            continue;
        };
        if let Some(other) = bound_on.insert(server, name) {
            v.push(format!(
                "invariant 1: claims {other} and {name} are both Bound to {server}"
            ));
        }
        if let Some(s) = snap.server(server)
            && let Some(r) = &s.spec.server_claim_ref
            && (r.name != name || ref_uid(r) != meta::uid(*claim))
        {
            v.push(format!(
                "invariant 1: claim {name} is Bound to {server}, whose ref is {}",
                describe_ref(r)
            ));
        }
    }
    v
}

/// Invariant 2 (release): a `Released` server's ref carries the uid of a claim that is
/// gone, or of one an eviction ended (`Retain` keeps the server for its tenant; the claim
/// stays as its record, docs/binding.md "Eviction"); never an empty uid nor another
/// live claim's.
pub fn released_only_when_gone(snap: &Snapshot) -> Vec<String> {
    let mut v = Vec::new();
    for server in &snap.servers {
        let released = server.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released);
        let Some(r) = server.spec.server_claim_ref.as_ref().filter(|_| released) else {
            continue;
        };
        let holder_lives = ref_uid(r).is_none_or(|uid| {
            snap.claim_of(r)
                .is_some_and(|c| meta::uid(c) == Some(uid) && !was_evicted(c))
        });
        if holder_lives {
            v.push(format!(
                "invariant 2: server {} is Released though its claim {} was never gone",
                meta::name(*server),
                describe_ref(r)
            ));
        }
    }
    v
}

/// Invariant 5: no live claim's uid is on the ref of a server with a release gate not
/// cleaned since its last tenant left (`dirty`).
pub fn clean_before_reuse(snap: &Snapshot, dirty: &[(&str, Cow<str>)]) -> Vec<String> {
    let mut v = Vec::new();
    for (sname, gate) in dirty {
        let Some(r) = snap
            .server(sname)
            .and_then(|s| s.spec.server_claim_ref.as_ref())
        else {
            continue;
        };
        let live = snap.claim_of(r).and_then(|c| meta::uid(c));
        if ref_uid(r).is_some() && ref_uid(r) == live {
            v.push(format!(
                "invariant 5: server {sname} is bound to {} before its release gate {gate} passed",
                describe_ref(r)
            ));
        }
    }
    v
}

/// Invariant 5 as a cleaner sees it: a server seen being cleaned after a release does
/// not leave that cleaning until the cleaner passed it. `unpassed` is (server, release)
/// for each release seen and not passed; a driver that watches every cleaning (the
/// chaos test) holds the servers to it, which [`clean_before_reuse`] checks only once a
/// claim is bound.
pub fn stays_cleaning_until_passed(snap: &Snapshot, unpassed: &[(&str, i64)]) -> Vec<String> {
    let mut v = Vec::new();
    for (name, release) in unpassed {
        let Some(server) = snap.server(name) else {
            continue;
        };
        let record = gates::release_record(server).and_then(|r| r.release);
        if record != Some(*release) {
            v.push(format!(
                "invariant 5: {name} left its cleaning after release {release}, which the cleaner never passed"
            ));
        }
    }
    v
}

/// Invariant 6: no server was given to a claim it may not serve (as found when the
/// write landed), and no forbidden server carries a claim's uid.
pub fn entitlement(snap: &Snapshot, history: &History) -> Vec<String> {
    let mut v: Vec<String> = history.misgiven.iter().map(|m| m.to_string()).collect();
    for name in &history.forbidden {
        let held = snap
            .server(name)
            .and_then(|s| s.spec.server_claim_ref.as_ref())
            .and_then(ref_uid);
        if let Some(uid) = held {
            v.push(format!(
                "invariant 6: server {name}, which no claim may have, was given to the claim with uid {uid}"
            ));
        }
    }
    v
}

/// Invariant 4: a claim whose `serverRef` a user wrote still names that server while it
/// is the same claim (uid); a server a user reserved still names that claim, and no
/// controller took the reservation for its own.
pub fn user_refs_stay(snap: &Snapshot, history: &History) -> Vec<String> {
    let mut v = Vec::new();
    for (claim, uid, server) in &history.user_claim_refs {
        let same = |c: &&&CachedClaim| meta::name(**c) == *claim && meta::uid(**c) == *uid;
        if let Some(c) = snap.claims.iter().find(same)
            && server_ref_name(c) != Some(server)
        {
            v.push(format!(
                "invariant 4: claim {claim}'s user-written serverRef {server} was changed"
            ));
        }
    }
    for (server, claim) in &history.user_server_refs {
        if let Some(s) = snap.server(server)
            && (s.spec.server_claim_ref.as_ref().map(|r| r.name.as_str()) != Some(claim)
                || !is_user_made_ref(s))
        {
            v.push(format!(
                "invariant 4: server {server}'s reservation for {claim} was changed"
            ));
        }
    }
    v
}

/// Each (quota, class) with more live claims of its namespace and class holding a
/// server than its `hard`.
pub fn over_quota(snap: &Snapshot) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for quota in &snap.quotas {
        for (class, hard) in &quota.spec.hard {
            let bound = snap.bound_of_class(meta::namespace(*quota), class).len() as i64;
            if bound > *hard {
                out.insert((meta::name(*quota).to_string(), class.clone()));
            }
        }
    }
    out
}

/// Invariant 7: no quota has more claims of a class bound than it allows, but for a
/// quota and class that came to exist so (`over_at_creation`).
pub fn quota_holds(
    snap: &Snapshot,
    over_at_creation: Option<&BTreeSet<(String, String)>>,
) -> Vec<String> {
    let over = over_quota(snap);
    let new = over
        .iter()
        .filter(|o| over_at_creation.is_none_or(|at| !at.contains(*o)));
    new.map(|(name, class)| {
        let quota = snap.quotas.iter().find(|q| meta::name(**q) == name);
        let hard = quota.map_or(0, |q| q.spec.hard[class]);
        format!("invariant 7: quota {name} allows {hard} of class {class}, but more are bound")
    })
    .collect()
}

// ---- Once nothing is left to do ----

/// Invariant 2 from the claims' side: a claim is `Bound` exactly when it is
/// `bind-completed` and its server's ref has its name and uid; no claim that is not
/// `Bound` has a server free for it (empty ref, or its own name; eligible as its class
/// makes it; the one its user chose, if any), but a once-bound claim that lost its
/// server (it needs a human), a `never_bind` claim, and one a full quota holds back.
pub fn claims_converged(snap: &Snapshot, never_bind: &[&str]) -> Vec<String> {
    let classes = ClassView::of(snap);
    let mut v = Vec::new();
    for claim in &snap.claims {
        let name = meta::name(*claim);
        v.extend(phase_disagrees(snap, claim));
        let is_bound = phase_of(claim) == Some(ClaimPhase::Bound);
        let was_bound = claim
            .status
            .as_ref()
            .is_some_and(|s| s.bound_time.is_some());
        if is_bound
            || (meta::is_bind_completed(*claim) && was_bound)
            || never_bind.contains(&name)
            || held_by_quota(snap, claim)
        {
            continue;
        }
        if let Some(sname) = classes.free_server_for(claim) {
            v.push(format!(
                "invariant 2: claim {name} is not Bound though server {sname} is free for it"
            ));
        }
    }
    v
}

/// The `Bound` claims' half of [`claims_converged`]'s phase rule: each is
/// `bind-completed` and its server's ref has its name and uid.
pub fn bound_claims_hold(snap: &Snapshot) -> Vec<String> {
    let bound = snap
        .claims
        .iter()
        .filter(|c| phase_of(c) == Some(ClaimPhase::Bound));
    bound.filter_map(|c| phase_disagrees(snap, c)).collect()
}

fn phase_disagrees(snap: &Snapshot, claim: &CachedClaim) -> Option<String> {
    // An eviction ended the bind: `Lost` for good, and its server released (a `Retain`
    // server keeps its uid, `Released`; any other holds it no more).
    if was_evicted(claim) {
        let released = |s: &CachedServer| {
            s.spec.reclaim_policy == ReclaimPolicy::Retain
                && s.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released)
        };
        let kept = snap
            .servers
            .iter()
            .find(|s| holds(s, claim) && !released(s));
        return kept.map(|s| {
            format!(
                "invariant 2: claim {} was evicted, but server {} still holds it",
                meta::name(claim),
                meta::name(*s)
            )
        });
    }
    let bound_pair = server_ref_name(claim)
        .and_then(|s| snap.server(s))
        .is_some_and(|s| holds(s, claim));
    let is_bound = phase_of(claim) == Some(ClaimPhase::Bound);
    (is_bound != (bound_pair && meta::is_bind_completed(claim))).then(|| {
        format!(
            "invariant 2: claim {} has phase {:?} but its binding says otherwise",
            meta::name(claim),
            phase_of(claim)
        )
    })
}

/// The classes as the binder reads them: servers with their classes' labels, claims
/// narrowed to their class (nothing changes while there are no classes).
struct ClassView<'a> {
    catalog: Option<ClassCatalog>,
    servers: Vec<(&'a str, Cow<'a, CachedServer>)>,
}

impl<'a> ClassView<'a> {
    fn of(snap: &Snapshot<'a>) -> Self {
        let catalog = (!snap.classes.is_empty()).then(|| {
            let mut catalog = ClassCatalog::default();
            for class in snap.classes {
                catalog.upsert_class(Arc::new(class.clone()));
            }
            catalog
        });
        let servers = snap.servers.iter().map(|s| {
            let view = catalog.as_ref().and_then(|c| c.resolve_server(s));
            (meta::name(*s), view.map_or(Cow::Borrowed(*s), Cow::Owned))
        });
        Self {
            servers: servers.collect(),
            catalog,
        }
    }

    /// The first server free and eligible for `claim`, and the one its user chose if
    /// any.
    fn free_server_for(&self, claim: &CachedClaim) -> Option<&'a str> {
        let resolved = match &self.catalog {
            Some(c) => c.resolve_ref(claim).0,
            None => Cow::Borrowed(claim),
        };
        let user_choice = (!is_controller_chosen(claim))
            .then(|| server_ref_name(claim))
            .flatten();
        self.servers.iter().find_map(|(sname, server)| {
            let free = server.spec.server_claim_ref.is_none()
                || matches!(
                    ref_match(server, claim),
                    RefMatch::NameOnly | RefMatch::SameUid
                );
            let eligible = free && eligibility(server, &resolved).is_ok();
            (eligible && user_choice.is_none_or(|u| u == *sname)).then_some(*sname)
        })
    }
}

/// Whether a full quota holds `claim` back, rightly: a quota of its namespace limits its
/// class, does not charge it, and charges as many live claims as it allows (a charge of
/// a gone claim does not count: the recount must drop it).
pub fn held_by_quota(snap: &Snapshot, claim: &CachedClaim) -> bool {
    let Some(class) = snap.class_of(claim) else {
        return false;
    };
    let namespace = meta::namespace(claim);
    let bound: BTreeSet<&str> = snap
        .claims
        .iter()
        .filter(|c| meta::namespace(**c) == namespace && snap.class_of(c) == Some(class))
        .filter(|c| quota::holds_bind(c))
        .filter_map(|c| meta::uid(*c))
        .collect();
    snap.quotas
        .iter()
        .filter(|q| meta::namespace(**q) == namespace)
        .any(|q| {
            let Some(hard) = quota::limit(q, class) else {
                return false;
            };
            let charges = quota::charges(q);
            let charged = |c: &&QuotaCharge| c.class == class && charge_lives(snap, q, c);
            let mut counted: BTreeSet<&str> = charges
                .iter()
                .filter(charged)
                .map(|c| c.uid.as_str())
                .collect();
            counted.extend(bound.iter().copied());
            !charges
                .iter()
                .any(|c| Some(c.uid.as_str()) == meta::uid(claim))
                && counted.len() as i64 >= hard
        })
}

fn charge_lives(snap: &Snapshot, quota: &ServerQuota, charge: &QuotaCharge) -> bool {
    snap.claim_in(meta::namespace(quota), &charge.claim)
        .is_some_and(|l| meta::uid(l) == Some(charge.uid.as_str()))
}

/// Invariant 7 (liveness): no quota charges a claim that is gone (name and uid): the
/// recount freed it.
pub fn charges_live(snap: &Snapshot) -> Vec<String> {
    let mut v = Vec::new();
    for q in &snap.quotas {
        for c in quota::charges(q) {
            if !charge_lives(snap, q, c) {
                v.push(format!(
                    "liveness: quota {} still charges claim {} (uid {}), which is gone",
                    meta::name(*q),
                    c.claim,
                    c.uid
                ));
            }
        }
    }
    v
}

/// Invariant 2 from the servers' side: every uid ref to a gone claim is on a `Retain`
/// server in phase `Released` (or kept for a restore that waits for its quota), and
/// every controller-made ref names a claim that names the server.
pub fn servers_converged(snap: &Snapshot) -> Vec<String> {
    let each = snap.servers.iter().map(|s| {
        let kept = keeps_a_gone_claim(snap, s);
        kept.or_else(|| orphaned(snap, s))
    });
    each.flatten().collect()
}

/// [`servers_converged`]'s rule that no controller-made ref is an orphaned reservation.
pub fn no_orphaned_reservation(snap: &Snapshot) -> Vec<String> {
    let each = snap.servers.iter().map(|s| orphaned(snap, s));
    each.flatten().collect()
}

/// Whether the server's ref carries the uid of a claim that is gone.
fn names_a_gone_claim(snap: &Snapshot, server: &CachedServer) -> bool {
    server.spec.server_claim_ref.as_ref().is_some_and(|r| {
        ref_uid(r).is_some() && snap.claim_of(r).is_none_or(|c| meta::uid(c) != ref_uid(r))
    })
}

fn keeps_a_gone_claim(snap: &Snapshot, server: &CachedServer) -> Option<String> {
    let r = server.spec.server_claim_ref.as_ref()?;
    if !names_a_gone_claim(snap, server) {
        return None;
    }
    let phase = server.status.as_ref().and_then(|s| s.phase);
    let retained =
        server.spec.reclaim_policy == ReclaimPolicy::Retain && phase == Some(ServerPhase::Released);
    (!retained && !restore_awaits_quota(snap, server)).then(|| {
        format!(
            "invariant 2: server {} still holds gone claim {}",
            meta::name(server),
            describe_ref(r)
        )
    })
}

fn orphaned(snap: &Snapshot, server: &CachedServer) -> Option<String> {
    let r = server.spec.server_claim_ref.as_ref()?;
    if names_a_gone_claim(snap, server) || is_user_made_ref(server) {
        return None;
    }
    let sname = meta::name(server);
    let named_back = snap
        .claim_of(r)
        .is_some_and(|c| server_ref_name(c) == Some(sname));
    (!named_back).then(|| {
        format!(
            "invariant 2: orphaned reservation: server {sname} has a controller-made ref to {}, which does not name it",
            describe_ref(r)
        )
    })
}

/// Whether `server`'s ref names a gone incarnation of a live claim's name that names the
/// server back (a restore, or a claim deleted and re-created so), and that claim waits
/// for its quota: the server stays reserved for it (docs/binding.md, "Restore").
pub fn restore_awaits_quota(snap: &Snapshot, server: &CachedServer) -> bool {
    snap.claims
        .iter()
        .any(|c| evidence::pair_agrees(server, c) && bound_reason(c) == Some(QUOTA_EXCEEDED))
}

// ---- Reading the objects ----

pub fn phase_of(claim: &CachedClaim) -> Option<ClaimPhase> {
    claim.status.as_ref().and_then(|s| s.phase)
}

pub fn server_ref_name(claim: &CachedClaim) -> Option<&str> {
    claim.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

/// The reason of the claim's `Bound` condition.
pub fn bound_reason(claim: &CachedClaim) -> Option<&str> {
    let status = claim.status.as_ref()?;
    let bound = status.conditions.iter().find(|c| c.type_ == "Bound");
    bound.map(|c| c.reason.as_str())
}

/// Whether the server's ref carries the claim's name and uid: the claim holds it.
pub fn holds(server: &CachedServer, claim: &CachedClaim) -> bool {
    server.spec.server_claim_ref.as_ref().is_some_and(|r| {
        r.name == meta::name(claim) && ref_uid(r).is_some() && ref_uid(r) == meta::uid(claim)
    })
}
