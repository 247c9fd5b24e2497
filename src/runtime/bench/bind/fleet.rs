//! The objects `bench bind` creates: `N` servers and `M` claims, shaped by the mix. Pure:
//! names, labels, selectors, taints and tolerations from indexes (which namespace a
//! claim goes in is `--tenants`' choice: `tenants.rs`).
//!
//! Every mix keeps one complete assignment open when `N >= M`: claim `j` may always bind
//! to server `j` (same index). A claim that stays unbound with enough servers is then
//! the operator's doing (its choice of servers), not the fleet's. `selectors` and
//! `tainted` with `N` close to `M` measure that choice: a claim without a selector that
//! takes an odd-rack server, or a tolerating claim that takes an untainted one (as the
//! operator prefers today, like the scheduler), can strand a claim that had no other.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use serde::Serialize;

use crate::api::{
    SelectorOperator, SelectorRequirement, Server, ServerClaim, ServerClaimSpec, ServerSelector,
    ServerSpec, Taint, TaintEffect, Toleration, TolerationOperator,
};

/// How servers are labelled and what claims ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// Servers labelled `rack` (r0..r9) and `size`; claims without a selector.
    #[default]
    Any,
    /// As `any`; every odd-numbered claim selects one odd rack (`rack In (rK)`), the one
    /// its own index falls in, so claim `j` can take server `j`.
    Selectors,
    /// As `any`, plus a unique `serial` and `hostname` on every server, as real fleets
    /// label them.
    UniqueLabels,
    /// As `any`; every fourth server carries a `NoBind` taint and every fourth claim
    /// (the same indexes) tolerates it.
    Tainted,
    /// As `unique-labels`; every claim selects one server by its serial
    /// (`serial In (SN…)`): as many distinct selectors as claims, the hostile case.
    DistinctSelectors,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Any => "any",
            Mix::Selectors => "selectors",
            Mix::UniqueLabels => "unique-labels",
            Mix::Tainted => "tainted",
            Mix::DistinctSelectors => "distinct-selectors",
        }
    }
}

/// Racks the servers are spread over (`i % RACKS`).
const RACKS: usize = 10;
const SIZES: [&str; 3] = ["small", "medium", "large"];
/// One server in this many is tainted (and one claim in this many tolerates it).
const TAINT_EVERY: usize = 4;
const TAINT_KEY: &str = "bench.binder.dev/dedicated";
const TAINT_VALUE: &str = "gpu";

pub fn server_name(i: usize) -> String {
    format!("server-{i:07}")
}

/// Claim names are unique across namespaces, so the index alone identifies a claim.
pub fn claim_name(j: usize) -> String {
    format!("claim-{j:07}")
}

/// The index in a name [`claim_name`] made.
pub fn claim_index(name: &str) -> Option<usize> {
    name.strip_prefix("claim-")?.parse().ok()
}

pub fn namespace_name(k: usize) -> String {
    format!("tenant-{k}")
}

fn rack(i: usize) -> String {
    format!("r{}", i % RACKS)
}

fn serial(i: usize) -> String {
    format!("SN{:010X}", 0x5EED_0000 + i)
}

fn selecting(key: &str, value: String) -> ServerSelector {
    ServerSelector {
        match_expressions: vec![SelectorRequirement {
            key: key.to_owned(),
            operator: SelectorOperator::In,
            values: vec![value],
        }],
        ..ServerSelector::default()
    }
}

pub fn server(i: usize, mix: Mix) -> Server {
    let mut labels = BTreeMap::from([
        ("rack".to_owned(), rack(i)),
        ("size".to_owned(), SIZES[i / RACKS % SIZES.len()].to_owned()),
    ]);
    if matches!(mix, Mix::UniqueLabels | Mix::DistinctSelectors) {
        labels.insert("serial".to_owned(), serial(i));
        labels.insert("hostname".to_owned(), format!("node-{i:07}"));
    }
    let mut spec = ServerSpec::default();
    if mix == Mix::Tainted && i.is_multiple_of(TAINT_EVERY) {
        spec.taints.push(Taint {
            key: TAINT_KEY.to_owned(),
            value: Some(TAINT_VALUE.to_owned()),
            effect: TaintEffect::NoBind,
        });
    }
    Server {
        metadata: ObjectMeta {
            name: Some(server_name(i)),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// Claim `j`, in `namespace` (which `--tenants` chooses).
pub fn claim(j: usize, mix: Mix, namespace: String) -> ServerClaim {
    let mut spec = ServerClaimSpec::default();
    match mix {
        // Odd j lies in an odd rack (j % 10 is odd), which server j shares.
        Mix::Selectors if j % 2 == 1 => spec.server_selector = Some(selecting("rack", rack(j))),
        Mix::DistinctSelectors => spec.server_selector = Some(selecting("serial", serial(j))),
        Mix::Tainted if j.is_multiple_of(TAINT_EVERY) => spec.tolerations.push(Toleration {
            key: TAINT_KEY.to_owned(),
            operator: TolerationOperator::Equal,
            value: Some(TAINT_VALUE.to_owned()),
            effect: Some(TaintEffect::NoBind),
        }),
        _ => {}
    }
    let mut claim = ServerClaim::new(&claim_name(j), spec);
    claim.metadata.namespace = Some(namespace);
    claim
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_j_may_always_take_server_j() {
        for mix in [
            Mix::Any,
            Mix::Selectors,
            Mix::UniqueLabels,
            Mix::Tainted,
            Mix::DistinctSelectors,
        ] {
            for j in 0..40 {
                let (s, c) = (server(j, mix), claim(j, mix, namespace_name(j % 3)));
                let labels = s.metadata.labels.clone().unwrap_or_default();
                if let Some(sel) = &c.spec.server_selector {
                    for r in &sel.match_expressions {
                        assert!(r.values.contains(&labels[&r.key]), "{mix:?} {j}");
                    }
                }
                assert_eq!(s.spec.taints.len(), c.spec.tolerations.len(), "{mix:?} {j}");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(claim_index(&claim_name(1234)), Some(1234));
        assert_eq!(claim_index("other-1"), None);
        assert_eq!(namespace_name(4), "tenant-4");
        let c = claim(7, Mix::Any, namespace_name(2));
        assert_eq!(c.metadata.namespace.as_deref(), Some("tenant-2"));
    }
}
