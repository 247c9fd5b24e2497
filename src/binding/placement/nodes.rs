//! The nodes of a pick's flow network: what a claim-side node asks for and the claims it
//! queues, and the servers of a server-side node.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::binding::placement::index::{Class, ClassId};
use crate::binding::placement::shape::ClaimShape;

use super::waiter::Waiter;

/// What a node on the claim side of the network asks for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Asks<'w> {
    /// Any free server its shape fits: the waiting claims of one shape.
    Shape(&'w ClaimShape),
    /// This free server alone: the claims naming it.
    Server(&'w str),
}

/// The claims queued under a node, for the fair order.
#[derive(Clone, Copy)]
pub(super) enum Queue<'w> {
    /// Only the picker (its shape has no waiting claims in the cache yet).
    Picker,
    Shape(&'w BTreeSet<Waiter>),
    Named(&'w [&'w Waiter]),
}

impl<'w> Queue<'w> {
    pub(super) fn iter(self) -> Box<dyn Iterator<Item = &'w Waiter> + 'w> {
        match self {
            Queue::Picker => Box::new(std::iter::empty()),
            Queue::Shape(set) => Box::new(set.iter()),
            Queue::Named(list) => Box::new(list.iter().copied()),
        }
    }
}

/// The servers of a node on the server side: a class of free servers, or one free
/// server that claims name.
#[derive(Clone, Copy)]
pub(super) enum Members<'i> {
    Class(&'i BTreeSet<String>),
    One(&'i str),
}

impl<'i> Members<'i> {
    /// The lowest-named member not skipped.
    pub(super) fn first_not(self, skip: &dyn Fn(&str) -> bool) -> Option<&'i str> {
        match self {
            Members::Class(set) => set.iter().map(String::as_str).find(|n| !skip(n)),
            Members::One(name) => (!skip(name)).then_some(name),
        }
    }
}

/// A node on the claim side: what it asks for, its demand, and its queued claims.
/// The last element: the shape as the waiting claims share it, if they do.
pub(super) type Shape<'w> = (Asks<'w>, i64, Queue<'w>, Option<&'w Arc<ClaimShape>>);

/// A node on the server side: its class, its members and its supply (members not spoken
/// for).
pub(super) type FreeClass<'i> = (&'i Class, Members<'i>, i64, ClassId);
