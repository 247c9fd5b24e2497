//! A shape that begins waiting after picks have learnt the fit rows is in the next
//! pick's network (docs/binding.md, "The matching": every waiting shape has its row
//! before a pick reads any). A pick finds the shapes a class brings in from the rows
//! read backwards, so a shape without a row would be left out of the matching, and the
//! picker could take the only server it fits.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use server_binder::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND, ANNOTATION_YES};
use server_binder::api::*;
use server_binder::binding::{ClaimCatalog, Placement, ServerCatalog, ServerView};

use super::support::among;

fn on_rack(name: &str, rack: &str) -> CachedServer {
    let mut server = CachedServer::new(name, ServerSpec::default());
    *server.labels_mut() = BTreeMap::from([("rack".into(), rack.into())])
        .into_iter()
        .collect();
    server
}

fn racks(values: &[&str]) -> ServerSelector {
    ServerSelector {
        match_expressions: vec![SelectorRequirement {
            key: "rack".into(),
            operator: SelectorOperator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
        }],
        ..ServerSelector::default()
    }
}

fn claim(namespace: &str, name: &str, selector: Option<ServerSelector>, at: i64) -> CachedClaim {
    let spec = ServerClaimSpec {
        server_selector: selector,
        ..ServerClaimSpec::default()
    };
    let mut claim = CachedClaim::new(name, spec);
    claim.meta_mut().namespace = Some(namespace.into());
    let created = Timestamp::from_second(1_700_000_000 + at).expect("a timestamp");
    claim.meta_mut().creation_timestamp = Some(Time(created));
    claim
}

/// A claim bound to a server that is not free: its shape is known (it weighs the
/// classes it fits as contested), and it waits for nothing.
fn bound(name: &str, selector: ServerSelector) -> CachedClaim {
    let mut claim = claim("t2", name, Some(selector), 0);
    claim.spec.server_ref = Some(ServerRef {
        name: format!("taken-{name}"),
    });
    let yes = || ANNOTATION_YES.to_string();
    *claim.annotations_mut() = BTreeMap::from([
        (ANNOTATION_PRE_BOUND.to_string(), yes()),
        (ANNOTATION_BIND_COMPLETED.to_string(), yes()),
    ])
    .into_iter()
    .collect();
    claim
}

fn place(servers: &ServerCatalog, claims: &ClaimCatalog, claim: &CachedClaim) -> String {
    match servers.place(claim, &among(claims.waiting())) {
        Placement::Pick(name) => name.to_string(),
        other => panic!("{claim:?} is not served: {other:?}"),
    }
}

#[test]
fn a_shape_that_begins_waiting_after_a_pick_is_in_the_next_pick() {
    let early = claim("t1", "early", None, 1);
    let late = claim("t3", "late", Some(racks(&["r1"])), 2);
    // Two known shapes fit rack r2 and none but `early`'s fits r1 alone: weighed by
    // contest, r1 is the less contested class, so only the matching keeps `early` off it.
    let known = [
        bound("z1", racks(&["r2"])),
        bound("z2", racks(&["r2", "r3"])),
    ];
    let servers = [on_rack("s-a", "r1"), on_rack("s-b", "r2")];
    let everyone: Vec<&CachedClaim> = known.iter().chain([&early, &late]).collect();
    let servers = ServerCatalog::from_servers(servers).tracking(everyone);
    let mut claims = ClaimCatalog::from_claims(known.iter().cloned().chain([early.clone()]));
    assert_eq!(
        place(&servers, &claims, &early),
        "s-a",
        "alone, `early` takes the less contested rack"
    );
    claims.upsert(late);
    assert_eq!(
        place(&servers, &claims, &early),
        "s-b",
        "`late` needs s-a, the only server its selector fits: a maximum matching leaves it"
    );
}
