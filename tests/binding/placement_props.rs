//! The matching, on random fleets (docs/binding.md, "Picking a server"): every claim
//! waits at once, the real decision functions serve them in a random order at a random
//! concurrency (a batch decides on one snapshot of the caches, as concurrent reconciles
//! do, with the assumed choices shared), and the number of waiting claims bound equals
//! the maximum matching of the raw bipartite graph, computed here by augmenting paths
//! (Ford–Fulkerson on unit capacities). Invariants 1 and 4 hold at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;
use crate::binding::world::{Truth, apply_claim_plan, fresh_binder, reconcile_server_beside};

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];

fn arb_server(n: usize) -> impl Strategy<Value = CachedServer> {
    (
        prop::collection::vec(prop::option::of(prop::sample::select(vec!["a", "b"])), 4),
        prop::collection::vec(prop::bool::weighted(0.25), 2),
        prop::bool::weighted(0.1),
    )
        .prop_map(move |(values, taints, unclaimable)| {
            let labels: Vec<(&str, &str)> = KEYS
                .iter()
                .zip(&values)
                .filter_map(|(k, v)| v.map(|v| (*k, v)))
                .collect();
            let mut s = server(&format!("s{n}")).labelled(&labels);
            for (key, on) in ["t0", "t1"].iter().zip(taints) {
                if on {
                    s = s.taint(key);
                }
            }
            if unclaimable {
                s = s.unclaimable();
            }
            s
        })
}

fn arb_requirement() -> impl Strategy<Value = SelectorRequirement> {
    use SelectorOperator::*;
    (
        prop::sample::select(KEYS.to_vec()),
        prop::sample::select(vec![In, NotIn, Exists, DoesNotExist]),
        prop::sample::subsequence(vec!["a", "b"], 1..=2),
    )
        .prop_map(|(key, operator, values)| SelectorRequirement {
            key: key.into(),
            operator,
            values: match operator {
                In | NotIn => values.into_iter().map(String::from).collect(),
                Exists | DoesNotExist => vec![],
            },
        })
}

fn arb_claim(n: usize) -> impl Strategy<Value = CachedClaim> {
    (
        prop::collection::vec(arb_requirement(), 0..=2),
        prop::collection::vec(prop::bool::weighted(0.3), 2),
        0..4i64,
    )
        .prop_map(move |(requirements, tolerations, created)| {
            let mut c = claim(&format!("c{n}")).created(created);
            if !requirements.is_empty() {
                c.spec.server_selector = Some(ServerSelector {
                    match_expressions: requirements,
                    ..ServerSelector::default()
                });
            }
            for (key, on) in ["t0", "t1"].iter().zip(tolerations) {
                if on {
                    c = c.tolerates(key);
                }
            }
            c
        })
}

/// A fleet, its claims, and some user refs (claim → server) and reservations (server →
/// claim), by index.
#[derive(Clone, Debug)]
struct Fleet {
    servers: Vec<CachedServer>,
    claims: Vec<CachedClaim>,
}

fn arb_fleet() -> impl Strategy<Value = Fleet> {
    (1..=8usize, 1..=8usize)
        .prop_flat_map(|(ns, nc)| {
            let servers: Vec<_> = (0..ns).map(arb_server).collect();
            let claims: Vec<_> = (0..nc).map(arb_claim).collect();
            let refs = prop::collection::vec(prop::option::weighted(0.12, 0..ns), nc);
            let reservations = prop::collection::vec(prop::option::weighted(0.12, 0..nc), ns);
            (servers, claims, refs, reservations)
        })
        .prop_map(|(mut servers, mut claims, refs, reservations)| {
            for (c, r) in claims.iter_mut().zip(refs) {
                if let Some(s) = r {
                    *c = c.clone().names(&format!("s{s}"));
                }
            }
            for (s, r) in servers.iter_mut().zip(reservations) {
                if let Some(c) = r {
                    *s = s.clone().reserved_for(&format!("c{c}"));
                }
            }
            Fleet { servers, claims }
        })
}

/// The claim controller's binder, run against the stored objects.
struct Driver {
    binder: Binder,
    truth: Truth,
    seed: u64,
}

impl Driver {
    fn new(truth: Truth, decide: ClaimDecider, seed: u64) -> Self {
        let rules = Rules {
            claim: decide,
            ..Rules::real()
        };
        let binder = fresh_binder(&truth, rules);
        Self {
            binder,
            truth,
            seed,
        }
    }

    fn next(&mut self) -> u64 {
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.seed >> 33
    }

    /// One pass over every claim in a random order, `concurrency` at a time.
    fn round(&mut self, concurrency: usize) -> bool {
        let mut names: Vec<String> = self.truth.claims.keys().cloned().collect();
        for i in (1..names.len()).rev() {
            let j = (self.next() as usize) % (i + 1);
            names.swap(i, j);
        }
        let mut changed = false;
        for batch in names.chunks(concurrency) {
            changed |= self.batch(batch);
            changed |= self.servers_catch_up();
        }
        changed
    }

    /// Concurrent reconciles: one snapshot of the caches, the assumed choices shared.
    fn batch(&mut self, names: &[String]) -> bool {
        let mut decided = Vec::new();
        for name in names {
            let claims = self.binder.world().claims();
            let claim = claims.claim(NS, name).expect("in the snapshot").clone();
            match reconcile_claim(&mut self.binder, &claim, None, Sight::All, now().0) {
                ClaimStep::Act(work) => decided.push((claim, work)),
                ClaimStep::ReadServer(_) => panic!("no server is deleted here"),
                ClaimStep::Idle | ClaimStep::Wait { .. } => {}
            }
        }
        let mut changed = false;
        for (claim, work) in decided {
            if work.plan.is_noop() {
                continue;
            }
            let written = apply_claim_plan(&mut self.truth, &work.plan, &claim);
            if written.is_err() {
                let conflict = ObjectWrite::Conflict;
                self.binder
                    .claim_object_written(&work, &claim, conflict, now().0);
            }
            changed |= written.is_ok();
        }
        changed
    }

    /// The server controller settles, and the claim controller's caches catch up.
    fn servers_catch_up(&mut self) -> bool {
        let mut changed = false;
        for _ in 0..20 {
            let names: Vec<String> = self.truth.servers.keys().cloned().collect();
            let mut any = false;
            for name in names {
                let (truth, events) = (&mut self.truth, &mut Vec::new());
                any |= reconcile_server_beside(truth, &name, events, &self.binder);
            }
            changed |= any;
            if !any {
                break;
            }
        }
        let servers = self.truth.servers.values().cloned().map(Arc::new);
        self.binder.relist(servers.collect::<Vec<_>>());
        let claims = self.truth.claims.values().cloned().map(Arc::new);
        self.binder.relist(claims.collect::<Vec<_>>());
        changed
    }
}

/// The size of a maximum matching, by augmenting paths from each claim in turn.
fn maximum_matching(edges: &[Vec<usize>], servers: usize) -> usize {
    fn augment(
        c: usize,
        edges: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &s in &edges[c] {
            if seen[s] {
                continue;
            }
            seen[s] = true;
            if owner[s].is_none_or(|o| augment(o, edges, seen, owner)) {
                owner[s] = Some(c);
                return true;
            }
        }
        false
    }
    let mut owner = vec![None; servers];
    (0..edges.len())
        .filter(|&c| augment(c, edges, &mut vec![false; servers], &mut owner))
        .count()
}

fn is_bound(claim: &CachedClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}

/// Invariants 1 and 4 at the end.
fn check_invariants(fleet: &Fleet, truth: &Truth) -> Result<(), TestCaseError> {
    let mut holders: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, claim) in truth.claims.iter().filter(|(_, c)| is_bound(c)) {
        let server = claim.spec.server_ref.as_ref().map(|r| r.name.as_str());
        let server =
            server.ok_or_else(|| TestCaseError::fail(format!("{name} Bound without a ref")))?;
        let r = truth.server(server).spec.server_claim_ref.as_ref();
        prop_assert!(
            r.is_some_and(|r| r.name == *name && r.uid == claim.meta().uid),
            "invariant 1: {name} on {server}"
        );
        prop_assert!(
            holders.insert(server, name).is_none(),
            "invariant 1: two claims Bound to {}",
            server
        );
    }
    for c in fleet
        .claims
        .iter()
        .filter(|c| !is_controller_chosen(c) && c.spec.server_ref.is_some())
    {
        let now = &truth.claim(meta::name(c)).spec.server_ref;
        prop_assert_eq!(
            now,
            &c.spec.server_ref,
            "invariant 4: a user's serverRef changed"
        );
    }
    for s in fleet
        .servers
        .iter()
        .filter(|s| s.spec.server_claim_ref.is_some())
    {
        let now = truth
            .server(meta::name(s))
            .spec
            .server_claim_ref
            .as_ref()
            .map(|r| &r.name);
        let then = s.spec.server_claim_ref.as_ref().map(|r| &r.name);
        prop_assert_eq!(now, then, "invariant 4: a reservation changed");
    }
    Ok(())
}

/// The claims that wait for a free server (no ref, nothing reserved for them that fits),
/// and the maximum matching of them to the free servers their fixed neighbours (user
/// refs, reservations) did not take.
fn expected(fleet: &Fleet, truth: &Truth) -> (BTreeSet<String>, usize) {
    let adopts = |c: &CachedClaim| {
        fleet.servers.iter().any(|s| {
            s.spec
                .server_claim_ref
                .as_ref()
                .is_some_and(|r| r.name == meta::name(c))
                && eligibility(s, c).is_ok()
        })
    };
    let waiting: Vec<&CachedClaim> = fleet
        .claims
        .iter()
        .filter(|c| c.spec.server_ref.is_none() && !adopts(c))
        .collect();
    let names: BTreeSet<String> = waiting.iter().map(|c| meta::name(*c).to_string()).collect();
    let taken_by_fixed = |s: &CachedServer| {
        let r = truth.server(meta::name(s)).spec.server_claim_ref.as_ref();
        r.is_some_and(|r| !names.contains(&r.name))
    };
    let pool: Vec<&CachedServer> = fleet
        .servers
        .iter()
        .filter(|s| is_free(s) && !taken_by_fixed(s))
        .collect();
    let edges: Vec<Vec<usize>> = waiting
        .iter()
        .map(|c| {
            (0..pool.len())
                .filter(|&j| eligibility(pool[j], c).is_ok())
                .collect()
        })
        .collect();
    let size = maximum_matching(&edges, pool.len());
    (names, size)
}

/// Serves the fleet with `decide`; checks the invariants, and returns how many waiting
/// claims were bound and the maximum matching.
fn serve(
    decide: ClaimDecider,
    fleet: &Fleet,
    seed: u64,
    concurrency: usize,
) -> Result<(usize, usize), TestCaseError> {
    let truth = Truth::new(fleet.servers.clone(), fleet.claims.clone());
    let mut driver = Driver::new(truth, decide, seed);
    let settled = (0..60).any(|_| !driver.round(concurrency));
    prop_assert!(settled, "the world settles");
    check_invariants(fleet, &driver.truth)?;
    let (waiting, maximum) = expected(fleet, &driver.truth);
    let bound = waiting
        .iter()
        .filter(|n| is_bound(driver.truth.claim(n)))
        .count();
    Ok((bound, maximum))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn picks_bind_as_many_claims_as_a_maximum_matching(
        fleet in arb_fleet(),
        seed in any::<u64>(),
        concurrency in 1..=4usize,
    ) {
        let (bound, maximum) = serve(Rules::real().claim, &fleet, seed, concurrency)?;
        prop_assert_eq!(bound, maximum, "waiting claims bound vs the maximum matching");
    }
}

/// The property catches the reference's lowest-name-first pick: on the same random
/// fleets it strands claims, and the generator reaches such fleets.
#[test]
fn the_property_catches_lowest_name_first() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (arb_fleet(), any::<u64>(), 1..=4usize);
    let matched = std::cell::Cell::new(0);
    let result = runner.run(&strategy, |(fleet, seed, concurrency)| {
        let (bound, maximum) = serve(lowest_name_first, &fleet, seed, concurrency)?;
        matched.set(matched.get() + usize::from(maximum > 0));
        prop_assert_eq!(bound, maximum);
        Ok(())
    });
    let failure = result.expect_err("lowest-name-first strands a claim on some fleet");
    let matched = matched.get();
    println!("lowest-name-first caught after {matched} fleets with a matching: {failure}");
}
