//! An exhaustive model check of the binding protocol, with the real decision and plan
//! functions.
//!
//! The world is tiny (2-3 claims, 2 servers) but the scheduler is adversarial. From every
//! state it tries every step:
//! - either controller delivers the next watch event of the other kind to its cache (so
//!   caches lag by any amount, but never go back in time, as with a real reflector);
//! - either controller reconciles any object in its cache (deciding on that stale view;
//!   a live read, when a decision asks for one, sees the truth);
//! - either controller performs the next write of its plan, which hits a conflict if its
//!   resourceVersion is stale, or fails by injection (bounded);
//! - either controller crashes (bounded): it loses its cache, its assumed choices and the
//!   rest of its plan, and relists;
//! - the next scripted user action happens (delete a claim, re-create it, ...).
//!
//! Invariants 1 and 4 of docs/binding.md hold in every reachable state; invariant 2 holds
//! in every quiescent state (no events pending, no plan in flight, every reconcile a
//! no-op); and because crashes may strike between any two writes, every quiescent state
//! reached after a crash converged from the half-bound state the crash left (invariant 3).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::*;

// Fingerprinting and the visited set are a fifth of the check's time with SipHash;
// fingerprints need a well-spread 64-bit hash, not a DoS-resistant one.
use rustc_hash::{FxHashMap as HashMap, FxHasher};

use crate::support::*;
use crate::world::{Conflict, Truth};

/// The claim controller's decision function, as the model calls it.
pub type ClaimDecider =
    fn(&ServerClaim, &dyn ServerView, &dyn Fn(&str) -> bool, Liveness) -> ClaimDecision;
/// The server controller's decision function, as the model calls it.
pub type ServerDecider = fn(&Server, &dyn ClaimView, Liveness) -> ServerDecision;

/// The decision functions under test, swappable so mutants can be checked too.
#[derive(Clone, Copy)]
pub struct Protocol {
    pub claim: ClaimDecider,
    pub server: ServerDecider,
}

impl Protocol {
    pub fn real() -> Self {
        Self {
            claim: |c, v, skip, l| decide_claim(c, v, skip, l),
            server: |s, v, l| decide_server(s, v, l),
        }
    }
}

/// A scripted user action.
#[derive(Clone, Debug)]
pub enum UserOp {
    DeleteClaim(&'static str),
    CreateClaim(Box<ServerClaim>),
    ClearServerRef(&'static str),
}

/// A world to explore.
#[derive(Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub servers: Vec<Server>,
    pub claims: Vec<ServerClaim>,
    pub user_ops: Vec<UserOp>,
    pub crashes: u8,
    pub faults: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    ClaimController,
    ServerController,
}

#[derive(Clone, Debug)]
enum InFlight {
    Claim {
        base: ServerClaim,
        object: Option<ServerClaim>,
        status: Option<ServerClaimStatus>,
    },
    Server {
        base: Server,
        object: Option<Server>,
        status: Option<ServerStatus>,
    },
}

/// One controller process: its caches, the watch events not yet delivered to them, its
/// assumed choices and the rest of the plan it is carrying out.
#[derive(Clone, Debug, Default)]
struct Ctl {
    claims: BTreeMap<String, ServerClaim>,
    servers: BTreeMap<String, Server>,
    claim_events: VecDeque<(String, Option<ServerClaim>)>,
    server_events: VecDeque<(String, Option<Server>)>,
    /// server -> claim it was chosen for, until the claim cache shows the choice.
    assumed: BTreeMap<String, String>,
    in_flight: Option<InFlight>,
}

impl Ctl {
    fn fresh(truth: &Truth) -> Self {
        Self {
            claims: truth.claims.clone(),
            servers: truth.servers.clone(),
            ..Self::default()
        }
    }

    /// An assumed choice (server S for claim C) lasts until the server cache shows S with a
    /// ref (the server side caught up) or C no longer names S (withdrawn, deleted).
    fn forget_confirmed_assumptions(&mut self) {
        let (claims, servers) = (&self.claims, &self.servers);
        self.assumed.retain(|server, claim| {
            let still_chosen = claims.get(claim).is_some_and(|c| {
                c.spec.server_ref.as_ref().map(|r| r.name.as_str()) == Some(server)
            });
            let unseen = servers
                .get(server)
                .is_some_and(|s| s.spec.server_claim_ref.is_none());
            still_chosen && unseen
        });
    }
}

#[derive(Clone)]
struct State {
    truth: Truth,
    claim_ctl: Ctl,
    server_ctl: Ctl,
    crashes: u8,
    faults: u8,
    next_user_op: usize,
}

impl State {
    fn ctl(&mut self, who: &Who) -> &mut Ctl {
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
        set(&mut self.claim_ctl.claims, name, obj.clone());
        self.claim_ctl.forget_confirmed_assumptions();
        self.server_ctl
            .claim_events
            .push_back((name.to_string(), obj));
    }

    fn server_changed(&mut self, name: &str) {
        let obj = self.truth.servers.get(name).cloned();
        set(&mut self.server_ctl.servers, name, obj.clone());
        self.claim_ctl
            .server_events
            .push_back((name.to_string(), obj));
    }
}

fn set<T>(map: &mut BTreeMap<String, T>, name: &str, obj: Option<T>) {
    match obj {
        Some(o) => map.insert(name.to_string(), o),
        None => map.remove(name),
    };
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

/// How many watch events a cache may lag behind. Without a bound, a controller that is
/// never scheduled lets the other one's writes pile up forever and the state space is
/// infinite; with it, the check is exhaustive for every schedule whose caches lag by at
/// most this many events (a step that would exceed it is not taken).
pub const MAX_LAG: usize = 3;

/// Explores every interleaving of `scenario` under `protocol`.
pub fn explore(scenario: &Scenario, protocol: Protocol) -> Report {
    let truth = Truth::new(scenario.servers.clone(), scenario.claims.clone());
    let initial = State {
        claim_ctl: Ctl::fresh(&truth),
        server_ctl: Ctl::fresh(&truth),
        truth,
        crashes: scenario.crashes,
        faults: scenario.faults,
        next_user_op: 0,
    };
    let user_refs = UserRefs::of(scenario);
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
        let successors = successors(&state, scenario, protocol);
        if violation.is_none() && successors.is_empty() {
            report.quiescent += 1;
            violation = check_quiescent(&state, protocol).err();
        }
        if let Some(v) = violation {
            report.violation = Some(format!("{v}\n{}", trace(&parents, id)));
            return report;
        }
        for (label, next) in successors {
            if lag(&next) > MAX_LAG {
                continue;
            }
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
    state
        .claim_ctl
        .server_events
        .len()
        .max(state.server_ctl.claim_events.len())
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

fn successors(state: &State, scenario: &Scenario, protocol: Protocol) -> Vec<(String, State)> {
    let mut out = Vec::new();
    for who in [Who::ClaimController, Who::ServerController] {
        let ctl = match who {
            Who::ClaimController => &state.claim_ctl,
            Who::ServerController => &state.server_ctl,
        };
        if let Some((name, _)) = ctl.claim_events.front() {
            let mut next = state.clone();
            deliver_claim_event(next.ctl(&who));
            out.push((format!("{who:?} sees claim {name} change"), next));
        }
        if let Some((name, _)) = ctl.server_events.front() {
            let mut next = state.clone();
            deliver_server_event(next.ctl(&who));
            out.push((format!("{who:?} sees server {name} change"), next));
        }
        if ctl.in_flight.is_some() {
            let mut next = state.clone();
            let label = perform_write(&mut next, &who);
            out.push((format!("{who:?} {label}"), next));
            if state.faults > 0 {
                let mut next = state.clone();
                next.faults -= 1;
                abandon(next.ctl(&who));
                out.push((format!("{who:?} write fails (injected)"), next));
            }
        } else {
            out.extend(reconciles(state, &who, protocol));
        }
        if state.crashes > 0 {
            let mut next = state.clone();
            next.crashes -= 1;
            *next.ctl(&who) = Ctl::fresh(&next.truth);
            out.push((format!("{who:?} crashes and restarts"), next));
        }
    }
    if let Some(op) = scenario.user_ops.get(state.next_user_op) {
        let mut next = state.clone();
        next.next_user_op += 1;
        apply_user_op(&mut next, op);
        out.push((format!("user: {op:?}"), next));
    }
    out
}

fn deliver_claim_event(ctl: &mut Ctl) {
    if let Some((name, obj)) = ctl.claim_events.pop_front() {
        match obj {
            Some(c) => ctl.claims.insert(name, c),
            None => ctl.claims.remove(&name),
        };
        ctl.forget_confirmed_assumptions();
    }
}

fn deliver_server_event(ctl: &mut Ctl) {
    if let Some((name, obj)) = ctl.server_events.pop_front() {
        match obj {
            Some(s) => ctl.servers.insert(name, s),
            None => ctl.servers.remove(&name),
        };
        ctl.forget_confirmed_assumptions();
    }
}

/// A failed or conflicting write: the rest of the plan is dropped (the controller
/// requeues), and so is the choice it assumed for that claim.
fn abandon(ctl: &mut Ctl) {
    if let Some(InFlight::Claim { base, .. }) = ctl.in_flight.take() {
        let claim = meta::name(&base).to_string();
        ctl.assumed.retain(|_, c| *c != claim);
    }
}

fn reconciles(state: &State, who: &Who, protocol: Protocol) -> Vec<(String, State)> {
    let mut out = Vec::new();
    match who {
        Who::ClaimController => {
            let ctl = &state.claim_ctl;
            let servers = ServerCatalog::from_servers(ctl.servers.values().cloned());
            let claims = ClaimCatalog::from_claims(ctl.claims.values().cloned());
            for (name, claim) in &ctl.claims {
                let assumed = |s: &str| ctl.assumed.get(s).is_some_and(|c| c != name);
                let pass = pass_over(claim, &servers, &claims, &assumed);
                // The real claim cache lags a little, and another process's claims more:
                // a pick may not yet see the claim that names its server and outranks it.
                // So every pick is explored both ways.
                let mut seen: Vec<ClaimDecision> = Vec::new();
                for sees_rivals in [true, false] {
                    let skip: &dyn Fn(&str) -> bool = if sees_rivals { &pass } else { &assumed };
                    let mut decision = (protocol.claim)(claim, &servers, skip, Liveness::Cached);
                    let mut plan = plan_claim(claim, &decision, &now());
                    if let Some(server) = plan.confirm_server.clone() {
                        let live = state.truth.servers.get(&server);
                        let view = WithLiveServer {
                            base: &servers,
                            name: &server,
                            live,
                        };
                        decision = (protocol.claim)(claim, &view, skip, Liveness::Confirmed);
                        plan = plan_claim(claim, &decision, &now());
                    }
                    if plan.is_noop() || seen.contains(&decision) {
                        continue;
                    }
                    seen.push(decision.clone());
                    let mut next = state.clone();
                    if let ClaimDecision::PickBestFit { server }
                    | ClaimDecision::AdoptReservedServer { server } = &decision
                    {
                        next.claim_ctl.assumed.insert(server.clone(), name.clone());
                    }
                    next.claim_ctl.in_flight = Some(InFlight::Claim {
                        base: claim.clone(),
                        object: plan.object,
                        status: plan.status,
                    });
                    let blind = if sees_rivals {
                        ""
                    } else {
                        " (not yet seeing the claims naming it)"
                    };
                    push_decided(
                        &mut out,
                        next,
                        who,
                        format!("decides {decision:?} for claim {name}{blind}"),
                    );
                }
            }
        }
        Who::ServerController => {
            let ctl = &state.server_ctl;
            let claims = ClaimCatalog::from_claims(ctl.claims.values().cloned());
            for (name, server) in &ctl.servers {
                let mut decision = (protocol.server)(server, &claims, Liveness::Cached);
                let mut plan = plan_server(server, &decision, &now());
                if let Some(r) = plan.confirm_claim.clone() {
                    let live = state.truth.claims.get(&r.name);
                    let view = WithLiveClaim {
                        base: &claims,
                        namespace: &r.namespace,
                        name: &r.name,
                        live,
                    };
                    decision = (protocol.server)(server, &view, Liveness::Confirmed);
                    plan = plan_server(server, &decision, &now());
                }
                if plan.is_noop() {
                    continue;
                }
                let mut next = state.clone();
                next.server_ctl.in_flight = Some(InFlight::Server {
                    base: server.clone(),
                    object: plan.object,
                    status: plan.status,
                });
                push_decided(
                    &mut out,
                    next,
                    who,
                    format!("decides {decision:?} for server {name}"),
                );
            }
        }
    }
    out
}

/// A decision and its first write form one step: the write's precondition is on the
/// controller's own kind, which nobody else writes (users aside), so writing later would
/// only look like the other controller lagging, which the model explores anyway. The
/// second write of a plan (the status after the object) stays a step of its own, so a
/// crash can fall between them.
fn push_decided(out: &mut Vec<(String, State)>, decided: State, who: &Who, label: String) {
    if decided.faults > 0 {
        let mut failed = decided.clone();
        failed.faults -= 1;
        abandon(failed.ctl(who));
        out.push((
            format!("{who:?} {label}; its write fails (injected)"),
            failed,
        ));
    }
    let mut next = decided;
    let wrote = perform_write(&mut next, who);
    out.push((format!("{who:?} {label}; {wrote}"), next));
}

/// Performs the next write of the controller's plan against the truth.
fn perform_write(state: &mut State, who: &Who) -> String {
    let Some(in_flight) = state.ctl(who).in_flight.take() else {
        return "has nothing to write".into();
    };
    match in_flight {
        InFlight::Claim {
            base,
            object,
            status,
        } => {
            let name = meta::name(&base).to_string();
            let (result, rest) = match object {
                Some(obj) => (
                    state.truth.write_claim(&obj),
                    status.map(|s| InFlight::Claim {
                        base: obj.clone(),
                        object: None,
                        status: Some(s),
                    }),
                ),
                None => {
                    let s = status.expect("a plan in flight writes something");
                    (state.truth.write_claim_status(&base, &s), None)
                }
            };
            finish_write(
                state,
                who,
                result.map(|written| {
                    rest.map(|r| match r {
                        InFlight::Claim { status, .. } => InFlight::Claim {
                            base: written,
                            object: None,
                            status,
                        },
                        other => other,
                    })
                }),
                &name,
                true,
            )
        }
        InFlight::Server {
            base,
            object,
            status,
        } => {
            let name = meta::name(&base).to_string();
            let result = match object {
                Some(obj) => {
                    state
                        .truth
                        .write_server(&obj)
                        .map(|written| match (written, status) {
                            (Some(written), Some(status)) => Some(InFlight::Server {
                                base: written,
                                object: None,
                                status: Some(status),
                            }),
                            _ => None,
                        })
                }
                None => {
                    let s = status.expect("a plan in flight writes something");
                    state.truth.write_server_status(&base, &s).map(|_| None)
                }
            };
            finish_write(state, who, result, &name, false)
        }
    }
}

fn finish_write(
    state: &mut State,
    who: &Who,
    result: Result<Option<InFlight>, Conflict>,
    name: &str,
    is_claim: bool,
) -> String {
    match result {
        Ok(rest) => {
            if is_claim {
                state.claim_changed(name);
            } else {
                state.server_changed(name);
            }
            state.ctl(who).in_flight = rest;
            format!(
                "writes {}",
                if is_claim {
                    format!("claim {name}")
                } else {
                    format!("server {name}")
                }
            )
        }
        Err(Conflict) => {
            let ctl = state.ctl(who);
            ctl.in_flight = Some(InFlight::Claim {
                base: ServerClaim::new(name, ServerClaimSpec::default()),
                object: None,
                status: None,
            });
            abandon(ctl);
            ctl.in_flight = None;
            format!("write to {name} conflicts")
        }
    }
}

fn apply_user_op(state: &mut State, op: &UserOp) {
    match op {
        UserOp::DeleteClaim(name) => {
            state.truth.delete_claim(name);
            state.claim_changed(name);
        }
        UserOp::CreateClaim(claim) => {
            state.truth.put_claim((**claim).clone());
            state.claim_changed(meta::name(&**claim));
        }
        UserOp::ClearServerRef(name) => {
            if let Some(mut s) = state.truth.servers.get(*name).cloned() {
                s.spec.server_claim_ref = None;
                state.truth.put_server(s);
                state.server_changed(name);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Invariants

/// The refs users wrote at the start, which no controller may overwrite (invariant 4).
struct UserRefs {
    /// (claim name, claim uid, server) for user-written claim serverRefs.
    claims: Vec<(String, Option<String>, String)>,
    /// (server, claim name) for users' name-only reservations.
    servers: Vec<(String, String)>,
}

impl UserRefs {
    fn of(scenario: &Scenario) -> Self {
        let created = scenario
            .claims
            .iter()
            .chain(scenario.user_ops.iter().filter_map(|op| match op {
                UserOp::CreateClaim(c) => Some(&**c),
                _ => None,
            }));
        Self {
            claims: created
                .filter(|c| !is_controller_chosen(c))
                .filter_map(|c| {
                    let server = c.spec.server_ref.as_ref()?.name.clone();
                    Some((
                        meta::name(c).to_string(),
                        meta::uid(c).map(str::to_string),
                        server,
                    ))
                })
                .collect(),
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

fn phase_of(claim: &ServerClaim) -> Option<ClaimPhase> {
    claim.status.as_ref().and_then(|s| s.phase)
}

fn server_ref_name(claim: &ServerClaim) -> Option<&str> {
    claim.spec.server_ref.as_ref().map(|r| r.name.as_str())
}

/// Invariants 1 and 4, in every reachable state.
fn check_always(state: &State, user: &UserRefs) -> Result<(), String> {
    let truth = &state.truth;
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
            && (r.name != *name || r.uid.as_deref() != meta::uid(claim))
        {
            return Err(format!(
                "invariant 1: claim {name} is Bound to {server}, whose ref is {}",
                describe_ref(r)
            ));
        }
    }
    for (claim, uid, server) in &user.claims {
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

/// Invariant 2 (and phase consistency), once nothing is left to do.
fn check_quiescent(state: &State, _protocol: Protocol) -> Result<(), String> {
    let truth = &state.truth;
    let holds =
        |server: &Server, claim: &ServerClaim| {
            server.spec.server_claim_ref.as_ref().is_some_and(|r| {
                r.name == meta::name(claim) && r.uid.as_deref() == meta::uid(claim)
            })
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
        if is_bound || meta::is_bind_completed(claim) {
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
        if r.uid.is_some() && claim.is_none_or(|c| meta::uid(c) != r.uid.as_deref()) {
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

fn fingerprint(state: &State) -> u64 {
    // A resourceVersion is only ever compared with other copies of the same object, so
    // each object's versions are renamed by their rank among that object's copies.
    let mut versions: HashMap<(bool, &str), BTreeSet<u64>> = HashMap::default();
    let parse = |rv: &Option<String>| rv.as_deref().and_then(|r| r.parse::<u64>().ok());
    for c in state_claims(state) {
        if let Some(rv) = parse(&c.metadata.resource_version) {
            versions
                .entry((true, meta::name(c)))
                .or_default()
                .insert(rv);
        }
    }
    for s in state_servers(state) {
        if let Some(rv) = parse(&s.metadata.resource_version) {
            versions
                .entry((false, meta::name(s)))
                .or_default()
                .insert(rv);
        }
    }
    let local_rank = |is_claim: bool, name: &str, rv: &Option<String>| {
        let rv = parse(rv)?;
        versions
            .get(&(is_claim, name))
            .and_then(|set| set.iter().position(|v| *v == rv))
    };
    let rv = |obj: &dyn Fn() -> Option<usize>| obj();
    let mut h = FxHasher::default();
    let claim_fp = |c: &ServerClaim, h: &mut FxHasher| {
        meta::name(c).hash(h);
        meta::uid(c).hash(h);
        rv(&|| local_rank(true, meta::name(c), &c.metadata.resource_version)).hash(h);
        c.metadata.annotations.hash(h);
        c.spec.server_ref.hash(h);
        let status = c.status.as_ref();
        status.and_then(|s| s.phase).hash(h);
        status
            .and_then(|s| find_bound(&s.conditions))
            .map(|b| (&b.reason, &b.message))
            .hash(h);
    };
    let server_fp = |s: &Server, h: &mut FxHasher| {
        meta::name(s).hash(h);
        rv(&|| local_rank(false, meta::name(s), &s.metadata.resource_version)).hash(h);
        s.metadata.annotations.hash(h);
        s.metadata.finalizers.hash(h);
        s.metadata.deletion_timestamp.is_some().hash(h);
        s.spec.server_claim_ref.hash(h);
        let status = s.status.as_ref();
        status.and_then(|st| st.phase).hash(h);
        status.and_then(|st| st.claim.as_deref()).hash(h);
        status
            .and_then(|st| find_bound(&st.conditions))
            .map(|b| (&b.reason, &b.message))
            .hash(h);
    };
    let claims = |m: &BTreeMap<String, ServerClaim>, h: &mut FxHasher| {
        m.len().hash(h);
        for c in m.values() {
            claim_fp(c, h);
        }
    };
    let servers = |m: &BTreeMap<String, Server>, h: &mut FxHasher| {
        m.len().hash(h);
        for s in m.values() {
            server_fp(s, h);
        }
    };
    claims(&state.truth.claims, &mut h);
    servers(&state.truth.servers, &mut h);
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        claims(&ctl.claims, &mut h);
        servers(&ctl.servers, &mut h);
        ctl.claim_events.len().hash(&mut h);
        for (n, c) in &ctl.claim_events {
            n.hash(&mut h);
            match c {
                Some(c) => claim_fp(c, &mut h),
                None => 0u8.hash(&mut h),
            }
        }
        ctl.server_events.len().hash(&mut h);
        for (n, s) in &ctl.server_events {
            n.hash(&mut h);
            match s {
                Some(s) => server_fp(s, &mut h),
                None => 0u8.hash(&mut h),
            }
        }
        ctl.assumed.hash(&mut h);
        match &ctl.in_flight {
            None => 0u8.hash(&mut h),
            Some(InFlight::Claim {
                base,
                object,
                status,
            }) => {
                1u8.hash(&mut h);
                claim_fp(base, &mut h);
                if let Some(o) = object {
                    claim_fp(o, &mut h);
                }
                status
                    .as_ref()
                    .map(|s| {
                        (
                            s.phase,
                            s.bound_time.is_some(),
                            conditions_fp(&s.conditions),
                        )
                    })
                    .hash(&mut h);
            }
            Some(InFlight::Server {
                base,
                object,
                status,
            }) => {
                2u8.hash(&mut h);
                server_fp(base, &mut h);
                if let Some(o) = object {
                    server_fp(o, &mut h);
                }
                status
                    .as_ref()
                    .map(|s| {
                        (
                            s.phase,
                            &s.claim,
                            s.observed_generation,
                            conditions_fp(&s.conditions),
                        )
                    })
                    .hash(&mut h);
            }
        }
    }
    (state.crashes, state.faults, state.next_user_op).hash(&mut h);
    h.finish()
}

/// What of a plan's conditions a later write depends on (the transition time is the
/// model's constant `now`).
fn conditions_fp(conditions: &[Condition]) -> Vec<(&str, &str, &str, &str, Option<i64>)> {
    conditions
        .iter()
        .map(|c| {
            (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str(),
                c.observed_generation,
            )
        })
        .collect()
}

fn state_claims(state: &State) -> Vec<&ServerClaim> {
    let mut out: Vec<&ServerClaim> = state.truth.claims.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.claims.values());
        out.extend(ctl.claim_events.iter().filter_map(|(_, c)| c.as_ref()));
        if let Some(InFlight::Claim { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    out
}

fn state_servers(state: &State) -> Vec<&Server> {
    let mut out: Vec<&Server> = state.truth.servers.values().collect();
    for ctl in [&state.claim_ctl, &state.server_ctl] {
        out.extend(ctl.servers.values());
        out.extend(ctl.server_events.iter().filter_map(|(_, s)| s.as_ref()));
        if let Some(InFlight::Server { base, object, .. }) = &ctl.in_flight {
            out.push(base);
            out.extend(object.iter());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The worlds

/// Three claims compete for two servers: one takes any server, one wants rack r1 by
/// selector, and a user pre-bound one to s1 (rack r1), the server the controller would
/// pick first for either of the others.
pub fn contention() -> Scenario {
    Scenario {
        name: "contention",
        servers: vec![
            server("s1").labels(&[("rack", "r1")]),
            server("s2").labels(&[("rack", "r2")]),
        ],
        claims: vec![
            claim("a").created(1),
            claim("b").selector(&[("rack", "r1")]).created(2),
            claim("u").wants("s1").created(3),
        ],
        user_ops: vec![],
        crashes: 1,
        faults: 0,
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
    }
}

/// A bound server loses its ref (an admin's mistake) while a newer claim, whose name sorts
/// first, wants a server; then that claim goes away from a Retain server.
pub fn lost_ref_and_release() -> Scenario {
    Scenario {
        name: "lost-ref-and-release",
        servers: vec![
            server("s1")
                .bound_to("b", "uid-b")
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
        user_ops: vec![UserOp::ClearServerRef("s1"), UserOp::DeleteClaim("a")],
        crashes: 1,
        faults: 0,
    }
}

// ---------------------------------------------------------------------------------------
// Tests

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

/// A server controller without the winner rule's priorities: it hands a server to the
/// alphabetically first claim naming it, bound or not.
fn without_winner_priority(
    server: &Server,
    claims: &dyn ClaimView,
    liveness: Liveness,
) -> ServerDecision {
    match decide_server(server, claims, liveness) {
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
    claim: &ServerClaim,
    servers: &dyn ServerView,
    skip: &dyn Fn(&str) -> bool,
    liveness: Liveness,
) -> ClaimDecision {
    match decide_claim(claim, servers, skip, liveness) {
        ClaimDecision::WithdrawTakenServer { server, .. } => {
            ClaimDecision::WaitForServer { server }
        }
        other => other,
    }
}

#[test]
fn the_model_check_catches_a_winner_rule_without_priorities() {
    let mutant = Protocol {
        server: without_winner_priority,
        ..Protocol::real()
    };
    let report = explore(&lost_ref_and_release(), mutant);
    let violation = report.violation.expect("the mutant breaks an invariant");
    println!(
        "winner-rule mutant, after {} states: {violation}",
        report.states
    );
    assert!(violation.contains("invariant 1"), "{violation}");
}

#[test]
fn the_model_check_catches_a_claim_that_never_withdraws() {
    let mutant = Protocol {
        claim: without_withdraw,
        ..Protocol::real()
    };
    let report = explore(&contention(), mutant);
    let violation = report.violation.expect("the mutant breaks an invariant");
    println!(
        "withdraw mutant, after {} states: {violation}",
        report.states
    );
    assert!(violation.contains("invariant 2"), "{violation}");
}

#[test]
fn user_annotations_are_the_protocol_names() {
    // Guards the model's notion of "user-chosen" against a rename.
    assert!(is_controller_chosen(&claim("c").chose("s")));
    assert!(!is_controller_chosen(&claim("c").wants("s")));
    assert_eq!(ANNOTATION_PRE_BOUND, "metal.binder.dev/pre-bound");
}

/// For exploring budgets by hand: MODEL_EXPERIMENT=contention:CRASHES:FAULTS.
#[test]
#[ignore = "a tool for sizing the model check by hand"]
fn experiment() {
    let spec = std::env::var("MODEL_EXPERIMENT").unwrap_or_default();
    let parts: Vec<&str> = spec.split(':').collect();
    let mut scenario = match parts[0] {
        "recreate" => reservation_and_recreate(),
        "lost" => lost_ref_and_release(),
        _ => contention(),
    };
    scenario.crashes = parts.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    scenario.faults = parts.get(2).and_then(|p| p.parse().ok()).unwrap_or(0);
    assert_holds(scenario);
}
