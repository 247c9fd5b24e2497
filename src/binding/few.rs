//! [`Few`]: an ordered set that is almost always of one element.
//!
//! The catalogs keep, per object, the few objects that name it: the claims naming a
//! server, the servers reserved for a claim. That is one in the ordinary case, and
//! a `BTreeSet` of one element costs a whole B-tree node (eleven slots: about 0.5 KiB
//! for claim keys) per object. Measured with heaptrack at 10k servers and 10k claims,
//! those nodes were 8 MB of the operator's 86 MB heap (docs/performance.md, "Memory").
//! Many elements (a server many claims name, as tenants can make) still cost
//! O(log n) per change.

use std::borrow::Borrow;
use std::collections::BTreeSet;

/// An ordered set of usually one element: that one held inline, a B-tree beyond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Few<T: Ord> {
    One(T),
    /// Two or more, or none (an empty `BTreeSet` allocates nothing).
    Many(BTreeSet<T>),
}

impl<T: Ord> Default for Few<T> {
    fn default() -> Self {
        Few::Many(BTreeSet::new())
    }
}

impl<T: Ord> Few<T> {
    /// Adds `value`; whether it was new.
    pub fn insert(&mut self, value: T) -> bool {
        match self {
            Few::Many(set) if set.is_empty() => {
                *self = Few::One(value);
                true
            }
            Few::Many(set) => set.insert(value),
            Few::One(one) if *one == value => false,
            Few::One(_) => {
                let Few::One(one) = std::mem::take(self) else {
                    unreachable!("matched as one just above");
                };
                *self = Few::Many(BTreeSet::from([one, value]));
                true
            }
        }
    }

    /// Removes `value`; whether it was there.
    pub fn remove<Q: Ord + ?Sized>(&mut self, value: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        match self {
            Few::One(one) if (*one).borrow() == value => {
                *self = Few::default();
                true
            }
            Few::One(_) => false,
            Few::Many(set) => {
                let removed = set.remove(value);
                if set.len() == 1 {
                    let last = set.pop_first().expect("one element, checked just above");
                    *self = Few::One(last);
                }
                removed
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Few::Many(set) if set.is_empty())
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let (one, many) = match self {
            Few::One(one) => (Some(one), None),
            Few::Many(set) => (None, Some(set.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sequence of inserts and removes over a small domain agrees with a
    /// `BTreeSet`: same answers, same elements in the same order.
    #[test]
    fn agrees_with_a_btree_set() {
        let mut state: u64 = 7;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let mut few = Few::default();
        let mut set = BTreeSet::new();
        for _ in 0..20_000 {
            let value = next() % 5;
            if next() % 2 == 0 {
                assert_eq!(few.insert(value), set.insert(value));
            } else {
                assert_eq!(few.remove(&value), set.remove(&value));
            }
            assert_eq!(
                few.iter().collect::<Vec<_>>(),
                set.iter().collect::<Vec<_>>()
            );
            assert_eq!(few.is_empty(), set.is_empty());
            assert_eq!(
                matches!(few, Few::One(_)),
                set.len() == 1,
                "one is held inline"
            );
        }
    }
}
