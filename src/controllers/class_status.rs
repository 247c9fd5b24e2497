//! The server classes' status: each class's servers counted by phase
//! ([`capacity`]), recounted from the server cache at most once per
//! `--status-interval` and written only when a count changed, so `kubectl get
//! serverclasses` shows capacity at a glance. Not a protocol decision: a count a little
//! late changes no binding.

use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::api::ServerClass;
use crate::binding::world::classes::capacity;

use super::context::Context;
use super::metrics::ControllerKind;
use super::writes::{Part, patch};

/// Recounts every class once per `every` until `stop` is cancelled.
pub async fn run(ctx: Arc<Context>, every: Duration, stop: CancellationToken) {
    loop {
        recount(&ctx).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Writes the status of every class whose counts changed; a failed write waits for the
/// next round (the error is counted and logged by the write).
async fn recount(ctx: &Context) {
    // Each class as the cache shows it, and as counted.
    let changed: Vec<(Arc<ServerClass>, ServerClass)> = {
        let binder = ctx.informer.read();
        let servers = binder.world().servers();
        binder
            .world()
            .classes()
            .iter()
            .filter_map(|class| {
                let counted = capacity(class, servers.iter());
                let recounted = ServerClass {
                    status: Some(counted),
                    ..(**class).clone()
                };
                (class.status != recounted.status).then(|| (class.clone(), recounted))
            })
            .collect()
    };
    let api = Api::<ServerClass>::all(ctx.client.clone());
    for (read, counted) in changed {
        if let Err(error) = patch(
            ctx,
            ControllerKind::Class,
            &api,
            &*read,
            &counted,
            Part::Status,
        )
        .await
        {
            tracing::debug!(%error, class = read.metadata.name, "class status not written");
        }
    }
}
