//! The picks in flight counted where placement reads them: per class of free servers
//! (servers assumed chosen, still free in the index) and per waiting shape (claims
//! assumed placed, still waiting in the claim cache), kept up to date one server and one
//! claim at a time by the binder as assumptions, servers and claims change.
//!
//! A pick must not count a server already chosen, nor a claim already placed. Walking
//! every assumption on every pick to find them cost O(picks in flight) per pick: while
//! the server controller writes the first status of a fresh fleet, thousands, and most
//! of the operator's time at 20k (docs/performance.md, "Picks in flight"). These counts
//! make that part of a pick O(classes + shapes). They are a cache of the assumptions,
//! the free-server index and the waiting claims: [`InFlight::recount`] rebuilds them
//! from those alone, and placement checks them against a full walk in debug builds
//! (every test).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::binding::claim_side::assumed::AssumedChoices;
use crate::binding::meta::ClaimKey;
use crate::binding::placement::index::{ClassId, FreeServerIndex};
use crate::binding::placement::shape::{ClaimShape, FastMap, address};

/// The shape a claim waits under, as the waiting claims share it (`None`: not waiting).
pub type ShapeOf<'a> = &'a dyn Fn(&ClaimKey) -> Option<&'a Arc<ClaimShape>>;

/// See the module docs.
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    /// The index epoch the class slots belong to.
    epoch: u64,
    /// Per assumed server: its claim and what it was counted in.
    counted: HashMap<String, Counted>,
    /// Per claim counted, the server of its assumption.
    server_of: HashMap<ClaimKey, String>,
    by_class: FastMap<ClassId, usize>,
    /// By the address of the waiting claims' shared shape (held in [`Counted`], so the
    /// address names one shape while it is counted).
    by_shape: FastMap<usize, usize>,
    /// Per class, its free members that no pick holds, by name: a pick's lowest server
    /// not passed over is among the first of these, not after every held one.
    open: FastMap<ClassId, BTreeSet<String>>,
    open_in: HashMap<String, ClassId>,
}

#[derive(Clone, Debug)]
struct Counted {
    claim: ClaimKey,
    class: Option<ClassId>,
    shape: Option<Arc<ClaimShape>>,
}

impl InFlight {
    /// Counts every assumption afresh.
    pub fn recount(
        &mut self,
        assumed: &AssumedChoices,
        index: &FreeServerIndex,
        waiting: ShapeOf<'_>,
    ) {
        *self = Self {
            epoch: index.slots().0,
            ..Self::default()
        };
        for (server, _) in assumed.iter() {
            self.count(server, assumed, index, waiting);
        }
        for (id, _, members) in index.class_list() {
            let open = members.iter().filter(|m| !assumed.is_assumed(m));
            for name in open {
                self.open_in.insert(name.clone(), id);
                self.open.entry(id).or_default().insert(name.clone());
            }
        }
    }

    /// Counts again what concerns these servers and claims (their assumptions may have
    /// started or ended, their place in the index or the waiting claims changed); counts
    /// everything afresh when the index started a new epoch.
    pub fn sync<'a>(
        &mut self,
        servers: impl IntoIterator<Item = &'a str>,
        claims: impl IntoIterator<Item = &'a ClaimKey>,
        assumed: &AssumedChoices,
        index: &FreeServerIndex,
        waiting: ShapeOf<'_>,
    ) {
        if self.epoch != index.slots().0 {
            self.recount(assumed, index, waiting);
            return;
        }
        let mut touched: Vec<String> = servers.into_iter().map(str::to_string).collect();
        for claim in claims {
            touched.extend(self.server_of.get(claim).cloned());
            touched.extend(assumed.server_for(claim).map(str::to_string));
        }
        for server in touched {
            self.uncount(&server);
            self.count(&server, assumed, index, waiting);
            self.reopen(&server, assumed, index);
        }
    }

    /// Files `server` under its class's open members if it is free and no pick holds it.
    fn reopen(&mut self, server: &str, assumed: &AssumedChoices, index: &FreeServerIndex) {
        if let Some(id) = self.open_in.remove(server)
            && let Some(open) = self.open.get_mut(&id)
        {
            open.remove(server);
            if open.is_empty() {
                self.open.remove(&id);
            }
        }
        if let Some(id) = index.class_id_of(server)
            && !assumed.is_assumed(server)
        {
            self.open_in.insert(server.to_string(), id);
            self.open.entry(id).or_default().insert(server.to_string());
        }
    }

    fn count(
        &mut self,
        server: &str,
        assumed: &AssumedChoices,
        index: &FreeServerIndex,
        waiting: ShapeOf<'_>,
    ) {
        let Some(claim) = assumed.claim_on(server) else {
            return;
        };
        let class = index.class_id_of(server);
        let shape = waiting(claim).cloned();
        if let Some(id) = class {
            *self.by_class.entry(id).or_default() += 1;
        }
        if let Some(shape) = &shape {
            *self.by_shape.entry(address(shape)).or_default() += 1;
        }
        self.server_of.insert(claim.clone(), server.to_string());
        let counted = Counted {
            claim: claim.clone(),
            class,
            shape,
        };
        self.counted.insert(server.to_string(), counted);
    }

    fn uncount(&mut self, server: &str) {
        let Some(counted) = self.counted.remove(server) else {
            return;
        };
        if self
            .server_of
            .get(&counted.claim)
            .is_some_and(|s| s == server)
        {
            self.server_of.remove(&counted.claim);
        }
        if let Some(id) = counted.class {
            decrement(&mut self.by_class, id);
        }
        if let Some(shape) = &counted.shape {
            decrement(&mut self.by_shape, address(shape));
        }
    }

    /// Whether these counts describe `index` (its current epoch).
    pub fn describes(&self, index: &FreeServerIndex) -> bool {
        self.epoch == index.slots().0
    }

    /// Assumed servers counted in class `id`.
    pub fn taken_in(&self, id: ClassId) -> usize {
        self.by_class.get(&id).copied().unwrap_or(0)
    }

    /// Assumed claims counted as waiting in `shape`.
    pub fn placed_in(&self, shape: &Arc<ClaimShape>) -> usize {
        self.by_shape.get(&address(shape)).copied().unwrap_or(0)
    }

    /// The free members of class `id` that no pick holds, lowest name first.
    pub fn open_in(&self, id: ClassId) -> impl Iterator<Item = &str> {
        self.open.get(&id).into_iter().flatten().map(String::as_str)
    }

    /// What the assumption on `server` was counted in: its class, and whether its claim
    /// was waiting in `shape`.
    pub fn counted_on(&self, server: &str) -> Option<(Option<ClassId>, Option<usize>)> {
        let c = self.counted.get(server)?;
        Some((c.class, c.shape.as_ref().map(address)))
    }
}

fn decrement<K: std::hash::Hash + Eq>(counts: &mut FastMap<K, usize>, key: K) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}
