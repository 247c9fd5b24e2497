//! The evictions whose writes the watches have not shown yet: a claim whose `Evicted`
//! status is on its way still counts as without a server in every disruption budget
//! (docs/binding.md, "Disruption budgets"), so two claims decided one after the other
//! cannot both take a budget's last disruption.

use std::collections::HashMap;

use crate::api::CachedClaim;
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta::ClaimKey;

/// Each claim being evicted, with the resourceVersion its eviction was decided on.
#[derive(Clone, Debug, Default)]
pub struct Evicting {
    decided_on: HashMap<ClaimKey, Option<String>>,
}

impl Evicting {
    /// An eviction of `claim` (as the cache shows it) starts.
    pub fn assume(&mut self, claim: &CachedClaim) {
        let version = claim.meta().resource_version.clone();
        self.decided_on.insert(claim_key(claim), version);
    }

    /// The watch shows the claim anew (`None`: gone): any later version says where the
    /// eviction stands (written, or refused and decided again).
    pub fn observe(&mut self, key: &ClaimKey, new: Option<&CachedClaim>) {
        let Some(decided_on) = self.decided_on.get(key) else {
            return;
        };
        if new.is_none_or(|c| c.meta().resource_version != *decided_on) {
            self.decided_on.remove(key);
        }
    }

    /// Whether an eviction of `claim`, at the version the cache shows, is on its way.
    pub fn contains(&self, claim: &CachedClaim) -> bool {
        self.decided_on
            .get(&claim_key(claim))
            .is_some_and(|v| *v == claim.meta().resource_version)
    }

    /// The claims were listed anew: an eviction stays on its way only while the claim
    /// is still at the version it was decided on.
    pub fn relisted(&mut self, lookup: &dyn Fn(&ClaimKey) -> Option<CachedClaim>) {
        self.decided_on.retain(|key, version| {
            lookup(key).is_some_and(|c| c.meta().resource_version == *version)
        });
    }
}
