//! `server-binder run`: both controllers against a cluster, until SIGTERM.

use std::net::SocketAddr;

use super::controller_args::ControllerArgs;
use super::error::CommandError;
use super::identity::identity;
use super::leader::{self, LeaderElection};
use super::logging;
use super::operator::{self, OperatorConfig, OperatorHandle};
use super::signals;

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub controllers: ControllerArgs,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Run the controllers' writes only while holding a Lease (for more than one replica).
    /// The identity is $POD_NAME, else `<hostname>-<pid>`.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's namespace.
    #[arg(long, default_value = "server-binder-system")]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "server-binder")]
    pub lease_name: String,
    /// The Lease's term in seconds: a standby takes over at most about this long after
    /// the leader dies (within 2 s when it stops). The leader renews at two thirds of the
    /// term and stops leading at five sixths of it unless its renewal landed.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = leader::DEFAULT_LEASE_DURATION_SECS,
        value_parser = clap::value_parser!(u64).range(leader::MIN_LEASE_DURATION_SECS..=3600)
    )]
    pub lease_duration: u64,
}

/// Runs both controllers against the cluster the environment names, until SIGTERM.
pub async fn run(args: RunArgs) -> Result<(), CommandError> {
    logging::init(args.controllers.log_format);
    // Caught before anything starts: the controllers may be writing by the time `start`
    // returns, and a SIGTERM then must stop them gracefully too, not kill the process
    // between a write and what follows it (its log line, the Lease's release). One that
    // comes during the start (an API server slow to answer) stops the process at once.
    let mut termination = signals::Termination::catch().map_err(CommandError::Signals)?;
    let mut operator = tokio::select! {
        started = start(&args) => started?,
        () = termination.recv() => {
            tracing::info!("stopped before the controllers started");
            return Ok(());
        }
    };
    tokio::select! {
        () = termination.recv() => {}
        () = operator.wait() => return Err(CommandError::ControllersStopped),
    }
    tracing::info!("shutting down");
    operator.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts both controllers (and the Lease's elector, if asked) on the cluster the
/// environment names. Nothing runs until it returns: dropping it stops everything.
async fn start(args: &RunArgs) -> Result<OperatorHandle, CommandError> {
    let kube_config = kube::Config::infer()
        .await
        .map_err(CommandError::KubeConfig)?;
    let client = super::client::operator_client(kube_config).map_err(CommandError::Client)?;
    let identity = identity();
    let leader_election = args.leader_elect.then(|| LeaderElection {
        namespace: args.lease_namespace.clone(),
        name: args.lease_name.clone(),
        lease_duration_secs: args.lease_duration,
    });
    let config = OperatorConfig {
        options: args.controllers.options(),
        metrics_addr: Some(args.metrics_addr),
        identity: identity.clone(),
        leader_election,
    };
    let operator = operator::start(client, config).await?;
    tracing::info!(
        metrics = ?operator.metrics_addr,
        identity,
        leader_elect = args.leader_elect,
        "server-binder is running"
    );
    Ok(operator)
}
