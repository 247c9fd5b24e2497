//! The claim controller's assumed choices: servers it picked for a claim and wrote to
//! that claim, but whose effect its caches do not show yet.
//!
//! Without it, two reconciles running at once (concurrency > 1), or one running before
//! the watch delivered the previous one's write, would both see the same server free and
//! pick it; the server controller would then arbitrate and one claim would rebind. The
//! PV controller keeps the same kind of cache for the same reason.
//!
//! An assumption on server S for claim C ends when the server cache shows S with a ref
//! (the server side took over), when S or C is deleted, when the claim cache has caught
//! up with the write and shows C no longer naming S (withdrawn), or at once when the
//! write fails.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::api::{Server, ServerClaim};
use crate::binding::meta;

/// A claim's namespace and name.
pub type ClaimKey = (String, String);

#[derive(Debug)]
struct Assumption {
    claim: ClaimKey,
    /// The claim's resourceVersion after our write, once the write returned.
    written: Option<String>,
    /// Whether the claim cache has shown that resourceVersion (or a later relist).
    seen: bool,
}

#[derive(Debug, Default)]
pub struct AssumedChoices {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_server: HashMap<String, Assumption>,
    by_claim: HashMap<ClaimKey, String>,
}

impl Inner {
    fn forget_server(&mut self, server: &str) {
        if let Some(a) = self.by_server.remove(server)
            && self.by_claim.get(&a.claim).is_some_and(|s| s == server)
        {
            self.by_claim.remove(&a.claim);
        }
    }
}

impl AssumedChoices {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `server` is assumed chosen for a claim other than `claim`.
    pub fn chosen_for_other(&self, server: &str, claim: &ClaimKey) -> bool {
        self.inner
            .lock()
            .by_server
            .get(server)
            .is_some_and(|a| &a.claim != claim)
    }

    /// Records that `server` is being written to `claim` (before the write).
    pub fn assume(&self, server: &str, claim: ClaimKey) {
        let mut inner = self.inner.lock();
        if let Some(previous) = inner.by_claim.remove(&claim) {
            inner.by_server.remove(&previous);
        }
        inner.forget_server(server);
        inner.by_claim.insert(claim.clone(), server.to_string());
        inner.by_server.insert(
            server.to_string(),
            Assumption {
                claim,
                written: None,
                seen: false,
            },
        );
    }

    /// The write to the claim succeeded and returned this resourceVersion.
    pub fn written(&self, server: &str, resource_version: Option<String>) {
        if let Some(a) = self.inner.lock().by_server.get_mut(server) {
            a.written = resource_version;
        }
    }

    /// The write failed: the server was never recorded on the claim.
    pub fn forget(&self, server: &str) {
        self.inner.lock().forget_server(server);
    }

    /// A server watch event (`None`: deleted).
    pub fn observe_server(&self, name: &str, server: Option<&Server>) {
        let taken = server.is_none_or(|s| s.spec.server_claim_ref.is_some());
        if taken {
            self.inner.lock().forget_server(name);
        }
    }

    /// A claim watch event (`None`: deleted). Returns the server whose assumption ended,
    /// if any, so the caller can give other claims a chance at it.
    pub fn observe_claim(&self, key: &ClaimKey, claim: Option<&ServerClaim>) -> Option<String> {
        let mut inner = self.inner.lock();
        let server = inner.by_claim.get(key)?.clone();
        let a = inner.by_server.get_mut(&server)?;
        let ended = match claim {
            None => true,
            Some(c) => {
                if a.written.is_some()
                    && a.written.as_deref() == c.metadata.resource_version.as_deref()
                {
                    a.seen = true;
                }
                let names_server = c.spec.server_ref.as_ref().is_some_and(|r| r.name == server);
                a.seen && !names_server
            }
        };
        ended.then(|| {
            inner.forget_server(&server);
            server
        })
    }

    /// After a claim relist: the cache now holds every claim's latest state, so a written
    /// assumption is seen, and ends if its claim no longer names the server.
    pub fn relisted_claims(
        &self,
        claim_names: &dyn Fn(&ClaimKey) -> Option<String>,
    ) -> Vec<String> {
        let mut inner = self.inner.lock();
        let mut ended = Vec::new();
        for (server, a) in inner.by_server.iter_mut() {
            if a.written.is_some() {
                a.seen = true;
                if claim_names(&a.claim).as_deref() != Some(server.as_str()) {
                    ended.push(server.clone());
                }
            }
        }
        for server in &ended {
            inner.forget_server(server);
        }
        ended
    }

    /// After a server relist: assumptions on servers that are gone or taken end.
    pub fn relisted_servers(&self, still_free: &dyn Fn(&str) -> bool) {
        let mut inner = self.inner.lock();
        let ended: Vec<String> = inner
            .by_server
            .keys()
            .filter(|s| !still_free(s))
            .cloned()
            .collect();
        for server in &ended {
            inner.forget_server(server);
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().by_server.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The key of a claim object.
pub fn claim_key(claim: &ServerClaim) -> ClaimKey {
    (
        meta::namespace(claim).to_string(),
        meta::name(claim).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ServerClaimRef, ServerClaimSpec, ServerRef, ServerSpec};
    use kube::api::ObjectMeta;

    fn claim(name: &str, server: Option<&str>, rv: &str) -> ServerClaim {
        ServerClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: ServerClaimSpec {
                server_ref: server.map(|s| ServerRef { name: s.into() }),
                ..Default::default()
            },
            status: None,
        }
    }

    fn key(name: &str) -> ClaimKey {
        ("ns".into(), name.into())
    }

    #[test]
    fn skips_a_server_chosen_for_another_claim_until_the_server_side_shows_it() {
        let a = AssumedChoices::new();
        a.assume("s1", key("c1"));
        assert!(a.chosen_for_other("s1", &key("c2")));
        assert!(!a.chosen_for_other("s1", &key("c1")));
        a.written("s1", Some("7".into()));
        // An older claim event (before our write) does not end it.
        assert_eq!(
            a.observe_claim(&key("c1"), Some(&claim("c1", None, "5"))),
            None
        );
        assert!(a.chosen_for_other("s1", &key("c2")));
        // The server side took it.
        let mut server = crate::api::Server::new("s1", ServerSpec::default());
        server.spec.server_claim_ref = Some(ServerClaimRef {
            namespace: "ns".into(),
            name: "c1".into(),
            uid: None,
        });
        a.observe_server("s1", Some(&server));
        assert!(a.is_empty());
    }

    #[test]
    fn ends_when_the_claim_cache_caught_up_and_shows_the_choice_withdrawn() {
        let a = AssumedChoices::new();
        a.assume("s1", key("c1"));
        a.written("s1", Some("7".into()));
        assert_eq!(
            a.observe_claim(&key("c1"), Some(&claim("c1", Some("s1"), "7"))),
            None
        );
        assert_eq!(
            a.observe_claim(&key("c1"), Some(&claim("c1", None, "9"))),
            Some("s1".into())
        );
        assert!(!a.chosen_for_other("s1", &key("c2")));
    }

    #[test]
    fn a_failed_write_or_a_deleted_claim_ends_it() {
        let a = AssumedChoices::new();
        a.assume("s1", key("c1"));
        a.forget("s1");
        assert!(a.is_empty());
        a.assume("s2", key("c1"));
        assert_eq!(a.observe_claim(&key("c1"), None), Some("s2".into()));
        assert!(a.is_empty());
    }

    #[test]
    fn a_new_choice_for_the_same_claim_replaces_the_old_one() {
        let a = AssumedChoices::new();
        a.assume("s1", key("c1"));
        a.assume("s2", key("c1"));
        assert!(!a.chosen_for_other("s1", &key("c2")));
        assert!(a.chosen_for_other("s2", &key("c2")));
        assert_eq!(a.len(), 1);
    }
}
