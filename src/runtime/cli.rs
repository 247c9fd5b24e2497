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
    }
}
