//! The claim controller: reconciles one ServerClaim by asking the binding core what to do
//! ([`decide_claim`], [`plan_claim`]) and doing exactly that. It writes only claims.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::controller::Action;
use tracing::instrument;

use super::context::Context;
use super::error::{Error, Result, requeue_after};
use super::informer::CatalogsAndAssumed;
use super::metrics::ControllerKind;
use super::options::RESYNC;
use super::own_writes::OWN_WRITE_WAIT;
use super::writes::{Part, record, replace};
use crate::api::{Server, ServerClaim};
use crate::binding::coalesce::is_summary_refresh;
use crate::binding::step::real_claim_decider;
use crate::binding::{
    ClaimDecision, ClaimInputs, ClaimPlan, assumption_for, claim_key, claim_status_after,
    claim_step, meta,
};

const KIND: ControllerKind = ControllerKind::Claim;

#[instrument(name = "reconcile_claim", skip_all, fields(claim = %claim_key(&claim)))]
pub async fn reconcile(claim: Arc<ServerClaim>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let result = reconcile_claim(&claim, &ctx).await;
    ctx.metrics
        .reconciled(KIND, started.elapsed().as_secs_f64());
    result
}

#[instrument(name = "reconcile_claim", skip_all, fields(claim = %claim_key(&claim)))]
pub fn error_policy(claim: Arc<ServerClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    requeue_after(KIND, error, &ctx.metrics)
}

async fn reconcile_claim(claim: &ServerClaim, ctx: &Context) -> Result<Action> {
    // Claims carry no finalizer of ours: a claim being deleted needs nothing from us, and
    // its server is released once it is gone.
    if meta::is_deleting(claim) {
        return Ok(Action::await_change());
    }
    if ctx.caches.behind_own_write(claim) {
        // The watch is about to deliver this process's last write, and wake it again.
        return Ok(Action::requeue(OWN_WRITE_WAIT));
    }
    let (mut decision, mut plan) = decide(claim, ctx, None);
    if let Some(server) = plan.confirm_server.clone() {
        // The cache says the server is gone; the PV controller's rule: ask the API server
        // before declaring the claim Lost.
        let api = Api::<Server>::all(ctx.client.clone());
        let live = api.get_opt(&server).await.map_err(|source| Error::Api {
            verb: "get",
            resource: "servers",
            name: server.clone(),
            source,
        })?;
        (decision, plan) = decide(claim, ctx, Some((&server, live.as_ref())));
    }

    let key = claim_key(claim);
    if is_summary_refresh(claim, &plan)
        && let Some(wait) = ctx.summaries.delay(&key)
    {
        // At most one summary write per claim per interval (binding::coalesce).
        return Ok(Action::requeue(wait));
    }
    // `decide` already assumed the pick, under the lock it decided under.
    let picked = assumption_for(&decision).map(str::to_string);
    let written = execute(claim, &decision, &plan, ctx).await;
    if let Some(server) = &picked {
        match &written {
            Ok(latest) => {
                let version = latest
                    .as_ref()
                    .and_then(|c| c.metadata.resource_version.clone());
                ctx.caches.claim_write_landed(server, &key, version);
            }
            Err(_) => ctx.caches.claim_write_failed(server, &key),
        }
    }
    written?;
    let waits = matches!(
        decision,
        ClaimDecision::NoMatchingServer { .. } | ClaimDecision::WaitForTurn { .. }
    );
    if waits && plan.status.is_some() {
        ctx.summaries.wrote(&key);
    }
    // A claim that waits is looked at again once its summary may be rewritten, so the
    // summary follows the servers within about one interval.
    Ok(Action::requeue(if waits {
        ctx.summaries.interval()
    } else {
        RESYNC
    }))
}

/// One [`claim_step`] on the caches: with the cached servers, or with one server
/// replaced by what a live GET said. A pick is assumed before the assumed-choice lock
/// is released, so a reconcile running at once cannot pick the same server.
fn decide(
    claim: &ServerClaim,
    ctx: &Context,
    live: Option<(&str, Option<&Server>)>,
) -> (ClaimDecision, ClaimPlan) {
    let key = claim_key(claim);
    let CatalogsAndAssumed {
        servers,
        claims,
        mut assumed,
    } = ctx.caches.read_with_assumed();
    let inputs = ClaimInputs {
        decide: real_claim_decider,
        servers: &*servers,
        claims: &*claims,
        waiting: claims.waiting(),
        assumed: &assumed,
    };
    let (decision, plan) = claim_step(claim, &inputs, live, &Time(Timestamp::now()));
    if let Some(server) = assumption_for(&decision) {
        let based_on = claim.metadata.resource_version.clone();
        assumed.assume(server, key, based_on);
    }
    (decision, plan)
}

/// Writes the plan (object, then status), then records its event and counts its outcome.
/// Returns the claim as last written, if anything was.
async fn execute(
    claim: &ServerClaim,
    decision: &ClaimDecision,
    plan: &ClaimPlan,
    ctx: &Context,
) -> Result<Option<ServerClaim>> {
    let api = Api::<ServerClaim>::namespaced(ctx.client.clone(), meta::namespace(claim));
    let mut latest = None;
    if let Some(object) = &plan.object {
        latest = Some(replace(ctx, KIND, &api, object, Part::Object).await?);
    }
    if let Some(status) = &plan.status {
        let mut object = latest.clone().unwrap_or_else(|| claim.clone());
        object.status = Some(claim_status_after(status, claim, &object));
        latest = Some(replace(ctx, KIND, &api, &object, Part::Status).await?);
    }
    if let Some(event) = &plan.event {
        tracing::info!(
            server = decision.server().unwrap_or_default(),
            reason = event.reason,
            "{}",
            event.note
        );
        record(ctx, claim, event).await;
    }
    if let Some(outcome) = plan.outcome {
        ctx.metrics.outcome(KIND, outcome, bind_seconds(claim));
    }
    Ok(latest)
}

/// Seconds from the claim's creation until now, for `bind_duration_seconds`.
fn bind_seconds(claim: &ServerClaim) -> Option<f64> {
    let created = claim.metadata.creation_timestamp.as_ref()?.0;
    let elapsed = Timestamp::now().duration_since(created);
    Some(Duration::try_from(elapsed).ok()?.as_secs_f64())
}
