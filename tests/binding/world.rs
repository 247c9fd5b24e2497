//! An in-memory stand-in for the API server's storage, with the optimistic-lock semantics
//! the controllers rely on, and a synchronous driver that runs both controllers' real
//! decisions and plans until nothing changes. The PV-scenario tests use the driver; the
//! model check uses the storage with its own, adversarial scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Resource;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::now;

/// A write lost the optimistic lock (or found its object gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conflict;

/// The stored objects. Claims live in one namespace, keyed by name; so do quotas.
#[derive(Clone, Debug, Default)]
pub struct Truth {
    pub servers: BTreeMap<String, CachedServer>,
    pub claims: BTreeMap<String, CachedClaim>,
    pub quotas: BTreeMap<String, ServerQuota>,
    /// The classes, fixed for a run (nobody writes them).
    pub classes: Vec<ServerClass>,
    /// The disruption budgets (their specs fixed for a run; the claim controller
    /// records evictions in their status).
    pub budgets: BTreeMap<String, ServerDisruptionBudget>,
    // Visible to the model check, whose fingerprint destructures every field.
    pub(crate) next_rv: u64,
}

fn rv_of<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

impl Truth {
    pub fn new(servers: Vec<CachedServer>, claims: Vec<CachedClaim>) -> Self {
        let mut truth = Self::default();
        for s in servers {
            truth.put_server(s);
        }
        for c in claims {
            truth.put_claim(c);
        }
        truth
    }

    fn bump(&mut self) -> String {
        self.next_rv += 1;
        self.next_rv.to_string()
    }

    /// Stores a claim as a user would create or overwrite it (no precondition).
    pub fn put_claim(&mut self, mut claim: CachedClaim) {
        claim.meta_mut().resource_version = Some(self.bump());
        self.claims.insert(meta::name(&claim).to_string(), claim);
    }

    pub fn put_server(&mut self, mut server: CachedServer) {
        server.meta_mut().resource_version = Some(self.bump());
        self.servers.insert(meta::name(&server).to_string(), server);
    }

    /// Stores a quota as an admin would create it (no precondition).
    pub fn put_quota(&mut self, mut quota: ServerQuota) {
        quota.meta_mut().resource_version = Some(self.bump());
        self.quotas.insert(meta::name(&quota).to_string(), quota);
    }

    /// Stores a budget as a tenant would create it (no precondition).
    pub fn put_budget(&mut self, mut budget: ServerDisruptionBudget) {
        budget.meta_mut().resource_version = Some(self.bump());
        self.budgets.insert(meta::name(&budget).to_string(), budget);
    }

    /// Writes a budget's status as [`Truth::write_quota_status`] does a quota's.
    pub fn write_budget_status(
        &mut self,
        based_on: &ServerDisruptionBudget,
        precondition: bool,
    ) -> Result<(), Conflict> {
        let name = meta::name(based_on).to_string();
        let rv = self.bump();
        let stored = self.budgets.get_mut(&name).ok_or(Conflict)?;
        if precondition && rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        stored.status = based_on.status.clone();
        stored.meta_mut().resource_version = Some(rv);
        Ok(())
    }

    /// Writes a quota's status (the status subresource): with `based_on`'s
    /// resourceVersion as a precondition, or (`precondition` false) over whatever is
    /// stored, as a write without one would.
    pub fn write_quota_status(
        &mut self,
        based_on: &ServerQuota,
        precondition: bool,
    ) -> Result<ServerQuota, Conflict> {
        let name = meta::name(based_on).to_string();
        let rv = self.bump();
        let stored = self.quotas.get_mut(&name).ok_or(Conflict)?;
        if precondition && rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        stored.status = based_on.status.clone();
        stored.meta_mut().resource_version = Some(rv);
        Ok(stored.clone())
    }

    /// Replaces a claim's metadata and spec, keeping its stored status (like the API server
    /// for a CRD with the status subresource). `based_on` carries the precondition.
    pub fn write_claim(&mut self, based_on: &CachedClaim) -> Result<CachedClaim, Conflict> {
        let name = meta::name(based_on).to_string();
        let stored = self.claims.get(&name).ok_or(Conflict)?;
        if rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        let mut next = based_on.clone();
        next.status = stored.status.clone();
        if next.spec != stored.spec {
            next.meta_mut().generation = Some(stored.meta().generation.unwrap_or(0) + 1);
        }
        next.meta_mut().resource_version = Some(self.bump());
        self.claims.insert(name, next.clone());
        Ok(next)
    }

    pub fn write_claim_status(
        &mut self,
        based_on: &CachedClaim,
        status: &ServerClaimStatus,
    ) -> Result<CachedClaim, Conflict> {
        let name = meta::name(based_on).to_string();
        let rv = self.bump();
        let stored = self.claims.get_mut(&name).ok_or(Conflict)?;
        if rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        stored.status = Some(status.clone());
        stored.meta_mut().resource_version = Some(rv);
        Ok(stored.clone())
    }

    /// Like [`Truth::write_claim`] for servers; a deleting server whose last finalizer goes
    /// is removed, as the API server does.
    pub fn write_server(
        &mut self,
        based_on: &CachedServer,
    ) -> Result<Option<CachedServer>, Conflict> {
        let name = meta::name(based_on).to_string();
        let stored = self.servers.get(&name).ok_or(Conflict)?;
        if rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        let mut next = based_on.clone();
        next.status = stored.status.clone();
        if next.spec != stored.spec {
            next.meta_mut().generation = Some(stored.meta().generation.unwrap_or(0) + 1);
        }
        next.meta_mut().resource_version = Some(self.bump());
        let finalized = meta::is_deleting(&next)
            && next.meta().finalizers.as_ref().is_none_or(|f| f.is_empty());
        if finalized {
            self.servers.remove(&name);
            return Ok(None);
        }
        self.servers.insert(name, next.clone());
        Ok(Some(next))
    }

    pub fn write_server_status(
        &mut self,
        based_on: &CachedServer,
        status: &ServerStatus,
    ) -> Result<CachedServer, Conflict> {
        let name = meta::name(based_on).to_string();
        let rv = self.bump();
        let stored = self.servers.get_mut(&name).ok_or(Conflict)?;
        if rv_of(stored) != rv_of(based_on) {
            return Err(Conflict);
        }
        stored.status = Some(status.clone());
        stored.meta_mut().resource_version = Some(rv);
        Ok(stored.clone())
    }

    /// A user deletes a claim (claims carry no finalizer of ours).
    pub fn delete_claim(&mut self, name: &str) {
        self.claims.remove(name);
    }

    /// A user deletes a server: removed at once without finalizers, else marked deleting.
    pub fn delete_server(&mut self, name: &str) {
        let Some(stored) = self.servers.get(name) else {
            return;
        };
        if stored
            .meta()
            .finalizers
            .as_ref()
            .is_none_or(|f| f.is_empty())
        {
            self.servers.remove(name);
            return;
        }
        let mut next = stored.clone();
        next.meta_mut().deletion_timestamp = Some(now());
        self.put_server(next);
    }

    pub fn claim(&self, name: &str) -> &CachedClaim {
        self.claims
            .get(name)
            .unwrap_or_else(|| panic!("claim {name} exists"))
    }

    pub fn server(&self, name: &str) -> &CachedServer {
        self.servers
            .get(name)
            .unwrap_or_else(|| panic!("server {name} exists"))
    }
}

/// Carries out a claim plan against the storage: object, then status on the result.
pub fn apply_claim_plan(
    truth: &mut Truth,
    plan: &ClaimPlan,
    read: &CachedClaim,
) -> Result<(), Conflict> {
    let mut base = read.clone();
    if let Some(object) = &plan.object {
        base = truth.write_claim(object)?;
    }
    if let Some(status) = &plan.status {
        truth.write_claim_status(&base, &claim_status_after(status, read, &base))?;
    }
    Ok(())
}

pub fn apply_server_plan(
    truth: &mut Truth,
    plan: &ServerPlan,
    read: &CachedServer,
) -> Result<(), Conflict> {
    let mut base = read.clone();
    if let Some(object) = &plan.object {
        match truth.write_server(object)? {
            Some(written) => base = written,
            None => return Ok(()),
        }
    }
    if let Some(status) = &plan.status {
        truth.write_server_status(&base, &server_status_after(status, read, &base))?;
    }
    Ok(())
}

/// One recorded event: the object (`claim/NAME` or `server/NAME`) and the event.
pub type Recorded = (String, BindingEvent);

/// Runs both controllers with fresh views until a full round changes nothing.
/// Live confirmations read the storage itself. Returns the events recorded.
pub fn settle(truth: &mut Truth) -> Vec<Recorded> {
    let mut events = Vec::new();
    for _round in 0..50 {
        let mut changed = false;
        let names: BTreeSet<String> = truth.claims.keys().cloned().collect();
        for name in names {
            changed |= reconcile_claim(truth, &name, &mut events);
        }
        let names: BTreeSet<String> = truth.servers.keys().cloned().collect();
        for name in names {
            changed |= reconcile_server(truth, &name, &mut events);
        }
        if !changed {
            return events;
        }
    }
    panic!("the world did not settle in 50 rounds: {truth:#?}");
}

/// A binder that listed the stored objects: fresh views, no assumed choices, and
/// summaries written as soon as they change.
pub fn fresh_binder(truth: &Truth, rules: Rules) -> Binder {
    let config = BinderConfig {
        status_interval: Duration::ZERO,
        release_gates: Vec::new(),
    };
    let listing = Listing::of(
        truth.servers.values().cloned(),
        truth.claims.values().cloned(),
    );
    Binder::listed(rules, config, listing, now().0)
}

pub fn reconcile_claim(truth: &mut Truth, name: &str, events: &mut Vec<Recorded>) -> bool {
    let Some(claim) = truth.claims.get(name).cloned() else {
        return false;
    };
    let mut binder = fresh_binder(truth, Rules::real());
    let read = |server: &str| truth.servers.get(server).cloned();
    let step = |live: LiveServer<'_>| binder.claim_step(&claim, live, Sight::All, now().0);
    let step = claim_step_reading(step, read);
    binder.start(&claim, &step);
    let ClaimStep::Act(work) = step else {
        return false;
    };
    if work.plan.is_noop() {
        return false;
    }
    apply_claim_plan(truth, &work.plan, &claim).expect("fresh views never conflict");
    if let Some(e) = work.plan.event {
        events.push((format!("claim/{name}"), e));
    }
    true
}

pub fn reconcile_server(truth: &mut Truth, name: &str, events: &mut Vec<Recorded>) -> bool {
    let claim_side = fresh_binder(truth, Rules::real());
    reconcile_server_beside(truth, name, events, &claim_side)
}

/// [`reconcile_server`] in a process whose claim controller runs `claim_side` (its
/// picks in flight count as picks).
pub fn reconcile_server_beside(
    truth: &mut Truth,
    name: &str,
    events: &mut Vec<Recorded>,
    claim_side: &Binder,
) -> bool {
    let Some(server) = truth.servers.get(name).cloned() else {
        return false;
    };
    let binder = fresh_binder(truth, Rules::real());
    let read = |r: &ServerClaimRef| truth.claims.get(&r.name).cloned();
    let step = |live: LiveClaim<'_>| binder.server_step(Some(claim_side), &server, live, now().0);
    let step = server_step_reading(step, read);
    let ServerStep::Act(work) = step else {
        unreachable!("a step after a live read asks no more")
    };
    if work.plan.is_noop() {
        return false;
    }
    apply_server_plan(truth, &work.plan, &server).expect("fresh views never conflict");
    if let Some(e) = work.plan.event {
        events.push((format!("server/{name}"), e));
    }
    true
}
