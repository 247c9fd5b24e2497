//! [`Shared`]: a part of a cached object that its clones share until one changes it.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// A value behind an [`Arc`] that reads as the value itself and is copied on the first
/// write through it (`Arc::make_mut`): the classes' view of a cached object is a clone
/// that changes its labels or its spec, and shares its metadata with the object as it
/// is. Compares, prints and serialises as the value.
#[derive(Clone, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    pub fn new(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// Whether both are the same allocation (not only equal values).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_value_until_one_writes() {
        let a = Shared::new(vec![1, 2]);
        let mut b = a.clone();
        assert!(Shared::ptr_eq(&a, &b));
        b.push(3);
        assert!(!Shared::ptr_eq(&a, &b));
        assert_eq!((&*a, &*b), (&vec![1, 2], &vec![1, 2, 3]));
        assert_ne!(a, b);
    }
}
