//! The quota rows on the binder (docs/binding.md, "Server quotas"): a claim over quota
//! waits and takes no server, a claim with room is charged before its pick (the charge
//! carrying the quota's resourceVersion), the server side binds only charged claims, a
//! reservation by name included, and a charge wakes the claim and its server.

use std::sync::Arc;

use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;

/// A class `gpu` taking every server, and a quota of `hard` gpu servers in [`NS`]
/// charging the claims of these uids, counted for its spec.
fn with_quota(binder: Binder, hard: i64, charged: &[&str]) -> Binder {
    with_quota_counted(binder, hard, charged, Some(3))
}

/// [`with_quota`] at generation 3, its status counted at `observed` (`None`: never).
fn with_quota_counted(
    binder: Binder,
    hard: i64,
    charged: &[&str],
    observed: Option<i64>,
) -> Binder {
    let gpu = ServerClass::new("gpu", ServerClassSpec::default());
    let mut q = ServerQuota::new(
        "q",
        ServerQuotaSpec {
            hard: [("gpu".to_string(), hard)].into(),
        },
    );
    q.metadata.namespace = Some(NS.into());
    q.metadata.resource_version = Some("7".into());
    q.metadata.generation = Some(3);
    q.status = Some(ServerQuotaStatus {
        observed_generation: observed,
        charged: charged
            .iter()
            .map(|uid| QuotaCharge {
                class: "gpu".into(),
                claim: uid.trim_start_matches("uid-").into(),
                uid: uid.to_string(),
            })
            .collect(),
        used: [("gpu".to_string(), charged.len() as i64)].into(),
        ..ServerQuotaStatus::default()
    });
    with_classes_and_quotas(binder, vec![gpu], vec![q])
}

fn gpu(claim: CachedClaim) -> CachedClaim {
    let mut claim = claim;
    claim.spec.server_class_name = Some("gpu".into());
    claim
}

fn step(binder: &Binder, claim: &CachedClaim) -> ClaimWork {
    let step = |live: LiveServer<'_>| binder.claim_step(claim, live, Sight::All, now().0);
    match claim_step_reading(step, |_| None) {
        ClaimStep::Act(work) => *work,
        other => panic!("expected writes, got {other:?}"),
    }
}

fn server_decision(binder: &Binder, server: &CachedServer) -> ServerDecision {
    let step = |live: LiveClaim<'_>| binder.server_step(None, server, live, now().0);
    match server_step_reading(step, |_| None) {
        ServerStep::Act(work) => work.decision,
        other => panic!("expected a decision, got {other:?}"),
    }
}

#[test]
fn a_claim_a_full_quota_does_not_charge_waits_and_gives_up_its_pick() {
    let a = gpu(claim("a")).bound("s1");
    let b = gpu(claim("b")).chose("s2");
    let servers = vec![server("s1").bound_to(&a), server("s2")];
    let binder = with_quota(listed(servers, vec![a, b.clone()]), 1, &["uid-a"]);
    let work = step(&binder, &b);
    let ClaimDecision::QuotaExceeded { full } = &work.decision else {
        panic!("{:?}", work.decision);
    };
    assert_eq!(
        full.to_string(),
        "team-a holds 1 of 1 servers of class gpu (ServerQuota q)"
    );
    let object = work.plan.object.expect("the pick withdrawn");
    assert!(object.spec.server_ref.is_none());
    assert!(work.charges.is_empty());
    let status = work.plan.status.expect("a status");
    assert_eq!(status.phase, Some(ClaimPhase::Pending));
    // The server side does not bind it either, whatever it names.
    let decision = server_decision(&binder, &server("s2"));
    assert_eq!(decision, ServerDecision::Available);
}

/// Invariant 7 from the quota's creation: a quota new, edited (its generation past the
/// one counted) or whose status was lost admits no claim it does not charge until its
/// recount, however much room its status shows; a claim it charges goes on.
#[test]
fn a_quota_not_counted_for_its_spec_admits_nobody_new_until_its_recount() {
    let a = gpu(claim("a"));
    let b = gpu(claim("b")).names("s2");
    let servers = || vec![server("s1"), server("s2")];
    for observed in [None, Some(2)] {
        let binder = with_quota_counted(
            listed(servers(), vec![a.clone(), b.clone()]),
            5,
            &["uid-b"],
            observed,
        );
        let work = step(&binder, &a);
        let ClaimDecision::QuotaNotCounted { quota } = &work.decision else {
            panic!("{observed:?}: {:?}", work.decision);
        };
        assert_eq!(
            quota.to_string(),
            "ServerQuota q has not yet counted the servers of class gpu that team-a holds (it is new, was edited, or its status was lost)"
        );
        assert!(work.charges.is_empty(), "no charge before the count");
        let status = work.plan.status.expect("a status");
        assert_eq!(status.phase, Some(ClaimPhase::Pending));
        assert_eq!(
            server_decision(&binder, &server("s1")),
            ServerDecision::Available
        );
        // A claim it charged before goes on: its charge still stands.
        assert!(matches!(
            server_decision(&binder, &server("s2")),
            ServerDecision::ClaimForWinner { .. }
        ));
    }
    let counted = with_quota_counted(listed(servers(), vec![a.clone()]), 5, &[], Some(3));
    assert!(matches!(
        step(&counted, &a).decision,
        ClaimDecision::PickBestFit { .. }
    ));
}

#[test]
fn a_claim_with_room_is_charged_before_its_pick_at_the_version_read() {
    let a = gpu(claim("a"));
    let binder = with_quota(listed(vec![server("s1")], vec![a.clone()]), 1, &[]);
    let work = step(&binder, &a);
    assert_eq!(
        work.decision,
        ClaimDecision::PickBestFit { server: s("s1") }
    );
    let [charged] = work.charges.as_slice() else {
        panic!("one charge: {:?}", work.charges);
    };
    // Written as a change of the quota as read, at the version read.
    assert_eq!(charged.read.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(charged.charged.metadata, charged.read.metadata);
    let status = charged.charged.status.as_ref().unwrap();
    assert_eq!(status.charged[0].uid, "uid-a");
    assert_eq!(status.summary, "gpu: 1/1");
    // Charged, the next step writes no charge again.
    let binder = with_quota(listed(vec![server("s1")], vec![a.clone()]), 1, &["uid-a"]);
    assert!(step(&binder, &a).charges.is_empty());
}

#[test]
fn the_server_side_binds_a_claim_only_once_it_is_charged() {
    let a = gpu(claim("a")).names("s1");
    let uncharged = with_quota(listed(vec![server("s1")], vec![a.clone()]), 1, &[]);
    assert_eq!(
        server_decision(&uncharged, &server("s1")),
        ServerDecision::Available
    );
    let charged = with_quota(listed(vec![server("s1")], vec![a]), 1, &["uid-a"]);
    assert!(matches!(
        server_decision(&charged, &server("s1")),
        ServerDecision::ClaimForWinner { .. }
    ));
}

#[test]
fn a_reservation_by_name_waits_for_the_charge() {
    let a = gpu(claim("a")).names("s1");
    let reserved = server("s1").reserved_for("a");
    let uncharged = with_quota(listed(vec![reserved.clone()], vec![a.clone()]), 1, &[]);
    assert_eq!(
        server_decision(&uncharged, &reserved),
        ServerDecision::ReservedAwaitingQuota
    );
    let charged = with_quota(listed(vec![reserved.clone()], vec![a]), 1, &["uid-a"]);
    assert!(matches!(
        server_decision(&charged, &reserved),
        ServerDecision::FillUid { .. }
    ));
}

#[test]
fn a_bound_claim_keeps_its_server_over_a_lowered_quota() {
    let a = gpu(claim("a")).bound("s1");
    let binder = with_quota(
        listed(vec![server("s1").bound_to(&a)], vec![a.clone()]),
        0,
        &[],
    );
    assert!(matches!(
        step(&binder, &a).decision,
        ClaimDecision::BoundConfirmed { .. }
    ));
}

/// A binder where `a` chose s1 and its quota has not charged it yet, and the quota
/// that charges it.
fn before_the_charge() -> (Binder, ServerQuota) {
    let a = gpu(claim("a")).chose("s1");
    let binder = with_quota(listed(vec![server("s1")], vec![a]), 1, &[]);
    let mut charged = (**binder.world().quotas().quota(NS, "q").unwrap()).clone();
    let status = charged.status.as_mut().unwrap();
    status.charged.push(QuotaCharge {
        class: "gpu".into(),
        claim: "a".into(),
        uid: "uid-a".into(),
    });
    status.used.insert("gpu".into(), 1);
    (binder, charged)
}

#[test]
fn a_charge_wakes_the_claim_and_the_server_it_names() {
    let (mut binder, charged) = before_the_charge();
    let wake = binder.apply(Arc::new(charged));
    assert!(wake.claims.contains(&ClaimKey::of(NS, "a")));
    assert!(wake.servers.contains("s1"));
    // A quota change that moves nobody wakes nobody.
    let again = binder.world().quotas().quota(NS, "q").cloned().unwrap();
    assert!(binder.apply(again).is_empty());
}

/// A relist brings the charge with no event of its own (a watch that expired and
/// listed again): it wakes the claim and the server it names as the event would have.
/// (Chaos seed 4 left a charged claim's server unbound when the relist woke nobody.)
#[test]
fn a_charge_a_relist_brings_wakes_the_claim_and_the_server_it_names() {
    let (mut binder, charged) = before_the_charge();
    let wake = binder.relist(vec![Arc::new(charged)]);
    assert!(wake.claims.contains(&ClaimKey::of(NS, "a")), "{wake:?}");
    assert!(wake.servers.contains("s1"), "{wake:?}");
    let again: Vec<_> = binder
        .world()
        .quotas()
        .quota(NS, "q")
        .cloned()
        .into_iter()
        .collect();
    assert!(binder.relist(again).is_empty());
}

/// A claim the default class applies to, whose name is not written yet, is not bound
/// uncharged by the server side meanwhile (it names a server itself).
#[test]
fn a_claim_of_the_default_class_is_not_bound_before_it_is_charged() {
    let mut gpu = ServerClass::new("gpu", ServerClassSpec::default());
    gpu.metadata.annotations = Some(
        [(
            "serverclass.metal.binder.dev/is-default-class".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let a = claim("a").names("s1");
    let mut q = ServerQuota::new(
        "q",
        ServerQuotaSpec {
            hard: [("gpu".to_string(), 1)].into(),
        },
    );
    q.metadata.namespace = Some(NS.into());
    let binder = with_classes_and_quotas(listed(vec![server("s1")], vec![a]), vec![gpu], vec![q]);
    assert_eq!(
        server_decision(&binder, &server("s1")),
        ServerDecision::Available
    );
}

/// A claim its quota shuts out waits on the quota alone, whose changes wake it: a
/// waiting claim that leaves without a server wakes the waiting claims some server could
/// serve, not it (docs/binding.md, "Wake-up rules").
#[test]
fn a_waiting_claim_that_leaves_wakes_no_claim_a_full_quota_holds() {
    let elsewhere = |mut c: CachedClaim| {
        c.meta_mut().namespace = Some("other".into());
        c
    };
    let a = gpu(claim("a")).bound("s1");
    let b = gpu(claim("b")).created(2);
    let c = elsewhere(gpu(claim("c")).created(3));
    let d = elsewhere(gpu(claim("d")).created(4));
    let servers = vec![server("s1").bound_to(&a), server("s2")];
    let claims = vec![a, b, c.clone(), d];
    let mut binder = with_quota(listed(servers, claims), 1, &["uid-a"]);
    let wake = binder.delete(Arc::new(c));
    let woken: Vec<&str> = wake.claims.iter().map(|k| k.name.as_str()).collect();
    assert!(
        woken.contains(&"d"),
        "the claim a server could serve: {woken:?}"
    );
    assert!(!woken.contains(&"b"), "the claim over quota: {woken:?}");
}

/// A claim step reads the view the catalog holds of the claim the watch gave it (here
/// shut out by a full quota), without resolving it again; a copy the catalog did not
/// resolve is resolved anew, to the same view.
#[test]
fn a_step_reads_the_view_the_catalog_holds_of_the_watched_claim() {
    use server_binder::binding::steps::as_its_class_makes_it;
    let a = gpu(claim("a")).bound("s1");
    let b = gpu(claim("b")).created(2);
    let servers = vec![server("s1").bound_to(&a), server("s2")];
    let binder = with_quota(listed(servers, vec![a, b]), 1, &["uid-a"]);
    let world = binder.world();
    let watched = world.claim_as_is(NS, "b").expect("b is cached");
    let held = world.claims().claim(NS, "b").expect("b is cached");
    let (view, ..) = as_its_class_makes_it(world, watched);
    assert!(std::ptr::eq(&*view, held), "the catalog's view: {view:?}");
    let copy = watched.clone();
    let (fresh, ..) = as_its_class_makes_it(world, &copy);
    assert!(matches!(fresh, std::borrow::Cow::Owned(_)), "resolved anew");
    assert_eq!(*fresh, *view);
}
