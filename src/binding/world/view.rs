//! Read-only views of the other kind, as the decision functions see them.
//!
//! The controllers feed the catalogs from their watch caches; tests and the model check
//! build them by hand. Overlays let a controller re-decide with one object read live from
//! the API server ("confirmed by a live GET") without copying the whole cache.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use crate::api::{CachedClaim, CachedServer};

use crate::binding::few::Few;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::index::{FreeServerIndex, selector_keys};
use crate::binding::placement::{PickInputs, Placement, WaitingClaims, place, place_named};

/// Whether absences in the view are confirmed by a live read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// The view is the watch cache, which may lag.
    Cached,
    /// The object the decision hinges on was just read live from the API server.
    Confirmed,
}

/// What the claim controller may know about servers.
pub trait ServerView {
    /// The server of this name, if the view has it.
    fn server(&self, name: &str) -> Option<&CachedServer>;
    /// Servers whose `serverClaimRef` names this claim's namespace and name (any uid).
    fn reserved_for(&self, namespace: &str, name: &str) -> Vec<&CachedServer>;
    /// Where `claim` goes among the free servers ([`place`]).
    fn place(&self, claim: &CachedClaim, inputs: &PickInputs<'_>) -> Placement<'_>;
    /// Whether the fair order lets `claim`, which names `server`, take it now
    /// ([`place_named`]).
    fn place_named(
        &self,
        claim: &CachedClaim,
        server: &str,
        inputs: &PickInputs<'_>,
    ) -> Placement<'_>;
    /// Every server the view holds (for why a claim waits: [`crate::binding::protocol::why`]).
    fn all(&self) -> Box<dyn Iterator<Item = &CachedServer> + '_>;
}

/// What the server controller may know about claims.
pub trait ClaimView {
    /// The claim of this namespace and name, if the view has it.
    fn claim(&self, namespace: &str, name: &str) -> Option<&CachedClaim>;
    /// Claims whose `spec.serverRef` names this server.
    fn claims_naming(&self, server: &str) -> Vec<&CachedClaim>;
}

fn claim_key(namespace: &str, name: &str) -> ClaimKey {
    ClaimKey::of(namespace, name)
}

/// Every server, indexed for the claim controller's questions.
#[derive(Clone, Debug, Default)]
pub struct ServerCatalog {
    servers: BTreeMap<String, Arc<CachedServer>>,
    free: FreeServerIndex,
    reserved: HashMap<ClaimKey, Few<String>>,
    /// Claims a server's ref names without a uid (reservations by name), with how many
    /// servers do: such a claim adopts rather than picks.
    reserved_by_name: BTreeMap<ClaimKey, usize>,
}

impl ServerCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a catalog from a list (a relist, or a test's world).
    pub fn from_servers(servers: impl IntoIterator<Item = impl Into<Arc<CachedServer>>>) -> Self {
        let mut catalog = Self::new();
        for server in servers {
            catalog.upsert(server);
        }
        catalog
    }

    /// Replaces every server (a relist), keeping the label keys the index tracks.
    pub fn replace_all(&mut self, servers: impl IntoIterator<Item = impl Into<Arc<CachedServer>>>) {
        let mut fresh = Self {
            free: self.free.emptied(),
            ..Self::default()
        };
        for server in servers {
            fresh.upsert(server);
        }
        *self = fresh;
    }

    /// Records a server's latest state (a watch ADDED or MODIFIED event).
    pub fn upsert(&mut self, server: impl Into<Arc<CachedServer>>) {
        let server = server.into();
        let name = meta::name(&*server).to_string();
        self.forget_reservation(&name);
        self.free.upsert(&server);
        if let Some(r) = &server.spec.server_claim_ref {
            let key = claim_key(&r.namespace, &r.name);
            if r.uid.as_deref().is_none_or(str::is_empty) {
                *self.reserved_by_name.entry(key.clone()).or_default() += 1;
            }
            self.reserved.entry(key).or_default().insert(name.clone());
        }
        self.servers.insert(name, server);
    }

    /// Forgets a server (a watch DELETED event).
    pub fn remove(&mut self, name: &str) {
        self.forget_reservation(name);
        self.free.remove(name);
        self.servers.remove(name);
    }

    fn forget_reservation(&mut self, name: &str) {
        let Some(old) = self.servers.get(name) else {
            return;
        };
        if let Some(r) = &old.spec.server_claim_ref {
            let key = claim_key(&r.namespace, &r.name);
            if r.uid.as_deref().is_none_or(str::is_empty)
                && let Some(count) = self.reserved_by_name.get_mut(&key)
            {
                *count -= 1;
                if *count == 0 {
                    self.reserved_by_name.remove(&key);
                }
            }
            if let Some(names) = self.reserved.get_mut(&key) {
                names.remove(name);
                if names.is_empty() {
                    self.reserved.remove(&key);
                }
            }
        }
    }

    /// Whether the free-server index already tracks every label key `claim`'s selector
    /// reads (so [`ServerCatalog::track_selectors`] would change nothing).
    pub fn tracks_selector_of(&self, claim: &CachedClaim) -> bool {
        claim
            .spec
            .server_selector
            .as_ref()
            .is_none_or(|s| self.free.tracks(s))
    }

    /// Has the free-server index split its classes by every label key these claims'
    /// selectors read, so their picks take the fast path (see [`FreeServerIndex`]).
    pub fn track_selectors<'a>(&mut self, claims: impl IntoIterator<Item = &'a CachedClaim>) {
        let keys: Vec<&str> = claims
            .into_iter()
            .filter_map(|c| c.spec.server_selector.as_ref())
            .flat_map(selector_keys)
            .collect();
        self.free
            .track_keys(keys, self.servers.values().map(Arc::as_ref));
    }

    /// This catalog, tracking the selector keys of `claims` (for worlds built by hand).
    pub fn tracking<'a>(mut self, claims: impl IntoIterator<Item = &'a CachedClaim>) -> Self {
        self.track_selectors(claims);
        self
    }

    /// The free-server index (for its figures).
    /// The waiting claims that a server reserved for them by name fits: they adopt it,
    /// not a free one.
    fn adopting<'a>(&'a self, waiting: &'a WaitingClaims) -> Vec<&'a ClaimKey> {
        let adopts = |key: &ClaimKey| {
            let shape = waiting.shape_of(key);
            let reserved = self.reserved_for(&key.namespace, &key.name).into_iter();
            let by_name = |s: &&CachedServer| {
                s.spec
                    .server_claim_ref
                    .as_ref()
                    .is_some_and(|r| r.uid.as_deref().is_none_or(str::is_empty))
            };
            shape.is_some_and(|shape| reserved.filter(by_name).any(|s| shape.fits_server(s)))
        };
        self.reserved_by_name.keys().filter(|k| adopts(k)).collect()
    }

    pub fn free_index(&self) -> &FreeServerIndex {
        &self.free
    }

    pub fn iter(&self) -> impl Iterator<Item = &CachedServer> {
        self.servers.values().map(Arc::as_ref)
    }

    /// The server of this name as shared with the watch cache.
    /// Every server as shared with the watch cache.
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<CachedServer>> + '_ {
        self.servers.values()
    }

    pub fn shared(&self, name: &str) -> Option<&Arc<CachedServer>> {
        self.servers.get(name)
    }

    /// The servers' names after `after` (all of them from `None`), in order.
    pub fn names_after<'a>(&'a self, after: Option<&str>) -> impl Iterator<Item = &'a str> + 'a {
        let from = match after {
            Some(name) => Bound::Excluded(name),
            None => Bound::Unbounded,
        };
        self.servers
            .range::<str, _>((from, Bound::Unbounded))
            .map(|(name, _)| name.as_str())
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

impl ServerView for ServerCatalog {
    fn server(&self, name: &str) -> Option<&CachedServer> {
        self.servers.get(name).map(Arc::as_ref)
    }

    fn reserved_for(&self, namespace: &str, name: &str) -> Vec<&CachedServer> {
        self.reserved
            .get(&claim_key(namespace, name))
            .into_iter()
            .flat_map(Few::iter)
            .filter_map(|n| self.server(n))
            .collect()
    }

    fn place(&self, claim: &CachedClaim, inputs: &PickInputs<'_>) -> Placement<'_> {
        let adopting = self.adopting(inputs.waiting);
        let server_of = |name: &str| self.server(name);
        place(claim, &self.free, &server_of, &adopting, inputs)
    }

    fn place_named(
        &self,
        claim: &CachedClaim,
        server: &str,
        inputs: &PickInputs<'_>,
    ) -> Placement<'_> {
        let adopting = self.adopting(inputs.waiting);
        let server_of = |name: &str| self.server(name);
        place_named(claim, server, &self.free, &server_of, &adopting, inputs)
    }

    fn all(&self) -> Box<dyn Iterator<Item = &CachedServer> + '_> {
        Box::new(self.iter())
    }
}

/// Every claim, indexed for the server controller's questions.
#[derive(Clone, Debug, Default)]
pub struct ClaimCatalog {
    claims: BTreeMap<ClaimKey, Arc<CachedClaim>>,
    naming: HashMap<String, Few<ClaimKey>>,
    waiting: WaitingClaims,
    /// `waiting` as a cache that has not seen the claims naming servers would show it
    /// ([`WaitingClaims::without_serving`]), made at most once per state of the catalog:
    /// the model check decides every claim of a state so ([`crate::binding::steps::Sight`]).
    waiting_unseen: std::sync::OnceLock<WaitingClaims>,
}

impl ClaimCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_claims(claims: impl IntoIterator<Item = impl Into<Arc<CachedClaim>>>) -> Self {
        let mut catalog = Self::new();
        for claim in claims {
            catalog.upsert(claim);
        }
        catalog
    }

    /// Records a claim's latest state (a watch ADDED or MODIFIED event).
    pub fn upsert(&mut self, claim: impl Into<Arc<CachedClaim>>) {
        let claim = claim.into();
        let key = claim_key(meta::namespace(&*claim), meta::name(&*claim));
        self.forget_naming(&key);
        if let Some(server) = &claim.spec.server_ref {
            self.naming
                .entry(server.name.clone())
                .or_default()
                .insert(key.clone());
        }
        self.waiting.put(&key, Some(&claim));
        self.waiting_unseen.take();
        self.claims.insert(key, claim);
    }

    /// Forgets a claim (a watch DELETED event).
    pub fn remove(&mut self, namespace: &str, name: &str) {
        let key = claim_key(namespace, name);
        self.forget_naming(&key);
        self.waiting.put(&key, None);
        self.waiting_unseen.take();
        self.claims.remove(&key);
    }

    fn forget_naming(&mut self, key: &ClaimKey) {
        let Some(old) = self.claims.get(key) else {
            return;
        };
        if let Some(server) = &old.spec.server_ref
            && let Some(keys) = self.naming.get_mut(&server.name)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.naming.remove(&server.name);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &CachedClaim> {
        self.claims.values().map(Arc::as_ref)
    }

    /// Every claim as shared with the watch cache.
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<CachedClaim>> {
        self.claims.values()
    }

    /// The claim as shared with the watch cache.
    pub fn shared(&self, namespace: &str, name: &str) -> Option<&Arc<CachedClaim>> {
        self.claims.get(&claim_key(namespace, name))
    }

    /// The claims' keys after `after` (all of them from `None`), in order.
    pub fn keys_after<'a>(
        &'a self,
        after: Option<&ClaimKey>,
    ) -> impl Iterator<Item = &'a ClaimKey> + 'a {
        let from = match after {
            Some(key) => Bound::Excluded(key.clone()),
            None => Bound::Unbounded,
        };
        self.claims
            .range((from, Bound::Unbounded))
            .map(|(key, _)| key)
    }

    /// The claims of one namespace, by name.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = &'a Arc<CachedClaim>> + 'a {
        self.claims
            .range(claim_key(namespace, "")..)
            .take_while(move |(k, _)| k.namespace == namespace)
            .map(|(_, c)| c)
    }

    /// The waiting claims by shape, as the matching and the fair order read them.
    pub fn waiting(&self) -> &WaitingClaims {
        &self.waiting
    }

    /// The waiting claims as a cache that has not seen the claims naming servers would
    /// show them ([`WaitingClaims::without_serving`]).
    pub fn waiting_unseen(&self) -> &WaitingClaims {
        self.waiting_unseen
            .get_or_init(|| self.waiting.without_serving())
    }

    pub fn len(&self) -> usize {
        self.claims.len()
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

impl ClaimView for ClaimCatalog {
    fn claim(&self, namespace: &str, name: &str) -> Option<&CachedClaim> {
        self.claims
            .get(&claim_key(namespace, name))
            .map(Arc::as_ref)
    }

    fn claims_naming(&self, server: &str) -> Vec<&CachedClaim> {
        self.naming
            .get(server)
            .into_iter()
            .flat_map(Few::iter)
            .filter_map(|k| self.claims.get(k).map(Arc::as_ref))
            .collect()
    }
}

/// A server view in which one server is replaced by what a live GET returned
/// (`None`: the API server says it does not exist).
pub struct WithLiveServer<'a, V: ?Sized> {
    pub base: &'a V,
    pub name: &'a str,
    pub live: Option<&'a CachedServer>,
}

impl<V: ServerView + ?Sized> ServerView for WithLiveServer<'_, V> {
    fn server(&self, name: &str) -> Option<&CachedServer> {
        if name == self.name {
            self.live
        } else {
            self.base.server(name)
        }
    }

    fn reserved_for(&self, namespace: &str, name: &str) -> Vec<&CachedServer> {
        let mut servers: Vec<&CachedServer> = self
            .base
            .reserved_for(namespace, name)
            .into_iter()
            .filter(|s| meta::name(*s) != self.name)
            .collect();
        if let Some(live) = self.live
            && live
                .spec
                .server_claim_ref
                .as_ref()
                .is_some_and(|r| r.namespace == namespace && r.name == name)
        {
            servers.push(live);
        }
        servers
    }

    fn place(&self, claim: &CachedClaim, inputs: &PickInputs<'_>) -> Placement<'_> {
        // The live server is never a candidate here: overlays are only used to confirm
        // that a named server is gone, never to pick one.
        let skip = |n: &str| n == self.name || (inputs.skip)(n);
        let inputs = PickInputs {
            skip: &skip,
            ..*inputs
        };
        self.base.place(claim, &inputs)
    }

    fn place_named(
        &self,
        claim: &CachedClaim,
        server: &str,
        inputs: &PickInputs<'_>,
    ) -> Placement<'_> {
        if server == self.name {
            // Overlays confirm that a named server is gone, never offer it.
            return Placement::NoMatch;
        }
        self.base.place_named(claim, server, inputs)
    }

    fn all(&self) -> Box<dyn Iterator<Item = &CachedServer> + '_> {
        let others = self.base.all().filter(|s| meta::name(*s) != self.name);
        Box::new(others.chain(self.live))
    }
}

/// A claim view in which one claim is replaced by what a live GET returned.
pub struct WithLiveClaim<'a, V: ?Sized> {
    pub base: &'a V,
    pub namespace: &'a str,
    pub name: &'a str,
    pub live: Option<&'a CachedClaim>,
}

impl<V: ClaimView + ?Sized> ClaimView for WithLiveClaim<'_, V> {
    fn claim(&self, namespace: &str, name: &str) -> Option<&CachedClaim> {
        if namespace == self.namespace && name == self.name {
            self.live
        } else {
            self.base.claim(namespace, name)
        }
    }

    fn claims_naming(&self, server: &str) -> Vec<&CachedClaim> {
        let is_overlaid =
            |c: &CachedClaim| meta::namespace(c) == self.namespace && meta::name(c) == self.name;
        let mut claims: Vec<&CachedClaim> = self
            .base
            .claims_naming(server)
            .into_iter()
            .filter(|c| !is_overlaid(c))
            .collect();
        if let Some(live) = self.live
            && live
                .spec
                .server_ref
                .as_ref()
                .is_some_and(|r| r.name == server)
        {
            claims.push(live);
        }
        claims
    }
}
