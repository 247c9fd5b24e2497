//! The binder: the one state machine every driver runs. The controllers, the test world,
//! the model check and `explain` all feed it and do what it returns.
//!
//! It holds, as pure data, what a controller process knows: the [`World`] (the catalogs,
//! fed by the watches), the [`ClaimSide`] (the assumed choices, the back-offs, the
//! summaries' clock) and the picks in flight counted for placement. Time is passed in;
//! nothing here reads a clock or does I/O, and no rule lives here: the steps are
//! `binding::steps`, the wake-ups `binding::wakeups`. Its interface (docs/binding.md,
//! "Carrying out a decision", "Wake-up rules", "The assumed-choice cache"):
//!
//! - [`Feed`]: one kind's watched change, deletion or relist → who to wake;
//! - [`Settles`]: of those, whom the delivery of a controller's own write need not wake;
//! - [`Binder::claim_step`] and [`Binder::start`], [`Binder::server_step`]: one object →
//!   a live read to make first, or the writes to do and when to look again;
//! - [`Binder::claim_object_written`], [`Binder::claim_status_written`],
//!   [`Binder::server_write_refused`]: how a write ended → who to wake.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::api::{CachedClaim, CachedServer};

use super::claim_side::ClaimSide;
use super::claim_side::assumed::claim_key;
use super::protocol::claim_decision::ClaimInputs;
use super::steps::{
    self, BinderConfig, ClaimStep, ClaimWork, FirstNamed, LiveClaim, LiveServer, ObjectWrite,
    Rules, ServerStep, Sight, StepInputs,
};
use super::world::view::{ClaimView, ServerView};
use super::world::{Listing, Resolved, World};
use crate::binding::meta::{self, ClaimKey};
use crate::binding::placement::first_waiting_for;
use crate::binding::placement::in_flight::InFlight;
use crate::binding::placement::index::is_free;
use crate::binding::wakeups::{Wake, on_relist};

mod feed;
mod settle;

/// How the watches feed one kind to a binder, as kubert feeds an index: an object
/// applied, deleted (its last state), or the kind listed anew → who to wake.
pub trait Feed<K> {
    fn apply(&mut self, obj: Arc<K>) -> Wake;
    fn delete(&mut self, last: Arc<K>) -> Wake;
    fn relist(&mut self, all: Vec<Arc<K>>) -> Wake;
}

/// Which of the objects a watch event wakes need no reconcile because the event delivers
/// the controllers' own write, at the version written, and the object's step there
/// changes nothing ([`ClaimStep::changes_nothing`]). Taking that step at once is what a
/// reconcile queued at once would do (the model check reconciles such an object at once
/// too), and a later change that alters the step wakes the object by the rules
/// (docs/binding.md, "Wake-up rules").
pub trait Settles<K> {
    /// Leaves out of `wake` the objects that `written`, this process's own write as the
    /// watch delivered it, woke for nothing at `now`. By default none: a quota's or a
    /// budget's status wakes as the rules say.
    fn settle_own_write(&self, _written: &K, _wake: &mut Wake, _now: Timestamp) {}

    /// Leaves the object itself out of `wake` when the watch delivered a version of it
    /// that a later write of this process supersedes (written, or in flight): that
    /// write's delivery will wake it or settle it as above, or its failure sends its
    /// reconcile again. (A reconcile now would only wait for it.) The others it woke
    /// are settled as above.
    fn await_own_write(&self, _behind: &K, _wake: &mut Wake, _now: Timestamp) {}
}

/// The binder. See the module docs.
#[derive(Clone, Debug)]
pub struct Binder {
    rules: Rules,
    config: BinderConfig,
    world: World,
    claim_side: ClaimSide,
    /// The assumptions counted per class and shape for placement ([`InFlight`]): synced
    /// wherever the assumptions, the servers or the claims change.
    in_flight: InFlight,
}

impl Binder {
    /// A binder that has seen nothing yet, started at `now`.
    pub fn new(rules: Rules, config: BinderConfig, now: Timestamp) -> Self {
        Self::listed(rules, config, Listing::default(), now)
    }

    /// A binder that listed these objects (a start, or `explain`'s one look).
    pub fn listed(rules: Rules, config: BinderConfig, listing: Listing, now: Timestamp) -> Self {
        let claim_side = ClaimSide::new(config.status_interval, now);
        let world = World::listed(listing, rules.quota_counted);
        let mut binder = Self {
            rules,
            config,
            world,
            claim_side,
            in_flight: InFlight::default(),
        };
        binder.recount_in_flight();
        binder
    }

    pub fn world(&self) -> &World {
        &self.world
    }

    pub fn claim_side(&self) -> &ClaimSide {
        &self.claim_side
    }

    /// The step for `claim` ([`steps::claim_step`]); [`Binder::start`] starts it.
    pub fn claim_step(
        &self,
        claim: &CachedClaim,
        live: LiveServer<'_>,
        sight: Sight,
        now: Timestamp,
    ) -> ClaimStep {
        steps::claim_step(&self.inputs(self), claim, live, sight, now)
    }

    /// Starts carrying out a step planned for `claim`: a step that picks a server starts
    /// its assumption (docs/binding.md, "The assumed-choice cache"), decided on the
    /// claim at its current resourceVersion. The binder's lock, held by the caller from
    /// the step to here, keeps a step taken at once from picking the same server.
    pub fn start(&mut self, claim: &CachedClaim, step: &ClaimStep) {
        if let ClaimStep::Act(work) = step
            && work.decision.ends_a_bind_by_eviction()
        {
            // Counted as without a server in its budgets until the watch shows it.
            self.claim_side.evicting.assume(claim);
        }
        if let ClaimStep::Act(work) = step
            && let Some(server) = &work.picked
        {
            let based_on = claim.meta().resource_version.clone();
            let assumed = &mut self.claim_side.assumed;
            assumed.assume(server, work.key.clone(), based_on);
            self.sync_in_flight(&[server], &[&work.key]);
        }
    }

    /// The step for `server` ([`steps::server_step`]), in a process whose claim
    /// controller runs `beside` (`None`: this binder, as in the binary).
    pub fn server_step(
        &self,
        beside: Option<&Binder>,
        server: &CachedServer,
        live: LiveClaim<'_>,
        now: Timestamp,
    ) -> ServerStep {
        steps::server_step(&self.inputs(beside.unwrap_or(self)), server, live, now)
    }

    /// Whether the fair order lets `claim`, which names `server`, take it now, as this
    /// binder sees the claims and its picks in flight ([`steps::has_turn`]).
    pub fn has_turn(&self, claim: &CachedClaim, server: &str, now: Timestamp) -> bool {
        steps::has_turn(
            &self.inputs(self),
            claim,
            server,
            now,
            &FirstNamed::default(),
        )
    }

    /// What a decision for `claim` weighs at `now`, as this binder sees the world
    /// ([`steps::with_claim_inputs`]): `f` is called with the claim as its class makes it
    /// and those inputs, for a driver that shows what the decision weighed (`explain`).
    pub fn with_claim_inputs<R>(
        &self,
        claim: &CachedClaim,
        now: Timestamp,
        f: impl FnOnce(&CachedClaim, &ClaimInputs<'_>) -> R,
    ) -> R {
        let inputs = self.inputs(self);
        let (claim, class, quota) = steps::as_its_class_makes_it(&self.world, claim);
        let checks = (&class, &quota);
        steps::with_claim_inputs(&inputs, &claim, checks, Sight::All, now, |claim_inputs| {
            f(&claim, claim_inputs)
        })
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
            self.claim_side.refused.refused(claim, write, message, now);
        }
        let Some(server) = &work.picked else {
            return Wake::default();
        };
        let assumed = &mut self.claim_side.assumed;
        match written {
            ObjectWrite::Written(latest) => {
                let version = latest.meta().resource_version.clone();
                assumed.written(server, &work.key, version);
                Wake::default()
            }
            ObjectWrite::Conflict | ObjectWrite::Refused(_) => {
                let ended = assumed.write_failed(server, &work.key);
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
            self.claim_side.summaries.wrote(&work.key, now);
        }
    }

    /// The server controller's write made from `server` was refused with `message`:
    /// picks pass the server over, and the claims naming it are told, until it changes.
    pub fn server_write_refused(
        &mut self,
        server: &CachedServer,
        message: &str,
        now: Timestamp,
    ) -> Wake {
        self.claim_side.refusing.refused(server, message, now);
        self.server_refusal_changed(meta::name(server))
    }

    /// Ends the claim's back-off at `now` (a driver that moves time in steps of its own:
    /// the model check).
    pub fn end_backoff(&mut self, key: &ClaimKey, now: Timestamp) {
        self.claim_side.refused.expire(key, now);
    }

    /// What a step reads, with the claim side of `claim_side`'s binder: its picks in
    /// flight count only where it is this binder (they count this world's servers).
    fn inputs<'a>(&'a self, claim_side: &'a Binder) -> StepInputs<'a> {
        let own = std::ptr::eq(claim_side, self);
        StepInputs {
            rules: &self.rules,
            config: &self.config,
            world: &self.world,
            claim_side: &claim_side.claim_side,
            in_flight: own.then_some(&self.in_flight),
        }
    }

    /// What a server's refusal starting or ending wakes: the claims naming it, and the
    /// waiting claims, whose picks and summaries count it.
    fn server_refusal_changed(&self, name: &str) -> Wake {
        let mut wake = Wake::default();
        let (servers, claims) = (self.world.servers(), self.world.claims());
        wake.claims
            .extend(claims.claims_naming(name).into_iter().map(claim_key));
        if let Some(server) = servers.server(name).filter(|s| is_free(s)) {
            let per_shape = servers.free_index().len() + self.claim_side.assumed.len() + 1;
            let first = first_waiting_for(server, per_shape, claims.waiting());
            wake.claims.extend(first);
        }
        wake
    }

    /// Counts again the picks in flight of these servers and claims ([`InFlight`]).
    fn sync_in_flight(&mut self, servers: &[&str], claims: &[&ClaimKey]) {
        let (index, waiting) = (
            self.world.servers().free_index(),
            self.world.claims().waiting(),
        );
        let shape_of = |k: &ClaimKey| waiting.shared_shape_of(k);
        let (servers, claims) = (servers.iter().copied(), claims.iter().copied());
        let assumed = &self.claim_side.assumed;
        self.in_flight
            .sync(servers, claims, assumed, index, &shape_of);
    }

    fn recount_in_flight(&mut self) {
        let (index, waiting) = (
            self.world.servers().free_index(),
            self.world.claims().waiting(),
        );
        let shape_of = |k: &ClaimKey| waiting.shared_shape_of(k);
        self.in_flight
            .recount(&self.claim_side.assumed, index, &shape_of);
    }

    fn assumption_ended(&self, server: &str) -> Wake {
        let (servers, claims) = (self.world.servers(), self.world.claims());
        (self.rules.triggers.assumption_ended)(server, servers, claims)
    }

    /// After the classes, the namespaces or the quotas sent every object through again:
    /// the picks in flight are counted again, and a change wakes as a relist does.
    fn resolved(&mut self, resolved: Resolved) -> Wake {
        if resolved == Resolved::Not {
            return Wake::default();
        }
        self.recount_in_flight();
        match resolved {
            Resolved::Changed => on_relist(self.world.servers(), self.world.claims()),
            _ => Wake::default(),
        }
    }
}
