//! `ServerClaim`: a tenant's request for one machine (namespaced).

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::selector::ServerSelector;
use super::server::TaintEffect;

/// What the tenant asks for: a particular server, or any server matching a selector.
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "ServerClaim",
    namespaced,
    shortname = "scl",
    category = "metal",
    status = "ServerClaimStatus",
    derive = "PartialEq",
    doc = "A request for one bare-metal Server.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Pending, Bound or Lost"
    ),
    printcolumn(
        name = "Server",
        type_ = "string",
        json_path = ".spec.serverRef.name",
        description = "The server chosen for or bound to this claim"
    ),
    printcolumn(
        name = "Class",
        type_ = "string",
        json_path = ".spec.serverClassName",
        description = "The ServerClass the claim takes its server from"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.status==\"False\")].reason",
        description = "Why the claim is not Bound: the Bound condition's reason while it is False"
    ),
    printcolumn(
        name = "Disruption",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"DisruptionTarget\")].reason",
        priority = "1",
        description = "EvictionByTaint while an Evict taint's deadline runs against the bind"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // A Bound claim keeps its server, as a bound PVC keeps its volumeName: a mistaken
    // edit must not hand the tenant's machine to the next pending claim. The rule sits at
    // the root because it reads the stored phase. An update of the main resource keeps the
    // stored status (status is a subresource), so `oldSelf.status` is the phase the claim
    // had, and a status write leaves the spec alone, so it always passes.
    validation = Rule::new(
        "!has(oldSelf.spec.serverRef) || has(self.spec.serverRef) || !has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase != 'Bound'"
    ).message("spec.serverRef cannot be removed from a Bound claim; delete the claim to release its server"),
    // A class, with its quotas, applies from the claim's bind on: one added to a Bound
    // claim would count a server of no class in the class's quota (docs/binding.md,
    // "Server quotas"). The default class is written into unbound claims only.
    validation = Rule::new(
        "has(oldSelf.spec.serverClassName) || !has(self.spec.serverClassName) || !has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase != 'Bound'"
    ).message("spec.serverClassName cannot be added to a Bound claim")
)]
// A claim may gain a server and give it up, but never jump straight to another one:
// the server side would be left pointing at a claim that no longer names it.
#[x_kube(validation = Rule::new(
    "!has(oldSelf.serverRef) || !has(self.serverRef) || self.serverRef.name == oldSelf.serverRef.name"
).message("serverRef may be set and cleared, but not switched to another server"))]
// The selector is part of what the tenant asked for; changing it under a binding would make
// the bound server silently stop matching.
#[x_kube(validation = Rule::new(
    "!has(oldSelf.serverSelector) || (has(self.serverSelector) && self.serverSelector == oldSelf.serverSelector)"
).message("serverSelector is immutable once set"))]
// The class decides which servers and quotas apply: switching it under a binding would
// move the claim between quotas. A default class written once is kept, as Kubernetes
// keeps a default StorageClass it assigned.
#[x_kube(validation = Rule::new(
    "!has(oldSelf.serverClassName) || (has(self.serverClassName) && self.serverClassName == oldSelf.serverClassName)"
).message("serverClassName is immutable once set"))]
#[serde(rename_all = "camelCase")]
pub struct ServerClaimSpec {
    /// The server for this claim: written by a user (a pre-bound claim) or by the claim
    /// controller together with the `metal.binder.dev/pre-bound` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ref: Option<ServerRef>,
    /// Only servers whose labels match may serve this claim, also one named by `serverRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_selector: Option<ServerSelector>,
    /// Taints on a server that this claim accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// The ServerClass the claim takes a server of: only its servers, and only if the
    /// class lets this namespace in. Absent: the default class, which the claim controller
    /// writes here while the claim is unbound; without a default class, only servers no
    /// class takes in.
    /// Immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_class_name: Option<String>,
}

/// A reference from a claim to a (cluster-scoped) server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerRef {
    /// The server's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Lets a claim bind to a server carrying a matching taint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// The taint key to tolerate; empty with `Exists` tolerates every taint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Equal` (the default) also compares the value; `Exists` accepts any value.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// The value an `Equal` toleration matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The effect to tolerate; empty tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// How long a bound claim keeps its server under an `Evict` taint this toleration
    /// matches, counted from the taint's `timeAdded` (zero or less: not at all). Absent:
    /// for ever. A toleration with it does not let a claim bind a server so tainted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// How a toleration compares a taint's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// The observed state of a claim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerClaimStatus {
    /// Where the claim is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClaimPhase>,
    /// The `Bound` condition says why the claim is in its phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
    /// When the claim became Bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::optional_time")]
    pub bound_time: Option<Time>,
    /// The server this claim is bound to, as the claim controller recorded it when it
    /// wrote the claim Bound; kept while the claim is Lost, cleared when it is Pending.
    /// Tenants cannot write status, so this (with the server's own `serverClaimRef`) is
    /// what the binder takes as evidence of a bind; an annotation on the claim is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_server_ref: Option<BoundServerRef>,
    /// The server this claim gave back, unbound, because the API server refused the write
    /// that would have completed its bind: the server controller frees it, and the claim
    /// does not adopt it again. Cleared when the claim is Bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_back_server_ref: Option<BoundServerRef>,
}

/// The server object a claim is bound to: its name, and its uid, so a server re-created
/// under the same name is another server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoundServerRef {
    /// The server's name.
    pub name: String,
    /// The server's uid.
    pub uid: String,
}

/// The lifecycle of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ClaimPhase {
    /// Not bound yet: waiting for a server (the `Bound` condition says why).
    Pending,
    /// Bound: `serverRef` names the server and the server's `serverClaimRef` has this claim's uid.
    Bound,
    /// Was bound, but the server is gone or serves another claim now.
    Lost,
}
