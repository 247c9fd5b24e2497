//! Everything a reconcile needs, injected once: the client, the shared caches, the event
//! recorder and the metrics.

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use super::informer::Caches;
use super::metrics::Metrics;

/// The name events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "server-binder";

pub struct Context {
    pub client: Client,
    pub caches: Arc<Caches>,
    pub recorder: Recorder,
    /// What `recorder` reports as; events it cannot name are written with the same.
    pub reporter: Reporter,
    pub metrics: Metrics,
}

impl Context {
    /// `instance` names this process in events' `reportingInstance` (the pod name, or
    /// host and pid), so two replicas' events can be told apart.
    pub fn new(client: Client, caches: Arc<Caches>, metrics: Metrics, instance: String) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: Some(instance),
        };
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Self {
            client,
            caches,
            recorder,
            reporter,
            metrics,
        }
    }
}
