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

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::assumed::Assumption;
use server_binder::binding::backoff::{self, Refusal};
use server_binder::binding::gates;
use server_binder::binding::triggers;
use server_binder::binding::triggers::Wake;
use server_binder::binding::*;

// Fingerprinting and the visited set are a fifth of the check's time with SipHash;
// fingerprints need a well-spread 64-bit hash, not a DoS-resistant one.
use rustc_hash::{FxHashMap as HashMap, FxHasher};

use crate::binding::claim_admission::admits_claim_update;
use crate::binding::support::*;
use crate::binding::world::{Conflict, Truth};

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
        }
    }
}

/// A user's or an admin's edit of a server.
#[derive(Clone, Debug)]
pub enum ServerEdit {
    Cordon,
    Uncordon,
    Taint(&'static str),
    Untaint,
    Label(&'static str, &'static str),
    ClearRef,
}

/// A scripted user action.
#[derive(Clone, Debug)]
pub enum UserOp {
    DeleteClaim(&'static str),
    CreateClaim(Box<LeanClaim>),
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
    pub servers: Vec<LeanServer>,
    pub claims: Vec<LeanClaim>,
    pub user_ops: Vec<UserOp>,
    pub crashes: u8,
    pub faults: u8,
    pub resyncs: u8,
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
    /// Exactly one of these claims is bound in every quiescent state (a quota lets one
    /// in, whichever).
    pub one_bound_of: Vec<&'static str>,
}

/// Whether admission refuses a claim write from `old` to `new`.
pub type Refuser = fn(&LeanClaim, &LeanClaim) -> bool;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    ClaimController,
    ServerController,
}

#[derive(Clone, Debug)]
enum InFlight {
    Claim {
        base: LeanClaim,
        object: Option<LeanClaim>,
        status: Option<Box<ServerClaimStatus>>,
        /// The server this plan's pick assumed, until its object write's result.
        assumed: Option<String>,
        /// The binder's step being carried out (reported on each write's result).
        work: Arc<ClaimWork>,
        /// The charges still to write, before anything else (docs/binding.md, "Server
        /// quotas"), each at the quota's resourceVersion the decision read.
        charges: Vec<ServerQuota>,
    },
    LeanServer {
        base: LeanServer,
        object: Option<LeanServer>,
        status: Option<ServerStatus>,
    },
}

impl InFlight {
    fn name(&self) -> String {
        match self {
            InFlight::Claim { base, .. } => meta::name(base).to_string(),
            InFlight::LeanServer { base, .. } => meta::name(base).to_string(),
        }
    }
}

/// The claim of this name in the binder's cache. Claim names are unique across the
/// namespaces of a world, so the model keys claims by name.
fn claim_named<'b>(binder: &'b Binder, name: &str) -> Option<&'b LeanClaim> {
    binder.claims().iter().find(|c| meta::name(*c) == name)
}

/// The claim of this name as the claim controller reconciles it: as it is, the way the
/// binary's watch store holds it, not as its class and quotas make it in the binder's
/// cache (a decision's writes go onto the claim as it is). The claim controller's own
/// kind is kept current, so that is the stored claim.
fn claim_as_is<'s>(state: &'s State, name: &str) -> Option<&'s LeanClaim> {
    state.truth.claims.get(name)
}

/// The key of the claim of this name: its namespace from the object, or (deleted) from
/// the cache.
fn claim_key_in(binder: &Binder, name: &str, new: Option<&LeanClaim>) -> ClaimKey {
    let known = new.or_else(|| claim_named(binder, name));
    let namespace = known.map_or(NS, |c| meta::namespace(c));
    ClaimKey::of(namespace, name)
}

/// One controller process: its binder (the caches, the assumed choices), the watch
/// events not yet delivered to it, the objects woken and not yet reconciled, and the
/// rest of the plan it is carrying out.
#[derive(Clone, Debug)]
struct Ctl {
    binder: Binder,
    claim_events: VecDeque<(String, Option<LeanClaim>)>,
    server_events: VecDeque<(String, Option<LeanServer>)>,
    /// Quota events: both controllers see quotas through a watch, with lag (the claim
    /// controller's charges and the recounts write them).
    quota_events: VecDeque<(String, Option<ServerQuota>)>,
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
        let servers = truth.servers.values().cloned();
        let claims = truth.claims.values().cloned();
        let mut binder = Binder::listed(p.rules, config, servers, claims, now().0);
        if !truth.classes.is_empty() {
            binder = binder.listed_with_classes(truth.classes.clone(), Default::default());
        }
        if !truth.quotas.is_empty() {
            // As `relist_quotas` would after a restart: a fresh binder lists them all.
            binder = binder.listed_with_quotas(truth.quotas.values().cloned());
        }
        Self {
            binder,
            claim_events: VecDeque::new(),
            server_events: VecDeque::new(),
            quota_events: VecDeque::new(),
            woken: everything(truth, who),
            in_flight: None,
            recount_due: !truth.quotas.is_empty(),
            recounts: Vec::new(),
        }
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
    fn see_claim(&mut self, who: Who, name: &str, new: Option<LeanClaim>) {
        let key = claim_key_in(&self.binder, name, new.as_ref());
        // A claim gone rings the recount (`recount_wanted` in the binary).
        self.recount_due |= new.is_none() && !self.binder.quotas().is_empty();
        let wake = self.binder.apply_claim(&key, new.map(Arc::new));
        self.wake(who, wake);
    }

    /// A quota changed in this controller's cache (a watch event delivered).
    fn see_quota(&mut self, who: Who, name: &str, new: Option<ServerQuota>) {
        let namespace = new.as_ref().map_or(NS, |q| meta::namespace(q)).to_string();
        // A quota with work for the recount rings it, as the binary's watch does.
        self.recount_due |= new
            .as_ref()
            .is_some_and(|q| self.binder.quota_wants_recount(q));
        let wake = self.binder.apply_quota(&namespace, name, new.map(Arc::new));
        self.wake(who, wake);
    }

    fn see_server(&mut self, who: Who, name: &str, new: Option<LeanServer>) {
        let wake = self.binder.apply_server(name, new.map(Arc::new));
        self.wake(who, wake);
    }

    /// The object write of a claim plan ended: the binder says what to wake.
    fn claim_object_written(
        &mut self,
        work: &ClaimWork,
        claim: &LeanClaim,
        written: ObjectWrite<'_>,
    ) {
        let wake = self
            .binder
            .claim_object_written(work, claim, written, now().0);
        self.wake(Who::ClaimController, wake);
    }
}

#[derive(Clone)]
struct State {
    truth: Truth,
    claim_ctl: Ctl,
    server_ctl: Ctl,
    /// The scenario's admission rule for claim writes.
    refuses: Option<Refuser>,
    /// Back-off ends still to come ([`BACKOFF_ENDS`]).
    backoff_ends: u8,
    crashes: u8,
    faults: u8,
    resyncs: u8,
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

    fn server_changed(&mut self, name: &str) {
        let obj = self.truth.servers.get(name).cloned();
        self.server_ctl
            .see_server(Who::ServerController, name, obj.clone());
        self.claim_ctl
            .server_events
            .push_back((name.to_string(), obj));
    }

    /// The ghosts' view of a server write about to land over `base` (its precondition
    /// holds: the server controller's own kind is current): a release leaves the gates
    /// in force dirty (invariant 5), and a ref gaining a claim's uid must be a server
    /// that claim may have (invariant 6).
    fn judge_server_write(&mut self, base: &LeanServer, obj: &LeanServer) {
        let name = meta::name(base).to_string();
        let uid_of = |s: &LeanServer| {
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
        let names = |s: &LeanServer| {
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
            .claims()
            .iter()
            .find(|c| meta::uid(*c) == Some(&gained))
            .or(live_claim);
        // Judged as the binder views the server: with its classes' labels. A ref passed
        // within its namespace and name (a restore) is the controller-written record
        // that the name held the server: it may keep it unless the server is being
        // deleted, released or cleaned.
        let view = self.server_ctl.binder.classes().resolve_server(base);
        let judged = view.as_ref().unwrap_or(base);
        // Only by the pair: a claim living under the name that does not name the server
        // back never inherits it.
        let names_back = |c: &LeanClaim| {
            let named = c.spec.server_ref.as_ref().map(|r| r.name.as_str());
            named == Some(name.as_str())
        };
        // A restore is decided after a live read: the claim as it lives when the write
        // lands names the server back, or the one the decision saw did.
        let live_names_back = live_claim.is_some_and(names_back);
        let entitled = |c: &LeanClaim| match kept {
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

    fn is_quiescent(&self, scenario: &Scenario) -> bool {
        let timers = self.claim_ctl.binder.refused().held_back(now().0);
        [&self.claim_ctl, &self.server_ctl].iter().all(|c| {
            c.claim_events.is_empty()
                && c.server_events.is_empty()
                && c.quota_events.is_empty()
                && c.woken.is_empty()
                && c.in_flight.is_none()
                && !c.recount_due
                && c.recounts.is_empty()
        }) && self.next_user_op >= scenario.user_ops.len()
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

/// How many watch events a cache may lag behind, at most. Without a bound, a controller that is
/// never scheduled lets the other one's writes pile up forever and the state space is
/// infinite; with it, the check is exhaustive for every schedule whose caches lag by at
/// most this many events (a step that would exceed it is not taken).
pub const MAX_LAG: usize = 3;

/// Explores every interleaving of `scenario` under `protocol`.
pub fn explore(scenario: &Scenario, protocol: Protocol) -> Report {
    let mut truth = Truth::new(scenario.servers.clone(), scenario.claims.clone());
    truth.classes = scenario.classes.clone();
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
        next_user_op: 0,
        protocol,
        default_gates,
        tenant_budget: scenario.tenant.as_ref().map_or(0, |t| t.budget),
        cleaners: BTreeMap::new(),
        dirty: BTreeSet::new(),
        held: BTreeSet::new(),
        user_claim_refs: BTreeMap::new(),
        entitlement: None,
        over_at_creation: BTreeSet::new(),
        bound_class_gates: BTreeMap::new(),
        truth,
    };
    initial.note_holders();
    for name in scenario.claims.iter().map(|c| meta::name(c).to_string()) {
        initial.note_user_ref(&name);
    }
    reconcile_idle(&mut initial);
    let user_refs = UserRefs::of(scenario);
    initial.over_at_creation = over_quota(&initial.truth);
    let mut report = Report::default();
    let mut parents: HashMap<u64, (u64, String)> = HashMap::default();
    let root = fingerprint(&initial);
    parents.insert(root, (root, "start".into()));
    let mut stack = vec![(initial, root, 0usize)];
    while let Some((state, id, depth)) = stack.pop() {
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
        }
        if let Some(v) = violation {
            report.violation = Some(format!("{v}\n{}", trace(&parents, id)));
            return report;
        }
        for (label, mut next) in successors(&state, scenario) {
            if lag(&next) > scenario.max_lag {
                continue;
            }
            reconcile_idle(&mut next);
            note_quotas_unseen(&mut next);
            let next_id = fingerprint(&next);
            if parents.contains_key(&next_id) {
                continue;
            }
            parents.insert(next_id, (id, label));
            stack.push((next, next_id, depth + 1));
        }
    }
    report
}

fn lag(state: &State) -> usize {
    let quotas = state.claim_ctl.quota_events.len();
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

// ---------------------------------------------------------------------------------------
// Steps

const BOTH: [Who; 2] = [Who::ClaimController, Who::ServerController];

fn successors(state: &State, scenario: &Scenario) -> Vec<(String, State)> {
    let mut out = Vec::new();
    for who in BOTH {
        out.extend(deliveries(state, who));
        let ctl = match who {
            Who::ClaimController => &state.claim_ctl,
            Who::ServerController => &state.server_ctl,
        };
        if ctl.in_flight.is_some() {
            out.extend(perform_write(state.clone(), who));
            if state.faults > 0 {
                let mut next = state.clone();
                next.faults -= 1;
                let failed = injected_failure(state, who);
                abandon(&mut next, who, failed);
                out.push((format!("{who:?} write fails (injected)"), next));
            }
        } else {
            out.extend(reconciles(state, who));
        }
        out.extend(restarts(state, who));
        out.extend(recount_steps(state, who));
    }
    out.extend(backoffs_end(state));
    if let Some(op) = scenario.user_ops.get(state.next_user_op) {
        let mut next = state.clone();
        next.next_user_op += 1;
        apply_user_op(&mut next, op);
        out.push((format!("user: {op:?}"), next));
    }
    if let Some(tenant) = scenario.tenant.as_ref().filter(|_| state.tenant_budget > 0) {
        for edit in &tenant.edits {
            if let Some(next) = tenant_edit(state, tenant.claim, edit) {
                out.push((format!("tenant: {edit:?} on claim {}", tenant.claim), next));
            }
        }
    }
    out
}

/// The tenant's `edit` of its claim, if it changes the claim and admission lets it in.
/// It writes with the resourceVersion it read, as `kubectl edit` does, so the stored
/// status stays and the generation moves with the spec.
fn tenant_edit(state: &State, name: &str, edit: &TenantEdit) -> Option<State> {
    let old = state.truth.claims.get(name)?;
    let mut new = old.clone();
    match edit {
        TenantEdit::Annotate(key) => meta::set_annotation(&mut new, key),
        TenantEdit::Unannotate(key) => meta::remove_annotation(&mut new, key),
        TenantEdit::Point(server) => new = new.names(server),
        TenantEdit::Unpoint => new.spec.server_ref = None,
        TenantEdit::Select(key, value) => new = new.selects(&[(key, value)]),
    }
    if new == *old || !admits_claim_update(old, &new) {
        return None;
    }
    let mut next = state.clone();
    next.tenant_budget -= 1;
    next.truth.write_claim(&new).ok()?;
    next.note_user_ref(name);
    next.claim_changed(name);
    Some(next)
}

/// The next watch event of the other kind, or of the quotas, reaches the controller's
/// cache.
fn deliveries(state: &State, who: Who) -> Vec<(String, State)> {
    let mut out = Vec::new();
    if !state.ctl_ref(who).quota_events.is_empty() {
        let mut next = state.clone();
        let ctl = next.ctl(who);
        let (name, obj) = ctl.quota_events.pop_front().expect("an event");
        ctl.see_quota(who, &name, obj);
        out.push((format!("{who:?} sees quota {name} change"), next));
        // Or the watch expires (410) and lists again: every change at once, no event
        // of its own (`relist_quotas`).
        let mut next = state.clone();
        let quotas = next.truth.quotas.values().cloned().map(Arc::new).collect();
        let ctl = next.ctl(who);
        ctl.quota_events.clear();
        // A relist rings the recount, as the binary's watch does.
        ctl.recount_due = true;
        let wake = ctl.binder.relist_quotas(quotas);
        ctl.wake(who, wake);
        out.push((format!("{who:?} lists the quotas again"), next));
    }
    match who {
        Who::ServerController => {
            if !state.server_ctl.claim_events.is_empty() {
                let mut next = state.clone();
                let (name, obj) = next.server_ctl.claim_events.pop_front().expect("an event");
                next.server_ctl.see_claim(who, &name, obj);
                out.push((format!("{who:?} sees claim {name} change"), next));
            }
        }
        Who::ClaimController => {
            if !state.claim_ctl.server_events.is_empty() {
                let mut next = state.clone();
                let (name, obj) = next.claim_ctl.server_events.pop_front().expect("an event");
                next.claim_ctl.see_server(who, &name, obj);
                out.push((format!("{who:?} sees server {name} change"), next));
            }
        }
    }
    out
}

/// A crash (the controller relists and wakes everything) or a resync (everything of its
/// kind is woken), while their budgets last.
fn restarts(state: &State, who: Who) -> Vec<(String, State)> {
    let mut out = Vec::new();
    if state.crashes > 0 {
        let mut next = state.clone();
        next.crashes -= 1;
        *next.ctl(who) = Ctl::fresh(&next.truth, who, &next.protocol, &next.default_gates);
        out.push((format!("{who:?} crashes and restarts"), next));
    }
    let all = everything(&state.truth, who);
    if state.resyncs > 0 && !all.is_subset(&state.ctl_ref(who).woken) {
        let mut next = state.clone();
        next.resyncs -= 1;
        next.ctl(who).woken.extend(all);
        out.push((format!("{who:?} resyncs"), next));
    }
    out
}

/// The quotas' recount of this process (`src/controllers/quota.rs`), in two steps: it
/// reads (its cache, then each charge's claim the cache does not show, live) and
/// decides each quota's status; later, it writes them one by one, each at the
/// resourceVersion it read. A conflict leaves the quota to the next round (the
/// periodic one, here: the recount is due again).
fn recount_steps(state: &State, who: Who) -> Vec<(String, State)> {
    let ctl = state.ctl_ref(who);
    let mut out = Vec::new();
    if ctl.recount_due && ctl.recounts.is_empty() {
        let mut next = state.clone();
        let recounts = recount_now(state, who);
        let ctl = next.ctl(who);
        ctl.recount_due = false;
        ctl.recounts = recounts;
        out.push((format!("{who:?} process recounts the quotas"), next));
    }
    if let Some(quota) = ctl.recounts.first() {
        let mut next = state.clone();
        next.ctl(who).recounts.remove(0);
        let name = meta::name(quota).to_string();
        let charged: Vec<&str> = quota::charges(quota)
            .iter()
            .map(|c| c.claim.as_str())
            .collect();
        let label = match next.truth.write_quota_status(quota, true) {
            Ok(_) => {
                next.quota_changed(&name);
                format!("{who:?} process's recount writes quota {name}: {charged:?}")
            }
            Err(Conflict) => {
                next.ctl(who).recount_due = true;
                format!("{who:?} process's recount of quota {name} conflicts")
            }
        };
        out.push((label, next));
    }
    out
}

/// What the recount of this process would write now: each quota its cache shows, with
/// its status counted anew by `quota::recount` from the charges but those whose claims a
/// live read (the truth) says are gone, and the claims the cache shows holding servers.
fn recount_now(state: &State, who: Who) -> Vec<ServerQuota> {
    let binder = &state.ctl_ref(who).binder;
    let reads_live = state.protocol.recount_reads_live;
    let mut out = Vec::new();
    for quota in binder.quotas().iter() {
        let namespace = meta::namespace(&**quota);
        let cached = |c: &QuotaCharge| binder.shows_charged(namespace, c);
        let gone: HashSet<String> = quota::unconfirmed(quota, &cached)
            .into_iter()
            .filter(|c| {
                let live = state.truth.claims.get(&c.claim);
                !reads_live || live.is_none_or(|l| meta::uid(l) != Some(c.uid.as_str()))
            })
            .map(|c| c.uid.clone())
            .collect();
        let mut holders = binder.quota_holders(namespace);
        if !state.protocol.restored_within_hard {
            holders
                .iter_mut()
                .for_each(|h| h.holds = quota::Holds::Bound);
        }
        if let Some(status) = quota::recount(quota, &gone, &holders) {
            out.push(ServerQuota {
                status: Some(status),
                ..(**quota).clone()
            });
        }
    }
    out
}

/// How many back-offs may end in one run: a claim refused for good retries, gives back,
/// picks again, and each round moves its generation, so the rounds are bounded as crashes
/// are. A back-off that never ends leaves a state that is never quiescent (unless its
/// claim can never bind), so no check is skipped wrongly, only not reached.
const BACKOFF_ENDS: u8 = 2;

/// A claim's back-off ends: the claim controller's timer wakes it. A state where only
/// timers are left counts as quiescent (a timer fires later, like a resync), so what
/// must hold while a claim backs off is checked there.
fn backoffs_end(state: &State) -> Vec<(String, State)> {
    if state.backoff_ends == 0 {
        return Vec::new();
    }
    let backing_off = state.claim_ctl.binder.refused().held_back(now().0);
    backing_off
        .into_iter()
        .map(|key| {
            let mut next = state.clone();
            next.backoff_ends -= 1;
            next.claim_ctl.binder.end_backoff(&key, now().0);
            next.claim_ctl.woken.insert(key.name.clone());
            (format!("the back-off of claim {} ends", key.name), next)
        })
        .collect()
}

impl State {
    fn ctl_ref(&self, who: Who) -> &Ctl {
        match who {
            Who::ClaimController => &self.claim_ctl,
            Who::ServerController => &self.server_ctl,
        }
    }
}

/// A claim plan's write failed (`failed`: how its object write ended, if that was it):
/// the plan is abandoned.
fn fail_claim_write(
    next: &mut State,
    base: LeanClaim,
    (assumed, work): (Option<String>, Arc<ClaimWork>),
    failed: Option<ObjectWrite<'_>>,
) {
    next.claim_ctl.in_flight = Some(InFlight::Claim {
        base,
        object: None,
        status: None,
        assumed,
        work,
        charges: Vec::new(),
    });
    abandon(next, Who::ClaimController, failed);
}

/// A failed or conflicting write: the rest of the plan is dropped, the object is woken
/// again (the controller requeues it), and a failed claim object write is reported to
/// the binder (a pick's assumption ends; a refusal starts a back-off).
fn abandon(state: &mut State, who: Who, failed: Option<ObjectWrite<'_>>) {
    let ctl = state.ctl(who);
    let Some(in_flight) = ctl.in_flight.take() else {
        return;
    };
    let name = in_flight.name();
    if let (InFlight::Claim { work, base, .. }, Some(failed)) = (&in_flight, failed) {
        ctl.claim_object_written(work, base, failed);
    }
    ctl.woken.insert(name);
}

/// How an injected failure of the controller's next write is reported: a claim's object
/// write is refused (the binary backs off after any failure but a conflict); a failed
/// charge ends the pick as a conflict would.
fn injected_failure(state: &State, who: Who) -> Option<ObjectWrite<'static>> {
    match &state.ctl_ref(who).in_flight {
        Some(InFlight::Claim { charges, .. }) if !charges.is_empty() => Some(ObjectWrite::Conflict),
        Some(InFlight::Claim {
            object: Some(_), ..
        }) => Some(ObjectWrite::Refused("refused (injected)")),
        _ => None,
    }
}

fn reconciles(state: &State, who: Who) -> Vec<(String, State)> {
    let ctl = state.ctl_ref(who);
    let mut out = Vec::new();
    for name in &ctl.woken {
        out.extend(match who {
            Who::ClaimController => claim_reconciles(state, name),
            Who::ServerController => server_reconcile(state, name),
        });
    }
    out
}

/// The reconcile of a woken object that finds nothing to write.
fn nothing_to_do(state: &State, who: Who, name: &str) -> (String, State) {
    let mut next = state.clone();
    next.ctl(who).woken.remove(name);
    (format!("{who:?} finds nothing to do for {name}"), next)
}

/// The steps a claim reconcile may reach, through the binder, with the live read when it
/// asks: every pick is explored both seeing and not yet seeing the claims that name its
/// server (the real claim cache lags a little, and another process's claims more).
/// Hiding them never makes a claim wait, so the blind branch adds no waiting the real
/// cache would not later wake.
fn claim_steps(state: &State, claim: &LeanClaim) -> Vec<(ClaimStep, Sight)> {
    let binder = &state.claim_ctl.binder;
    let read = |server: &str| state.truth.servers.get(server).cloned();
    let mut out: Vec<(ClaimStep, Sight)> = Vec::new();
    let mut decisions: Vec<ClaimDecision> = Vec::new();
    for sight in [Sight::All, Sight::NotYetRivals] {
        let step = binder.plan_claim_reading(claim, read, sight, now().0);
        let decision = match &step {
            ClaimStep::Act(work) => work.decision.clone(),
            ClaimStep::Wait { decision, .. } => (**decision).clone(),
            ClaimStep::Idle | ClaimStep::ReadServer(_) => continue,
        };
        if !decisions.contains(&decision) {
            decisions.push(decision);
            out.push((step, sight));
        }
    }
    out
}

/// Whether a step changes nothing: it writes nothing and takes up no pick (a step that
/// waits or idles).
fn writes_nothing(step: &ClaimStep) -> bool {
    match step {
        ClaimStep::Act(work) => {
            work.plan.is_noop() && work.picked.is_none() && work.charges.is_empty()
        }
        _ => true,
    }
}

/// A claim reconcile: each step the binder may take, started on the claim controller's
/// binder (a pick starts its assumption there).
fn claim_reconciles(state: &State, name: &str) -> Vec<(String, State)> {
    let Some(claim) = claim_as_is(state, name) else {
        return vec![nothing_to_do(state, Who::ClaimController, name)];
    };
    let mut out = Vec::new();
    for (step, sight) in claim_steps(state, claim) {
        let ClaimStep::Act(work) = &step else {
            out.push(nothing_to_do(state, Who::ClaimController, name));
            continue;
        };
        if writes_nothing(&step) {
            out.push(nothing_to_do(state, Who::ClaimController, name));
            continue;
        }
        let mut next = state.clone();
        next.claim_ctl.woken.remove(name);
        next.claim_ctl.binder.start(claim, &step);
        // One process: what starting the step wakes reaches the server controller too.
        next.server_ctl
            .wake(Who::ServerController, work.wakes.clone());
        let blind = match sight {
            Sight::All => "",
            Sight::NotYetRivals => " (not yet seeing the claims naming it)",
        };
        let label = format!("decides {:?} for claim {name}{blind}", work.decision);
        if work.plan.is_noop() && work.charges.is_empty() {
            out.push((format!("ClaimController {label}"), next));
            continue;
        }
        // A pick taken up without a write has nothing to report of an object write.
        let assumed = work.picked.clone().filter(|_| work.plan.object.is_some());
        next.claim_ctl.in_flight = Some(InFlight::Claim {
            base: claim.clone(),
            object: work.plan.object.clone(),
            status: work.plan.status.clone().map(Box::new),
            assumed,
            work: Arc::new((**work).clone()),
            // The quotas as charged: at the version read, a patch of the charge stores
            // exactly these.
            charges: work.charges.iter().map(|c| c.charged.clone()).collect(),
        });
        push_decided(&mut out, next, Who::ClaimController, label);
    }
    out
}

/// The server controller's step for a server it caches, through its binder, beside the
/// claim controller's picks in flight: in the binary both controllers share one binder.
fn server_work(state: &State, server: &LeanServer) -> ServerWork {
    let binder = &state.server_ctl.binder;
    let claim_side = &state.claim_ctl.binder;
    let read = |r: &ServerClaimRef| state.truth.claims.get(&r.name).cloned();
    match binder.reconcile_server_reading_beside(claim_side, server, read, now().0) {
        ServerStep::Act(work) => *work,
        ServerStep::ReadClaim(_) => unreachable!("a step after a live read asks no more"),
    }
}

/// Whether reconciling `name` now would write nothing, whichever way it looks.
fn would_do_nothing(state: &State, who: Who, name: &str) -> bool {
    match who {
        Who::ClaimController => claim_as_is(state, name)
            .is_none_or(|c| claim_steps(state, c).iter().all(|(s, _)| writes_nothing(s))),
        Who::ServerController => state
            .server_ctl
            .binder
            .server_as_is(name)
            .is_none_or(|s| server_work(state, s).plan.is_noop()),
    }
}

/// A reduction: a woken object whose reconcile would write nothing is reconciled at
/// once. This loses no behaviour the check cares about: if a later step changes what it
/// would decide, that step must wake it again, and a missing wake-up then shows up as a
/// state that does not converge, sooner than without the reduction.
fn reconcile_idle(state: &mut State) {
    for who in BOTH {
        let idle: Vec<String> = state
            .ctl_ref(who)
            .woken
            .iter()
            .filter(|name| would_do_nothing(state, who, name))
            .cloned()
            .collect();
        for name in idle {
            state.ctl(who).woken.remove(&name);
        }
        // Likewise a recount that would write nothing runs at once: only a claim gone
        // (or a conflict) rings it again.
        let ctl = state.ctl_ref(who);
        if ctl.recount_due && ctl.recounts.is_empty() && recount_now(state, who).is_empty() {
            state.ctl(who).recount_due = false;
        }
    }
}

fn server_reconcile(state: &State, name: &str) -> Vec<(String, State)> {
    // The server as it is, as the binary's watch hands it over: never the classes' view,
    // whose labels no write may carry.
    let Some(server) = state.server_ctl.binder.server_as_is(name) else {
        return vec![nothing_to_do(state, Who::ServerController, name)];
    };
    let ServerWork { decision, plan, .. } = server_work(state, server);
    if plan.is_noop() {
        return vec![nothing_to_do(state, Who::ServerController, name)];
    }
    let mut next = state.clone();
    next.server_ctl.woken.remove(name);
    next.server_ctl.in_flight = Some(InFlight::LeanServer {
        base: server.clone(),
        object: plan.object,
        status: plan.status,
    });
    let mut out = Vec::new();
    let label = format!("decides {decision:?} for server {name}");
    push_decided(&mut out, next, Who::ServerController, label);
    out
}

/// A decision and its first write form one step: the write's precondition is on the
/// controller's own kind, which nobody else writes (users aside), so writing later would
/// only look like the other controller lagging, which the model explores anyway. The
/// second write of a plan (the status after the object) stays a step of its own, so a
/// crash can fall between them.
fn push_decided(out: &mut Vec<(String, State)>, decided: State, who: Who, label: String) {
    if decided.faults > 0 {
        let mut failed = decided.clone();
        failed.faults -= 1;
        let injected = injected_failure(&failed, who);
        abandon(&mut failed, who, injected);
        out.push((
            format!("{who:?} {label}; its write fails (injected)"),
            failed,
        ));
    }
    for (wrote, next) in perform_write(decided, who) {
        out.push((format!("{who:?} {label}; {wrote}"), next));
    }
}

/// Performs the next write of the controller's plan against the truth. A pick's claim
/// write yields two successors: its watch event before its response, and after; with a
/// fault budget, a third where the write happens but its response is lost.
fn perform_write(mut next: State, who: Who) -> Vec<(String, State)> {
    let Some(in_flight) = next.ctl(who).in_flight.take() else {
        return Vec::new();
    };
    match in_flight {
        InFlight::Claim {
            base,
            object,
            status,
            assumed,
            work,
            mut charges,
        } => {
            if charges.is_empty() {
                return claim_write(next, base, object, status.map(|s| *s), (assumed, work));
            }
            let quota = charges.remove(0);
            let rest = InFlight::Claim {
                base,
                object,
                status,
                assumed,
                work,
                charges,
            };
            charge_write(next, quota, rest)
        }
        InFlight::LeanServer {
            base,
            object,
            status,
        } => {
            let name = meta::name(&base).to_string();
            if let Some(obj) = &object {
                next.judge_server_write(&base, obj);
            }
            let result = match object {
                Some(obj) => next
                    .truth
                    .write_server(&obj)
                    .map(|written| match (written, status) {
                        (Some(written), Some(status)) => Some(InFlight::LeanServer {
                            status: Some(server_status_after(&status, &base, &written)),
                            base: written,
                            object: None,
                        }),
                        _ => None,
                    }),
                None => {
                    let s = status.expect("a plan in flight writes something");
                    next.truth.write_server_status(&base, &s).map(|_| None)
                }
            };
            match result {
                Ok(rest) => {
                    next.note_holders();
                    next.server_changed(&name);
                    next.server_ctl.in_flight = rest;
                    vec![(format!("writes server {name}"), next)]
                }
                Err(Conflict) => {
                    next.server_ctl.in_flight = Some(InFlight::LeanServer {
                        base,
                        object: None,
                        status: None,
                    });
                    abandon(&mut next, who, None);
                    vec![(format!("write to server {name} conflicts"), next)]
                }
            }
        }
    }
}

/// A charge of a claim plan, before any other of its writes: the quota's status with the
/// charge added, at the resourceVersion the decision read. A conflict drops the rest of
/// the plan and tells the binder as a conflicting object write would
/// (`src/controllers/claim.rs`).
fn charge_write(mut next: State, quota: ServerQuota, rest: InFlight) -> Vec<(String, State)> {
    let (name, claim) = (meta::name(&quota).to_string(), rest.name());
    let precondition = next.protocol.charge_precondition;
    next.claim_ctl.in_flight = Some(rest);
    if next.truth.write_quota_status(&quota, precondition).is_err() {
        abandon(&mut next, Who::ClaimController, Some(ObjectWrite::Conflict));
        return vec![(
            format!("charge of claim {claim} to quota {name} conflicts"),
            next,
        )];
    }
    next.quota_changed(&name);
    if let Some(InFlight::Claim {
        object: None,
        status: None,
        charges,
        ..
    }) = &next.claim_ctl.in_flight
        && charges.is_empty()
    {
        next.claim_ctl.in_flight = None;
    }
    vec![(format!("charges claim {claim} to quota {name}"), next)]
}

/// The next write of a claim plan. `pick` is the server the plan's pick assumed (until
/// its object write's result) and the binder's step.
fn claim_write(
    mut next: State,
    base: LeanClaim,
    object: Option<LeanClaim>,
    status: Option<ServerClaimStatus>,
    pick: (Option<String>, Arc<ClaimWork>),
) -> Vec<(String, State)> {
    let (assumed, work) = pick;
    let name = meta::name(&base).to_string();
    if let Some(obj) = &object
        && next.refuses.is_some_and(|refuses| refuses(&base, obj))
    {
        let refused = ObjectWrite::Refused("denied by admission");
        fail_claim_write(&mut next, base, (assumed, work), Some(refused));
        return vec![(format!("write to claim {name} is refused"), next)];
    }
    let object_write = object.is_some();
    let result = match object {
        Some(obj) => next.truth.write_claim(&obj).map(|written| {
            status.map(|s| InFlight::Claim {
                status: Some(Box::new(claim_status_after(&s, &base, &written))),
                base: written,
                object: None,
                assumed: None,
                work: work.clone(),
                charges: Vec::new(),
            })
        }),
        None => {
            let s = status.expect("a plan in flight writes something");
            let written = next.truth.write_claim_status(&base, &s).map(|_| None);
            if written.is_ok() {
                next.claim_ctl.binder.claim_status_written(&work, now().0);
            }
            written
        }
    };
    let rest = match result {
        Ok(rest) => rest,
        Err(Conflict) => {
            let failed = object_write.then_some(ObjectWrite::Conflict);
            fail_claim_write(&mut next, base, (assumed, work), failed);
            return vec![(format!("write to claim {name} conflicts"), next)];
        }
    };
    next.claim_ctl.in_flight = rest;
    if assumed.is_none() {
        next.claim_changed(&name);
        return vec![(format!("writes claim {name}"), next)];
    }
    let written = next.truth.claim(&name).clone();
    let mut out = Vec::new();
    let mut response_first = next.clone();
    response_first
        .claim_ctl
        .claim_object_written(&work, &base, ObjectWrite::Written(&written));
    response_first.claim_changed(&name);
    out.push((
        format!("writes claim {name} (response, then event)"),
        response_first,
    ));
    if next.faults > 0 {
        let mut lost = next.clone();
        lost.faults -= 1;
        lost.claim_changed(&name);
        let lost_response = ObjectWrite::Refused("response lost (injected)");
        lost.claim_ctl
            .claim_object_written(&work, &base, lost_response);
        lost.claim_ctl.in_flight = None;
        lost.claim_ctl.woken.insert(name.clone());
        out.push((
            format!("writes claim {name}, but the response is lost (injected)"),
            lost,
        ));
    }
    next.claim_changed(&name);
    next.claim_ctl
        .claim_object_written(&work, &base, ObjectWrite::Written(&written));
    out.push((format!("writes claim {name} (event, then response)"), next));
    out
}

fn apply_user_op(state: &mut State, op: &UserOp) {
    match op {
        UserOp::DeleteClaim(name) => {
            state.truth.delete_claim(name);
            state.claim_changed(name);
        }
        UserOp::StartCleaner(cleaner, server, gate) => start_cleaner(state, cleaner, server, gate),
        UserOp::FinishCleaner(cleaner) => finish_cleaner(state, cleaner),
        UserOp::SetGates(name, gates) => {
            let admitted = gates.iter().all(|g| (state.protocol.gate_admitted)(g));
            if admitted && let Some(s) = state.truth.servers.get(*name).cloned() {
                state.truth.put_server(s.gates(gates));
                state.server_changed(name);
            }
        }
        UserOp::RestartServerController(gates) => {
            state.default_gates = gates.iter().map(|g| g.to_string()).collect();
            let (p, gates) = (&state.protocol, &state.default_gates);
            state.server_ctl = Ctl::fresh(&state.truth, Who::ServerController, p, gates);
        }
        UserOp::CreateQuota(quota) => create_quota(state, quota),
        UserOp::EditClass(name, class) => edit_class(state, name, class.as_deref()),
        UserOp::DeleteQuota(name) => {
            state.truth.quotas.remove(*name);
            state.over_at_creation.retain(|(q, _)| q != name);
            state.quota_changed(name);
        }
        UserOp::WipeQuotaStatus(name) => {
            if let Some(mut wiped) = state.truth.quotas.get(*name).cloned() {
                wiped.status = None;
                let _ = state.truth.write_quota_status(&wiped, false);
                state.quota_changed(name);
            }
        }
        UserOp::CreateClaim(claim) => {
            state.truth.put_claim((**claim).clone());
            state.note_user_ref(meta::name(&**claim));
            state.claim_changed(meta::name(&**claim));
        }
        UserOp::AddSelector(name, key, value) => {
            if let Some(c) = state.truth.claims.get(*name).cloned() {
                state.truth.put_claim(c.selects(&[(*key, *value)]));
                state.claim_changed(name);
            }
        }
        UserOp::EditServer(name, edit) => {
            if let Some(mut s) = state.truth.servers.get(*name).cloned() {
                match edit {
                    ServerEdit::Cordon => s.spec.unclaimable = true,
                    ServerEdit::Uncordon => s.spec.unclaimable = false,
                    ServerEdit::Taint(key) => s = s.taint(key),
                    ServerEdit::Untaint => s.spec.taints.clear(),
                    ServerEdit::Label(k, v) => s = s.labelled(&[(k, v)]),
                    ServerEdit::ClearRef => s.spec.server_claim_ref = None,
                }
                state.truth.put_server(s);
                state.server_changed(name);
            }
        }
    }
}

/// A quota exists for the binder once the server controller, which binds, has seen it:
/// a bind it decides on a cache that does not show the quota yet counts like a claim
/// bound before the quota existed (as Kubernetes' quota admits what its informer has not
/// seen a quota for). Until then, what the quota's namespace holds above it is exempt.
fn note_quotas_unseen(state: &mut State) {
    let seen = state.server_ctl.binder.quotas();
    let unseen: Vec<String> = state
        .truth
        .quotas
        .values()
        .filter(|q| seen.quota(meta::namespace(*q), meta::name(*q)).is_none())
        .map(|q| meta::name(q).to_string())
        .collect();
    if unseen.is_empty() {
        return;
    }
    let over = over_quota(&state.truth).into_iter();
    let over = over.filter(|(q, _)| unseen.contains(q));
    state.over_at_creation.extend(over.collect::<Vec<_>>());
}

/// An admin edits or deletes a class; both binders see it at once.
fn edit_class(state: &mut State, name: &str, class: Option<&ServerClass>) {
    state.truth.classes.retain(|c| meta::name(c) != name);
    state.truth.classes.extend(class.cloned());
    for who in [Who::ClaimController, Who::ServerController] {
        let ctl = state.ctl(who);
        let wake = ctl.binder.apply_class(name, class.cloned().map(Arc::new));
        ctl.wake(who, wake);
    }
}

/// An admin creates a quota: a new object, no status, generation 1. What its namespace
/// holds above it now is not the binder's doing (invariant 7 counts from here).
fn create_quota(state: &mut State, quota: &ServerQuota) {
    let name = meta::name(quota).to_string();
    let mut created = quota.clone();
    created.status = None;
    created.metadata.generation = Some(1);
    state.truth.put_quota(created);
    let over = over_quota(&state.truth)
        .into_iter()
        .filter(|(q, _)| *q == name);
    state.over_at_creation.extend(over);
    state.quota_changed(&name);
}

/// A cleaner reads the server: the release it is being cleaned after (or, if none, the
/// generation, as a sloppy cleaner would), and the dirt its work will clean.
fn start_cleaner(state: &mut State, cleaner: &'static str, server: &str, gate: &str) {
    let Some(s) = state.truth.servers.get(server) else {
        return;
    };
    let read = gates::release_record(s).and_then(|r| r.release);
    let release = read.unwrap_or(s.meta().generation.unwrap_or(0));
    let cleans = state
        .dirty
        .iter()
        .filter(|(s, g, _)| s == server && g == gate)
        .cloned()
        .collect();
    let work = Cleaner {
        server: server.to_string(),
        gate: gate.to_string(),
        release,
        cleans,
    };
    state.cleaners.insert(cleaner, work);
}

/// The cleaner passes its gate, naming the release it read: the dirt it cleaned is clean.
fn finish_cleaner(state: &mut State, cleaner: &str) {
    let Some(work) = state.cleaners.remove(cleaner) else {
        return;
    };
    for dirt in &work.cleans {
        state.dirty.remove(dirt);
    }
    if let Some(mut s) = state.truth.servers.get(&work.server).cloned() {
        let pass = gates::pass_condition(&work.gate, work.release, &now());
        let status = s.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != work.gate);
        status.conditions.push(pass);
        state.truth.put_server(s);
        state.server_changed(&work.server);
    }
}

// ---------------------------------------------------------------------------------------
// Invariants

/// The reservations admins wrote on servers at the start, which no controller may
/// overwrite (invariant 4; the claims' refs are the `user_claim_refs` ghost).
struct UserRefs {
    /// (server, claim name) for users' name-only reservations.
    servers: Vec<(String, String)>,
}

impl UserRefs {
    fn of(scenario: &Scenario) -> Self {
        Self {
            servers: scenario
                .servers
                .iter()
                .filter(|s| is_user_made_ref(s))
                .filter_map(|s| {
                    let r = s.spec.server_claim_ref.as_ref()?;
                    Some((meta::name(s).to_string(), r.name.clone()))
                })
                .collect(),
        }
    }
}

fn phase_of(claim: &LeanClaim) -> Option<ClaimPhase> {
    claim.status.as_ref().and_then(|s| s.phase)
}

fn server_ref_name(claim: &LeanClaim) -> Option<&str> {
    claim.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

/// Invariants 1 and 4, in every reachable state.
fn check_always(state: &State, user: &UserRefs) -> Result<(), String> {
    let truth = &state.truth;
    check_quota(truth, &state.over_at_creation)?;
    let mut bound_on: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, claim) in &truth.claims {
        if phase_of(claim) != Some(ClaimPhase::Bound) {
            continue;
        }
        let Some(server) = server_ref_name(claim) else {
            return Err(format!(
                "invariant 1: claim {name} is Bound without a serverRef"
            ));
        };
        if let Some(other) = bound_on.insert(server, name) {
            return Err(format!(
                "invariant 1: claims {other} and {name} are both Bound to {server}"
            ));
        }
        // A Bound claim's server names it by uid, or has lost its ref for a moment
        // (the server controller restores it): never another claim.
        if let Some(s) = truth.servers.get(server)
            && let Some(r) = &s.spec.server_claim_ref
            && (r.name != *name || ref_uid(r) != meta::uid(claim))
        {
            return Err(format!(
                "invariant 1: claim {name} is Bound to {server}, whose ref is {}",
                describe_ref(r)
            ));
        }
    }
    for (sname, server) in &truth.servers {
        let released = server.status.as_ref().and_then(|s| s.phase) == Some(ServerPhase::Released);
        let Some(r) = server.spec.server_claim_ref.as_ref().filter(|_| released) else {
            continue;
        };
        let holder_lives = ref_uid(r).is_none_or(|uid| {
            truth
                .claims
                .get(&r.name)
                .is_some_and(|c| meta::uid(c) == Some(uid))
        });
        if holder_lives {
            return Err(format!(
                "invariant 2: server {sname} is Released though its claim {} was never gone",
                describe_ref(r)
            ));
        }
    }
    // Invariant 5: no claim is bound to a server with a gate not passed since its
    // last tenant left.
    for (sname, gate, _) in &state.dirty {
        let Some(r) = truth
            .servers
            .get(sname)
            .and_then(|s| s.spec.server_claim_ref.as_ref())
        else {
            continue;
        };
        let live = truth.claims.get(&r.name).and_then(|c| meta::uid(c));
        if ref_uid(r).is_some() && ref_uid(r) == live {
            return Err(format!(
                "invariant 5: server {sname} is bound to {} before its release gate {gate} passed",
                describe_ref(r)
            ));
        }
    }
    if let Some(violation) = &state.entitlement {
        return Err(violation.clone());
    }
    for (claim, (uid, server)) in &state.user_claim_refs {
        if let Some(c) = truth.claims.get(claim)
            && meta::uid(c) == uid.as_deref()
            && server_ref_name(c) != Some(server)
        {
            return Err(format!(
                "invariant 4: claim {claim}'s user-written serverRef {server} was changed"
            ));
        }
    }
    for (server, claim) in &user.servers {
        if let Some(s) = truth.servers.get(server)
            && s.spec.server_claim_ref.as_ref().map(|r| r.name.as_str()) != Some(claim)
        {
            return Err(format!(
                "invariant 4: server {server}'s reservation for {claim} was changed"
            ));
        }
    }
    Ok(())
}

/// A claim's class, if it is one the world has (`ClassCheck::Of`: only then does a quota
/// count it).
fn class_of<'c>(truth: &Truth, claim: &'c LeanClaim) -> Option<&'c str> {
    let name = claim.spec.server_class_name.as_deref()?;
    truth
        .classes
        .iter()
        .any(|c| meta::name(c) == name)
        .then_some(name)
}

/// Whether a server's ref carries the claim's name and uid: the claim holds it.
fn holds_a_server(truth: &Truth, claim: &LeanClaim) -> bool {
    truth.servers.values().any(|s| {
        s.spec.server_claim_ref.as_ref().is_some_and(|r| {
            r.name == meta::name(claim) && ref_uid(r).is_some() && ref_uid(r) == meta::uid(claim)
        })
    })
}

/// Each (quota, class) with more live claims of its namespace and class holding a server
/// than its `hard`.
fn over_quota(truth: &Truth) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (name, quota) in &truth.quotas {
        for (class, hard) in &quota.spec.hard {
            let bound = truth
                .claims
                .values()
                .filter(|c| meta::namespace(*c) == meta::namespace(quota))
                .filter(|c| class_of(truth, c) == Some(class.as_str()))
                .filter(|c| holds_a_server(truth, c))
                .count() as i64;
            if bound > *hard {
                out.insert((name.clone(), class.clone()));
            }
        }
    }
    out
}

/// Invariant 7: no quota has more claims of a class bound than it allows, but for a
/// quota and class that came to exist so (counted from a world with nothing above it
/// bound).
fn check_quota(truth: &Truth, over_at_creation: &BTreeSet<(String, String)>) -> Result<(), String> {
    match over_quota(truth).difference(over_at_creation).next() {
        Some((quota, class)) => Err(format!(
            "invariant 7: quota {quota} allows {} of class {class}, but more are bound",
            truth.quotas[quota].spec.hard[class]
        )),
        None => Ok(()),
    }
}

/// Whether a full quota holds `claim` back, rightly: a quota of its namespace limits its
/// class, does not charge it, and charges as many live claims as it allows (a charge of
/// a gone claim does not count: the recount must drop it).
fn held_by_quota(truth: &Truth, claim: &LeanClaim) -> bool {
    let Some(class) = class_of(truth, claim) else {
        return false;
    };
    let live = |c: &QuotaCharge| {
        truth
            .claims
            .get(&c.claim)
            .is_some_and(|l| meta::uid(l) == Some(c.uid.as_str()))
    };
    truth
        .quotas
        .values()
        .filter(|q| meta::namespace(*q) == meta::namespace(claim))
        .any(|q| {
            let Some(hard) = quota::limit(q, class) else {
                return false;
            };
            let charges = quota::charges(q);
            let charged = |c: &&QuotaCharge| c.class == class && live(c);
            !charges
                .iter()
                .any(|c| Some(c.uid.as_str()) == meta::uid(claim))
                && charges.iter().filter(charged).count() as i64 >= hard
        })
}

/// In a quiescent state no quota charges a claim that is gone: the recount freed it.
fn check_charges(truth: &Truth) -> Result<(), String> {
    for (name, quota) in &truth.quotas {
        for c in quota::charges(quota) {
            let live = truth.claims.get(&c.claim);
            if live.is_none_or(|l| meta::uid(l) != Some(c.uid.as_str())) {
                return Err(format!(
                    "liveness: quota {name} still charges claim {} (uid {}), which is gone",
                    c.claim, c.uid
                ));
            }
        }
    }
    Ok(())
}

/// The scenario's `one_bound_of` claims: exactly one of them is bound.
fn check_one_bound(truth: &Truth, claims: &[&str]) -> Result<(), String> {
    if claims.is_empty() {
        return Ok(());
    }
    let bound: Vec<&&str> = claims
        .iter()
        .filter(|n| {
            truth
                .claims
                .get(**n)
                .is_some_and(|c| holds_a_server(truth, c) && claim_phase(c) == ClaimPhase::Bound)
        })
        .collect();
    match bound.len() {
        1 => Ok(()),
        n => Err(format!(
            "liveness: {n} of {claims:?} are bound in a quiescent state (one_bound_of: {bound:?})"
        )),
    }
}

/// Where a full assignment exists, every claim ends Bound (issue: placement).
fn check_all_bound(truth: &Truth) -> Result<(), String> {
    match truth
        .claims
        .iter()
        .find(|(_, c)| phase_of(c) != Some(ClaimPhase::Bound))
    {
        Some((name, _)) => Err(format!(
            "placement: claim {name} is stranded though every claim could be bound"
        )),
        None => Ok(()),
    }
}

/// Invariant 2 (and phase consistency), once nothing is left to do.
fn check_quiescent(state: &State, never_bind: &[&str]) -> Result<(), String> {
    check_converged(&state.truth, never_bind)?;
    check_charges(&state.truth)?;
    check_nothing_left(state)
}

/// In a quiescent state every reconcile, were something to wake it, would write nothing:
/// no decision is left waiting for a wake-up that never comes.
fn check_nothing_left(state: &State) -> Result<(), String> {
    for who in BOTH {
        let mut woken = state.clone();
        woken.ctl(who).woken = everything(&state.truth, who);
        if let Some((label, _)) = reconciles(&woken, who)
            .into_iter()
            .find(|(label, _)| !label.contains("finds nothing to do"))
        {
            return Err(format!(
                "liveness: nothing woke an object that has work left: {label}"
            ));
        }
        if let Some(quota) = recount_now(state, who).first() {
            return Err(format!(
                "liveness: nothing rang the {who:?} process's recount, which would write quota {}",
                meta::name(quota)
            ));
        }
    }
    Ok(())
}

/// The scenario's `must_bind` claims are bound (their server holds their uid).
fn check_bound(truth: &Truth, scenario: &Scenario) -> Result<(), String> {
    for name in &scenario.must_bind {
        let claim = truth.claim(name);
        let held = truth.servers.values().any(|s| {
            s.spec
                .server_claim_ref
                .as_ref()
                .is_some_and(|r| r.name == *name && ref_uid(r) == meta::uid(claim))
        });
        if !held || claim_phase(claim) != ClaimPhase::Bound {
            return Err(format!(
                "liveness: claim {name} is not bound in a quiescent state (must_bind)"
            ));
        }
    }
    Ok(())
}

/// Invariant 2 (and phase consistency) on the stored objects.
fn check_converged(truth: &Truth, never_bind: &[&str]) -> Result<(), String> {
    let holds = |server: &LeanServer, claim: &LeanClaim| {
        server
            .spec
            .server_claim_ref
            .as_ref()
            .is_some_and(|r| r.name == meta::name(claim) && ref_uid(r) == meta::uid(claim))
    };
    for (name, claim) in &truth.claims {
        let bound_pair = server_ref_name(claim)
            .and_then(|s| truth.servers.get(s))
            .is_some_and(|s| holds(s, claim));
        let is_bound = phase_of(claim) == Some(ClaimPhase::Bound);
        if is_bound != (bound_pair && meta::is_bind_completed(claim)) {
            return Err(format!(
                "invariant 2: claim {name} has phase {:?} but its binding says otherwise",
                phase_of(claim)
            ));
        }
        // A claim that was bound once and lost its server needs a human; any other
        // claim (a copied `bind-completed` included) must get a free server it can use.
        let was_bound = claim
            .status
            .as_ref()
            .is_some_and(|s| s.bound_time.is_some());
        if is_bound
            || (meta::is_bind_completed(claim) && was_bound)
            || never_bind.contains(&name.as_str())
            || held_by_quota(truth, claim)
        {
            continue;
        }
        let user_choice = (!is_controller_chosen(claim))
            .then(|| server_ref_name(claim))
            .flatten();
        for (sname, server) in &truth.servers {
            let free = server.spec.server_claim_ref.is_none()
                || matches!(
                    ref_match(server, claim),
                    RefMatch::NameOnly | RefMatch::SameUid
                );
            if free && eligibility(server, claim).is_ok() && user_choice.is_none_or(|u| u == sname)
            {
                return Err(format!(
                    "invariant 2: claim {name} is not Bound though server {sname} is free for it"
                ));
            }
        }
    }
    for (sname, server) in &truth.servers {
        let Some(r) = &server.spec.server_claim_ref else {
            continue;
        };
        let claim = truth.claims.get(&r.name);
        let phase = server.status.as_ref().and_then(|s| s.phase);
        if ref_uid(r).is_some() && claim.is_none_or(|c| meta::uid(c) != ref_uid(r)) {
            let ok = server.spec.reclaim_policy == ReclaimPolicy::Retain
                && phase == Some(ServerPhase::Released);
            if !ok {
                return Err(format!(
                    "invariant 2: server {sname} still holds gone claim {}",
                    describe_ref(r)
                ));
            }
            continue;
        }
        if !is_user_made_ref(server)
            && claim.is_none_or(|c| server_ref_name(c) != Some(sname.as_str()))
        {
            return Err(format!(
                "invariant 2: orphaned reservation: server {sname} has a controller-made ref to {}, which does not name it",
                describe_ref(r)
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Fingerprints: what distinguishes two states, with resourceVersions renamed by rank
// (only their equality matters, and every new one is fresh).
//
// Every struct that feeds a fingerprint is destructured in full, without `..`: a field
// added to a state, a controller, an object or a status is a compile error here until
// someone decides whether it tells states apart, instead of two states silently merging.
// A field bound to `_` was decided not to.

fn fingerprint(state: &State) -> u64 {
    let State {
        truth,
        claim_ctl,
        server_ctl,
        // Fixed for a whole exploration.
        refuses: _,
        backoff_ends,
        crashes,
        faults,
        resyncs,
        next_user_op,
        // Fixed for a whole exploration.
        protocol: _,
        default_gates,
        tenant_budget,
        cleaners,
        dirty,
        held,
        user_claim_refs,
        entitlement,
        over_at_creation,
        bound_class_gates,
    } = state;
    // Versions are renamed by rank, so the counter behind them does not count.
    let Truth {
        servers,
        claims,
        quotas,
        // Fixed for a whole exploration.
        classes: _,
        next_rv: _,
    } = truth;
    let ranks = Ranks::of(state);
    let mut h = FxHasher::default();
    claims.len().hash(&mut h);
    for c in claims.values() {
        claim_fp(c, &ranks, &mut h);
    }
    servers.len().hash(&mut h);
    for s in servers.values() {
        server_fp(s, &ranks, &mut h);
    }
    quotas.len().hash(&mut h);
    for q in quotas.values() {
        quota_fp(q, &ranks, &mut h);
    }
    for ctl in [claim_ctl, server_ctl] {
        ctl_fp(ctl, &ranks, &mut h);
    }
    ((*crashes, *faults, *resyncs), *next_user_op, *tenant_budget).hash(&mut h);
    backoff_ends.hash(&mut h);
    (default_gates, cleaners, dirty, held, user_claim_refs).hash(&mut h);
    entitlement.is_some().hash(&mut h);
    (over_at_creation, bound_class_gates).hash(&mut h);
    h.finish()
}

/// A resourceVersion is only ever compared with other copies of the same object, so each
/// object's versions are renamed by their rank among that object's copies in the state.
struct Ranks<'a> {
    versions: HashMap<(bool, &'a str), BTreeSet<u64>>,
    /// The quotas' versions, by quota name.
    quota_versions: HashMap<&'a str, BTreeSet<u64>>,
    /// Release gates apply in this world, even to servers that name none (the default
    /// gates): generations and the cleaners' conditions tell states apart.
    gated: bool,
}

impl<'a> Ranks<'a> {
    fn of(state: &'a State) -> Self {
        let mut versions: HashMap<(bool, &str), BTreeSet<u64>> = HashMap::default();
        for c in state_claims(state) {
            if let Some(rv) = parse_rv(&c.meta().resource_version) {
                versions
                    .entry((true, meta::name(c)))
                    .or_default()
                    .insert(rv);
            }
        }
        for s in state_servers(state) {
            if let Some(rv) = parse_rv(&s.meta().resource_version) {
                versions
                    .entry((false, meta::name(s)))
                    .or_default()
                    .insert(rv);
            }
        }
        let mut quota_versions: HashMap<&str, BTreeSet<u64>> = HashMap::default();
        for q in state_quotas(state) {
            if let Some(rv) = parse_rv(&q.metadata.resource_version) {
                quota_versions.entry(meta::name(q)).or_default().insert(rv);
            }
        }
        let gated = !state.default_gates.is_empty() || !state.cleaners.is_empty();
        Self {
            versions,
            quota_versions,
            gated,
        }
    }

    fn quota_rank(&self, name: &str, rv: &Option<String>) -> Option<usize> {
        let rv = parse_rv(rv)?;
        let set = self.quota_versions.get(name)?;
        set.iter().position(|v| *v == rv)
    }

    fn rank(&self, is_claim: bool, name: &str, rv: &Option<String>) -> Option<usize> {
        let rv = parse_rv(rv)?;
        self.versions
            .get(&(is_claim, name))
            .and_then(|set| set.iter().position(|v| *v == rv))
    }
}

fn parse_rv(rv: &Option<String>) -> Option<u64> {
    rv.as_deref().and_then(|r| r.parse::<u64>().ok())
}

/// One controller: its caches, its undelivered events, what it woke, its assumed choices
/// and the plan it is carrying out.
fn ctl_fp(ctl: &Ctl, ranks: &Ranks, h: &mut FxHasher) {
    let Ctl {
        binder,
        claim_events,
        server_events,
        quota_events,
        woken,
        in_flight,
        recount_due,
        recounts,
    } = ctl;
    // The binder's rules and configuration are fixed per controller for a run, but for
    // the release gates, which the state holds; its summary clock never lets a refresh
    // through (STATUS_INTERVAL), so it tells no states apart.
    let (claims, servers, assumed) = (binder.claims(), binder.servers(), binder.assumed());
    claims.len().hash(h);
    for c in claims.iter() {
        claim_fp(c, ranks, h);
    }
    servers.len().hash(h);
    for s in servers.iter() {
        server_fp(s, ranks, h);
    }
    claim_events.len().hash(h);
    for (n, c) in claim_events {
        n.hash(h);
        match c {
            Some(c) => claim_fp(c, ranks, h),
            None => 0u8.hash(h),
        }
    }
    server_events.len().hash(h);
    for (n, s) in server_events {
        n.hash(h);
        match s {
            Some(s) => server_fp(s, ranks, h),
            None => 0u8.hash(h),
        }
    }
    quota_events.len().hash(h);
    for (n, q) in quota_events {
        n.hash(h);
        match q {
            Some(q) => quota_fp(q, ranks, h),
            None => 0u8.hash(h),
        }
    }
    // The claims hashed above are as their class and quotas make them in the binder;
    // each is the claim as it is with a selector added at most, so they tell the claims
    // as they are apart too. The classes are fixed for a run.
    binder.quotas().iter().count().hash(h);
    for q in binder.quotas().iter() {
        quota_fp(q, ranks, h);
    }
    recount_due.hash(h);
    recounts.len().hash(h);
    for q in recounts {
        quota_fp(q, ranks, h);
    }
    woken.hash(h);
    // A refusal's count and time only set the back-off's length, which the model
    // abstracts (its end is a step); whether it is running tells states apart.
    for (key, refusal) in binder.refused().iter() {
        let Refusal {
            uid,
            count: _,
            until,
            write,
            completing,
            message,
        } = refusal;
        (key, uid, *until > now().0, write, completing, message).hash(h);
    }
    for (server, a) in assumed.iter() {
        let Assumption {
            claim,
            based_on,
            written,
            seen,
        } = a;
        server.hash(h);
        claim.hash(h);
        ranks.rank(true, &claim.name, based_on).hash(h);
        ranks.rank(true, &claim.name, written).hash(h);
        seen.hash(h);
    }
    in_flight_fp(in_flight.as_ref(), ranks, h);
}

/// The rest of a plan: the object read, the object and status still to write, and the
/// server a pick assumed.
fn in_flight_fp(in_flight: Option<&InFlight>, ranks: &Ranks, h: &mut FxHasher) {
    match in_flight {
        None => 0u8.hash(h),
        Some(InFlight::Claim {
            base,
            object,
            status,
            assumed,
            // What it decided is in `object` and `status`, and its pick in `assumed`.
            work: _,
            charges,
        }) => {
            1u8.hash(h);
            assumed.hash(h);
            charges.len().hash(h);
            for q in charges {
                quota_fp(q, ranks, h);
            }
            claim_fp(base, ranks, h);
            if let Some(o) = object {
                claim_fp(o, ranks, h);
            }
            status
                .as_deref()
                .map(|status| {
                    let ServerClaimStatus {
                        phase,
                        conditions,
                        bound_time,
                        bound_server_ref,
                        given_back_server_ref,
                    } = status;
                    (
                        *phase,
                        bound_time.is_some(),
                        (bound_server_ref, given_back_server_ref),
                        conditions_fp(conditions),
                    )
                })
                .hash(h);
        }
        Some(InFlight::LeanServer {
            base,
            object,
            status,
        }) => {
            2u8.hash(h);
            server_fp(base, ranks, h);
            if let Some(o) = object {
                server_fp(o, ranks, h);
            }
            status
                .as_ref()
                .map(|status| {
                    let ServerStatus {
                        phase,
                        claim,
                        observed_generation,
                        conditions,
                    } = status;
                    (phase, claim, observed_generation, conditions_fp(conditions))
                })
                .hash(h);
        }
    }
}

/// What of a claim the decisions read. Its status is kept as the decisions see it: the
/// phase, whether `boundTime` is set, and the `Bound` condition's reason and message.
fn claim_fp(c: &LeanClaim, ranks: &Ranks, h: &mut FxHasher) {
    // The lean object's labels and annotations are apart from its metadata.
    let (metadata, _labels, annotations, spec, status) = c.parts();
    let ObjectMeta {
        name,
        uid,
        resource_version,
        annotations: _,
        // Claims carry no finalizer of ours and are deleted at once, so they are never
        // seen deleting.
        deletion_timestamp: _,
        deletion_grace_period_seconds: _,
        finalizers: _,
        // Set once per incarnation by the scenario; the uid tells incarnations apart.
        creation_timestamp: _,
        // Its value follows the spec's history; what the decisions read is whether the
        // `Bound` condition was written for it (`bound_fp`).
        generation,
        // The decisions read no labels, owners or bookkeeping of a claim.
        labels: _,
        generate_name: _,
        managed_fields: _,
        namespace: _,
        owner_references: _,
        self_link: _,
    } = metadata;
    let name = name.as_deref().unwrap_or("");
    name.hash(h);
    uid.as_deref().hash(h);
    ranks.rank(true, name, resource_version).hash(h);
    annotations.hash(h);
    let ServerClaimSpec {
        server_ref,
        server_selector,
        tolerations,
        server_class_name,
    } = spec;
    (server_ref, server_selector, tolerations, server_class_name).hash(h);
    let (phase, bound_time, record, bound) = match status {
        None => (None, false, None, None),
        Some(ServerClaimStatus {
            phase,
            conditions,
            bound_time,
            bound_server_ref,
            given_back_server_ref,
        }) => (
            *phase,
            bound_time.is_some(),
            Some((bound_server_ref.as_ref(), given_back_server_ref.as_ref())),
            bound_fp(conditions, *generation),
        ),
    };
    phase.hash(h);
    bound_time.hash(h);
    record.hash(h);
    bound.hash(h);
}

/// What of a server the decisions read.
fn server_fp(s: &LeanServer, ranks: &Ranks, h: &mut FxHasher) {
    let (metadata, labels, annotations, spec, status) = s.parts();
    let ObjectMeta {
        name,
        resource_version,
        annotations: _,
        finalizers,
        deletion_timestamp,
        labels: _,
        // One incarnation per server name in every scenario.
        uid: _,
        creation_timestamp: _,
        // Follows the spec's history (see `claim_fp`).
        generation,
        deletion_grace_period_seconds: _,
        generate_name: _,
        managed_fields: _,
        namespace: _,
        owner_references: _,
        self_link: _,
    } = metadata;
    let name = name.as_deref().unwrap_or("");
    name.hash(h);
    ranks.rank(false, name, resource_version).hash(h);
    annotations.hash(h);
    finalizers.hash(h);
    deletion_timestamp.is_some().hash(h);
    let ServerSpec {
        server_claim_ref,
        unclaimable,
        taints,
        reclaim_policy,
        release_gates,
    } = spec;
    (server_claim_ref, *unclaimable, taints, release_gates).hash(h);
    reclaim_policy.hash(h);
    labels.hash(h);
    let (phase, claim, bound) = match status {
        None => (None, None, (false, None)),
        Some(ServerStatus {
            phase,
            claim,
            conditions,
            observed_generation,
        }) => (
            *phase,
            claim.as_deref(),
            (
                *observed_generation == *generation,
                bound_fp(conditions, *generation),
            ),
        ),
    };
    phase.hash(h);
    claim.hash(h);
    bound.hash(h);
    let gated = release_gates.as_ref().is_some_and(|g| !g.is_empty())
        || gates::is_cleaning(s)
        || ranks.gated;
    if gated {
        // With release gates, generations are compared with the `cleaning`
        // annotation's, so their values tell states apart, and so do the cleaner's
        // conditions.
        generation.hash(h);
        let others = status.iter().flat_map(|s| &s.conditions);
        conditions_fp(
            &others
                .filter(|c| c.type_ != "Bound")
                .cloned()
                .collect::<Vec<_>>(),
        )
        .hash(h);
    }
}

/// The `Bound` condition as the decisions read it: its reason and message, and whether
/// it was written for the object's current `generation` (the status rules compare the
/// two, never their values).
fn bound_fp(conditions: &[Condition], generation: Option<i64>) -> Option<(&String, &String, bool)> {
    let Condition {
        reason,
        message,
        // Follow from the phase and the generation; the model's clock never moves.
        type_: _,
        status: _,
        observed_generation,
        last_transition_time: _,
    } = find_bound(conditions)?;
    Some((reason, message, *observed_generation == generation))
}

/// What of a plan's conditions a later write depends on (the transition time is the
/// model's constant `now`).
fn conditions_fp(conditions: &[Condition]) -> Vec<(&str, &str, &str, &str, Option<i64>)> {
    conditions
        .iter()
        .map(|c| {
            let Condition {
                type_,
                status,
                reason,
                message,
                observed_generation,
                last_transition_time: _,
            } = c;
            (
                type_.as_str(),
                status.as_str(),
                reason.as_str(),
                message.as_str(),
                *observed_generation,
            )
        })
        .collect()
}

/// What of a quota the decisions and the recount read: its limits and its charges (its
/// `used` and summary follow from them, but are hashed all the same).
fn quota_fp(q: &ServerQuota, ranks: &Ranks, h: &mut FxHasher) {
    let ServerQuota {
        metadata,
        spec: ServerQuotaSpec { hard },
        status,
    } = q;
    let name = meta::name(q);
    name.hash(h);
    ranks.quota_rank(name, &metadata.resource_version).hash(h);
    hard.hash(h);
    metadata.generation.hash(h);
    if let Some(ServerQuotaStatus {
        observed_generation,
        used,
        charged,
        summary,
    }) = status
    {
        observed_generation.hash(h);
        used.hash(h);
        summary.hash(h);
        for QuotaCharge { class, claim, uid } in charged {
            (class, claim, uid).hash(h);
        }
    }
}

/// Every copy of a quota the state holds.
fn state_quotas(state: &State) -> Vec<&ServerQuota> {
    let mut out: Vec<&ServerQuota> = state.truth.quotas.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.quotas().iter().map(|q| &**q));
        out.extend(ctl.quota_events.iter().filter_map(|(_, q)| q.as_ref()));
        out.extend(ctl.recounts.iter());
        if let Some(InFlight::Claim { charges, .. }) = &ctl.in_flight {
            out.extend(charges.iter());
        }
    }
    out
}

fn state_claims(state: &State) -> Vec<&LeanClaim> {
    let mut out: Vec<&LeanClaim> = state.truth.claims.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.claims().iter());
        out.extend(ctl.claim_events.iter().filter_map(|(_, c)| c.as_ref()));
        if let Some(InFlight::Claim { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    out
}

fn state_servers(state: &State) -> Vec<&LeanServer> {
    let mut out: Vec<&LeanServer> = state.truth.servers.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.binder.servers().iter());
        out.extend(ctl.server_events.iter().filter_map(|(_, s)| s.as_ref()));
        if let Some(InFlight::LeanServer { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The worlds

/// Lowest-name-first strands a claim here: `a` takes any server and would take s1 first,
/// the only server `b` can use. A pick that keeps a maximum matching gives `a` s2. One
/// controller that neither crashes nor loses responses: the blind branch would turn the
/// picks a restart or a lost response leaves behind into another process's unseen pick,
/// and a pick that cannot see a rival's choice can strand it (known gap in
/// docs/binding.md).
pub fn stranding() -> Scenario {
    Scenario {
        name: "stranding",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("a").created(1),
            claim("b").selects(&[("rack", "r1")]).created(2),
        ],
        user_ops: vec![],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: true,
        ..Scenario::default()
    }
}

/// A user names s1 for `u` while `a`, not yet seeing `u`, may pick s1 too (both servers
/// are alike, and s1 has the lowest name): `a` must withdraw and take s2.
pub fn user_ref_race() -> Scenario {
    Scenario {
        name: "user-ref-race",
        servers: vec![server("s1"), server("s2")],
        claims: vec![claim("a").created(1), claim("u").names("s1").created(2)],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: true,
        ..Scenario::default()
    }
}

/// One server, `aaa` waiting for it, then `bbb`, whose user names that server: a name
/// says which server, not when, so `aaa`, ahead in the fair order, binds in every
/// quiescent state and `bbb` waits its turn (docs/binding.md, "The matching").
pub fn named_server_waits_its_turn() -> Scenario {
    Scenario {
        name: "named-server-waits-its-turn",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("bbb").names("s1").created(2)],
        crashes: 1,
        // A lost response counts as a refused write, and a claim backing off is ahead
        // of nobody: with one, `bbb` may bind first, as it should.
        faults: 0,
        max_lag: MAX_LAG,
        must_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// One server, `aaa` waiting for it, then a tenant's `t`, which may write `pre-bound` and
/// a `serverRef` naming s1, in either order, at any point: a `pre-bound` is a pick only
/// while this controller has it in flight (docs/binding.md, "Whose pick is it"), so
/// `aaa`, ahead in the fair order, binds in every quiescent state, crashes included.
pub fn forged_pre_bound_waits_its_turn() -> Scenario {
    Scenario {
        name: "forged-pre-bound-waits-its-turn",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("t").created(2)],
        // A restarted claim controller may not yet see `aaa`'s pick from before (known
        // gap 5): it may then take `t`'s up, as it would take up a pick of its own.
        crashes: 0,
        faults: 0,
        max_lag: 2,
        must_bind: vec!["aaa"],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Annotate(ANNOTATION_PRE_BOUND),
                TenantEdit::Point("s1"),
            ],
            budget: 2,
        }),
        ..Scenario::default()
    }
}

/// `aaa`, whose every write admission refuses, waits ahead of `bbb`, whose user names
/// s1 (rack r1), and of `ccc`, which selects rack r2 and carries a `pre-bound` ref to s2
/// this controller did not pick: while `aaa` backs off it is ahead of nobody, so both
/// get their servers, however the turns flip as its back-offs begin and end.
pub fn names_past_a_refused_claim() -> Scenario {
    Scenario {
        name: "names-past-a-refused-claim",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("aaa").created(1),
            claim("bbb").names("s1").created(2),
            claim("ccc")
                .selects(&[("rack", "r2")])
                .chose("s2")
                .created(3),
        ],
        crashes: 0,
        faults: 0,
        max_lag: 1,
        refuses: Some(|_, new| meta::name(new) == "aaa"),
        must_bind: vec!["bbb", "ccc"],
        never_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// Namespaces take turns (docs/binding.md, "The matching"): `a0` and `x0` of team-a hold
/// s1 and s2; `a1` and `a2` of team-a wait, then `b1` of team-b. Both holders go, in
/// either order and at any time: `a1`, first, takes one server, and `b1`, not `a2`,
/// the other, although `a2` is older: team-a was served since `b1` began waiting.
pub fn namespaces_take_turns() -> Scenario {
    let holder = |name: &str, on: &str, created: i64| {
        claim(name)
            .chose(on)
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(created)
    };
    let mut b1 = claim("b1").created(4);
    b1.meta_mut().namespace = Some("team-b".into());
    Scenario {
        name: "namespaces-take-turns",
        servers: vec![
            server("s1")
                .claimed_for("a0", "uid-a0")
                .phase(ServerPhase::Bound),
            server("s2")
                .claimed_for("x0", "uid-x0")
                .phase(ServerPhase::Bound),
        ],
        claims: vec![
            holder("a0", "s1", 0),
            holder("x0", "s2", 0),
            claim("a1").created(2),
            claim("a2").created(3),
            b1,
        ],
        user_ops: vec![UserOp::DeleteClaim("a0"), UserOp::DeleteClaim("x0")],
        // A restarted claim controller does not see its own picks from before (known
        // gap 5), and a lost response counts as a refusal (the claim backs off): either
        // may pass a claim over, as docs/binding.md says.
        crashes: 0,
        faults: 0,
        max_lag: 2,
        must_bind: vec!["a1", "b1"],
        ..Scenario::default()
    }
}

/// Three claims compete for two servers: one takes any server, one wants rack r1 by
/// selector, and a user pre-bound one to s1 (rack r1), the server the controller would
/// pick first for either of the others.
pub fn contention() -> Scenario {
    Scenario {
        name: "contention",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("a").created(1),
            claim("b").selects(&[("rack", "r1")]).created(2),
            claim("u").names("s1").created(3),
        ],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A user reserved s1 for claim a by name; claim b is deleted and re-created under the
/// same name while the controllers run.
pub fn reservation_and_recreate() -> Scenario {
    Scenario {
        name: "reservation-and-recreate",
        servers: vec![server("s1").reserved_for("a"), server("s2")],
        claims: vec![claim("a").created(1), claim("b").created(2)],
        user_ops: vec![
            UserOp::DeleteClaim("b"),
            UserOp::CreateClaim(Box::new(claim("b").uid("uid-b-2").created(5))),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A bound server loses its ref (an admin's mistake) while a newer claim, whose name sorts
/// first, wants a server; then that claim goes away from a Retain server.
pub fn lost_ref_and_release() -> Scenario {
    Scenario {
        name: "lost-ref-and-release",
        servers: vec![
            server("s1")
                .claimed_for("b", "uid-b")
                .phase(ServerPhase::Bound),
            server("s2").retain(),
        ],
        claims: vec![
            claim("b")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound)
                .created(1),
            claim("a").created(2),
        ],
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::ClearRef),
            UserOp::DeleteClaim("a"),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A claim picks the only server, which is tainted before the server side records the
/// claim; the claim withdraws, and a claim that tolerates the taint arrives. The pick's
/// assumption must end with the withdrawal, whichever of the write's event and response
/// comes first, and the newcomer must be woken to take the server.
pub fn eligibility_churn() -> Scenario {
    Scenario {
        name: "eligibility-churn",
        servers: vec![server("s1")],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::EditServer("s1", ServerEdit::Taint("gpu")),
            UserOp::CreateClaim(Box::new(claim("b").tolerates("gpu").created(2))),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 1,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// Eligibility churn again, with a claim that already shows why it waits (a summary,
/// which the model never refreshes): when its pick's write fails, nothing but the failure
/// itself ends the assumption (no new version of the claim follows), so the binder must
/// end it there, or the newcomer waits beside a free server.
pub fn failed_pick() -> Scenario {
    Scenario {
        name: "failed-pick",
        claims: vec![showing_a_summary(claim("a").created(1))],
        ..eligibility_churn()
    }
}

/// A claim (`aaa`, the oldest) whose every write admission refuses, as a webhook of the
/// cluster's own might, and a claim (`bbb`) that fits the one server too: `aaa` backs
/// off, ahead of nobody, and `bbb` binds (docs/binding.md, "Refused writes").
pub fn refused_pick() -> Scenario {
    Scenario {
        name: "refused-pick",
        servers: vec![server("s1")],
        claims: vec![claim("aaa").created(1), claim("bbb").created(2)],
        crashes: 1,
        faults: 1,
        max_lag: MAX_LAG,
        refuses: Some(|_, new| meta::name(new) == "aaa"),
        must_bind: vec!["bbb"],
        never_bind: vec!["aaa"],
        ..Scenario::default()
    }
}

/// As [`refused_pick`], but `aaa`'s pick is let in and only its completing write
/// (`bind-completed`) is refused: `aaa` gives the server back while it backs off, and
/// `bbb` binds. Without injected faults: a pick whose response is lost counts as a
/// refused pick, after which `aaa` holds the server it named until its back-off ends,
/// and the model bounds how many back-offs end.
pub fn refused_completion() -> Scenario {
    Scenario {
        name: "refused-completion",
        faults: 0,
        refuses: Some(|old, new| {
            meta::name(new) == "aaa"
                && !meta::is_bind_completed(old)
                && meta::is_bind_completed(new)
        }),
        ..refused_pick()
    }
}

/// `a` holds `s1`; `b`, `c` and `d`, alike, wait. `a` is deleted: `s1` is released and
/// wakes only the first two waiting claims in the fair order (free servers + picks in
/// flight + 1 per shape), not `d`. `b`, first, binds; a failed pick still lets `c` in.
pub fn freed_server_wakes_the_first() -> Scenario {
    let mut claims = a_bound_and_b_waiting();
    claims.push(claim("c").created(3));
    claims.push(claim("d").created(4));
    Scenario {
        name: "freed-server-wakes-the-first",
        servers: vec![a_on_s1(&[])],
        claims,
        user_ops: vec![UserOp::DeleteClaim("a")],
        crashes: 0,
        faults: 1,
        max_lag: 2,
        ..Scenario::default()
    }
}

/// A claim whose status shows it waiting, with the summary the claim controller writes.
fn showing_a_summary(claim: LeanClaim) -> LeanClaim {
    let mut claim = claim.phase(ClaimPhase::Pending);
    let status = claim.status.get_or_insert_with(Default::default);
    status.conditions = vec![Condition {
        type_: CONDITION_BOUND.into(),
        status: "False".into(),
        reason: "NoMatchingServer".into(),
        message: "0/0 servers can serve this claim".into(),
        last_transition_time: t(0),
        observed_generation: None,
    }];
    claim
}

/// The server written first (s1 carries a's uid, a names nothing); a selector that only
/// s1 matches is added to a, s1 is cordoned, and s2 is relabelled and untainted (still
/// not matching).
/// a must end up bound to s1 (if it adopted it before the cordon), or pending with s1
/// rolled back: never an orphaned reservation.
pub fn orphan_and_cordon() -> Scenario {
    Scenario {
        name: "orphan-and-cordon",
        servers: vec![
            server("s1")
                .labelled(&[("rack", "r1")])
                .claimed_for("a", "uid-a")
                .phase(ServerPhase::Bound),
            server("s2").labelled(&[("rack", "r2")]).taint("maint"),
        ],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::AddSelector("a", "rack", "r1"),
            UserOp::EditServer("s1", ServerEdit::Cordon),
            UserOp::EditServer("s2", ServerEdit::Label("size", "large")),
            UserOp::EditServer("s2", ServerEdit::Untaint),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// A Retain server reserved for a with `uid: ""` (a reservation by name, as Go tools
/// write it), and a claim created with a `bind-completed` annotation copied from another
/// object; a second server is cordoned, then uncordoned. Both claims must bind; s1 is
/// never Released.
pub fn empty_uid_and_copies() -> Scenario {
    Scenario {
        name: "empty-uid-and-copies",
        servers: vec![
            server("s1").retain().reserved_for("a").uid_ref(""),
            server("s2").unclaimable(),
        ],
        claims: vec![claim("a").created(1)],
        user_ops: vec![
            UserOp::CreateClaim(Box::new(claim("b").bind_completed().created(2))),
            UserOp::EditServer("s2", ServerEdit::Uncordon),
        ],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

// ---------------------------------------------------------------------------------------
// Tests

/// A tenant leaves a server with a release gate while another claim waits, and cleaners
/// pass the gate: one that read the server while the tenant still held it (a stale
/// pass), and one that starts after the tenant left, passing at any point. The waiting
/// claim must never get the server before a cleaning done after the tenant left
/// (invariant 5), with a crash and a failed write anywhere.
pub fn release_gates() -> Scenario {
    Scenario {
        name: "release-gates",
        servers: vec![a_on_s1(&[WIPE])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::StartCleaner("stale", "s1", WIPE),
            UserOp::FinishCleaner("stale"),
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        crashes: 1,
        faults: 1,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        ..Scenario::default()
    }
}

/// The gate every gated world uses: a valid name (a domain prefix).
const WIPE: &str = "x.io/wipe";

/// `s1` bound to `a`, with these release gates of its own (none: the spec names none).
fn a_on_s1(gates: &[&str]) -> LeanServer {
    let s1 = server("s1")
        .claimed_for("a", "uid-a")
        .phase(ServerPhase::Bound);
    if gates.is_empty() {
        s1
    } else {
        s1.gates(gates)
    }
}

/// `a` bound to `s1`, and `b`, newer, waiting for a server.
fn a_bound_and_b_waiting() -> Vec<LeanClaim> {
    vec![
        claim("a")
            .chose("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(1),
        claim("b").created(2),
    ]
}

/// The gates' configuration changes around a release: an admin tries to name a gate
/// after the controllers' `Cleaning` condition (admission refuses it), the tenant leaves
/// s1 (whose gates are the controller's default), and the server controller restarts
/// without default gates, before or after the release. A cleaner then passes the gate.
/// Whatever the order, the waiting claim never gets s1 before a cleaning the release
/// asked for (invariant 5).
pub fn gate_config_changes() -> Scenario {
    Scenario {
        name: "gate-config-changes",
        servers: vec![a_on_s1(&[])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::SetGates("s1", vec!["Cleaning"]),
            UserOp::DeleteClaim("a"),
            UserOp::RestartServerController(vec![]),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        crashes: 0,
        faults: 1,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        default_gates: vec![WIPE],
        tenant: None,
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
    }
}

/// Two releases of one gated server, and a slow cleaner: it reads the first release, a
/// fast one passes that release, the next tenant binds and leaves, and only then the
/// slow pass lands, naming the first release. It cleans nothing of the second tenant's.
pub fn late_pass() -> Scenario {
    Scenario {
        name: "late-pass",
        servers: vec![a_on_s1(&[WIPE])],
        claims: a_bound_and_b_waiting(),
        user_ops: vec![
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("slow", "s1", WIPE),
            UserOp::StartCleaner("fast", "s1", WIPE),
            UserOp::FinishCleaner("fast"),
            UserOp::DeleteClaim("b"),
            UserOp::CreateClaim(Box::new(claim("c").created(3))),
            UserOp::FinishCleaner("slow"),
        ],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        ..Scenario::default()
    }
}

/// An untrusted tenant owns `t`, which selects rack r1: no server can serve it (s1 is
/// cordoned, s2 is in rack r2). At any point it may forge `bind-completed`, point `t` at
/// either server and drop the ref again, two writes in all, each as admission allows.
/// `v` takes any server and must get s2. `t` must never get a server (invariant 6).
pub fn tenant_forgery() -> Scenario {
    Scenario {
        name: "tenant-forgery",
        servers: vec![
            server("s1").labelled(&[("rack", "r1")]).unclaimable(),
            server("s2").labelled(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("t").selects(&[("rack", "r1")]).created(1),
            claim("v").created(2),
        ],
        user_ops: vec![],
        crashes: 0,
        faults: 0,
        resyncs: 0,
        max_lag: 2,
        all_bind: false,
        default_gates: vec![],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Annotate(ANNOTATION_BIND_COMPLETED),
                TenantEdit::Point("s1"),
                TenantEdit::Point("s2"),
                TenantEdit::Unpoint,
            ],
            budget: 2,
        }),
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
    }
}

/// A tenant's claim `t` was bound once and is `Lost` (its server is gone): it keeps
/// `bind-completed` and its `boundTime`. The tenant drops its ref and points it at s1
/// (cordoned) or s2 (tainted): neither may be given to it (invariant 6). A forged
/// `pre-bound`, a dropped `bind-completed` or an added selector change nothing about
/// that.
pub fn lost_and_re_pointed() -> Scenario {
    Scenario {
        name: "lost-and-re-pointed",
        servers: vec![server("s1").unclaimable(), server("s2").taint("gpu")],
        claims: vec![
            claim("t")
                .chose("gone")
                .bind_completed()
                .phase(ClaimPhase::Lost)
                .created(1),
        ],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
        resyncs: 0,
        max_lag: MAX_LAG,
        all_bind: false,
        default_gates: vec![],
        tenant: Some(Tenant {
            claim: "t",
            edits: vec![
                TenantEdit::Unpoint,
                TenantEdit::Point("s1"),
                TenantEdit::Point("s2"),
                TenantEdit::Annotate(ANNOTATION_PRE_BOUND),
                TenantEdit::Unannotate(ANNOTATION_BIND_COMPLETED),
                TenantEdit::Select("rack", "r9"),
            ],
            budget: 3,
        }),
        refuses: None,
        must_bind: vec![],
        never_bind: vec![],
        classes: vec![],
        quotas: vec![],
        one_bound_of: vec![],
    }
}

/// The class of the quota worlds' claims: no selector, so it takes in every server.
const GPU: &str = "gpu";

fn gpu_class() -> ServerClass {
    ServerClass::new(GPU, ServerClassSpec::default())
}

/// A claim of class gpu.
fn gpu(mut claim: LeanClaim) -> LeanClaim {
    claim.spec.server_class_name = Some(GPU.into());
    claim
}

/// Quota `q` of team-a: `hard` servers of class gpu, charging these claims (name, uid),
/// its status as the recount writes it.
fn gpu_quota(hard: i64, charged: &[(&str, &str)]) -> ServerQuota {
    let spec = ServerQuotaSpec {
        hard: [(GPU.to_string(), hard)].into(),
    };
    let mut q = ServerQuota::new("q", spec);
    q.metadata.namespace = Some(NS.into());
    let holders: Vec<quota::Holder> = charged
        .iter()
        .map(|(claim, uid)| quota::Holder {
            class: GPU.into(),
            claim: claim.to_string(),
            uid: uid.to_string(),
            holds: quota::Holds::Bound,
        })
        .collect();
    q.status = quota::recount(&q, &HashSet::new(), &holders);
    q
}

/// A quota of one gpu server, two servers, and two claims of class gpu: `a` takes any
/// server, `b`'s user names s2 (a name is no way around a quota). Whichever is charged
/// first binds; the other waits over quota, in every interleaving (invariant 7), and
/// one of them binds in every quiescent state.
pub fn quota_holds() -> Scenario {
    Scenario {
        name: "quota-holds",
        servers: vec![server("s1"), server("s2")],
        claims: vec![
            gpu(claim("a").created(1)),
            gpu(claim("b").names("s2").created(2)),
        ],
        crashes: 1,
        faults: 0,
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[])],
        one_bound_of: vec!["a", "b"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server charges `a`, bound to s1; `b` waits over quota, s2 free.
/// The user deletes `a` and creates `a` again (a new uid): the recount must free the old
/// charge (a read says the claim is gone) and never the new one's, so exactly one of the
/// new `a` and `b` ends bound, and never two at once (invariant 7).
pub fn quota_freed_by_delete() -> Scenario {
    Scenario {
        name: "quota-freed-by-delete",
        servers: vec![
            server("s1")
                .claimed_for("a", "uid-a")
                .phase(ServerPhase::Bound),
            server("s2"),
        ],
        claims: vec![
            gpu(claim("a")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound)
                .created(1)),
            gpu(claim("b").created(2)),
        ],
        user_ops: vec![
            UserOp::DeleteClaim("a"),
            UserOp::CreateClaim(Box::new(gpu(claim("a").uid("uid-a-2").created(5)))),
        ],
        crashes: 0,
        faults: 0,
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        one_bound_of: vec!["a", "b"],
        ..Scenario::default()
    }
}

/// A restore (or a tenant's delete and re-create) under a full quota: `a` holds s1 and
/// the quota's one gpu server; s0's ref names `x` with the uid of a gone incarnation
/// (bound under class gpu, as s0's record says), and the `x` now living (class gpu)
/// names s0 back with copied annotations. `x` never
/// binds while `a` holds the quota (invariant 7), never loses s0 (no release: s0 would
/// then be Released), and binds s0 once `a` is deleted.
pub fn restored_past_the_quota() -> Scenario {
    let (mut servers, mut claims) = a_holds_s1_b_waits();
    let mut s0 = server("s0").claimed_for("x", "uid-x-old");
    let record = gates::BoundClass {
        class: GPU.into(),
        release_gates: None,
    };
    s0.annotations_mut()
        .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
    servers[1] = s0;
    claims[1] = gpu(claim("x")
        .chose("s0")
        .bind_completed()
        .uid("uid-x")
        .created(2));
    Scenario {
        name: "restored-past-the-quota",
        servers,
        claims,
        user_ops: vec![UserOp::DeleteClaim("a")],
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["x"],
        ..Scenario::default()
    }
}

/// A restore, and a tenant re-creating the claim under the same name in the same state
/// space: s0's ref names `x` with the uid of a gone incarnation, the `x` now living
/// names s0 back (restored, with copied annotations). The tenant deletes `x` and creates
/// it again naming nothing: that `x` never inherits s0 by its name (invariant 6), though
/// it may pick s0 once s0 is free, and it binds (s1 is free too).
pub fn restored_then_re_created() -> Scenario {
    Scenario {
        name: "restored-then-re-created",
        servers: vec![server("s0").claimed_for("x", "uid-x-old"), server("s1")],
        claims: vec![
            claim("x")
                .chose("s0")
                .bind_completed()
                .uid("uid-x")
                .created(2),
        ],
        user_ops: vec![
            UserOp::DeleteClaim("x"),
            UserOp::CreateClaim(Box::new(claim("x").uid("uid-x-2").created(5))),
        ],
        crashes: 1,
        max_lag: 2,
        must_bind: vec!["x"],
        ..Scenario::default()
    }
}

/// team-a's `a` holds s1, `b` waits beside the free s2, both of class gpu; no quota yet.
fn a_holds_s1_b_waits() -> (Vec<LeanServer>, Vec<LeanClaim>) {
    let servers = vec![
        server("s1")
            .claimed_for("a", "uid-a")
            .phase(ServerPhase::Bound),
        server("s2"),
    ];
    let claims = vec![
        gpu(claim("a")
            .chose("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(1)),
        gpu(claim("b").created(2)),
    ];
    (servers, claims)
}

/// An admin creates a quota of one gpu server over team-a, which holds one and has `b`
/// waiting beside a free server. Once the binder has seen the quota, `b` binds only if it
/// did before: the quota counts first, then admits (invariant 7 from its creation).
pub fn quota_created_at_the_limit() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-created-at-the-limit",
        servers,
        claims,
        user_ops: vec![UserOp::CreateQuota(Box::new(gpu_quota(1, &[])))],
        max_lag: 2,
        classes: vec![gpu_class()],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server, counted, charging `a`; `b` waits over quota. The admin
/// deletes the quota and creates it again: `b` may bind while no quota exists, never
/// against the new quota's empty status.
pub fn quota_re_created() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-re-created",
        servers,
        claims,
        user_ops: vec![
            UserOp::DeleteQuota("q"),
            UserOp::CreateQuota(Box::new(gpu_quota(1, &[]))),
        ],
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// A quota of one gpu server, counted, charging `a`; `b` waits over quota. Someone
/// wipes the quota's status: `b` never binds against the empty status, and a recount
/// brings the count back.
pub fn quota_status_wiped() -> Scenario {
    let (servers, claims) = a_holds_s1_b_waits();
    Scenario {
        name: "quota-status-wiped",
        servers,
        claims,
        user_ops: vec![UserOp::WipeQuotaStatus("q")],
        crashes: 1,
        max_lag: 2,
        classes: vec![gpu_class()],
        quotas: vec![gpu_quota(1, &[("a", "uid-a")])],
        must_bind: vec!["a"],
        ..Scenario::default()
    }
}

/// Class `gated`: the servers labelled `pool=gated`, released through [`WIPE`].
fn gated_class(pool: &str) -> ServerClass {
    let spec = ServerClassSpec {
        server_selector: Some(ServerSelector {
            match_labels: [("pool".to_string(), pool.to_string())].into(),
            ..ServerSelector::default()
        }),
        release_gates: Some(vec![ReleaseGate { name: WIPE.into() }]),
        ..ServerClassSpec::default()
    };
    ServerClass::new("gated", spec)
}

/// `a`, of class `gated`, holds s1, bound in a write that recorded the class and its
/// gate; an admin `edit`s the class (narrows it off s1, or deletes it); `a` goes; `b`, of
/// no class, can take s1 once no class takes it in. The release waits for the gate the
/// class named when `a` bound, whatever the class says then (invariant 5): `b` gets s1
/// only after a cleaner that started after the release passed it.
fn class_changed_mid_bind(name: &'static str, edit: Option<ServerClass>) -> Scenario {
    let mut a = claim("a")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound)
        .created(1);
    a.spec.server_class_name = Some("gated".into());
    let record = gates::BoundClass {
        class: "gated".into(),
        release_gates: Some(vec![WIPE.into()]),
    };
    let mut s1 = server("s1")
        .labelled(&[("pool", "gated")])
        .claimed_for("a", "uid-a")
        .phase(ServerPhase::Bound);
    s1.annotations_mut()
        .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
    Scenario {
        name,
        servers: vec![s1],
        claims: vec![a, claim("b").created(2)],
        user_ops: vec![
            UserOp::EditClass("gated", edit.map(Box::new)),
            UserOp::DeleteClaim("a"),
            UserOp::StartCleaner("cleaner", "s1", WIPE),
            UserOp::FinishCleaner("cleaner"),
        ],
        max_lag: 2,
        crashes: 1,
        classes: vec![gated_class("gated")],
        ..Scenario::default()
    }
}

pub fn class_narrowed_mid_bind() -> Scenario {
    class_changed_mid_bind("class-narrowed-mid-bind", Some(gated_class("elsewhere")))
}

pub fn class_deleted_mid_bind() -> Scenario {
    class_changed_mid_bind("class-deleted-mid-bind", None)
}

#[test]
fn a_class_narrowed_mid_bind_holds_in_every_interleaving() {
    assert_holds(class_narrowed_mid_bind());
}

#[test]
fn a_class_deleted_mid_bind_holds_in_every_interleaving() {
    assert_holds(class_deleted_mid_bind());
}

#[test]
fn a_pair_restored_past_the_quota_holds_in_every_interleaving() {
    assert_holds(restored_past_the_quota());
}

#[test]
fn a_restored_name_re_created_holds_in_every_interleaving() {
    assert_holds(restored_then_re_created());
}

#[test]
fn a_quota_created_at_the_limit_holds_in_every_interleaving() {
    assert_holds(quota_created_at_the_limit());
}

#[test]
fn a_quota_re_created_holds_in_every_interleaving() {
    assert_holds(quota_re_created());
}

#[test]
fn a_quota_whose_status_is_wiped_holds_in_every_interleaving() {
    assert_holds(quota_status_wiped());
}

#[test]
fn a_quota_holds_in_every_interleaving() {
    assert_holds(quota_holds());
}

#[test]
fn a_quota_freed_by_a_delete_holds_in_every_interleaving() {
    assert_holds(quota_freed_by_delete());
}

fn assert_holds(scenario: Scenario) {
    let started = std::time::Instant::now();
    let report = explore(&scenario, Protocol::real());
    println!(
        "model check {}: {} states explored ({} quiescent, max depth {}) in {:.1?}",
        scenario.name,
        report.states,
        report.quiescent,
        report.max_depth,
        started.elapsed()
    );
    if let Some(v) = &report.violation {
        panic!("{}: {v}", scenario.name);
    }
    assert!(
        report.quiescent > 0,
        "{}: some run converges",
        scenario.name
    );
}

#[test]
fn stranding_binds_every_claim_in_every_interleaving() {
    assert_holds(stranding());
}

#[test]
fn namespaces_take_turns_in_every_interleaving() {
    assert_holds(namespaces_take_turns());
}

#[test]
fn a_named_server_waits_its_turn_in_every_interleaving() {
    assert_holds(named_server_waits_its_turn());
}

#[test]
fn a_forged_pre_bound_waits_its_turn_in_every_interleaving() {
    assert_holds(forged_pre_bound_waits_its_turn());
}

#[test]
fn names_pass_a_refused_claim_in_every_interleaving() {
    assert_holds(names_past_a_refused_claim());
}

#[test]
fn user_ref_race_binds_every_claim_in_every_interleaving() {
    assert_holds(user_ref_race());
}

#[test]
fn release_gates_hold_in_every_interleaving() {
    assert_holds(release_gates());
}

/// The server side that releases a gated server straight to Available, as before
/// release gates.
fn skips_release_gates(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::ReleaseToCleaning { .. } => ServerDecision::Release {
            policy: ReclaimPolicy::Recycle,
        },
        other => other,
    }
}

#[test]
fn gate_config_changes_hold_in_every_interleaving() {
    assert_holds(gate_config_changes());
}

#[test]
fn a_late_pass_holds_in_every_interleaving() {
    assert_holds(late_pass());
}

#[test]
fn tenant_forgery_holds_in_every_interleaving() {
    assert_holds(tenant_forgery());
}

#[test]
fn a_lost_claim_re_pointed_holds_in_every_interleaving() {
    assert_holds(lost_and_re_pointed());
}

/// The server side's winner rule before issue 20: any `bind-completed` claim naming a
/// free server takes it back, eligible or not (`can_take_back` trusted the annotation).
fn trusts_bind_completed(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let decision = decide_server(server, claims, liveness, gates, turn, admit);
    let free = server.spec.server_claim_ref.is_none()
        && !gates::is_cleaning(server)
        && matches!(
            server_is_claimable(server),
            Ok(()) | Err(Ineligible::Unclaimable)
        );
    let forged = claims
        .claims_naming(meta::name(server))
        .into_iter()
        .filter(|c| meta::is_bind_completed(*c))
        .min_by_key(|c| meta::name(*c).to_string());
    match (&decision, forged) {
        (ServerDecision::Available | ServerDecision::ClaimForWinner { .. }, Some(c)) if free => {
            ServerDecision::ClaimForWinner {
                winner: claim_ref_of(c),
                restoring: true,
            }
        }
        _ => decision,
    }
}

/// Release gates before issue 20: any gate name is admitted, and a condition of the
/// gate's name passes it even when the controllers write that condition themselves (a
/// gate named `Cleaning` passes itself). The server is seen with such a gate renamed,
/// and the controllers' condition copied under the new name.
fn gate_passes_itself(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen = server.clone();
    let alias = |g: &str| format!("x.io/{g}-alias");
    for gate in seen.spec.release_gates.iter_mut().flatten() {
        if OWN_CONDITIONS.contains(&gate.name.as_str()) {
            gate.name = alias(&gate.name);
        }
    }
    if let Some(recorded) = seen.annotations_mut().get_mut(ANNOTATION_CLEANING_GATES) {
        *recorded = recorded
            .split(',')
            .map(|g| match OWN_CONDITIONS.contains(&g) {
                true => alias(g),
                false => g.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    if let Some(status) = seen.status.as_mut() {
        let copies: Vec<Condition> = status
            .conditions
            .iter()
            .filter(|c| OWN_CONDITIONS.contains(&c.type_.as_str()))
            .map(|c| Condition {
                type_: alias(&c.type_),
                ..c.clone()
            })
            .collect();
        status.conditions.extend(copies);
    }
    decide_server(&seen, claims, liveness, gates, turn, admit)
}

/// Release gates before issue 20: every reconcile of a cleaning server reads the gates
/// from the spec or the controller's flag now, not from what the release recorded.
fn gates_from_the_flag(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen = server.clone();
    let now: Vec<String> = gates.to_vec();
    if let Some(recorded) = seen.annotations_mut().get_mut(ANNOTATION_CLEANING_GATES) {
        *recorded = now.join(",");
    }
    decide_server(&seen, claims, liveness, gates, turn, admit)
}

#[test]
fn contention_holds_in_every_interleaving() {
    assert_holds(contention());
}

#[test]
fn reservation_and_recreate_holds_in_every_interleaving() {
    assert_holds(reservation_and_recreate());
}

#[test]
fn lost_ref_and_release_holds_in_every_interleaving() {
    assert_holds(lost_ref_and_release());
}

#[test]
fn eligibility_churn_holds_in_every_interleaving() {
    assert_holds(eligibility_churn());
}

#[test]
fn a_failed_pick_holds_in_every_interleaving() {
    assert_holds(failed_pick());
}

#[test]
fn a_claim_whose_writes_are_refused_holds_nobody_back() {
    assert_holds(refused_pick());
}

#[test]
fn a_claim_whose_completing_write_is_refused_gives_its_server_back() {
    assert_holds(refused_completion());
}

#[test]
fn a_freed_server_that_wakes_the_first_claims_holds_in_every_interleaving() {
    assert_holds(freed_server_wakes_the_first());
}

#[test]
fn orphan_and_cordon_holds_in_every_interleaving() {
    assert_holds(orphan_and_cordon());
}

#[test]
fn empty_uid_and_copies_hold_in_every_interleaving() {
    assert_holds(empty_uid_and_copies());
}

/// A server controller without the winner rule's priorities: it hands a server to the
/// alphabetically first claim naming it, bound or not.
fn without_winner_priority(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::ClaimForWinner { .. } => {
            let mut contenders = claims.claims_naming(meta::name(server));
            contenders.retain(|c| eligibility(server, c).is_ok());
            contenders.sort_by_key(|c| meta::name(*c).to_string());
            let first = contenders[0];
            ServerDecision::ClaimForWinner {
                winner: claim_ref_of(first),
                restoring: meta::is_bind_completed(first),
            }
        }
        other => other,
    }
}

/// A claim controller that never withdraws a server it chose when another claim took it.
fn without_withdraw(
    claim: &LeanClaim,
    servers: &dyn ServerView,
    pick: &PickInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    match decide_claim(claim, servers, pick, liveness) {
        ClaimDecision::WithdrawTakenServer { server, .. } => {
            ClaimDecision::WaitForServer { server }
        }
        other => other,
    }
}

/// Runs `scenario` under `mutant` and returns the violation it must produce.
fn caught(what: &str, scenario: Scenario, mutant: Protocol) -> String {
    let started = std::time::Instant::now();
    let report = explore(&scenario, mutant);
    let violation = report
        .violation
        .unwrap_or_else(|| panic!("the {what} mutant breaks no invariant"));
    println!(
        "{what} mutant, caught in {} after {} states ({:.1?}): {violation}",
        scenario.name,
        report.states,
        started.elapsed()
    );
    violation
}

/// The wake-up rules without "an assumed choice that ends wakes the pending claims".
fn without_assumption_end_wakeup(_: &str, _: &ServerCatalog, _: &ClaimCatalog) -> Wake {
    Wake::default()
}

/// The wake-up rules without "a claim that starts backing off wakes the pending claims"
/// (it stops being ahead of them). With [`decides_with_no_one_held_back`], a refused
/// claim keeps its place.
fn refusal_wakes_nobody(
    old: Option<&LeanClaim>,
    new: Option<&LeanClaim>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
) -> Wake {
    let mut wake = triggers::on_claim_change(old, new, servers, claims);
    if new.is_some_and(backoff::backs_off) && !old.is_some_and(backoff::backs_off) {
        let key = new.map(claim_key).expect("a claim");
        wake.claims = [key].into_iter().collect();
    }
    wake
}

/// The server side without "a server its claim gave back is rolled back": it waits for
/// the claim to adopt it, which the claim never does.
fn keeps_a_given_back_server(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    waits_instead_of_rolling_back(server, claims, liveness, gates, (turn, admit), |cause| {
        *cause == RollBackCause::GivenBack
    })
}

/// The fair order without namespaces' service: each namespace's queue alone, so the
/// oldest claim goes first however often its namespace was just served.
fn ignores_namespace_turns(
    claim: &LeanClaim,
    servers: &dyn ServerView,
    pick: &PickInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let blind = pick.waiting.without_service();
    let pick = PickInputs {
        waiting: &blind,
        ..*pick
    };
    decide_claim(claim, servers, &pick, liveness)
}

/// The server side before turns: a user's claim naming a free server wins it whatever
/// the claims ahead of it need.
fn name_jumps_the_queue(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    _turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    decide_server(server, claims, liveness, gates, &|_| true, admit)
}

/// The server decision before "Whose pick is it": any `pre-bound` ref is taken as a pick
/// made in its turn, whoever wrote it.
fn trusts_pre_bound(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let trusting = |c: &LeanClaim| is_controller_chosen(c) || turn(c);
    decide_server(server, claims, liveness, gates, &trusting, admit)
}

/// The server decision, but waiting for an adoption where it would roll back for a
/// `cause` that `which` picks (the mutants of the rollback rows).
fn waits_instead_of_rolling_back(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    (turn, admit): (Turn<'_>, Admit<'_>),
    which: fn(&RollBackCause) -> bool,
) -> ServerDecision {
    match decide_server(server, claims, liveness, gates, turn, admit) {
        ServerDecision::RollBack { cause } if which(&cause) => {
            ServerDecision::BoundAwaitingAdoption
        }
        decision => decision,
    }
}

/// The wake-up rules without "a server that becomes free wakes the first waiting claims".
/// The claim wake-up rule without its last part for names: a claim that stops waiting
/// without a server (a back-off begins, it is deleted) wakes no free server a user's
/// claim names, only the servers the claim itself names or that name it.
fn leaving_claim_wakes_no_named_server(
    old: Option<&LeanClaim>,
    new: Option<&LeanClaim>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
) -> Wake {
    let mut wake = triggers::on_claim_change(old, new, servers, claims);
    let Some(key) = new.or(old).map(claim_key) else {
        return wake;
    };
    let own: BTreeSet<String> = [old, new]
        .into_iter()
        .flatten()
        .filter_map(|c| c.spec.server_ref.as_ref().map(|r| r.name.clone()))
        .chain(
            servers
                .reserved_for(&key.namespace, &key.name)
                .into_iter()
                .map(|s| meta::name(s).to_string()),
        )
        .collect();
    wake.servers.retain(|s| own.contains(s));
    wake
}

fn freed_server_wakes_nobody(
    old: Option<&LeanServer>,
    new: Option<&LeanServer>,
    servers: &ServerCatalog,
    claims: &ClaimCatalog,
    _: usize,
) -> Wake {
    let mut wake = triggers::on_server_change(old, new, servers, claims, 0);
    let waiting = |k: &ClaimKey| claims.waiting().shape_of(k).is_some();
    let named: BTreeSet<ClaimKey> = [old, new]
        .into_iter()
        .flatten()
        .flat_map(|s| s.spec.server_claim_ref.iter())
        .map(|r| ClaimKey::of(&r.namespace, &r.name))
        .collect();
    wake.claims.retain(|k| !waiting(k) || named.contains(k));
    wake
}

/// The claim decision without the binder's memory of the claims backing off: until the
/// refused claim's status says so, it is still ahead of the others.
fn decides_with_no_one_held_back(
    claim: &LeanClaim,
    servers: &dyn ServerView,
    pick: &PickInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let pick = PickInputs {
        held_back: &[],
        ..*pick
    };
    decide_claim(claim, servers, &pick, liveness)
}

/// The assumed-choice rule before issue 10: an assumption is "seen" only by the one event
/// whose resourceVersion equals the write response's, and ends only once seen. If the
/// event comes before the response, it never ends.
fn old_assumption_rule(a: &mut Assumption, server: &str, claim: &LeanClaim) -> bool {
    if a.written.is_some() && a.written == claim.meta().resource_version {
        a.seen = true;
    }
    let names = claim
        .spec
        .server_ref
        .as_ref()
        .is_some_and(|r| r.name == server);
    a.seen && !names
}

/// A server controller that takes `uid: ""` for a uid (of a claim that is gone).
fn empty_uid_is_a_uid(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let mut seen_as = server.clone();
    if let Some(r) = seen_as.spec.server_claim_ref.as_mut()
        && r.uid.as_deref() == Some("")
    {
        r.uid = Some("an empty uid".into());
    }
    decide_server(&seen_as, claims, liveness, gates, turn, admit)
}

/// The server side before issue 10: it waits for a claim that names nothing to adopt the
/// server, even when the claim cannot (the server was cordoned, tainted or relabelled).
fn waits_for_any_adoption(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    waits_instead_of_rolling_back(server, claims, liveness, gates, (turn, admit), |cause| {
        matches!(cause, RollBackCause::CannotAdopt(_))
    })
}

/// The server side before quotas: it binds a claim whether or not a quota charges it.
fn ignores_the_charge(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    _admit: Admit<'_>,
) -> ServerDecision {
    decide_server(server, claims, liveness, gates, turn, &|_| true)
}

/// A restore without the pair: the claim now living under the name a server's ref
/// names inherits the server whether or not it names it back.
fn inherits_by_name(
    server: &LeanServer,
    claims: &dyn ClaimView,
    liveness: Liveness,
    gates: &[String],
    turn: Turn<'_>,
    admit: Admit<'_>,
) -> ServerDecision {
    let r = server.spec.server_claim_ref.as_ref();
    let heir = r.and_then(|r| claims.claim(&r.namespace, &r.name).map(|c| (r, c)));
    match heir {
        Some((r, c)) if ref_uid(r).is_some() && meta::uid(c) != ref_uid(r) => {
            ServerDecision::FillUid {
                claim: meta::claim_ref_of(c),
            }
        }
        _ => decide_server(server, claims, liveness, gates, turn, admit),
    }
}

/// A mutant the model check must catch: the rules it changes, the worlds it is run in,
/// and what its violation must say (any of these).
struct Mutant {
    name: &'static str,
    mutate: fn(&mut Protocol),
    worlds: &'static [fn() -> Scenario],
    says: &'static [&'static str],
}

const LIVENESS: &[&str] = &["invariant 2", "liveness"];

const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "skips-gates",
        mutate: |p| p.rules.server = skips_release_gates,
        worlds: &[release_gates],
        says: &["invariant 5"],
    },
    Mutant {
        name: "trusts-bind-completed",
        mutate: |p| p.rules.server = trusts_bind_completed,
        worlds: &[tenant_forgery, lost_and_re_pointed],
        says: &["invariant 6"],
    },
    Mutant {
        name: "gate-passes-itself",
        mutate: |p| {
            p.rules.server = gate_passes_itself;
            p.gate_admitted = |_| true;
        },
        worlds: &[gate_config_changes],
        says: &["invariant 5"],
    },
    Mutant {
        name: "gates-from-the-flag",
        mutate: |p| p.rules.server = gates_from_the_flag,
        worlds: &[gate_config_changes],
        says: &["invariant 5"],
    },
    Mutant {
        name: "winner-rule",
        mutate: |p| p.rules.server = without_winner_priority,
        worlds: &[lost_ref_and_release],
        says: &["invariant 1"],
    },
    Mutant {
        name: "withdraw",
        mutate: |p| p.rules.claim = without_withdraw,
        worlds: &[user_ref_race],
        says: &["invariant 2"],
    },
    Mutant {
        name: "lowest-name-first",
        mutate: |p| p.rules.claim = lowest_name_first,
        worlds: &[stranding],
        says: &["placement: claim b is stranded"],
    },
    Mutant {
        name: "dropped-trigger",
        mutate: |p| p.rules.triggers.assumption_ended = without_assumption_end_wakeup,
        worlds: &[eligibility_churn],
        says: LIVENESS,
    },
    Mutant {
        name: "refusal-keeps-its-place",
        mutate: |p| {
            p.rules.claim = decides_with_no_one_held_back;
            p.rules.triggers.claim_changed = refusal_wakes_nobody;
        },
        worlds: &[refused_pick],
        says: LIVENESS,
    },
    Mutant {
        name: "keeps-given-back-server",
        mutate: |p| p.rules.server = keeps_a_given_back_server,
        worlds: &[refused_completion],
        says: &["liveness: claim bbb", "invariant 2"],
    },
    Mutant {
        name: "freed-server-wakes-nobody",
        mutate: |p| p.rules.triggers.server_changed = freed_server_wakes_nobody,
        worlds: &[freed_server_wakes_the_first],
        says: LIVENESS,
    },
    Mutant {
        name: "leaving-claim-wakes-no-name",
        mutate: |p| p.rules.triggers.claim_changed = leaving_claim_wakes_no_named_server,
        worlds: &[names_past_a_refused_claim],
        says: &["claim bbb"],
    },
    Mutant {
        name: "oldest-first",
        mutate: |p| p.rules.claim = ignores_namespace_turns,
        worlds: &[namespaces_take_turns],
        says: LIVENESS,
    },
    Mutant {
        name: "name-jumps-the-queue",
        mutate: |p| p.rules.server = name_jumps_the_queue,
        worlds: &[named_server_waits_its_turn],
        says: &["liveness: claim aaa"],
    },
    Mutant {
        name: "trusts-pre-bound",
        mutate: |p| p.rules.server = trusts_pre_bound,
        worlds: &[forged_pre_bound_waits_its_turn],
        says: &["liveness: claim aaa"],
    },
    Mutant {
        name: "old-assumption-rule",
        mutate: |p| p.rules.assumption_ends = old_assumption_rule,
        worlds: &[eligibility_churn],
        says: LIVENESS,
    },
    Mutant {
        name: "empty-uid",
        mutate: |p| p.rules.server = empty_uid_is_a_uid,
        worlds: &[empty_uid_and_copies],
        says: &["Released"],
    },
    Mutant {
        name: "orphan",
        mutate: |p| p.rules.server = waits_for_any_adoption,
        worlds: &[orphan_and_cordon],
        says: &["orphaned reservation"],
    },
    Mutant {
        name: "ignores-the-charge",
        mutate: |p| p.rules.server = ignores_the_charge,
        worlds: &[quota_holds],
        says: &["invariant 7"],
    },
    Mutant {
        name: "charge-without-precondition",
        mutate: |p| p.charge_precondition = false,
        worlds: &[quota_holds],
        says: &["invariant 7"],
    },
    Mutant {
        name: "gates-of-the-moment",
        mutate: |p| p.rules.class_gates = |_, now| now,
        worlds: &[class_narrowed_mid_bind, class_deleted_mid_bind],
        says: &["invariant 5"],
    },
    Mutant {
        name: "admits-before-counting",
        mutate: |p| p.rules.quota_counted = |_| true,
        worlds: &[
            quota_created_at_the_limit,
            quota_re_created,
            quota_status_wiped,
        ],
        says: &["invariant 7"],
    },
    Mutant {
        name: "restored-above-hard",
        mutate: |p| p.restored_within_hard = false,
        worlds: &[restored_past_the_quota],
        says: &["invariant 7"],
    },
    Mutant {
        name: "inherits-by-name",
        mutate: |p| p.rules.server = inherits_by_name,
        worlds: &[restored_then_re_created],
        says: &["invariant 6"],
    },
    Mutant {
        name: "recount-trusts-the-cache",
        mutate: |p| p.recount_reads_live = false,
        worlds: &[quota_freed_by_delete],
        says: &["invariant 7"],
    },
];

/// Runs the mutant of this name in each of its worlds: each must break an invariant, as
/// its entry says.
fn catches(name: &str) {
    let mutant = MUTANTS
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no mutant {name}"));
    let mut protocol = Protocol::real();
    (mutant.mutate)(&mut protocol);
    for world in mutant.worlds {
        let violation = caught(mutant.name, world(), protocol);
        assert!(
            mutant.says.iter().any(|s| violation.contains(s)),
            "{name}: {violation}"
        );
    }
}

macro_rules! mutant_tests {
    ($($test:ident: $name:literal;)*) => {
        $(
            #[test]
            fn $test() {
                catches($name);
            }
        )*

        /// Every mutant of the table has its test.
        #[test]
        fn every_mutant_is_tested() {
            let tested = [$($name),*];
            for m in MUTANTS {
                assert!(tested.contains(&m.name), "mutant {} has no test", m.name);
            }
        }
    };
}

mutant_tests! {
    the_model_check_catches_a_release_that_skips_the_gates: "skips-gates";
    the_model_check_catches_a_server_side_that_trusts_bind_completed: "trusts-bind-completed";
    the_model_check_catches_a_gate_named_after_a_controller_condition: "gate-passes-itself";
    the_model_check_catches_gates_read_from_the_flag_at_every_reconcile: "gates-from-the-flag";
    the_model_check_catches_a_winner_rule_without_priorities: "winner-rule";
    the_model_check_catches_a_claim_that_never_withdraws: "withdraw";
    the_model_check_catches_lowest_name_first: "lowest-name-first";
    the_model_check_catches_a_dropped_wake_up_rule: "dropped-trigger";
    the_model_check_catches_the_old_assumed_choice_rule: "old-assumption-rule";
    the_model_check_catches_a_refused_claim_that_keeps_its_place: "refusal-keeps-its-place";
    the_model_check_catches_a_given_back_server_kept: "keeps-given-back-server";
    the_model_check_catches_a_freed_server_that_wakes_nobody: "freed-server-wakes-nobody";
    the_model_check_catches_a_name_that_jumps_the_queue: "name-jumps-the-queue";
    the_model_check_catches_a_back_off_that_wakes_no_name: "leaving-claim-wakes-no-name";
    the_model_check_catches_a_forged_pre_bound_taken_as_a_pick: "trusts-pre-bound";
    the_model_check_catches_a_fair_order_without_turns: "oldest-first";
    the_model_check_catches_an_empty_uid_taken_for_a_uid: "empty-uid";
    the_model_check_catches_the_old_orphan_behaviour: "orphan";
    the_model_check_catches_a_server_side_that_ignores_the_charge: "ignores-the-charge";
    the_model_check_catches_a_charge_without_its_precondition: "charge-without-precondition";
    the_model_check_catches_a_quota_that_admits_before_it_counts: "admits-before-counting";
    the_model_check_catches_release_gates_read_from_the_class_now: "gates-of-the-moment";
    the_model_check_catches_a_recount_that_trusts_the_cache: "recount-trusts-the-cache";
    the_model_check_catches_a_restored_pair_charged_above_hard: "restored-above-hard";
    the_model_check_catches_a_name_that_inherits_without_the_pair: "inherits-by-name";
}

#[test]
fn user_annotations_are_the_protocol_names() {
    // Guards the model's notion of "user-chosen" against a rename.
    assert!(is_controller_chosen(&claim("c").chose("s")));
    assert!(!is_controller_chosen(&claim("c").names("s")));
    assert_eq!(ANNOTATION_PRE_BOUND, "metal.binder.dev/pre-bound");
}

/// For exploring budgets by hand: MODEL_EXPERIMENT=contention:CRASHES:FAULTS:LAG.
#[test]
#[ignore = "a tool for sizing the model check by hand"]
fn experiment() {
    let spec = std::env::var("MODEL_EXPERIMENT").unwrap_or_default();
    let parts: Vec<&str> = spec.split(':').collect();
    let mut scenario = match parts[0] {
        "recreate" => reservation_and_recreate(),
        "lost" => lost_ref_and_release(),
        "churn" => eligibility_churn(),
        "orphan" => orphan_and_cordon(),
        "uid" => empty_uid_and_copies(),
        "gates" => release_gates(),
        "config" => gate_config_changes(),
        "late" => late_pass(),
        "forgery" => tenant_forgery(),
        "forged-pre-bound" => forged_pre_bound_waits_its_turn(),
        "repointed" => lost_and_re_pointed(),
        "quota-holds" => quota_holds(),
        "quota-freed" => quota_freed_by_delete(),
        _ => contention(),
    };
    scenario.crashes = parts.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    scenario.faults = parts.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
    scenario.max_lag = parts.get(3).and_then(|p| p.parse().ok()).unwrap_or(MAX_LAG);
    assert_holds(scenario);
}
