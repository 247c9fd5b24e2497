//! A waiting claim as the fair order sees it, which claims wait for a pick, and the
//! waiting claims filed by shape.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::api::CachedClaim;
use crate::binding::claim_side::backoff::backs_off;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::shape::{ClaimShape, FastMap};

/// A waiting claim as the fair order sees it: oldest first, then by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Waiter {
    pub created: Option<Timestamp>,
    pub key: ClaimKey,
}

impl Waiter {
    pub(super) fn of(claim: &CachedClaim) -> Self {
        Self::keyed(
            claim,
            ClaimKey::of(meta::namespace(claim), meta::name(claim)),
        )
    }

    /// The waiter of `claim`, whose key the caller holds already (shared, not built).
    pub(super) fn keyed(claim: &CachedClaim, key: ClaimKey) -> Self {
        Self {
            created: claim.meta().creation_timestamp.as_ref().map(|t| t.0),
            key,
        }
    }
}

/// Whether a claim waits for a pick: no `serverRef`, not on the bound path, not being
/// deleted (the claim controller leaves a deleting claim alone), not backing off after a
/// refused write (its status says so: it is ahead of nobody until it tries again).
pub fn is_waiting(claim: &CachedClaim) -> bool {
    claim.spec.server_ref.is_none()
        && !meta::is_bind_completed(claim)
        && !meta::is_deleting(claim)
        && !backs_off(claim)
}

/// The waiting claims by shape, keyed by the address of the shape's shared copy.
pub(super) type ByShape = FastMap<usize, (Arc<ClaimShape>, BTreeSet<Waiter>)>;
