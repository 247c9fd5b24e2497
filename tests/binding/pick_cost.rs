//! Placement's cost per pick, for callgrind: `bench bind`'s many-selectors fleet, every
//! claim picking in turn among the free servers (a picked server leaves the index and
//! its claim the waiting claims), no API server. Prints how the picks went and a digest
//! of them, so that two builds can be checked to decide alike. Ignored in the suite; run
//! it alone, in release, under callgrind (docs/performance.md, "The pick
//! measurement"):
//!
//! ```text
//! cargo test --release --test suite --no-run
//! PICK_COST_CLAIMS=2000 valgrind --tool=callgrind target/release/deps/suite-<hash> \
//!     --ignored --exact --nocapture binding::pick_cost::picks_of_the_many_selectors_fleet
//! ```

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use server_binder::api::{CachedClaim, CachedServer};
use server_binder::binding::{ClaimCatalog, Placement, ServerCatalog, ServerView, WaitingClaims};
use server_binder::runtime::bench::bind::fleet::{self, Mix};

use super::support::among;

/// The many-selectors fleet of `n` servers and `n` claims, the claims created a
/// millisecond apart over 100 namespaces.
fn fleet_of(n: usize) -> (Vec<CachedClaim>, ServerCatalog, ClaimCatalog) {
    let namespaces = 100;
    let start = Timestamp::from_second(1_700_000_000).unwrap();
    let claims: Vec<_> = (0..n)
        .map(|j| {
            let c = fleet::claim(j, Mix::ManySelectors, fleet::namespace_name(j % namespaces));
            let mut c = CachedClaim::from(c);
            let at = start + SignedDuration::from_millis(j as i64);
            c.meta_mut().creation_timestamp = Some(Time(at));
            c
        })
        .collect();
    let servers = (0..n).map(|i| CachedServer::from(fleet::server(i, Mix::ManySelectors)));
    let servers = ServerCatalog::from_servers(servers).tracking(&claims);
    let waiting = ClaimCatalog::from_claims(claims.iter().cloned());
    (claims, servers, waiting)
}

/// Where `claim` goes: the server it picks, or how many claims are ahead of it (`None`:
/// no server fits).
fn placed(servers: &ServerCatalog, claim: &CachedClaim, waiting: &WaitingClaims) -> Placed {
    match servers.place(claim, &among(waiting)) {
        Placement::Pick(name) => Ok(name.to_string()),
        Placement::WaitForTurn(ahead) => Err(Some(ahead.total)),
        Placement::NoMatch => Err(None),
    }
}

type Placed = Result<String, Option<usize>>;

/// Takes a pick: its server leaves the free servers and its claim the waiting claims.
fn take(
    servers: &mut ServerCatalog,
    waiting: &mut ClaimCatalog,
    claim: &CachedClaim,
    server: &str,
) {
    servers.remove(server);
    let ns = claim.meta().namespace.as_deref().unwrap();
    waiting.remove(ns, claim.meta().name.as_deref().unwrap());
}

/// Every claim of the fleet picks once; each is served (every claim has its planted
/// server, and a maximum matching keeps one for each).
#[test]
#[ignore = "a measurement for callgrind, run alone in release"]
fn picks_of_the_many_selectors_fleet() {
    let n: usize = std::env::var("PICK_COST_CLAIMS").map_or(4000, |a| a.parse().unwrap());
    let (claims, mut servers, mut waiting) = fleet_of(n);
    let (mut picked, mut waited, mut none) = (0, 0, 0);
    let mut digest = DefaultHasher::new();
    for claim in &claims {
        let placement = placed(&servers, claim, waiting.waiting());
        format!("{placement:?}").hash(&mut digest);
        match placement {
            Ok(name) => {
                picked += 1;
                take(&mut servers, &mut waiting, claim, &name);
            }
            Err(Some(_)) => waited += 1,
            Err(None) => none += 1,
        }
    }
    println!(
        "picked {picked} waited {waited} no match {none} digest {:016x}",
        digest.finish()
    );
    assert_eq!(
        (picked, none),
        (n, 0),
        "every claim of the planted fleet picks"
    );
}

/// A pick decides as one that keeps nothing from the picks before it: the fit rows and
/// the max flow a pick keeps for the next (docs/binding.md, "The matching") change how
/// much a pick costs, never where a claim goes. Each claim of a small many-selectors
/// fleet picks in turn twice, on the waiting claims and on a copy of them (a copy keeps
/// no rows and no flow), and both picks agree.
#[test]
fn picks_that_keep_rows_and_a_flow_decide_as_picks_that_keep_none() {
    let (claims, mut servers, mut waiting) = fleet_of(300);
    for claim in &claims {
        let kept = placed(&servers, claim, waiting.waiting());
        let afresh = placed(&servers, claim, &waiting.waiting().clone());
        assert_eq!(kept, afresh, "{:?}", claim.meta().name);
        if let Ok(name) = kept {
            take(&mut servers, &mut waiting, claim, &name);
        }
    }
}
