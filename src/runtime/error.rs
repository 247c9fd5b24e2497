//! Why a command of the command line failed. The CLI prints the message after
//! `server-binder: ` and exits non-zero; the cause stays attached as the error's source.
//! (`bench` fails with its own [`super::bench::BenchError`], `explain` with its own exit
//! codes.)

#[cfg(feature = "embedded-apiserver")]
use std::net::SocketAddr;

#[cfg(feature = "embedded-apiserver")]
use super::crds::InstallCrdError;
use super::operator::OperatorError;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// `crd`: the CRDs did not serialize.
    #[error(transparent)]
    CrdYaml(#[from] serde_saphyr::ser_error::Error),
    #[error("cannot configure a Kubernetes client (in-cluster or KUBECONFIG): {0}")]
    KubeConfig(#[source] kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error(transparent)]
    Operator(#[from] OperatorError),
    #[error("cannot wait for signals: {0}")]
    Signals(#[source] std::io::Error),
    #[error("the controllers stopped unexpectedly")]
    ControllersStopped,
    #[cfg(feature = "embedded-apiserver")]
    #[error("cannot start the embedded API server on {listen}: {source}")]
    ApiServerStart {
        listen: SocketAddr,
        #[source]
        source: crate::apiserver::Error,
    },
    /// The embedded API server's kubeconfig could not be written.
    #[cfg(feature = "embedded-apiserver")]
    #[error(transparent)]
    Kubeconfig(crate::apiserver::Error),
    #[cfg(feature = "embedded-apiserver")]
    #[error(transparent)]
    InstallCrd(#[from] InstallCrdError),
    #[cfg(feature = "embedded-apiserver")]
    #[error("cannot create demo server: {0}")]
    DemoServer(#[source] kube::Error),
    #[cfg(feature = "embedded-apiserver")]
    #[error("cannot build the controllers' client: {0}")]
    ControllersClient(#[source] kube::Error),
}
