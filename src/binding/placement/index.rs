//! The free-server index: which servers a new claim could take, grouped so that one pick
//! does not scan every server.
//!
//! A claim's selector reads only the label keys it names, and its tolerations only the
//! taints. So free servers are grouped into *classes*: servers with the same taints and
//! the same values (or absence) for every label key that some claim's selector uses (the
//! *tracked keys*). Every claim whose selector keys are tracked treats a class alike, so a
//! pick checks each class once and takes the class's lowest name from a sorted set:
//! O(classes + log n). Labels no selector reads (a serial number, a hostname, a BMC
//! address: real fleets put something unique on every server) do not split classes, so
//! their number does not grow with the fleet.
//!
//! The tracked keys grow as claims with new selector keys are seen
//! ([`FreeServerIndex::track_keys`] regroups the free servers, O(n), once per new key).
//! A claim whose selector names a key not yet tracked is still answered exactly, by
//! checking each member of the classes its other requirements allow against its full
//! labels: slower, never wrong. Updates are O(log n), one server at a time, straight from
//! watch events.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::{CachedClaim, CachedServer, Labels, ServerSelector, Taint};

use crate::binding::meta;
use crate::binding::selector::{first_untolerated, selector_matches};
use crate::binding::state::eligibility::not_free;

/// Whether a server belongs in the index: claimable by some new claim and not reserved
/// or bound (no `serverClaimRef`), by [`not_free`]'s rule.
pub fn is_free(server: &CachedServer) -> bool {
    not_free(server).next().is_none()
}

/// The label keys a selector reads.
pub fn selector_keys(selector: &ServerSelector) -> impl Iterator<Item = &str> {
    let labels = selector.match_labels.keys().map(String::as_str);
    labels.chain(selector.match_expressions.iter().map(|r| r.key.as_str()))
}

/// What every claim with tracked selector keys sees of a server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Class {
    /// The server's labels restricted to the tracked keys.
    pub labels: BTreeMap<String, String>,
    /// Sorted and deduplicated, so two servers with the same taints share a class;
    /// without the times they were added ([`Taint::as_bind_rule`]).
    pub taints: Vec<Taint>,
}

impl Class {
    fn of(server: &CachedServer, keys: &BTreeSet<String>) -> Self {
        let mut taints: Vec<Taint> = server.spec.taints.iter().map(Taint::as_bind_rule).collect();
        taints.sort();
        taints.dedup();
        let labels = meta::labels(server)
            .iter()
            .filter(|(k, _)| keys.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self { labels, taints }
    }
}

/// Free servers grouped by class; see the module docs.
///
/// A class keeps its slot (its [`ClassId`]) while it has free members, and for a while
/// after: slots are only appended, and dropped all at once when empty ones outnumber the
/// others, which starts a new *epoch*. So what placement learns about a class (which
/// claim shapes fit it) stays true under one epoch and only grows with the new slots.
#[derive(Debug)]
pub struct FreeServerIndex {
    keys: BTreeSet<String>,
    classes: HashMap<Arc<Class>, ClassId>,
    slots: Vec<Slot>,
    /// Slots without free members.
    empty: usize,
    class_of: HashMap<String, ClassId>,
    /// The slots by the values their class carries, per key: the slots a selector
    /// pinning a value could fit.
    by_label: HashMap<String, HashMap<String, Vec<ClassId>>>,
    epoch: u64,
}

/// A class's place in [`FreeServerIndex`]'s slots, stable within an epoch.
pub type ClassId = usize;

#[derive(Clone, Debug)]
struct Slot {
    class: Arc<Class>,
    members: BTreeSet<String>,
}

/// Epochs are unique across every index of the process (copies included), so what was
/// learnt under one epoch is never applied to another index's slots.
fn next_epoch() -> u64 {
    static EPOCHS: AtomicU64 = AtomicU64::new(1);
    EPOCHS.fetch_add(1, Ordering::Relaxed)
}

impl Default for FreeServerIndex {
    fn default() -> Self {
        Self {
            keys: BTreeSet::new(),
            classes: HashMap::new(),
            slots: Vec::new(),
            empty: 0,
            class_of: HashMap::new(),
            by_label: HashMap::new(),
            epoch: next_epoch(),
        }
    }
}

impl Clone for FreeServerIndex {
    /// A copy starts an epoch of its own: it will change apart from this one.
    fn clone(&self) -> Self {
        Self {
            keys: self.keys.clone(),
            classes: self.classes.clone(),
            slots: self.slots.clone(),
            empty: self.empty,
            class_of: self.class_of.clone(),
            by_label: self.by_label.clone(),
            epoch: next_epoch(),
        }
    }
}

impl FreeServerIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty index that tracks the same label keys as this one.
    pub fn emptied(&self) -> Self {
        Self {
            keys: self.keys.clone(),
            ..Self::default()
        }
    }

    /// Records the server's current state: indexed if free, dropped otherwise.
    pub fn upsert(&mut self, server: &CachedServer) {
        let name = meta::name(server);
        if !is_free(server) {
            self.remove(name);
            return;
        }
        let class = Class::of(server, &self.keys);
        if self
            .class_of
            .get(name)
            .is_some_and(|&id| *self.slots[id].class == class)
        {
            return;
        }
        self.remove(name);
        let id = match self.classes.get(&class) {
            Some(&id) => id,
            None => {
                let class = Arc::new(class);
                self.push_slot(Slot {
                    class,
                    members: BTreeSet::new(),
                });
                self.empty += 1;
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[id];
        if slot.members.is_empty() {
            self.empty -= 1;
        }
        slot.members.insert(name.to_string());
        self.class_of.insert(name.to_string(), id);
    }

    /// Forgets a server (deleted, or no longer free).
    pub fn remove(&mut self, name: &str) {
        let Some(id) = self.class_of.remove(name) else {
            return;
        };
        let slot = &mut self.slots[id];
        slot.members.remove(name);
        if slot.members.is_empty() {
            self.empty += 1;
            if self.empty > 64 && self.empty > 2 * (self.slots.len() - self.empty) {
                self.compact();
            }
        }
    }

    /// Appends a slot, filed by its class and its labels.
    fn push_slot(&mut self, slot: Slot) {
        let id = self.slots.len();
        self.classes.insert(slot.class.clone(), id);
        for (k, v) in &slot.class.labels {
            let values = self.by_label.entry(k.clone()).or_default();
            values.entry(v.clone()).or_default().push(id);
        }
        self.slots.push(slot);
    }

    /// Drops the empty slots: a new epoch.
    fn compact(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        self.classes.clear();
        self.class_of.clear();
        self.by_label.clear();
        self.empty = 0;
        self.epoch = next_epoch();
        for slot in slots.into_iter().filter(|s| !s.members.is_empty()) {
            let id = self.slots.len();
            for name in &slot.members {
                self.class_of.insert(name.clone(), id);
            }
            self.push_slot(slot);
        }
    }

    /// Whether every label key `selector` reads is tracked (its picks take the fast path).
    pub fn tracks(&self, selector: &ServerSelector) -> bool {
        selector_keys(selector).all(|k| self.keys.contains(k))
    }

    /// Starts tracking `keys`; when any is new, regroups `servers` (every server the
    /// index holds must be among them; others are ignored).
    pub fn track_keys<'k, 's>(
        &mut self,
        keys: impl IntoIterator<Item = &'k str>,
        servers: impl IntoIterator<Item = &'s CachedServer>,
    ) {
        let before = self.keys.len();
        self.keys.extend(keys.into_iter().map(str::to_string));
        if self.keys.len() == before {
            return;
        }
        self.classes.clear();
        self.class_of.clear();
        self.by_label.clear();
        self.slots.clear();
        self.empty = 0;
        self.epoch = next_epoch();
        for server in servers {
            self.upsert(server);
        }
    }

    /// How many free servers are indexed.
    pub fn len(&self) -> usize {
        self.class_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.class_of.is_empty()
    }

    /// How many classes the free servers fall into (the cost of one pick).
    pub fn class_count(&self) -> usize {
        self.slots.len() - self.empty
    }

    /// The classes with free members, with their ids, in the order of their slots: what
    /// placement computes from them (flow values, candidates sorted by name) does not
    /// depend on it.
    pub fn class_list(&self) -> impl Iterator<Item = (ClassId, &Class, &BTreeSet<String>)> {
        let slots = self.slots.iter().enumerate();
        slots
            .filter(|(_, s)| !s.members.is_empty())
            .map(|(id, s)| (id, &*s.class, &s.members))
    }

    /// The epoch the slots belong to, and how many there are: slots `0..count` of this
    /// epoch never change their class.
    pub fn slots(&self) -> (u64, usize) {
        (self.epoch, self.slots.len())
    }

    /// The class in slot `id` (with free members or not).
    pub fn class_at(&self, id: ClassId) -> &Class {
        &self.slots[id].class
    }

    /// The free members of slot `id` (none when its class has none).
    pub fn members_at(&self, id: ClassId) -> &BTreeSet<String> {
        &self.slots[id].members
    }

    /// The slots whose class carries `value` for `key` (with free members or not), in
    /// order: the only slots a selector pinning that value alone can fit.
    pub fn slots_with(&self, key: &str, value: &str) -> &[ClassId] {
        let slots = self.by_label.get(key).and_then(|values| values.get(value));
        slots.map_or(&[], Vec::as_slice)
    }

    /// The class of a free server (`None`: not in the index).
    pub fn class_of(&self, name: &str) -> Option<&Class> {
        self.class_id_of(name).map(|id| self.class_at(id))
    }

    /// The slot of a free server's class.
    pub fn class_id_of(&self, name: &str) -> Option<ClassId> {
        self.class_of.get(name).copied()
    }

    /// The best free server for `claim`: untainted before tolerated-tainted, then the lowest
    /// name, skipping any server for which `skip` is true (servers the controller already
    /// chose for another claim). Deterministic: the same index and claim give the same pick.
    /// `labels_of` gives a member's full labels, read only when the claim's selector names
    /// a key the index does not track.
    pub fn pick<'a>(
        &'a self,
        claim: &CachedClaim,
        skip: &dyn Fn(&str) -> bool,
        labels_of: &dyn Fn(&str) -> Option<&'a Labels>,
    ) -> Option<&'a str> {
        let selector = claim.spec.server_selector.as_ref();
        let tracked = selector.is_none_or(|s| self.tracks(s));
        let usable = |name: &str| {
            !skip(name)
                && (tracked
                    || selector
                        .is_none_or(|s| labels_of(name).is_some_and(|l| selector_matches(s, l))))
        };
        let mut best: Option<(bool, &str)> = None;
        for (_, class, members) in self.class_list() {
            if first_untolerated(&class.taints, &claim.spec.tolerations).is_some() {
                continue;
            }
            // On the slow path a class's projected labels may lack a key the selector
            // reads, so only its members' full labels can say.
            if tracked && selector.is_some_and(|s| !selector_matches(s, &class.labels)) {
                continue;
            }
            let tainted = !class.taints.is_empty();
            // Within a tier only the class's lowest usable name can win.
            if tainted && best.is_some_and(|(best_tainted, _)| !best_tainted) {
                continue;
            }
            let Some(name) = members.iter().find(|n| usable(n)) else {
                continue;
            };
            let candidate = (tainted, name.as_str());
            if best.is_none_or(|b| candidate < b) {
                best = Some(candidate);
            }
        }
        best.map(|(_, name)| name)
    }
}
