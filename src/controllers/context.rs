//! Everything a reconcile needs, injected once: the client, the shared caches, the event
//! recorder and the metrics.

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Reporter;

use super::charges::ChargesInARow;
use super::events::EventRecorder;

use super::informer::SharedInformer;
use super::metrics::Metrics;

/// The name events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "server-binder";

pub struct Context {
    pub client: Client,
    pub informer: Arc<SharedInformer>,
    pub recorder: EventRecorder,
    pub metrics: Metrics,
    /// The quotas' charges this process writes one after another.
    pub charges: ChargesInARow,
}

impl Context {
    /// `instance` names this process in events' `reportingInstance` (the pod name, or
    /// host and pid), so two replicas' events can be told apart.
    pub fn new(
        client: Client,
        informer: Arc<SharedInformer>,
        metrics: Metrics,
        instance: String,
    ) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: Some(instance),
        };
        let recorder = EventRecorder::new(client.clone(), reporter);
        Self {
            client,
            informer,
            recorder,
            metrics,
            charges: ChargesInARow::default(),
        }
    }
}
