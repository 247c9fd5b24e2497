//! One watch per kind, shared by both controllers.
//!
//! Each watch event updates, in order: kube-runtime's reflector store (which the
//! `Controller`s read their primary objects from), then the binder
//! ([`crate::binding::Binder`]), which says which objects each controller must look at
//! again. They are woken here, not by kube-runtime's `watches` mappers, because the
//! rules need the object as it was before the event as well as after: a claim that stops
//! naming a server, or is deleted, must wake the server it named.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event, watcher};
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::own_writes::{Delivered, OwnWrites};

use crate::api::{
    CachedClaim, CachedObject, CachedServer, Projected, ServerClass, ServerDisruptionBudget,
    ServerQuota, Trimmed,
};
use crate::binding::wakeups::{on_resync_tick, on_start_step};
use crate::binding::{
    Binder, BinderConfig, ClaimKey, ClaimStep, ClaimWork, Feed, ObjectWrite, ResyncCursor, Rules,
    Settles, Sight, Wake,
};
use k8s_openapi::api::core::v1::Namespace;

/// Where a controller wants its triggers while it runs (`None`: not running; triggers
/// are dropped and the controller resyncs everything when it starts).
type TriggerSlot<K> = Mutex<Option<UnboundedSender<ObjectRef<K>>>>;

/// The watch caches both controllers share: the reflector stores and the binder.
///
/// The binder is behind one lock: a claim reconcile decides and assumes its pick under
/// it (written), a server reconcile decides under it (read), a watch event applies
/// under it (written). The trigger slots and the own-writes record are locked alone,
/// never while the binder's lock is held.
pub struct SharedInformer {
    binder: RwLock<Binder>,
    pub server_store: Store<CachedServer>,
    pub claim_store: Store<CachedClaim>,
    /// Whether servers, claims, classes, namespaces, quotas and disruption budgets have
    /// each been listed into the binder once.
    synced: [watch::Sender<bool>; 6],
    /// Rung when the quotas' recount ([`super::quota`]) has work ([`wants_recount`]): a
    /// claim deleted (a charge may free), a relist, a quota not counted yet.
    pub recount_wanted: tokio::sync::Notify,
    /// Rung when the disruption budgets' status ([`super::budget_status`]) may change: a
    /// claim of a namespace with budgets changed, or a budget did.
    pub budget_recount_wanted: tokio::sync::Notify,
    /// Objects each watch received (added, changed, deleted or listed), by [`Kind`]:
    /// `server_binder_watch_events_total`.
    received: [AtomicU64; 6],
    claim_triggers: TriggerSlot<CachedClaim>,
    server_triggers: TriggerSlot<CachedServer>,
    /// Writes of this process the watches have not delivered yet (locked alone).
    own_writes: Mutex<OwnWrites>,
    /// Reconciles begun ([`SharedInformer::reconciles_begun`]).
    reconciles_begun: AtomicU64,
}

/// A write of this process in flight ([`SharedInformer::begin_write`]).
pub struct WriteInFlight<'a> {
    informer: &'a SharedInformer,
    key: String,
    /// Whom to wake if the watch delivered the write before its answer came.
    target: Target,
    ended: bool,
}

/// The object a write is of, as the controllers are woken for it.
enum Target {
    Claim(ClaimKey),
    Server(String),
    Other,
}

impl WriteInFlight<'_> {
    /// The write ended: at the `version` the API server answered, so that reconciles of
    /// older versions wait for the watch to deliver it, or failed (`None`).
    pub fn ended(mut self, version: Option<&str>) {
        self.end(version);
    }

    fn end(&mut self, version: Option<&str>) {
        self.ended = true;
        let version = version.map(str::to_string);
        let mut own = self.informer.own_writes.lock();
        let look_again = own.ended(&self.key, version, Instant::now());
        drop(own);
        if look_again {
            // Its reconcile is running still: kube-runtime takes this up once it ends.
            match std::mem::replace(&mut self.target, Target::Other) {
                Target::Claim(key) => self.informer.send(vec![key], BTreeSet::new()),
                Target::Server(name) => self.informer.send(Vec::new(), BTreeSet::from([name])),
                Target::Other => {}
            }
        }
    }
}

impl Drop for WriteInFlight<'_> {
    /// A write dropped unanswered (its reconcile cancelled) ends as a failed one.
    fn drop(&mut self) {
        if !self.ended {
            self.end(None);
        }
    }
}

/// What a reconcile decides on ([`SharedInformer::current`]).
pub enum Current<K> {
    /// The cache is behind this process's last write of the object: wait for the watch.
    Behind,
    /// The object is gone from the cache.
    Gone,
    /// The cache's copy, at least as new as this process's last write.
    Latest(Arc<K>),
}

/// The writer halves, consumed by [`SharedInformer::run`].
pub struct CacheWriters {
    servers: Writer<CachedServer>,
    claims: Writer<CachedClaim>,
    classes: Writer<ServerClass>,
    namespaces: Writer<Namespace>,
    quotas: Writer<ServerQuota>,
    budgets: Writer<ServerDisruptionBudget>,
}

impl SharedInformer {
    pub fn new(config: BinderConfig) -> (Arc<Self>, CacheWriters) {
        let (server_store, servers) = reflector::store();
        let (claim_store, claims) = reflector::store();
        let (_, classes) = reflector::store();
        let (_, namespaces) = reflector::store();
        let (_, quotas) = reflector::store();
        let (_, budgets) = reflector::store();
        let binder = Binder::new(Rules::real(), config, Timestamp::now());
        let informer = Arc::new(Self {
            binder: RwLock::new(binder),
            server_store,
            claim_store,
            synced: std::array::from_fn(|_| watch::channel(false).0),
            received: Default::default(),
            recount_wanted: tokio::sync::Notify::new(),
            budget_recount_wanted: tokio::sync::Notify::new(),
            claim_triggers: Mutex::new(None),
            server_triggers: Mutex::new(None),
            own_writes: Mutex::default(),
            reconciles_begun: AtomicU64::new(0),
        });
        let writers = CacheWriters {
            servers,
            claims,
            classes,
            namespaces,
            quotas,
            budgets,
        };
        (informer, writers)
    }

    /// The binder, to read (a server reconcile, the metrics' inventory).
    pub fn read(&self) -> RwLockReadGuard<'_, Binder> {
        self.binder.read()
    }

    /// The binder, to change (a claim reconcile, which may assume a pick).
    pub fn write(&self) -> RwLockWriteGuard<'_, Binder> {
        self.binder.write()
    }

    /// Decides a claim's step under the binder's lock, so that a pick is assumed before
    /// any other reconcile can pick the same server, and wakes whom starting it wakes.
    pub fn reconcile_claim(
        &self,
        claim: &CachedClaim,
        live: Option<(&str, Option<&CachedServer>)>,
    ) -> ClaimStep {
        let mut binder = self.binder.write();
        let step = binder.claim_step(claim, live, Sight::All, Timestamp::now());
        binder.start(claim, &step);
        if let ClaimStep::Act(work) = &step {
            let wakes = work.wakes.clone();
            self.wake(binder, wakes);
        }
        step
    }

    /// Reports the end of a claim's object write to the binder and wakes whom it says.
    /// Most writes tell the binder nothing: those skip its lock.
    pub fn claim_object_written(
        &self,
        work: &ClaimWork,
        claim: &CachedClaim,
        written: ObjectWrite<'_>,
    ) {
        if !work.reports_object_write(&written) {
            return;
        }
        let mut binder = self.binder.write();
        let wake = binder.claim_object_written(work, claim, written, Timestamp::now());
        self.wake(binder, wake);
    }

    /// Reports a server write the API server refused to the binder.
    pub fn server_write_refused(&self, server: &CachedServer, message: &str) {
        let mut binder = self.binder.write();
        let wake = binder.server_write_refused(server, message, Timestamp::now());
        self.wake(binder, wake);
    }

    /// Reports a claim's status write to the binder.
    pub fn claim_status_written(&self, work: &ClaimWork) {
        if !work.reports_status_write() {
            return;
        }
        self.binder
            .write()
            .claim_status_written(work, Timestamp::now());
    }

    /// Starts a write of `obj` by this process: until the returned guard says how it
    /// ended (or is dropped), deliveries of `obj` are superseded by it ([`OwnWrites`]).
    pub fn begin_write<K: kube::Resource<DynamicType = ()>>(&self, obj: &K) -> WriteInFlight<'_> {
        let key = own_write_key(obj);
        self.own_writes.lock().began(&key);
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let target = match (&*K::kind(&()), &meta.namespace) {
            ("ServerClaim", Some(namespace)) => Target::Claim(ClaimKey::of(namespace, &name)),
            ("Server", _) => Target::Server(name),
            _ => Target::Other,
        };
        WriteInFlight {
            informer: self,
            key,
            target,
            ended: false,
        }
    }

    /// The copy of `queued` a reconcile decides on. kube-runtime hands a reconcile the
    /// copy it read when it queued it, which may predate this process's last write:
    /// while the watch has yet to deliver that write (see [`OwnWrites`]), `Behind`; once
    /// it has, the store holds it (the store is written before the record is cleared),
    /// so the store's copy, read after that check, is never older than the write.
    pub fn current<K>(&self, store: &Store<K>, queued: &K) -> Current<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone,
    {
        // Every reconcile of both controllers begins here.
        self.reconciles_begun.fetch_add(1, Ordering::Relaxed);
        let version = queued.meta().resource_version.as_deref();
        let key = own_write_key(queued);
        if self.own_writes.lock().behind(&key, version, Instant::now()) {
            return Current::Behind;
        }
        match store.get(&ObjectRef::from_obj(queued)) {
            Some(latest) => Current::Latest(latest),
            None => Current::Gone,
        }
    }

    /// Waits until both kinds have been listed into the binder once.
    pub async fn wait_until_ready(&self) {
        for synced in &self.synced {
            // Errs only when the sender is gone, which it never is while `self` lives.
            let _ = synced.subscribe().wait_for(|s| *s).await;
        }
    }

    /// Whether both kinds have been listed once (for `/readyz`).
    /// Objects each watch received so far, by resource.
    pub fn received(&self) -> [(&'static str, u64); 6] {
        KINDS.map(|k| {
            (
                k.resource(),
                self.received[k as usize].load(Ordering::Relaxed),
            )
        })
    }

    pub fn has_synced(&self) -> bool {
        self.synced.iter().all(|s| *s.borrow())
    }

    /// Runs both watches until the stream ends (never, in practice: the watcher retries
    /// with backoff) or the returned future is dropped.
    pub async fn run(self: Arc<Self>, client: kube::Client, writers: CacheWriters) {
        let servers = watch(client.clone(), writers.servers, self.clone(), Kind::Servers);
        let claims = watch(client.clone(), writers.claims, self.clone(), Kind::Claims);
        let classes = watch(client.clone(), writers.classes, self.clone(), Kind::Classes);
        let namespaces = watch(
            client.clone(),
            writers.namespaces,
            self.clone(),
            Kind::Namespaces,
        );
        let quotas = watch(client.clone(), writers.quotas, self.clone(), Kind::Quotas);
        let budgets = watch(client, writers.budgets, self.clone(), Kind::Budgets);
        futures::join!(servers, claims, classes, namespaces, quotas, budgets);
    }

    /// Routes claim-controller triggers to `tx`. Every claim is woken by the start
    /// ([`SharedInformer::start_step`]), which must come after: an event in between is then
    /// queued twice, never lost.
    pub fn attach_claim_controller(&self, tx: UnboundedSender<ObjectRef<CachedClaim>>) {
        *self.claim_triggers.lock() = Some(tx);
    }

    /// Routes server-controller triggers to `tx` (see `attach_claim_controller`).
    pub fn attach_server_controller(&self, tx: UnboundedSender<ObjectRef<CachedServer>>) {
        *self.server_triggers.lock() = Some(tx);
    }

    /// Wakes the next `share` claims and servers of the controllers' start
    /// ([`on_start_step`]); false once every object was woken.
    pub fn start_step(&self, cursor: &mut ResyncCursor, share: usize) -> bool {
        let binder = self.binder.read();
        let Some(wake) = on_start_step(
            binder.world().servers(),
            binder.world().claims(),
            cursor,
            share,
        ) else {
            return false;
        };
        self.wake(binder, wake);
        true
    }

    /// Reconciles begun so far, of both controllers: how the start paces itself.
    pub fn reconciles_begun(&self) -> u64 {
        self.reconciles_begun.load(Ordering::Relaxed)
    }

    pub fn detach_controllers(&self) {
        *self.claim_triggers.lock() = None;
        *self.server_triggers.lock() = None;
    }

    /// Wakes the next share of the periodic resync ([`on_resync_tick`]).
    pub fn resync_tick(&self, cursor: &mut ResyncCursor, ticks: u32) {
        let binder = self.binder.read();
        let wake = on_resync_tick(
            binder.world().servers(),
            binder.world().claims(),
            cursor,
            ticks,
        );
        self.wake(binder, wake);
    }

    /// Orders what `wake` names under the binder's lock, releases it, and hands the
    /// objects to the running controllers, claims in that order
    /// ([`Wake::claims_in_order`]).
    fn wake(&self, binder: impl std::ops::Deref<Target = Binder>, wake: Wake) {
        if wake.is_empty() {
            return;
        }
        let claims = wake.claims_in_order(binder.world().servers(), binder.world().claims());
        drop(binder);
        self.send(claims, wake.servers);
    }

    /// Called with no binder lock held: a trigger slot is never taken under it. An
    /// object that awaits this process's own write of it is left to that write
    /// ([`OwnWrites::awaits`]).
    fn send(&self, mut claims: Vec<ClaimKey>, mut servers: BTreeSet<String>) {
        let own = self.own_writes.lock();
        if !own.is_empty() {
            let now = Instant::now();
            claims.retain(|key| !own.awaits(&claim_write_key(key), now));
            servers.retain(|name| !own.awaits(&server_write_key(name), now));
        }
        drop(own);
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

/// An object's key among [`SharedInformer::own_writes`]: kind, namespace and name.
fn own_write_key<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    write_key(&K::kind(&()), namespace, name)
}

fn write_key(kind: &str, namespace: &str, name: &str) -> String {
    // Built by hand: every watch event, write and reconcile makes one, and `format!`
    // cost about a thousand instructions each (1.2% of the operator's).
    let mut key = String::with_capacity(kind.len() + namespace.len() + name.len() + 2);
    for part in [kind, "/", namespace, "/", name] {
        key.push_str(part);
    }
    key
}

/// [`own_write_key`] of the claim `key` names.
fn claim_write_key(key: &ClaimKey) -> String {
    write_key(
        &<CachedClaim as kube::Resource>::kind(&()),
        &key.namespace,
        &key.name,
    )
}

/// [`own_write_key`] of the server `name`.
fn server_write_key(name: &str) -> String {
    write_key(&<CachedServer as kube::Resource>::kind(&()), "", name)
}

#[derive(Clone, Copy)]
enum Kind {
    Servers,
    Claims,
    Classes,
    Namespaces,
    Quotas,
    Budgets,
}

const KINDS: [Kind; 6] = [
    Kind::Servers,
    Kind::Claims,
    Kind::Classes,
    Kind::Namespaces,
    Kind::Quotas,
    Kind::Budgets,
];

impl Kind {
    fn resource(self) -> &'static str {
        match self {
            Kind::Servers => "servers",
            Kind::Claims => "serverclaims",
            Kind::Classes => "serverclasses",
            Kind::Namespaces => "namespaces",
            Kind::Quotas => "serverquotas",
            Kind::Budgets => "serverdisruptionbudgets",
        }
    }
}

/// Feeds one kind's watch into its store and the binder, then wakes the controllers.
/// The objects are read lean ([`Trimmed`]: what no decision reads is skipped while
/// parsing). The binder holds the store's copy of each object (one copy per object,
/// shared).
async fn watch<K>(
    client: kube::Client,
    mut writer: Writer<K>,
    informer: Arc<SharedInformer>,
    kind: Kind,
) where
    K: kube::Resource<DynamicType = ()> + Read + Clone + Debug + Send + Sync + 'static,
    Binder: Feed<K> + Recounts<K> + Settles<K>,
{
    let api = Api::<K::Wire>::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => cached_event::<K>(event),
            Err(error) => {
                // The watcher relists or rewatches by itself, with backoff.
                tracing::warn!(%error, "watch failed; retrying");
                continue;
            }
        };
        if matches!(
            event,
            Event::Apply(_) | Event::Delete(_) | Event::InitApply(_)
        ) {
            informer.received[kind as usize].fetch_add(1, Ordering::Relaxed);
        }
        writer.apply_watcher_event(&event);
        let delivered = informer.own_writes.lock().delivered_by(&event);
        let store = writer.as_reader();
        let mut binder = informer.binder.write();
        if wants_recount::<K>(kind, &event, &binder) {
            informer.recount_wanted.notify_one();
        }
        if wants_budget_recount::<K>(&event, &binder) {
            informer.budget_recount_wanted.notify_one();
        }
        let (mut wake, applied) = match event {
            Event::Apply(obj) => {
                let Some(new) = store.get(&ObjectRef::from_obj(&obj)) else {
                    continue;
                };
                (binder.apply(new.clone()), Some(new))
            }
            Event::Delete(obj) => (binder.delete(Arc::new(obj)), None),
            Event::Init | Event::InitApply(_) => continue,
            Event::InitDone => {
                let wake = binder.relist(store.state());
                informer.synced[kind as usize].send_replace(true);
                (wake, None)
            }
        };
        // Settling reads the binder only: the server reconciles go on meanwhile.
        let binder = RwLockWriteGuard::downgrade(binder);
        if let Some(new) = applied {
            settle(&binder, &new, delivered, &mut wake);
        }
        informer.wake(binder, wake);
    }
}

/// Leaves out of `wake` whom the delivery of `new`, this process's own write or a
/// version one supersedes, woke for nothing ([`Settles`]).
fn settle<K>(binder: &Binder, new: &K, delivered: Delivered, wake: &mut Wake)
where
    Binder: Settles<K>,
{
    match delivered {
        Delivered::Written => binder.settle_own_write(new, wake, Timestamp::now()),
        Delivered::Before => binder.await_own_write(new, wake, Timestamp::now()),
        Delivered::Other => {}
    }
}

/// How a kind is read off the wire: servers and claims as the [`CachedObject`]s the binder
/// caches, the other kinds whole but [`Trimmed`].
trait Read: Sized {
    type Wire: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug + Send + 'static;
    fn from_wire(wire: Self::Wire) -> Self;
}

impl<K: Projected> Read for CachedObject<K>
where
    Self: kube::Resource<DynamicType = ()> + Clone + Debug + Send + 'static,
{
    type Wire = Self;
    fn from_wire(wire: Self) -> Self {
        wire
    }
}

macro_rules! read_whole {
    ($($kind:ty),*) => {$(
        impl Read for $kind {
            type Wire = Trimmed<$kind>;
            fn from_wire(wire: Trimmed<$kind>) -> Self {
                wire.0
            }
        }
    )*};
}

read_whole!(ServerClass, ServerQuota, ServerDisruptionBudget, Namespace);

/// The event with its object as the cache keeps it.
fn cached_event<K: Read>(event: Event<K::Wire>) -> Event<K> {
    match event {
        Event::Apply(obj) => Event::Apply(K::from_wire(obj)),
        Event::Delete(obj) => Event::Delete(K::from_wire(obj)),
        Event::Init => Event::Init,
        Event::InitApply(obj) => Event::InitApply(K::from_wire(obj)),
        Event::InitDone => Event::InitDone,
    }
}

/// Whether a watch event calls for the quotas' recount: a claim gone (its charge may
/// free), the claims or quotas listed again, or a quota with work for the recount as
/// the binder sees it ([`crate::binding::World::quota_wants_recount`]).
fn wants_recount<K>(kind: Kind, event: &Event<K>, binder: &Binder) -> bool
where
    Binder: Recounts<K>,
{
    match (kind, event) {
        (Kind::Claims | Kind::Quotas, Event::InitDone) | (Kind::Claims, Event::Delete(_)) => true,
        (_, Event::Apply(obj)) => binder.wants_recount(obj),
        _ => false,
    }
}

/// Whether an event calls for the disruption budgets' recount
/// ([`Recounts::wants_budget_recount`]), or a relist.
fn wants_budget_recount<K>(event: &Event<K>, binder: &Binder) -> bool
where
    Binder: Recounts<K>,
{
    match event {
        Event::Apply(obj) | Event::Delete(obj) => binder.wants_budget_recount(obj),
        Event::InitDone => true,
        Event::Init | Event::InitApply(_) => false,
    }
}

/// Whether a changed object of this kind calls for the quotas' recount: a quota with
/// work for the recount as the binder sees it ([`crate::binding::World::quota_wants_recount`]).
trait Recounts<K> {
    fn wants_recount(&self, _obj: &K) -> bool {
        false
    }

    /// Whether a changed object of this kind calls for the disruption budgets' recount: a
    /// budget, or a claim of a namespace with budgets.
    fn wants_budget_recount(&self, _obj: &K) -> bool {
        false
    }
}

impl Recounts<CachedServer> for Binder {}
impl Recounts<ServerClass> for Binder {}
impl Recounts<Namespace> for Binder {}

impl Recounts<CachedClaim> for Binder {
    fn wants_budget_recount(&self, claim: &CachedClaim) -> bool {
        let budgets = self.world().budgets();
        budgets.has_namespace(crate::binding::meta::namespace(claim))
    }
}

impl Recounts<ServerDisruptionBudget> for Binder {
    fn wants_budget_recount(&self, _: &ServerDisruptionBudget) -> bool {
        true
    }
}

impl Recounts<ServerQuota> for Binder {
    fn wants_recount(&self, quota: &ServerQuota) -> bool {
        self.world().quota_wants_recount(quota)
    }
}

impl OwnWrites {
    /// Feeds one watch event: an object delivered at a version, or a relist. Says what
    /// an applied object is against this process's last write of it.
    fn delivered_by<K: kube::Resource<DynamicType = ()>>(&mut self, event: &Event<K>) -> Delivered {
        match event {
            Event::Apply(obj) => {
                let version = obj.meta().resource_version.as_deref().unwrap_or_default();
                self.delivered(&own_write_key(obj), Some(version))
            }
            // A relist delivers what it lists: a write answered after it finds its version
            // listed (`OwnWrites::ended`), and the relist wakes everything anyway.
            Event::InitApply(obj) => {
                let version = obj.meta().resource_version.as_deref().unwrap_or_default();
                self.delivered(&own_write_key(obj), Some(version));
                Delivered::Other
            }
            Event::Delete(obj) => {
                self.delivered(&own_write_key(obj), None);
                Delivered::Other
            }
            Event::InitDone => {
                self.clear();
                Delivered::Other
            }
            Event::Init => Delivered::Other,
        }
    }
}
