//! Installing the CRDs through the API, as `kubectl apply -f manifests/crds/` would:
//! `dev` and `bench bind` both start on an empty embedded API server.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;

/// A CRD the API server refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot install CRD {name}: {source}")]
pub struct InstallCrdError {
    pub name: String,
    #[source]
    pub source: kube::Error,
}

/// Creates both CRDs.
pub async fn install_crds(client: &kube::Client) -> Result<(), InstallCrdError> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in crate::api::crds() {
        api.create(&PostParams::default(), &crd)
            .await
            .map_err(|source| InstallCrdError {
                name: crd.metadata.name.unwrap_or_default(),
                source,
            })?;
    }
    Ok(())
}
