//! An in-memory Kubernetes-compatible API server (development and tests only).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Runs the API server alone until SIGINT/SIGTERM, writing a kubeconfig for it.
pub async fn run_standalone(listen: SocketAddr, kubeconfig_out: PathBuf) -> Result<(), String> {
    let _ = (listen, kubeconfig_out);
    Err("the embedded API server is not implemented yet".into())
}

pub mod schema;
