//! `ServerDisruptionBudget`: how many of a namespace's claims an eviction may take a
//! server from at once (namespaced, written by tenants), as a PodDisruptionBudget is for
//! pods. docs/binding.md, "Disruption budgets", says how evictions honour it.

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::selector::ServerSelector;

/// Which claims of the namespace the budget covers, and how many of them must stay bound
/// while servers are taken back.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "ServerDisruptionBudget",
    namespaced,
    shortname = "sdb",
    category = "metal",
    derive = "PartialEq",
    doc = "How many of this namespace's ServerClaims an eviction may take a server from at once.",
    printcolumn(
        name = "Min Available",
        type_ = "string",
        json_path = ".spec.minAvailable",
        description = "Claims of the selector that must stay Bound"
    ),
    printcolumn(
        name = "Max Unavailable",
        type_ = "string",
        json_path = ".spec.maxUnavailable",
        description = "Claims of the selector that may be without a server"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("has(self.minAvailable) != has(self.maxUnavailable)")
    .message("set exactly one of spec.minAvailable and spec.maxUnavailable"))]
#[serde(rename_all = "camelCase")]
pub struct ServerDisruptionBudgetSpec {
    /// The claims of this namespace the budget covers, by their labels. Empty or absent:
    /// every claim of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ServerSelector>,
    /// How many of the covered claims must stay `Bound` after an eviction: a number, or
    /// a percentage of the covered claims (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::optional_int_or_string")]
    pub min_available: Option<IntOrString>,
    /// How many of the covered claims may be without a server (not `Bound`, or being
    /// evicted) after an eviction: a number, or a percentage of the covered claims
    /// (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::optional_int_or_string")]
    pub max_unavailable: Option<IntOrString>,
}
