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

use crate::api::{Server, ServerClaim, ServerSelector, Taint};

use super::eligibility::not_free;
use super::meta;
use super::selector::{first_untolerated, selector_matches};

/// Whether a server belongs in the index: claimable by some new claim and not reserved
/// or bound (no `serverClaimRef`), by [`not_free`]'s rule.
pub fn is_free(server: &Server) -> bool {
    not_free(server).next().is_none()
}

/// The label keys a selector reads.
pub fn selector_keys(selector: &ServerSelector) -> impl Iterator<Item = &str> {
    let labels = selector.match_labels.keys().map(String::as_str);
    labels.chain(selector.match_expressions.iter().map(|r| r.key.as_str()))
}

/// What every claim with tracked selector keys sees of a server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Class {
    /// The server's labels restricted to the tracked keys.
    pub(super) labels: BTreeMap<String, String>,
    /// Sorted and deduplicated, so two servers with the same taints share a class.
    pub(super) taints: Vec<Taint>,
}

impl Class {
    fn of(server: &Server, keys: &BTreeSet<String>) -> Self {
        let mut taints = server.spec.taints.clone();
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
#[derive(Clone, Debug, Default)]
pub struct FreeServerIndex {
    keys: BTreeSet<String>,
    classes: HashMap<Arc<Class>, BTreeSet<String>>,
    class_of: HashMap<String, Arc<Class>>,
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
    pub fn upsert(&mut self, server: &Server) {
        let name = meta::name(server);
        if !is_free(server) {
            self.remove(name);
            return;
        }
        let class = Class::of(server, &self.keys);
        if self.class_of.get(name).is_some_and(|c| **c == class) {
            return;
        }
        self.remove(name);
        let class = match self.classes.get_key_value(&class) {
            Some((existing, _)) => existing.clone(),
            None => Arc::new(class),
        };
        self.classes
            .entry(class.clone())
            .or_default()
            .insert(name.to_string());
        self.class_of.insert(name.to_string(), class);
    }

    /// Forgets a server (deleted, or no longer free).
    pub fn remove(&mut self, name: &str) {
        let Some(class) = self.class_of.remove(name) else {
            return;
        };
        if let Some(members) = self.classes.get_mut(&class) {
            members.remove(name);
            if members.is_empty() {
                self.classes.remove(&class);
            }
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
        servers: impl IntoIterator<Item = &'s Server>,
    ) {
        let before = self.keys.len();
        self.keys.extend(keys.into_iter().map(str::to_string));
        if self.keys.len() == before {
            return;
        }
        self.classes.clear();
        self.class_of.clear();
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
        self.classes.len()
    }

    /// The classes with their members, in no particular order: what placement computes
    /// from them (flow values, candidates sorted by name) does not depend on it.
    pub(super) fn class_list(&self) -> impl Iterator<Item = (&Class, &BTreeSet<String>)> {
        self.classes.iter().map(|(c, m)| (&**c, m))
    }

    /// The class of a free server (`None`: not in the index).
    pub(super) fn class_of(&self, name: &str) -> Option<&Class> {
        self.class_of.get(name).map(|c| &**c)
    }

    /// The best free server for `claim`: untainted before tolerated-tainted, then the lowest
    /// name, skipping any server for which `skip` is true (servers the controller already
    /// chose for another claim). Deterministic: the same index and claim give the same pick.
    /// `labels_of` gives a member's full labels, read only when the claim's selector names
    /// a key the index does not track.
    pub fn pick<'a>(
        &'a self,
        claim: &ServerClaim,
        skip: &dyn Fn(&str) -> bool,
        labels_of: &dyn Fn(&str) -> Option<&'a BTreeMap<String, String>>,
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
        for (class, members) in &self.classes {
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
