//! The binder: the one state machine every driver runs. The controllers, the test world,
//! the model check and `explain` all feed it and do what it returns.
//!
//! It owns, as pure data, what a controller process knows: the catalogs of servers and
//! claims (fed by the watches), the assumed choices, and when it last wrote each waiting
//! claim's summary. Time is passed in; nothing here reads a clock or does I/O. Its
//! interface is the protocol's glue (docs/binding.md, "Carrying out a decision",
//! "Wake-up rules", "The assumed-choice cache", "Why a claim waits"):
//!
//! - [`Binder::apply_server`], [`Binder::apply_claim`], [`Binder::relist_servers`],
//!   [`Binder::relist_claims`]: a watched change, or a relist → who to wake;
//! - [`Binder::reconcile_claim`], [`Binder::reconcile_server`]: one key → a live read to
//!   make first, or the writes to do and when to look again;
//! - [`Binder::claim_object_written`], [`Binder::claim_status_written`]: the result of
//!   a claim's writes → who to wake.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::names::ANNOTATION_BOUND_CLASS;
use crate::api::{
    CachedClaim, CachedServer, QuotaCharge, ServerClaimRef, ServerClass, ServerQuota,
};

use crate::binding::claim_side::assumed::{
    AssumedChoices, EndRule, claim_key, ends_on_claim_event,
};
use crate::binding::claim_side::backoff::{RefusedWrites, RefusingServers};
use crate::binding::claim_side::summaries::SummaryClock;
use crate::binding::meta::{self, ClaimKey, is_controller_chosen};
use crate::binding::placement::in_flight::InFlight;
use crate::binding::placement::index::is_free;
use crate::binding::placement::{
    PickInputs, Placement, first_named, first_stray, first_waiting_for,
};
use crate::binding::protocol::claim_decision::{
    ClaimDecision, assumption_for, decide_claim, decide_class, decide_quota, decide_refusing,
    pass_over, restoring, standing_bind,
};
use crate::binding::protocol::claim_plan::{ClaimPlan, plan_claim};
use crate::binding::protocol::coalesce::is_summary_refresh;
use crate::binding::protocol::server_decision::{ServerDecision, decide_server};
use crate::binding::protocol::server_plan::{ServerPlan, plan_server};
use crate::binding::protocol::winner::{Admit, Turn, pick_or_turn, turn_on};
use crate::binding::state::eligibility::{RefMatch, ref_match};
use crate::binding::state::evidence::pair_agrees;
use crate::binding::state::gates::{self, BoundClass, ClassGatesRule, cleaning_took};
use crate::binding::wakeups::{ResyncCursor, Triggers, Wake};
use crate::binding::world::classes::{ClassCatalog, ClassCheck, rebase, without_servers};
use crate::binding::world::quota::{
    self, Charge, CountedRule, Holder, Holds, QuotaCatalog, QuotaCheck,
};
use crate::binding::world::view::{
    ClaimCatalog, ClaimView, Liveness, ServerCatalog, ServerView, WithLiveClaim, WithLiveServer,
};

/// Per server and pool (users' claims, or controller-chosen ones this controller's picks
/// do not hold), the claim naming it that is first in the fair order ([`first_named`],
/// [`first_stray`]), found once per decision.
type FirstNamed = RefCell<HashMap<(String, bool), Option<ClaimKey>>>;

/// The claim controller's decision function (swappable for the model check's mutants).
pub type ClaimDecider =
    fn(&CachedClaim, &dyn ServerView, &PickInputs<'_>, Liveness) -> ClaimDecision;
/// The server controller's decision function; the slice is the default release gates,
/// then whether a claim naming the server has its turn, and whether its quotas charge
/// it.
pub type ServerDecider =
    fn(&CachedServer, &dyn ClaimView, Liveness, &[String], Turn<'_>, Admit<'_>) -> ServerDecision;

/// The rules a binder runs: the project's ([`Rules::real`]), or a model check's mutant.
#[derive(Clone, Copy)]
pub struct Rules {
    pub claim: ClaimDecider,
    pub server: ServerDecider,
    pub triggers: Triggers,
    pub assumption_ends: EndRule,
    /// Whether a quota was counted for its spec, so it may admit ([`quota::is_counted`]).
    pub quota_counted: CountedRule,
    /// The class gates a release of a server waits for, given the gates of the classes
    /// that take it in now ([`gates::class_gates`]: those its bind recorded).
    pub class_gates: ClassGatesRule,
}

impl Rules {
    pub fn real() -> Self {
        Self {
            claim: |claim, servers, pick, liveness| decide_claim(claim, servers, pick, liveness),
            server: |server, claims, liveness, gates, turn, admit| {
                decide_server(server, claims, liveness, gates, turn, admit)
            },
            triggers: Triggers::real(),
            assumption_ends: ends_on_claim_event,
            quota_counted: quota::is_counted,
            class_gates: gates::class_gates,
        }
    }
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rules")
    }
}

/// How a binder is configured: the process's flags that rules read.
#[derive(Clone, Debug)]
pub struct BinderConfig {
    /// A waiting claim's summary is rewritten at most once per this interval.
    pub status_interval: Duration,
    /// The release gates of a server that names none in `spec.releaseGates`.
    pub release_gates: Vec<String>,
}

/// What a cache shows of the other claims when a claim is decided. The binary's cache
/// shows all it holds; the model check also decides as a cache that has not yet seen
/// the claims naming servers (another process's picks) would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sight {
    All,
    NotYetRivals,
}

/// One claim reconcile's answer.
#[derive(Clone, Debug)]
pub enum ClaimStep {
    /// Nothing to do until the claim changes: it is being deleted (claims carry no
    /// finalizer of ours; its server is released once it is gone).
    Idle,
    /// The cache says this server is gone: read it live (the PV controller's rule: ask
    /// the API server before declaring the claim Lost), then reconcile again with it.
    ReadServer(String),
    /// The decision only refreshes the claim's summary, which may not be rewritten yet:
    /// write nothing, look again after this long.
    Wait {
        decision: Box<ClaimDecision>,
        after: Duration,
    },
    /// Write the plan, reporting each write's result ([`Binder::claim_object_written`],
    /// [`Binder::claim_status_written`]).
    Act(Box<ClaimWork>),
}

/// Writes to do for a claim, and what follows them.
#[derive(Clone, Debug)]
pub struct ClaimWork {
    pub key: ClaimKey,
    pub decision: ClaimDecision,
    pub plan: ClaimPlan,
    /// The server this pick assumed chosen (the assumption started with this step).
    pub picked: Option<String>,
    /// Look at the claim again after this long (`None`: on a change, or the resync).
    pub then: Option<Duration>,
    /// Whom to wake once the step has started: a pick taken up without a write
    /// (`ResumePick`) wakes its server, which no watch event will.
    pub wakes: Wake,
    /// Seconds from the claim's creation to this step, for the bind duration metric.
    pub since_created: Option<f64>,
    /// The quotas to charge the claim to before any other write, each with the charge
    /// added and to be written at the resourceVersion it was read at (docs/binding.md,
    /// "Server quotas"). If one cannot be written, nothing else is: the pick is given up
    /// as a conflicting write would be, and the claim decides again.
    pub charges: Vec<Charge>,
}

impl ClaimWork {
    /// Whether the binder needs to hear how the object write ended: a pick's, which
    /// starts or ends its assumption, and a refusal that makes the claim back off.
    pub fn reports_object_write(&self, written: &ObjectWrite<'_>) -> bool {
        self.picked.is_some()
            || matches!(written, ObjectWrite::Refused(_)) && self.decision.backs_off_when_refused()
    }

    /// Whether the binder needs to hear of the status write: only a waiting claim's
    /// summary, which starts its interval.
    pub fn reports_status_write(&self) -> bool {
        self.decision.waits() && self.plan.status.is_some()
    }
}

/// One server reconcile's answer.
#[derive(Clone, Debug)]
pub enum ServerStep {
    /// Releasing on a stale cache would free a server whose claim still exists (the PV
    /// controller's rule): read this claim live, then reconcile again with it.
    ReadClaim(ServerClaimRef),
    Act(Box<ServerWork>),
}

/// Writes to do for a server.
#[derive(Clone, Debug)]
pub struct ServerWork {
    pub decision: ServerDecision,
    pub plan: ServerPlan,
    /// How long the server's cleaning took, when this step ends it (for the metric).
    pub cleaning_took: Option<Duration>,
}

/// The binder. See the module docs.
#[derive(Clone, Debug)]
pub struct Binder {
    rules: Rules,
    config: BinderConfig,
    servers: ServerCatalog,
    claims: ClaimCatalog,
    assumed: AssumedChoices,
    /// The assumptions counted per class and shape for placement ([`InFlight`]): synced
    /// wherever the assumptions, the servers or the claims change.
    in_flight: InFlight,
    summaries: SummaryClock,
    refused: RefusedWrites,
    /// Servers whose last write was refused, until they change ([`RefusingServers`]).
    refusing: RefusingServers,
    /// The classes and namespaces' labels ([`crate::binding::world::classes`]). The claim catalog holds
    /// each claim as its class makes it ([`ClassCatalog::resolve`]); `raw` keeps the
    /// claims as they are where that differs, to resolve them again when a class or a
    /// namespace changes.
    classes: ClassCatalog,
    raw: HashMap<ClaimKey, Arc<CachedClaim>>,
    raw_servers: HashMap<String, Arc<CachedServer>>,
    /// The quotas ([`crate::binding::world::quota`]): a claim a full quota does not charge is held as
    /// taking no server, like a claim whose class is missing.
    quotas: QuotaCatalog,
}

/// How a claim's object write ended, as the binder needs to hear it.
#[derive(Clone, Copy, Debug)]
pub enum ObjectWrite<'a> {
    /// Written; the claim as the API server returned it.
    Written(&'a CachedClaim),
    /// The resourceVersion precondition failed: the claim changed, decide again.
    Conflict,
    /// Refused or failed, with the API server's message (or the transport's). A lost
    /// response counts too: the claim backs off, and its next try sees what was written.
    Refused(&'a str),
}

impl Binder {
    /// A binder that has seen nothing yet, started at `now`.
    pub fn new(rules: Rules, config: BinderConfig, now: Timestamp) -> Self {
        let summaries = SummaryClock::new(config.status_interval, now);
        Self {
            rules,
            config,
            servers: ServerCatalog::new(),
            claims: ClaimCatalog::new(),
            assumed: AssumedChoices::new(),
            in_flight: InFlight::default(),
            summaries,
            refused: RefusedWrites::default(),
            refusing: RefusingServers::default(),
            classes: ClassCatalog::default(),
            raw: HashMap::new(),
            raw_servers: HashMap::new(),
            quotas: QuotaCatalog::new(rules.quota_counted),
        }
    }

    /// A binder that listed these objects (a start, or `explain`'s one look).
    pub fn listed(
        rules: Rules,
        config: BinderConfig,
        servers: impl IntoIterator<Item = impl Into<Arc<CachedServer>>>,
        claims: impl IntoIterator<Item = impl Into<Arc<CachedClaim>>>,
        now: Timestamp,
    ) -> Self {
        let mut binder = Self::new(rules, config, now);
        binder.claims = ClaimCatalog::from_claims(claims);
        binder.servers = ServerCatalog::from_servers(servers).tracking(binder.claims.iter());
        binder
    }

    /// [`Binder::listed`] with these classes and namespaces' labels too.
    pub fn listed_with_classes(
        mut self,
        classes: impl IntoIterator<Item = impl Into<Arc<ServerClass>>>,
        namespaces: HashMap<String, BTreeMap<String, String>>,
    ) -> Self {
        self.classes
            .replace_classes(classes.into_iter().map(Into::into));
        self.classes.replace_namespaces(namespaces);
        self.resolve_all();
        self
    }

    /// [`Binder::listed`] with these quotas too.
    pub fn listed_with_quotas(
        mut self,
        quotas: impl IntoIterator<Item = impl Into<Arc<ServerQuota>>>,
    ) -> Self {
        self.quotas.replace_all(quotas.into_iter().map(Into::into));
        self.resolve_all();
        self
    }

    pub fn classes(&self) -> &ClassCatalog {
        &self.classes
    }

    pub fn quotas(&self) -> &QuotaCatalog {
        &self.quotas
    }

    /// How `claim` stands with its namespace's quotas: by its class, if its class
    /// applies ([`QuotaCatalog::check`]).
    pub fn quota_check(&self, claim: &CachedClaim) -> QuotaCheck {
        self.quota_check_of(claim, &self.classes.check(claim))
    }

    /// Whether the recount has work on `quota` as this binder sees it
    /// ([`quota::wants_recount`]): it was not counted for its spec, or it charges a claim
    /// the claim cache does not show (gone, or not seen yet: the recount reads it).
    pub fn quota_wants_recount(&self, quota: &ServerQuota) -> bool {
        let namespace = meta::namespace(quota);
        let shown = |c: &QuotaCharge| self.shows_charged(namespace, c);
        quota::wants_recount(quota, self.rules.quota_counted, &shown)
    }

    /// Whether the claim cache shows the claim a quota of `namespace` charges: a claim of
    /// that name with that uid. A charge it does not show, the recount reads live.
    pub fn shows_charged(&self, namespace: &str, charge: &QuotaCharge) -> bool {
        let cached = self.claims.shared(namespace, &charge.claim);
        cached.is_some_and(|claim| meta::uid(&**claim) == Some(charge.uid.as_str()))
    }

    /// A claim the default class applies to counts in that class's quotas before its
    /// name is written: the server side must not bind it uncharged meanwhile.
    fn quota_check_of(&self, claim: &CachedClaim, class: &ClassCheck) -> QuotaCheck {
        match class {
            ClassCheck::Of(name) | ClassCheck::Default(name) => {
                self.quotas.check(claim, Some(name))
            }
            _ => QuotaCheck::Unlimited,
        }
    }

    /// A quota changed (`None`: deleted). The claims of its namespace whose standing
    /// with it changed are held anew (one over quota takes no server; [`without_servers`])
    /// and woken, with the servers they name (a charge lets the server side bind), and
    /// whom their change wakes as a watched change would: a claim that leaves the
    /// matching (over quota now) or joins it moves the others' turns.
    pub fn apply_quota(
        &mut self,
        namespace: &str,
        name: &str,
        new: Option<Arc<ServerQuota>>,
    ) -> Wake {
        let before = self.quota_checks(Some(namespace));
        match new {
            Some(q) => self.quotas.upsert(q),
            None => self.quotas.remove(namespace, name),
        }
        self.restand(before, Some(namespace))
    }

    /// The claims whose standing with the quotas changed since `before` (of `namespace`,
    /// or of every namespace), sent through the classes and quotas again: wakes them
    /// and the servers they name (a charge lets the server side bind).
    fn restand(&mut self, before: BTreeMap<ClaimKey, QuotaCheck>, namespace: Option<&str>) -> Wake {
        let mut wake = Wake::default();
        for (key, now) in self.quota_checks(namespace) {
            if before.get(&key) == Some(&now) {
                continue;
            }
            let Some(raw) = self.raw_claim(&key) else {
                continue;
            };
            let old = self.claims.shared(&key.namespace, &key.name).cloned();
            let effective = self.resolved(&key, raw);
            if let Some(server) = &effective.spec.server_ref {
                wake.servers.insert(server.name.clone());
            }
            if !self.servers.tracks_selector_of(&effective) {
                self.servers.track_selectors([effective.as_ref()]);
            }
            self.claims.upsert(effective.clone());
            self.sync_in_flight(&[], &[&key]);
            let (servers, claims) = (&self.servers, &self.claims);
            let changed = self.rules.triggers.claim_changed;
            wake.extend(changed(old.as_deref(), Some(&*effective), servers, claims));
            wake.claims.insert(key);
        }
        wake
    }

    /// The claims of `namespace` that hold a server (a server's ref carries their uid),
    /// with their class: a quota's recount counts them ([`crate::binding::world::quota::recount`]).
    pub fn quota_holders(&self, namespace: &str) -> Vec<Holder> {
        self.claims
            .in_namespace(namespace)
            .filter_map(|c| {
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
                holds.map(|holds| Holder {
                    class,
                    claim: meta::name(&**c).to_string(),
                    uid,
                    holds,
                })
            })
            .collect()
    }

    /// The quotas were listed anew. A relist brings every quota's latest charges at once, with no event per change:
    /// the claims whose standing changed are woken as a quota event would wake them.
    pub fn relist_quotas(&mut self, all: Vec<Arc<ServerQuota>>) -> Wake {
        let before = self.quota_checks(None);
        self.quotas.replace_all(all);
        let mut wake = self.resolve_all();
        wake.extend(self.restand(before, None));
        wake
    }

    /// Each claim of `namespace` (every claim: `None`), as it is, with how it stands
    /// with the quotas.
    fn quota_checks(&self, namespace: Option<&str>) -> BTreeMap<ClaimKey, QuotaCheck> {
        let claims: Box<dyn Iterator<Item = &CachedClaim>> = match namespace {
            Some(namespace) => Box::new(self.claims.in_namespace(namespace).map(|c| &**c)),
            None => Box::new(self.claims.iter()),
        };
        claims
            .map(|c| {
                let key = claim_key(c);
                let raw = self.raw.get(&key).map_or(c, |r| &**r);
                (key, self.quota_check(raw))
            })
            .collect()
    }

    /// The server as it is (not as the classes' view labels it): what a driver hands
    /// [`Binder::reconcile_server`], as the binary hands it the watch's object.
    pub fn server_as_is(&self, name: &str) -> Option<&CachedServer> {
        let raw = self.raw_servers.get(name).map(|s| &**s);
        raw.or_else(|| self.servers.server(name))
    }

    /// The claim as it is (not as its class and quotas make it).
    fn raw_claim(&self, key: &ClaimKey) -> Option<Arc<CachedClaim>> {
        let cached = self.claims.shared(&key.namespace, &key.name)?;
        Some(self.raw.get(key).unwrap_or(cached).clone())
    }

    /// A class changed (`None`: deleted): every claim may take other servers now.
    pub fn apply_class(&mut self, name: &str, new: Option<Arc<ServerClass>>) -> Wake {
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
            true => Wake::default(),
            false => self.resolve_all(),
        }
    }

    /// The classes were listed anew.
    pub fn relist_classes(&mut self, all: Vec<Arc<ServerClass>>) -> Wake {
        self.classes.replace_classes(all);
        self.resolve_all()
    }

    /// A namespace's labels changed (`None`: deleted).
    pub fn apply_namespace(
        &mut self,
        name: &str,
        labels: Option<BTreeMap<String, String>>,
    ) -> Wake {
        // Its labels are all a decision reads of it, and only a class reads them.
        match self.classes.put_namespace(name, labels) && !self.classes.is_empty() {
            true => self.resolve_all(),
            false => Wake::default(),
        }
    }

    /// The namespaces were listed anew.
    pub fn relist_namespaces(&mut self, all: HashMap<String, BTreeMap<String, String>>) -> Wake {
        self.classes.replace_namespaces(all);
        self.resolve_all()
    }

    /// Resolves every claim against the classes again and wakes everything whose
    /// decision may change: classes and namespaces change seldom, and a class can move
    /// any claim's servers, so a change counts as a relist (no claim changes when no
    /// class is involved, and then nobody is woken).
    fn resolve_all(&mut self) -> Wake {
        let servers: Vec<Arc<CachedServer>> = self
            .servers
            .iter_shared()
            .map(|s| self.raw_servers.get(meta::name(&**s)).unwrap_or(s).clone())
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
            .map(|c| self.raw.get(&claim_key(c)).unwrap_or(c).clone())
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
        self.recount_in_flight();
        match changed {
            true => crate::binding::wakeups::on_relist(&self.servers, &self.claims),
            false => Wake::default(),
        }
    }

    /// The server as the classes make it ([`ClassCatalog::resolve_server`]), remembering
    /// the server as it is if that differs.
    fn resolved_server(&mut self, server: Arc<CachedServer>) -> Arc<CachedServer> {
        let name = meta::name(&*server).to_string();
        match self.classes.resolve_server(&server) {
            Some(view) => {
                self.raw_servers.insert(name, server);
                Arc::new(view)
            }
            None => {
                self.raw_servers.remove(&name);
                server
            }
        }
    }

    /// The claim as its class and quotas make it, remembering the claim as it is if that
    /// differs.
    fn resolved(&mut self, key: &ClaimKey, claim: Arc<CachedClaim>) -> Arc<CachedClaim> {
        let (effective, class) = self.classes.resolve(&claim);
        let effective = match self.over_quota(&claim, &class) {
            true => Arc::new(without_servers(&effective)),
            false => effective,
        };
        match Arc::ptr_eq(&effective, &claim) {
            true => self.raw.remove(key),
            false => self.raw.insert(key.clone(), claim),
        };
        effective
    }

    /// Whether an unbound `claim` is over quota: it takes no server, and no place in
    /// the matching, until a charge frees (a bound claim keeps its server and counts).
    fn over_quota(&self, claim: &CachedClaim, class: &ClassCheck) -> bool {
        !meta::is_bind_completed(claim) && self.quota_check_of(claim, class).holds_back()
    }

    pub fn servers(&self) -> &ServerCatalog {
        &self.servers
    }

    pub fn claims(&self) -> &ClaimCatalog {
        &self.claims
    }

    pub fn assumed(&self) -> &AssumedChoices {
        &self.assumed
    }

    pub fn refused(&self) -> &RefusedWrites {
        &self.refused
    }

    /// Ends the claim's back-off at `now` (a driver that moves time in steps of its own:
    /// the model check).
    pub fn end_backoff(&mut self, key: &ClaimKey, now: Timestamp) {
        self.refused.expire(key, now);
    }

    /// The claims of `wake` in the order to reconcile them
    /// ([`Wake::claims_in_order`]).
    pub fn in_order(&self, wake: &Wake) -> Vec<ClaimKey> {
        wake.claims_in_order(&self.servers, &self.claims)
    }

    /// A server changed (`None`: deleted).
    pub fn apply_server(&mut self, name: &str, new: Option<Arc<CachedServer>>) -> Wake {
        self.change_server(name, new, None)
    }

    /// A server was deleted; `last` is its final state, which counts as what it was if
    /// the catalog never held it.
    pub fn apply_server_deleted(&mut self, last: Arc<CachedServer>) -> Wake {
        let name = meta::name(&*last).to_string();
        self.change_server(&name, None, Some(last))
    }

    fn change_server(
        &mut self,
        name: &str,
        new: Option<Arc<CachedServer>>,
        last: Option<Arc<CachedServer>>,
    ) -> Wake {
        let old = self.servers.shared(name).cloned().or(last);
        let new = new.map(|s| self.resolved_server(s));
        match &new {
            Some(s) => self.servers.upsert(s.clone()),
            None => {
                self.raw_servers.remove(name);
                self.servers.remove(name);
            }
        }
        self.assumed.observe_server(name, new.as_deref());
        self.sync_in_flight(&[name], &[]);
        let fixed = self.refusing.observe(name, new.as_deref());
        let in_flight = self.assumed.len();
        let (servers, claims) = (&self.servers, &self.claims);
        let mut wake = (self.rules.triggers.server_changed)(
            old.as_deref(),
            new.as_deref(),
            servers,
            claims,
            in_flight,
        );
        if fixed {
            // Free for picks again, and no longer what the claims naming it wait for.
            wake.extend(self.server_refusal_changed(name));
        }
        wake
    }

    /// The API server's answer to a server's last write, while it refuses them.
    fn refusal_of(&self, now: Timestamp) -> impl Fn(&str) -> Option<String> + '_ {
        move |server| self.refusing.message(server, now).map(str::to_string)
    }

    /// The server controller's write made from `server` was refused with `message`:
    /// picks pass the server over, and the claims naming it are told, until it changes.
    pub fn server_write_refused(
        &mut self,
        server: &CachedServer,
        message: &str,
        now: Timestamp,
    ) -> Wake {
        self.refusing.refused(server, message, now);
        self.server_refusal_changed(meta::name(server))
    }

    /// What a server's refusal starting or ending wakes: the claims naming it, and the
    /// waiting claims, whose picks and summaries count it.
    fn server_refusal_changed(&self, name: &str) -> Wake {
        let mut wake = Wake::default();
        let naming = self.claims.claims_naming(name);
        wake.claims.extend(naming.into_iter().map(claim_key));
        if let Some(server) = self.servers.server(name).filter(|s| is_free(s)) {
            let per_shape = self.servers.free_index().len() + self.assumed.len() + 1;
            let first = first_waiting_for(server, per_shape, self.claims.waiting());
            wake.claims.extend(first);
        }
        wake
    }

    /// A claim changed (`None`: deleted).
    pub fn apply_claim(&mut self, key: &ClaimKey, new: Option<Arc<CachedClaim>>) -> Wake {
        self.change_claim(key, new, None)
    }

    /// A claim was deleted; `last` is its final state, which counts as what it was if
    /// the catalog never held it.
    pub fn apply_claim_deleted(&mut self, last: Arc<CachedClaim>) -> Wake {
        let key = claim_key(&last);
        self.change_claim(&key, None, Some(last))
    }

    /// The free-server index splits its classes by the label keys claims select on: a
    /// claim with a new key regroups it first.
    fn change_claim(
        &mut self,
        key: &ClaimKey,
        new: Option<Arc<CachedClaim>>,
        last: Option<Arc<CachedClaim>>,
    ) -> Wake {
        let old = self
            .claims
            .shared(&key.namespace, &key.name)
            .cloned()
            .or(last);
        let new = match new {
            Some(c) => Some(self.resolved(key, c)),
            None => {
                self.raw.remove(key);
                None
            }
        };
        match &new {
            Some(c) => {
                if !self.servers.tracks_selector_of(c) {
                    self.servers.track_selectors([c.as_ref()]);
                }
                self.claims.upsert(c.clone());
            }
            None => self.claims.remove(&key.namespace, &key.name),
        }
        self.refused.observe_claim(key, new.as_deref());
        let rule = self.rules.assumption_ends;
        let ended = self.assumed.observe_claim_with(rule, key, new.as_deref());
        self.sync_in_flight(&[], &[key]);
        let mut wake = (self.rules.triggers.claim_changed)(
            old.as_deref(),
            new.as_deref(),
            &self.servers,
            &self.claims,
        );
        if let Some(server) = ended {
            wake.extend(self.assumption_ended(&server));
        }
        wake
    }

    /// One step of the controllers' start ([`crate::binding::wakeups::on_start_step`]).
    pub fn start_step(&self, cursor: &mut ResyncCursor, share: usize) -> Option<Wake> {
        crate::binding::wakeups::on_start_step(&self.servers, &self.claims, cursor, share)
    }

    /// One tick of the periodic resync ([`crate::binding::wakeups::on_resync_tick`]).
    pub fn resync_tick(&self, cursor: &mut ResyncCursor, ticks: u32) -> Wake {
        crate::binding::wakeups::on_resync_tick(&self.servers, &self.claims, cursor, ticks)
    }

    /// The servers were listed anew: every object may have changed.
    pub fn relist_servers(&mut self, all: Vec<Arc<CachedServer>>) -> Wake {
        self.raw_servers.clear();
        let all: Vec<Arc<CachedServer>> =
            all.into_iter().map(|s| self.resolved_server(s)).collect();
        self.servers.replace_all(all);
        let servers = &self.servers;
        self.assumed
            .relisted_servers(&|name| servers.server(name).cloned());
        self.recount_in_flight();
        crate::binding::wakeups::on_relist(&self.servers, &self.claims)
    }

    /// The claims were listed anew.
    pub fn relist_claims(&mut self, all: Vec<Arc<CachedClaim>>) -> Wake {
        self.raw.clear();
        let all: Vec<Arc<CachedClaim>> = all
            .into_iter()
            .map(|c| self.resolved(&claim_key(&c), c))
            .collect();
        self.servers.track_selectors(all.iter().map(Arc::as_ref));
        self.claims = ClaimCatalog::from_claims(all);
        let claims = &self.claims;
        let rule = self.rules.assumption_ends;
        let ended = self
            .assumed
            .relisted_claims(rule, &|k| claims.claim(&k.namespace, &k.name).cloned());
        self.recount_in_flight();
        let mut wake = crate::binding::wakeups::on_relist(&self.servers, &self.claims);
        for server in ended {
            wake.extend(self.assumption_ended(&server));
        }
        wake
    }

    /// Counts again the picks in flight of these servers and claims ([`InFlight`]).
    fn sync_in_flight(&mut self, servers: &[&str], claims: &[&ClaimKey]) {
        let (index, waiting) = (self.servers.free_index(), self.claims.waiting());
        let shape_of = |k: &ClaimKey| waiting.shared_shape_of(k);
        let (servers, claims) = (servers.iter().copied(), claims.iter().copied());
        self.in_flight
            .sync(servers, claims, &self.assumed, index, &shape_of);
    }

    fn recount_in_flight(&mut self) {
        let (index, waiting) = (self.servers.free_index(), self.claims.waiting());
        let shape_of = |k: &ClaimKey| waiting.shared_shape_of(k);
        self.in_flight.recount(&self.assumed, index, &shape_of);
    }

    fn assumption_ended(&self, server: &str) -> Wake {
        (self.rules.triggers.assumption_ended)(server, &self.servers, &self.claims)
    }

    /// Decides for `claim` (as the cache or a live read shows it) and, when the step
    /// picks a server, assumes it chosen: the binder's lock, held by the caller across
    /// this call, keeps a reconcile running at once from picking the same server.
    /// `live` is the server a previous [`ClaimStep::ReadServer`] named, as read (`None`
    /// inside: the API server says NotFound).
    pub fn reconcile_claim(
        &mut self,
        claim: &CachedClaim,
        live: Option<(&str, Option<&CachedServer>)>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimStep {
        let step = self.plan_claim(claim, live, sight, now);
        self.start(claim, &step);
        step
    }

    /// Starts carrying out a step [`Binder::plan_claim`] planned for `claim`: a step that
    /// picks a server starts its assumption (docs/binding.md, "The assumed-choice cache"),
    /// decided on the claim at its current resourceVersion.
    pub fn start(&mut self, claim: &CachedClaim, step: &ClaimStep) {
        if let ClaimStep::Act(work) = step
            && let Some(server) = &work.picked
        {
            let based_on = claim.meta().resource_version.clone();
            self.assumed.assume(server, work.key.clone(), based_on);
            self.sync_in_flight(&[server], &[&work.key]);
        }
    }

    /// [`Binder::reconcile_claim`] without starting an assumption: what it would do.
    pub fn plan_claim(
        &self,
        claim: &CachedClaim,
        live: Option<(&str, Option<&CachedServer>)>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimStep {
        if meta::is_deleting(claim) {
            return ClaimStep::Idle;
        }
        let key = claim_key(claim);
        // The decisions read the claim as its class makes it; what they write goes onto
        // the claim as it is.
        let (mut effective, class) = self.classes.resolve_ref(claim);
        let quota = self.quota_check_of(claim, &class);
        if self.over_quota(claim, &class) {
            effective = Cow::Owned(without_servers(&effective));
        }
        let decision = self.decide_claim(&effective, (&class, &quota), live, sight, now);
        let mut plan = plan_claim(&effective, &decision, &Time(now));
        if let (Cow::Owned(_), Some(object)) = (&effective, plan.object.as_mut()) {
            *object = rebase(object, claim);
        }
        if let Some(server) = plan.confirm_server {
            return ClaimStep::ReadServer(server);
        }
        let backing_off = self.refused.backing_off(&key, now);
        let repeats_refused = backing_off.is_some_and(|r| r.write == decision.name());
        if let Some(after) = backing_off.and_then(|r| remaining(r.until, now))
            && (plan.is_noop() || repeats_refused && plan.object.is_some())
        {
            // Its status already says it backs off, or the plan would send the very
            // write the API server refused: look again when the back-off ends.
            let decision = Box::new(decision);
            return ClaimStep::Wait { decision, after };
        }
        if is_summary_refresh(claim, &plan)
            && let Some(after) = self.summaries.delay(&key, now)
        {
            // At most one summary write per claim per interval (binding::coalesce).
            let decision = Box::new(decision);
            return ClaimStep::Wait { decision, after };
        }
        // A claim that waits is looked at again once its summary may be rewritten, so
        // the summary follows the servers within about one interval.
        let then = match backing_off {
            Some(r) => remaining(r.until, now),
            None => decision.waits().then(|| self.summaries.interval()),
        };
        // A restored pair is charged as a claim moving toward its bind (the server
        // controller completes it once it is).
        let moves = decision.moves_toward_bind() || restoring(claim, &self.servers).is_some();
        let charges = match (&quota, class.class()) {
            (QuotaCheck::Room(quotas), Some(class)) if moves => {
                self.quotas.charges_for(claim, class, quotas)
            }
            _ => Vec::new(),
        };
        ClaimStep::Act(Box::new(ClaimWork {
            key,
            charges,
            wakes: wakes_on_start(&decision),
            picked: assumption_for(&decision).map(str::to_string),
            since_created: seconds_since_created(claim, now),
            decision,
            plan,
            then,
        }))
    }

    fn decide_claim(
        &self,
        claim: &CachedClaim,
        (class, quota): (&ClassCheck, &QuotaCheck),
        live: Option<(&str, Option<&CachedServer>)>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimDecision {
        let key = claim_key(claim);
        // A bind that stands is completed again whatever its class or quota says now.
        if self.refused.backing_off(&key, now).is_none()
            && standing_bind(claim, &self.servers).is_none()
            && let Some(decision) = decide_class(claim, class)
                .or_else(|| decide_quota(claim, quota, restoring(claim, &self.servers)))
                .or_else(|| decide_refusing(claim, &self.servers, &self.refusal_of(now)))
        {
            return decision;
        }
        let held_back = self.refused.held_back(now);
        let (nobody, blind);
        let (claims, waiting) = match sight {
            Sight::All => (&self.claims, self.claims.waiting()),
            Sight::NotYetRivals => {
                // Not their refs (their namespaces' turns count them as served).
                nobody = ClaimCatalog::new();
                blind = self.claims.waiting().without_serving();
                (&nobody, &blind)
            }
        };
        let chosen_for_others = |server: &str| self.assumed.chosen_for_other(server, &key);
        let first = FirstNamed::default();
        let turn = |rival: &CachedClaim, server: &str| {
            pick_or_turn(server, rival, &self.assumed, || {
                self.has_turn_among(rival, server, now, &first, self)
            })
        };
        let passed_over = pass_over(claim, &self.servers, claims, &chosen_for_others, &turn);
        let refuses = |server: &str| self.refusing.contains(server, now);
        let skip = |server: &str| refuses(server) || passed_over(server);
        let pick = PickInputs {
            skip: &skip,
            refuses: &refuses,
            waiting,
            assumed: &self.assumed,
            held_back: &held_back,
            refused: self.refused.backing_off(&key, now),
            in_flight: Some(&self.in_flight),
        };
        let decide = self.rules.claim;
        match live {
            None => decide(claim, &self.servers, &pick, Liveness::Cached),
            Some((name, live)) => {
                let live_view = live.and_then(|s| self.classes.resolve_server(s));
                let view = WithLiveServer {
                    base: &self.servers,
                    name,
                    live: live_view.as_ref().or(live),
                };
                decide(claim, &view, &pick, Liveness::Confirmed)
            }
        }
    }

    /// Whether the fair order lets `claim`, which names `server`, take it now
    /// ([`turn_on`]), as this binder sees the claims and its picks in flight.
    pub fn has_turn(&self, claim: &CachedClaim, server: &str, now: Timestamp) -> bool {
        self.has_turn_among(claim, server, now, &FirstNamed::default(), self)
    }

    /// [`Binder::has_turn`] with the picks in flight and the claims backing off of
    /// `claim_side` (the claim controller's binder: this one in the binary), asking only
    /// the first in the fair order of the users' claims naming `server`
    /// ([`first_named`]), or of the controller-chosen ones its picks do not hold
    /// ([`first_stray`]: they rank after users' in the winner rule, so they are asked
    /// apart), found once per server in `first`.
    fn has_turn_among(
        &self,
        claim: &CachedClaim,
        server: &str,
        now: Timestamp,
        first: &FirstNamed,
        claim_side: &Binder,
    ) -> bool {
        let key = claim_key(claim);
        let waiting = self.claims.waiting();
        let picks = &claim_side.assumed;
        let held_back = claim_side.refused.held_back(now);
        let Some(named) = self.servers.server(server) else {
            return false;
        };
        let stray = is_controller_chosen(claim);
        let first_key = first
            .borrow_mut()
            .entry((server.to_string(), stray))
            .or_insert_with(|| {
                if stray {
                    let held = |k: &ClaimKey| picks.holds(server, k);
                    return first_stray(named, &held_back, waiting, &held);
                }
                let naming = self.claims.claims_naming(server);
                let keys: Vec<ClaimKey> = naming.into_iter().map(claim_key).collect();
                first_named(named, keys.iter(), &held_back, waiting)
            })
            .clone();
        if first_key.as_ref() != Some(&key) {
            return false;
        }
        let refuses = |s: &str| claim_side.refusing.contains(s, now);
        let skip = |s: &str| refuses(s) || picks.chosen_for_other(s, &key);
        let pick = PickInputs {
            skip: &skip,
            refuses: &refuses,
            waiting,
            assumed: picks,
            held_back: &held_back,
            refused: None,
            in_flight: std::ptr::eq(claim_side, self).then_some(&self.in_flight),
        };
        matches!(
            turn_on(server, claim, &self.servers, &pick),
            Placement::Pick(_)
        )
    }

    /// The write of the claim's object (metadata and spec) for `claim` ended at `now`.
    /// Returns who to wake: a failed pick's server is free again for the claims that
    /// passed it over. (Once the pick is written, the assumption lasts until the watches
    /// show it taken over or withdrawn, whatever becomes of the status write after it.)
    /// A refused write on the unbound path starts the claim's back-off.
    pub fn claim_object_written(
        &mut self,
        work: &ClaimWork,
        claim: &CachedClaim,
        written: ObjectWrite<'_>,
        now: Timestamp,
    ) -> Wake {
        if let ObjectWrite::Refused(message) = written
            && work.decision.backs_off_when_refused()
        {
            let write = (work.decision.name(), work.decision.completes_a_bind());
            self.refused.refused(claim, write, message, now);
        }
        let Some(server) = &work.picked else {
            return Wake::default();
        };
        match written {
            ObjectWrite::Written(latest) => {
                let version = latest.meta().resource_version.clone();
                self.assumed.written(server, &work.key, version);
                Wake::default()
            }
            ObjectWrite::Conflict | ObjectWrite::Refused(_) => {
                let ended = self.assumed.write_failed(server, &work.key);
                self.sync_in_flight(&[server], &[&work.key]);
                match ended {
                    Some(server) => self.assumption_ended(&server),
                    None => Wake::default(),
                }
            }
        }
    }

    /// The claim's status was written at `now`: a waiting claim's summary starts its
    /// interval.
    pub fn claim_status_written(&mut self, work: &ClaimWork, now: Timestamp) {
        if work.reports_status_write() {
            self.summaries.wrote(&work.key, now);
        }
    }

    /// Decides for `server`; `live` is the claim a previous [`ServerStep::ReadClaim`]
    /// named, as read.
    pub fn reconcile_server(
        &self,
        server: &CachedServer,
        live: Option<(&ServerClaimRef, Option<&CachedClaim>)>,
        now: Timestamp,
    ) -> ServerStep {
        self.reconcile_server_beside(self, server, live, now)
    }

    /// [`Binder::reconcile_server`] in a process whose claim controller runs
    /// `claim_side`: its picks in flight and its claims backing off count. The binary's
    /// two controllers share one binder; the model check, which runs them apart, hands
    /// the server controller the claim controller's (docs/binding.md, "Whose pick is it").
    pub fn reconcile_server_beside(
        &self,
        claim_side: &Binder,
        server: &CachedServer,
        live: Option<(&ServerClaimRef, Option<&CachedClaim>)>,
        now: Timestamp,
    ) -> ServerStep {
        let decide = self.rules.server;
        let gates = &self.release_gates(server);
        let first = FirstNamed::default();
        let name = meta::name(server);
        let in_turn = |claim: &CachedClaim| {
            pick_or_turn(name, claim, &claim_side.assumed, || {
                self.has_turn_among(claim, name, now, &first, claim_side)
            })
        };
        let turn: Turn<'_> = &in_turn;
        let charged = |claim: &CachedClaim| self.quota_check(claim).admits();
        let admit: Admit<'_> = &charged;
        let original = server;
        let view = self.classes.resolve_server(server);
        let server = view.as_ref().unwrap_or(original);
        let decision = match live {
            None => decide(server, &self.claims, Liveness::Cached, gates, turn, admit),
            Some((r, live)) => {
                let live = live.map(|c| self.classes.resolve_ref(c).0);
                let view = WithLiveClaim {
                    base: &self.claims,
                    namespace: &r.namespace,
                    name: &r.name,
                    live: live.as_deref(),
                };
                decide(server, &view, Liveness::Confirmed, gates, turn, admit)
            }
        };
        // What is written starts from the server as it is, never the classes' view.
        let mut plan = plan_server(original, &decision, &Time(now));
        self.record_bound_class(&decision, &mut plan);
        if let Some(claim) = plan.confirm_claim {
            return ServerStep::ReadClaim(claim);
        }
        let cleaning_took = match decision {
            ServerDecision::Cleaned => cleaning_took(original, now),
            _ => None,
        };
        ServerStep::Act(Box::new(ServerWork {
            decision,
            plan,
            cleaning_took,
        }))
    }

    /// The gates a release of `server` records now ([`gates::release_gates`]): its own,
    /// and those of the class its claim bound under as the server records it (for a
    /// server bound without a record, the classes that take it in now), else the
    /// controller's default.
    pub fn release_gates(&self, server: &CachedServer) -> Vec<String> {
        let now = self.classes.release_gates_of(server);
        let class = (self.rules.class_gates)(server, now);
        gates::release_gates(server, class.as_deref(), &self.config.release_gates)
    }

    /// A write that binds a claim (its uid into the server's ref) records the class the
    /// claim binds under and the gates that class names now ([`ANNOTATION_BOUND_CLASS`]):
    /// its release waits for them whatever happens to the class since. A claim without a
    /// class leaves no record.
    fn record_bound_class(&self, decision: &ServerDecision, plan: &mut ServerPlan) {
        let claim = match decision {
            ServerDecision::ClaimForWinner { winner, .. } => winner,
            ServerDecision::FillUid { claim } => claim,
            _ => return,
        };
        let Some(object) = plan.object.as_mut() else {
            return;
        };
        let key = ClaimKey::of(&claim.namespace, &claim.name);
        let raw = self.raw.get(&key).map(|c| &**c);
        let bound = raw.or_else(|| {
            self.claims
                .shared(&claim.namespace, &claim.name)
                .map(|c| &**c)
        });
        let class = bound.and_then(|c| c.spec.server_class_name.as_deref());
        let Some(class) = class.filter(|c| !c.is_empty()) else {
            return;
        };
        let named = self
            .classes
            .class(class)
            .and_then(|c| c.spec.release_gates.as_ref());
        let record = BoundClass {
            class: class.to_string(),
            release_gates: named.map(|g| g.iter().map(|g| g.name.clone()).collect()),
        };
        meta::set_annotation_to(object, ANNOTATION_BOUND_CLASS, record.annotation());
    }

    /// [`Binder::plan_claim`] with a live read that answers at once (the test world,
    /// the model check, `explain`): the step after any read it asks for.
    pub fn plan_claim_reading(
        &self,
        claim: &CachedClaim,
        read: impl Fn(&str) -> Option<CachedServer>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimStep {
        match self.plan_claim(claim, None, sight, now) {
            ClaimStep::ReadServer(name) => {
                let live = read(&name);
                self.plan_claim(claim, Some((&name, live.as_ref())), sight, now)
            }
            step => step,
        }
    }

    /// [`Binder::reconcile_claim`] with a live read that answers at once.
    pub fn reconcile_claim_reading(
        &mut self,
        claim: &CachedClaim,
        read: impl Fn(&str) -> Option<CachedServer>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimStep {
        let step = self.plan_claim_reading(claim, read, sight, now);
        self.start(claim, &step);
        step
    }

    /// [`Binder::reconcile_server`] with a live read that answers at once.
    pub fn reconcile_server_reading(
        &self,
        server: &CachedServer,
        read: impl Fn(&ServerClaimRef) -> Option<CachedClaim>,
        now: Timestamp,
    ) -> ServerStep {
        self.reconcile_server_reading_beside(self, server, read, now)
    }

    /// [`Binder::reconcile_server_beside`] with a live read that answers at once.
    pub fn reconcile_server_reading_beside(
        &self,
        claim_side: &Binder,
        server: &CachedServer,
        read: impl Fn(&ServerClaimRef) -> Option<CachedClaim>,
        now: Timestamp,
    ) -> ServerStep {
        match self.reconcile_server_beside(claim_side, server, None, now) {
            ServerStep::ReadClaim(r) => {
                let live = read(&r);
                let live = Some((&r, live.as_ref()));
                self.reconcile_server_beside(claim_side, server, live, now)
            }
            act => act,
        }
    }
}

/// Whom a decision wakes as soon as it starts: a pick taken up without a write wakes its
/// server.
fn wakes_on_start(decision: &ClaimDecision) -> Wake {
    let mut wake = Wake::default();
    if let ClaimDecision::ResumePick { server } = decision {
        wake.servers.insert(server.clone());
    }
    wake
}

/// How long from `now` until `until`, if it is later.
fn remaining(until: Timestamp, now: Timestamp) -> Option<Duration> {
    let left = Duration::try_from(until.duration_since(now)).ok()?;
    (!left.is_zero()).then_some(left)
}

/// Seconds from the claim's creation until `now`.
fn seconds_since_created(claim: &CachedClaim, now: Timestamp) -> Option<f64> {
    let created = claim.meta().creation_timestamp.as_ref()?.0;
    let elapsed = Duration::try_from(now.duration_since(created)).ok()?;
    Some(elapsed.as_secs_f64())
}
