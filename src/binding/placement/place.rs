//! A pick: where a waiting claim goes, asking for any free server its shape fits or for
//! the free server it names.

use crate::api::{CachedClaim, CachedServer};
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::index::FreeServerIndex;
use crate::binding::placement::shape::ClaimShape;

use super::flow::MaxFlow;
use super::inputs::PickInputs;
use super::network::Network;
use super::nodes::Asks;
use super::outcome::{AHEAD_NAMED, Ahead, Placement};
use super::spoken_for::SpokenFor;
use super::waiter::Waiter;

/// Where `claim` goes; see [`crate::binding::placement`]. `server_of` reads a free
/// server's object (for whether the claim naming it could take it); `adopting` are the
/// waiting claims that a server reserved for them by name fits: they adopt it, not a
/// free one.
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
pub(super) fn serve<'a>(
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
