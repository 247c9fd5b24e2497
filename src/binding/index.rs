//! The free-server index: which servers a new claim could take, grouped so that one pick
//! does not scan every server.
//!
//! Servers are grouped by their label set and taint set, the only server attributes a
//! claim's selector and tolerations look at. A fleet has many machines but few distinct
//! shapes (rack, size, pool), so a pick checks each *group* once and then takes the
//! lowest name from a sorted set: O(groups + log n). Updates are O(log n) and come one
//! server at a time, straight from watch events.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::api::{Server, ServerClaim, Taint};

use super::eligibility::server_is_claimable;
use super::meta;
use super::selector::{first_untolerated, selector_matches};

/// Whether a server belongs in the index: claimable by some new claim and not reserved
/// or bound (no `serverClaimRef`).
pub fn is_free(server: &Server) -> bool {
    server.spec.server_claim_ref.is_none() && server_is_claimable(server).is_ok()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Shape {
    labels: BTreeMap<String, String>,
    /// Sorted and deduplicated, so two servers with the same taints share a group.
    taints: Vec<Taint>,
}

impl Shape {
    fn of(server: &Server) -> Self {
        let mut taints = server.spec.taints.clone();
        taints.sort();
        taints.dedup();
        Self {
            labels: meta::labels(server).clone(),
            taints,
        }
    }
}

/// Free servers grouped by shape; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct FreeServerIndex {
    groups: HashMap<Arc<Shape>, BTreeSet<String>>,
    shape_of: HashMap<String, Arc<Shape>>,
}

impl FreeServerIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the server's current state: indexed if free, dropped otherwise.
    pub fn upsert(&mut self, server: &Server) {
        let name = meta::name(server);
        if !is_free(server) {
            self.remove(name);
            return;
        }
        let shape = Shape::of(server);
        if self.shape_of.get(name).is_some_and(|s| **s == shape) {
            return;
        }
        self.remove(name);
        let shape = match self.groups.get_key_value(&shape) {
            Some((existing, _)) => existing.clone(),
            None => Arc::new(shape),
        };
        self.groups
            .entry(shape.clone())
            .or_default()
            .insert(name.to_string());
        self.shape_of.insert(name.to_string(), shape);
    }

    /// Forgets a server (deleted, or no longer free).
    pub fn remove(&mut self, name: &str) {
        let Some(shape) = self.shape_of.remove(name) else {
            return;
        };
        if let Some(members) = self.groups.get_mut(&shape) {
            members.remove(name);
            if members.is_empty() {
                self.groups.remove(&shape);
            }
        }
    }

    /// How many free servers are indexed.
    pub fn len(&self) -> usize {
        self.shape_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shape_of.is_empty()
    }

    /// How many distinct shapes the free servers have (the cost of one pick).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The best free server for `claim`: untainted before tolerated-tainted, then the lowest
    /// name, skipping any server for which `skip` is true (servers the controller already
    /// chose for another claim). Deterministic: the same index and claim give the same pick.
    pub fn pick(&self, claim: &ServerClaim, skip: &dyn Fn(&str) -> bool) -> Option<&str> {
        let mut best: Option<(bool, &str)> = None;
        for (shape, members) in &self.groups {
            if first_untolerated(&shape.taints, &claim.spec.tolerations).is_some() {
                continue;
            }
            if let Some(selector) = &claim.spec.server_selector
                && !selector_matches(selector, &shape.labels)
            {
                continue;
            }
            let tainted = !shape.taints.is_empty();
            // Within a tier only the group's lowest usable name can win.
            if tainted && best.is_some_and(|(best_tainted, _)| !best_tainted) {
                continue;
            }
            let Some(name) = members.iter().find(|n| !skip(n)) else {
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
