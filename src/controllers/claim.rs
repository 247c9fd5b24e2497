//! The claim controller: reconciles one ServerClaim by asking the binding core what to do
//! ([`decide_claim`], [`plan_claim`]) and doing exactly that. It writes only claims.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use kube::runtime::controller::Action;
use tracing::instrument;

use super::charges::{self, Next};
use super::context::Context;
use super::error::{Error, Result, api_message, requeue_after};
use super::informer::Current;
use super::metrics::ControllerKind;
use super::own_writes::OWN_WRITE_WAIT;
use super::writes::{Part, patch, record};
use crate::api::{CachedClaim, CachedServer, ServerDisruptionBudget, ServerQuota};
use crate::binding::world::quota::QUOTA_EXCEEDED;
use crate::binding::{
    ClaimDecision, ClaimStep, ClaimWork, ObjectWrite, claim_key, claim_status_after, find_bound,
    meta,
};

const KIND: ControllerKind = ControllerKind::Claim;

#[instrument(name = "reconcile_claim", skip_all, fields(claim = %claim_key(&claim)))]
pub async fn reconcile(claim: Arc<CachedClaim>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let result = reconcile_claim(&claim, &ctx).await;
    ctx.metrics
        .reconciled(KIND, started.elapsed().as_secs_f64());
    result
}

#[instrument(name = "reconcile_claim", skip_all, fields(claim = %claim_key(&claim)))]
pub fn error_policy(claim: Arc<CachedClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    requeue_after(KIND, error, &ctx.metrics)
}

async fn reconcile_claim(claim: &CachedClaim, ctx: &Context) -> Result<Action> {
    let latest = match ctx.informer.current(&ctx.informer.claim_store, claim) {
        Current::Latest(latest) => latest,
        Current::Gone => return Ok(Action::await_change()),
        Current::Behind => {
            // The watch is about to deliver this process's last write, and wake it again.
            tracing::debug!("the cache is behind this process's last write; waiting for it");
            return Ok(Action::requeue(OWN_WRITE_WAIT));
        }
    };
    let claim = &*latest;
    let mut step = decide(claim, ctx, None);
    if let ClaimStep::ReadServer(server) = &step {
        let api = Api::<CachedServer>::all(ctx.client.clone());
        let live = api.get_opt(server).await.map_err(|source| Error::Api {
            verb: "get",
            resource: "servers",
            name: server.clone(),
            source,
        })?;
        step = decide(claim, ctx, Some((server, live.as_ref())));
    }
    let version = claim.meta().resource_version.as_deref().unwrap_or_default();
    let work = match step {
        ClaimStep::Act(work) => work,
        ClaimStep::Wait { decision, after } => {
            tracing::debug!(
                version,
                decision = decision.name(),
                ?after,
                "decided; waits"
            );
            return Ok(Action::requeue(after));
        }
        ClaimStep::Idle | ClaimStep::ReadServer(_) => return Ok(Action::await_change()),
    };
    tracing::debug!(
        version,
        decision = work.decision.name(),
        picked = work.picked.as_deref(),
        charges = work.charges.len(),
        records = work.records.len(),
        "decided"
    );
    let before = match record_eviction(&work, ctx).await {
        Ok(()) => charge(&work, ctx).await,
        failed => failed,
    };
    if let Err(error) = before {
        // Nothing else is written: the pick ends as a conflicting write's would, and the
        // claim decides again on the quota or the budget as the watch brings it.
        ctx.informer
            .claim_object_written(&work, claim, ObjectWrite::Conflict);
        return Err(error);
    }
    if execute(claim, &work, ctx).await? == Carried::Refused {
        // Its next reconcile says so on the claim and starts the back-off.
        return Ok(Action::requeue(Duration::ZERO));
    }
    // Back when its timed decision says (a summary due, a back-off ending); otherwise a
    // change wakes it, and the resync (`super::resync`) does now and then.
    Ok(work.then.map_or_else(Action::await_change, Action::requeue))
}

/// One binder step on the caches: with the cached servers, or with one server replaced
/// by what a live GET said. A pick is assumed under the binder's lock, so a reconcile
/// running at once cannot pick the same server.
fn decide(
    claim: &CachedClaim,
    ctx: &Context,
    live: Option<(&str, Option<&CachedServer>)>,
) -> ClaimStep {
    ctx.informer.reconcile_claim(claim, live)
}

/// Charges the claim to its quotas before any other write (docs/binding.md, "Server
/// quotas"): each quota's status is written at the resourceVersion the charge was
/// computed on, so of two writers taking the last server of a class one gets a
/// conflict. This process's charges of one quota go one after another, each on the
/// version the one before wrote ([`super::charges`]).
async fn charge(work: &ClaimWork, ctx: &Context) -> Result<()> {
    for c in &work.charges {
        let slot = ctx.charges.slot(c);
        let mut last = slot.lock().await;
        let (base, charged) = match charges::next(c, last.as_ref()) {
            Next::Write { base, charged } => (base, charged),
            Next::Done => continue,
            Next::Full => {
                return Err(Error::Conflict {
                    resource: "serverquotas",
                    name: meta::name(&*c.read).to_string(),
                });
            }
        };
        let api = Api::<ServerQuota>::namespaced(ctx.client.clone(), meta::namespace(&*base));
        let written = patch(
            ctx,
            ControllerKind::Quota,
            &api,
            &*base,
            &charged,
            Part::Status,
        )
        .await;
        match written {
            Ok(w) => *last = Some(Arc::new(w.applied_to(&charged))),
            Err(error) => {
                *last = None;
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Records the claim's eviction on each budget covering it before the eviction is
/// written (docs/binding.md, "Disruption budgets"): each budget's status is written at
/// the resourceVersion the decision read, so of two writers taking a budget's last
/// disruption (two processes during a leader hand-over) one gets a conflict.
async fn record_eviction(work: &ClaimWork, ctx: &Context) -> Result<()> {
    for r in &work.records {
        let namespace = meta::namespace(&*r.read);
        let api = Api::<ServerDisruptionBudget>::namespaced(ctx.client.clone(), namespace);
        patch(
            ctx,
            ControllerKind::Budget,
            &api,
            &*r.read,
            &r.recorded,
            Part::Status,
        )
        .await?;
    }
    Ok(())
}

/// How a plan was carried out, when it did not fail.
#[derive(PartialEq, Eq)]
enum Carried {
    Done,
    /// The object write was refused and the claim backs off.
    Refused,
}

/// Writes the plan (object, then status), each write a patch from the claim as read
/// (the status write: as the object write left it) and its result reported to the
/// binder, then records its event and counts its outcome.
async fn execute(claim: &CachedClaim, work: &ClaimWork, ctx: &Context) -> Result<Carried> {
    let plan = &work.plan;
    let api = Api::<CachedClaim>::namespaced(ctx.client.clone(), meta::namespace(claim));
    let mut latest = None;
    if let Some(object) = &plan.object {
        let written = patch(ctx, KIND, &api, claim, object, Part::Object).await;
        let written = written.map(|w| w.applied_to(object));
        if report_object_write(claim, work, &written, ctx) {
            return Ok(Carried::Refused);
        }
        latest = Some(written?);
    }
    if let Some(status) = &plan.status {
        let read = latest.unwrap_or_else(|| claim.clone());
        let mut object = read.clone();
        object.status = Some(claim_status_after(status, claim, &read));
        patch(ctx, KIND, &api, &read, &object, Part::Status).await?;
        ctx.informer.claim_status_written(work);
        count_quota_refusal(claim, work, ctx);
    }
    if let Some(event) = &plan.event {
        tracing::info!(
            server = work.decision.server().unwrap_or_default(),
            reason = event.reason,
            "{}",
            event.note
        );
        record(ctx, claim, event).await;
        ctx.metrics.eviction_event(event.reason);
    }
    if let Some(outcome) = plan.outcome {
        ctx.metrics.outcome(KIND, outcome, work.since_created);
    }
    Ok(Carried::Done)
}

/// Counts a claim a full quota turned away, once per time it goes `QuotaExceeded`.
fn count_quota_refusal(claim: &CachedClaim, work: &ClaimWork, ctx: &Context) {
    let (ClaimDecision::QuotaExceeded { full } | ClaimDecision::RestoreAwaitingQuota { full, .. }) =
        &work.decision
    else {
        return;
    };
    let conditions = claim.status.as_ref().map(|s| s.conditions.as_slice());
    let before = conditions.and_then(find_bound).map(|c| c.reason.as_str());
    if before != Some(QUOTA_EXCEEDED) {
        let binder = ctx.informer.read();
        ctx.metrics
            .quota_refused(binder.world().classes(), &full.class);
    }
}

/// Tells the binder how the object write ended; true if it was refused and the claim
/// backs off (docs/binding.md, "Refused writes"): counted, logged, and said on the claim
/// by its next reconcile.
fn report_object_write(
    claim: &CachedClaim,
    work: &ClaimWork,
    written: &Result<CachedClaim>,
    ctx: &Context,
) -> bool {
    let refusal;
    let mut backs_off = false;
    let outcome = match written {
        Ok(latest) => ObjectWrite::Written(latest),
        Err(Error::Conflict { .. }) => ObjectWrite::Conflict,
        Err(Error::Api { source, .. }) => {
            refusal = api_message(source);
            backs_off = work.decision.backs_off_when_refused();
            if backs_off {
                ctx.metrics.write_refused(work.decision.name());
                tracing::warn!(write = work.decision.name(), message = %refusal, "claim write refused; backing off");
            }
            ObjectWrite::Refused(&refusal)
        }
    };
    ctx.informer.claim_object_written(work, claim, outcome);
    backs_off
}
