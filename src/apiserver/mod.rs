//! An embedded, in-memory, Kubernetes-compatible API server.
//!
//! **For development and tests only.** It speaks plain HTTP with no authentication and
//! no authorization, persists nothing, and listens on loopback unless told otherwise.
//!
//! It serves whatever CustomResourceDefinitions are installed into it (and knows nothing
//! of what they mean), plus the built-in kinds controllers and kubectl need: Namespaces,
//! Events (core/v1 and events.k8s.io/v1 over one store), Leases and the CRDs
//! themselves. It is faithful where clients can tell: resourceVersions and optimistic
//! concurrency, generation, finalizers, status subresources, the four patch types,
//! watches with bookmarks, resumption and 410 Gone, selectors, pagination, metav1
//! `Status` errors, discovery, OpenAPI v3 and `Table` output for kubectl.
//!
//! Module map:
//! - [`server`]: [`ApiServer::start`], [`ApiServerHandle`], [`Config`];
//! - `http` / `route`: the handler and path resolution; `discovery`, `openapi`, `table`;
//! - `ops`: the write verbs; `patch`: patch types; `store`: objects, history, watchers;
//!   `watch`: watch streams; `selectors`: label and field selectors;
//! - `registry`, `builtin`, `crd`, `events`: what is served and how each kind behaves;
//! - [`schema`]: custom-resource admission (defaulting, pruning, validation, CEL);
//! - [`faults`]: fault injection and the request log for reliability tests;
//! - [`bench`]: the load generator behind `server-binder bench apiserver`.

use std::net::SocketAddr;
use std::path::PathBuf;

pub mod bench;
mod builtin;
mod crd;
mod discovery;
mod error;
mod events;
pub mod faults;
mod http;
mod kubeconfig;
mod meta;
mod openapi;
mod ops;
mod patch;
mod registry;
mod route;
pub mod schema;
mod selectors;
pub mod server;
mod status;
mod store;
mod table;
mod watch;

pub use error::Error;
pub use faults::{FaultAction, FaultInjector, RequestLog, RequestMatcher, RequestRecord};
pub use server::{ApiServer, ApiServerHandle, Config};

/// Runs the API server alone until SIGINT/SIGTERM, writing a kubeconfig for it.
pub async fn run_standalone(listen: SocketAddr, kubeconfig_out: PathBuf) -> Result<(), Error> {
    let handle = ApiServer::start(Config::default().listen(listen)).await?;
    handle.write_kubeconfig(&kubeconfig_out)?;
    eprintln!(
        "server-binder apiserver: serving {} (DEVELOPMENT AND TESTS ONLY: plain HTTP, no authentication); kubeconfig written to {}",
        handle.url(),
        kubeconfig_out.display()
    );
    wait_for_signal().await?;
    handle.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(Error::Signal),
        _ = term.recv() => Ok(()),
    }
}
