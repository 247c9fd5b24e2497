//! The free-server index always picks what a brute-force scan of every server picks,
//! under random sequences of inserts, updates and removals, whether or not it tracks the
//! label keys the claims select on (the fast and the slow path), and whether the keys
//! were tracked before or after the servers arrived.

use std::collections::BTreeMap;

use proptest::prelude::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;

#[derive(Clone, Debug)]
enum Op {
    Upsert(Box<CachedServer>),
    Remove(String),
}

fn arb_server() -> impl Strategy<Value = CachedServer> {
    (
        0..10u8,
        prop::sample::select(vec!["r1", "r2", "r3"]),
        prop::sample::select(vec!["s", "m", "xl"]),
        prop::collection::vec(prop::sample::select(vec!["gpu", "old", "maint"]), 0..2),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(n, rack, size, taints, unclaimable, claimed, released, deleting)| {
                // A unique serial, as real fleets carry: it must not split classes.
                let serial = format!("sn-{n}");
                let mut s = server(&format!("srv-{n}")).labelled(&[
                    ("rack", rack),
                    ("size", size),
                    ("serial", serial.as_str()),
                ]);
                for t in taints {
                    s = s.taint(t);
                }
                if unclaimable {
                    s = s.unclaimable();
                }
                if claimed {
                    s = s.claimed_for("someone", "uid-someone");
                }
                if released {
                    s = s.phase(ServerPhase::Released);
                }
                if deleting {
                    s = s.deleting();
                }
                s
            },
        )
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => arb_server().prop_map(|s| Op::Upsert(Box::new(s))),
        1 => (0..10u8).prop_map(|n| Op::Remove(format!("srv-{n}"))),
    ]
}

fn arb_claim() -> impl Strategy<Value = CachedClaim> {
    (
        prop::option::of(prop::sample::select(vec!["r1", "r2", "r3"])),
        prop::option::of(prop::collection::vec(
            prop::sample::select(vec!["s", "m", "xl"]),
            1..3,
        )),
        prop::bool::ANY,
        prop::collection::vec(prop::sample::select(vec!["gpu", "old", "maint"]), 0..3),
        prop::option::of(prop::sample::select(vec![
            SelectorOperator::Exists,
            SelectorOperator::DoesNotExist,
            SelectorOperator::In,
        ])),
    )
        .prop_map(|(rack, sizes, not_in, tolerations, serial)| {
            let mut c = claim("c");
            if let Some(rack) = rack {
                c = c.selects(&[("rack", rack)]);
            }
            if let Some(sizes) = sizes {
                let op = if not_in {
                    SelectorOperator::NotIn
                } else {
                    SelectorOperator::In
                };
                c = c.expression("size", op, &sizes);
            }
            for t in tolerations {
                c = c.tolerates(t);
            }
            match serial {
                Some(SelectorOperator::In) => {
                    c = c.expression("serial", SelectorOperator::In, &["sn-3", "sn-7"])
                }
                Some(op) => c = c.expression("serial", op, &[]),
                None => {}
            }
            c
        })
}

/// The specification: every eligible, unreferenced, unskipped server, best first.
fn brute_force<'a>(
    all: &'a BTreeMap<String, CachedServer>,
    claim: &CachedClaim,
    skip: &dyn Fn(&str) -> bool,
) -> Option<&'a str> {
    all.values()
        .filter(|s| s.spec.server_claim_ref.is_none())
        .filter(|s| eligibility(s, claim).is_ok())
        .filter(|s| !skip(meta::name(*s)))
        .min_by_key(|s| (!s.spec.taints.is_empty(), meta::name(*s).to_string()))
        .map(meta::name)
}

/// How a catalog learns the claims' selector keys in one run of the property.
#[derive(Clone, Copy, Debug)]
enum Tracking {
    /// Never: every pick with a selector takes the slow path.
    None,
    /// Before the servers arrive.
    First,
    /// After them (the index regroups).
    Last,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn index_picks_what_a_full_scan_picks(
        ops in prop::collection::vec(arb_op(), 1..40),
        claims in prop::collection::vec(arb_claim(), 1..6),
        skipped in prop::collection::btree_set(0..10u8, 0..3),
        tracking in prop::sample::select(vec![Tracking::None, Tracking::First, Tracking::Last]),
    ) {
        let mut catalog = ServerCatalog::new();
        if let Tracking::First = tracking {
            catalog.track_selectors(&claims);
        }
        let mut all = BTreeMap::new();
        for op in ops {
            match op {
                Op::Upsert(s) => {
                    catalog.upsert((*s).clone());
                    all.insert(meta::name(&*s).to_string(), *s);
                }
                Op::Remove(name) => {
                    catalog.remove(&name);
                    all.remove(&name);
                }
            }
            let free = all.values().filter(|s| is_free(s)).count();
            prop_assert_eq!(catalog.free_index().len(), free);
        }
        if let Tracking::Last = tracking {
            catalog.track_selectors(&claims);
        }
        let skipped: Vec<String> = skipped.iter().map(|n| format!("srv-{n}")).collect();
        let skip = |n: &str| skipped.iter().any(|s| s == n);
        let none = |_: &str| false;
        for claim in &claims {
            let picked = pick_alone(&catalog, claim, &skip);
            prop_assert_eq!(picked, brute_force(&all, claim, &skip));
            let picked = pick_alone(&catalog, claim, &none);
            prop_assert_eq!(picked, brute_force(&all, claim, &none));
        }
    }
}

#[test]
fn one_pick_visits_classes_not_servers_whatever_labels_servers_carry() {
    let c = claim("c").selects(&[("rack", "r7")]);
    let mut catalog = ServerCatalog::new();
    catalog.track_selectors([&c]);
    for i in 0..10_000 {
        let (rack, serial) = (format!("r{}", i % 20), format!("sn-{i}"));
        let labels = [("rack", rack.as_str()), ("serial", serial.as_str())];
        catalog.upsert(server(&format!("srv-{i:05}")).labelled(&labels));
    }
    let index = catalog.free_index();
    assert_eq!(index.len(), 10_000);
    assert_eq!(
        index.class_count(),
        20,
        "10k servers with unique serials fall into one class per rack"
    );
    assert_eq!(pick_alone(&catalog, &c, &|_| false), Some("srv-00007"));
}

#[test]
fn a_new_selector_key_regroups_the_free_servers() {
    let mut catalog = ServerCatalog::new();
    for (name, size) in [("a", "s"), ("b", "m"), ("c", "s")] {
        catalog.upsert(server(name).labelled(&[("size", size), ("serial", name)]));
    }
    assert_eq!(catalog.free_index().class_count(), 1, "no key tracked yet");
    let medium = claim("c").selects(&[("size", "m")]);
    assert!(!catalog.tracks_selector_of(&medium));
    assert_eq!(pick_alone(&catalog, &medium, &|_| false), Some("b"));
    catalog.track_selectors([&medium]);
    assert!(catalog.tracks_selector_of(&medium));
    assert_eq!(catalog.free_index().class_count(), 2);
    assert_eq!(pick_alone(&catalog, &medium, &|_| false), Some("b"));
    // A relist keeps the keys the claims taught the index.
    let all: Vec<CachedServer> = catalog.iter().cloned().collect();
    catalog.replace_all(all);
    assert!(catalog.tracks_selector_of(&medium));
    assert_eq!(catalog.free_index().class_count(), 2);
}
