//! The claims the matching and the fair order read (waiting, naming a server, served),
//! kept up to date one watch event at a time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::api::CachedClaim;
use crate::binding::claim_side::backoff::backs_off;
use crate::binding::meta::{self, ClaimKey, is_controller_chosen};
use crate::binding::placement::index::Class;
use crate::binding::placement::pins::ShapesByPin;
use crate::binding::placement::shape::{ClaimShape, address};

use super::contest::Contest;
use super::fit_rows::FitRows;
use super::waiter::{ByShape, Waiter, is_waiting};

/// The claims the matching and the fair order read, kept up to date one claim at a time
/// (O(log n) per watch event) by the claim cache.
#[derive(Clone, Debug, Default)]
pub struct WaitingClaims {
    /// The waiting claims by shape, keyed by the address of the shared copy (held here,
    /// so the address names one shape while it waits): a pick meets thousands of
    /// (shape, slot) pairs, and finds the shape's claims without hashing its selector.
    pub(super) by_shape: ByShape,
    pub(super) shape_of: HashMap<ClaimKey, (Arc<ClaimShape>, Waiter)>,
    /// User-chosen claims on the unbound path naming a server, with their shape and
    /// place in the fair order: they take that server when their turn comes. (A
    /// controller's own picks in flight are its assumed choices; scanning every
    /// controller-chosen claim in flight on every pick cost a third of the throughput
    /// at 30k.)
    pub(super) serving: BTreeMap<ClaimKey, (String, Arc<ClaimShape>, Waiter)>,
    /// Controller-chosen claims on the unbound path (picks whose server side is not
    /// written yet), by the server they name: a user's claim naming that server has its
    /// turn only if they could do without it ([`place_named`]). Looked up by server, never
    /// walked.
    pub(super) picks: BTreeMap<String, BTreeMap<ClaimKey, (Arc<ClaimShape>, Waiter)>>,
    pick_of: HashMap<ClaimKey, String>,
    /// Per namespace, when its claims were bound, for the turns of the fair order: the
    /// bound claims in the cache, and the deleted ones whose bind may still count (bound
    /// no earlier than the oldest claim in the cache was created), so that a namespace
    /// that deletes its claims once they are bound does not get its turns back.
    pub(super) served: HashMap<String, BTreeSet<(Timestamp, ClaimKey)>>,
    served_at: HashMap<ClaimKey, Timestamp>,
    /// When each claim in the cache was created, oldest first: no turn counts a bind
    /// older than the oldest, so deleted claims' binds before it are let go.
    created: BTreeSet<(Timestamp, ClaimKey)>,
    created_at: HashMap<ClaimKey, Timestamp>,
    /// Claims naming a server whose bind is not recorded yet (a pick in flight, a user's
    /// claim): served now, for the turns of the fair order, so that a cache that has not
    /// seen a bind's status yet does not hand the namespace its next turn early.
    pub(super) taking: BTreeSet<ClaimKey>,
    /// The shape of every claim in the cache, waiting or not, and how many claims have
    /// it: what claims to come are likely to ask for.
    known: HashMap<Arc<ClaimShape>, usize>,
    known_of: HashMap<ClaimKey, Arc<ClaimShape>>,
    /// The known shapes, filed by the values their selectors pin: the shapes that could
    /// fit a class are found from its labels.
    known_pins: ShapesByPin,
    /// How many known shapes fit each class a pick has weighed: counted once per class
    /// (O(known shapes that could fit it): those pinning a value it carries, and those
    /// pinning none, `known_pins`), then kept up to date as shapes come and go (O(classes weighed)
    /// per new or vanished shape), so that a pick's weighing costs a lookup per class
    /// however many shapes tenants create.
    pub(super) contest: Contest,
    /// Which classes of the free-server index each shape fits ([`FitRows`]).
    pub(super) rows: FitRows,
}

impl WaitingClaims {
    /// Records the claim's current state (`None`: deleted; its bind, if any, still counts
    /// for its namespace's turns).
    pub fn put(&mut self, key: &ClaimKey, claim: Option<&CachedClaim>) {
        let Some(claim) = claim else {
            self.served_at.remove(key);
            self.forget_known(key);
            self.forget(key);
            self.forget_created(key);
            self.let_go_of_old_service();
            return;
        };
        let shape = self.known_shape(key, claim);
        self.forget(key);
        self.date(key, claim);
        if is_waiting(claim) {
            let waiter = Waiter::keyed(claim, key.clone());
            let (_, members) = self
                .by_shape
                .entry(address(&shape))
                .or_insert_with(|| (shape.clone(), BTreeSet::new()));
            if members.is_empty() {
                self.rows.noted(&shape);
            }
            members.insert(waiter.clone());
            self.shape_of.insert(key.clone(), (shape.clone(), waiter));
        }
        let on_unbound_path = !meta::is_bind_completed(claim) && !backs_off(claim);
        if let Some(r) = &claim.spec.server_ref
            && on_unbound_path
        {
            let waiter = Waiter::keyed(claim, key.clone());
            if is_controller_chosen(claim) {
                let on = self.picks.entry(r.name.clone()).or_default();
                on.insert(key.clone(), (shape, waiter));
                self.pick_of.insert(key.clone(), r.name.clone());
            } else {
                self.serving
                    .insert(key.clone(), (r.name.clone(), shape, waiter));
            }
        }
        if claim.spec.server_ref.is_some() && bound_time(claim).is_none() {
            self.taking.insert(key.clone());
        }
    }

    /// The claim's shape, as the known shapes share it. An update that keeps the claim's
    /// shape (most do: a write of its ref, annotations or status) keeps its shared copy,
    /// uncopied: the shape stays known (no recount of the contest) and keeps its fit row.
    fn known_shape(&mut self, key: &ClaimKey, claim: &CachedClaim) -> Arc<ClaimShape> {
        if let Some(known) = self.known_of.get(key)
            && known.is_of(claim)
        {
            return known.clone();
        }
        self.forget_known(key);
        self.know(key, ClaimShape::of(claim))
    }

    /// Files when the claim was created and when it was bound, for the fair order's
    /// turns. Each is set once in a claim's life: an update that changes neither (all but
    /// one or two per claim) leaves the ordered sets alone.
    fn date(&mut self, key: &ClaimKey, claim: &CachedClaim) {
        let created = claim.meta().creation_timestamp.as_ref().map(|t| t.0);
        if self.created_at.get(key).copied() != created {
            self.forget_created(key);
            if let Some(t) = created {
                self.created.insert((t, key.clone()));
                self.created_at.insert(key.clone(), t);
            }
        }
        let bound = bound_time(claim);
        if self.served_at.get(key).copied() != bound {
            self.forget_served(key);
            if let Some(t) = bound {
                let served = self.served.entry(key.namespace.clone()).or_default();
                served.insert((t, key.clone()));
                self.served_at.insert(key.clone(), t);
            }
        }
    }

    /// Counts `key`'s claim under `shape` among the known shapes; returns the shared copy.
    fn know(&mut self, key: &ClaimKey, shape: ClaimShape) -> Arc<ClaimShape> {
        let shape = match self.known.get_key_value(&shape) {
            Some((existing, _)) => existing.clone(),
            None => Arc::new(shape),
        };
        let count = self.known.entry(shape.clone()).or_default();
        *count += 1;
        if *count == 1 {
            self.contest.shape_known(&shape, 1);
            self.known_pins.insert(&shape);
        }
        self.known_of.insert(key.clone(), shape.clone());
        shape
    }

    fn forget_known(&mut self, key: &ClaimKey) {
        if let Some(shape) = self.known_of.remove(key)
            && let Some(count) = self.known.get_mut(&shape)
        {
            *count -= 1;
            if *count == 0 {
                self.known.remove(&shape);
                self.contest.shape_known(&shape, -1);
                self.known_pins.remove(&shape);
            }
        }
    }

    /// Forgets where `key` waits, names a server or takes one: all but its known shape
    /// ([`Self::forget_known`]) and its dates ([`Self::date`]).
    fn forget(&mut self, key: &ClaimKey) {
        if let Some((shape, waiter)) = self.shape_of.remove(key)
            && let Some((_, members)) = self.by_shape.get_mut(&address(&shape))
        {
            members.remove(&waiter);
            if members.is_empty() {
                self.by_shape.remove(&address(&shape));
            }
        }
        self.serving.remove(key);
        if let Some(server) = self.pick_of.remove(key)
            && let Some(on) = self.picks.get_mut(&server)
        {
            on.remove(key);
            if on.is_empty() {
                self.picks.remove(&server);
            }
        }
        self.taking.remove(key);
    }

    fn forget_created(&mut self, key: &ClaimKey) {
        if let Some(t) = self.created_at.remove(key) {
            self.created.remove(&(t, key.clone()));
        }
    }

    fn forget_served(&mut self, key: &ClaimKey) {
        if let Some(t) = self.served_at.remove(key)
            && let Some(served) = self.served.get_mut(&key.namespace)
        {
            served.remove(&(t, key.clone()));
            if served.is_empty() {
                self.served.remove(&key.namespace);
            }
        }
    }

    /// Lets go of the deleted claims' binds that can no longer count: a turn counts binds
    /// since the oldest waiting claim was created, and no claim in the cache, waiting now
    /// or later, was created before the oldest one.
    fn let_go_of_old_service(&mut self) {
        let horizon = self.created.first().map(|(t, _)| *t);
        self.served.retain(|_, binds| {
            match horizon {
                Some(t) => *binds = binds.split_off(&(t, ClaimKey::default())),
                None => binds.clear(),
            }
            !binds.is_empty()
        });
    }

    /// The waiting claims of `shape`, found by value (a hash of its selector, once per
    /// pick), with the shared copy they are queued under.
    pub(super) fn waiting_as(
        &self,
        shape: &ClaimShape,
    ) -> Option<(&Arc<ClaimShape>, &BTreeSet<Waiter>)> {
        // Every waiting claim's shape is known, and shared from `known`.
        let (shared, _) = self.known.get_key_value(shape)?;
        let found = self.waiting_at(address(shared));
        debug_assert_eq!(
            found.is_some(),
            self.by_shape.values().any(|(s, _)| **s == *shape),
            "the waiting shapes found by address and by value"
        );
        found
    }

    /// The waiting claims of the shared shape at `address` (of a shape from `known`,
    /// `by_shape` or the fit rows).
    pub(super) fn waiting_at(
        &self,
        address: usize,
    ) -> Option<(&Arc<ClaimShape>, &BTreeSet<Waiter>)> {
        let (shared, members) = self.by_shape.get(&address)?;
        Some((shared, members))
    }

    /// The shape a waiting claim is queued under, as the waiting claims share it.
    pub fn shared_shape_of(&self, key: &ClaimKey) -> Option<&Arc<ClaimShape>> {
        self.shape_of.get(key).map(|(s, _)| s)
    }

    /// The shape a waiting claim is queued under.
    pub fn shape_of(&self, key: &ClaimKey) -> Option<&ClaimShape> {
        self.shape_of.get(key).map(|(s, _)| &**s)
    }

    /// These claims as a cache that has not seen the claims naming servers would show
    /// them (the model check's view of another process's claims). Their namespaces'
    /// turns stay as they are: such a cache shows those claims waiting, ranked in their
    /// namespace's queue, which moves the others' turns as much as taking a server does.
    pub fn without_serving(&self) -> Self {
        // Field by field: cloning the whole, then dropping what goes, copied it twice.
        Self {
            by_shape: self.by_shape.clone(),
            shape_of: self.shape_of.clone(),
            serving: BTreeMap::new(),
            picks: BTreeMap::new(),
            pick_of: HashMap::new(),
            served: self.served.clone(),
            served_at: self.served_at.clone(),
            created: self.created.clone(),
            created_at: self.created_at.clone(),
            taking: self.taking.clone(),
            known: self.known.clone(),
            known_of: self.known_of.clone(),
            known_pins: self.known_pins.clone(),
            contest: self.contest.clone(),
            rows: self.rows.clone(),
        }
    }

    /// These claims as a cache that counted no namespace's service would show them:
    /// turns by each namespace's own queue alone (the model check's mutant of the fair
    /// order).
    pub fn without_service(&self) -> Self {
        Self {
            served: HashMap::new(),
            served_at: HashMap::new(),
            taking: BTreeSet::new(),
            ..self.clone()
        }
    }

    /// How many of the namespace's claims are taking a server now ([`Self::taking`]).
    pub(super) fn taking_in(&self, namespace: &str) -> usize {
        let from = ClaimKey::of(namespace, "");
        let mine = self
            .taking
            .range(from..)
            .take_while(|k| k.namespace == namespace);
        mine.count()
    }

    /// The servers users' claims on the unbound path name, with those claims.
    pub fn named(&self) -> impl Iterator<Item = (&str, &ClaimKey)> {
        self.serving
            .iter()
            .map(|(key, (server, ..))| (server.as_str(), key))
    }

    /// The claims waiting in a shape some server could take ([`ClaimShape::fits_no_server`]
    /// leaves out the claims a class or quota shuts out).
    pub fn servable(&self) -> impl Iterator<Item = &ClaimKey> {
        let servable = self.by_shape.values().filter(|(s, _)| !s.fits_no_server());
        servable.flat_map(|(_, members)| members.iter().map(|w| &w.key))
    }

    /// How many claims wait.
    pub fn len(&self) -> usize {
        self.shape_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shape_of.is_empty()
    }

    /// How many shapes of the cache's claims, other than `mine`, fit `class` (which
    /// `mine` fits): how contested its servers are likely to be. `mine_known`: whether
    /// `mine` is among them ([`Self::knows`], asked once per pick, not per class).
    pub(super) fn contest(&self, mine_known: bool, class: &Class) -> usize {
        let fitting = self.contest.fitting(class, || {
            let could_fit = self.known_pins.could_fit(&class.labels);
            let fitting = could_fit.filter(|s| s.fits(class)).count();
            #[cfg(debug_assertions)]
            {
                let all = self.known.keys().filter(|s| s.fits(class)).count();
                assert_eq!(
                    fitting, all,
                    "the known shapes fitting a class, by pins and all"
                );
            }
            fitting
        });
        fitting.saturating_sub(usize::from(mine_known))
    }

    /// Whether a claim of the cache has this shape.
    pub(super) fn knows(&self, shape: &ClaimShape) -> bool {
        self.known.contains_key(shape)
    }
}

/// When the claim was bound, for the turns of the fair order: from its status only,
/// which tenants cannot write (an annotation they could strip to look less served).
pub(super) fn bound_time(claim: &CachedClaim) -> Option<Timestamp> {
    claim.status.as_ref()?.bound_time.as_ref().map(|t| t.0)
}

#[cfg(test)]
mod tests;
