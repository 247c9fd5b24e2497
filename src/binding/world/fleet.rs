//! [`World`]: the catalogs of servers, claims, classes, quotas and namespaces' labels, as
//! the watches feed them, and the views classes and quotas make of them.
//!
//! The server and claim catalogs hold each object as its class makes it
//! ([`ClassCatalog::resolve_ref`], [`ClassCatalog::resolve_server`]), and a claim a full quota
//! does not charge as taking no server ([`without_servers`]): the decisions read these
//! views. The objects as they are, where they differ, are kept beside them, to resolve
//! them again when a class, a namespace or a quota changes, and because what the
//! controllers write starts from the object as it is. A view shares the object's
//! metadata ([`crate::api::Shared`]): only what the class changes is its own.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    CachedClaim, CachedServer, QuotaCharge, ServerClass, ServerDisruptionBudget, ServerQuota,
};
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::state::eligibility::{RefMatch, ref_match};
use crate::binding::state::evidence::pair_agrees;

use super::budgets::{self, BudgetCatalog, BudgetHold, BudgetRecord, BudgetRecount};
use super::classes::{ClassCatalog, ClassCheck, without_servers};
use super::quota::{self, Charge, CountedRule, Holder, Holds, QuotaCatalog, QuotaCheck, Recount};
use super::view::{ClaimCatalog, ServerCatalog, ServerView};

/// The objects a binder starts from: a start's lists, or `explain`'s one look.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub servers: Vec<Arc<CachedServer>>,
    pub claims: Vec<Arc<CachedClaim>>,
    pub classes: Vec<Arc<ServerClass>>,
    /// Each namespace's labels (a class's `namespaceSelector` reads them).
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    pub quotas: Vec<Arc<ServerQuota>>,
    pub budgets: Vec<Arc<ServerDisruptionBudget>>,
}

impl Listing {
    /// These servers and claims, and no class, namespace or quota.
    pub fn of(
        servers: impl IntoIterator<Item = impl Into<Arc<CachedServer>>>,
        claims: impl IntoIterator<Item = impl Into<Arc<CachedClaim>>>,
    ) -> Self {
        Self {
            servers: servers.into_iter().map(Into::into).collect(),
            claims: claims.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Each namespace's labels, as [`Listing::namespaces`] holds them.
    pub fn labels_of(namespaces: &[Arc<Namespace>]) -> HashMap<String, BTreeMap<String, String>> {
        let labels = namespaces.iter().map(|n| {
            let name = meta::name(&**n).to_string();
            (name, n.metadata.labels.clone().unwrap_or_default())
        });
        labels.collect()
    }
}

/// What sending every object through the classes and quotas again did: the binder
/// counts its picks in flight again after any, and wakes everyone after a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// Nothing was sent through (nothing a decision reads changed).
    Not,
    /// Every object was, and no view changed.
    Unchanged,
    /// Every object was, and some view changed: it counts as a relist.
    Changed,
}

/// One object's change as a watch delivers it: its new state (`None`: deleted), and the
/// last state a deletion carries, which counts as what it was if the catalog never held
/// it.
pub struct Change<T> {
    pub new: Option<Arc<T>>,
    pub last: Option<Arc<T>>,
}

impl<T> Change<T> {
    pub fn applied(new: Arc<T>) -> Self {
        Self {
            new: Some(new),
            last: None,
        }
    }

    pub fn deleted(last: Arc<T>) -> Self {
        Self {
            new: None,
            last: Some(last),
        }
    }
}

/// An object before and after a change, as the catalog holds them.
pub type BeforeAfter<T> = (Option<Arc<T>>, Option<Arc<T>>);

/// The fleet as a binder sees it. See the module docs.
#[derive(Clone, Debug)]
pub struct World {
    servers: ServerCatalog,
    claims: ClaimCatalog,
    classes: ClassCatalog,
    quotas: QuotaCatalog,
    budgets: BudgetCatalog,
    /// The claims as they are, where their class or quotas make them differ.
    claims_as_they_are: HashMap<ClaimKey, Arc<CachedClaim>>,
    /// The servers as they are, where the classes label them.
    servers_as_they_are: HashMap<String, Arc<CachedServer>>,
}

impl World {
    /// An empty world whose quotas are judged counted by `counted`.
    pub fn new(counted: CountedRule) -> Self {
        Self {
            servers: ServerCatalog::new(),
            claims: ClaimCatalog::new(),
            classes: ClassCatalog::default(),
            quotas: QuotaCatalog::new(counted),
            budgets: BudgetCatalog::default(),
            claims_as_they_are: HashMap::new(),
            servers_as_they_are: HashMap::new(),
        }
    }

    /// A world that listed these objects.
    pub fn listed(listing: Listing, counted: CountedRule) -> Self {
        let mut world = Self::new(counted);
        world.claims = ClaimCatalog::from_claims(listing.claims);
        world.servers = ServerCatalog::from_servers(listing.servers).tracking(world.claims.iter());
        world.budgets.replace_all(listing.budgets);
        let (classes, quotas) = (listing.classes.is_empty(), listing.quotas.is_empty());
        if !classes || !listing.namespaces.is_empty() {
            world.classes.replace_classes(listing.classes);
            world.classes.replace_namespaces(listing.namespaces);
            world.resolve_all();
        }
        if !quotas {
            world.quotas.replace_all(listing.quotas);
            world.resolve_all();
        }
        world
    }

    pub fn servers(&self) -> &ServerCatalog {
        &self.servers
    }

    pub fn claims(&self) -> &ClaimCatalog {
        &self.claims
    }

    pub fn classes(&self) -> &ClassCatalog {
        &self.classes
    }

    pub fn quotas(&self) -> &QuotaCatalog {
        &self.quotas
    }

    pub fn budgets(&self) -> &BudgetCatalog {
        &self.budgets
    }

    pub(crate) fn budgets_mut(&mut self) -> &mut BudgetCatalog {
        &mut self.budgets
    }

    /// The disruption budget an eviction of `claim` would break now
    /// ([`budgets::budget_hold`]), the evictions on their way counted (`evicting`).
    pub fn budget_hold(
        &self,
        claim: &CachedClaim,
        evicting: &dyn Fn(&CachedClaim) -> bool,
    ) -> Option<BudgetHold> {
        let namespace = meta::namespace(claim);
        let mut budgets = self.budgets.of_namespace(namespace).peekable();
        budgets.peek()?;
        let claims: Vec<&CachedClaim> = self.claims.in_namespace(namespace).map(|c| &**c).collect();
        budgets::budget_hold(claim, budgets, &claims, evicting)
    }

    /// The records to write before an eviction of `claim` goes ahead: one for each budget
    /// covering it that has not recorded it yet ([`budgets::record`]).
    pub fn budget_records(&self, claim: &CachedClaim, now: &Time) -> Vec<BudgetRecord> {
        let namespace = meta::namespace(claim);
        let budgets = self.budgets.shared_of(namespace);
        budgets
            .filter(|b| budgets::covers(b, claim))
            .filter_map(|b| {
                let recorded = budgets::record(b, claim, now)?;
                let read = b.clone();
                Some(BudgetRecord { read, recorded })
            })
            .collect()
    }

    /// What each budget's recount reads now ([`BudgetRecount`]).
    pub fn budget_recounts(&self) -> Vec<BudgetRecount> {
        let recount = |budget: &Arc<ServerDisruptionBudget>| {
            let namespace = meta::namespace(&**budget);
            let claims: Vec<Arc<CachedClaim>> =
                self.claims.in_namespace(namespace).cloned().collect();
            let refs: Vec<&CachedClaim> = claims.iter().map(|c| &**c).collect();
            let unread = budgets::unconfirmed(budget, &refs)
                .into_iter()
                .cloned()
                .collect();
            BudgetRecount {
                budget: (**budget).clone(),
                unread,
                claims,
            }
        };
        self.budgets.all().map(recount).collect()
    }

    /// The server as it is (not as the classes label it): what a driver hands a server
    /// step, as the binary hands it the watch's object.
    pub fn server_as_is(&self, name: &str) -> Option<&CachedServer> {
        let as_is = self.servers_as_they_are.get(name).map(|s| &**s);
        as_is.or_else(|| self.servers.server(name))
    }

    /// The claim as it is (not as its class and quotas make it).
    pub fn claim_as_is(&self, namespace: &str, name: &str) -> Option<&CachedClaim> {
        let as_is = self.claims_as_they_are.get(&ClaimKey::of(namespace, name));
        let as_is = as_is.or_else(|| self.claims.shared(namespace, name));
        as_is.map(|c| &**c)
    }

    /// How `claim` stands with its namespace's quotas: by its class, if its class
    /// applies ([`QuotaCatalog::check`]).
    pub fn quota_check(&self, claim: &CachedClaim) -> QuotaCheck {
        self.quota_check_of(claim, &self.classes.check(claim))
    }

    /// A claim the default class applies to counts in that class's quotas before its
    /// name is written: the server side must not bind it uncharged meanwhile.
    pub fn quota_check_of(&self, claim: &CachedClaim, class: &ClassCheck) -> QuotaCheck {
        match class {
            ClassCheck::Of(name) | ClassCheck::Default(name) => {
                self.quotas.check(claim, Some(name))
            }
            _ => QuotaCheck::Unlimited,
        }
    }

    /// Whether an unbound `claim` is over quota: it takes no server, and no place in
    /// the matching, until a charge frees (a bound claim keeps its server and counts).
    pub fn over_quota(&self, claim: &CachedClaim, class: &ClassCheck) -> bool {
        !meta::is_bind_completed(claim) && self.quota_check_of(claim, class).holds_back()
    }

    /// `claim` as its class and quotas make it, by the class check made for it: what a
    /// decision reads, a copy where they change it (narrowed by its class, and without
    /// servers while a full quota holds it back).
    pub fn view_of<'c>(&self, claim: &'c CachedClaim, class: &ClassCheck) -> Cow<'c, CachedClaim> {
        let mut view = match self.classes.narrowed(claim, class) {
            Some(narrowed) => Cow::Owned(narrowed),
            None => Cow::Borrowed(claim),
        };
        if self.over_quota(claim, class) {
            view = Cow::Owned(without_servers(&view));
        }
        view
    }

    /// Whether the recount has work on `quota` as this world shows it
    /// ([`quota::wants_recount`]): it was not counted for its spec, or it charges a claim
    /// the claim catalog does not show (gone, or not seen yet: the recount reads it).
    pub fn quota_wants_recount(&self, quota: &ServerQuota) -> bool {
        let namespace = meta::namespace(quota);
        let shown = |c: &QuotaCharge| self.shows_charged(namespace, c);
        quota::wants_recount(quota, self.quotas.counted_rule(), &shown)
    }

    /// Whether the claim catalog shows the claim a quota of `namespace` charges: a claim
    /// of that name with that uid. A charge it does not show, the recount reads live.
    pub fn shows_charged(&self, namespace: &str, charge: &QuotaCharge) -> bool {
        let cached = self.claims.shared(namespace, &charge.claim);
        cached.is_some_and(|claim| meta::uid(&**claim) == Some(charge.uid.as_str()))
    }

    /// What the quotas' recount reads of each quota now ([`Recount`]).
    pub fn recounts(&self) -> Vec<Recount> {
        let recount = |quota: &Arc<ServerQuota>| Recount {
            holders: self.quota_holders(meta::namespace(&**quota)),
            quota: (**quota).clone(),
        };
        self.quotas.iter().map(recount).collect()
    }

    /// The charges of `claim` of `class` to the quotas of `Room` that name it
    /// ([`QuotaCatalog::charges_for`]), each leaving out of its list the charges whose
    /// claims this world shows holding their bind.
    pub fn charges_for(&self, claim: &CachedClaim, class: &str, quotas: &[String]) -> Vec<Charge> {
        let namespace = meta::namespace(claim);
        let bound = |c: &QuotaCharge| self.shows_bound(namespace, c);
        self.quotas.charges_for(claim, class, quotas, &bound)
    }

    /// Whether the claim catalog shows the claim a charge of a quota of `namespace`
    /// names (its name and uid) holding its bind ([`quota::holds_bind`]): a charge
    /// written now leaves it out of the list ([`quota::recharge`]).
    pub fn shows_bound(&self, namespace: &str, charge: &QuotaCharge) -> bool {
        let cached = self.claims.shared(namespace, &charge.claim);
        cached.is_some_and(|claim| {
            meta::uid(&**claim) == Some(charge.uid.as_str()) && quota::holds_bind(claim)
        })
    }

    /// The claims of `namespace` that hold a server (a server's ref carries their uid),
    /// with their class: a quota's recount counts them ([`quota::recount`]).
    pub fn quota_holders(&self, namespace: &str) -> Vec<Holder> {
        let holder = |c: &Arc<CachedClaim>| {
            let class = c.spec.server_class_name.clone()?;
            let uid = meta::uid(&**c)?.to_string();
            let reserved = self.servers.reserved_for(namespace, meta::name(&**c));
            // A pair that agrees across a restore counts too, within the quota: its
            // server is the claim's once it is charged.
            let holds = reserved.into_iter().fold(None, |holds, s| {
                match ref_match(s, c) == RefMatch::SameUid {
                    true => Some(Holds::Bound),
                    false if pair_agrees(s, c) => holds.or(Some(Holds::Restored)),
                    false => holds,
                }
            });
            let claim = meta::name(&**c).to_string();
            holds.map(|holds| Holder {
                class,
                claim,
                uid,
                holds,
            })
        };
        self.claims
            .in_namespace(namespace)
            .filter_map(holder)
            .collect()
    }
}

/// How the binder changes the world: one watched change at a time.
impl World {
    /// A server changed.
    pub(crate) fn put_server(
        &mut self,
        name: &str,
        change: Change<CachedServer>,
    ) -> BeforeAfter<CachedServer> {
        let old = self.servers.shared(name).cloned().or(change.last);
        let new = change.new.map(|s| self.resolved_server(s));
        match &new {
            Some(s) => self.servers.upsert(s.clone()),
            None => {
                self.servers_as_they_are.remove(name);
                self.servers.remove(name);
            }
        }
        (old, new)
    }

    /// A claim changed. The free-server index splits its classes by the label keys
    /// claims select on: a claim with a new key regroups it first.
    pub(crate) fn put_claim(
        &mut self,
        key: &ClaimKey,
        change: Change<CachedClaim>,
    ) -> BeforeAfter<CachedClaim> {
        let old = self.claims.shared(&key.namespace, &key.name).cloned();
        let old = old.or(change.last);
        let new = match change.new {
            Some(c) => Some(self.resolved(key, c)),
            None => {
                self.claims_as_they_are.remove(key);
                None
            }
        };
        match &new {
            Some(c) => self.upsert_claim(c.clone()),
            None => self.claims.remove(&key.namespace, &key.name),
        }
        (old, new)
    }

    /// The servers were listed anew.
    pub(crate) fn replace_servers(&mut self, all: Vec<Arc<CachedServer>>) {
        self.servers_as_they_are.clear();
        let all: Vec<Arc<CachedServer>> =
            all.into_iter().map(|s| self.resolved_server(s)).collect();
        self.servers.replace_all(all);
    }

    /// The claims were listed anew.
    pub(crate) fn replace_claims(&mut self, all: Vec<Arc<CachedClaim>>) {
        self.claims_as_they_are.clear();
        let all: Vec<Arc<CachedClaim>> = all
            .into_iter()
            .map(|c| self.resolved(&claim_key(&c), c))
            .collect();
        self.servers.track_selectors(all.iter().map(Arc::as_ref));
        self.claims = ClaimCatalog::from_claims(all);
    }

    /// A class changed (`None`: deleted).
    pub(crate) fn put_class(&mut self, name: &str, new: Option<Arc<ServerClass>>) -> Resolved {
        // Its status (the counts this process writes) changes no decision: only its spec
        // and its annotations (the default mark) send every object through the classes.
        let same = match (self.classes.class(name), &new) {
            (Some(old), Some(new)) => {
                old.spec == new.spec && old.metadata.annotations == new.metadata.annotations
            }
            _ => false,
        };
        match new {
            Some(c) => self.classes.upsert_class(c),
            None => self.classes.remove_class(name),
        }
        match same {
            true => Resolved::Not,
            false => self.resolve_all(),
        }
    }

    /// The classes were listed anew.
    pub(crate) fn replace_classes(&mut self, all: Vec<Arc<ServerClass>>) -> Resolved {
        self.classes.replace_classes(all);
        self.resolve_all()
    }

    /// A namespace's labels changed (`None`: deleted).
    pub(crate) fn put_namespace(
        &mut self,
        name: &str,
        labels: Option<BTreeMap<String, String>>,
    ) -> Resolved {
        // Its labels are all a decision reads of it, and only a class reads them.
        match self.classes.put_namespace(name, labels) && !self.classes.is_empty() {
            true => self.resolve_all(),
            false => Resolved::Not,
        }
    }

    /// The namespaces were listed anew.
    pub(crate) fn replace_namespaces(
        &mut self,
        all: HashMap<String, BTreeMap<String, String>>,
    ) -> Resolved {
        self.classes.replace_namespaces(all);
        self.resolve_all()
    }

    /// A quota changed (`None`: deleted).
    pub(crate) fn put_quota(&mut self, namespace: &str, name: &str, new: Option<Arc<ServerQuota>>) {
        match new {
            Some(q) => self.quotas.upsert(q),
            None => self.quotas.remove(namespace, name),
        }
    }

    /// The quotas were listed anew.
    pub(crate) fn replace_quotas(&mut self, all: Vec<Arc<ServerQuota>>) -> Resolved {
        self.quotas.replace_all(all);
        self.resolve_all()
    }

    /// Each claim of `namespace` (every claim: `None`), as it is, with how it stands
    /// with the quotas.
    pub(crate) fn quota_checks(&self, namespace: Option<&str>) -> BTreeMap<ClaimKey, QuotaCheck> {
        let claims: Box<dyn Iterator<Item = &CachedClaim>> = match namespace {
            Some(namespace) => Box::new(self.claims.in_namespace(namespace).map(|c| &**c)),
            None => Box::new(self.claims.iter()),
        };
        self.checks_of(claims)
    }

    /// The claims of `namespace` of these names, as they are, with how they stand with
    /// the quotas (a quota's change touched only them: [`quota::standing_may_change`]).
    pub(crate) fn quota_checks_named(
        &self,
        namespace: &str,
        names: &BTreeSet<String>,
    ) -> BTreeMap<ClaimKey, QuotaCheck> {
        let claims = names
            .iter()
            .filter_map(|name| self.claims.shared(namespace, name))
            .map(|c| &**c);
        self.checks_of(Box::new(claims))
    }

    fn checks_of<'a>(
        &'a self,
        claims: Box<dyn Iterator<Item = &'a CachedClaim> + 'a>,
    ) -> BTreeMap<ClaimKey, QuotaCheck> {
        claims
            .map(|c| {
                let key = claim_key(c);
                let as_is = self.claims_as_they_are.get(&key).map_or(c, |r| &**r);
                (key, self.quota_check(as_is))
            })
            .collect()
    }

    /// Sends the claim through its class and quotas again (its standing with the quotas
    /// changed). Returns the claim before and after, as the catalog holds them.
    pub(crate) fn resolve_claim_again(
        &mut self,
        key: &ClaimKey,
    ) -> Option<(Option<Arc<CachedClaim>>, Arc<CachedClaim>)> {
        let cached = self.claims.shared(&key.namespace, &key.name)?.clone();
        let as_is = self.claims_as_they_are.get(key).cloned();
        let effective = self.resolved(key, as_is.unwrap_or_else(|| cached.clone()));
        self.upsert_claim(effective.clone());
        Some((Some(cached), effective))
    }

    fn upsert_claim(&mut self, claim: Arc<CachedClaim>) {
        if !self.servers.tracks_selector_of(&claim) {
            self.servers.track_selectors([claim.as_ref()]);
        }
        self.claims.upsert(claim);
    }

    /// Resolves every object against the classes and quotas again: classes and namespaces change seldom, and a class can move
    /// any claim's servers, so a change counts as a relist.
    fn resolve_all(&mut self) -> Resolved {
        let servers: Vec<Arc<CachedServer>> = self
            .servers
            .iter_shared()
            .map(|s| {
                self.servers_as_they_are
                    .get(meta::name(&**s))
                    .unwrap_or(s)
                    .clone()
            })
            .collect();
        let mut changed = false;
        for server in servers {
            let name = meta::name(&*server).to_string();
            let view = self.resolved_server(server);
            if self.servers.shared(&name).is_none_or(|b| **b != *view) {
                changed = true;
                self.servers.upsert(view);
            }
        }
        let all: Vec<Arc<CachedClaim>> = self
            .claims
            .iter_shared()
            .map(|c| {
                self.claims_as_they_are
                    .get(&claim_key(c))
                    .unwrap_or(c)
                    .clone()
            })
            .collect();
        for claim in all {
            let key = claim_key(&claim);
            let effective = self.resolved(&key, claim);
            let before = self.claims.shared(&key.namespace, &key.name);
            if before.is_none_or(|b| **b != *effective) {
                changed = true;
                self.servers.track_selectors([effective.as_ref()]);
                self.claims.upsert(effective);
            }
        }
        match changed {
            true => Resolved::Changed,
            false => Resolved::Unchanged,
        }
    }

    /// The server as the classes make it ([`ClassCatalog::resolve_server`]), remembering
    /// the server as it is if that differs.
    fn resolved_server(&mut self, server: Arc<CachedServer>) -> Arc<CachedServer> {
        let name = meta::name(&*server).to_string();
        match self.classes.resolve_server(&server) {
            Some(view) => {
                self.servers_as_they_are.insert(name, server);
                Arc::new(view)
            }
            None => {
                self.servers_as_they_are.remove(&name);
                server
            }
        }
    }

    /// The claim as its class and quotas make it, remembering the claim as it is if that
    /// differs.
    fn resolved(&mut self, key: &ClaimKey, claim: Arc<CachedClaim>) -> Arc<CachedClaim> {
        let class = self.classes.check(&claim);
        let effective = match self.view_of(&claim, &class) {
            Cow::Borrowed(_) => claim.clone(),
            Cow::Owned(view) => Arc::new(view),
        };
        match Arc::ptr_eq(&effective, &claim) {
            true => self.claims_as_they_are.remove(key),
            false => self.claims_as_they_are.insert(key.clone(), claim),
        };
        effective
    }
}
