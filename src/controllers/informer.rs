//! One watch per kind, shared by both controllers.
//!
//! Each watch event updates, in order: kube-runtime's reflector store (which the
//! `Controller`s read their primary objects from), the binding core's catalog of that
//! kind (which both controllers decide against), and the assumed-choice cache. Then the
//! binding core's wake-up rules (`binding::triggers`) say which objects each controller
//! must look at again. They are applied here, not by kube-runtime's `watches` mappers,
//! because they need the object as it was before the event as well as after: a claim
//! that stops naming a server, or is deleted, must wake the server it named.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use std::fmt::Debug;

use futures::StreamExt;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use serde::de::DeserializeOwned;
use std::time::Instant;

use tokio::sync::watch;

use super::own_writes::OwnWrites;

use crate::api::{Server, ServerClaim};
use crate::binding::assumed::ends_on_claim_event;
use crate::binding::triggers;
use crate::binding::{
    AssumedChoices, ClaimCatalog, ClaimKey, ClaimView, ServerCatalog, ServerView, claim_key, meta,
};

/// Where a controller wants its triggers while it runs (`None`: not running; triggers
/// are dropped and the controller resyncs everything when it starts).
type TriggerSlot<K> = Mutex<Option<UnboundedSender<ObjectRef<K>>>>;

/// The watch caches both controllers share.
///
/// The catalogs' locks are fair (a waiting writer blocks new readers), so two readers
/// taking them in opposite orders could deadlock with the two watches' writers. They
/// are private: the only way to hold more than one is [`Caches::read`] or
/// [`Caches::read_with_assumed`], which take them in the one order (servers, claims,
/// assumed choices). A watch's writer takes its own catalog's lock alone.
pub struct Caches {
    servers: RwLock<ServerCatalog>,
    claims: RwLock<ClaimCatalog>,
    pub server_store: Store<Server>,
    pub claim_store: Store<ServerClaim>,
    assumed: Mutex<AssumedChoices>,
    /// Whether servers and claims have each been listed into the catalogs once.
    synced: [watch::Sender<bool>; 2],
    claim_triggers: TriggerSlot<ServerClaim>,
    server_triggers: TriggerSlot<Server>,
    /// Writes of this process the watches have not delivered yet (locked alone).
    own_writes: Mutex<OwnWrites>,
}

/// Both catalogs, read-locked in the caches' lock order.
pub struct CatalogsRead<'a> {
    pub servers: RwLockReadGuard<'a, ServerCatalog>,
    pub claims: RwLockReadGuard<'a, ClaimCatalog>,
}

/// The catalogs and the assumed choices, locked in the caches' lock order.
pub struct CatalogsAndAssumed<'a> {
    pub servers: RwLockReadGuard<'a, ServerCatalog>,
    pub claims: RwLockReadGuard<'a, ClaimCatalog>,
    pub assumed: MutexGuard<'a, AssumedChoices>,
}

/// The writer halves, consumed by [`Caches::run`].
pub struct CacheWriters {
    servers: Writer<Server>,
    claims: Writer<ServerClaim>,
}

impl Caches {
    pub fn new() -> (Arc<Self>, CacheWriters) {
        let (server_store, servers) = reflector::store();
        let (claim_store, claims) = reflector::store();
        let caches = Arc::new(Self {
            servers: RwLock::default(),
            claims: RwLock::default(),
            server_store,
            claim_store,
            assumed: Mutex::default(),
            synced: [watch::channel(false).0, watch::channel(false).0],
            claim_triggers: Mutex::new(None),
            server_triggers: Mutex::new(None),
            own_writes: Mutex::default(),
        });
        (caches, CacheWriters { servers, claims })
    }

    /// Both catalogs, as one consistent view.
    pub fn read(&self) -> CatalogsRead<'_> {
        let servers = self.servers.read();
        let claims = self.claims.read();
        CatalogsRead { servers, claims }
    }

    /// Both catalogs and the assumed choices, for a decision that may assume a pick.
    pub fn read_with_assumed(&self) -> CatalogsAndAssumed<'_> {
        let CatalogsRead { servers, claims } = self.read();
        let assumed = self.assumed.lock();
        CatalogsAndAssumed {
            servers,
            claims,
            assumed,
        }
    }

    /// Records that the claim write carrying the pick of `server` for `claim` landed, at
    /// `version`. The assumed choices' lock is taken alone.
    pub fn claim_write_landed(&self, server: &str, claim: &ClaimKey, version: Option<String>) {
        self.assumed.lock().written(server, claim, version);
    }

    /// Records a write this process made (the object as the API server returned it), so
    /// that reconciles of older versions wait for the watch to deliver it.
    pub fn wrote<K: kube::Resource<DynamicType = ()>>(&self, written: &K) {
        if let Some(version) = written.meta().resource_version.clone() {
            let key = own_write_key(written);
            self.own_writes.lock().wrote(key, version, Instant::now());
        }
    }

    /// Whether `obj`, as the cache shows it, is older than a write of this process that
    /// the watch has yet to deliver (see [`OwnWrites`]).
    pub fn behind_own_write<K: kube::Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let version = obj.meta().resource_version.as_deref();
        self.own_writes
            .lock()
            .behind(&own_write_key(obj), version, Instant::now())
    }

    /// Waits until both kinds have been listed into the catalogs once.
    pub async fn wait_until_ready(&self) {
        for synced in &self.synced {
            // Errs only when the sender is gone, which it never is while `self` lives.
            let _ = synced.subscribe().wait_for(|s| *s).await;
        }
    }

    /// Whether both kinds have been listed once (for `/readyz`).
    pub fn has_synced(&self) -> bool {
        self.synced.iter().all(|s| *s.borrow())
    }

    /// Runs both watches until the stream ends (never, in practice: the watcher retries
    /// with backoff) or the returned future is dropped.
    pub async fn run(self: Arc<Self>, client: kube::Client, writers: CacheWriters) {
        let servers = watch(
            Api::<Server>::all(client.clone()),
            writers.servers,
            self.clone(),
            Kind::Servers,
        );
        let claims = watch(
            Api::<ServerClaim>::all(client),
            writers.claims,
            self.clone(),
            Kind::Claims,
        );
        futures::join!(servers, claims);
    }

    /// Routes claim-controller triggers to `tx` and enqueues every claim.
    pub fn attach_claim_controller(&self, tx: UnboundedSender<ObjectRef<ServerClaim>>) {
        // Attach first, then enqueue: an event in between is queued twice, never lost.
        *self.claim_triggers.lock() = Some(tx.clone());
        for c in self.claims.read().iter() {
            let _ = tx.unbounded_send(ObjectRef::from_obj(c));
        }
    }

    /// Routes server-controller triggers to `tx` and enqueues every server.
    pub fn attach_server_controller(&self, tx: UnboundedSender<ObjectRef<Server>>) {
        *self.server_triggers.lock() = Some(tx.clone());
        for s in self.servers.read().iter() {
            let _ = tx.unbounded_send(ObjectRef::from_obj(s));
        }
    }

    pub fn detach_controllers(&self) {
        *self.claim_triggers.lock() = None;
        *self.server_triggers.lock() = None;
    }

    /// Ends the assumption on `server` for `claim` after its write failed, and wakes the
    /// pending claims that passed the server over.
    pub fn claim_write_failed(&self, server: &str, claim: &ClaimKey) {
        let mut locked = self.read_with_assumed();
        let ended = locked.assumed.write_failed(server, claim);
        let Some(server) = ended else {
            return;
        };
        let wake = triggers::on_assumption_end(&server, &locked.servers, &locked.claims);
        let order = wake.claims_in_order(&locked.servers, &locked.claims);
        drop(locked);
        self.send(order, wake.servers);
    }

    fn on_server_event(&self, event: Delta<Server>) {
        let CatalogsAndAssumed {
            servers,
            claims,
            mut assumed,
        } = self.read_with_assumed();
        let wake = match event {
            Delta::Changed { old, new } => {
                let Some(name) = new.as_deref().or(old.as_deref()).map(meta::name) else {
                    return;
                };
                assumed.observe_server(name, new.as_deref());
                triggers::on_server_change(old.as_deref(), new.as_deref(), &claims)
            }
            Delta::Relisted => {
                let latest = |name: &str| servers.server(name).cloned();
                assumed.relisted_servers(&latest);
                triggers::on_relist(&servers, &claims)
            }
        };
        let order = wake.claims_in_order(&servers, &claims);
        drop((assumed, claims, servers));
        self.send(order, wake.servers);
    }

    fn on_claim_event(&self, event: Delta<ServerClaim>) {
        let CatalogsAndAssumed {
            servers,
            claims,
            mut assumed,
        } = self.read_with_assumed();
        let (mut wake, ended) = match event {
            Delta::Changed { old, new } => {
                let Some(key) = new.as_deref().or(old.as_deref()).map(claim_key) else {
                    return;
                };
                let ended = assumed.observe_claim(&key, new.as_deref());
                let wake =
                    triggers::on_claim_change(old.as_deref(), new.as_deref(), &servers, &claims);
                (wake, ended.into_iter().collect())
            }
            Delta::Relisted => {
                let latest = |k: &ClaimKey| claims.claim(&k.namespace, &k.name).cloned();
                let ended = assumed.relisted_claims(ends_on_claim_event, &latest);
                (triggers::on_relist(&servers, &claims), ended)
            }
        };
        drop(assumed);
        for server in ended {
            wake.extend(triggers::on_assumption_end(&server, &servers, &claims));
        }
        let order = wake.claims_in_order(&servers, &claims);
        drop((claims, servers));
        self.send(order, wake.servers);
    }

    /// Hands the woken objects to the running controllers, claims in the order given
    /// ([`triggers::Wake::claims_in_order`]). Called with no cache lock held: `attach_*` takes a
    /// trigger slot and then a cache lock.
    fn send(&self, claims: Vec<ClaimKey>, servers: BTreeSet<String>) {
        if let Some(tx) = self.claim_triggers.lock().as_ref() {
            for key in claims {
                let _ = tx.unbounded_send(ObjectRef::new(&key.name).within(&key.namespace));
            }
        }
        if let Some(tx) = self.server_triggers.lock().as_ref() {
            for name in servers {
                let _ = tx.unbounded_send(ObjectRef::new(&name));
            }
        }
    }
}

/// A watch event reduced to what the triggers need. Objects are the watch cache's own
/// copies, shared.
enum Delta<K> {
    /// One object changed (`new: None`: deleted); `old` is the catalog's previous copy.
    Changed {
        old: Option<Arc<K>>,
        new: Option<Arc<K>>,
    },
    /// A relist replaced the whole catalog.
    Relisted,
}

/// An object's key among [`Caches::own_writes`]: kind, namespace and name.
fn own_write_key<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    format!("{}/{namespace}/{name}", K::kind(&()))
}

#[derive(Clone, Copy)]
enum Kind {
    Servers,
    Claims,
}

/// Drops what no decision reads before the object is cached: `managedFields` are most of
/// a written object's size. (The `last-applied-configuration` annotation stays: the
/// controllers write whole objects, and a write without it would erase it.)
fn strip_unread<K: kube::Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Feeds one kind's watch into its store and catalog, then wakes the controllers. The
/// catalog holds the store's copy of each object (one copy per object, shared).
async fn watch<K>(api: Api<K>, mut writer: Writer<K>, caches: Arc<Caches>, kind: Kind)
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Caches: Routes<K>,
{
    let mut events = watcher(api, watcher::Config::default())
        .modify(strip_unread)
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                // The watcher relists or rewatches by itself, with backoff.
                tracing::warn!(%error, "watch failed; retrying");
                continue;
            }
        };
        writer.apply_watcher_event(&event);
        caches.own_writes.lock().delivered_by(&event);
        let store = caches.store();
        let catalog = caches.catalog();
        let delta = match event {
            Event::Apply(obj) => {
                let Some(new) = store.get(&ObjectRef::from_obj(&obj)) else {
                    continue;
                };
                caches.before_put(&new);
                let old = catalog.get(&obj);
                catalog.put(new.clone());
                Delta::Changed {
                    old,
                    new: Some(new),
                }
            }
            Event::Delete(obj) => {
                let old = catalog.get(&obj).or_else(|| Some(Arc::new(obj.clone())));
                catalog.delete(&obj);
                Delta::Changed { old, new: None }
            }
            Event::Init | Event::InitApply(_) => continue,
            Event::InitDone => {
                let all = store.state();
                for obj in &all {
                    caches.before_put(obj);
                }
                catalog.replace(all);
                caches.synced[kind as usize].send_replace(true);
                Delta::Relisted
            }
        };
        caches.route(delta);
    }
}

/// How `watch` reaches one kind's store, catalog and trigger routing.
trait Routes<K: kube::Resource<DynamicType = ()> + Clone> {
    fn store(&self) -> &Store<K>;
    fn catalog(&self) -> &dyn Catalog<K>;
    /// Runs before `obj` enters its catalog, with no catalog lock held.
    fn before_put(&self, _obj: &K) {}
    fn route(&self, delta: Delta<K>);
}

impl Routes<Server> for Caches {
    fn store(&self) -> &Store<Server> {
        &self.server_store
    }
    fn catalog(&self) -> &dyn Catalog<Server> {
        &self.servers
    }
    fn route(&self, delta: Delta<Server>) {
        self.on_server_event(delta);
    }
}

impl Routes<ServerClaim> for Caches {
    fn store(&self) -> &Store<ServerClaim> {
        &self.claim_store
    }
    fn catalog(&self) -> &dyn Catalog<ServerClaim> {
        &self.claims
    }
    /// The free-server index splits its classes by the label keys claims select on; a
    /// claim with a new key regroups it before the claim can be reconciled.
    fn before_put(&self, claim: &ServerClaim) {
        if !self.servers.read().tracks_selector_of(claim) {
            self.servers.write().track_selectors([claim]);
        }
    }
    fn route(&self, delta: Delta<ServerClaim>) {
        self.on_claim_event(delta);
    }
}

/// The catalog operations `watch` needs, for either kind.
trait Catalog<K>: Send + Sync {
    fn get(&self, obj: &K) -> Option<Arc<K>>;
    fn put(&self, obj: Arc<K>);
    fn delete(&self, obj: &K);
    fn replace(&self, all: Vec<Arc<K>>);
}

impl Catalog<Server> for RwLock<ServerCatalog> {
    fn get(&self, obj: &Server) -> Option<Arc<Server>> {
        self.read().shared(meta::name(obj)).cloned()
    }
    fn put(&self, obj: Arc<Server>) {
        self.write().upsert(obj);
    }
    fn delete(&self, obj: &Server) {
        self.write().remove(meta::name(obj));
    }
    fn replace(&self, all: Vec<Arc<Server>>) {
        self.write().replace_all(all);
    }
}

impl Catalog<ServerClaim> for RwLock<ClaimCatalog> {
    fn get(&self, obj: &ServerClaim) -> Option<Arc<ServerClaim>> {
        self.read()
            .shared(meta::namespace(obj), meta::name(obj))
            .cloned()
    }
    fn put(&self, obj: Arc<ServerClaim>) {
        self.write().upsert(obj);
    }
    fn delete(&self, obj: &ServerClaim) {
        self.write().remove(meta::namespace(obj), meta::name(obj));
    }
    fn replace(&self, all: Vec<Arc<ServerClaim>>) {
        *self.write() = ClaimCatalog::from_claims(all);
    }
}

impl OwnWrites {
    /// Feeds one watch event: an object delivered at a version, or a relist.
    fn delivered_by<K: kube::Resource<DynamicType = ()>>(&mut self, event: &Event<K>) {
        match event {
            Event::Apply(obj) => {
                let version = obj.meta().resource_version.as_deref().unwrap_or_default();
                self.delivered(&own_write_key(obj), Some(version));
            }
            Event::Delete(obj) => self.delivered(&own_write_key(obj), None),
            Event::InitDone => self.clear(),
            Event::Init | Event::InitApply(_) => {}
        }
    }
}
