//! The loop the status recounts share (the quotas', [`super::quota`], and the disruption
//! budgets', [`super::budget_status`]): a round of writes when rung and once per
//! interval, and sooner again when a write of the round failed.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::error::Error;
use super::metrics::ControllerKind;
use super::options::{CONFLICT_RETRY, ERROR_RETRY};

/// Runs `round` when `wanted` rings and once per `every`, until `stop`; a round that
/// answers how soon to try again (a write that failed) runs again then, if sooner.
pub async fn run<F, Fut>(every: Duration, stop: CancellationToken, wanted: &Notify, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<Duration>>,
{
    loop {
        let next = every.min(round().await.unwrap_or(every));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wanted.notified() => {}
            _ = tokio::time::sleep(next) => {}
        }
    }
}

/// How soon to try a failed write of a round again: soon after a conflict (another
/// writer's record or charge landed meanwhile), after a while after an error, which is
/// counted; `again` keeps the longest wait of the round.
pub fn retry_after(
    ctx: &Context,
    kind: ControllerKind,
    error: &Error,
    again: Option<Duration>,
) -> Option<Duration> {
    let after = match error.metric_label() {
        None => CONFLICT_RETRY,
        Some(label) => {
            ctx.metrics.reconcile_error(kind, label);
            ERROR_RETRY
        }
    };
    Some(again.map_or(after, |a| a.max(after)))
}
