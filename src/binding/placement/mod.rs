//! Placement: which free server a pending claim takes, and when it waits its turn.
//!
//! Lowest-name-first strands claims: a claim that takes any server may take the last one a
//! selective claim could use. So a pick keeps a *maximum matching* of the waiting claims to
//! the free servers possible: it takes a server that some maximum matching gives it, and
//! a claim no maximum matching can serve without leaving out a claim ahead of it in the
//! fair order waits (`WaitForTurn`).
//!
//! The matching is computed over classes, not objects. Claims with the same selector and
//! tolerations (a [`ClaimShape`]) are interchangeable, and so are free servers of one
//! index class (same taints, same values for every label key a selector reads; see
//! [`FreeServerIndex`]). The flow network is source → shape (capacity: its waiting
//! claims) → class (an edge where the shape fits the class) → sink (capacity: the class's
//! free servers), restricted to the connected component of the picker's shape. Its size is
//! that of the fleet's shapes, not of the fleet. A free server that users' claims name is
//! a class of its own, and those claims a node asking for it alone: a name says which
//! server, not when ([`place_named`]). See docs/binding.md, "Picking a server".

mod component_search;
mod contest;
mod fair_order;
mod fit_rows;
mod flow;
mod inputs;
mod kept_flow;
mod network;
mod nodes;
mod outcome;
mod spoken_for;
mod waiter;
mod waiting_claims;
#[cfg(debug_assertions)]
mod whole_network;

use std::collections::BTreeSet;

use crate::api::{CachedClaim, CachedServer};

use super::index::FreeServerIndex;
use super::meta::{self, ClaimKey};
pub use super::shape::ClaimShape;

use fair_order::FairOrder;
use flow::MaxFlow;
pub use inputs::PickInputs;
use network::Network;
use nodes::Asks;
pub use outcome::{AHEAD_NAMED, Ahead, Placement, WAITING_FOR_TURN};
use spoken_for::SpokenFor;
pub use waiter::{Waiter, is_waiting};
pub use waiting_claims::WaitingClaims;

/// Where `claim` goes; see the module docs. `server_of` reads a free server's object
/// (for whether the claim naming it could take it); `adopting` are the waiting claims
/// that a server reserved for them by name fits: they adopt it, not a free one.
pub fn place<'a>(
    claim: &CachedClaim,
    index: &'a FreeServerIndex,
    server_of: &dyn Fn(&str) -> Option<&'a CachedServer>,
    adopting: &[&ClaimKey],
    inputs: &PickInputs<'_>,
) -> Placement<'a> {
    let shape = ClaimShape::of(claim);
    if shape.selector.as_ref().is_some_and(|s| !index.tracks(s)) {
        // A view built by hand whose index does not split by this selector's keys: the
        // classes cannot say what fits, so fall back to the plain lowest name.
        let labels_of = |n: &str| server_of(n).map(meta::labels);
        return index
            .pick(claim, inputs.skip, &labels_of)
            .map_or(Placement::NoMatch, Placement::Pick);
    }
    serve(
        claim,
        Asks::Shape(&shape),
        index,
        server_of,
        adopting,
        inputs,
    )
}

/// Whether the fair order lets `claim`, which names the free `server` itself (a user's
/// `serverRef`), take it now: `Pick(server)` when it does, `WaitForTurn` when every
/// maximum matching of the claims ahead of it needs that server. A name says which
/// server, never when: a tenant cannot pass the claims ahead of it by naming the server
/// they would take. A pick of that server in flight counts as the waiting claim it was
/// (it may withdraw and take another server, or may need this one). `NoMatch` when the
/// server is not free, or the claim's selector and tolerations do not fit it.
pub fn place_named<'a>(
    claim: &CachedClaim,
    server: &str,
    index: &'a FreeServerIndex,
    server_of: &dyn Fn(&str) -> Option<&'a CachedServer>,
    adopting: &[&ClaimKey],
    inputs: &PickInputs<'_>,
) -> Placement<'a> {
    let fits = server_of(server).is_some_and(|s| ClaimShape::of(claim).fits_server(s));
    if !fits || index.class_of(server).is_none() {
        return Placement::NoMatch;
    }
    serve(
        claim,
        Asks::Server(server),
        index,
        server_of,
        adopting,
        inputs,
    )
}

/// Where a claim asking for `mine` goes: the matching and the fair order of [`place`].
fn serve<'a>(
    claim: &CachedClaim,
    mine: Asks<'_>,
    index: &'a FreeServerIndex,
    server_of: &dyn Fn(&str) -> Option<&'a CachedServer>,
    adopting: &[&ClaimKey],
    inputs: &PickInputs<'_>,
) -> Placement<'a> {
    let me = Waiter::of(claim);
    let named = match mine {
        Asks::Server(server) => Some(server),
        Asks::Shape(_) => None,
    };
    let spoken = SpokenFor::of(&me.key, named, index, server_of, adopting, inputs);
    let net = Network::around(mine, &me.key, index, inputs.waiting, &spoken);
    #[cfg(debug_assertions)]
    if spoken.counts.is_some() {
        // The counts are a cache of the assumptions: a walk must agree with them.
        let walked = PickInputs {
            in_flight: None,
            ..*inputs
        };
        let slow = SpokenFor::of(&me.key, named, index, server_of, adopting, &walked);
        let slow_net = Network::around(mine, &me.key, index, inputs.waiting, &slow);
        assert_eq!(
            (net.demand(), net.supply()),
            (slow_net.demand(), slow_net.supply()),
            "the picks in flight as counted and as walked"
        );
    }
    let usable = net.usable_classes_of_mine(mine, inputs);
    if usable.is_empty() {
        return Placement::NoMatch;
    }
    let (demand, supply) = (net.demand(), net.supply());
    let full = net.full_flow(&demand, &supply, inputs.waiting);
    let scarce = full.value < demand.iter().sum::<i64>();
    // When servers are scarce, only a claim the fair order reaches is served: one that a
    // maximum matching of the claims ahead of it, plus it, covers.
    let queue = scarce.then(|| net.demand_ahead_of(&me, inputs.waiting));
    let ahead = queue
        .as_ref()
        .map(|(demand, _)| MaxFlow::new(demand, &supply, &net.edges));
    if let (Some((_, keys)), Some(ahead)) = (&queue, &ahead)
        && !ahead.grows_with(0)
    {
        let first = keys.iter().take(AHEAD_NAMED).map(|k| (*k).clone());
        return Placement::WaitForTurn(Ahead {
            first: first.collect(),
            total: keys.len(),
        });
    }
    // The first class (in the order of `usable_classes_of_mine`) from which a maximum
    // matching of all waiting claims serves this one, and, when scarce, from which a
    // maximum matching of the claims ahead of it can spare a server: then no claim ahead
    // is left out.
    let keeps_max = full.open_to_mine;
    let keeps_ahead = ahead.as_ref().map(MaxFlow::classes_to_spare);
    let spares = |j: usize| keeps_ahead.as_ref().is_none_or(|spare| spare[j]);
    let chosen = usable
        .iter()
        .find(|(j, _)| keeps_max[*j] && spares(*j))
        .or_else(|| usable.iter().find(|(j, _)| keeps_max[*j]))
        .or(usable.first());
    chosen.map_or(Placement::NoMatch, |(_, name)| Placement::Pick(name))
}

/// The waiting claims a server that just became free can go to: for each shape that fits
/// it, the first `per_shape` in the fair order. A claim with at least (free servers +
/// picks in flight) claims of its own shape ahead of it cannot pick: those claims can
/// take every server it could, so the matching of the claims ahead is full without it.
/// Waking only these, not every waiting claim, keeps a freed server from queueing a
/// reconcile of every claim of a flood ahead of the one whose turn it is.
pub fn first_waiting_for(
    server: &CachedServer,
    per_shape: usize,
    waiting: &WaitingClaims,
) -> Vec<ClaimKey> {
    let fitting: Vec<&BTreeSet<Waiter>> = waiting
        .by_shape
        .values()
        .filter(|(shape, _)| shape.fits_server(server))
        .map(|(_, members)| members)
        .collect();
    if fitting.is_empty() {
        return Vec::new();
    }
    let order = FairOrder::of(waiting.shape_of.values().map(|(_, w)| w), waiting);
    let mut first = Vec::new();
    for members in fitting {
        let mut queue: Vec<&Waiter> = members.iter().collect();
        if queue.len() > per_shape {
            queue.select_nth_unstable_by(per_shape, |a, b| order.key(a).cmp(&order.key(b)));
            queue.truncate(per_shape);
        }
        first.extend(queue.into_iter().map(|w| w.key.clone()));
    }
    first
}

/// Of `keys`, users' claims on the unbound path naming `server`, the first in the fair
/// order among every waiting claim (of those that fit it and do not back off): the only
/// one of them that can have its turn for that server (each of the others has it, and
/// every claim ahead of it, ahead). Asking only this one keeps a tenant's thousand claims
/// naming one server from costing a thousand matchings per decision.
pub fn first_named<'k>(
    server: &CachedServer,
    keys: impl Iterator<Item = &'k ClaimKey>,
    held_back: &[ClaimKey],
    waiting: &WaitingClaims,
) -> Option<ClaimKey> {
    let named = keys
        .filter(|k| !held_back.contains(k))
        .filter_map(|k| waiting.serving.get(k))
        .map(|(_, shape, w)| (&**shape, w));
    first_fitting(server, named, waiting)
}

/// Of the controller-chosen claims on the unbound path naming `server` that this
/// controller's picks do not hold (`held` says which it holds: made before a restart, by
/// another replica, or written by hand), the first in the fair order, as
/// [`first_named`] finds it among users' claims: the only one of them asked its turn.
pub fn first_stray(
    server: &CachedServer,
    held_back: &[ClaimKey],
    waiting: &WaitingClaims,
    held: &dyn Fn(&ClaimKey) -> bool,
) -> Option<ClaimKey> {
    let picks = waiting.picks.get(meta::name(server)).into_iter().flatten();
    let strays = picks
        .filter(|(k, _)| !held(k) && !held_back.contains(k))
        .map(|(_, (shape, w))| (&**shape, w));
    first_fitting(server, strays, waiting)
}

/// Of `claims`, those that fit `server` (as `place_named` counts them), the first in the
/// fair order among every waiting claim.
fn first_fitting<'w>(
    server: &CachedServer,
    claims: impl Iterator<Item = (&'w ClaimShape, &'w Waiter)>,
    waiting: &'w WaitingClaims,
) -> Option<ClaimKey> {
    let named: Vec<&Waiter> = claims
        .filter(|(shape, _)| shape.fits_server(server))
        .map(|(_, w)| w)
        .collect();
    if named.len() <= 1 {
        return named.first().map(|w| w.key.clone());
    }
    let queued = waiting.shape_of.values().map(|(_, w)| w);
    let order = FairOrder::of(queued.chain(named.iter().copied()), waiting);
    let first = named
        .into_iter()
        .min_by(|a, b| order.key(a).cmp(&order.key(b)));
    first.map(|w| w.key.clone())
}

/// `keys` with the waiting ones first, in the fair order, then the rest by key: the
/// order in which a wake-up hands claims to the claim controller, so that when a server
/// frees, the claim the fair order reaches is reconciled first.
pub fn in_fair_order(keys: &BTreeSet<ClaimKey>, waiting: &WaitingClaims) -> Vec<ClaimKey> {
    let waiters: Vec<&Waiter> = keys
        .iter()
        .filter_map(|k| waiting.shape_of.get(k).map(|(_, w)| w))
        .collect();
    let order = FairOrder::of(waiters.iter().copied(), waiting);
    let mut first = waiters.clone();
    first.sort_by(|a, b| order.key(a).cmp(&order.key(b)));
    let rest = keys.iter().filter(|k| !waiting.shape_of.contains_key(*k));
    first
        .into_iter()
        .map(|w| &w.key)
        .chain(rest)
        .cloned()
        .collect()
}
