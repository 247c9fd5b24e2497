//! The server controller: reconciles one Server by asking the binding core what to do
//! ([`decide_server`], [`plan_server`]) and doing exactly that. It writes only servers.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::controller::Action;
use tracing::instrument;

use crate::api::{CachedClaim, CachedServer, ServerClaimRef};
use crate::binding::{ClaimKey, ServerStep, ServerWork, claim_of, meta, server_status_after};

use super::context::Context;
use super::error::{Error, Result, requeue_after};
use super::informer::Current;
use super::metrics::ControllerKind;
use super::own_writes::OWN_WRITE_WAIT;
use super::writes::{Part, patch, record};

const KIND: ControllerKind = ControllerKind::Server;

#[instrument(name = "reconcile_server", skip_all, fields(server = meta::name(&*server)))]
pub async fn reconcile(server: Arc<CachedServer>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let result = reconcile_server(&server, &ctx).await;
    ctx.metrics
        .reconciled(KIND, started.elapsed().as_secs_f64());
    result
}

#[instrument(name = "reconcile_server", skip_all, fields(server = meta::name(&*server)))]
pub fn error_policy(server: Arc<CachedServer>, error: &Error, ctx: Arc<Context>) -> Action {
    requeue_after(KIND, error, &ctx.metrics)
}

async fn reconcile_server(server: &CachedServer, ctx: &Context) -> Result<Action> {
    let latest = match ctx.informer.current(&ctx.informer.server_store, server) {
        Current::Latest(latest) => latest,
        Current::Gone => return Ok(Action::await_change()),
        Current::Behind => {
            // The watch is about to deliver this process's last write, and wake it again.
            tracing::debug!("the cache is behind this process's last write; waiting for it");
            return Ok(Action::requeue(OWN_WRITE_WAIT));
        }
    };
    let server = &*latest;
    let mut step = decide(server, ctx, None);
    if let ServerStep::ReadClaim(claim) = &step {
        let api = Api::<CachedClaim>::namespaced(ctx.client.clone(), &claim.namespace);
        let live = api
            .get_opt(&claim.name)
            .await
            .map_err(|source| Error::Api {
                verb: "get",
                resource: "serverclaims",
                name: ClaimKey::of_ref(claim).to_string(),
                source,
            })?;
        step = decide(server, ctx, Some((claim, live.as_ref())));
    }
    let ServerStep::Act(work) = step else {
        return Ok(Action::await_change());
    };
    let version = server
        .meta()
        .resource_version
        .as_deref()
        .unwrap_or_default();
    tracing::debug!(version, decision = work.decision.name(), "decided");
    execute(server, &work, ctx).await?;
    // Nothing to come back for: a change wakes it, and the resync (`super::resync`) does
    // now and then.
    Ok(Action::await_change())
}

/// One binder step on the claim cache, or with one claim replaced by what a live GET
/// said.
fn decide(
    server: &CachedServer,
    ctx: &Context,
    live: Option<(&ServerClaimRef, Option<&CachedClaim>)>,
) -> ServerStep {
    ctx.informer
        .read()
        .server_step(None, server, live, Timestamp::now())
}

/// Writes the plan (object, then status), each write a patch from the server as read
/// (the status write: as the object write left it), then records its event and counts
/// its outcome.
async fn execute(server: &CachedServer, work: &ServerWork, ctx: &Context) -> Result<()> {
    let plan = &work.plan;
    let api = Api::<CachedServer>::all(ctx.client.clone());
    let mut latest = None;
    if let Some(object) = &plan.object {
        let written = patch(ctx, KIND, &api, server, object, Part::Object).await;
        let written = report_refusal(server, written, ctx)?;
        latest = Some(written.applied_to(object));
    }
    if let Some(status) = &plan.status {
        let read = latest.unwrap_or_else(|| server.clone());
        let mut object = read.clone();
        object.status = Some(server_status_after(status, server, &read));
        let written = patch(ctx, KIND, &api, &read, &object, Part::Status).await;
        report_refusal(&read, written, ctx)?;
    }
    if let Some(event) = &plan.event {
        let claim = claim_of(server, &work.decision).map(|r| ClaimKey::of_ref(r).to_string());
        tracing::info!(
            claim = claim.unwrap_or_default(),
            reason = event.reason,
            "{}",
            event.note
        );
        record(ctx, server, event).await;
    }
    if let Some(outcome) = plan.outcome {
        ctx.metrics.outcome(KIND, outcome, None);
    }
    if let Some(took) = work.cleaning_took {
        ctx.metrics.cleaned(took.as_secs_f64());
    }
    Ok(())
}

/// Tells the binder of a write made from `server` that the API server refused for what
/// the server is (docs/binding.md, "Refused writes"): picks pass it over and the claims
/// naming it say so, until it changes.
fn report_refusal<T>(server: &CachedServer, written: Result<T>, ctx: &Context) -> Result<T> {
    if let Err(error) = &written
        && let Some(message) = error.refusal()
    {
        tracing::warn!(%message, "server write refused; claims naming it are told");
        ctx.informer.server_write_refused(server, &message);
    }
    written
}
