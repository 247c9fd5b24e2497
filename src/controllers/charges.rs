//! The claim controller's charges of one quota, one after another (docs/binding.md,
//! "Server quotas", "Charges in a row").
//!
//! Many reconciles of one namespace decide at once on the same cached version of its
//! quota, and each charge is written at the version its decision read: without this,
//! all but the first conflict and decide again (3.2 conflicts per bind when thousands
//! of claims share one quota). So this process writes a quota's charges one at a time,
//! and each charge after the first is computed again ([`quota::recharge`], the one rule
//! of a charge) on the version this process's previous charge wrote, when that is newer
//! than what the decision read: kube-scheduler's assume, for the quota. A write that
//! fails forgets that version, so the next charge goes back to what the watch shows;
//! another writer's change still makes a charge conflict, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Mutex as AsyncMutex;

use crate::api::ServerQuota;
use crate::binding::meta;
use crate::binding::world::quota::{self, Charge, Recharge};

use super::own_writes::numeric;

/// The last version each quota's charges wrote, behind a lock per quota that the next
/// charge of it waits for.
#[derive(Debug, Default)]
pub struct ChargesInARow {
    quotas: Mutex<HashMap<(String, String), Slot>>,
}

/// One quota's lock, holding the version this process's last charge of it wrote.
pub type Slot = Arc<AsyncMutex<Option<Arc<ServerQuota>>>>;

/// What to write for a charge, on the newest version this process knows of its quota.
pub enum Next {
    /// Write `charged` at `base`'s resourceVersion.
    Write {
        base: Arc<ServerQuota>,
        charged: Box<ServerQuota>,
    },
    /// The quota charges the claim already.
    Done,
    /// The quota has no room left for it on the newer version: decide again.
    Full,
}

impl ChargesInARow {
    /// The lock of `charge`'s quota, holding the version its last charge wrote.
    pub fn slot(&self, charge: &Charge) -> Slot {
        let key = (
            meta::namespace(&*charge.read).to_string(),
            meta::name(&*charge.read).to_string(),
        );
        let mut quotas = self.quotas.lock().expect("charges lock");
        quotas.entry(key).or_default().clone()
    }
}

/// What to write for `charge`, given the version this process's last charge of its quota
/// wrote (`last`), if any: the decision's own write if what it read is as new, else the
/// charge computed again on `last`.
pub fn next(charge: &Charge, last: Option<&Arc<ServerQuota>>) -> Next {
    let newer = last.filter(|l| is_newer(l, &charge.read));
    let Some(base) = newer else {
        return Next::Write {
            base: charge.read.clone(),
            charged: Box::new(charge.charged.clone()),
        };
    };
    match quota::recharge(base, &charge.entry, &charge.absorbed) {
        Recharge::Write(charged) => Next::Write {
            base: base.clone(),
            charged,
        },
        Recharge::Already => Next::Done,
        Recharge::Full => Next::Full,
    }
}

/// Whether `a` is a later version of the quota than `b` (resourceVersions are etcd
/// revisions in practice; one that is not a number is never taken as later).
fn is_newer(a: &ServerQuota, b: &ServerQuota) -> bool {
    let version = |q: &ServerQuota| q.metadata.resource_version.as_deref().and_then(numeric);
    a.metadata.uid == b.metadata.uid && version(a).zip(version(b)).is_some_and(|(a, b)| a > b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CachedClaim, QuotaCharge, ServerQuotaSpec};
    use crate::binding::world::quota::QuotaCatalog;

    fn claim(uid: &str) -> CachedClaim {
        let mut c = CachedClaim::new(&format!("c-{uid}"), Default::default());
        c.meta_mut().namespace = Some("team-a".into());
        c.meta_mut().uid = Some(uid.into());
        c
    }

    fn quota(hard: i64, version: &str) -> Arc<ServerQuota> {
        let mut q = ServerQuota::new(
            "q",
            ServerQuotaSpec {
                hard: [("gpu".to_string(), hard)].into(),
            },
        );
        q.metadata.namespace = Some("team-a".into());
        q.metadata.uid = Some("q-uid".into());
        q.metadata.resource_version = Some(version.into());
        Arc::new(q)
    }

    fn decided(read: &Arc<ServerQuota>, uid: &str) -> Charge {
        let mut catalog = QuotaCatalog::new(|_| true);
        catalog.upsert(read.clone());
        let mut charges = catalog.charges_for(&claim(uid), "gpu", &["q".into()], &|_| false);
        charges.pop().expect("room")
    }

    fn with_version(q: &ServerQuota, version: &str) -> Arc<ServerQuota> {
        let mut q = q.clone();
        q.metadata.resource_version = Some(version.into());
        Arc::new(q)
    }

    fn uids(q: &ServerQuota) -> Vec<&str> {
        quota::charges(q)
            .iter()
            .map(|c: &QuotaCharge| c.uid.as_str())
            .collect()
    }

    #[test]
    fn a_charge_after_this_process_own_goes_on_the_version_it_wrote() {
        let read = quota(2, "10");
        let (a, b, c) = (
            decided(&read, "a"),
            decided(&read, "b"),
            decided(&read, "c"),
        );
        let Next::Write { base, charged } = next(&a, None) else {
            panic!("the first charge writes what its decision read");
        };
        assert_eq!(base.metadata.resource_version.as_deref(), Some("10"));
        let last = with_version(&charged, "11");
        let Next::Write { base, charged } = next(&b, Some(&last)) else {
            panic!("room for b on the version a wrote");
        };
        assert_eq!(base.metadata.resource_version.as_deref(), Some("11"));
        assert_eq!(uids(&charged), ["a", "b"]);
        let last = with_version(&charged, "12");
        assert!(
            matches!(next(&c, Some(&last)), Next::Full),
            "no room left for c"
        );
        assert!(matches!(next(&b, Some(&last)), Next::Done), "b is charged");
        let stale = with_version(&read, "9");
        assert!(
            matches!(next(&a, Some(&stale)), Next::Write { base, .. } if base.metadata.resource_version.as_deref() == Some("10")),
            "an older last write is not taken over what the decision read"
        );
    }
}
