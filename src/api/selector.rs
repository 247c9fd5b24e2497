//! The label selector a claim uses to pick servers.
//!
//! The shape is the standard `metav1.LabelSelector`, but the operator is an enum so the
//! API server rejects a typo (`In` vs `in`) at admission instead of the claim never binding.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A standard label selector: every `matchLabels` pair and every expression must match.
/// An empty selector matches every server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerSelector {
    /// Labels the server must carry with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements on the server's labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// One set-based requirement, as in `metav1.LabelSelectorRequirement`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, KubeSchema)]
// As in Kubernetes: set operators need values, existence operators must have none.
#[x_kube(validation = Rule::new(
    "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)"
).message("values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"))]
#[serde(rename_all = "camelCase")]
pub struct SelectorRequirement {
    /// The label key the requirement applies to.
    pub key: String,
    /// How the label's value relates to `values`.
    pub operator: SelectorOperator,
    /// For `In` and `NotIn`, the values; empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// The set-based selector operators of Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}
