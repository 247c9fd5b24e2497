//! `server-binder apiserver`: the embedded API server alone, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::Path;

use crate::apiserver::{ApiServer, Config};

use super::signals;

/// Serves on `listen` and writes a kubeconfig for it to `kubeconfig_out`.
pub async fn run(listen: SocketAddr, kubeconfig_out: &Path) -> Result<(), String> {
    let handle = ApiServer::start(Config::default().listen(listen))
        .await
        .map_err(|e| format!("cannot start the embedded API server on {listen}: {e}"))?;
    handle
        .write_kubeconfig(kubeconfig_out)
        .map_err(|e| e.to_string())?;
    eprintln!(
        "server-binder apiserver: serving {} (DEVELOPMENT AND TESTS ONLY: plain HTTP, no authentication); kubeconfig written to {}",
        handle.url(),
        kubeconfig_out.display()
    );
    let signalled = signals::terminated().await;
    handle.shutdown().await;
    signalled.map_err(|e| format!("cannot wait for signals: {e}"))
}
