//! What a claim asks of a server (its [`ClaimShape`]): claims of one shape are
//! interchangeable to placement, and a shape fits a class of free servers or not.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::api::{CachedClaim, CachedServer, ServerSelector, Toleration};

use crate::binding::meta;
use crate::binding::placement::index::Class;
use crate::binding::selector::{first_untolerated, matches_nothing, selector_matches};
use crate::binding::state::eligibility::server_is_claimable;

/// What a claim asks of a server: its selector and tolerations. Claims of one shape are
/// one class of the matching.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimShape {
    pub selector: Option<ServerSelector>,
    pub tolerations: Vec<Toleration>,
}

impl ClaimShape {
    pub fn of(claim: &CachedClaim) -> Self {
        Self {
            selector: claim.spec.server_selector.clone(),
            tolerations: claim.spec.tolerations.clone(),
        }
    }

    /// Whether `claim` asks for this shape: [`Self::of`] without the copy.
    pub fn is_of(&self, claim: &CachedClaim) -> bool {
        self.selector == claim.spec.server_selector && self.tolerations == claim.spec.tolerations
    }

    /// Whether no server has the labels this shape selects ([`matches_nothing`]): a
    /// claim its class or a quota shuts out asks for such a shape.
    pub fn fits_no_server(&self) -> bool {
        self.selector.as_ref().is_some_and(matches_nothing)
    }

    /// Whether this server, claimable, can serve claims of this shape (its full labels).
    pub fn fits_server(&self, server: &CachedServer) -> bool {
        server_is_claimable(server).is_ok()
            && first_untolerated(&server.spec.taints, &self.tolerations).is_none()
            && self
                .selector
                .as_ref()
                .is_none_or(|s| selector_matches(s, meta::labels(server)))
    }

    /// Whether every server of `class` can serve claims of this shape. Exact when the
    /// index tracks every key of the selector ([`FreeServerIndex::tracks`]).
    pub fn fits(&self, class: &Class) -> bool {
        first_untolerated(&class.taints, &self.tolerations).is_none()
            && self
                .selector
                .as_ref()
                .is_none_or(|s| selector_matches(s, &class.labels))
    }
}

/// The address of a shared shape: what names it (while it is held) in the fit rows, the
/// pin filings and the counts of picks in flight.
pub fn address(shape: &Arc<ClaimShape>) -> usize {
    Arc::as_ptr(shape) as usize
}

/// A map keyed by what no tenant can choose (slot numbers, shape addresses, node
/// indexes): hashed by foldhash, several times cheaper than SipHash on such keys.
/// Maps keyed by names or label values, which tenants choose, keep SipHash, whose
/// seeded keys resist collisions forced on purpose.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;
