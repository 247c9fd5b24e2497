//! Placement end to end (docs/binding.md, "Picking a server"): the real controllers keep a
//! full assignment possible while claims arrive, and serve scarce servers to namespaces in
//! turn.

use kube::ResourceExt;
use kube::api::{Api, PostParams};
use server_binder::api::names::ANNOTATION_PRE_BOUND;
use server_binder::api::{ClaimPhase, ServerClaim, ServerClaimSpec, ServerSelector};

use crate::controllers::stage::{ClaimExt, ServerExt, claim, has_annotation, server, wait_bound};
use crate::controllers::support::*;

const RACKS: usize = 10;

fn claim_in(name: &str, rack: Option<usize>) -> ServerClaim {
    let mut c = ServerClaim::new(name, ServerClaimSpec::default());
    if let Some(rack) = rack {
        let mut selector = ServerSelector::default();
        selector
            .match_labels
            .insert("rack".into(), format!("r{rack}"));
        c.spec.server_selector = Some(selector);
    }
    c
}

/// Ten racks of three servers, named so that the lowest names span every rack. Claims
/// arrive one by one while the controllers run, every second one selecting an odd rack,
/// so the selective claims need exactly the odd racks' servers. Lowest-name-first hands
/// odd-rack servers to the claims that take any server and strands selective claims
/// next to free even-rack servers; here every claim binds.
#[tokio::test]
async fn the_rack_example_binds_every_claim() {
    let mut env = Env::new().await;
    for i in 0..RACKS * 3 {
        let rack = format!("r{}", i % RACKS);
        env.create_server(&format!("srv-{i:02}"), &[("rack", &rack)])
            .await;
    }
    env.start(4).await;
    let odd_racks = [1, 3, 5, 7, 9];
    for i in 0..RACKS * 3 {
        let rack = (i % 2 == 1).then(|| odd_racks[(i / 2) % odd_racks.len()]);
        let claim = claim_in(&format!("c{i:02}"), rack);
        env.claims()
            .create(&PostParams::default(), &claim)
            .await
            .expect("claim created");
    }
    eventually("all 30 claims Bound", DEADLINE, || async {
        let (_, claims) = env.all().await;
        let pending: Vec<String> = claims
            .iter()
            .filter(|c| phase(c) != Some(ClaimPhase::Bound))
            .map(|c| format!("{:?}", c.metadata.name))
            .collect();
        pending.is_empty().then_some(()).ok_or(pending)
    })
    .await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// No server is free while team-a creates a burst of six claims and then team-b one.
/// Servers then come one at a time: the claims bind in turn across the namespaces,
/// team-b's second, not after team-a's burst.
#[tokio::test]
async fn scarce_servers_go_to_namespaces_in_turn() {
    let mut env = Env::new().await;
    // team-a is the fixtures' namespace, NS.
    env.create_namespace("team-b").await;
    env.start(4).await;
    let create = |ns: &'static str, name: String| {
        let api: Api<ServerClaim> = Api::namespaced(env.client.clone(), ns);
        async move {
            let c = ServerClaim::new(&name, ServerClaimSpec::default());
            api.create(&PostParams::default(), &c).await.expect("claim");
        }
    };
    for i in 1..=6 {
        create(NS, format!("a{i}")).await;
    }
    create("team-b", "b1".into()).await;
    let all_claims: Api<ServerClaim> = Api::all(env.client.clone());
    eventually("seven claims Pending", DEADLINE, || async {
        let claims = all_claims.list(&Default::default()).await.unwrap().items;
        claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Pending))
            .count()
            == 7
    })
    .await;

    let mut order = Vec::new();
    for i in 0..4 {
        env.create_server(&format!("s{i}"), &[]).await;
        let bound = eventually("one more claim Bound", DEADLINE, || async {
            let claims = all_claims.list(&Default::default()).await.unwrap().items;
            let bound: Vec<String> = claims
                .iter()
                .filter(|c| phase(c) == Some(ClaimPhase::Bound))
                .map(|c| c.metadata.name.clone().unwrap_or_default())
                .collect();
            if bound.len() == i + 1 {
                Ok(bound)
            } else {
                Err(bound)
            }
        })
        .await;
        let new = bound.into_iter().find(|n| !order.contains(n)).unwrap();
        order.push(new);
    }
    assert_eq!(order, ["a1", "b1", "a2", "a3"], "the order of the binds");
    // The claims still waiting say why once their summary is refreshed (the moments
    // in which a free server was kept for a claim ahead are too short to be written:
    // a summary over a summary waits out the status interval).
    let why = "0/4 servers can serve this claim: 4 are held by other claims.";
    env.wait_claim("a4", "the summary of four held servers", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Bound"))
            .is_some_and(|c| c.message == why)
    })
    .await;
}

/// One server; team-a creates five claims, then team-b one; each claim is deleted once it
/// is Bound. team-b's claim is served second, not after team-a's burst: a namespace's
/// service is remembered after its claims are deleted (docs/binding.md, "The matching",
/// the fair order).
#[tokio::test]
async fn a_namespace_that_deletes_its_bound_claims_still_takes_turns() {
    let mut env = Env::new().await;
    env.create_namespace("team-b").await;
    env.create_server("s1", &[]).await;
    let create = |ns: &'static str, name: String| {
        let api: Api<ServerClaim> = Api::namespaced(env.client.clone(), ns);
        async move {
            let c = ServerClaim::new(&name, ServerClaimSpec::default());
            api.create(&PostParams::default(), &c).await.expect("claim");
        }
    };
    for i in 0..5 {
        create(NS, format!("a{i}")).await;
    }
    // Created later than team-a's: creation timestamps have a resolution of a second, so
    // wait until the clock is in a later second than a4's creation.
    let a4 = env.claim("a4").await.expect("a4");
    let a4_created = a4.metadata.creation_timestamp.expect("created").0;
    eventually("a later second", DEADLINE, || async {
        let now = k8s_openapi::jiff::Timestamp::now();
        now.as_second() > a4_created.as_second()
    })
    .await;
    create("team-b", "b0".into()).await;
    env.start(4).await;
    let all_claims: Api<ServerClaim> = Api::all(env.client.clone());
    let mut order = Vec::new();
    while order.len() < 3 {
        let bound = eventually("the next claim Bound", DEADLINE, || async {
            let claims = all_claims.list(&Default::default()).await.unwrap().items;
            claims
                .into_iter()
                .find(|c| phase(c) == Some(ClaimPhase::Bound))
                .ok_or("none Bound yet")
        })
        .await;
        let (ns, name) = (
            bound.metadata.namespace.unwrap(),
            bound.metadata.name.unwrap(),
        );
        order.push(name.clone());
        let api: Api<ServerClaim> = Api::namespaced(env.client.clone(), &ns);
        api.delete(&name, &Default::default())
            .await
            .expect("deleted");
        eventually("the claim gone", DEADLINE, || async {
            api.get_opt(&name).await.unwrap().is_none()
        })
        .await;
    }
    assert_eq!(order, ["a0", "b0", "a1"], "the order of the binds");
}

/// A name says which server, not when (docs/binding.md, "The matching"). team-a's `a1`
/// waits while the only server, `s1`, is cordoned; later team-b creates `sniper`, which
/// names `s1`. When the admin uncordons `s1`, `a1`, ahead in the fair order, takes it;
/// `sniper` waits its turn and then finds the server taken. (Before turns applied to
/// names, `sniper` won `s1` the moment it was uncordoned.)
#[tokio::test]
async fn a_claim_naming_a_server_does_not_pass_the_claims_ahead_of_it() {
    let mut env = Env::new().await;
    a1_waits_for_a_cordoned_s1(&mut env).await;
    let team_b = create_claim_in(&env, "team-b", claim("sniper").names("s1")).await;
    eventually(
        "the sniper is told the server is cordoned",
        DEADLINE,
        || async {
            let c = team_b.get("sniper").await.unwrap();
            bound_reason(&c).as_deref() == Some("ServerMismatch")
        },
    )
    .await;

    uncordon_s1(&env).await;

    env.wait_claim_phase("a1", ClaimPhase::Bound, "Bound").await;
    let note = env.wait_event("Server", "s1", "Normal", "Claimed").await;
    assert!(note.contains(&format!("{NS}/a1")), "{note}");
    eventually("the sniper finds s1 taken", DEADLINE, || async {
        let c = team_b.get("sniper").await.unwrap();
        phase(&c) == Some(ClaimPhase::Pending)
            && bound_reason(&c).as_deref() == Some("ServerAlreadyClaimed")
    })
    .await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// Waits until the clock is in a later second than `claim` was created in (creation
/// timestamps have a second's resolution), so a claim created next is younger.
async fn a_second_after(claim: &ServerClaim) {
    let created = claim
        .metadata
        .creation_timestamp
        .clone()
        .expect("created")
        .0;
    eventually("a later second", DEADLINE, || async {
        k8s_openapi::jiff::Timestamp::now().as_second() > created.as_second()
    })
    .await;
}

/// Whose pick is it (docs/binding.md): a `pre-bound` ref this process did not pick (a
/// tenant wrote it, or a crash left it) is asked its turn. Staged before the controllers
/// start: team-a's `a1` waits, then team-b's `t` names the free s1 with `pre-bound`.
/// `a1` is ahead, so `t`'s ref is withdrawn and `a1` gets s1. (Before, the server side
/// took any `pre-bound` as a pick made in its turn and gave s1 to `t`.)
#[tokio::test]
async fn a_pre_bound_the_controller_did_not_pick_does_not_pass_the_claims_ahead_of_it() {
    let mut env = Env::new().await;
    env.create_namespace("team-b").await;
    env.put_server(server("s1")).await;
    let a1 = env.put_claim(claim("a1")).await;
    a_second_after(&a1).await;
    let team_b = create_claim_in(&env, "team-b", claim("t").chose("s1")).await;
    env.start(4).await;

    wait_bound(&env, "a1", "s1").await;
    eventually("t's ref withdrawn, t waiting", DEADLINE, || async {
        let c = team_b.get("t").await.unwrap();
        c.spec.server_ref.is_none()
            && !has_annotation(&c, ANNOTATION_PRE_BOUND)
            && phase(&c) == Some(ClaimPhase::Pending)
    })
    .await;
    let events = team_b_events(&env, "t").await;
    let rebinding = events.iter().find(|(_, reason, _)| reason == "Rebinding");
    let (_, _, note) = rebinding.unwrap_or_else(|| panic!("{events:?}"));
    assert!(note.contains(&format!("{NS}/a1")), "{note}");
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// A pick a crash left on its claim survives it: staged before the controllers start,
/// `c` names the free s1 with `pre-bound` and nothing is ahead of it, so the controller
/// takes the pick up (no write to the claim) and s1 binds to `c`, withdrawing nothing.
#[tokio::test]
async fn a_pick_left_by_a_crash_is_taken_up_in_its_turn() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c").chose("s1")).await;
    env.start(4).await;
    wait_bound(&env, "c", "s1").await;
    assert_eq!(env.count_events("ServerClaim", "c", "Rebinding").await, 0);
}

/// The same from outside, live: s1 is uncordoned while `a1` waits, and `a1`'s pick write
/// is held back at the API server; meanwhile a tenant writes `t` naming s1 with
/// `pre-bound`. The server controller does not take `t`'s ref as a pick: `a1` gets s1.
#[tokio::test]
async fn a_tenant_pre_bound_written_while_a_pick_is_in_flight_wins_nothing() {
    let mut env = Env::new().await;
    a1_waits_for_a_cordoned_s1(&mut env).await;
    let held = controller_writes().resource("serverclaims").namespace(NS);
    env.apiserver
        .faults()
        .delay(held, 1, std::time::Duration::from_secs(2));
    uncordon_s1(&env).await;
    let team_b = create_claim_in(&env, "team-b", claim("t").chose("s1")).await;

    wait_bound(&env, "a1", "s1").await;
    eventually("t finds s1 taken and waits", DEADLINE, || async {
        let c = team_b.get("t").await.unwrap();
        c.spec.server_ref.is_none() && phase(&c) == Some(ClaimPhase::Pending)
    })
    .await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// The events recorded on team-b's claim `name`: (type, reason, note).
async fn team_b_events(env: &Env, name: &str) -> Vec<(String, String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), "team-b");
    let list = events.list(&Default::default()).await.expect("events");
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            let kind = e.type_.unwrap_or_default();
            (
                kind,
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// team-a's `a1` waits while the only server, s1, is cordoned (the controllers running),
/// and the clock has moved to a later second, so a claim created next is younger.
async fn a1_waits_for_a_cordoned_s1(env: &mut Env) {
    env.create_namespace("team-b").await;
    env.put_server(server("s1").unclaimable()).await;
    env.start(4).await;
    env.put_claim(claim("a1")).await;
    let a1 = env
        .wait_claim_phase("a1", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    a_second_after(&a1).await;
}

async fn uncordon_s1(env: &Env) {
    let servers = env.servers();
    let mut s1 = servers.get("s1").await.expect("s1");
    s1.spec.unclaimable = false;
    servers
        .replace("s1", &PostParams::default(), &s1)
        .await
        .expect("uncordoned");
}

/// However many shapes tenants' claims have, a pick still weighs which classes the
/// claims to come are likely to need (docs/binding.md, "The matching"; issue 25 found a
/// cliff at 64 known shapes, above which the weighing was dropped for everyone). Rack r1
/// has two servers and r2 one; `old-r1` (rack r1) holds one of r1's; 66 junk claims, each
/// with a selector of its own that nothing fits, wait. Then `any` must take r2's server,
/// so that `needs-r1` still finds r1's other one.
#[tokio::test]
async fn junk_shapes_do_not_stop_a_pick_from_keeping_the_rack_a_claim_needs() {
    let mut env = Env::new().await;
    for (name, rack) in [("r1-a", "r1"), ("r1-b", "r1"), ("r2-a", "r2")] {
        env.create_server(name, &[("rack", rack)]).await;
    }
    env.start(2).await;
    env.put_claim(claim("old-r1").selects(&[("rack", "r1")]))
        .await;
    wait_bound(&env, "old-r1", "r1-a").await;
    for k in 0..66 {
        let serial = format!("no-such-{k}");
        let junk = claim(&format!("junk-{k:02}")).selects(&[("serial", serial.as_str())]);
        env.put_claim(junk).await;
    }
    // Every junk claim is in the controller's cache once it has written its status.
    eventually("the junk claims Pending", DEADLINE, || async {
        let (_, claims) = env.all().await;
        let junk = claims.iter().filter(|c| c.name_any().starts_with("junk-"));
        let pending = junk
            .filter(|c| phase(c) == Some(ClaimPhase::Pending))
            .count();
        (pending == 66).then_some(()).ok_or(pending)
    })
    .await;
    env.put_claim(claim("any")).await;
    wait_bound(&env, "any", "r2-a").await;
    env.put_claim(claim("needs-r1").selects(&[("rack", "r1")]))
        .await;
    wait_bound(&env, "needs-r1", "r1-b").await;
}
