//! The disruption budgets' status (docs/binding.md, "Disruption budgets"): each budget's
//! counts made anew from the claim cache ([`crate::binding::world::budgets::recount`]),
//! as a PodDisruptionBudget's are, and its records of evictions let go ahead kept until
//! a read of the claim says the record may go (gone, or moved on without being evicted).
//! Runs when a claim of a namespace with budgets changes, when a budget changes, and once
//! per `--status-interval`; each write carries the budget's resourceVersion, so it never
//! undoes a record the claim controller made meanwhile.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::api::{CachedClaim, ServerDisruptionBudget};
use crate::binding::meta;
use crate::binding::world::budgets::{BudgetRecount, record_ends};

use super::context::Context;
use super::error::{Error, Result};
use super::metrics::ControllerKind;
use super::rounds;
use super::writes::{Part, patch};

/// Recounts every budget when rung and once per `every`, until `stop`; a round that
/// could not write a budget is tried again soon.
pub async fn run(ctx: Arc<Context>, every: Duration, stop: CancellationToken) {
    let wanted = &ctx.informer.budget_recount_wanted;
    rounds::run(every, stop, wanted, || recount_all(&ctx)).await;
}

/// Recounts every budget; how soon to try again if one could not be written.
async fn recount_all(ctx: &Context) -> Option<Duration> {
    let seen: Vec<BudgetRecount> = ctx.informer.read().world().budget_recounts();
    let mut again: Option<Duration> = None;
    for budget in seen {
        if let Err(error) = recount_one(ctx, budget).await {
            tracing::debug!(%error, "disruption budget not recounted; trying again");
            again = rounds::retry_after(ctx, ControllerKind::Budget, &error, again);
        }
    }
    again
}

/// Reads each record's claim the cache does not show as recorded, then writes the
/// recount if it changed anything. A read that fails leaves the budget for the next round.
async fn recount_one(ctx: &Context, seen: BudgetRecount) -> Result<()> {
    let namespace = meta::namespace(&seen.budget).to_string();
    let claims = Api::<CachedClaim>::namespaced(ctx.client.clone(), &namespace);
    let mut ended = HashSet::new();
    for record in &seen.unread {
        let live = claims
            .get_opt(&record.claim)
            .await
            .map_err(|source| Error::Api {
                verb: "get",
                resource: "serverclaims",
                name: record.claim.clone(),
                source,
            })?;
        if record_ends(record, live.as_ref()) {
            ended.insert(record.uid.clone());
        }
    }
    let Some(recounted) = seen.recounted(&ended) else {
        return Ok(());
    };
    let api = Api::<ServerDisruptionBudget>::namespaced(ctx.client.clone(), &namespace);
    patch(
        ctx,
        ControllerKind::Budget,
        &api,
        &seen.budget,
        &recounted,
        Part::Status,
    )
    .await?;
    Ok(())
}
