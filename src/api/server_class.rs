//! `ServerClass`: a set of servers, the namespaces that may claim from it, and what its
//! claims get for those servers (cluster-scoped, written by admins), as a StorageClass
//! is for volumes and a DeviceClass for devices.

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::claim::Toleration;
use super::selector::ServerSelector;

/// Which servers belong to the class and which namespaces may claim from it.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "ServerClass",
    shortname = "scls",
    category = "metal",
    derive = "PartialEq",
    doc = "A class of bare-metal Servers: which servers belong to it, which namespaces may claim them.",
    printcolumn(
        name = "Default",
        type_ = "string",
        json_path = ".metadata.annotations.serverclass\\.metal\\.binder\\.dev/is-default-class",
        description = "\"true\" on the default class, which claims without a class get"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServerClassSpec {
    /// The servers of the class: those whose labels match (the selector type claims use).
    /// Absent: every server. A claim of the class binds only to these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_selector: Option<ServerSelector>,
    /// The namespaces whose claims may use the class, by the Namespace objects' labels
    /// (`kubernetes.io/metadata.name` names one). Absent: every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<ServerSelector>,
    /// Tolerations every claim of the class gets, for its servers' taints, beside its own:
    /// tenants need not know the taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}
