//! What a pick finds spoken for: the picks in flight (servers taken, claims placed, walked
//! or counted), the claims backing off or adopting a server, and the free servers that
//! users' claims name.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::api::CachedServer;
use crate::binding::claim_side::assumed::AssumedChoices;
use crate::binding::meta::ClaimKey;
use crate::binding::placement::in_flight::InFlight;
use crate::binding::placement::index::{ClassId, FreeServerIndex};
use crate::binding::placement::shape::{ClaimShape, address};

use super::inputs::PickInputs;
use super::waiter::Waiter;

/// Picks in flight: free servers already spoken for and waiting claims already placed,
/// which the caches do not show yet; and the free servers that users' claims name.
pub(super) struct SpokenFor<'p> {
    pub(super) taken: HashSet<&'p str>,
    pub(super) placed: HashSet<&'p ClaimKey>,
    /// The placed claims that take a server (picks in flight, adoptions), not those
    /// backing off: served now, for the turns of the fair order, also while the cache
    /// still shows them waiting.
    pub(super) taking: HashSet<&'p ClaimKey>,
    /// Free servers a user's claim names and fits, with those claims (not the picker):
    /// each server is a class of its own, and its claims a node asking for it alone, so
    /// the claims naming a server wait their turn like any other.
    pub(super) named: BTreeMap<&'p str, Vec<&'p Waiter>>,
    /// When the picker names a server: the picks of it in flight (controller-chosen
    /// claims naming it), as the waiting claims they were, free to take another server.
    pub(super) rivals: Vec<(&'p ClaimShape, &'p Waiter)>,
    /// When set, the other claims' assumptions are not in `taken`, `placed` and
    /// `taking`, but counted here per class and shape.
    pub(super) counts: Option<InFlightCounts<'p>>,
}

/// The picks in flight of other claims, as [`InFlight`] counts them.
pub(super) struct InFlightCounts<'p> {
    pub(super) in_flight: &'p InFlight,
    pub(super) assumed: &'p AssumedChoices,
    pub(super) me: &'p ClaimKey,
    /// The picker's own assumption as counted (its class, its shape's address): not
    /// another claim's.
    own: Option<(Option<ClassId>, Option<usize>)>,
}

impl InFlightCounts<'_> {
    /// Whether `key` is another claim with a pick in flight.
    pub(super) fn has_pick(&self, key: &ClaimKey) -> bool {
        key != self.me && self.assumed.server_for(key).is_some()
    }

    pub(super) fn taken_in(&self, id: ClassId) -> usize {
        let own = self.own.is_some_and(|(class, _)| class == Some(id));
        self.in_flight.taken_in(id) - usize::from(own)
    }

    pub(super) fn placed_in(&self, shape: &Arc<ClaimShape>) -> usize {
        let address = address(shape);
        let own = self.own.is_some_and(|(_, s)| s == Some(address));
        self.in_flight.placed_in(shape) - usize::from(own)
    }
}

impl<'p> SpokenFor<'p> {
    /// O(user-chosen claims in flight + claims backing off), and the picks in flight
    /// counted (O(1)) or, without counts, walked (O(assumed choices)); with no copies
    /// (this runs on every pick). `mine`: the server the picker names, if it names one
    /// (its rivals are found by a walk). `adopting`: claims adopting a server reserved
    /// for them.
    pub(super) fn of<'a>(
        me: &'p ClaimKey,
        mine: Option<&'p str>,
        index: &FreeServerIndex,
        server_of: &dyn Fn(&str) -> Option<&'a CachedServer>,
        adopting: &[&'p ClaimKey],
        inputs: &PickInputs<'p>,
    ) -> Self {
        let counted = inputs
            .in_flight
            .filter(|f| mine.is_none() && f.describes(index));
        let mut spoken = SpokenFor {
            taken: HashSet::new(),
            placed: HashSet::new(),
            taking: HashSet::new(),
            named: BTreeMap::new(),
            rivals: Vec::new(),
            counts: counted.map(|in_flight| InFlightCounts {
                in_flight,
                assumed: inputs.assumed,
                me,
                own: inputs
                    .assumed
                    .server_for(me)
                    .and_then(|s| in_flight.counted_on(s)),
            }),
        };
        if spoken.counts.is_none() {
            spoken.walk_assumed(me, mine, index, inputs);
        }
        // A claim backing off is ahead of nobody and takes nothing.
        let held_back: Vec<&ClaimKey> = inputs
            .held_back
            .iter()
            .filter(|k| *k != me && !spoken.has_pick(k))
            .collect();
        spoken.placed.extend(held_back);
        let others_adopting: Vec<&ClaimKey> = adopting
            .iter()
            .copied()
            .filter(|k| *k != me && !spoken.has_pick(k))
            .collect();
        spoken.placed.extend(others_adopting.iter().copied());
        spoken.taking.extend(others_adopting);
        for (key, (server, shape, waiter)) in &inputs.waiting.serving {
            let gone = key == me || spoken.is_placed(key);
            let picked = inputs.assumed.is_assumed(server) && Some(server.as_str()) != mine;
            if gone || picked || index.class_of(server).is_none() {
                continue;
            }
            if server_of(server).is_some_and(|s| shape.fits_server(s)) {
                spoken.taken.insert(server);
                spoken.named.entry(server).or_default().push(waiter);
            }
        }
        if let Some(server) = mine {
            spoken.taken.insert(server);
            spoken.named.entry(server).or_default();
            let fits = |shape: &ClaimShape| server_of(server).is_some_and(|s| shape.fits_server(s));
            let picks = inputs.waiting.picks.get(server).into_iter().flatten();
            let rivals: Vec<_> = picks
                .filter(|(key, (shape, _))| *key != me && !spoken.is_placed(key) && fits(shape))
                .map(|(_, (shape, waiter))| (&**shape, waiter))
                .collect();
            spoken.rivals.extend(rivals);
        }
        spoken
    }

    /// The other claims' picks in flight, one by one: O(assumed choices).
    fn walk_assumed(
        &mut self,
        me: &ClaimKey,
        mine: Option<&str>,
        index: &FreeServerIndex,
        inputs: &PickInputs<'p>,
    ) {
        // A pick in flight of the server the picker names is a rival, not a placed claim.
        let others = inputs.assumed.iter().filter(|(_, a)| &a.claim != me);
        for (server, a) in others.filter(|(s, _)| Some(s.as_str()) != mine) {
            self.placed.insert(&a.claim);
            self.taking.insert(&a.claim);
            if index.class_of(server).is_some() {
                self.taken.insert(server);
            }
        }
    }

    /// Whether `key` is another claim with a pick in flight that [`Self::counts`] holds.
    pub(super) fn has_pick(&self, key: &ClaimKey) -> bool {
        self.counts.as_ref().is_some_and(|c| c.has_pick(key))
    }

    /// Whether `key` is placed already (a pick in flight, backing off, adopting).
    pub(super) fn is_placed(&self, key: &ClaimKey) -> bool {
        self.placed.contains(key) || self.has_pick(key)
    }

    /// The claims taking a server now: adoptions, and the picks in flight (walked when
    /// counted: only the fair order, when servers are scarce, asks).
    pub(super) fn taking(&self) -> Vec<&ClaimKey> {
        let mut taking: Vec<&ClaimKey> = self.taking.iter().copied().collect();
        if let Some(c) = &self.counts {
            let others = c.assumed.iter().filter(|(_, a)| &a.claim != c.me);
            taking.extend(others.map(|(_, a)| &a.claim));
        }
        taking
    }
}
