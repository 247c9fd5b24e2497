//! The free-server index always picks what a brute-force scan of every server picks,
//! under random sequences of inserts, updates and removals.

use std::collections::BTreeMap;

use proptest::prelude::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::support::*;

#[derive(Clone, Debug)]
enum Op {
    Upsert(Box<Server>),
    Remove(String),
}

fn arb_server() -> impl Strategy<Value = Server> {
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
                let mut s = server(&format!("srv-{n}")).labels(&[("rack", rack), ("size", size)]);
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

fn arb_claim() -> impl Strategy<Value = ServerClaim> {
    (
        prop::option::of(prop::sample::select(vec!["r1", "r2", "r3"])),
        prop::option::of(prop::collection::vec(
            prop::sample::select(vec!["s", "m", "xl"]),
            1..3,
        )),
        prop::bool::ANY,
        prop::collection::vec(prop::sample::select(vec!["gpu", "old", "maint"]), 0..3),
    )
        .prop_map(|(rack, sizes, not_in, tolerations)| {
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
            c
        })
}

/// The specification: every eligible, unreferenced, unskipped server, best first.
fn brute_force<'a>(
    all: &'a BTreeMap<String, Server>,
    claim: &ServerClaim,
    skip: &dyn Fn(&str) -> bool,
) -> Option<&'a str> {
    all.values()
        .filter(|s| s.spec.server_claim_ref.is_none())
        .filter(|s| eligibility(s, claim).is_ok())
        .filter(|s| !skip(meta::name(*s)))
        .min_by_key(|s| (!s.spec.taints.is_empty(), meta::name(*s).to_string()))
        .map(meta::name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn index_picks_what_a_full_scan_picks(
        ops in prop::collection::vec(arb_op(), 1..40),
        claims in prop::collection::vec(arb_claim(), 1..6),
        skipped in prop::collection::btree_set(0..10u8, 0..3),
    ) {
        let mut index = FreeServerIndex::new();
        let mut all = BTreeMap::new();
        for op in ops {
            match op {
                Op::Upsert(s) => {
                    index.upsert(&s);
                    all.insert(meta::name(&*s).to_string(), *s);
                }
                Op::Remove(name) => {
                    index.remove(&name);
                    all.remove(&name);
                }
            }
            prop_assert_eq!(index.len(), all.values().filter(|s| is_free(s)).count());
        }
        let skipped: Vec<String> = skipped.iter().map(|n| format!("srv-{n}")).collect();
        let skip = |n: &str| skipped.iter().any(|s| s == n);
        for claim in &claims {
            prop_assert_eq!(index.pick(claim, &skip), brute_force(&all, claim, &skip));
            prop_assert_eq!(index.pick(claim, &|_| false), brute_force(&all, claim, &|_| false));
        }
    }
}

#[test]
fn one_pick_visits_groups_not_servers() {
    let mut index = FreeServerIndex::new();
    for i in 0..10_000 {
        let rack = format!("r{}", i % 20);
        index.upsert(&server(&format!("srv-{i:05}")).labels(&[("rack", rack.as_str())]));
    }
    assert_eq!(index.len(), 10_000);
    assert_eq!(index.group_count(), 20, "10k servers, 20 shapes");
    let c = claim("c").selects(&[("rack", "r7")]);
    assert_eq!(index.pick(&c, &|_| false), Some("srv-00007"));
}
