//! The `server-binder` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::logging::{self, LogFormat};
use super::operator::{self, OperatorConfig};
use super::signals;
use crate::controllers::Options;

#[derive(Debug, Parser)]
#[command(
    name = "server-binder",
    version,
    about = "Binds ServerClaims to bare-metal Servers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the Server and ServerClaim CustomResourceDefinitions as multi-document YAML.
    Crd,
    /// Run the embedded in-memory API server alone.
    ///
    /// FOR DEVELOPMENT AND TESTS ONLY: plain HTTP, no authentication, no authorization,
    /// nothing persisted. It listens on loopback unless told otherwise.
    Apiserver {
        /// Address to listen on (plain HTTP).
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: SocketAddr,
        /// Where to write a kubeconfig for the server (context namespace `default`).
        #[arg(long, default_value = "server-binder.kubeconfig")]
        kubeconfig_out: PathBuf,
    },
    /// Run both controllers against a cluster until SIGTERM.
    ///
    /// Connects like kubectl: in-cluster service account, else KUBECONFIG or ~/.kube/config.
    Run(RunArgs),
    /// Try server-binder without a cluster: the embedded API server, the CRDs and both
    /// controllers in one process, until Ctrl-C.
    ///
    /// FOR DEVELOPMENT ONLY: the API server is plain HTTP with no authentication.
    Dev(DevArgs),
    /// Measure a component under load and print the figures.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
}

/// Flags that `run` and `dev` share.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Reconciles each controller runs at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Log line format (filter with RUST_LOG, e.g. RUST_LOG=server_binder=debug).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub controllers: ControllerArgs,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Run the controllers' writes only while holding a Lease (for more than one replica).
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's namespace.
    #[arg(long, default_value = "server-binder-system")]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "server-binder")]
    pub lease_name: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub controllers: ControllerArgs,
    /// Where the embedded API server listens (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write a kubeconfig for it (context namespace `default`).
    #[arg(long, default_value = "server-binder.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Create this many demo servers (labelled with a rack and a size).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=10_000))]
    pub servers: u16,
}

#[derive(Debug, Subcommand)]
pub enum BenchTarget {
    /// The embedded API server, in-process on loopback: concurrent creates and updates
    /// over HTTP while many watches count every event. Build with --release.
    Apiserver {
        /// Objects to create (and then update).
        #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        objects: u64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
        writers: u64,
        /// Concurrent watches, each counting every event.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(0..=10_000))]
        watchers: u64,
        /// How long to update the objects once they all exist.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        duration_secs: u64,
    },
}

/// Parses the command line and runs it; the binary's whole `main`.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("server-binder: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Crd => {
            print!("{}", crate::api::crd_yaml().map_err(|e| e.to_string())?);
            Ok(())
        }
        Command::Apiserver {
            listen,
            kubeconfig_out,
        } => crate::apiserver::run_standalone(listen, kubeconfig_out)
            .await
            .map_err(|e| e.to_string()),
        Command::Run(args) => run_controllers(args).await,
        Command::Dev(args) => super::dev::run(args).await,
        Command::Bench { target } => bench(target).await,
    }
}

async fn run_controllers(args: RunArgs) -> Result<(), String> {
    if args.leader_elect {
        // Refuse rather than run unguarded: two replicas without a lease would both write.
        return Err(format!(
            "--leader-elect (lease {}/{}) is not available in this build yet; run one replica without it",
            args.lease_namespace, args.lease_name
        ));
    }
    logging::init(args.controllers.log_format);
    let client = kube::Client::try_default().await.map_err(|e| {
        format!("cannot configure a Kubernetes client (in-cluster or KUBECONFIG): {e}")
    })?;
    let config = OperatorConfig {
        options: Options {
            concurrency: args.controllers.concurrency,
        },
        metrics_addr: Some(args.metrics_addr),
        identity: identity(),
    };
    let operator = operator::start(client, config)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(metrics = ?operator.metrics_addr, "server-binder is running");
    signals::terminated()
        .await
        .map_err(|e| format!("cannot wait for signals: {e}"))?;
    tracing::info!("shutting down");
    operator.shutdown().await;
    Ok(())
}

/// This process's name in events: the pod's name in a cluster, else host and pid.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("server-binder-{}", std::process::id()))
}

async fn bench(target: BenchTarget) -> Result<(), String> {
    use crate::apiserver::bench;
    let BenchTarget::Apiserver {
        objects,
        writers,
        watchers,
        duration_secs,
    } = target;
    let config = bench::BenchConfig {
        objects: objects as usize,
        writers: writers as usize,
        watchers: watchers as usize,
        duration: std::time::Duration::from_secs(duration_secs),
        ..bench::BenchConfig::default()
    };
    let report = bench::run(config).await.map_err(|e| e.to_string())?;
    println!("{report}");
    if report.all_seen() {
        Ok(())
    } else {
        Err("the benchmark's watchers did not all see every write (see above)".into())
    }
}
