//! `server-binder apiserver`: the embedded API server alone, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::apiserver::{ApiServer, Config};

use super::error::CommandError;
use super::signals;

#[derive(Debug, Clone, clap::Args)]
pub struct ApiserverArgs {
    /// Address to listen on (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write a kubeconfig for the server (context namespace `default`).
    #[arg(long, default_value = "server-binder.kubeconfig")]
    pub kubeconfig_out: PathBuf,
}

/// Serves on `--listen` and writes a kubeconfig for it to `--kubeconfig-out`.
pub async fn run(args: ApiserverArgs) -> Result<(), CommandError> {
    let ApiserverArgs {
        listen,
        kubeconfig_out,
    } = args;
    let handle = ApiServer::start(Config::default().listen(listen))
        .await
        .map_err(|source| CommandError::ApiServerStart { listen, source })?;
    handle
        .write_kubeconfig(&kubeconfig_out)
        .map_err(CommandError::Kubeconfig)?;
    eprintln!(
        "server-binder apiserver: serving {} (DEVELOPMENT AND TESTS ONLY: plain HTTP, no authentication); kubeconfig written to {}",
        handle.url(),
        kubeconfig_out.display()
    );
    let signalled = signals::terminated().await;
    handle.shutdown().await;
    signalled.map_err(CommandError::Signals)
}
