//! The quotas' recount (docs/binding.md, "Server quotas"): each quota's status rebuilt
//! from scratch ([`crate::binding::world::quota::recount`]): a charge is dropped only once a read of its claim says
//! it is gone (not found, or another uid under its name), and every claim holding a
//! server of a class the quota limits is counted. Runs when the watch sees a claim go,
//! and once per `--status-interval`; each write carries the quota's resourceVersion, so
//! it never undoes a charge the claim controller made meanwhile.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::api::{CachedClaim, ServerQuota};
use crate::binding::meta;
use crate::binding::world::quota::Recount;

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

/// Recounts every quota; how soon to try again if one could not be written.
async fn recount_all(ctx: &Context) -> Option<Duration> {
    let seen: Vec<Recount> = ctx.informer.read().world().recounts();
    let mut again: Option<Duration> = None;
    for quota in seen {
        if let Err(error) = recount_one(ctx, quota).await {
            tracing::debug!(%error, "quota not recounted; trying again");
            again = rounds::retry_after(ctx, ControllerKind::Quota, &error, again);
        }
    }
    again
}

/// Reads each charge's claim the cache does not show, then writes the recount if it
/// changed anything. A read that fails leaves the quota for the next round.
async fn recount_one(ctx: &Context, seen: Recount) -> Result<()> {
    let namespace = meta::namespace(&seen.quota).to_string();
    let claims = Api::<CachedClaim>::namespaced(ctx.client.clone(), &namespace);
    let mut gone = HashSet::new();
    for charge in &seen.unread {
        let live = claims
            .get_opt(&charge.claim)
            .await
            .map_err(|source| Error::Api {
                verb: "get",
                resource: "serverclaims",
                name: charge.claim.clone(),
                source,
            })?;
        if live.is_none_or(|c| meta::uid(&c) != Some(charge.uid.as_str())) {
            gone.insert(charge.uid.clone());
        }
    }
    let Some(recounted) = seen.recounted(&gone) else {
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
