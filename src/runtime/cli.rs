//! The `server-binder` command line.

use std::fmt::Display;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "embedded-apiserver")]
use super::bench::{self, BenchTarget};
#[cfg(feature = "embedded-apiserver")]
use super::dev::{self, DevArgs};
use super::drain::{self, DrainArgs, VerbArgs};
use super::error::CommandError;
use super::explain::{self, ExplainArgs};
use super::run::{self, RunArgs};
#[cfg(feature = "embedded-apiserver")]
use super::standalone::{self, ApiserverArgs};

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
    Apiserver(ApiserverArgs),
    /// Explain a ServerClaim (why it waits, server by server) or a Server (who holds it,
    /// why it is not Available). Read-only. Also a kubectl plugin: installed as
    /// `kubectl-server_binder` on PATH, run it as `kubectl server-binder explain ...`.
    Explain(ExplainArgs),
    /// Cordon servers: set `spec.unclaimable`, so that no new claim binds them. A bound
    /// claim keeps its server. Also a kubectl plugin verb, as explain.
    Cordon(VerbArgs),
    /// Uncordon servers: clear `spec.unclaimable` and remove the drain taint (which
    /// cancels an eviction whose deadline has not come). Also a kubectl plugin verb.
    Uncordon(VerbArgs),
    /// Drain servers: cordon them and add the drain taint (metal.binder.dev/drain,
    /// effect Evict), which ends their claims' binds; print whom it evicts and when.
    /// Also a kubectl plugin verb.
    Drain(DrainArgs),
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

/// Parses the command line and runs it; the binary's whole `main`.
pub async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Crd => exit(print_crds()),
        #[cfg(feature = "embedded-apiserver")]
        Command::Apiserver(args) => exit(standalone::run(args).await),
        // Explain prints its own errors: its exit code tells a missing object from an
        // unreachable cluster.
        Command::Explain(args) => explain::main(args).await,
        // So do the verbs: a wait that timed out has its own code too.
        Command::Cordon(args) => drain::cordon(args).await,
        Command::Uncordon(args) => drain::uncordon(args).await,
        Command::Drain(args) => drain::drain(args).await,
        Command::Run(args) => exit(run::run(args).await),
        #[cfg(feature = "embedded-apiserver")]
        Command::Dev(args) => exit(dev::run(args).await),
        #[cfg(feature = "embedded-apiserver")]
        Command::Bench { target } => exit(bench::run(target).await),
    }
}

/// A command's end as the process's: a failure is its message on stderr and exit 1.
fn exit(result: Result<(), impl Display>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("server-binder: {message}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> Result<(), CommandError> {
    print!("{}", crate::api::crd_yaml()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::leader;

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
    fn the_embedded_apiserver_commands_exist_only_with_its_feature() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let commands: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
        let expected: &[&str] = if cfg!(feature = "embedded-apiserver") {
            &[
                "crd",
                "apiserver",
                "explain",
                "cordon",
                "uncordon",
                "drain",
                "run",
                "dev",
                "bench",
            ]
        } else {
            &["crd", "explain", "cordon", "uncordon", "drain", "run"]
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
