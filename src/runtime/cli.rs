//! The `server-binder` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use super::leader::{self, LeaderElection};
use super::logging::{self, LogFormat};
use super::operator::{self, OperatorConfig};
use super::signals;
use crate::controllers::{Options, STATUS_INTERVAL};

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
    #[cfg(feature = "embedded-apiserver")]
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
    /// Explain a ServerClaim (why it waits, server by server) or a Server (who holds it,
    /// why it is not Available). Read-only. Also a kubectl plugin: installed as
    /// `kubectl-server_binder` on PATH, run it as `kubectl server-binder explain ...`.
    Explain(super::explain::ExplainArgs),
    /// Run both controllers against a cluster until SIGTERM.
    ///
    /// Connects like kubectl: in-cluster service account, else KUBECONFIG or ~/.kube/config.
    Run(RunArgs),
    /// Try server-binder without a cluster: the embedded API server, the CRDs and both
    /// controllers in one process, until Ctrl-C.
    ///
    /// FOR DEVELOPMENT ONLY: the API server is plain HTTP with no authentication.
    #[cfg(feature = "embedded-apiserver")]
    Dev(DevArgs),
    /// Measure a component under load and print the figures.
    #[cfg(feature = "embedded-apiserver")]
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
    /// A Pending claim's "0/N servers can serve this claim: …" status is rewritten at
    /// most once per this many seconds, and refreshed about as often.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = STATUS_INTERVAL.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub status_interval: u64,
    /// The release gates of a server whose spec names none, comma-separated: a server
    /// released under Recycle waits in phase Cleaning until a cleaner passes each. Each
    /// is a domain-prefixed name such as example.com/disk-wiped. A release records the
    /// gates it waits for, so changing this flag changes no cleaning in progress.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = gate_name)]
    pub release_gates: Vec<String>,
}

/// A `--release-gates` entry, checked as admission checks `spec.releaseGates`.
pub(super) fn gate_name(name: &str) -> Result<String, crate::binding::gates::GateNameError> {
    let name = name.trim();
    if name.is_empty() {
        return Ok(String::new());
    }
    crate::binding::gates::check_gate_name(name).map(|()| name.to_string())
}

impl ControllerArgs {
    /// The controllers' options these flags set.
    pub fn options(&self) -> Options {
        Options {
            concurrency: self.concurrency,
            status_interval: Duration::from_secs(self.status_interval),
            release_gates: self
                .release_gates
                .iter()
                .filter(|g| !g.is_empty())
                .cloned()
                .collect(),
        }
    }
}

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

#[cfg(feature = "embedded-apiserver")]
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
    /// The operator binding a generated fleet: the embedded API server in-process on
    /// loopback, `server-binder run` as a child process. Prints time to all Bound,
    /// binds/s, writes per bind, bind latency, the operator's peak RSS and efficiency
    /// against the API server's write ceiling. Build with --release.
    Bind(BindArgs),
}

#[cfg(feature = "embedded-apiserver")]
#[derive(Debug, Clone, clap::Args)]
pub struct BindArgs {
    /// Servers to create.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub servers: u64,
    /// Claims to create.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub claims: u64,
    /// How servers are labelled and what claims ask for.
    #[arg(long, value_enum, default_value_t = super::bench::bind::fleet::Mix::Any)]
    pub mix: super::bench::bind::fleet::Mix,
    /// The operator's --concurrency (reconciles each controller runs at once).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Create claims at this many per second once the operator is ready and idle (for
    /// latency); without it, every claim exists before the operator starts (for
    /// throughput).
    #[arg(long, value_parser = positive_rate)]
    pub rate: Option<f64>,
    /// Namespaces the claims are spread over, round-robin (tenant-0, tenant-1, ...).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub namespaces: u64,
    /// Stop when no claim was created or bound for this many seconds; claims still
    /// unbound are reported (not an error).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stall_secs: u64,
    /// How long to measure the API server's write ceiling.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub ceiling_secs: u64,
    /// Servers the operator has never seen: its first status on each is written while
    /// it binds, and counted. Without it, a first operator registers the fleet (every
    /// server Available) and is stopped before the claims are created, as in a fleet
    /// whose servers exist before its claims.
    #[arg(long)]
    pub fresh_servers: bool,
    /// Once the bind phase is over, cordon and uncordon servers for this many seconds
    /// while the unbound claims wait, and report the claim status writes per waiting
    /// claim per minute (use more claims than servers).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub churn_secs: u64,
    /// Server changes per second during --churn-secs.
    #[arg(long, default_value_t = 20.0, value_parser = positive_rate)]
    pub churn_rate: f64,
    /// Print the figures as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "embedded-apiserver")]
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "`{s}` is not a positive number of claims per second"
        )),
    }
}

/// Parses the command line and runs it; the binary's whole `main`.
pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Explain(args) = cli.command {
        return super::explain::main(args).await;
    }
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
        #[cfg(feature = "embedded-apiserver")]
        Command::Apiserver {
            listen,
            kubeconfig_out,
        } => super::standalone::run(listen, &kubeconfig_out).await,
        Command::Run(args) => run_controllers(args).await,
        Command::Explain(_) => unreachable!("explain runs from main with its own exit codes"),
        #[cfg(feature = "embedded-apiserver")]
        Command::Dev(args) => super::dev::run(args).await,
        #[cfg(feature = "embedded-apiserver")]
        Command::Bench { target } => super::bench::run(target).await,
    }
}

async fn run_controllers(args: RunArgs) -> Result<(), String> {
    logging::init(args.controllers.log_format);
    let kube_config = kube::Config::infer().await.map_err(|e| {
        format!("cannot configure a Kubernetes client (in-cluster or KUBECONFIG): {e}")
    })?;
    let client = super::client::operator_client(kube_config)
        .map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;
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
    let mut operator = operator::start(client, config)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(
        metrics = ?operator.metrics_addr,
        identity,
        leader_elect = args.leader_elect,
        "server-binder is running"
    );
    tokio::select! {
        signalled = signals::terminated() => {
            signalled.map_err(|e| format!("cannot wait for signals: {e}"))?;
        }
        _ = operator.wait() => return Err("the controllers stopped unexpectedly".into()),
    }
    tracing::info!("shutting down");
    operator.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}

/// This process's name in events and the Lease: the pod's name in a cluster
/// (`POD_NAME`, from the downward API), else `<hostname>-<pid>`, so that two processes
/// on one machine never share one.
pub fn identity() -> String {
    let hostname = hostname::get().ok().and_then(|h| h.into_string().ok());
    choose_identity(std::env::var("POD_NAME").ok(), hostname, std::process::id())
}

/// [`identity`] from its inputs.
pub fn choose_identity(pod_name: Option<String>, hostname: Option<String>, pid: u32) -> String {
    let present = |s: &String| !s.trim().is_empty();
    match pod_name.filter(present) {
        Some(pod) => pod,
        None => {
            let host = hostname.filter(present);
            format!("{}-{pid}", host.as_deref().unwrap_or("server-binder"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/operations.md's Configuration table and `run`'s flags name the same flags.
    #[test]
    fn the_operations_guide_documents_every_flag_of_run() {
        use clap::CommandFactory;
        let guide = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"));
        let documented: std::collections::BTreeSet<&str> = guide
            .lines()
            .filter_map(|l| l.strip_prefix("| `--"))
            .filter_map(|l| l.split([' ', '`']).next())
            .collect();
        let command = Cli::command();
        let run = command.find_subcommand("run").expect("run");
        let flags: std::collections::BTreeSet<&str> = run
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| *l != "help")
            .collect();
        assert_eq!(documented, flags, "docs/operations.md, Configuration");
    }

    #[test]
    fn the_pod_name_wins_else_host_and_pid() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            choose_identity(some("server-binder-7d9f-x2x9q"), some("node-1"), 42),
            "server-binder-7d9f-x2x9q"
        );
        assert_eq!(choose_identity(None, some("node-1"), 42), "node-1-42");
        assert_eq!(choose_identity(some(""), some("node-1"), 42), "node-1-42");
        assert_eq!(choose_identity(None, some("node-1"), 43), "node-1-43");
        assert_eq!(choose_identity(None, None, 42), "server-binder-42");
        assert_eq!(choose_identity(some(" "), some(""), 7), "server-binder-7");
    }

    #[test]
    fn the_embedded_apiserver_commands_exist_only_with_its_feature() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let commands: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
        let expected: &[&str] = if cfg!(feature = "embedded-apiserver") {
            &["crd", "apiserver", "explain", "run", "dev", "bench"]
        } else {
            &["crd", "explain", "run"]
        };
        assert_eq!(commands, expected);
    }

    #[test]
    fn run_takes_the_lease_flags() {
        let cli = Cli::try_parse_from([
            "server-binder",
            "run",
            "--leader-elect",
            "--lease-namespace",
            "ns",
            "--lease-name",
            "l",
            "--lease-duration",
            "3",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        assert!(args.leader_elect);
        assert_eq!(
            (args.lease_namespace.as_str(), args.lease_name.as_str()),
            ("ns", "l")
        );
        assert_eq!(args.lease_duration, 3);
        let Command::Run(args) = Cli::try_parse_from(["server-binder", "run"])
            .unwrap()
            .command
        else {
            panic!("run")
        };
        assert!(!args.leader_elect);
        assert_eq!(args.lease_duration, leader::DEFAULT_LEASE_DURATION_SECS);
        assert!(Cli::try_parse_from(["server-binder", "run", "--lease-duration", "1"]).is_err());
    }
}
