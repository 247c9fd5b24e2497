//! The `metal.binder.dev/v1alpha1` API: `Server` and `ServerClass` (cluster-scoped),
//! `ServerClaim`, `ServerQuota` and `ServerDisruptionBudget` (namespaced), and the CRDs generated from them.

mod cached;
mod claim;
mod disruption_budget;
pub mod names;
mod schema;
mod selector;
mod server;
mod server_class;
mod server_quota;
mod shared;

pub use cached::{CachedClaim, CachedObject, CachedServer, Labels, Parts, Projected, Trimmed};
pub use claim::{
    BoundServerRef, ClaimPhase, ServerClaim, ServerClaimSpec, ServerClaimStatus, ServerRef,
    Toleration, TolerationOperator,
};
pub use disruption_budget::{
    DisruptedClaim, ServerDisruptionBudget, ServerDisruptionBudgetSpec,
    ServerDisruptionBudgetStatus,
};
pub use selector::{SelectorOperator, SelectorRequirement, ServerSelector};
pub use server::{
    GATE_NAME_MESSAGE, GATE_NAME_RULE, ReclaimPolicy, ReleaseGate, Server, ServerClaimRef,
    ServerPhase, ServerSpec, ServerStatus, Taint, TaintEffect,
};
pub use server_class::{ServerClass, ServerClassSpec, ServerClassStatus};
pub use server_quota::{QuotaCharge, ServerQuota, ServerQuotaSpec, ServerQuotaStatus};
pub use shared::Shared;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Every CRD, in the order they are installed, their descriptions reflowed
/// ([`reflow_descriptions`]).
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        Server::crd(),
        ServerClaim::crd(),
        ServerClass::crd(),
        ServerQuota::crd(),
        ServerDisruptionBudget::crd(),
    ]
    .into_iter()
    .map(|crd| {
        let mut json = serde_json::to_value(crd).expect("a CRD serializes");
        reflow_descriptions(&mut json);
        serde_json::from_value(json).expect("a reflowed CRD deserializes")
    })
    .collect()
}

/// Joins the lines of every `description` into paragraphs: the doc comments it comes
/// from wrap at 90 columns, and `kubectl explain` prints a description's line breaks as
/// they are. A blank line (a paragraph break) stays.
fn reflow_descriptions(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match child {
                    serde_json::Value::String(text) if k == "description" => {
                        *text = reflow(text);
                    }
                    _ => reflow_descriptions(child),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(reflow_descriptions),
        _ => {}
    }
}

fn reflow(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Every CRD as multi-document YAML, exactly what `server-binder crd` prints and
/// `manifests/crds/` holds.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser_error::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every description's text, with the path that leads to it.
    fn descriptions(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    match child {
                        serde_json::Value::String(t) if k == "description" => {
                            out.push((path.clone(), t.clone()))
                        }
                        _ => descriptions(child, format!("{path}.{k}"), out),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    descriptions(item, path.clone(), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn crd_descriptions_have_no_line_break_inside_a_paragraph() {
        let mut all = Vec::new();
        for crd in crds() {
            descriptions(&serde_json::to_value(crd).unwrap(), String::new(), &mut all);
        }
        assert!(all.len() > 20, "found the descriptions: {}", all.len());
        for (path, text) in all {
            assert!(!text.replace("\n\n", "").contains('\n'), "{path}: {text:?}");
        }
    }

    #[test]
    fn reflow_joins_lines_and_keeps_paragraphs() {
        assert_eq!(reflow("one\ntwo\n\nthree"), "one two\n\nthree");
    }
}
