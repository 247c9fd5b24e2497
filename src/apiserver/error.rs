//! The module's error type (for starting, stopping and driving the server from Rust;
//! HTTP clients get metav1 `Status` objects instead, see `status.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot write the kubeconfig to {path}: {source}")]
    WriteKubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot encode the kubeconfig: {0}")]
    EncodeKubeconfig(String),
    #[error("cannot build a client for the embedded API server: {0}")]
    Client(#[from] kube::Error),
    /// The server refused a request made through the handle (e.g. `install_crd`).
    #[error("the API server answered {code}: {message}")]
    Api { code: u16, message: String },
    #[error("the server task failed: {0}")]
    Serve(std::io::Error),
}
