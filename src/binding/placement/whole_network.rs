//! The network of every waiting shape and every class of free servers, and the picker's
//! component in it: O(S + K) per pick, what a debug build checks the component searched
//! outward from the picker ([`super::component_search`]) against.

use std::collections::HashMap;
use std::sync::Arc;

use crate::binding::meta::ClaimKey;
use crate::binding::placement::index::{Class, ClassId, FreeServerIndex};
use crate::binding::placement::shape::ClaimShape;

use super::fit_rows::AskedShape;
use super::nodes::{Asks, FreeClass, Members, Queue, Shape};
use super::spoken_for::SpokenFor;
use super::waiting_claims::WaitingClaims;

/// Every claim-side node with its demand (waiting claims not yet placed): the picker's
/// own first, counting the picker once whatever the cache shows of it; then the shapes
/// of waiting claims; then the free servers users' claims name.
pub(super) fn waiting_shapes<'w>(
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
pub(super) fn free_classes<'i>(
    index: &'i FreeServerIndex,
    spoken: &SpokenFor,
) -> Vec<FreeClass<'i>> {
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

pub(super) type Component = (Vec<usize>, Vec<usize>, Vec<(usize, usize)>);

/// Per claim-side node, the server-side nodes whose servers it can take: for a shape,
/// the classes its row says it fits (and the named servers of those classes); for the
/// claims naming a server, that server alone.
pub(super) fn fits_of(
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
pub(super) fn one_server(classes: &[FreeClass<'_>], name: &str) -> Vec<usize> {
    let named = classes.iter().enumerate();
    named
        .filter(|(_, c)| matches!(c.1, Members::One(m) if m == name))
        .map(|(j, _)| j)
        .collect()
}

/// The nodes reachable from claim-side node 0 through `fits`, and the fits among them:
/// O(fits).
pub(super) fn component(fits: &[Vec<usize>], classes: usize) -> Component {
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
