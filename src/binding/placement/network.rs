//! The flow network around the picker's node, and what a pick reads of it: its demands
//! and supplies, the classes the picker can take, the claims ahead of it in the fair
//! order, and the answers of its max flow.

use std::collections::HashMap;

use crate::binding::meta::ClaimKey;
use crate::binding::placement::index::{ClassId, FreeServerIndex};
use crate::binding::placement::shape::address;

use super::component_search::ComponentSearch;
use super::fair_order::FairOrder;
use super::fit_rows::Rows;
use super::flow::MaxFlow;
use super::inputs::PickInputs;
use super::kept_flow::{FullFlow, KeptFlow, NodeKeys};
use super::nodes::{Asks, FreeClass, Members, Shape};
use super::spoken_for::SpokenFor;
use super::waiter::Waiter;
use super::waiting_claims::WaitingClaims;
#[cfg(debug_assertions)]
use super::whole_network::{component, fits_of, free_classes, waiting_shapes};

/// The flow network around the picker's node: node 0 on the claim side is the picker's
/// shape (or the server it names); every node reachable from it through fits is in,
/// nothing else. `'i`: the index's classes and names; `'w`: the waiting claims and the
/// picker.
pub(super) struct Network<'i, 'w> {
    shapes: Vec<Shape<'w>>,
    classes: Vec<FreeClass<'i>>,
    pub(super) edges: Vec<(usize, usize)>,
    spoken: &'w SpokenFor<'w>,
    me: &'w ClaimKey,
}

/// A network as text ([`Network::described`]).
#[cfg(debug_assertions)]
pub(super) type Described = (String, Vec<String>, Vec<String>, Vec<(String, String)>);

impl<'i, 'w> Network<'i, 'w> {
    /// The component of the picker's node, built outward from it ([`ComponentSearch`]); a debug
    /// build checks it against the component of the network of every waiting shape and
    /// every class of free servers.
    pub(super) fn around(
        mine: Asks<'w>,
        me: &'w ClaimKey,
        index: &'i FreeServerIndex,
        waiting: &'w WaitingClaims,
        spoken: &'w SpokenFor<'w>,
    ) -> Self {
        let (shapes, classes, edges) = ComponentSearch::new(me, index, waiting, spoken).build(mine);
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

    pub(super) fn demand(&self) -> Vec<i64> {
        self.shapes.iter().map(|s| s.1).collect()
    }

    pub(super) fn supply(&self) -> Vec<i64> {
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
    pub(super) fn usable_classes_of_mine(
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
    pub(super) fn demand_ahead_of(
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

    /// The answers of the network's max flow: the last pick's flow refitted to this
    /// network's demands and supplies when the two networks have the same nodes (then
    /// an augmenting path or two, not a flow built afresh), else a new one; kept for the
    /// next pick. A debug build checks a refitted flow against a new one.
    pub(super) fn full_flow(
        &self,
        demand: &[i64],
        supply: &[i64],
        waiting: &WaitingClaims,
    ) -> FullFlow {
        let mut rows = waiting.rows.0.lock();
        let Some(keys) = self.keys(&rows) else {
            return FullFlow::new(&self.edges, demand, supply);
        };
        let refitted = rows
            .kept
            .take()
            .filter(|kept| kept.has_nodes(&keys))
            .and_then(|kept| kept.refitted(&keys, demand, supply));
        let kept = refitted.unwrap_or_else(|| {
            let flow = MaxFlow::new(demand, supply, &self.edges);
            KeptFlow::numbered(flow, &keys)
        });
        let full = kept.answers(&keys);
        #[cfg(debug_assertions)]
        {
            let fresh = FullFlow::new(&self.edges, demand, supply);
            assert_eq!(
                (full.value, &full.open_to_mine),
                (fresh.value, &fresh.open_to_mine),
                "a kept flow answers as a new one"
            );
        }
        rows.kept = Some(kept);
        full
    }
}
