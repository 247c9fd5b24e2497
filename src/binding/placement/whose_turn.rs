//! Which waiting claims have their turn for a server: the first of each shape a freed
//! server wakes, the one claim naming a server that is asked its turn, and the fair order
//! in which a wake-up hands claims to the claim controller.

use std::collections::BTreeSet;

use crate::api::CachedServer;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::shape::ClaimShape;

use super::fair_order::FairOrder;
use super::waiter::Waiter;
use super::waiting_claims::WaitingClaims;

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
pub fn first_unheld_pick(
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
pub(super) fn first_fitting<'w>(
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
