//! A kubeconfig for the server: one cluster, an empty user (there is no
//! authentication), one context whose default namespace is `default`.

use kube::config::Kubeconfig;
use serde_json::json;

use super::Error;

pub(crate) const NAME: &str = "server-binder-apiserver";

pub(crate) fn kubeconfig(url: &str) -> Kubeconfig {
    let value = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": url}}],
        "users": [{"name": NAME, "user": {}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": "default"}}],
        "current-context": NAME,
    });
    // The shape above is fixed and valid; a failure here is a programming error caught
    // by the tests, so fall back to an empty config rather than panic a server.
    serde_json::from_value(value).unwrap_or_default()
}

pub(crate) fn to_yaml(k: &Kubeconfig) -> Result<String, Error> {
    serde_saphyr::to_string(k).map_err(|e| Error::EncodeKubeconfig(e.to_string()))
}
