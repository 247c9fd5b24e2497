//! The operator process, assembled: shared caches, both controllers, leader election
//! (optional), the metrics and health endpoints. `run` and `dev` start it; so do the
//! integration tests, in-process, against the embedded API server.

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use kube::api::ListParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{Server, ServerClaim};
use crate::controllers::{self, Context, Metrics, Options, SharedInformer};

use super::http;
use super::leader::{ElectionStatus, Elector, LeaderElection};

#[derive(Clone, Debug)]
pub struct OperatorConfig {
    pub options: Options,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` (`None`: nowhere; port 0: any).
    pub metrics_addr: Option<SocketAddr>,
    /// This process's name in events and the lease.
    pub identity: String,
    /// Contend for this Lease and run the controllers' writes only while holding it.
    /// `None`: this process always leads.
    pub leader_election: Option<LeaderElection>,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "the Server and ServerClaim CRDs are not installed in this cluster ({0}); install them with `kubectl apply -f manifests/crds/` (or `server-binder crd | kubectl apply -f -`)"
    )]
    CrdsMissing(String),
    #[error("{0}")]
    ReleaseGate(#[from] crate::binding::state::gates::GateNameError),
    #[error("cannot reach the API server: {0}")]
    Unreachable(#[source] kube::Error),
    #[error("cannot serve metrics on {addr}: {source}")]
    MetricsAddr {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A running operator.
pub struct OperatorHandle {
    pub metrics: Metrics,
    pub informer: Arc<SharedInformer>,
    /// Where the metrics endpoint listens, if it does.
    pub metrics_addr: Option<SocketAddr>,
    /// The election's state, with leader election.
    pub election: Option<ElectionStatus>,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
    /// Holds leadership for the process when no leader election runs.
    _leading: Option<watch::Sender<bool>>,
}

/// Checks the options and that both CRDs are served, then starts everything.
pub async fn start(
    client: Client,
    config: OperatorConfig,
) -> Result<OperatorHandle, OperatorError> {
    for gate in &config.options.release_gates {
        crate::binding::state::gates::check_gate_name(gate)?;
    }
    check_crds(&client).await?;
    let (informer, writers) = SharedInformer::new(config.options.binder_config());
    let metrics = Metrics::new();
    let leadership = Leadership::new(&client, config.leader_election, &config.identity, &metrics);
    let ctx = Arc::new(Context::new(
        client,
        informer.clone(),
        metrics.clone(),
        config.identity.clone(),
    ));
    let shutdown = CancellationToken::new();

    // The endpoint outlives the controllers and the lease by a little: it stops last.
    let http_stop = CancellationToken::new();
    let mut endpoint = None;
    let mut metrics_addr = None;
    if let Some(addr) = config.metrics_addr {
        let (bound, serve) = http::bind(
            addr,
            metrics.clone(),
            informer.clone(),
            leadership.status.clone(),
            http_stop.clone(),
        )
        .await
        .map_err(|source| OperatorError::MetricsAddr { addr, source })?;
        metrics_addr = Some(bound);
        endpoint = Some(serve);
    }
    let controllers = controllers::run(
        ctx,
        writers,
        config.options,
        leadership.leading,
        shutdown.clone(),
    );
    let task = tokio::spawn(run_in_order(
        controllers,
        leadership.elector,
        endpoint,
        http_stop,
    ));
    Ok(OperatorHandle {
        metrics,
        informer,
        metrics_addr,
        election: leadership.status,
        shutdown,
        task,
        _leading: leadership.always_leading,
    })
}

/// Who says when this process leads: a Lease's elector, or nobody (it always leads).
struct Leadership {
    elector: Option<Elector>,
    leading: watch::Receiver<bool>,
    status: Option<ElectionStatus>,
    /// Holds `leading` at true when no election runs.
    always_leading: Option<watch::Sender<bool>>,
}

impl Leadership {
    fn new(
        client: &Client,
        lease: Option<LeaderElection>,
        identity: &str,
        metrics: &Metrics,
    ) -> Self {
        match lease {
            Some(lease) => {
                let (elector, leading, status) =
                    Elector::new(client.clone(), lease, identity.to_owned(), metrics.clone());
                Self {
                    elector: Some(elector),
                    leading,
                    status: Some(status),
                    always_leading: None,
                }
            }
            None => {
                let (tx, leading) = watch::channel(true);
                metrics.set_leader(true);
                Self {
                    elector: None,
                    leading,
                    status: None,
                    always_leading: Some(tx),
                }
            }
        }
    }
}

/// Runs everything until the controllers stop, then stops the rest in order: the
/// controllers finish their reconciles in flight; then the Lease is released (no write
/// of ours can follow it); then the endpoint stops.
async fn run_in_order(
    controllers: impl Future<Output = ()>,
    elector: Option<Elector>,
    endpoint: Option<impl Future<Output = std::io::Result<()>>>,
    http_stop: CancellationToken,
) {
    let election_stop = CancellationToken::new();
    let controllers = async {
        controllers.await;
        election_stop.cancel();
    };
    let election = async {
        if let Some(elector) = elector {
            elector.run(election_stop.clone()).await;
        }
        election_stop.cancelled().await;
        http_stop.cancel();
    };
    let http = async {
        if let Some(serve) = endpoint
            && let Err(error) = serve.await
        {
            tracing::error!(%error, "the metrics endpoint failed");
        }
    };
    futures::join!(controllers, election, http);
}

impl OperatorHandle {
    /// Graceful stop: reconciles in flight finish, then the watches stop, the Lease (if
    /// held) is released and the endpoint stops.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        let _ = (&mut self.task).await;
    }

    /// Stops at once, mid-reconcile if need be, as a crash would (tests use it); a held
    /// Lease is not released.
    pub async fn kill(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }

    /// Resolves when the operator stops by itself (it should not) or is shut down.
    pub async fn wait(&mut self) {
        let _ = (&mut self.task).await;
    }
}

/// A handle dropped without [`OperatorHandle::shutdown`] stops the operator as
/// [`OperatorHandle::kill`] does: nothing could stop it afterwards.
impl Drop for OperatorHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn check_crds(client: &Client) -> Result<(), OperatorError> {
    let probe = ListParams::default().limit(1);
    let servers = kube::Api::<Server>::all(client.clone())
        .list_metadata(&probe)
        .await;
    let claims = kube::Api::<ServerClaim>::all(client.clone())
        .list_metadata(&probe)
        .await;
    for result in [servers.map(|_| ()), claims.map(|_| ())] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {
                return Err(OperatorError::CrdsMissing(s.message));
            }
            Err(e) => return Err(OperatorError::Unreachable(e)),
        }
    }
    Ok(())
}
