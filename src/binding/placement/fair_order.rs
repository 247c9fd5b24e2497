//! The fair order of waiting claims: namespaces take turns, and within one the oldest
//! claim goes first.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::jiff::Timestamp;

use crate::binding::meta::ClaimKey;

use super::waiter::Waiter;
use super::waiting_claims::WaitingClaims;

/// The fair order of waiting claims: by turn, then oldest first, then namespace and name.
///
/// A claim's turn is its rank among its namespace's waiting claims (oldest first), plus
/// how many claims its namespace was served since the oldest waiting claim was created
/// (bound since then, deleted since or not, or naming a server and not yet bound: a pick
/// in flight, a user's claim). So namespaces take turns: after a namespace is served
/// once, every other namespace's next claim comes before its next one, however many it
/// has waiting. The order is a function of the claim cache and of the binds of deleted
/// claims this process saw (docs/binding.md, "The matching": what a restart forgets).
pub(super) struct FairOrder<'w> {
    turn: HashMap<&'w ClaimKey, usize>,
}

impl<'w> FairOrder<'w> {
    pub(super) fn of(waiters: impl Iterator<Item = &'w Waiter>, waiting: &WaitingClaims) -> Self {
        Self::of_taking(waiters, waiting, &HashMap::new())
    }

    /// The order with `in_flight` more claims per namespace taking a server than the
    /// cache shows (this controller's picks whose writes it has not seen yet).
    pub(super) fn of_taking(
        waiters: impl Iterator<Item = &'w Waiter>,
        waiting: &WaitingClaims,
        in_flight: &HashMap<&str, usize>,
    ) -> Self {
        let mut by_namespace: BTreeMap<&str, Vec<&Waiter>> = BTreeMap::new();
        for w in waiters {
            by_namespace.entry(&w.key.namespace).or_default().push(w);
        }
        let since = by_namespace
            .values()
            .flatten()
            .map(|w| w.created)
            .min()
            .flatten();
        let mut turn = HashMap::new();
        for (namespace, mut queue) in by_namespace {
            queue.sort();
            let served = waiting.served.get(namespace).map_or(0, |set| match since {
                Some(t) => set.range((t, ClaimKey::default())..).count(),
                None => set.len(),
            });
            // A claim naming a free server is taking it, and queued for its turn too:
            // counted once, by its rank.
            let queued_taking = queue.iter().filter(|w| waiting.taking.contains(&w.key));
            let taking = waiting.taking_in(namespace) - queued_taking.count();
            let offset = served + taking + in_flight.get(namespace).copied().unwrap_or(0);
            for (rank, w) in queue.into_iter().enumerate() {
                turn.insert(&w.key, offset + rank);
            }
        }
        FairOrder { turn }
    }

    pub(super) fn key<'k>(&self, w: &'k Waiter) -> (usize, &'k Option<Timestamp>, &'k ClaimKey) {
        (
            self.turn.get(&w.key).copied().unwrap_or(0),
            &w.created,
            &w.key,
        )
    }
}
