//! An exhaustive model check of the binding protocol, with the binary's own glue: each
//! controller is the real [`Binder`], which the controllers run too (its decisions and
//! plans, its wake-up rules, its assumed choices, its summary rule); the model only
//! schedules, delivers and writes.
//!
//! The world is tiny (2-3 claims, 1-2 servers) but the scheduler is adversarial. From
//! every state it tries every step:
//! - either controller delivers the next watch event of the other kind to its cache (so
//!   caches lag by any amount, but never go back in time, as with a real reflector), and
//!   applies the wake-up rules to it;
//! - either controller reconciles an object that something woke (never any other: a
//!   missing wake-up rule shows up as a state that never converges), deciding on its
//!   stale view; a live read, when a decision asks for one, sees the truth;
//! - either controller performs the next write of its plan, which hits a conflict if its
//!   resourceVersion is stale, or fails by injection (bounded); a claim write's watch
//!   event and its response arrive in either order;
//! - either controller crashes (bounded): it loses its cache, its assumed choices and the
//!   rest of its plan, and relists;
//! - either controller resyncs (bounded): everything of its kind is woken;
//! - a claim's back-off after a refused write ends (its timer; the binder's back-off is
//!   kept, its length abstracted);
//! - the next scripted user action happens (delete or create a claim, cordon, taint,
//!   relabel a server, add a selector, ...);
//! - in worlds with quotas: either controller delivers the next quota event (both see
//!   quotas late), or lists the quotas again (an expired watch: every change at once,
//!   with no event of its own); a claim step's charges are writes of their own, before its claim
//!   writes, at the quota's resourceVersion the decision read; and either process's
//!   recount, rung by a claim deleted (or a start, or its own conflict), reads its
//!   cache and each charge's claim live, then writes at the version it read.
//!
//! Invariants 1, 4, 5, 6 and 7 of docs/binding.md hold in every reachable state;
//! invariant 2 holds in every quiescent state (no event pending, no plan in flight,
//! nothing woken, no recount rung or half done, all user actions done), whatever crash,
//! fault and resync budget is left: convergence must not rely on a resync. And in a quiescent state a resync would change nothing, so no
//! decision waits on a wake-up that never comes.
//!
//! Here: the state, the two controllers and the protocol under test; `steps`: what may
//! happen next and how a write lands; `invariants`: the checks and the ghosts they keep;
//! `fingerprints`: which states are the same; `worlds`: the scenarios; `checks`: each
//! world in every interleaving; `mutants`: the rules changed as a defect would change
//! them, each of which must be caught.

use server_binder::binding::state::evidence;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::claim_side::assumed::Assumption;
use server_binder::binding::claim_side::backoff::{self, Refusal};
use server_binder::binding::state::gates;
use server_binder::binding::wakeups;
use server_binder::binding::wakeups::Wake;
use server_binder::binding::world::quota;
use server_binder::binding::*;

// Fingerprinting and the visited set are a fifth of the check's time with SipHash;
// fingerprints need a well-spread 64-bit hash, not a DoS-resistant one.
use rustc_hash::{FxHashMap as HashMap, FxHasher};

use crate::binding::claim_admission::admits_claim_update;
use crate::binding::support::*;
use crate::binding::world::{Conflict, Truth};

mod checks;
mod fingerprints;
mod invariants;
mod mutants;
mod steps;
mod worlds;

use fingerprints::*;
use invariants::*;
use steps::*;
use worlds::*;

/// The protocol's rules under test, swappable so mutants can be checked too.
#[derive(Clone, Copy)]
pub struct Protocol {
    /// What both controllers' binders run.
    pub rules: Rules,
    /// Whether admission (the CRD's CEL rule) lets a release gate of this name in.
    pub gate_admitted: fn(&str) -> bool,
    /// Whether a charge is written with the quota's resourceVersion as a precondition
    /// (`src/controllers/claim.rs`, `charge`).
    pub charge_precondition: bool,
    /// Whether the recount reads a charge's claim live before it drops the charge
    /// (`src/controllers/quota.rs`), or takes the cache's word for it.
    pub recount_reads_live: bool,
    /// Whether the recount charges a pair restored across a restore only within `hard`
    /// (`quota::Holds::Restored`), or as a bind, above it.
    pub restored_within_hard: bool,
    /// Whether the claim controller records an eviction on the budgets covering its
    /// claim before it writes it (`src/controllers/claim.rs`, `record_eviction`).
    pub record_evictions: bool,
    /// Whether a record is written with the budget's resourceVersion as a precondition.
    pub record_precondition: bool,
}

fn real_gate_admission(name: &str) -> bool {
    gates::check_gate_name(name).is_ok()
}

impl Protocol {
    pub fn real() -> Self {
        Self {
            rules: Rules::real(),
            gate_admitted: real_gate_admission,
            charge_precondition: true,
            recount_reads_live: true,
            restored_within_hard: true,
            record_evictions: true,
            record_precondition: true,
        }
    }
}

/// A user's or an admin's edit of a server.
#[derive(Clone, Debug)]
pub enum ServerEdit {
    Cordon,
    Uncordon,
    Taint(&'static str),
    /// An `Evict` taint of this key, without `timeAdded` (the server controller writes
    /// the time now, so a claim that does not tolerate it is evicted at once).
    Evict(&'static str),
    Untaint,
    Label(&'static str, &'static str),
    ClearRef,
    /// Time passes: every stamped taint's `timeAdded` moves an hour back, so every grace
    /// shorter than that runs out now (the model's clock is fixed; the binary's claim
    /// controller is woken at the deadline, here with the server's event).
    GraceRunsOut,
}

/// A scripted user action.
#[derive(Clone, Debug)]
pub enum UserOp {
    DeleteClaim(&'static str),
    CreateClaim(Box<CachedClaim>),
    EditServer(&'static str, ServerEdit),
    /// Adds `matchLabels: {key: value}` to a claim that has no selector.
    AddSelector(&'static str, &'static str, &'static str),
    /// A cleaner (named by the first field) starts cleaning a server for a gate: it reads
    /// the release the server is being cleaned after (a sloppy cleaner that finds none
    /// takes the generation), and what it cleans is the dirt there now.
    StartCleaner(&'static str, &'static str, &'static str),
    /// That cleaner passes its gate naming the release it read (`gates::pass_condition`),
    /// however late, without looking again: the protocol must not need it to.
    FinishCleaner(&'static str),
    /// An admin sets a server's `spec.releaseGates`; admission may refuse.
    SetGates(&'static str, Vec<&'static str>),
    /// The server controller restarts with other `--release-gates` (a rolling update, a
    /// second replica with another flag): it relists like after a crash.
    RestartServerController(Vec<&'static str>),
    /// An admin creates a quota (a new object: no status, generation 1).
    CreateQuota(Box<ServerQuota>),
    /// An admin deletes a quota.
    DeleteQuota(&'static str),
    /// Someone wipes a quota's status (a tool that writes status, a restore).
    WipeQuotaStatus(&'static str),
    /// An admin replaces a class's spec (`None`: deletes the class). Both controllers'
    /// watches deliver it at once: what is explored is the class changing under a bind.
    EditClass(&'static str, Option<Box<ServerClass>>),
}

/// One write a tenant may make to its claim's spec or annotations, at any point.
#[derive(Clone, Debug)]
pub enum TenantEdit {
    /// Sets an annotation to "yes" (a forged `bind-completed`, a forged `pre-bound`).
    Annotate(&'static str),
    /// Removes an annotation.
    Unannotate(&'static str),
    /// Sets `spec.serverRef`.
    Point(&'static str),
    /// Clears `spec.serverRef`.
    Unpoint,
    /// Adds `matchLabels: {key: value}`.
    Select(&'static str, &'static str),
}

/// An untrusted tenant: the edits it may make to its claim, in any order, at any point,
/// as often as the budget allows, each one only if admission (the CRD's CEL rules) lets
/// it through.
#[derive(Clone, Debug, Default)]
pub struct Tenant {
    pub claim: &'static str,
    pub edits: Vec<TenantEdit>,
    pub budget: u8,
}

/// A world to explore.
#[derive(Clone, Default)]
pub struct Scenario {
    pub name: &'static str,
    pub servers: Vec<CachedServer>,
    pub claims: Vec<CachedClaim>,
    pub user_ops: Vec<UserOp>,
    pub crashes: u8,
    pub faults: u8,
    pub resyncs: u8,
    /// Leader hand-overs with a claim plan in flight: the claim controller's process is
    /// replaced by a fresh one while the old one's writes still land, later, each at the
    /// version its decision read (a slow network, a leader that lost its lease).
    pub handovers: u8,
    /// How many watch events a cache may lag behind (see [`MAX_LAG`]).
    pub max_lag: usize,
    /// Every claim ends Bound: a full assignment exists and no pick may strand a claim.
    pub all_bind: bool,
    /// The server controller's `--release-gates` at the start.
    pub default_gates: Vec<&'static str>,
    /// A tenant who forges, if any.
    pub tenant: Option<Tenant>,
    /// Which claim object writes admission refuses (old, new), like a webhook of the
    /// cluster's own would: every time, whatever the budget.
    pub refuses: Option<Refuser>,
    /// Claims bound in every quiescent state (liveness beside a claim that never binds).
    pub must_bind: Vec<&'static str>,
    /// Claims that can never bind (admission refuses their writes): they back off for
    /// good, so their back-off timers do not keep a state from being quiescent, and
    /// invariant 2 does not ask them to bind.
    pub never_bind: Vec<&'static str>,
    /// The classes (fixed for the run; every binder lists them).
    pub classes: Vec<ServerClass>,
    /// The quotas at the start (invariant 7).
    pub quotas: Vec<ServerQuota>,
    /// The disruption budgets (fixed for the run; invariant 8).
    pub budgets: Vec<ServerDisruptionBudget>,
    /// Exactly one of these claims is bound in every quiescent state (a quota lets one
    /// in, whichever).
    pub one_bound_of: Vec<&'static str>,
    /// Claims evicted in every quiescent state (liveness: a due eviction happens).
    pub evicted_at_rest: Vec<&'static str>,
}

/// Whether admission refuses a claim write from `old` to `new`.
pub type Refuser = fn(&CachedClaim, &CachedClaim) -> bool;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    ClaimController,
    ServerController,
}

#[derive(Clone, Debug)]
enum InFlight {
    Claim {
        base: CachedClaim,
        object: Option<CachedClaim>,
        status: Option<Box<ServerClaimStatus>>,
        /// The server this plan's pick assumed, until its object write's result.
        assumed: Option<String>,
        /// The binder's step being carried out (reported on each write's result).
        work: Arc<ClaimWork>,
        /// The charges still to write, before anything else (docs/binding.md, "Server
        /// quotas"), each at the quota's resourceVersion the decision read.
        charges: Vec<ServerQuota>,
        /// The budget records still to write, before the charges (docs/binding.md,
        /// "Disruption budgets"), each at the budget's resourceVersion the decision read.
        records: Vec<ServerDisruptionBudget>,
    },
    CachedServer {
        base: CachedServer,
        object: Option<CachedServer>,
        status: Option<ServerStatus>,
    },
}

impl InFlight {
    fn name(&self) -> String {
        match self {
            InFlight::Claim { base, .. } => meta::name(base).to_string(),
            InFlight::CachedServer { base, .. } => meta::name(base).to_string(),
        }
    }
}

/// The claim of this name in the binder's cache. Claim names are unique across the
/// namespaces of a world, so the model keys claims by name.
fn claim_named<'b>(binder: &'b Binder, name: &str) -> Option<&'b CachedClaim> {
    binder
        .world()
        .claims()
        .iter()
        .find(|c| meta::name(*c) == name)
}

/// The claim of this name as the claim controller reconciles it: as it is, the way the
/// binary's watch store holds it, not as its class and quotas make it in the binder's
/// cache (a decision's writes go onto the claim as it is). The claim controller's own
/// kind is kept current, so that is the stored claim.
fn claim_as_is<'s>(state: &'s State, name: &str) -> Option<&'s CachedClaim> {
    state.truth.claims.get(name)
}

/// The key of the claim of this name: its namespace from the object, or (deleted) from
/// the cache.
fn claim_key_in(binder: &Binder, name: &str, new: Option<&CachedClaim>) -> ClaimKey {
    let known = new.or_else(|| claim_named(binder, name));
    let namespace = known.map_or(NS, |c| meta::namespace(c));
    ClaimKey::of(namespace, name)
}

/// One controller process: its binder (the caches, the assumed choices), the watch
/// events not yet delivered to it, the objects woken and not yet reconciled, and the
/// rest of the plan it is carrying out.
#[derive(Clone, Debug)]
struct Ctl {
    /// Shared between a state and its successors until one of them changes it (most steps
    /// change one controller's binder at most): cloning a binder, its catalogs and views,
    /// was a large share of the check's time.
    binder: Arc<Binder>,
    claim_events: VecDeque<(String, Option<CachedClaim>)>,
    server_events: VecDeque<(String, Option<CachedServer>)>,
    /// Quota events: both controllers see quotas through a watch, with lag (the claim
    /// controller's charges and the recounts write them).
    quota_events: VecDeque<(String, Option<ServerQuota>)>,
    /// Budget events: the claim controller sees budgets through a watch, with lag (its
    /// records write them). The server controller decides nothing on budgets.
    budget_events: VecDeque<(String, Option<ServerDisruptionBudget>)>,
    woken: BTreeSet<String>,
    in_flight: Option<InFlight>,
    /// The quotas' recount is due in this process: it started (relisted), saw a claim
    /// deleted, or its last write conflicted (its periodic round comes).
    recount_due: bool,
    /// The recount's writes still to make: each quota with its new status, at the
    /// resourceVersion the recount read.
    recounts: Vec<ServerQuota>,
}

/// A summary refresh waits out the status interval, which is longer than any run here:
/// the binary writes it later, on a timer, and it changes no binding.
const STATUS_INTERVAL: Duration = Duration::MAX;

impl Ctl {
    /// A (re)started controller: it lists everything and wakes all of its kind.
    fn fresh(truth: &Truth, who: Who, p: &Protocol, gates: &[String]) -> Self {
        let config = BinderConfig {
            status_interval: STATUS_INTERVAL,
            release_gates: gates.to_vec(),
        };
        let listing = Listing {
            classes: truth.classes.iter().cloned().map(Arc::new).collect(),
            quotas: truth.quotas.values().cloned().map(Arc::new).collect(),
            budgets: truth.budgets.values().cloned().map(Arc::new).collect(),
            ..Listing::of(
                truth.servers.values().cloned(),
                truth.claims.values().cloned(),
            )
        };
        let binder = Binder::listed(p.rules, config, listing, now().0);
        Self {
            binder: Arc::new(binder),
            claim_events: VecDeque::new(),
            server_events: VecDeque::new(),
            quota_events: VecDeque::new(),
            budget_events: VecDeque::new(),
            woken: everything(truth, who),
            in_flight: None,
            recount_due: !truth.quotas.is_empty(),
            recounts: Vec::new(),
        }
    }

    /// The binder, to change: a copy of its own if a successor state shares it.
    fn binder_mut(&mut self) -> &mut Binder {
        Arc::make_mut(&mut self.binder)
    }

    /// Keeps what a wake-up says about this controller's own kind.
    fn wake(&mut self, who: Who, wake: Wake) {
        match who {
            Who::ClaimController => self
                .woken
                .extend(wake.claims.into_iter().map(|k| k.name.clone())),
            Who::ServerController => self.woken.extend(wake.servers),
        }
    }

    /// A claim changed in this controller's cache (its own write, a user's, or a watch
    /// event delivered): the binder applies it and says what to wake.
    fn see_claim(&mut self, who: Who, name: &str, new: Option<CachedClaim>) {
        let key = claim_key_in(&self.binder, name, new.as_ref());
        // A claim gone rings the recount (`recount_wanted` in the binary).
        self.recount_due |= new.is_none() && !self.binder.world().quotas().is_empty();
        let world = self.binder.world();
        let last = world.claims().shared(&key.namespace, &key.name).cloned();
        let wake = match (new, last) {
            (Some(new), _) => self.binder_mut().apply(Arc::new(new)),
            (None, Some(last)) => self.binder_mut().delete(last),
            (None, None) => Wake::default(),
        };
        self.wake(who, wake);
    }

    /// A quota changed in this controller's cache (a watch event delivered).
    fn see_quota(&mut self, who: Who, name: &str, new: Option<ServerQuota>) {
        let namespace = new.as_ref().map_or(NS, |q| meta::namespace(q)).to_string();
        // A quota with work for the recount rings it, as the binary's watch does.
        self.recount_due |= new
            .as_ref()
            .is_some_and(|q| self.binder.world().quota_wants_recount(q));
        let last = self
            .binder
            .world()
            .quotas()
            .quota(&namespace, name)
            .cloned();
        let wake = match (new, last) {
            (Some(new), _) => self.binder_mut().apply(Arc::new(new)),
            (None, Some(last)) => self.binder_mut().delete(last),
            (None, None) => Wake::default(),
        };
        self.wake(who, wake);
    }

    /// A budget changed in the claim controller's cache (a watch event delivered).
    fn see_budget(&mut self, new: ServerDisruptionBudget) {
        let wake = self.binder_mut().apply(Arc::new(new));
        self.wake(Who::ClaimController, wake);
    }

    fn see_server(&mut self, who: Who, name: &str, new: Option<CachedServer>) {
        let last = self.binder.world().servers().shared(name).cloned();
        let wake = match (new, last) {
            (Some(new), _) => self.binder_mut().apply(Arc::new(new)),
            (None, Some(last)) => self.binder_mut().delete(last),
            (None, None) => Wake::default(),
        };
        self.wake(who, wake);
    }

    /// The object write of a claim plan ended: the binder says what to wake.
    fn claim_object_written(
        &mut self,
        work: &ClaimWork,
        claim: &CachedClaim,
        written: ObjectWrite<'_>,
    ) {
        let wake = self
            .binder_mut()
            .claim_object_written(work, claim, written, now().0);
        self.wake(Who::ClaimController, wake);
    }
}

#[derive(Clone)]
struct State {
    /// Shared with the successor states until one of them writes (see [`Ctl::binder`]).
    truth: Arc<Truth>,
    claim_ctl: Ctl,
    server_ctl: Ctl,
    /// The scenario's admission rule for claim writes.
    refuses: Option<Refuser>,
    /// Back-off ends still to come ([`BACKOFF_ENDS`]).
    backoff_ends: u8,
    crashes: u8,
    faults: u8,
    resyncs: u8,
    handovers: u8,
    /// The rest of the plan the claim controller's old process was carrying out when it
    /// handed over: its writes still land, each at the version it read, reporting to
    /// nobody.
    handed_over: Option<InFlight>,
    next_user_op: usize,
    protocol: Protocol,
    /// The server controller's `--release-gates` now.
    default_gates: Vec<String>,
    /// Writes the tenant may still make.
    tenant_budget: u8,
    /// Cleaners at work: the server and gate each cleans, the release it read, and the
    /// dirt it cleans (what was there when it started).
    cleaners: BTreeMap<&'static str, Cleaner>,
    /// A ghost: (server, gate, the uid of the tenant who left) for every release of a
    /// server whose gate no cleaner has cleaned since. No claim may be bound to such a
    /// server (invariant 5).
    dirty: BTreeSet<Dirt>,
    /// A ghost: (claim uid, server) for every server whose ref has carried that uid, the
    /// controller-written record of a bind (invariant 6).
    held: BTreeSet<(String, String)>,
    /// A ghost: per claim, the uid and server of a `serverRef` a user wrote (no
    /// `pre-bound`), which no controller may change (invariant 4).
    user_claim_refs: BTreeMap<String, (Option<String>, String)>,
    /// A ghost: the first write that gave a server to a claim it may not have
    /// (invariant 6), found while carrying out a plan.
    entitlement: Option<String>,
    /// A ghost: per server, the release gates the class of the claim it was last bound to
    /// named at that bind (invariant 5 holds a release to them).
    bound_class_gates: BTreeMap<String, Option<Vec<String>>>,
    /// A ghost: the uids of the claims whose bind an eviction was due to end at some
    /// point (a taint they do not tolerate past its deadline, as the truth shows it);
    /// no other claim's bind may end by eviction (invariant 9).
    eviction_due: BTreeSet<String>,
    /// A ghost: the uids of the claims seen evicted, and the first eviction of a claim
    /// whose eviction was never due (invariant 9).
    evicted: BTreeSet<String>,
    early_eviction: Option<String>,
    /// A ghost: each (quota, class) that had more claims holding servers than it allows
    /// when the quota came to exist; invariant 7 counts from a quota with nothing above
    /// it bound.
    over_at_creation: BTreeSet<(String, String)>,
}

/// A server's gate left dirty by a tenant: (server, gate, the tenant claim's uid).
type Dirt = (String, String, String);

/// A cleaner's work in progress.
#[derive(Clone, Debug, Hash)]
struct Cleaner {
    server: String,
    gate: String,
    release: i64,
    cleans: BTreeSet<Dirt>,
}

impl State {
    /// The truth, to write: a copy of its own if a successor state shares it.
    fn truth_mut(&mut self) -> &mut Truth {
        Arc::make_mut(&mut self.truth)
    }

    fn ctl(&mut self, who: Who) -> &mut Ctl {
        match who {
            Who::ClaimController => &mut self.claim_ctl,
            Who::ServerController => &mut self.server_ctl,
        }
    }

    /// Tells both controllers' watches about a claim's new state. The claim controller's
    /// own kind is kept current: a stale view of its own objects only ever costs it a
    /// conflict and a retry, while a stale view of the *other* kind is where the protocol's
    /// races live, so that is where the model spends its states.
    fn claim_changed(&mut self, name: &str) {
        self.judge_eviction(name);
        let obj = self.truth.claims.get(name).cloned();
        self.claim_ctl
            .see_claim(Who::ClaimController, name, obj.clone());
        self.server_ctl
            .claim_events
            .push_back((name.to_string(), obj));
    }

    /// Tells both controllers' watches about a quota's new state: both see it late.
    fn quota_changed(&mut self, name: &str) {
        let obj = self.truth.quotas.get(name).cloned();
        for ctl in [&mut self.claim_ctl, &mut self.server_ctl] {
            ctl.quota_events.push_back((name.to_string(), obj.clone()));
        }
    }

    /// Tells the claim controller's watch about a budget's new state: it sees it late.
    fn budget_changed(&mut self, name: &str) {
        let obj = self.truth.budgets.get(name).cloned();
        self.claim_ctl
            .budget_events
            .push_back((name.to_string(), obj));
    }

    fn server_changed(&mut self, name: &str) {
        self.note_evictions_due(name);
        let obj = self.truth.servers.get(name).cloned();
        self.server_ctl
            .see_server(Who::ServerController, name, obj.clone());
        self.claim_ctl
            .server_events
            .push_back((name.to_string(), obj));
    }

    /// Records every claim whose bind to this server an eviction is due to end now, as
    /// the truth shows both (the `eviction_due` ghost).
    fn note_evictions_due(&mut self, server: &str) {
        let Some(s) = self.truth.servers.get(server) else {
            return;
        };
        let due: Vec<String> = self
            .truth
            .claims
            .values()
            .filter(|c| ref_match(s, c) == RefMatch::SameUid)
            .filter(|c| {
                server_binder::binding::state::eviction::eviction(s, c)
                    .is_some_and(|e| e.is_due(now().0))
            })
            .filter_map(|c| meta::uid(c).map(str::to_string))
            .collect();
        self.eviction_due.extend(due);
    }

    /// A claim write just landed: if it ended the claim's bind by eviction, that eviction
    /// must have been due (invariant 9).
    fn judge_eviction(&mut self, name: &str) {
        let Some(c) = self.truth.claims.get(name) else {
            return;
        };
        let uid = meta::uid(c).unwrap_or_default().to_string();
        if !server_binder::binding::state::eviction::was_evicted(c)
            || !self.evicted.insert(uid.clone())
        {
            return;
        }
        if !self.eviction_due.contains(&uid) && self.early_eviction.is_none() {
            self.early_eviction = Some(format!(
                "invariant 9: claim {name} was evicted, but no eviction of its bind was ever due"
            ));
        }
    }

    /// The ghosts' view of a server write about to land over `base` (its precondition
    /// holds: the server controller's own kind is current): a release leaves the gates
    /// in force dirty (invariant 5), and a ref gaining a claim's uid must be a server
    /// that claim may have (invariant 6).
    fn judge_server_write(&mut self, base: &CachedServer, obj: &CachedServer) {
        let name = meta::name(base).to_string();
        let uid_of = |s: &CachedServer| {
            s.spec
                .server_claim_ref
                .as_ref()
                .and_then(ref_uid)
                .map(str::to_string)
        };
        let (before, after) = (uid_of(base), uid_of(obj));
        // A ref passed from a gone incarnation of a claim's name to the one living under
        // it now (a restore, docs/binding.md "Restore") stays with its namespace: the data
        // on the server is that namespace's, so nothing is left dirty.
        let names = |s: &CachedServer| {
            let r = s.spec.server_claim_ref.as_ref();
            r.map(|r| (r.namespace.clone(), r.name.clone()))
        };
        let kept = after.is_some() && names(base) == names(obj);
        if let Some(gone) = before
            .as_ref()
            .filter(|u| after.as_ref() != Some(*u) && !kept)
        {
            let lives = self
                .truth
                .claims
                .values()
                .any(|c| meta::uid(c) == Some(gone));
            if !lives && base.spec.reclaim_policy == ReclaimPolicy::Recycle {
                // The gates of the class the tenant bound under, as the ghost saw the
                // class at the bind: not the server's record of it.
                let class = self.bound_class_gates.get(&name).cloned().flatten();
                for gate in gates::release_gates(base, class.as_deref(), &self.default_gates) {
                    self.dirty
                        .insert((name.clone(), gate.to_string(), gone.clone()));
                }
            }
        }
        let Some(gained) = after.filter(|u| before.as_ref() != Some(u)) else {
            return;
        };
        self.note_bound_class(&name, &gained);
        if self.held.contains(&(gained.clone(), name.clone())) || self.entitlement.is_some() {
            return;
        }
        // The claim as the server controller decided on it: a version it once had, or
        // (a decision after a live read, as a restore's is) the one the read returned.
        let live_claim = self
            .truth
            .claims
            .values()
            .find(|c| meta::uid(*c) == Some(&gained));
        let seen = self
            .server_ctl
            .binder
            .world()
            .claims()
            .iter()
            .find(|c| meta::uid(*c) == Some(&gained))
            .or(live_claim);
        // Judged as the binder views the server: with its classes' labels. A ref passed
        // within its namespace and name (a restore) is the controller-written record
        // that the name held the server: it may keep it unless the server is being
        // deleted, released or cleaned.
        let view = self
            .server_ctl
            .binder
            .world()
            .classes()
            .resolve_server(base);
        let judged = view.as_ref().unwrap_or(base);
        // Only by the pair: a claim living under the name that does not name the server
        // back never inherits it.
        let names_back = |c: &CachedClaim| {
            let named = c.spec.server_ref.as_ref().map(|r| r.name.as_str());
            named == Some(name.as_str())
        };
        // A restore is decided after a live read: the claim as it lives when the write
        // lands names the server back, or the one the decision saw did.
        let live_names_back = live_claim.is_some_and(names_back);
        let entitled = |c: &CachedClaim| match kept {
            true if names_back(c) || live_names_back => evidence::can_restore(base),
            true => Err(Ineligible::ClaimedByOther(
                base.spec.server_claim_ref.clone().unwrap_or_default(),
            )),
            false => eligibility(judged, c),
        };
        if let Some(why) = seen.map_or(Some("no such claim".to_string()), |c| {
            entitled(c).err().map(|e| e.to_string())
        }) {
            self.entitlement = Some(format!(
                "invariant 6: server {name} was given to the claim with uid {gained}, which it cannot serve ({why}) and which no record shows it held"
            ));
        }
    }

    /// Records every (claim uid, server) whose ref carries it now (the `held` ghost).
    /// The ghost's record of a bind: the gates the claim's class names at that moment
    /// (`None`: no class, or it names none), which the release must wait for whatever
    /// happens to the class later (invariant 5).
    fn note_bound_class(&mut self, server: &str, uid: &str) {
        let claim = self
            .truth
            .claims
            .values()
            .find(|c| meta::uid(*c) == Some(uid));
        let class = claim.and_then(|c| c.spec.server_class_name.as_deref());
        let named = class
            .and_then(|name| self.truth.classes.iter().find(|c| meta::name(*c) == name))
            .and_then(|c| c.spec.release_gates.as_ref())
            .map(|g| g.iter().map(|g| g.name.clone()).collect());
        self.bound_class_gates.insert(server.to_string(), named);
    }

    fn note_holders(&mut self) {
        let mut binds = Vec::new();
        for (name, server) in &self.truth.servers {
            if let Some(uid) = server.spec.server_claim_ref.as_ref().and_then(ref_uid) {
                self.held.insert((uid.to_string(), name.clone()));
                binds.push((name.clone(), uid.to_string()));
            }
        }
        for (server, uid) in binds {
            self.note_bound_class(&server, &uid);
        }
    }

    /// Records whether the claim's `serverRef` is a user's now (invariant 4's ghost).
    fn note_user_ref(&mut self, name: &str) {
        let user_ref = self.truth.claims.get(name).and_then(|c| {
            let server = server_ref_name(c).filter(|_| !is_controller_chosen(c))?;
            Some((meta::uid(c).map(str::to_string), server.to_string()))
        });
        match user_ref {
            Some(r) => self.user_claim_refs.insert(name.to_string(), r),
            None => self.user_claim_refs.remove(name),
        };
    }

    /// The claims the claim controller holds back after a refused write, whose back-off
    /// timers are still running.
    pub(super) fn backing_off(&self) -> Vec<ClaimKey> {
        let refused = &self.claim_ctl.binder.claim_side().refused;
        refused.held_back(now().0)
    }

    fn is_quiescent(&self, scenario: &Scenario) -> bool {
        let timers = self.backing_off();
        [&self.claim_ctl, &self.server_ctl].iter().all(|c| {
            c.claim_events.is_empty()
                && c.server_events.is_empty()
                && c.quota_events.is_empty()
                && c.budget_events.is_empty()
                && c.woken.is_empty()
                && c.in_flight.is_none()
                && !c.recount_due
                && c.recounts.is_empty()
        }) && self.handed_over.is_none()
            && self.next_user_op >= scenario.user_ops.len()
            && timers
                .iter()
                .all(|k| scenario.never_bind.contains(&k.name.as_str()))
    }
}

/// Every object of the controller's kind: what a relist or a resync wakes.
fn everything(truth: &Truth, who: Who) -> BTreeSet<String> {
    match who {
        Who::ClaimController => truth.claims.keys().cloned().collect(),
        Who::ServerController => truth.servers.keys().cloned().collect(),
    }
}

/// What a run of the model check found.
#[derive(Debug, Default)]
pub struct Report {
    pub states: usize,
    pub quiescent: usize,
    pub max_depth: usize,
    pub violation: Option<String>,
}

const STATE_LIMIT: usize = 3_000_000;

/// Lowers this test thread's priority to the least (nice 19): the model check is most
/// of the suite's CPU and needs none of it at any moment, while the tests beside it
/// (lease terms, chaos deadlines, watches) need theirs when they wake. So the suite runs
/// more tests at once than there are cores (`.cargo/config.toml`) and the waiting tests
/// overlap the model check instead of following it (docs/development.md, "Test time").
/// With more than one test thread libtest runs each test on a thread of its own, which
/// takes the priority with it when the test ends; with one, the rest of the run keeps
/// it, which costs nothing, as no test runs beside another.
fn yield_the_cpu_to_other_tests() {
    #[cfg(target_os = "linux")]
    {
        let this_thread = Some(rustix::thread::gettid());
        // Best effort: a sandbox that refuses it only costs time.
        let _ = rustix::process::setpriority_process(this_thread, 19);
    }
}

/// How many watch events a cache may lag behind, at most. Without a bound, a controller that is
/// never scheduled lets the other one's writes pile up forever and the state space is
/// infinite; with it, the check is exhaustive for every schedule whose caches lag by at
/// most this many events (a step that would exceed it is not taken).
pub const MAX_LAG: usize = 3;

/// Explores every interleaving of `scenario` under `protocol`.
pub fn explore(scenario: &Scenario, protocol: Protocol) -> Report {
    yield_the_cpu_to_other_tests();
    let mut truth = Truth::new(scenario.servers.clone(), scenario.claims.clone());
    truth.classes = scenario.classes.clone();
    for budget in &scenario.budgets {
        truth.put_budget(budget.clone());
    }
    for quota in &scenario.quotas {
        truth.put_quota(quota.clone());
    }
    let default_gates: Vec<String> = scenario
        .default_gates
        .iter()
        .map(|g| g.to_string())
        .collect();
    let mut initial = State {
        claim_ctl: Ctl::fresh(&truth, Who::ClaimController, &protocol, &default_gates),
        server_ctl: Ctl::fresh(&truth, Who::ServerController, &protocol, &default_gates),
        refuses: scenario.refuses,
        backoff_ends: BACKOFF_ENDS,
        crashes: scenario.crashes,
        faults: scenario.faults,
        resyncs: scenario.resyncs,
        handovers: scenario.handovers,
        handed_over: None,
        next_user_op: 0,
        protocol,
        default_gates,
        tenant_budget: scenario.tenant.as_ref().map_or(0, |t| t.budget),
        cleaners: BTreeMap::new(),
        dirty: BTreeSet::new(),
        held: BTreeSet::new(),
        user_claim_refs: BTreeMap::new(),
        entitlement: None,
        eviction_due: BTreeSet::new(),
        evicted: BTreeSet::new(),
        early_eviction: None,
        over_at_creation: BTreeSet::new(),
        bound_class_gates: BTreeMap::new(),
        truth: Arc::new(truth),
    };
    initial.note_holders();
    for c in initial.truth.claims.values() {
        if server_binder::binding::state::eviction::was_evicted(c) {
            initial
                .evicted
                .insert(meta::uid(c).unwrap_or_default().to_string());
        }
    }
    for name in scenario.claims.iter().map(|c| meta::name(c).to_string()) {
        initial.note_user_ref(&name);
    }
    reconcile_idle(&mut initial, &mut IdleMemo::default());
    let user_refs = UserRefs::of(scenario);
    initial.over_at_creation = over_quota(&initial.truth);
    let mut report = Report::default();
    let mut parents: HashMap<u64, (u64, String)> = HashMap::default();
    let root = fingerprint(&initial);
    parents.insert(root, (root, "start".into()));
    // The fingerprints of the successors that [`reconcile_idle`] or
    // [`note_quotas_unseen`] changed, as they were before.
    let mut unreduced_seen: rustc_hash::FxHashSet<u64> = Default::default();
    let mut stack = vec![(initial, root, 0usize, IdleMemo::default())];
    while let Some((state, id, depth, mut memo)) = stack.pop() {
        report.states += 1;
        if report.states % 200_000 == 0 && std::env::var_os("MODEL_CHECK_PROGRESS").is_some() {
            eprintln!(
                "{}: {} states, stack {}",
                scenario.name,
                report.states,
                stack.len()
            );
        }
        report.max_depth = report.max_depth.max(depth);
        assert!(
            report.states < STATE_LIMIT,
            "{}: state space exceeds {STATE_LIMIT}",
            scenario.name
        );
        let mut violation = check_always(&state, &user_refs).err();
        if violation.is_none() && state.is_quiescent(scenario) {
            report.quiescent += 1;
            violation = check_quiescent(&state, &scenario.never_bind).err();
            if violation.is_none() && scenario.all_bind {
                violation = check_all_bound(&state.truth).err();
            }
            if violation.is_none() {
                violation = check_bound(&state.truth, scenario).err();
            }
            if violation.is_none() {
                violation = check_one_bound(&state.truth, &scenario.one_bound_of).err();
            }
            if violation.is_none() {
                violation = check_evicted(&state.truth, &scenario.evicted_at_rest).err();
            }
        }
        if let Some(v) = violation {
            report.violation = Some(format!("{v}\n{}", trace(&parents, id)));
            return report;
        }
        for (label, mut next) in successors(&state, scenario) {
            if lag(&next) > scenario.max_lag {
                continue;
            }
            // Most successors were reached before. The reductions below cost more than
            // a fingerprint, and what they make of a state depends only on what its
            // fingerprint tells apart, like every step: a state seen before them (as
            // itself, or as a reduced state, which they leave as it is) is skipped
            // before them, as it would be after.
            let unreduced = fingerprint(&next);
            if parents.contains_key(&unreduced) || unreduced_seen.contains(&unreduced) {
                continue;
            }
            let reduced = reconcile_idle(&mut next, &mut memo) | note_quotas_unseen(&mut next);
            let next_id = match reduced {
                true => {
                    unreduced_seen.insert(unreduced);
                    fingerprint(&next)
                }
                false => unreduced,
            };
            if parents.contains_key(&next_id) {
                continue;
            }
            parents.insert(next_id, (id, label));
            let memo = memo.of(&next);
            stack.push((next, next_id, depth + 1, memo));
        }
    }
    report
}

fn lag(state: &State) -> usize {
    let quotas = state
        .claim_ctl
        .quota_events
        .len()
        .max(state.claim_ctl.budget_events.len());
    state
        .claim_ctl
        .server_events
        .len()
        .max(state.server_ctl.claim_events.len())
        .max(state.server_ctl.quota_events.len())
        .max(quotas)
}

fn trace(parents: &HashMap<u64, (u64, String)>, mut id: u64) -> String {
    let mut steps = Vec::new();
    while let Some((parent, label)) = parents.get(&id) {
        steps.push(label.clone());
        if *parent == id {
            break;
        }
        id = *parent;
    }
    steps.reverse();
    format!("trace:\n  {}", steps.join("\n  "))
}
