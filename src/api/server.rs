//! `Server`: one bare-metal machine (cluster-scoped).

// kube-derive's printcolumn(...) repeats keys such as `type_` per column, which clippy
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a machine: whom it is reserved for or bound to, and who may take it.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "metal.binder.dev",
    version = "v1alpha1",
    kind = "Server",
    shortname = "srv",
    category = "metal",
    status = "ServerStatus",
    derive = "PartialEq",
    doc = "A bare-metal machine that a ServerClaim can bind to.",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.summary",
        description = "The phase (Available, Bound, Released or Cleaning), then Unclaimable while cordoned and Terminating while being deleted"
    ),
    printcolumn(
        name = "Claim",
        type_ = "string",
        json_path = ".status.claim",
        description = "The claim holding this server, as namespace/name"
    ),
    printcolumn(
        name = "Class",
        type_ = "string",
        json_path = ".status.classes[0]",
        description = "The ServerClass that takes this server in (the first by name, where several do: status.classes lists them all)"
    ),
    printcolumn(
        name = "Reclaim",
        type_ = "string",
        json_path = ".spec.reclaimPolicy",
        description = "What happens when its claim is deleted: Recycle or Retain"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Bound\")].reason",
        priority = "1",
        description = "Why the server is in its phase: Reserved, AwaitingClaim, Cleaning, DeletionBlocked (a bound server being deleted), ..."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // An `Evict` taint's grace counts from `timeAdded`: an effect changed under an old
    // time (a `NoBind` taint of last month made `Evict`) would evict at once. The time
    // goes with the change, and the server controller writes the new one.
    validation = Rule::new(
        "!has(oldSelf.spec.taints) || !has(self.spec.taints) || self.spec.taints.all(t, !has(t.timeAdded) || oldSelf.spec.taints.all(o, o.key != t.key || !has(o.timeAdded) || o.timeAdded != t.timeAdded || o.effect == t.effect))"
    ).message("a taint whose effect changes takes a new timeAdded: leave timeAdded out in the same write, and the server controller writes the time of the change")
)]
#[serde(rename_all = "camelCase")]
pub struct ServerSpec {
    /// The claim this server is reserved for (no `uid`: a user's reservation by name) or
    /// bound to (with `uid`). The server controller writes it; a user may pre-reserve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_claim_ref: Option<ServerClaimRef>,
    /// Cordon: while true, no new claim binds to this server. An existing binding stays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unclaimable: bool,
    /// Only claims that tolerate every taint may bind to this server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// What happens when the bound claim goes away.
    #[serde(default)]
    pub reclaim_policy: ReclaimPolicy,
    /// The gates a release under `Recycle` must pass before the server is Available
    /// again (a disk wipe, a power-off). A release records the gates it waits for; a
    /// gate added here during a cleaning is waited for too, one removed is not dropped
    /// from it. A cleaner passes a gate by setting the condition of the gate's name in
    /// `status.conditions` to "True" with `observedGeneration` equal to the release's id:
    /// the value of the `metal.binder.dev/cleaning` annotation when it started cleaning.
    /// A release also waits for the gates the class of its claim named when the claim
    /// bound. Empty: none from the server, and not the controller's default either.
    /// Absent: none from the server; where the claim's class names none either, the
    /// controller's default (`--release-gates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_gates: Option<Vec<ReleaseGate>>,
}

/// One gate a released server must pass.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, KubeSchema)]
// A gate is a condition a cleaner writes: never one the controllers write, or a gate
// would pass itself. `binding::gates::check_gate_name` is the same rule for
// `--release-gates`; tests/controllers/trust.rs holds the two to the same verdicts.
#[x_kube(validation = Rule::new(GATE_NAME_RULE).message(GATE_NAME_MESSAGE))]
pub struct ReleaseGate {
    /// The condition type a cleaner sets to "True" to pass the gate: a name with a domain
    /// prefix outside metal.binder.dev, such as `example.com/disk-wiped`.
    #[schemars(length(max = 316))]
    pub name: String,
}

/// The CEL rule on a release gate's name: a qualified name whose prefix is a DNS
/// subdomain with at least one dot, outside the binder's own domain.
pub const GATE_NAME_RULE: &str = concat!(
    r"self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$')",
    r" && !self.name.matches('^([^/]*\\.)?metal\\.binder\\.dev/')"
);

/// What admission says of a gate name [`GATE_NAME_RULE`] refuses.
pub const GATE_NAME_MESSAGE: &str = "a release gate's name is the condition type a cleaner sets: a domain-prefixed name such as example.com/disk-wiped, outside metal.binder.dev, whose conditions the controllers write";

/// A reference from a server to the claim it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerClaimRef {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's uid. Empty: reserved for whichever claim carries this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A taint keeps claims that do not tolerate it off the server, and an `Evict` taint
/// ends the binds of those it keeps off.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// The taint's value, matched by `Equal` tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What the taint does.
    pub effect: TaintEffect,
    /// When the taint was added, or its effect last changed. The server controller sets
    /// it where it is absent; an `Evict` taint evicts nobody before it is set, and a
    /// toleration's `tolerationSeconds` count from it. Leave it out when adding a taint
    /// or changing its effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::optional_time")]
    pub time_added: Option<Time>,
    /// An admin's hard deadline (`Evict` only): the bind ends by then whatever the
    /// claim's tolerations and the disruption budgets say (hardware that cannot wait).
    /// Without it, a toleration without `tolerationSeconds` tolerates the taint for ever,
    /// and a budget may hold an eviction past its deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::optional_time")]
    pub hard_deadline: Option<Time>,
}

impl Taint {
    /// The taint as it decides who may bind: without the time it was added, which only
    /// an eviction's deadline reads (so servers tainted alike at different times share
    /// a class of the free-server index).
    pub fn as_bind_rule(&self) -> Self {
        Self {
            time_added: None,
            hard_deadline: None,
            ..self.clone()
        }
    }
}

impl std::hash::Hash for Taint {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.key, &self.value, self.effect).hash(state);
        self.time_added.as_ref().map(|t| t.0).hash(state);
        self.hard_deadline.as_ref().map(|t| t.0).hash(state);
    }
}

/// The effects a taint can have.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    /// No claim binds to the server unless it tolerates the taint.
    NoBind,
    /// As `NoBind` (for a new bind, only a toleration without `tolerationSeconds`
    /// tolerates it), and a bound claim that does not tolerate it loses the server: at
    /// once, or `tolerationSeconds` after `timeAdded`. The claim ends `Lost` / `Evicted`;
    /// the server is released through its release gates.
    Evict,
    /// Binds and evicts nobody: reports, on the server (`explain`) and in a drain's dry
    /// run, which bound claims an `Evict` taint of that key and value would evict and
    /// when, before an admin switches it on.
    None,
}

impl TaintEffect {
    /// Whether a taint of this effect counts time from `timeAdded` (the server controller
    /// stamps it): `Evict`, and `None`, which previews it.
    pub fn is_timed(self) -> bool {
        matches!(self, Self::Evict | Self::None)
    }
}

/// What happens to a server when its claim is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ReclaimPolicy {
    /// Free the server for the next claim.
    #[default]
    Recycle,
    /// Keep the server `Released` with its claim reference until an admin clears it.
    Retain,
}

/// The observed state of a machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// Where the server is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ServerPhase>,
    /// The claim holding the server as `namespace/name`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// The phase and what else keeps the server from a new claim, as `kubectl get`
    /// shows it: `Available`, `Available,Unclaimable` while cordoned (as a Node shows
    /// `Ready,SchedulingDisabled`), `Bound,Terminating` while being deleted. For
    /// reading only; nothing decides on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The ServerClasses whose `serverSelector` takes the server in, by name, for
    /// `kubectl get`. For reading only; nothing decides on it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub classes: Vec<String>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The `Bound` condition explains the phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// The lifecycle of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ServerPhase {
    /// Free, or reserved by name for a claim that has not bound yet.
    Available,
    /// Bound to a live claim.
    Bound,
    /// Its claim is gone and the policy is `Retain`: an admin must clear `serverClaimRef`.
    Released,
    /// Released under `Recycle` and waiting for its release gates: no claim may bind.
    Cleaning,
}
