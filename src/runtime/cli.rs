//! The `server-binder` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Measure a component under load and print the figures.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
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
        Command::Bench { target } => bench(target).await,
    }
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
