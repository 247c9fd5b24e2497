//! Whom the delivery of the controllers' own write need not wake ([`Settles`]): the
//! written object, and the other side it names (a claim's server, a server's claim),
//! when their step changes nothing. Most deliveries of an own write are such echoes: a
//! claim that picked waits for its server, a bind completed on both sides is
//! confirmed, a server's first status is written once. Only these objects are stepped
//! here, as the watch feeds the binder: a step that has work is taken again by the
//! reconcile, so stepping every object an event wakes would cost a step twice wherever
//! there is work.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;

use crate::api::{CachedClaim, CachedServer, ServerClass, ServerDisruptionBudget, ServerQuota};
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta;
use crate::binding::steps::Sight;
use crate::binding::wakeups::Wake;

use super::{Binder, Settles};

impl Settles<CachedClaim> for Binder {
    fn settle_own_write(&self, written: &CachedClaim, wake: &mut Wake, now: Timestamp) {
        self.settle_claim(written, wake, now);
        if let Some(named) = &written.spec.server_ref {
            self.settle_server(&named.name, wake, now);
        }
    }

    fn await_own_write(&self, behind: &CachedClaim, wake: &mut Wake, now: Timestamp) {
        wake.claims.remove(&claim_key(behind));
        if let Some(named) = &behind.spec.server_ref {
            self.settle_server(&named.name, wake, now);
        }
    }
}

impl Settles<CachedServer> for Binder {
    fn settle_own_write(&self, written: &CachedServer, wake: &mut Wake, now: Timestamp) {
        self.settle_server(meta::name(written), wake, now);
        self.settle_claim_of(written, wake, now);
    }

    fn await_own_write(&self, behind: &CachedServer, wake: &mut Wake, now: Timestamp) {
        wake.servers.remove(meta::name(behind));
        self.settle_claim_of(behind, wake, now);
    }
}

impl Binder {
    /// Leaves `claim` out of `wake` if its step changes nothing.
    fn settle_claim(&self, claim: &CachedClaim, wake: &mut Wake, now: Timestamp) {
        let key = claim_key(claim);
        if wake.claims.contains(&key)
            && self
                .claim_step(claim, None, Sight::All, now)
                .changes_nothing()
        {
            wake.claims.remove(&key);
        }
    }

    /// Leaves the claim `server`'s ref names out of `wake` if its step, on the claim as
    /// the cache holds it, changes nothing.
    fn settle_claim_of(&self, server: &CachedServer, wake: &mut Wake, now: Timestamp) {
        let Some(r) = &server.spec.server_claim_ref else {
            return;
        };
        if let Some(claim) = self.world().claim_as_is(&r.namespace, &r.name) {
            self.settle_claim(claim, wake, now);
        }
    }

    /// Leaves `name` out of `wake` if its step, on the server as the cache holds it,
    /// changes nothing.
    fn settle_server(&self, name: &str, wake: &mut Wake, now: Timestamp) {
        if !wake.servers.contains(name) {
            return;
        }
        let Some(server) = self.world().server_as_is(name) else {
            return;
        };
        if self.server_step(None, server, None, now).changes_nothing() {
            wake.servers.remove(name);
        }
    }
}

impl Settles<ServerClass> for Binder {}
impl Settles<Namespace> for Binder {}
impl Settles<ServerQuota> for Binder {}
impl Settles<ServerDisruptionBudget> for Binder {}
