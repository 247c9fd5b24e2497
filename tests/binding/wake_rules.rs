//! The wake-up rules that placement adds (docs/binding.md, "Wake-up rules"): a waiting
//! claim that leaves without a free server wakes the other waiting claims; one that took
//! its server wakes nobody else, whichever of the two sides the cache shows first (a wake
//! of every waiting claim per pick is a storm at fleet scale).

use std::sync::Arc;

use server_binder::api::{CachedClaim, ClaimPhase};
use server_binder::binding::wakeups::{on_claim_change, on_start_step};
use server_binder::binding::*;

use crate::binding::support::*;

fn others_woken(wake: &Wake, me: &str) -> bool {
    wake.claims.iter().any(|k| k.name != me)
}

#[test]
fn a_pick_wakes_no_other_claim_whichever_side_the_cache_shows_first() {
    let a = claim("a").created(1);
    let b = claim("b").created(2);
    let picked = a.clone().chose("s1");
    let claims_after = claims(vec![picked.clone(), b.clone()]);
    // The server side not written yet: s1 is free.
    let world = servers(vec![server("s1"), server("s2")]);
    let wake = on_claim_change(Some(&a), Some(&picked), &world, &claims_after);
    assert!(!others_woken(&wake, "a"), "{wake:?}");
    // The server side already written: s1 records a.
    let world = servers(vec![server("s1").claimed_for("a", "uid-a"), server("s2")]);
    let wake = on_claim_change(Some(&a), Some(&picked), &world, &claims_after);
    assert!(!others_woken(&wake, "a"), "{wake:?}");
}

#[test]
fn a_waiting_claim_that_leaves_without_a_server_wakes_the_pending_claims() {
    let a = claim("a").created(1);
    let b = claim("b").created(2);
    let world = servers(vec![server("s1")]);
    let wake = on_claim_change(Some(&a), None, &world, &claims(vec![b.clone()]));
    assert!(
        wake.claims.iter().any(|k| k.name == "b"),
        "deleted: {wake:?}"
    );
    let elsewhere = a.clone().names("gone");
    let after = claims(vec![elsewhere.clone(), b.clone()]);
    let wake = on_claim_change(Some(&a), Some(&elsewhere), &world, &after);
    assert!(
        wake.claims.iter().any(|k| k.name == "b"),
        "named a missing server: {wake:?}"
    );
    let reshaped = a.clone().selects(&[("rack", "r1")]);
    let after = claims(vec![reshaped.clone(), b]);
    let wake = on_claim_change(Some(&a), Some(&reshaped), &world, &after);
    assert!(
        wake.claims.iter().any(|k| k.name == "b"),
        "another shape: {wake:?}"
    );
}

/// When servers are scarce, a wake hands the waiting claims over in the fair order, the
/// others after them.
#[test]
fn a_wake_orders_the_waiting_claims_fairly() {
    let mut b1 = claim("b1").created(3);
    b1.meta_mut().namespace = Some("team-b".into());
    // Bound in a third namespace: it takes no turn from team-a or team-b.
    let mut bound = claim("bound")
        .chose("s9")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    bound.meta_mut().namespace = Some("team-c".into());
    let all = claims(vec![
        claim("a1").created(1),
        claim("a2").created(2),
        b1,
        bound,
    ]);
    assert_eq!(woken_in_order(&all), ["a1", "b1", "a2", "bound"]);
}

/// The order in which a wake of every claim hands them over, with one free server for
/// them: scarce, so the order matters.
fn woken_in_order(all: &ClaimCatalog) -> Vec<String> {
    let wake = Wake {
        claims: all.iter().map(claim_key).collect(),
        ..Wake::default()
    };
    let world = servers(vec![server("s1")]);
    let order = wake.claims_in_order(&world, all).into_iter();
    order.map(|k| k.name.clone()).collect()
}

/// A pick in flight (a claim naming a server, its bind not yet in its status) is its
/// namespace's turn already: a cache that has not seen the bind's status yet must not
/// give that namespace the next server too.
#[test]
fn a_pick_in_flight_counts_as_its_namespaces_turn() {
    let mut b1 = claim("b1").created(3);
    b1.meta_mut().namespace = Some("team-b".into());
    let all = claims(vec![
        claim("a0").created(0).chose("s9"),
        claim("a1").created(1),
        b1,
    ]);
    assert_eq!(woken_in_order(&all)[..2], ["b1", "a1"]);
}

/// A bound claim that is deleted still counts as its namespace's service: deleting
/// claims once they are bound does not give a namespace its turns back.
#[test]
fn a_deleted_bound_claim_still_counts_as_its_namespaces_turn() {
    let mut b1 = claim("b1").created(3);
    b1.meta_mut().namespace = Some("team-b".into());
    let served = claim("a0").created(0).chose("s9").phase(ClaimPhase::Bound);
    let mut all = claims(vec![served, claim("a1").created(1), b1]);
    all.remove(NS, "a0");
    assert_eq!(woken_in_order(&all), ["b1", "a1"]);
}

/// The periodic resync (docs/binding.md, "Wake-up rules"): spread over its ticks, one
/// pass wakes every object of both kinds exactly once, no tick more than its share.
#[test]
fn a_resync_pass_wakes_every_object_once_a_share_per_tick() {
    let cases: [(usize, usize, u32); 5] =
        [(10, 7, 3), (9, 9, 3), (1, 0, 5), (0, 4, 1), (300, 1, 300)];
    for (n_servers, n_claims, ticks) in cases {
        let world = servers((0..n_servers).map(|i| server(&format!("s{i}"))).collect());
        let all = claims((0..n_claims).map(|i| claim(&format!("c{i}"))).collect());
        let mut cursor = ResyncCursor::default();
        let (mut woken_servers, mut woken_claims) = (Vec::new(), Vec::new());
        for tick in 0..ticks {
            let wake = world_tick(&world, &all, &mut cursor, ticks);
            assert!(
                wake.servers.len() <= n_servers.div_ceil(ticks as usize),
                "tick {tick}"
            );
            assert!(
                wake.claims.len() <= n_claims.div_ceil(ticks as usize),
                "tick {tick}"
            );
            woken_servers.extend(wake.servers);
            woken_claims.extend(wake.claims.into_iter().map(|k| k.name.clone()));
        }
        let case = format!("{n_servers} servers, {n_claims} claims, {ticks} ticks");
        assert_eq!(woken_servers.len(), n_servers, "each server once: {case}");
        assert_eq!(woken_claims.len(), n_claims, "each claim once: {case}");
        woken_servers.dedup();
        woken_claims.dedup();
        assert_eq!(woken_servers.len(), n_servers, "{case}");
        assert_eq!(woken_claims.len(), n_claims, "{case}");
        assert_eq!(cursor, ResyncCursor::default(), "the pass ended: {case}");
    }
}

/// An object created behind the cursor waits for the next pass; one whose key the
/// cursor stands on may go: the pass goes on after it.
#[test]
fn a_resync_pass_goes_on_past_created_and_deleted_objects() {
    let names = |n: std::ops::Range<usize>| n.map(|i| server(&format!("s{i}"))).collect();
    let mut world: Vec<_> = names(1..7);
    let none = claims(Vec::new());
    let mut cursor = ResyncCursor::default();
    let first = world_tick(&servers(world.clone()), &none, &mut cursor, 3);
    assert_eq!(first.servers, ["s1", "s2"].map(String::from).into());
    // s0 sorts before the cursor (s2); s2 itself is deleted.
    world.insert(0, server("s0"));
    world.retain(|s| s.meta().name.as_deref() != Some("s2"));
    let mut rest = Vec::new();
    for _ in 0..2 {
        rest.extend(world_tick(&servers(world.clone()), &none, &mut cursor, 3).servers);
    }
    assert_eq!(rest, ["s3", "s4", "s5", "s6"].map(String::from));
    let next = world_tick(&servers(world.clone()), &none, &mut cursor, 3);
    assert!(
        next.servers.contains("s0"),
        "the next pass starts at the first key: {next:?}"
    );
}

fn world_tick(
    world: &ServerCatalog,
    all: &ClaimCatalog,
    cursor: &mut ResyncCursor,
    ticks: u32,
) -> Wake {
    server_binder::binding::wakeups::on_resync_tick(world, all, cursor, ticks)
}

/// The controllers' start wakes every object once, a share of each kind per step, then
/// says it is done.
#[test]
fn the_start_wakes_every_object_once_a_share_at_a_time() {
    let world = servers((0..7).map(|i| server(&format!("s{i}"))).collect());
    let all = claims((0..3).map(|i| claim(&format!("c{i}"))).collect());
    let mut cursor = ResyncCursor::default();
    let (mut woken_servers, mut woken_claims) = (Vec::new(), Vec::new());
    let mut steps = 0;
    while let Some(wake) = on_start_step(&world, &all, &mut cursor, 2) {
        assert!(
            wake.servers.len() <= 2 && wake.claims.len() <= 2,
            "{wake:?}"
        );
        woken_servers.extend(wake.servers);
        woken_claims.extend(wake.claims.into_iter().map(|k| k.name.clone()));
        steps += 1;
        assert!(steps <= 4, "a share of 2 wakes 7 servers in 4 steps");
    }
    assert_eq!(
        woken_servers,
        (0..7).map(|i| format!("s{i}")).collect::<Vec<_>>()
    );
    assert_eq!(woken_claims, ["c0", "c1", "c2"]);
}

/// A claim its class or a quota shuts out fits no server, so the matching kept nothing
/// for it: let in again or shut out anew, it wakes no other claim; one that was let in
/// and is shut out leaves the matching, and wakes the others (docs/binding.md,
/// "Wake-up rules").
#[test]
fn a_claim_shut_out_by_its_quota_frees_nothing_for_the_others() {
    use server_binder::binding::world::classes::without_servers;
    let a = claim("a").created(1);
    let b = claim("b").created(2);
    let shut = without_servers(&a);
    let world = servers(vec![server("s1")]);
    let all = |a: &server_binder::api::CachedClaim| claims(vec![a.clone(), b.clone()]);
    let wake = on_claim_change(Some(&shut), Some(&a), &world, &all(&a));
    assert!(!others_woken(&wake, "a"), "let in: {wake:?}");
    let wake = on_claim_change(Some(&shut), None, &world, &claims(vec![b.clone()]));
    assert!(
        !others_woken(&wake, "a"),
        "deleted while shut out: {wake:?}"
    );
    let wake = on_claim_change(Some(&a), Some(&shut), &world, &all(&shut));
    assert!(others_woken(&wake, "a"), "shut out: {wake:?}");
}

/// The delivery of a controller's own write ([`Settles`], docs/binding.md, "Wake-up
/// rules"): what it woke, with the written object and the other side it names.
fn echo_wake(truth: &crate::binding::world::Truth) -> Wake {
    Wake {
        claims: truth.claims.values().map(claim_key).collect(),
        servers: truth.servers.keys().cloned().collect(),
    }
}

#[test]
fn the_delivery_of_an_own_write_wakes_nobody_a_step_would_leave_as_is() {
    use crate::binding::world::{Truth, fresh_binder, settle};
    let mut truth = Truth::new(vec![server("s1")], vec![claim("a")]);
    settle(&mut truth);
    let binder = fresh_binder(&truth, Rules::real());
    let (a, s1) = (truth.claim("a"), truth.server("s1"));
    assert!(is_bound_to(a, "s1"), "{a:?}");
    let mut wake = echo_wake(&truth);
    binder.settle_own_write(a, &mut wake, now().0);
    assert!(wake.is_empty(), "the claim's write: {wake:?}");
    let mut wake = echo_wake(&truth);
    binder.settle_own_write(s1, &mut wake, now().0);
    assert!(wake.is_empty(), "the server's write: {wake:?}");
}

#[test]
fn the_delivery_of_an_own_write_wakes_whom_it_gives_work() {
    use crate::binding::world::{Truth, apply_claim_plan, fresh_binder};
    let mut truth = Truth::new(vec![server("s1")], vec![claim("a")]);
    // The claim controller picks, as the binary does: its binder assumes the pick, and
    // the watch delivers the claim written.
    let mut binder = fresh_binder(&truth, Rules::real());
    let read = truth.claim("a").clone();
    let step = binder.claim_step(&read, None, Sight::All, now().0);
    binder.start(&read, &step);
    let ClaimStep::Act(work) = &step else {
        panic!("a pick: {step:?}");
    };
    apply_claim_plan(&mut truth, &work.plan, &read).expect("no conflict");
    let a = truth.claim("a").clone();
    binder.claim_object_written(work, &read, ObjectWrite::Written(&a), now().0);
    assert_eq!(a.spec.server_ref.as_ref().map(|r| &*r.name), Some("s1"));
    let mut wake = binder.apply(Arc::new(a.clone()));
    wake.extend(echo_wake(&truth));
    binder.settle_own_write(&a, &mut wake, now().0);
    assert_eq!(
        (wake.claims.len(), wake.servers.len()),
        (0, 1),
        "the pick waits for its server, whose controller has a bind to write: {wake:?}"
    );

    // Its server went to another claim before the pick came back: the claim must look
    // again.
    let b = claim("b").created(1).bound("s1");
    truth.put_claim(b.clone());
    truth.put_server(server("s1").bound_to(&b));
    let binder = fresh_binder(&truth, Rules::real());
    let mut wake = echo_wake(&truth);
    binder.settle_own_write(&a, &mut wake, now().0);
    assert!(
        wake.claims.contains(&claim_key(&a)),
        "a pick of a server taken since: {wake:?}"
    );

    // A version a later own write supersedes wakes nobody for the object itself, even
    // where its step has work; its server is settled as above.
    let mut wake = echo_wake(&truth);
    binder.await_own_write(&a, &mut wake, now().0);
    assert!(!wake.claims.contains(&claim_key(&a)), "{wake:?}");
}

fn is_bound_to(claim: &CachedClaim, server: &str) -> bool {
    let named = claim.spec.server_ref.as_ref().map(|r| r.name.as_str());
    named == Some(server) && claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}
