//! Placement: which free server a pending claim takes, and when it waits its turn.
//!
//! Lowest-name-first strands claims: a claim that takes any server may take the last one a
//! selective claim could use. So a pick keeps a *maximum matching* of the waiting claims to
//! the free servers possible: it takes a server that some maximum matching gives it, and
//! a claim no maximum matching can serve without leaving out a claim ahead of it in the
//! fair order waits (`WaitForTurn`).
//!
//! The matching is computed over classes, not objects. Claims with the same selector and
//! tolerations (a [`ClaimShape`]) are interchangeable, and so are free servers of one
//! index class (same taints, same values for every label key a selector reads; see
//! [`FreeServerIndex`]). The flow network is source → shape (capacity: its waiting
//! claims) → class (an edge where the shape fits the class) → sink (capacity: the class's
//! free servers), restricted to the connected component of the picker's shape. Its size is
//! that of the fleet's shapes, not of the fleet. A free server that users' claims name is
//! a class of its own, and those claims a node asking for it alone: a name says which
//! server, not when ([`place_named`]). See docs/binding.md, "Picking a server".

mod contest;
mod fair_order;
mod fit_rows;
mod flow;
mod inputs;
mod kept_flow;
mod nodes;
mod outcome;
mod spoken_for;
mod waiter;
mod waiting_claims;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::api::{CachedClaim, CachedServer};

use super::index::{Class, ClassId, FreeServerIndex};
use super::meta::{self, ClaimKey};
pub use super::shape::ClaimShape;
use super::shape::{FastMap, FastSet, address};

use fair_order::FairOrder;
#[cfg(debug_assertions)]
use fit_rows::AskedShape;
use fit_rows::{NetworkSize, Rows};
use flow::MaxFlow;
pub use inputs::PickInputs;
use kept_flow::{FullFlow, KeptFlow, NodeKeys};
use nodes::{Asks, FreeClass, Members, Queue, Shape};
pub use outcome::{AHEAD_NAMED, Ahead, Placement, WAITING_FOR_TURN};
use spoken_for::SpokenFor;
pub use waiter::{Waiter, is_waiting};
pub use waiting_claims::WaitingClaims;

/// Where `claim` goes; see the module docs. `server_of` reads a free server's object
/// (for whether the claim naming it could take it); `adopting` are the waiting claims
/// that a server reserved for them by name fits: they adopt it, not a free one.
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
fn serve<'a>(
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
    let full = FullFlow::of(&net, &demand, &supply, inputs.waiting);
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

impl FullFlow {
    /// The answers of the network's max flow: the last pick's flow refitted to this
    /// network's demands and supplies when the two networks have the same nodes (then
    /// an augmenting path or two, not a flow built afresh), else a new one; kept for the
    /// next pick. A debug build checks a refitted flow against a new one.
    fn of(net: &Network<'_, '_>, demand: &[i64], supply: &[i64], waiting: &WaitingClaims) -> Self {
        let mut rows = waiting.rows.0.lock();
        let Some(keys) = net.keys(&rows) else {
            return Self::new(net, demand, supply);
        };
        let refitted = rows
            .kept
            .take()
            .filter(|kept| kept.has_nodes(&keys))
            .and_then(|kept| kept.refitted(&keys, demand, supply));
        let kept = refitted.unwrap_or_else(|| {
            let flow = MaxFlow::new(demand, supply, &net.edges);
            KeptFlow::numbered(flow, &keys)
        });
        let full = kept.answers(&keys);
        #[cfg(debug_assertions)]
        {
            let fresh = Self::new(net, demand, supply);
            assert_eq!(
                (full.value, &full.open_to_mine),
                (fresh.value, &fresh.open_to_mine),
                "a kept flow answers as a new one"
            );
        }
        rows.kept = Some(kept);
        full
    }

    /// The answers of a max flow built afresh for the network (numbered as it is: the
    /// picker's node first).
    fn new(net: &Network<'_, '_>, demand: &[i64], supply: &[i64]) -> Self {
        let flow = MaxFlow::new(demand, supply, &net.edges);
        FullFlow {
            value: flow.value(),
            open_to_mine: flow.classes_open_to(0),
        }
    }
}

/// The flow network around the picker's node: node 0 on the claim side is the picker's
/// shape (or the server it names); every node reachable from it through fits is in,
/// nothing else. `'i`: the index's classes and names; `'w`: the waiting claims and the
/// picker.
struct Network<'i, 'w> {
    shapes: Vec<Shape<'w>>,
    classes: Vec<FreeClass<'i>>,
    edges: Vec<(usize, usize)>,
    spoken: &'w SpokenFor<'w>,
    me: &'w ClaimKey,
}

/// A network as text ([`Network::described`]).
#[cfg(debug_assertions)]
type Described = (String, Vec<String>, Vec<String>, Vec<(String, String)>);

impl<'i, 'w> Network<'i, 'w> {
    /// The component of the picker's node, built outward from it ([`Outward`]); a debug
    /// build checks it against the component of the network of every waiting shape and
    /// every class of free servers.
    fn around(
        mine: Asks<'w>,
        me: &'w ClaimKey,
        index: &'i FreeServerIndex,
        waiting: &'w WaitingClaims,
        spoken: &'w SpokenFor<'w>,
    ) -> Self {
        let (shapes, classes, edges) = Outward::new(me, index, waiting, spoken).build(mine);
        let network = Network {
            shapes,
            classes,
            edges,
            spoken,
            me,
        };
        #[cfg(debug_assertions)]
        {
            let listed = Self::listed(mine, me, index, waiting, spoken);
            assert_eq!(
                network.described(),
                listed.described(),
                "the network built outward and from every shape and class"
            );
        }
        network
    }

    /// The component of the picker's node in the network of every waiting shape and
    /// every class of free servers: O(S + K) per pick, what [`Self::around`] avoids.
    #[cfg(debug_assertions)]
    fn listed(
        mine: Asks<'w>,
        me: &'w ClaimKey,
        index: &'i FreeServerIndex,
        waiting: &'w WaitingClaims,
        spoken: &'w SpokenFor<'w>,
    ) -> Self {
        let shapes = waiting_shapes(mine, me, waiting, spoken);
        let classes = free_classes(index, spoken);
        let fits = fits_of(&shapes, &classes, index, waiting);
        let (shape_in, class_in, edges) = component(&fits, classes.len());
        let shape_at: HashMap<usize, usize> =
            shape_in.iter().enumerate().map(|(n, &i)| (i, n)).collect();
        let class_at: HashMap<usize, usize> =
            class_in.iter().enumerate().map(|(n, &j)| (j, n)).collect();
        Network {
            shapes: shape_in.iter().map(|&i| shapes[i]).collect(),
            classes: class_in.iter().map(|&j| classes[j]).collect(),
            edges: edges
                .iter()
                .map(|(i, j)| (shape_at[i], class_at[j]))
                .collect(),
            spoken,
            me,
        }
    }

    /// The network as text, whatever the order of its nodes: the picker's node, the
    /// other nodes, the edges.
    #[cfg(debug_assertions)]
    fn described(&self) -> Described {
        let shapes: Vec<String> = self
            .shapes
            .iter()
            .map(|s| {
                let queue: Vec<&ClaimKey> = s.2.iter().map(|w| &w.key).collect();
                format!("{:?} {} {:?} {}", s.0, s.1, queue, s.3.is_some())
            })
            .collect();
        let classes: Vec<String> = self
            .classes
            .iter()
            .map(|c| match c.1 {
                Members::One(name) => format!("{} {} {}", c.3, name, c.2),
                Members::Class(_) => format!("{} * {}", c.3, c.2),
            })
            .collect();
        let edges = self.edges.iter();
        let mut edges: Vec<(String, String)> = edges
            .map(|&(i, j)| (shapes[i].clone(), classes[j].clone()))
            .collect();
        edges.sort();
        let mut others = shapes[1..].to_vec();
        others.sort();
        let mut classes = classes;
        classes.sort();
        (shapes[0].clone(), others, classes, edges)
    }

    fn demand(&self) -> Vec<i64> {
        self.shapes.iter().map(|s| s.1).collect()
    }

    fn supply(&self) -> Vec<i64> {
        self.classes.iter().map(|c| c.2).collect()
    }

    /// The network's nodes by what names them from pick to pick: each claim-side node's
    /// row number (a waiting shape's), each server-side node's slot (a class of free
    /// servers). `None` when a node has no such name (the picker alone, a named server,
    /// a rival): such a network's flow is not kept.
    fn keys(&self, rows: &Rows) -> Option<NodeKeys> {
        let number = |s: &Shape<'_>| match s {
            (Asks::Shape(_), _, _, Some(shared)) => rows.rows.get(&address(shared)).map(|r| r.2),
            _ => None,
        };
        let shapes: Option<Vec<u32>> = self.shapes.iter().map(number).collect();
        let slot = |c: &FreeClass<'_>| matches!(c.1, Members::Class(_)).then_some(c.3);
        let classes: Option<Vec<ClassId>> = self.classes.iter().map(slot).collect();
        Some((shapes?, classes?))
    }

    /// The classes the picker's node fits, each with its lowest server the pick does not
    /// pass over: untainted first, then those the fewest other shapes of claims fit (the
    /// claims still to come are likely to need the others), then by that name. A claim
    /// naming a server has that server only, whoever else's pick passes it over.
    fn usable_classes_of_mine(
        &self,
        mine: Asks<'_>,
        inputs: &PickInputs<'_>,
    ) -> Vec<(usize, &'i str)> {
        let mine_known = match mine {
            Asks::Shape(shape) => inputs.waiting.knows(shape),
            Asks::Server(_) => false,
        };
        let mut usable: Vec<(bool, usize, &'i str, usize)> = self
            .edges
            .iter()
            .filter(|(i, _)| *i == 0)
            .filter_map(|&(_, j)| {
                let (class, members, _, id) = self.classes[j];
                let (name, contest) = match mine {
                    Asks::Shape(_) => (
                        self.first_free(members, id, inputs)?,
                        inputs.waiting.contest(mine_known, class),
                    ),
                    Asks::Server(_) => (members.first_not(&|_| false)?, 0),
                };
                Some((!class.taints.is_empty(), contest, name, j))
            })
            .collect();
        usable.sort();
        usable.into_iter().map(|(.., name, j)| (j, name)).collect()
    }

    /// The lowest-named member the pick does not pass over. With the picks in flight
    /// counted, among the members no pick holds (and the picker's own pick): the skip
    /// passes over every server another claim's pick holds, so those need no look.
    fn first_free(
        &self,
        members: Members<'i>,
        id: ClassId,
        inputs: &PickInputs<'_>,
    ) -> Option<&'i str> {
        let (Members::Class(set), Some(counts)) = (members, &self.spoken.counts) else {
            return members.first_not(inputs.skip);
        };
        let own = counts.assumed.server_for(counts.me);
        let own = own.filter(|s| set.contains(*s)).into_iter();
        let mut open = counts.in_flight.open_in(id).peekable();
        let mut own = own.peekable();
        // The open members and the picker's own pick, merged by name.
        let first = std::iter::from_fn(|| match (open.peek(), own.peek()) {
            (Some(a), Some(b)) if b < a => own.next(),
            (Some(_), _) => open.next(),
            (None, _) => own.next(),
        })
        .find(|n| !(inputs.skip)(n));
        let found = first.and_then(|n| set.get(n)).map(String::as_str);
        debug_assert_eq!(
            found,
            members.first_not(inputs.skip),
            "open members and a walk"
        );
        found
    }

    /// Per node, the waiting claims ahead of `me` in the fair order ([`FairOrder`]); and
    /// those claims, first in the order first.
    fn demand_ahead_of(
        &self,
        me: &Waiter,
        waiting: &'w WaitingClaims,
    ) -> (Vec<i64>, Vec<&'w ClaimKey>) {
        let queued: Vec<(usize, &Waiter)> = self
            .shapes
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.2.iter().map(move |w| (i, w)))
            .filter(|(_, w)| &w.key != self.me && !self.spoken.is_placed(&w.key))
            .collect();
        let everyone = queued.iter().map(|(_, w)| *w).chain(std::iter::once(me));
        // Picks in flight that the cache does not show taking a server yet serve their
        // namespace now.
        let mut in_flight: HashMap<&str, usize> = HashMap::new();
        let taking = self.spoken.taking();
        for key in taking.into_iter().filter(|k| !waiting.taking.contains(*k)) {
            *in_flight.entry(key.namespace.as_str()).or_default() += 1;
        }
        let order = FairOrder::of_taking(everyone, waiting, &in_flight);
        let mine = order.key(me);
        let mut ahead = vec![0; self.shapes.len()];
        let mut keys = Vec::new();
        for (i, w) in &queued {
            if order.key(w) < mine {
                ahead[*i] += 1;
                keys.push((order.key(w), &w.key));
            }
        }
        keys.sort();
        (ahead, keys.into_iter().map(|(_, k)| k).collect())
    }
}

/// Builds the component of the picker's node outward from it, a breadth-first search
/// that lists only what it reaches: from a shape, the classes its fit row holds (and the
/// servers claims name in them); from a class, the waiting shapes whose rows hold it
/// (the rows read backwards, [`FitRows`]), the picker's rivals, and the claims naming it
/// if it is a named server. So a pick costs O(its component and its fits), not O(every
/// waiting shape and every class).
struct Outward<'i, 'w> {
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
    class_seen: Vec<Met>,
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
enum Met {
    Not,
    As(Option<usize>),
}

impl Met {
    fn node(self) -> Option<Option<usize>> {
        match self {
            Met::Not => None,
            Met::As(node) => Some(node),
        }
    }
}

/// A claim-side node other than a waiting shape's, by what it is.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum ClaimNode<'w> {
    /// A pick in flight of the server the picker names, by its place in `spoken.rivals`.
    Rival(usize),
    /// The claims naming a free server.
    Named(&'w str),
}

impl<'i, 'w> Outward<'i, 'w> {
    /// O(claims placed + servers taken + servers named).
    fn new(
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
        Outward {
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
            class_seen: vec![Met::Not; index.slots().1],
            single_seen: FastMap::default(),
            slot_met: vec![false; index.slots().1],
            settled: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// The component: its claim-side nodes (the picker's first), its server-side nodes,
    /// and every fit of its claim-side nodes.
    fn build(
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
            None => self.class_seen[id] = Met::As(j),
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

/// Every claim-side node with its demand (waiting claims not yet placed): the picker's
/// own first, counting the picker once whatever the cache shows of it; then the shapes
/// of waiting claims; then the free servers users' claims name.
#[cfg(debug_assertions)]
fn waiting_shapes<'w>(
    mine: Asks<'w>,
    me: &ClaimKey,
    waiting: &'w WaitingClaims,
    spoken: &'w SpokenFor,
) -> Vec<Shape<'w>> {
    let mut not_waiting: HashMap<*const ClaimShape, i64> = HashMap::new();
    for key in spoken.placed.iter().copied().chain(std::iter::once(me)) {
        if let Some((shape, _)) = waiting.shape_of.get(key) {
            *not_waiting.entry(Arc::as_ptr(shape)).or_default() += 1;
        }
    }
    let counted =
        |shape: &Arc<ClaimShape>| spoken.counts.as_ref().map_or(0, |c| c.placed_in(shape));
    let mut shapes = vec![(mine, 1, Queue::Picker, None)];
    let mine_shared = match mine {
        Asks::Shape(m) => waiting.waiting_as(m).map(|(k, _)| k),
        Asks::Server(_) => None,
    };
    for (shape, members) in waiting.by_shape.values() {
        let gone = not_waiting.get(&Arc::as_ptr(shape)).copied().unwrap_or(0);
        let demand = members.len() as i64 - gone - counted(shape) as i64;
        let node = (
            Asks::Shape(shape),
            demand,
            Queue::Shape(members),
            Some(shape),
        );
        if mine_shared.is_some_and(|m| Arc::ptr_eq(m, shape)) {
            shapes[0] = (node.0, demand + 1, node.2, node.3);
        } else if demand > 0 {
            shapes.push(node);
        }
    }
    for (shape, waiter) in &spoken.rivals {
        let queue = Queue::Named(std::slice::from_ref(waiter));
        shapes.push((Asks::Shape(shape), 1, queue, None));
    }
    for (server, namers) in &spoken.named {
        let demand = namers.len() as i64;
        let node = (Asks::Server(server), demand, Queue::Named(namers), None);
        if matches!(mine, Asks::Server(m) if m == *server) {
            shapes[0] = (node.0, demand + 1, node.2, None);
        } else if demand > 0 {
            shapes.push(node);
        }
    }
    shapes
}

/// Every class of free servers with its supply (members not yet spoken for), then every
/// free server claims name as a class of its own.
#[cfg(debug_assertions)]
fn free_classes<'i>(index: &'i FreeServerIndex, spoken: &SpokenFor) -> Vec<FreeClass<'i>> {
    let mut taken: HashMap<*const Class, i64> = HashMap::new();
    for name in &spoken.taken {
        if let Some(class) = index.class_of(name) {
            *taken.entry(class as *const Class).or_default() += 1;
        }
    }
    let mut named: HashMap<*const Class, Vec<&str>> = HashMap::new();
    for name in spoken.named.keys() {
        if let Some(class) = index.class_of(name) {
            named.entry(class as *const Class).or_default().push(name);
        }
    }
    let mut classes = Vec::new();
    let mut singles = Vec::new();
    for (id, class, members) in index.class_list() {
        let key = class as *const Class;
        let gone = taken.get(&key).copied().unwrap_or(0);
        let counted = spoken.counts.as_ref().map_or(0, |c| c.taken_in(id));
        let supply = members.len() as i64 - gone - counted as i64;
        if supply > 0 {
            classes.push((class, Members::Class(members), supply, id));
        }
        for name in named.get(&key).into_iter().flatten() {
            if let Some(member) = members.get(*name) {
                singles.push((class, Members::One(member.as_str()), 1, id));
            }
        }
    }
    classes.extend(singles);
    classes
}

#[cfg(debug_assertions)]
type Component = (Vec<usize>, Vec<usize>, Vec<(usize, usize)>);

/// Per claim-side node, the server-side nodes whose servers it can take: for a shape,
/// the classes its row says it fits (and the named servers of those classes); for the
/// claims naming a server, that server alone.
#[cfg(debug_assertions)]
fn fits_of(
    shapes: &[Shape<'_>],
    classes: &[FreeClass<'_>],
    index: &FreeServerIndex,
    waiting: &WaitingClaims,
) -> Vec<Vec<usize>> {
    let mut nodes_of_slot: HashMap<ClassId, Vec<usize>> = HashMap::new();
    for (j, class) in classes.iter().enumerate() {
        nodes_of_slot.entry(class.3).or_default().push(j);
    }
    let asked: Vec<(usize, AskedShape<'_>)> = shapes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s.0 {
            Asks::Shape(shape) => Some((i, (shape, s.3))),
            Asks::Server(_) => None,
        })
        .collect();
    let mut fits: Vec<Vec<usize>> = shapes
        .iter()
        .map(|s| match s.0 {
            Asks::Server(name) => one_server(classes, name),
            Asks::Shape(_) => Vec::new(),
        })
        .collect();
    let (at, asked): (Vec<usize>, Vec<_>) = asked.into_iter().unzip();
    waiting
        .rows
        .each(index, &asked, &waiting.by_shape, |n, row| {
            let nodes = row.iter().filter_map(|id| nodes_of_slot.get(id));
            fits[at[n]] = nodes.flatten().copied().collect();
        });
    fits
}

/// The server-side nodes of the free server `name` alone (claims naming it).
#[cfg(debug_assertions)]
fn one_server(classes: &[FreeClass<'_>], name: &str) -> Vec<usize> {
    let named = classes.iter().enumerate();
    named
        .filter(|(_, c)| matches!(c.1, Members::One(m) if m == name))
        .map(|(j, _)| j)
        .collect()
}

/// The nodes reachable from claim-side node 0 through `fits`, and the fits among them:
/// O(fits).
#[cfg(debug_assertions)]
fn component(fits: &[Vec<usize>], classes: usize) -> Component {
    let mut fitted_by: Vec<Vec<usize>> = vec![Vec::new(); classes];
    for (i, row) in fits.iter().enumerate() {
        for &j in row {
            fitted_by[j].push(i);
        }
    }
    let (mut shape_seen, mut class_seen) = (vec![false; fits.len()], vec![false; classes]);
    let (mut shape_in, mut class_in, mut edges) = (vec![0], Vec::new(), Vec::new());
    shape_seen[0] = true;
    let mut next_shape = 0;
    while next_shape < shape_in.len() {
        let i = shape_in[next_shape];
        next_shape += 1;
        for &j in &fits[i] {
            edges.push((i, j));
            if class_seen[j] {
                continue;
            }
            class_seen[j] = true;
            class_in.push(j);
            for &k in &fitted_by[j] {
                if !shape_seen[k] {
                    shape_seen[k] = true;
                    shape_in.push(k);
                }
            }
        }
    }
    (shape_in, class_in, edges)
}

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
pub fn first_stray(
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
fn first_fitting<'w>(
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
