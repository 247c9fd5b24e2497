//! A client configured as kubectl configures one, for the commands an admin runs from
//! a workstation (`explain`, `cordon`, `uncordon`, `drain`): the kubeconfig given, else
//! KUBECONFIG, ~/.kube/config or the in-cluster service account; the context given,
//! else the current one. Each command names itself in the User-Agent, so audit logs
//! tell its requests apart.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig given could not be read: the command line's fault.
    #[error("{0}")]
    Kubeconfig(String),
    /// No client could be configured or built from what was found.
    #[error("{0}")]
    Client(String),
}

/// A client configured like kubectl's, sending `user_agent`, and the context's namespace.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    user_agent: &'static str,
) -> Result<(Client, String), ConnectError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                ConnectError::Kubeconfig(format!("cannot read {}: {e}", path.display()))
            })?;
            let config = Config::from_custom_kubeconfig(kubeconfig, &options).await;
            config.map_err(|e| e.to_string())
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        (None, None) => Config::infer().await.map_err(|e| e.to_string()),
    }
    .map_err(|e| ConnectError::Client(format!("cannot configure a Kubernetes client: {e}")))?;
    let namespace = config.default_namespace.clone();
    let mut config = config;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(user_agent),
    ));
    let client = Client::try_from(config)
        .map_err(|e| ConnectError::Client(format!("cannot build a Kubernetes client: {e}")))?;
    Ok((client, namespace))
}
