//! The quotas' recount (docs/binding.md, "Server quotas"): each quota's status rebuilt
//! from scratch ([`crate::binding::world::quota::recount`]) from a live list of its
//! namespace's claims, read after the quota: a charge is dropped only once that list
//! shows its claim gone (not there, or another uid under its name), and `used` counts
//! every claim it shows holding its bind. Runs when the watch sees a claim go, and once
//! per `--status-interval`; each write carries the quota's resourceVersion, so it never
//! undoes a charge the claim controller made meanwhile.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::api::ListParams;
use tokio_util::sync::CancellationToken;

use crate::api::{CachedClaim, ServerQuota};
use crate::binding::meta;
use crate::binding::world::quota::{self, LiveClaims, Recount};

use super::context::Context;
use super::error::{Error, Result};
use super::metrics::ControllerKind;
use super::rounds;
use super::writes::{Part, patch};

/// Recounts every quota when a claim goes and once per `every`, until `stop`; a round
/// that could not write a quota is tried again soon (after a conflict with a charge
/// made meanwhile) or after a while (a failed read or write), so a gone claim's place
/// is not held for a whole interval.
pub async fn run(ctx: Arc<Context>, every: Duration, stop: CancellationToken) {
    let wanted = &ctx.informer.recount_wanted;
    rounds::run(every, stop, wanted, || recount_all(&ctx)).await;
}

/// Recounts every quota; how soon to try again if one could not be written. Each
/// namespace's claims are listed once a round, whatever number of quotas it has.
async fn recount_all(ctx: &Context) -> Option<Duration> {
    let seen: Vec<Recount> = ctx.informer.read().world().recounts();
    let mut again: Option<Duration> = None;
    let mut listed: HashMap<String, LiveClaims> = HashMap::new();
    for quota in seen {
        if let Err(error) = recount_one(ctx, quota, &mut listed).await {
            tracing::debug!(%error, "quota not recounted; trying again");
            again = rounds::retry_after(ctx, ControllerKind::Quota, &error, again);
        }
    }
    again
}

/// Lists the quota's namespace's claims live (a quorum read, so it shows every bind
/// the quota's version counts; once a round, kept in `listed`), then writes the recount
/// if it changed anything. A list that fails leaves the quota for the next round.
async fn recount_one(
    ctx: &Context,
    seen: Recount,
    listed: &mut HashMap<String, LiveClaims>,
) -> Result<()> {
    let namespace = meta::namespace(&seen.quota).to_string();
    if !listed.contains_key(&namespace) {
        let live = list_claims(ctx, &namespace).await?;
        listed.insert(namespace.clone(), live);
    }
    let Some(recounted) = seen.recounted(&listed[&namespace]) else {
        return Ok(());
    };
    let api = Api::<ServerQuota>::namespaced(ctx.client.clone(), &namespace);
    patch(
        ctx,
        ControllerKind::Quota,
        &api,
        &seen.quota,
        &recounted,
        Part::Status,
    )
    .await?;
    Ok(())
}

async fn list_claims(ctx: &Context, namespace: &str) -> Result<LiveClaims> {
    let claims = Api::<CachedClaim>::namespaced(ctx.client.clone(), namespace);
    let listed = claims
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Api {
            verb: "list",
            resource: "serverclaims",
            name: namespace.to_string(),
            source,
        })?;
    Ok(quota::live_claims(&listed.items))
}
