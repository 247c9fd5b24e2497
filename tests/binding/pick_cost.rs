//! Placement's cost per pick, for callgrind: `bench bind`'s many-selectors fleet, every
//! claim picking in turn among the free servers (a picked server leaves the index and
//! its claim the waiting claims), no API server. Prints how the picks went and a digest
//! of them, so that two builds can be checked to decide alike. Ignored in the suite; run
//! it alone, in release, under callgrind (docs/performance.md, item 6 of "Placement at
//! a flat cost"):
//!
//! ```text
//! cargo test --release --test suite --no-run
//! PICK_COST_CLAIMS=2000 valgrind --tool=callgrind target/release/deps/suite-<hash> \
//!     --ignored --exact --nocapture binding::pick_cost::picks_of_the_many_selectors_fleet
//! ```

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use server_binder::binding::{ClaimCatalog, Placement, ServerCatalog, ServerView};
use server_binder::runtime::bench::bind::fleet::{self, Mix};

use super::support::among;

/// Every claim of the fleet picks once; each is served (every claim has its planted
/// server, and a maximum matching keeps one for each).
#[test]
#[ignore = "a measurement for callgrind, run alone in release"]
fn picks_of_the_many_selectors_fleet() {
    let n: usize = std::env::var("PICK_COST_CLAIMS").map_or(4000, |a| a.parse().unwrap());
    let namespaces = 100;
    let start = Timestamp::from_second(1_700_000_000).unwrap();
    let claims: Vec<_> = (0..n)
        .map(|j| {
            let mut c = fleet::claim(j, Mix::ManySelectors, fleet::namespace_name(j % namespaces));
            let at = start + SignedDuration::from_millis(j as i64);
            c.metadata.creation_timestamp = Some(Time(at));
            c
        })
        .collect();
    let servers = (0..n).map(|i| fleet::server(i, Mix::ManySelectors));
    let mut servers = ServerCatalog::from_servers(servers).tracking(&claims);
    let mut waiting = ClaimCatalog::from_claims(claims.iter().cloned());
    let (mut picked, mut waited, mut none) = (0, 0, 0);
    let mut digest = DefaultHasher::new();
    for claim in &claims {
        let placement = match servers.place(claim, &among(waiting.waiting())) {
            Placement::Pick(name) => Ok(name.to_string()),
            Placement::WaitForTurn(ahead) => Err(Some(ahead.total)),
            Placement::NoMatch => Err(None),
        };
        format!("{placement:?}").hash(&mut digest);
        match placement {
            Ok(name) => {
                picked += 1;
                servers.remove(&name);
                let ns = claim.metadata.namespace.as_deref().unwrap();
                waiting.remove(ns, claim.metadata.name.as_deref().unwrap());
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
