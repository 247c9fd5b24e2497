//! The controllers: the I/O shell around the binding core.
//!
//! Two kube-runtime `Controller`s in one process, the claim controller ([`claim`]) and
//! the server controller ([`server`]), share one watch per kind ([`informer`]). Each
//! reconcile asks the binding core what to do and does exactly that, writing only its
//! own kind, each write with the resourceVersion it read as a precondition.

mod budget_status;
mod charges;
pub mod claim;
pub mod class_status;
pub mod context;
pub mod error;
pub mod events;
pub mod informer;
mod merge_patch;
pub mod metrics;
pub mod options;
pub mod own_writes;
pub mod quota;
mod resync;
mod rounds;
pub mod server;
mod writes;

use std::sync::Arc;

use futures::channel::mpsc;
use futures::{StreamExt, stream};
use kube::runtime::Controller;
use kube::runtime::controller::{self, Config};
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::{CachedClaim, CachedServer};

pub use context::Context;
pub use error::Error;
pub use informer::{CacheWriters, SharedInformer};
pub use metrics::Metrics;
pub use options::{CONFLICT_RETRY, ERROR_RETRY, Options, RESYNC, STATUS_INTERVAL};

/// Runs the shared watches for as long as this future runs, and both controllers while
/// `leading` is true, until `shutdown` is cancelled. On shutdown, reconciles in flight
/// finish before this returns. Nothing is spawned: dropping the future (a crash, in
/// tests) stops everything at once.
pub async fn run(
    ctx: Arc<Context>,
    writers: CacheWriters,
    options: Options,
    mut leading: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let informers = ctx.informer.clone().run(ctx.client.clone(), writers);
    let sessions = async {
        loop {
            // A standby keeps its caches warm and waits to lead.
            let leads = async { leading.wait_for(|l| *l).await.is_ok() };
            let leads = tokio::select! {
                _ = shutdown.cancelled() => false,
                leads = leads => leads,
            };
            if !leads {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ctx.informer.wait_until_ready() => {}
            }
            run_controllers(&ctx, &options, leading.clone(), shutdown.child_token()).await;
            // Nobody left to say this process leads (its elector or holder is gone): its
            // last word stays `true`, and leading again at once would start and stop
            // the controllers in a busy loop.
            if shutdown.is_cancelled() || leading.has_changed().is_err() {
                break;
            }
        }
    };
    tokio::select! {
        _ = informers => tracing::error!("the watches ended"),
        _ = sessions => {}
    }
}

/// Runs both controllers until `stop` is cancelled or leadership is lost.
async fn run_controllers(
    ctx: &Arc<Context>,
    options: &Options,
    mut leading: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let config = Config::default().concurrency(options.concurrency);
    let (claim_tx, claim_rx) = mpsc::unbounded();
    let (server_tx, server_rx) = mpsc::unbounded();
    ctx.informer.attach_claim_controller(claim_tx);
    ctx.informer.attach_server_controller(server_tx);
    tracing::info!(
        concurrency = options.concurrency,
        "starting the claim and server controllers"
    );

    // The watches belong to the informer; every trigger arrives through `reconcile_on`.
    let claims = Controller::for_stream(
        stream::pending::<Result<CachedClaim, watcher::Error>>(),
        ctx.informer.claim_store.clone(),
    )
    .reconcile_on(claim_rx)
    .with_config(config.clone())
    .graceful_shutdown_on(stop.clone().cancelled_owned())
    .run(claim::reconcile, claim::error_policy, ctx.clone())
    .for_each(|result| async move { log_run_result("claim", result) });
    let servers = Controller::for_stream(
        stream::pending::<Result<CachedServer, watcher::Error>>(),
        ctx.informer.server_store.clone(),
    )
    .reconcile_on(server_rx)
    .with_config(config)
    .graceful_shutdown_on(stop.clone().cancelled_owned())
    .run(server::reconcile, server::error_policy, ctx.clone())
    .for_each(|result| async move { log_run_result("server", result) });

    let class_status = class_status::run(ctx.clone(), options.status_interval, stop.clone());
    let quotas = quota::run(ctx.clone(), options.status_interval, stop.clone());
    let budgets = budget_status::run(ctx.clone(), options.status_interval, stop.clone());
    let resync = resync::run(ctx.clone(), options.resync, stop.clone());
    let statuses = futures::future::join3(class_status, quotas, budgets);
    let controllers = futures::future::join4(claims, servers, statuses, resync);
    tokio::pin!(controllers);
    let lost = async {
        // `Ok`: leadership lost; `Err`: its sender is gone. Either way, stop.
        leading.wait_for(|l| !*l).await.is_ok()
    };
    let lost = tokio::select! {
        _ = &mut controllers => None,
        lost = lost => Some(lost),
    };
    if let Some(lost) = lost {
        if lost {
            tracing::warn!("lost leadership; stopping the controllers");
        }
        // The controllers finish their reconciles in flight.
        stop.cancel();
        controllers.await;
    }
    ctx.informer.detach_controllers();
    tracing::info!("controllers stopped");
}

fn log_run_result<K, E: std::error::Error + 'static, Q: std::error::Error + 'static>(
    controller: &str,
    result: Result<K, controller::Error<E, Q>>,
) {
    match result {
        Ok(_) => {}
        // Deleted between the trigger and the reconcile: nothing left to do.
        Err(controller::Error::ObjectNotFound(obj)) => {
            tracing::debug!(controller, object = %obj, "object gone before its reconcile");
        }
        // Already counted and logged by the error policy.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(error) => tracing::warn!(controller, %error, "controller error"),
    }
}
