//! How contested a class of free servers is: how many known shapes of claims fit it,
//! counted once per class and kept up to date as shapes come and go.

use parking_lot::Mutex;

use crate::binding::placement::index::Class;
use crate::binding::placement::shape::{ClaimShape, FastMap};

/// The known shapes fitting each class weighed so far ([`WaitingClaims::contest`]). A
/// class is servers' labels and taints, which admins choose, not tenants: hashed by
/// foldhash, as placement's other maps of what no tenant chooses.
/// Filled in by picks, which read the claims without changing them; a copy of the
/// claims starts with none (it is a cache: the counts follow from the known shapes).
#[derive(Debug, Default)]
pub(super) struct Contest(Mutex<FastMap<Class, usize>>);

impl Clone for Contest {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// Classes weighed before the counts are dropped and counted afresh: the classes of the
/// free servers come and go with the servers, and a count kept for a class no longer
/// free costs an update per new shape.
pub(super) const MAX_WEIGHED_CLASSES: usize = 4096;

impl Contest {
    /// The count for `class`, counted by `count` the first time.
    pub(super) fn fitting(&self, class: &Class, count: impl FnOnce() -> usize) -> usize {
        let mut counts = self.0.lock();
        if let Some(n) = counts.get(class) {
            return *n;
        }
        if counts.len() >= MAX_WEIGHED_CLASSES {
            counts.clear();
        }
        let n = count();
        counts.insert(class.clone(), n);
        n
    }

    /// A shape became known (`delta` 1) or was forgotten (-1).
    pub(super) fn shape_known(&mut self, shape: &ClaimShape, delta: isize) {
        for (class, n) in self.0.get_mut() {
            if shape.fits(class) {
                *n = n.saturating_add_signed(delta);
            }
        }
    }
}
