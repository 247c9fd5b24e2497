//! Everything a reconcile needs, injected once: the client, the shared caches, the event
//! recorder and the metrics.

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Reporter;

use super::events::EventRecorder;

use super::informer::Caches;
use super::metrics::Metrics;
use super::options::Options;
use super::summaries::SummaryWrites;

/// The name events are reported under (`reportingController`).
pub const REPORTING_CONTROLLER: &str = "server-binder";

pub struct Context {
    pub client: Client,
    pub caches: Arc<Caches>,
    pub recorder: EventRecorder,
    pub metrics: Metrics,
    pub summaries: SummaryWrites,
    /// The release gates of a server that names none ([`Options::release_gates`]).
    pub release_gates: Vec<String>,
}

impl Context {
    /// `instance` names this process in events' `reportingInstance` (the pod name, or
    /// host and pid), so two replicas' events can be told apart.
    pub fn new(
        client: Client,
        caches: Arc<Caches>,
        metrics: Metrics,
        instance: String,
        options: &Options,
    ) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.into(),
            instance: Some(instance),
        };
        let recorder = EventRecorder::new(client.clone(), reporter);
        Self {
            client,
            caches,
            recorder,
            metrics,
            summaries: SummaryWrites::new(options.status_interval),
            release_gates: options.release_gates.clone(),
        }
    }
}
