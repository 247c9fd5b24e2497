//! The picker's component of the flow network, found by a breadth-first search outward
//! from its node: a pick costs O(its component and its fits), not O(every waiting shape
//! and every class of free servers).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::binding::meta::ClaimKey;
use crate::binding::placement::index::{ClassId, FreeServerIndex};
use crate::binding::placement::shape::{ClaimShape, FastMap, FastSet, address};

use super::fit_rows::{NetworkSize, Rows};
use super::nodes::{Asks, FreeClass, Members, Queue, Shape};
use super::spoken_for::SpokenFor;
use super::waiter::Waiter;
use super::waiting_claims::WaitingClaims;

/// Builds the component of the picker's node outward from it, a breadth-first search
/// that lists only what it reaches: from a shape, the classes its fit row holds (and the
/// servers claims name in them); from a class, the waiting shapes whose rows hold it
/// (the rows read backwards, [`FitRows`]), the picker's rivals, and the claims naming it
/// if it is a named server. So a pick costs O(its component and its fits), not O(every
/// waiting shape and every class).
pub(super) struct ComponentSearch<'i, 'w> {
    index: &'i FreeServerIndex,
    waiting: &'w WaitingClaims,
    spoken: &'w SpokenFor<'w>,
    /// Per waiting shape, its claims placed already or the picker (not counted in
    /// `spoken.counts`).
    not_waiting: FastMap<usize, i64>,
    /// Per slot, its servers taken (not counted in `spoken.counts`) and those claims name.
    taken: FastMap<ClassId, i64>,
    named: FastMap<ClassId, Vec<&'i str>>,
    shapes: Vec<Shape<'w>>,
    classes: Vec<FreeClass<'i>>,
    edges: Vec<(usize, usize)>,
    /// The claim-side nodes in other than waiting shapes, and the server-side nodes met
    /// (`None`: no supply): the classes by slot, the named servers by name.
    shape_seen: FastSet<ClaimNode<'w>>,
    /// By slot (a slot is an index into the free-server index: a pick meets thousands,
    /// and a vector of them costs less than as many hash lookups).
    class_seen: Vec<SlotSeen>,
    /// By server name (names of free servers, which admins choose, not tenants: hashed
    /// by foldhash, as `shape_seen`).
    single_seen: FastMap<&'i str, Option<usize>>,
    /// The slots whose fitting shapes were looked for, by slot.
    slot_met: Vec<bool>,
    /// The shapes settled, by their rows' numbers: in (the picker's included), or met
    /// with all their claims placed or no longer waiting (no node).
    settled: Vec<bool>,
    /// The slots of the node whose fits are being met ([`Self::fits`]), kept from node
    /// to node so that a pick does not allocate a list per node.
    slots: Vec<ClassId>,
}

/// Whether a slot's server-side node was met, and as which node (`None`: a class without
/// supply, no node).
#[derive(Clone, Copy)]
pub(super) enum SlotSeen {
    Not,
    As(Option<usize>),
}

impl SlotSeen {
    fn node(self) -> Option<Option<usize>> {
        match self {
            SlotSeen::Not => None,
            SlotSeen::As(node) => Some(node),
        }
    }
}

/// A claim-side node other than a waiting shape's, by what it is.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ClaimNode<'w> {
    /// A pick in flight of the server the picker names, by its place in `spoken.rivals`.
    Rival(usize),
    /// The claims naming a free server.
    Named(&'w str),
}

impl<'i, 'w> ComponentSearch<'i, 'w> {
    /// O(claims placed + servers taken + servers named).
    pub(super) fn new(
        me: &ClaimKey,
        index: &'i FreeServerIndex,
        waiting: &'w WaitingClaims,
        spoken: &'w SpokenFor<'w>,
    ) -> Self {
        let mut not_waiting: FastMap<usize, i64> = FastMap::default();
        for key in spoken.placed.iter().copied().chain(std::iter::once(me)) {
            if let Some((shape, _)) = waiting.shape_of.get(key) {
                *not_waiting.entry(address(shape)).or_default() += 1;
            }
        }
        let mut taken: FastMap<ClassId, i64> = FastMap::default();
        for id in spoken.taken.iter().filter_map(|n| index.class_id_of(n)) {
            *taken.entry(id).or_default() += 1;
        }
        let mut named: FastMap<ClassId, Vec<&'i str>> = FastMap::default();
        for name in spoken.named.keys() {
            if let Some(id) = index.class_id_of(name)
                && let Some(member) = index.members_at(id).get(*name)
            {
                named.entry(id).or_default().push(member);
            }
        }
        ComponentSearch {
            index,
            waiting,
            spoken,
            not_waiting,
            taken,
            named,
            shapes: Vec::new(),
            classes: Vec::new(),
            edges: Vec::new(),
            shape_seen: FastSet::default(),
            class_seen: vec![SlotSeen::Not; index.slots().1],
            single_seen: FastMap::default(),
            slot_met: vec![false; index.slots().1],
            settled: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// The component: its claim-side nodes (the picker's first), its server-side nodes,
    /// and every fit of its claim-side nodes.
    pub(super) fn build(
        mut self,
        mine: Asks<'w>,
    ) -> (Vec<Shape<'w>>, Vec<FreeClass<'i>>, Vec<(usize, usize)>) {
        let waiting = self.waiting;
        let mut rows = waiting.rows.current(self.index, &waiting.by_shape);
        let last = rows.last_network;
        self.shapes.reserve(last.shapes);
        self.classes.reserve(last.classes);
        self.edges.reserve(last.edges);
        self.settled = vec![false; rows.addresses.len()];
        let picker = self.picker(mine, &rows);
        self.shapes.push(picker);
        let mut next = 0;
        while next < self.shapes.len() {
            self.fits(next, &mut rows);
            next += 1;
        }
        rows.last_network = NetworkSize {
            shapes: self.shapes.len(),
            classes: self.classes.len(),
            edges: self.edges.len(),
        };
        (self.shapes, self.classes, self.edges)
    }

    /// The picker's node: its shape's waiting claims plus it, or the claims naming its
    /// server plus it, or it alone.
    fn picker(&mut self, mine: Asks<'w>, rows: &Rows) -> Shape<'w> {
        let alone = (mine, 1, Queue::Picker, None);
        match mine {
            Asks::Shape(m) => {
                let Some((shared, members)) = self.waiting.waiting_as(m) else {
                    return alone;
                };
                // Every waiting shape has its row ([`FitRows::current`]).
                if let Some((.., number)) = rows.rows.get(&address(shared)) {
                    self.settled[*number as usize] = true;
                }
                let (asks, demand, queue, shared) = self.shape_node(shared, members);
                (asks, demand + 1, queue, shared)
            }
            Asks::Server(name) => {
                let Some((server, namers)) = self.spoken.named.get_key_value(name) else {
                    return alone;
                };
                self.shape_seen.insert(ClaimNode::Named(server));
                let demand = namers.len() as i64 + 1;
                (Asks::Server(server), demand, Queue::Named(namers), None)
            }
        }
    }

    /// A waiting shape's node: its claims not placed yet.
    fn shape_node(&self, shared: &'w Arc<ClaimShape>, members: &'w BTreeSet<Waiter>) -> Shape<'w> {
        let gone = self.not_waiting.get(&address(shared)).copied();
        let counted = self
            .spoken
            .counts
            .as_ref()
            .map_or(0, |c| c.placed_in(shared));
        let demand = members.len() as i64 - gone.unwrap_or(0) - counted as i64;
        (
            Asks::Shape(shared),
            demand,
            Queue::Shape(members),
            Some(shared),
        )
    }

    /// Adds the edges of claim-side node `i` to the server-side nodes it fits, met now
    /// if new: for a shape, the classes of the slots it fits and the named servers in
    /// them; for the claims naming a server, that server alone.
    fn fits(&mut self, i: usize, rows: &mut Rows) {
        // Meeting a node can learn other shapes' rows: the slots are copied out first.
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        match self.shapes[i] {
            (Asks::Server(name), ..) => {
                let id = self.index.class_id_of(name);
                let named = id.filter(|_| self.spoken.named.contains_key(name));
                let single = named.and_then(|id| self.meet(id, Some(name), rows));
                self.edges.extend(single.map(|j| (i, j)));
            }
            (Asks::Shape(_), .., Some(shared)) => {
                slots.extend_from_slice(rows.row(shared, self.index));
            }
            (Asks::Shape(shape), .., None) => {
                let all = 0..self.index.slots().1;
                slots.extend(all.filter(|&id| shape.fits(self.index.class_at(id))));
            }
        }
        // Meeting reads no named servers of `self.named`: lent out, not copied per slot.
        let named = std::mem::take(&mut self.named);
        for &id in &slots {
            let class = self.meet(id, None, rows);
            self.edges.extend(class.map(|j| (i, j)));
            for name in named.get(&id).into_iter().flatten() {
                let single = self.meet(id, Some(name), rows);
                self.edges.extend(single.map(|j| (i, j)));
            }
        }
        self.named = named;
        self.slots = slots;
    }

    /// The server-side node of slot `id` (`one`: of the named server `one` in it), met
    /// now if new; `None` when it has nothing to give (a class without supply).
    ///
    /// A pick meets each slot many times (once per fitting shape), and nearly every
    /// meeting finds the slot's class met already: that answer is read here, inlined
    /// into the caller, and only a first meeting pays for the call to [`Self::meet_new`].
    #[inline(always)]
    fn meet(&mut self, id: ClassId, one: Option<&str>, rows: &Rows) -> Option<usize> {
        if one.is_none()
            && let Some(met) = self.class_seen[id].node()
        {
            return met;
        }
        self.meet_new(id, one, rows)
    }

    #[inline(never)]
    fn meet_new(&mut self, id: ClassId, one: Option<&str>, rows: &Rows) -> Option<usize> {
        let members = self.index.members_at(id);
        let one = match one {
            Some(name) => Some(members.get(name)?.as_str()),
            None => None,
        };
        let met = match one {
            Some(name) => self.single_seen.get(name).copied(),
            None => self.class_seen[id].node(),
        };
        if let Some(met) = met {
            return met;
        }
        let class = self.index.class_at(id);
        let node = match one {
            Some(name) => Some((class, Members::One(name), 1, id)),
            None => {
                let counted = self.spoken.counts.as_ref().map_or(0, |c| c.taken_in(id));
                let taken = self.taken.get(&id).copied().unwrap_or(0) + counted as i64;
                let supply = members.len() as i64 - taken;
                (supply > 0).then_some((class, Members::Class(members), supply, id))
            }
        };
        let j = node.map(|node| {
            self.classes.push(node);
            self.classes.len() - 1
        });
        match one {
            Some(name) => {
                self.single_seen.insert(name, j);
            }
            None => self.class_seen[id] = SlotSeen::As(j),
        }
        if j.is_some() {
            self.fitted_by(id, one, rows);
        }
        j
    }

    /// Brings in the claim-side nodes that fit a server-side node of slot `id` just met:
    /// the claims naming `one`, and (once per slot) the waiting shapes and the rivals
    /// that fit the slot.
    fn fitted_by(&mut self, id: ClassId, one: Option<&'i str>, rows: &Rows) {
        if let Some((server, namers)) = one.and_then(|n| self.spoken.named.get_key_value(n))
            && self.shape_seen.insert(ClaimNode::Named(server))
            && !namers.is_empty()
        {
            let demand = namers.len() as i64;
            let node = (Asks::Server(server), demand, Queue::Named(namers), None);
            self.shapes.push(node);
        }
        if std::mem::replace(&mut self.slot_met[id], true) {
            return;
        }
        for &number in &rows.cols[id] {
            self.take_in(number, rows);
        }
        let class = self.index.class_at(id);
        let spoken = self.spoken;
        for (r, (shape, waiter)) in spoken.rivals.iter().enumerate() {
            if shape.fits(class) && self.shape_seen.insert(ClaimNode::Rival(r)) {
                let queue = Queue::Named(std::slice::from_ref(waiter));
                self.shapes.push((Asks::Shape(shape), 1, queue, None));
            }
        }
    }

    /// Brings in the shape of row `number` (one fitting a slot just met) if it waits and
    /// has claims not placed yet, unless it is settled already.
    #[inline(always)]
    fn take_in(&mut self, number: u32, rows: &Rows) {
        let settled = &mut self.settled[number as usize];
        if std::mem::replace(settled, true) {
            return;
        }
        if let Some((shared, members)) = self.waiting.waiting_at(rows.addresses[number as usize]) {
            let node = self.shape_node(shared, members);
            if node.1 > 0 {
                self.shapes.push(node);
            }
        }
    }
}
