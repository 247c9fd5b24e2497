//! Which objects a change wakes: the protocol's wake-up rules, pure.
//!
//! A controller reconciles an object only when something wakes it (plus a slow resync
//! that convergence must not rely on). So every change that can alter a decision must
//! wake the object that decision is about. The rules, from the object before and after
//! one watch event, and the catalogs after it:
//!
//! | change | wakes |
//! |---|---|
//! | a server changes | the server; the claims naming it; the claims its old and new ref name; if it is free now and was not, or changed while free: per claim shape that fits it, the first (free servers + picks in flight + 1) waiting claims in the fair order ([`first_waiting_for`]), and the free servers users' claims name (their turn may have come) |
//! | a claim changes | the claim; the servers its old and new `serverRef` name; the servers whose ref names it; every waiting claim if it stopped contending for a free server it named (withdrawn, deleted, no longer eligible): waiting claims may have passed that server over; every waiting claim, and the free servers users' claims name, if it stopped waiting without taking a free server (deleted, or naming a server that is not free) or changed shape, unless its class or a quota had shut it out (the matching kept nothing for it): the matching may now give the others what it kept for it |
//! | an assumed choice ends | if its server is free: every waiting claim (they passed it over), the server and the claims naming it (a claim whose ref is not a pick in flight waits for its turn on it, or for the pick that held it) |
//! | the claim controller takes a pick up (`ResumePick`, [`crate::binding::Binder::claim_step`]) | its server: no watch event will |
//! | a relist | everything |
//! | a resync tick ([`on_resync_tick`]) | the next share of each kind in key order: everything once per pass |
//! | a step of the controllers' start ([`on_start_step`]) | the next share of each kind in key order, until everything was woken |
//!
//! "Every waiting claim" ([`is_waiting`]) leaves out a claim its class or a quota shuts
//! out: it waits on those, whose changes wake it ([`Wake::waiting_claims`]).
//!
//! The controllers call these on every watch event; the model check calls them to decide
//! which reconciles may run, so a missing rule shows up there as a claim or server that
//! never converges. Of whom an event that delivers the controllers' own write wakes, the
//! controllers leave out those whose step changes nothing ([`crate::binding::Settles`]).

use std::collections::BTreeSet;

use crate::api::names::ANNOTATION_BOUND_BY_CONTROLLER;
use crate::api::{CachedClaim, CachedServer};

use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::index::is_free;
use crate::binding::placement::{ClaimShape, first_waiting_for, in_fair_order, is_waiting};
use crate::binding::state::evidence::can_take_back;
use crate::binding::world::view::{ClaimCatalog, ClaimView, ServerCatalog, ServerView};

/// The objects each controller must reconcile after a change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Wake {
    pub claims: BTreeSet<ClaimKey>,
    pub servers: BTreeSet<String>,
}

impl Wake {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.servers.is_empty()
    }

    pub fn extend(&mut self, other: Wake) {
        self.claims.extend(other.claims);
        self.servers.extend(other.servers);
    }

    /// The claims to wake, waiting ones first in the fair order ([`in_fair_order`])
    /// when servers are scarce (fewer free servers than waiting claims: only the claims
    /// the order reaches can pick, so they go first). Otherwise every waiting claim is
    /// served and the order buys nothing: key order, without the O(w log w) sort.
    pub fn claims_in_order(&self, servers: &ServerCatalog, claims: &ClaimCatalog) -> Vec<ClaimKey> {
        if claims.waiting().len() <= servers.free_index().len() {
            return self.claims.iter().cloned().collect();
        }
        in_fair_order(&self.claims, claims.waiting())
    }

    /// Every waiting claim some server could serve: a claim its class or a quota shuts
    /// out waits on those alone, whose changes wake it; a claim backing off after a
    /// refused write is woken by its own timer.
    fn waiting_claims(&mut self, claims: &ClaimCatalog) {
        self.claims.extend(claims.waiting().servable().cloned());
    }

    /// The free servers users' claims name: a claim naming a server takes it in its
    /// turn, and its turn may have come. The servers, not the claims: the server decides
    /// (and, when it takes a claim, its change wakes the claims naming it), so a tenant's
    /// thousand claims naming one server cost one wake-up, not a thousand.
    fn named_free_servers(&mut self, servers: &ServerCatalog, claims: &ClaimCatalog) {
        for (server, _) in claims.waiting().named() {
            if !self.servers.contains(server) && servers.server(server).is_some_and(is_free) {
                self.servers.insert(server.to_string());
            }
        }
    }
}

/// The wake-up rules, swappable so the model check can drop one as a mutant.
#[derive(Clone, Copy)]
pub struct Triggers {
    pub server_changed: fn(
        Option<&CachedServer>,
        Option<&CachedServer>,
        &ServerCatalog,
        &ClaimCatalog,
        usize,
    ) -> Wake,
    pub claim_changed:
        fn(Option<&CachedClaim>, Option<&CachedClaim>, &ServerCatalog, &ClaimCatalog) -> Wake,
    pub assumption_ended: fn(&str, &ServerCatalog, &ClaimCatalog) -> Wake,
}

impl Triggers {
    pub fn real() -> Self {
        Self {
            server_changed: on_server_change,
            claim_changed: on_claim_change,
            assumption_ended: on_assumption_end,
        }
    }
}

/// A server changed from `old` to `new` (`None`: absent); `servers` and `claims` are the
/// caches after it, `in_flight` the picks whose writes the caches may not show yet.
pub fn on_server_change(
    old: Option<&CachedServer>,
    new: Option<&CachedServer>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    in_flight: usize,
) -> Wake {
    let mut wake = Wake::default();
    let Some(name) = new.or(old).map(meta::name) else {
        return wake;
    };
    if new.is_some() {
        wake.servers.insert(name.to_string());
    }
    wake.claims
        .extend(claims.claims_naming(name).into_iter().map(claim_key));
    for s in old.iter().chain(new.iter()) {
        if let Some(r) = &s.spec.server_claim_ref {
            wake.claims.insert(ClaimKey::of(&r.namespace, &r.name));
        }
    }
    if let Some(n) = new
        && is_free(n)
        && old.is_none_or(|o| !is_free(o) || o.spec != n.spec || o.labels() != n.labels())
    {
        // The claims it can go to ([`first_waiting_for`]); a claim backing off after a
        // refused write is woken by its own timer.
        let per_shape = servers.free_index().len() + in_flight + 1;
        wake.claims
            .extend(first_waiting_for(n, per_shape, claims.waiting()));
        wake.named_free_servers(servers, claims);
    }
    wake
}

/// A claim changed from `old` to `new`; `servers` and `claims` are the caches after it.
pub fn on_claim_change(
    old: Option<&CachedClaim>,
    new: Option<&CachedClaim>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
) -> Wake {
    let mut wake = Wake::default();
    let Some(key) = new.or(old).map(claim_key) else {
        return wake;
    };
    if new.is_some() {
        wake.claims.insert(key.clone());
    }
    for c in old.iter().chain(new.iter()) {
        if let Some(r) = &c.spec.server_ref {
            wake.servers.insert(r.name.clone());
        }
    }
    for s in servers.reserved_for(&key.namespace, &key.name) {
        wake.servers.insert(meta::name(s).to_string());
    }
    let stopped_contending = old.and_then(|o| {
        let s = servers.server(&o.spec.server_ref.as_ref()?.name)?;
        // As `outranked_on` counts a rival: one that names the server and may take it.
        let contends =
            |c: &CachedClaim| c.spec.server_ref == o.spec.server_ref && can_take_back(s, c).is_ok();
        (is_free(s) && contends(o) && !new.is_some_and(contends)).then_some(())
    });
    if stopped_contending.is_some() {
        wake.waiting_claims(claims);
    }
    if left_without_a_server(old, new, servers) {
        wake.waiting_claims(claims);
        wake.named_free_servers(servers, claims);
    }
    wake
}

/// Whether a waiting claim stopped waiting without taking a free server (deleted, being
/// deleted, naming a server that is not free) or now asks for something else (another
/// shape): the matching may now give the others what it kept for it. A claim that took a
/// free server (a pick) frees nothing, and wakes nobody.
fn left_without_a_server(
    old: Option<&CachedClaim>,
    new: Option<&CachedClaim>,
    servers: &ServerCatalog,
) -> bool {
    let waiting_shape = |c: &CachedClaim| is_waiting(c).then(|| ClaimShape::of(c));
    let Some(shape) = old.and_then(waiting_shape) else {
        return false;
    };
    if shape.fits_no_server() {
        // Shut out by its class or a quota: the matching kept nothing for it.
        return false;
    }
    let Some(new) = new else {
        return true;
    };
    if let Some(now) = waiting_shape(new) {
        return now != shape;
    }
    // It took a free server if that server is free, or already records it by the server
    // controller's hand (the server side's write can reach the cache first). A server
    // reserved for it by an admin was never free: adopting it leaves the free servers to
    // the others.
    let records_it = |s: &CachedServer| {
        let by_controller = meta::has_annotation(s, ANNOTATION_BOUND_BY_CONTROLLER);
        by_controller
            && s.spec
                .server_claim_ref
                .as_ref()
                .is_some_and(|r| r.namespace == meta::namespace(new) && r.name == meta::name(new))
    };
    let took = new
        .spec
        .server_ref
        .as_ref()
        .and_then(|r| servers.server(&r.name));
    !took.is_some_and(|s| is_free(s) || records_it(s)) || meta::is_deleting(new)
}

/// An assumed choice of `server` ended: waiting claims passed it over, and a claim
/// naming it may have waited for it.
pub fn on_assumption_end(server: &str, servers: &ServerCatalog, claims: &ClaimCatalog) -> Wake {
    let mut wake = Wake::default();
    if servers.server(server).is_some_and(is_free) {
        wake.waiting_claims(claims);
        // A claim naming it may have waited for the pick that held it, and its turn
        // may have come: the server decides that, the claim whether to go on waiting.
        wake.servers.insert(server.to_string());
        let naming = claims.claims_naming(server).into_iter().map(claim_key);
        wake.claims.extend(naming);
    }
    wake
}

/// A relist: every object may have changed.
pub fn on_relist(servers: &ServerCatalog, claims: &ClaimCatalog) -> Wake {
    Wake {
        claims: claims.iter().map(claim_key).collect(),
        servers: servers.iter().map(|s| meta::name(s).to_string()).collect(),
    }
}

/// Where the periodic resync has got to: the tick within the pass, and each kind's
/// place in its key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResyncCursor {
    tick: u32,
    claims: Place<ClaimKey>,
    servers: Place<String>,
}

/// Where one kind's pass has got to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Place<K> {
    /// Nothing woken yet in this pass.
    #[default]
    Start,
    /// Woken up to this key.
    After(K),
    /// Every key was woken; the next pass starts with the next interval.
    Done,
}

/// One tick of the periodic resync, one pass spread over `ticks` ticks: the next
/// `ceil(len / ticks)` objects of each kind in key order. A pass takes `ticks` ticks
/// whatever the fleet's size, so an object present for a whole pass is woken exactly
/// once in it, and one created during a pass by the end of the next. Spread, not all at
/// once: every object woken at once would sit queued in the controllers until its turn,
/// and a requeue per object after the interval kept a request per object (three copies
/// of its key in kube-runtime's scheduler) for the whole interval (docs/performance.md,
/// "The scheduler's queue").
pub fn on_resync_tick(
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    cursor: &mut ResyncCursor,
    ticks: u32,
) -> Wake {
    let ticks = ticks.max(1);
    let share = |len: usize| len.div_ceil(ticks as usize);
    let shares = (share(claims.len()), share(servers.len()));
    let wake = next_shares(servers, claims, cursor, shares);
    cursor.tick += 1;
    if cursor.tick >= ticks {
        *cursor = ResyncCursor::default();
    }
    wake
}

/// One step of the controllers' start, which wakes every object (as a relist does) but
/// `share` of each kind at a time, in key order, as the controllers take them up:
/// woken all at once, every object sat queued in kube-runtime's scheduler until its
/// turn, and that queue was a seventh of the operator's peak heap (docs/performance.md,
/// "The scheduler's queue"). `None` once every object present throughout
/// was woken; one created meanwhile is woken by its own watch event.
pub fn on_start_step(
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    cursor: &mut ResyncCursor,
    share: usize,
) -> Option<Wake> {
    if cursor.claims == Place::Done && cursor.servers == Place::Done {
        return None;
    }
    Some(next_shares(servers, claims, cursor, (share, share)))
}

/// The next shares (claims, servers) after the cursor.
fn next_shares(
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    cursor: &mut ResyncCursor,
    (claims_share, servers_share): (usize, usize),
) -> Wake {
    Wake {
        claims: next_share(&mut cursor.claims, claims_share, |after, n| {
            claims.keys_after(after).take(n).cloned().collect()
        }),
        servers: next_share(&mut cursor.servers, servers_share, |after, n| {
            let after = after.map(String::as_str);
            servers
                .names_after(after)
                .take(n)
                .map(str::to_string)
                .collect()
        }),
    }
}

/// The next `share` keys after `place`, moving `place` past them. `keys_after(key, n)`
/// lists the first `n` keys after `key` (from the first key for `None`): one more than
/// the share, to tell whether the pass ends with it.
fn next_share<K: Clone + Ord>(
    place: &mut Place<K>,
    share: usize,
    keys_after: impl FnOnce(Option<&K>, usize) -> Vec<K>,
) -> BTreeSet<K> {
    let after = match place {
        Place::Start => None,
        Place::After(key) => Some(&*key),
        Place::Done => return BTreeSet::new(),
    };
    let mut rest = keys_after(after, share + 1);
    let ended = rest.len() <= share;
    rest.truncate(share);
    *place = match (ended, rest.last()) {
        (false, Some(last)) => Place::After(last.clone()),
        _ => Place::Done,
    };
    rest.into_iter().collect()
}
