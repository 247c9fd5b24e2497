//! `server-binder explain`: why a claim waits and who holds a server, computed by the
//! same pure functions the controllers run (the decision, each server's first reason,
//! the summary), from what a read-only user can list. Also a kubectl plugin: installed
//! as `kubectl-server_binder`, it runs as `kubectl server-binder explain …`.

mod claim;
mod error;
mod render;
mod server;
mod world;

#[cfg(test)]
mod snapshots;

use std::path::PathBuf;
use std::process::ExitCode;

use kube::Client;

use super::connect::{self, ConnectError};
use super::controller_args::gate_name;
pub use claim::Verdict;
pub use error::{EXIT_CLUSTER, EXIT_NOT_FOUND, ExplainError};
pub use render::Output;
use world::World;

/// What explain sends as its User-Agent, so audit logs tell its reads apart.
pub const USER_AGENT_VALUE: &str = concat!("server-binder-explain/", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit codes: 0 explained; 1 the object does not exist; 2 bad usage; \
3 the cluster cannot be reached, the CRDs are not installed, or reading is forbidden."
)]
pub struct ExplainArgs {
    /// serverclaim (serverclaims, scl) or server (servers, srv).
    pub kind: String,
    pub name: String,
    /// The claim's namespace (default: the kubeconfig context's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The kubeconfig to use (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The operator's --release-gates, which the cluster does not show: a server naming
    /// no gates of its own is judged with these, as the server controller judges it (a
    /// recycled server whose claim is gone is released into cleaning). Checked as `run`
    /// checks them.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = gate_name)]
    pub release_gates: Vec<String>,
}

/// Runs `explain` and prints its answer; the exit code says how it went.
pub async fn main(args: ExplainArgs) -> ExitCode {
    match explain(&args).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("server-binder explain: {e}");
            ExitCode::from(e.code())
        }
    }
}

async fn explain(args: &ExplainArgs) -> Result<String, ExplainError> {
    let (client, default_ns) = connect(args).await?;
    match args.kind.as_str() {
        "serverclaim" | "serverclaims" | "scl" => {
            let ns = args.namespace.clone().unwrap_or(default_ns);
            let world = World::read(&client, Some(&ns), &args.release_gates).await?;
            let e = claim::explain(&world, &ns, &args.name)?;
            render::output(&e, args.output, render::claim_text)
        }
        "server" | "servers" | "srv" => {
            let world = World::read(&client, None, &args.release_gates).await?;
            let e = server::explain(&world, &args.name)?;
            render::output(&e, args.output, render::server_text)
        }
        other => Err(ExplainError::Usage(format!(
            "unknown kind {other:?}: use serverclaim (scl) or server (srv)"
        ))),
    }
}

/// A client configured like kubectl's, and the context's namespace.
async fn connect(args: &ExplainArgs) -> Result<(Client, String), ExplainError> {
    let kubeconfig = args.kubeconfig.as_deref();
    let connected = connect::connect(kubeconfig, args.context.as_deref(), USER_AGENT_VALUE);
    connected.await.map_err(|e| match e {
        ConnectError::Kubeconfig(m) => ExplainError::Usage(m),
        ConnectError::Client(m) => ExplainError::Cluster(m),
    })
}
