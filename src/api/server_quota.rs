//! `ServerQuota`: how many servers of each class a namespace may hold (namespaced,
//! written by admins, read-only to tenants), as a ResourceQuota's
//! `<class>.storageclass.storage.k8s.io/persistentvolumeclaims` is for volumes.
//! docs/binding.md, "Server quotas", says how it is kept.

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The most servers of each class the namespace's claims may hold.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "ServerQuota",
    namespaced,
    shortname = "squota",
    category = "metal",
    status = "ServerQuotaStatus",
    derive = "PartialEq",
    doc = "How many Servers of each class the claims of this namespace may hold.",
    printcolumn(
        name = "Used",
        type_ = "string",
        json_path = ".status.summary",
        description = "Servers held of each class, of the most allowed (class: used/hard)"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
// A negative limit would read as "none of this class" and is surely a typo.
#[x_kube(validation = Rule::new("self.hard.all(k, self.hard[k] >= 0)")
    .message("every limit in spec.hard is a number of servers, 0 or more"))]
#[serde(rename_all = "camelCase")]
pub struct ServerQuotaSpec {
    /// For each class name, the most servers of that class the namespace's claims may
    /// hold: claims Bound, or on their way to a bind (charged). A class not listed is not
    /// limited by this quota.
    #[serde(default)]
    pub hard: BTreeMap<String, i64>,
}

/// What the quota counts: the servers held or on their way, per class, and the claims
/// charged on their way to a bind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerQuotaStatus {
    /// The `metadata.generation` whose `spec.hard` the controller last counted the
    /// namespace's holders against. Until it equals the generation (a quota just
    /// created, re-created, edited, or its status lost), the quota admits no claim it
    /// does not already charge: the controller counts first, then admits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// For each class of `spec.hard`, how many servers the namespace's claims hold or
    /// are on their way to: the claims of the class that hold their bind (`Bound`), and
    /// the claims charged.
    #[serde(default)]
    pub used: BTreeMap<String, i64>,
    /// The claims charged on their way to a bind, by uid: the claim controller adds a
    /// claim (with this object's resourceVersion as a precondition, so two writers cannot
    /// both take the last server) before the claim can bind. A charge leaves the list
    /// once its claim holds its bind (it stays counted in `used`), or once its claim is
    /// gone (confirmed by a live list of the namespace's claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charged: Vec<QuotaCharge>,
    /// `used` of `hard` for each class, as `kubectl get serverquotas` prints it
    /// (`gpu: 3/10, cpu: 0/5`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
}

/// A claim charged to a quota.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, KubeSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct QuotaCharge {
    /// The claim's class.
    pub class: String,
    /// The claim's name (its namespace is the quota's).
    pub claim: String,
    /// The claim's uid: a claim re-created under the same name is charged anew.
    pub uid: String,
}
