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
use super::server::ReleaseGate;

/// Which servers belong to the class and which namespaces may claim from it.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "ServerClass",
    shortname = "scls",
    category = "metal",
    status = "ServerClassStatus",
    derive = "PartialEq",
    doc = "A class of bare-metal Servers: which servers belong to it, which namespaces may claim them.",
    printcolumn(
        name = "Default",
        type_ = "string",
        json_path = ".metadata.annotations.serverclass\\.metal\\.binder\\.dev/is-default-class",
        description = "\"true\" on the default class, which claims without a class get"
    ),
    printcolumn(
        name = "Servers",
        type_ = "integer",
        json_path = ".status.servers",
        description = "The servers of the class"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.available",
        description = "Free, claimable servers of the class"
    ),
    printcolumn(
        name = "Bound",
        type_ = "integer",
        json_path = ".status.bound",
        description = "Servers of the class bound to a claim"
    ),
    printcolumn(
        name = "Cleaning",
        type_ = "integer",
        json_path = ".status.cleaning",
        description = "Servers of the class waiting for their release gates"
    ),
    printcolumn(
        name = "Released",
        type_ = "integer",
        json_path = ".status.released",
        description = "Servers of the class released under Retain, waiting for an admin"
    ),
    printcolumn(
        name = "Unclaimable",
        type_ = "integer",
        json_path = ".status.unclaimable",
        description = "Free servers of the class that nobody may claim (cordoned, being deleted)"
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
    /// The release gates a server released under `Recycle` from a claim of this class
    /// must pass, beside the server's own `spec.releaseGates`: the gates named here when
    /// the claim bound (the server records them then), whatever the class says later.
    /// Empty: none from the class, and not the controller's default either. Absent: none
    /// from the class; where the server names none either, the controller's default
    /// (`--release-gates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_gates: Option<Vec<ReleaseGate>>,
}

/// The class's servers counted by phase, each once (the controller recounts them from
/// its cache at most once per `--status-interval`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerClassStatus {
    /// Every server of the class: the sum of the counts below.
    pub servers: u32,
    /// Free and claimable.
    pub available: u32,
    /// Bound to a claim (phase `Bound`).
    pub bound: u32,
    /// Released and waiting for their release gates (phase `Cleaning`).
    pub cleaning: u32,
    /// Released under `Retain`, waiting for an admin (phase `Released`).
    pub released: u32,
    /// Otherwise free, but cordoned (`spec.unclaimable`) or being deleted.
    pub unclaimable: u32,
}
