//! The `metal.binder.dev/v1alpha1` API: `Server` (cluster-scoped) and `ServerClaim`
//! (namespaced), and the CRDs generated from them.

mod claim;
pub mod names;
mod selector;
mod server;

pub use claim::{
    ClaimPhase, ServerClaim, ServerClaimSpec, ServerClaimStatus, ServerRef, Toleration,
    TolerationOperator,
};
pub use selector::{SelectorOperator, SelectorRequirement, ServerSelector};
pub use server::{
    ReclaimPolicy, ReleaseGate, Server, ServerClaimRef, ServerPhase, ServerSpec, ServerStatus,
    Taint, TaintEffect,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Both CRDs, in the order they are installed.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![Server::crd(), ServerClaim::crd()]
}

/// Both CRDs as multi-document YAML, exactly what `server-binder crd` prints and
/// `manifests/crds/` holds.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser_error::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}
