//! `--hold-ms`: a tenant uses its server for a while, then gives it back. Each claim is
//! deleted a fixed time after the bench first sees it Bound; the operator then releases
//! its server (`Recycle`, no release gates: Available again), and the next waiting
//! claim can take it. With fewer servers than claims this keeps servers scarce yet
//! freeing at a steady pace, about `servers ÷ hold` a second, so that binds go on until
//! every claim has had its turn and the fair order, not the fleet's size, decides who is
//! served when.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, DeleteParams};
use tokio::sync::mpsc;

use super::super::error::BenchError as Error;
use super::fleet;
use super::tenants::Schedule;
use crate::api::ServerClaim;

/// Deletes in flight at once; deletes fall due in bursts when many claims bind at once.
const IN_FLIGHT: usize = 32;

/// Deletes each claim the watch reports Bound (index and when) `hold` after that, until
/// the channel closes. Claims arrive in the order they were seen Bound, so they fall due
/// in that order: one timer at a time is enough.
pub async fn run(
    client: kube::Client,
    schedule: Schedule,
    hold: Duration,
    mut bound: mpsc::UnboundedReceiver<(usize, Instant)>,
) -> Result<(), Error> {
    let due = stream::poll_fn(move |cx| bound.poll_recv(cx)).then(|(j, at)| async move {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at + hold)).await;
        j
    });
    due.map(|j| delete(&client, &schedule, j))
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|()| async { Ok(()) })
        .await
}

async fn delete(client: &kube::Client, schedule: &Schedule, j: usize) -> Result<(), Error> {
    let namespace = fleet::namespace_name(schedule.namespace(j));
    let api: Api<ServerClaim> = Api::namespaced(client.clone(), &namespace);
    let name = fleet::claim_name(j);
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        // Gone already is what was wanted.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Failed(format!("deleting claim {name}: {e}"))),
    }
}
