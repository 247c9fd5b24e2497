//! The API server's write ceiling, measured in the same run, on the same server and with
//! the same client stack: the `bench apiserver` load generator's update phase with 8
//! writers and 2 watchers, on its own kind (`probes.bench.binder.dev`, 5000 objects).
//!
//! It runs on the server that then holds the fleet, before the fleet is created and the
//! operator started, so nothing else competes for the two cores while it measures. The
//! probes stay afterwards: a few MiB in the API server, none in the operator, which
//! does not watch them.

use std::time::Duration;

use super::super::apiserver::{self, BenchConfig};
use super::super::error::BenchError as Error;
use crate::apiserver::ApiServerHandle;

pub const WRITERS: usize = 8;
pub const WATCHERS: usize = 2;
const OBJECTS: usize = 5000;

/// Updates per second the API server sustained.
pub async fn measure(server: &ApiServerHandle, duration: Duration) -> Result<f64, Error> {
    let config = BenchConfig {
        objects: OBJECTS,
        writers: WRITERS,
        watchers: WATCHERS,
        duration,
        // One store size is enough here: the update rate at 5000 objects.
        checkpoint: 0,
        drain_timeout: Duration::from_secs(60),
    };
    let bound = Duration::from_secs(300) + duration;
    let report = tokio::time::timeout(bound, apiserver::run_on(server, config))
        .await
        .map_err(|_| Error::Failed(format!("the write ceiling took over {bound:?}")))??;
    if !report.all_seen() {
        // The rate is still measured; the event loss is the apiserver bench's finding.
        eprintln!(
            "bench bind: while measuring the write ceiling, a watcher missed writes:\n{report}"
        );
    }
    Ok(report.update.per_sec())
}
