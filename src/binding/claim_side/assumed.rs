//! The claim controller's assumed choices, as pure data: servers it picked for a claim
//! and wrote (or is writing) to that claim, whose effect its caches may not show yet.
//!
//! Without them, two reconciles running at once, or one running before the watch
//! delivered the previous pick, would both see the same server free and pick it; the
//! server controller would then arbitrate and one claim would rebind. The PV controller
//! keeps the same kind of cache for the same reason.
//!
//! When an assumption on server S for claim C starts and ends is protocol, so it lives
//! here, where the controllers and the model check both run it:
//! - it starts when a `PickBestFit` is carried out ([`assumption_for`](crate::binding::assumption_for)), before the write,
//!   unless C's assumption is written already and was decided on the same version of C
//!   (the new pick read C from before that write, and its own write will fail);
//! - it ends when the server cache shows S with a ref or without S (the server side took
//!   over, or S is gone), when C is deleted, when the claim write fails (unless an
//!   earlier write of the pick succeeded: C carries it), or when the claim cache shows
//!   C, at any version other than the one the pick was decided on, no longer naming S
//!   ([`ends_on_claim_event`]). Nothing orders a watch event against the write's
//!   response, so the rule looks at neither: any later version of C is the write or
//!   something after it, and one that does not name S means the choice was withdrawn.
//!
//! The cache is an optimisation: the server's ref is the lock, and a controller that lost
//! its assumptions in a crash converges anyway.

use std::collections::BTreeMap;

use crate::api::{CachedClaim, CachedServer};

use crate::binding::meta::{self, ClaimKey};

/// One assumed choice of a server for a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Assumption {
    pub claim: ClaimKey,
    /// The claim's resourceVersion the pick was decided on (the write's precondition).
    pub based_on: Option<String>,
    /// The claim's resourceVersion the write returned, once its response arrived.
    pub written: Option<String>,
    /// Bookkeeping a rule may keep between events (the current rule keeps none).
    pub seen: bool,
}

/// Whether a claim watch event ends the assumption on `server` (`claim` is the claim as
/// the event shows it). Swappable so the model check can run older rules as mutants.
pub type EndRule = fn(&mut Assumption, &str, &CachedClaim) -> bool;

/// The rule: a version of the claim other than the one the pick was decided on that does
/// not name the server. See the module docs for why neither order of event and response
/// matters.
pub fn ends_on_claim_event(a: &mut Assumption, server: &str, claim: &CachedClaim) -> bool {
    claim.meta().resource_version != a.based_on && !names(claim, server)
}

fn names(claim: &CachedClaim, server: &str) -> bool {
    claim
        .spec
        .server_ref
        .as_ref()
        .is_some_and(|r| r.name == server)
}

/// Every assumption in force, by server and by claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AssumedChoices {
    by_server: BTreeMap<String, Assumption>,
    by_claim: BTreeMap<ClaimKey, String>,
}

impl AssumedChoices {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `server` is assumed chosen for a claim other than `claim`.
    pub fn chosen_for_other(&self, server: &str, claim: &ClaimKey) -> bool {
        self.by_server
            .get(server)
            .is_some_and(|a| &a.claim != claim)
    }

    /// Whether `server` is assumed chosen for `claim`: a pick this controller made and
    /// stands behind (docs/binding.md, "Whose pick is it").
    pub fn holds(&self, server: &str, claim: &ClaimKey) -> bool {
        self.by_server
            .get(server)
            .is_some_and(|a| &a.claim == claim)
    }

    /// Whether `server` is assumed chosen for any claim.
    pub fn is_assumed(&self, server: &str) -> bool {
        self.by_server.contains_key(server)
    }

    /// The assumptions, server by server (for tests and the model check).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Assumption)> {
        self.by_server.iter()
    }

    pub fn len(&self) -> usize {
        self.by_server.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_server.is_empty()
    }

    /// The claim `server` is assumed chosen for.
    pub fn claim_on(&self, server: &str) -> Option<&ClaimKey> {
        self.by_server.get(server).map(|a| &a.claim)
    }

    /// The server assumed chosen for `claim`.
    pub fn server_for(&self, claim: &ClaimKey) -> Option<&str> {
        self.by_claim.get(claim).map(String::as_str)
    }

    /// Records that `server` is being written to `claim`, decided on the claim at
    /// `based_on` (before the write). Replaces the claim's previous assumption, unless
    /// that one is already written and was decided on the same version: then the new
    /// pick read the claim from before that write (a reconcile handed an older copy),
    /// its write will fail on that version, and the pick the claim carries stays
    /// assumed.
    pub fn assume(&mut self, server: &str, claim: ClaimKey, based_on: Option<String>) {
        if self.already_written(&claim, &based_on) {
            return;
        }
        if let Some(previous) = self.by_claim.remove(&claim) {
            self.by_server.remove(&previous);
        }
        self.end(server);
        self.by_claim.insert(claim.clone(), server.to_string());
        let assumption = Assumption {
            claim,
            based_on,
            written: None,
            seen: false,
        };
        self.by_server.insert(server.to_string(), assumption);
    }

    /// The claim write succeeded and returned this resourceVersion.
    pub fn written(&mut self, server: &str, claim: &ClaimKey, resource_version: Option<String>) {
        if let Some(a) = self.by_server.get_mut(server)
            && &a.claim == claim
        {
            a.written = resource_version;
        }
    }

    /// A claim write picking `server` failed. Returns the server if its assumption
    /// ended, so waiting claims can be given a chance at it: it ends unless an earlier
    /// write of the pick succeeded, for then the claim carries it whatever became of
    /// this one.
    pub fn write_failed(&mut self, server: &str, claim: &ClaimKey) -> Option<String> {
        let ours = self
            .by_server
            .get(server)
            .is_some_and(|a| &a.claim == claim && a.written.is_none());
        ours.then(|| self.end(server)).flatten()
    }

    /// Whether `claim`'s assumption was written, after being decided on `based_on`.
    fn already_written(&self, claim: &ClaimKey, based_on: &Option<String>) -> bool {
        let Some(server) = self.by_claim.get(claim) else {
            return false;
        };
        self.by_server
            .get(server)
            .is_some_and(|a| a.written.is_some() && &a.based_on == based_on)
    }

    /// A server watch event (`None`: deleted). A server that shows a ref, or is gone, is
    /// no longer anyone's to pick, so nobody needs waking.
    pub fn observe_server(&mut self, name: &str, server: Option<&CachedServer>) {
        if server.is_none_or(|s| s.spec.server_claim_ref.is_some()) {
            self.end(name);
        }
    }

    /// A claim watch event (`None`: deleted), under `rule`. Returns the server whose
    /// assumption ended, if any.
    pub fn observe_claim_with(
        &mut self,
        rule: EndRule,
        key: &ClaimKey,
        claim: Option<&CachedClaim>,
    ) -> Option<String> {
        let server = self.by_claim.get(key)?.clone();
        let a = self.by_server.get_mut(&server)?;
        let ended = match claim {
            None => true,
            Some(c) => rule(a, &server, c),
        };
        ended.then(|| self.end(&server)).flatten()
    }

    /// [`AssumedChoices::observe_claim_with`] the project's rule.
    pub fn observe_claim(&mut self, key: &ClaimKey, claim: Option<&CachedClaim>) -> Option<String> {
        self.observe_claim_with(ends_on_claim_event, key, claim)
    }

    /// After a relist of claims: every claim is seen at its latest version.
    pub fn relisted_claims(
        &mut self,
        rule: EndRule,
        latest: &dyn Fn(&ClaimKey) -> Option<CachedClaim>,
    ) -> Vec<String> {
        let keys: Vec<ClaimKey> = self.by_claim.keys().cloned().collect();
        keys.iter()
            .filter_map(|k| self.observe_claim_with(rule, k, latest(k).as_ref()))
            .collect()
    }

    /// After a relist of servers: assumptions on servers that are gone or taken end.
    pub fn relisted_servers(&mut self, latest: &dyn Fn(&str) -> Option<CachedServer>) {
        let names: Vec<String> = self.by_server.keys().cloned().collect();
        for name in names {
            self.observe_server(&name, latest(&name).as_ref());
        }
    }

    fn end(&mut self, server: &str) -> Option<String> {
        let a = self.by_server.remove(server)?;
        if self.by_claim.get(&a.claim).is_some_and(|s| s == server) {
            self.by_claim.remove(&a.claim);
        }
        Some(server.to_string())
    }
}

/// The key of a claim object.
pub fn claim_key(claim: &CachedClaim) -> ClaimKey {
    ClaimKey::of(meta::namespace(claim), meta::name(claim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ServerClaimRef, ServerClaimSpec, ServerRef, ServerSpec};
    use kube::api::ObjectMeta;

    fn claim(server: Option<&str>, rv: &str) -> CachedClaim {
        CachedClaim::from(crate::api::ServerClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("c1".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: ServerClaimSpec {
                server_ref: server.map(|s| ServerRef { name: s.into() }),
                ..Default::default()
            },
            status: None,
        })
    }

    fn key(name: &str) -> ClaimKey {
        ClaimKey::of("ns", name)
    }

    /// c1 picked s1 on version 5 and wrote it as 7, then withdrew it as 9.
    fn picked() -> AssumedChoices {
        let mut a = AssumedChoices::new();
        a.assume("s1", key("c1"), Some("5".into()));
        assert!(a.chosen_for_other("s1", &key("c2")));
        assert!(!a.chosen_for_other("s1", &key("c1")));
        a
    }

    #[test]
    fn a_withdrawal_ends_it_whether_the_event_or_the_response_comes_first() {
        // Response first.
        let mut a = picked();
        a.written("s1", &key("c1"), Some("7".into()));
        assert_eq!(
            a.observe_claim(&key("c1"), Some(&claim(Some("s1"), "7"))),
            None
        );
        let ended = a.observe_claim(&key("c1"), Some(&claim(None, "9")));
        assert_eq!(ended.as_deref(), Some("s1"));
        // Events first: the rule looks at neither the response nor its order.
        let mut a = picked();
        assert_eq!(
            a.observe_claim(&key("c1"), Some(&claim(Some("s1"), "7"))),
            None
        );
        let ended = a.observe_claim(&key("c1"), Some(&claim(None, "9")));
        assert_eq!(ended.as_deref(), Some("s1"));
        a.written("s1", &key("c1"), Some("7".into()));
        assert!(a.is_empty());
    }

    #[test]
    fn the_version_the_pick_was_decided_on_does_not_end_it() {
        let mut a = picked();
        assert_eq!(a.observe_claim(&key("c1"), Some(&claim(None, "5"))), None);
        assert!(!a.is_empty());
    }

    #[test]
    fn a_failed_write_ends_only_its_own_assumption() {
        let mut a = picked();
        assert_eq!(a.write_failed("s1", &key("c2")), None, "not c2's");
        assert_eq!(a.write_failed("s1", &key("c1")).as_deref(), Some("s1"));
        assert!(a.is_empty());
    }

    /// A reconcile handed the claim from before the pick's write picks again on that
    /// version: whichever server it picks, its write fails, and the pick the claim
    /// carries stays assumed (were it dropped, the claim would carry a pick this
    /// controller no longer stands behind, and wait on it).
    #[test]
    fn a_pick_decided_on_the_version_before_its_own_write_keeps_the_written_one() {
        for again in ["s1", "s2"] {
            let mut a = picked();
            a.written("s1", &key("c1"), Some("7".into()));
            a.assume(again, key("c1"), Some("5".into()));
            assert!(a.holds("s1", &key("c1")), "{again}");
            assert_eq!(a.write_failed(again, &key("c1")), None, "{again}");
            assert!(a.holds("s1", &key("c1")), "{again}");
            assert_eq!(a.len(), 1);
        }
        // A pick decided on a later version (the claim withdrew the first) replaces it.
        let mut a = picked();
        a.written("s1", &key("c1"), Some("7".into()));
        a.assume("s2", key("c1"), Some("9".into()));
        assert!(a.holds("s2", &key("c1")) && !a.is_assumed("s1"));
    }

    #[test]
    fn the_server_side_taking_the_server_or_a_deleted_claim_ends_it() {
        let mut a = picked();
        let mut server = CachedServer::new("s1", ServerSpec::default());
        server.spec.server_claim_ref = Some(ServerClaimRef {
            namespace: "ns".into(),
            name: "c1".into(),
            uid: None,
        });
        a.observe_server("s1", Some(&server));
        assert!(a.is_empty());
        let mut a = picked();
        assert_eq!(a.observe_claim(&key("c1"), None).as_deref(), Some("s1"));
    }
}
