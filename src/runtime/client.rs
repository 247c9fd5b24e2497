//! The operator's Kubernetes client: the usual configuration plus a User-Agent naming
//! server-binder and its version, as client-go's binaries send, so audit logs and the
//! API server's request log (the RBAC test reads it) tell the controllers' requests apart.

use http::HeaderValue;
use http::header::USER_AGENT;

/// What the controllers send as their User-Agent.
pub const USER_AGENT_VALUE: &str = concat!("server-binder/", env!("CARGO_PKG_VERSION"));

/// Builds the operator's client from `config`.
pub fn operator_client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config
        .headers
        .push((USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE)));
    kube::Client::try_from(config)
}
