//! The objects `bench bind` creates: `N` servers and `M` claims, shaped by the mix. Pure:
//! names, labels, selectors, taints and tolerations from indexes (which namespace a
//! claim goes in is `--tenants`' choice: `tenants.rs`).
//!
//! Every mix keeps one complete assignment open when `N >= M`: claim `j` may always bind
//! to server `j` (same index). A claim that stays unbound with enough servers is then
//! the operator's doing (its choice of servers), not the fleet's. With
//! `classes-quotas`, the claims a quota refuses are out of the count: every claim of a
//! class may take any server of it, and a class has at least as many servers as claims
//! (server `j` is in claim `j`'s class), so whichever claims the quotas let in can all
//! bind. `selectors` and
//! `tainted` with `N` close to `M` measure that choice: a claim without a selector that
//! takes an odd-rack server, or a tolerating claim that takes an untainted one (as the
//! operator prefers today, like the scheduler), can strand a claim that had no other.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use serde::Serialize;

use crate::api::{
    SelectorOperator, SelectorRequirement, Server, ServerClaim, ServerClaimSpec, ServerClass,
    ServerClassSpec, ServerQuota, ServerQuotaSpec, ServerSelector, ServerSpec, Taint, TaintEffect,
    Toleration, TolerationOperator,
};

use super::tenants::Schedule;

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
    /// As `any`, in three server classes: every server is labelled `class=a|b|c` and
    /// taken in by the ServerClass `class-a|b|c`, every claim names the class of the
    /// server with its index, and each namespace has a ServerQuota per class whose
    /// `hard` is 4 in 5 of the namespace's claims of the class (rounded): about one
    /// claim in five waits `QuotaExceeded`.
    ClassesQuotas,
    /// As `unique-labels` plus a `zone` (z0..z3), and every tenth server is a `gpu=true` server tainted for
    /// it; each claim selects from sixteen selector templates (none, `matchLabels`,
    /// `In`, `NotIn`, on rack, size and zone) filled in from server `j`'s labels, and claim
    /// `j` of a gpu server also selects `gpu In (true)` and tolerates the taint: about
    /// 300 distinct selectors, as in a fleet many teams share, every one fitting its
    /// planted server.
    ManySelectors,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::Any => "any",
            Mix::Selectors => "selectors",
            Mix::UniqueLabels => "unique-labels",
            Mix::Tainted => "tainted",
            Mix::DistinctSelectors => "distinct-selectors",
            Mix::ClassesQuotas => "classes-quotas",
            Mix::ManySelectors => "many-selectors",
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
/// The classes of `classes-quotas`, and the server label that puts a server in one.
const CLASSES: [&str; 3] = ["a", "b", "c"];
const CLASS_LABEL: &str = "class";

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

/// The class (its index in [`CLASSES`]) of server `i` and of claim `i`: spread by a
/// multiplicative hash, not `i % 3`, so that the classes do not follow the namespaces
/// (`--tenants even` deals claims round-robin: with 3 namespaces, `j % 3` would give
/// each namespace a single class).
fn class_of(i: usize) -> usize {
    let hashed = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (hashed % CLASSES.len() as u64) as usize
}

pub fn class_name(c: usize) -> String {
    format!("class-{}", CLASSES[c])
}

fn quota_name(c: usize) -> String {
    format!("quota-{}", CLASSES[c])
}

fn gpu_taint() -> Taint {
    Taint {
        key: TAINT_KEY.to_owned(),
        value: Some(TAINT_VALUE.to_owned()),
        effect: TaintEffect::NoBind,
        time_added: None,
        hard_deadline: None,
    }
}

fn gpu_toleration() -> Toleration {
    Toleration {
        key: TAINT_KEY.to_owned(),
        operator: TolerationOperator::Equal,
        value: Some(TAINT_VALUE.to_owned()),
        effect: Some(TaintEffect::NoBind),
        toleration_seconds: None,
    }
}

/// With `many-selectors`, one server in this many is a gpu server.
const GPU_EVERY: usize = 10;

fn is_gpu(i: usize) -> bool {
    i.is_multiple_of(GPU_EVERY)
}

fn size(i: usize) -> usize {
    i / RACKS % SIZES.len()
}

/// With `many-selectors`, servers are also spread over this many zones.
const ZONES: usize = 4;

fn zone(i: usize) -> usize {
    i / (RACKS * SIZES.len()) % ZONES
}

/// Claim `j`'s selector with `many-selectors`: one of a dozen templates (chosen by a
/// hash of `j`, so neighbours differ) filled in from server `j`'s rack and size, so
/// that server `j` always fits it.
fn many_selectors_selector(j: usize) -> Option<ServerSelector> {
    let (r, s, z) = (j % RACKS, size(j), zone(j));
    let rack_at = |d: usize| format!("r{}", (r + d) % RACKS);
    let size_at = |d: usize| SIZES[(s + d) % SIZES.len()].to_owned();
    let zone_at = |d: usize| format!("z{}", (z + d) % ZONES);
    let req = |key: &str, operator, values: Vec<String>| SelectorRequirement {
        key: key.to_owned(),
        operator,
        values,
    };
    use SelectorOperator::{In, NotIn};
    let template = ((j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 16;
    let (labels, expressions): (Vec<(&str, String)>, Vec<SelectorRequirement>) = match template {
        0 => (vec![], vec![]),
        1 => (vec![("rack", rack_at(0))], vec![]),
        2 => (vec![("rack", rack_at(0)), ("size", size_at(0))], vec![]),
        3 => (vec![], vec![req("rack", In, vec![rack_at(0), rack_at(1)])]),
        4 => (
            vec![("size", size_at(0))],
            vec![req("rack", In, vec![rack_at(0), rack_at(3)])],
        ),
        5 => (vec![], vec![req("rack", NotIn, vec![rack_at(1)])]),
        6 => (
            vec![],
            vec![
                req("rack", NotIn, vec![rack_at(2), rack_at(5)]),
                req("size", NotIn, vec![size_at(1)]),
            ],
        ),
        7 => (vec![], vec![req("size", In, vec![size_at(0)])]),
        8 => (
            vec![],
            vec![req("rack", In, vec![rack_at(0), rack_at(4), rack_at(7)])],
        ),
        9 => (
            vec![],
            vec![
                req("size", NotIn, vec![size_at(2)]),
                req("rack", In, vec![rack_at(0), rack_at(1), rack_at(2)]),
            ],
        ),
        10 => (
            vec![],
            vec![req("rack", NotIn, vec![rack_at(1), rack_at(2), rack_at(3)])],
        ),
        11 => (
            vec![("size", size_at(0))],
            vec![req("rack", NotIn, vec![rack_at(4)])],
        ),
        12 => (
            vec![("zone", zone_at(0))],
            vec![req("rack", NotIn, vec![rack_at(1)])],
        ),
        13 => (
            vec![],
            vec![
                req("zone", In, vec![zone_at(0), zone_at(1)]),
                req("size", In, vec![size_at(0)]),
            ],
        ),
        14 => (
            vec![],
            vec![
                req("zone", NotIn, vec![zone_at(2)]),
                req("rack", In, vec![rack_at(0), rack_at(5)]),
            ],
        ),
        _ => (vec![("rack", rack_at(0)), ("zone", zone_at(0))], vec![]),
    };
    let mut selector = ServerSelector {
        match_labels: labels.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        match_expressions: expressions,
    };
    if is_gpu(j) {
        let gpu = req("gpu", In, vec!["true".to_owned()]);
        selector.match_expressions.push(gpu);
    }
    let empty = selector.match_labels.is_empty() && selector.match_expressions.is_empty();
    (!empty).then_some(selector)
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
        ("size".to_owned(), SIZES[size(i)].to_owned()),
    ]);
    if matches!(
        mix,
        Mix::UniqueLabels | Mix::DistinctSelectors | Mix::ManySelectors
    ) {
        labels.insert("serial".to_owned(), serial(i));
        labels.insert("hostname".to_owned(), format!("node-{i:07}"));
    }
    if mix == Mix::ClassesQuotas {
        labels.insert(CLASS_LABEL.to_owned(), CLASSES[class_of(i)].to_owned());
    }
    let mut spec = ServerSpec::default();
    if mix == Mix::ManySelectors {
        labels.insert("zone".to_owned(), format!("z{}", zone(i)));
    }
    if mix == Mix::ManySelectors && is_gpu(i) {
        labels.insert("gpu".to_owned(), "true".to_owned());
        spec.taints.push(gpu_taint());
    }
    if mix == Mix::Tainted && i.is_multiple_of(TAINT_EVERY) {
        spec.taints.push(gpu_taint());
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
        Mix::Tainted if j.is_multiple_of(TAINT_EVERY) => spec.tolerations.push(gpu_toleration()),
        Mix::ManySelectors => {
            spec.server_selector = many_selectors_selector(j);
            if is_gpu(j) {
                spec.tolerations.push(gpu_toleration());
            }
        }
        Mix::ClassesQuotas => spec.server_class_name = Some(class_name(class_of(j))),
        _ => {}
    }
    let mut claim = ServerClaim::new(&claim_name(j), spec);
    claim.metadata.namespace = Some(namespace);
    claim
}

/// The ServerClasses the mix needs (none but with `classes-quotas`), created before
/// any claim.
pub fn classes(mix: Mix) -> Vec<ServerClass> {
    if mix != Mix::ClassesQuotas {
        return Vec::new();
    }
    (0..CLASSES.len())
        .map(|c| {
            let spec = ServerClassSpec {
                server_selector: Some(selecting(CLASS_LABEL, CLASSES[c].to_owned())),
                ..ServerClassSpec::default()
            };
            ServerClass::new(&class_name(c), spec)
        })
        .collect()
}

/// Of `demand` claims of a class in a namespace, how many its quota lets hold a
/// server: 4 in 5, rounded to the nearest.
pub fn quota_hard(demand: usize) -> usize {
    (demand * 4 + 2) / 5
}

/// The claims of each (namespace, class), by their indexes, with `classes-quotas`.
fn demand(schedule: &Schedule) -> BTreeMap<(usize, usize), usize> {
    let mut demand = BTreeMap::new();
    for j in 0..schedule.claims {
        *demand
            .entry((schedule.namespace(j), class_of(j)))
            .or_default() += 1;
    }
    demand
}

/// How large the quotas of `classes-quotas` are (`--quota-scale`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuotaScale {
    /// One quota per namespace and class, its `hard` [`quota_hard`] of the namespace's
    /// claims of the class: about a fifth of the claims wait `QuotaExceeded`.
    #[default]
    Demand,
    /// One quota per namespace over every class, each `hard` all the namespace's claims
    /// of the class: every claim binds, and with `--namespaces 1` the one quota charges
    /// the whole fleet.
    Fleet,
}

/// The ServerQuotas the mix needs (none but with `classes-quotas`), as `scale` says.
pub fn quotas(mix: Mix, schedule: &Schedule, scale: QuotaScale) -> Vec<ServerQuota> {
    if mix != Mix::ClassesQuotas {
        return Vec::new();
    }
    let demand = demand(schedule);
    let wanted = |k: usize, c: usize| demand.get(&(k, c)).copied().unwrap_or(0);
    let quota = |k: usize, name: String, hard: BTreeMap<String, i64>| {
        let mut quota = ServerQuota::new(&name, ServerQuotaSpec { hard });
        quota.metadata.namespace = Some(namespace_name(k));
        quota
    };
    let mut quotas = Vec::new();
    for k in 0..schedule.namespaces {
        match scale {
            QuotaScale::Demand => quotas.extend((0..CLASSES.len()).map(|c| {
                let hard = BTreeMap::from([(class_name(c), quota_hard(wanted(k, c)) as i64)]);
                quota(k, quota_name(c), hard)
            })),
            QuotaScale::Fleet => {
                let hard = (0..CLASSES.len())
                    .map(|c| (class_name(c), wanted(k, c) as i64))
                    .collect();
                quotas.push(quota(k, "quota-all".into(), hard));
            }
        }
    }
    quotas
}

/// How many claims the quotas let bind (every claim without them).
pub fn admitted(mix: Mix, schedule: &Schedule, scale: QuotaScale) -> usize {
    if mix != Mix::ClassesQuotas || scale == QuotaScale::Fleet {
        return schedule.claims;
    }
    demand(schedule).values().map(|&d| quota_hard(d)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::selector_matches;
    use crate::runtime::bench::bind::tenants::Tenants;

    const MIXES: [Mix; 7] = [
        Mix::Any,
        Mix::Selectors,
        Mix::UniqueLabels,
        Mix::Tainted,
        Mix::DistinctSelectors,
        Mix::ClassesQuotas,
        Mix::ManySelectors,
    ];

    #[test]
    fn claim_j_may_always_take_server_j() {
        for mix in MIXES {
            for j in 0..40 {
                let (s, c) = (server(j, mix), claim(j, mix, namespace_name(j % 3)));
                let labels = s.metadata.labels.clone().unwrap_or_default();
                if let Some(sel) = &c.spec.server_selector {
                    assert!(selector_matches(sel, &labels), "{mix:?} {j}");
                }
                assert_eq!(s.spec.taints.len(), c.spec.tolerations.len(), "{mix:?} {j}");
                // Claim j's class takes server j in.
                let classes = classes(mix);
                let class = c.spec.server_class_name.as_ref().map(|name| {
                    classes
                        .iter()
                        .find(|k| k.metadata.name.as_ref() == Some(name))
                });
                match class {
                    None => assert!(classes.is_empty(), "{mix:?} {j}"),
                    Some(class) => {
                        let class = class.expect("the claim's class exists");
                        let selector = class.spec.server_selector.as_ref().unwrap();
                        assert!(selector_matches(selector, &labels), "{mix:?} {j}");
                    }
                }
            }
        }
    }

    /// Each namespace has a quota per class that binds: 4 in 5 of its claims of the
    /// class may hold servers, so about a fifth of all claims are refused. The classes
    /// do not follow the namespaces, even with 3 of them round-robin.
    #[test]
    fn classes_quotas_refuse_about_one_claim_in_five() {
        for namespaces in [3, 100] {
            let schedule = Schedule::new(Tenants::Even, 2000, namespaces);
            let quotas = quotas(Mix::ClassesQuotas, &schedule, QuotaScale::Demand);
            assert_eq!(quotas.len(), namespaces * 3);
            let demand = demand(&schedule);
            if namespaces == 3 {
                assert_eq!(demand.len(), 9, "every namespace has each class");
            }
            let mut binding = 0;
            for q in &quotas {
                let k: usize = q.metadata.namespace.as_ref().unwrap()["tenant-".len()..]
                    .parse()
                    .unwrap();
                let (class, hard) = q.spec.hard.iter().next().unwrap();
                let c = (0..3).find(|&c| &class_name(c) == class).unwrap();
                let wanted = demand.get(&(k, c)).copied().unwrap_or(0);
                assert!(
                    *hard as usize <= wanted && (wanted == 0 || *hard > 0),
                    "{q:?}"
                );
                binding += usize::from((*hard as usize) < wanted);
            }
            assert!(binding * 2 > quotas.len(), "most quotas bind: {binding}");
            let refused = 2000 - admitted(Mix::ClassesQuotas, &schedule, QuotaScale::Demand);
            assert!(
                (300..=500).contains(&refused),
                "{namespaces}: {refused} refused"
            );
        }
        let schedule = Schedule::new(Tenants::Even, 10, 2);
        assert!(
            classes(Mix::Any).is_empty()
                && quotas(Mix::Any, &schedule, QuotaScale::Demand).is_empty()
        );
        assert_eq!(admitted(Mix::Any, &schedule, QuotaScale::Demand), 10);
        assert_eq!([quota_hard(1), quota_hard(5), quota_hard(7)], [1, 4, 6]);
    }

    /// `many-selectors` asks about 300 distinct things of the fleet (selector and
    /// tolerations), the tenth of them of its gpu servers.
    #[test]
    fn many_selectors_has_hundreds_of_shapes() {
        let shapes: std::collections::HashSet<String> = (0..4000)
            .map(|j| {
                let spec = claim(j, Mix::ManySelectors, namespace_name(0)).spec;
                serde_json::to_string(&(spec.server_selector, spec.tolerations)).unwrap()
            })
            .collect();
        assert!((250..=400).contains(&shapes.len()), "{}", shapes.len());
        let gpu = (0..4000).filter(|&i| is_gpu(i)).count();
        assert_eq!(gpu, 400);
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
