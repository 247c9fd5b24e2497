//! `ServerDisruptionBudget`: how many of a namespace's claims an eviction may take a
//! server from at once (namespaced, written by tenants), as a PodDisruptionBudget is for
//! pods. docs/binding.md, "Disruption budgets", says how evictions honour it.

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
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
    status = "ServerDisruptionBudgetStatus",
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
        name = "Allowed Disruptions",
        type_ = "integer",
        json_path = ".status.disruptionsAllowed",
        description = "Evictions the budget allows now"
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

/// What the budget allows now, and the evictions it let go ahead (controller-written, as
/// a PodDisruptionBudget's status is).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerDisruptionBudgetStatus {
    /// The `metadata.generation` the counts below were made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many claims the budget covers.
    #[serde(default)]
    pub expected_claims: i32,
    /// How many of them hold a server and are not being evicted.
    #[serde(default)]
    pub current_available: i32,
    /// How many of them must stay so.
    #[serde(default)]
    pub desired_available: i32,
    /// How many more evictions the budget allows now.
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// Every eviction the budget let go ahead whose claim is still being evicted or was
    /// evicted: the claim controller adds one (with this object's resourceVersion as a
    /// precondition, so two writers cannot both take the last disruption) before it
    /// writes the eviction; one is dropped once a read of its claim shows it gone, or
    /// moved on without being evicted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disrupted_claims: Vec<DisruptedClaim>,
}

/// An eviction a budget let go ahead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisruptedClaim {
    /// The claim's name (its namespace is the budget's).
    pub claim: String,
    /// The claim's uid: a claim re-created under the same name is not this one.
    pub uid: String,
    /// The claim's resourceVersion the eviction was decided on: its eviction is written
    /// with it as a precondition, so a claim that moved on without being evicted never
    /// will be by this decision.
    pub resource_version: String,
    /// When the eviction was let go ahead.
    #[schemars(schema_with = "super::schema::time")]
    pub time: Time,
}
