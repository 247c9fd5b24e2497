//! The Kubernetes PV binder's unit scenarios, ported to servers and claims: each starts
//! from a (possibly half-bound) world, runs both controllers' real decisions until nothing
//! changes, and checks where it ends.

use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;
use crate::binding::world::{Recorded, Truth, settle};

fn phase(truth: &Truth, claim: &str) -> Option<ClaimPhase> {
    truth.claim(claim).status.as_ref().and_then(|s| s.phase)
}

fn reason(truth: &Truth, claim: &str) -> Option<String> {
    let status = truth.claim(claim).status.as_ref()?;
    find_bound(&status.conditions).map(|c| c.reason.clone())
}

fn server_phase(truth: &Truth, server: &str) -> Option<ServerPhase> {
    truth.server(server).status.as_ref().and_then(|s| s.phase)
}

/// Asserts the claim is Bound to the server on both sides, with the annotations,
/// finalizer and phases the protocol prescribes.
fn assert_bound(truth: &Truth, claim: &str, server: &str) {
    let c = truth.claim(claim);
    let s = truth.server(server);
    assert_eq!(
        phase(truth, claim),
        Some(ClaimPhase::Bound),
        "{claim} is Bound"
    );
    assert_eq!(
        c.spec.server_ref.as_ref().map(|r| r.name.as_str()),
        Some(server)
    );
    assert!(meta::is_bind_completed(c), "{claim} has bind-completed");
    let r = s.spec.server_claim_ref.as_ref().expect("server has a ref");
    assert_eq!((r.name.as_str(), r.uid.as_deref()), (claim, meta::uid(c)));
    assert!(has_protection(s), "{server} has the protection finalizer");
    assert_eq!(server_phase(truth, server), Some(ServerPhase::Bound));
}

fn has_event(events: &[Recorded], object: &str, reason: &str) -> bool {
    events
        .iter()
        .any(|(o, e)| o == object && e.reason == reason)
}

#[test]
fn simple_bind() {
    let mut w = Truth::new(vec![server("s1")], vec![claim("c")]);
    let events = settle(&mut w);
    assert_bound(&w, "c", "s1");
    assert_eq!(
        annotation(w.server("s1"), ANNOTATION_BOUND_BY_CONTROLLER).as_deref(),
        Some("yes")
    );
    assert!(has_event(&events, "claim/c", "Bound"));
    assert!(has_event(&events, "server/s1", "Claimed"));
}

#[test]
fn no_match() {
    let mut w = Truth::new(
        vec![server("s1").labelled(&[("size", "s")])],
        vec![claim("c").selects(&[("size", "xl")])],
    );
    let events = settle(&mut w);
    assert_eq!(phase(&w, "c"), Some(ClaimPhase::Pending));
    assert_eq!(reason(&w, "c").as_deref(), Some("NoMatchingServer"));
    assert!(has_event(&events, "claim/c", "FailedBinding"));
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Available));
}

#[test]
fn best_fit_prefers_untainted_then_the_lowest_name() {
    let mut w = Truth::new(
        vec![server("a").taint("gpu"), server("c"), server("b")],
        vec![claim("x").tolerates("gpu")],
    );
    settle(&mut w);
    assert_bound(&w, "x", "b");
}

#[test]
fn server_pre_bound_by_name() {
    let mut w = Truth::new(
        vec![server("a"), server("s1").reserved_for("c")],
        vec![claim("c")],
    );
    settle(&mut w);
    assert_bound(&w, "c", "s1");
    assert_eq!(
        annotation(w.server("s1"), ANNOTATION_BOUND_BY_CONTROLLER),
        None,
        "the user's reservation stays user-made"
    );
}

#[test]
fn server_pre_bound_by_uid_after_a_crash_after_the_server_write() {
    let mut w = Truth::new(
        vec![server("a"), server("s1").claimed_for("c", "uid-c")],
        vec![claim("c")],
    );
    settle(&mut w);
    assert_bound(&w, "c", "s1");
    assert_eq!(
        server_phase(&w, "a"),
        Some(ServerPhase::Available),
        "no second reservation"
    );
}

#[test]
fn server_pre_bound_to_a_claim_of_the_same_name_but_another_uid() {
    // The claim was deleted and re-created: the old binding is released, and the new
    // claim binds afresh; it never inherits the old incarnation's server by name.
    let mut w = Truth::new(
        vec![
            server("s1")
                .claimed_for("c", "uid-old")
                .phase(ServerPhase::Bound),
            server("s2"),
        ],
        vec![claim("c").uid("uid-new")],
    );
    let events = settle(&mut w);
    assert_bound(&w, "c", "s2");
    assert_eq!(w.server("s1").spec.server_claim_ref, None);
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Available));
    assert!(has_event(&events, "server/s1", "Released"));
}

#[test]
fn crash_after_the_claim_write() {
    let mut w = Truth::new(vec![server("s1")], vec![claim("c").chose("s1")]);
    settle(&mut w);
    assert_bound(&w, "c", "s1");
}

#[test]
fn crash_after_bind_completed_before_the_status() {
    let mut w = Truth::new(
        vec![
            server("s1")
                .claimed_for("c", "uid-c")
                .phase(ServerPhase::Bound),
        ],
        vec![claim("c").chose("s1").bind_completed()],
    );
    settle(&mut w);
    assert_bound(&w, "c", "s1");
}

#[test]
fn selector_match_and_mismatch() {
    let mut w = Truth::new(
        vec![
            server("s1").labelled(&[("rack", "r1"), ("size", "m")]),
            server("s2").labelled(&[("rack", "r2"), ("size", "xl")]),
        ],
        vec![
            claim("xl").expression("size", SelectorOperator::In, &["l", "xl"]),
            claim("nope").selects(&[("rack", "r9")]),
        ],
    );
    settle(&mut w);
    assert_bound(&w, "xl", "s2");
    assert_eq!(reason(&w, "nope").as_deref(), Some("NoMatchingServer"));
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Available));
}

#[test]
fn user_pre_bound_claim() {
    let mut w = Truth::new(
        vec![server("a"), server("s9")],
        vec![claim("c").names("s9")],
    );
    settle(&mut w);
    assert_bound(&w, "c", "s9");
    assert_eq!(
        annotation(w.claim("c"), ANNOTATION_PRE_BOUND),
        None,
        "still user-chosen"
    );
}

#[test]
fn released_server_is_skipped() {
    let mut w = Truth::new(
        vec![
            server("a")
                .retain()
                .claimed_for("gone", "uid-gone")
                .phase(ServerPhase::Released),
            server("b"),
        ],
        vec![claim("c")],
    );
    settle(&mut w);
    assert_bound(&w, "c", "b");
    assert_eq!(server_phase(&w, "a"), Some(ServerPhase::Released));
}

#[test]
fn claim_pre_bound_to_a_missing_server() {
    let mut w = Truth::new(vec![server("s1")], vec![claim("c").names("missing")]);
    let events = settle(&mut w);
    assert_eq!(phase(&w, "c"), Some(ClaimPhase::Pending));
    assert_eq!(reason(&w, "c").as_deref(), Some("ServerNotFound"));
    assert!(has_event(&events, "claim/c", "FailedBinding"));
    assert_eq!(
        w.claim("c")
            .spec
            .server_ref
            .as_ref()
            .map(|r| r.name.as_str()),
        Some("missing")
    );
}

#[test]
fn user_chosen_claim_to_a_taken_server() {
    let mut w = Truth::new(
        vec![server("s1"), server("s2")],
        vec![
            claim("first").names("s1").created(1),
            claim("second").names("s1").created(2),
        ],
    );
    let events = settle(&mut w);
    assert_bound(&w, "first", "s1");
    assert_eq!(
        reason(&w, "second").as_deref(),
        Some("ServerAlreadyClaimed")
    );
    assert!(has_event(&events, "claim/second", "FailedBinding"));
    assert_eq!(
        server_phase(&w, "s2"),
        Some(ServerPhase::Available),
        "never taken by force"
    );
}

#[test]
fn controller_chosen_claim_to_a_taken_server_withdraws_and_picks_again() {
    let mut w = Truth::new(
        vec![server("s1").claimed_for("other", "uid-other"), server("s2")],
        vec![
            claim("other").chose("s1").bind_completed(),
            claim("c").chose("s1"),
        ],
    );
    let events = settle(&mut w);
    assert_bound(&w, "other", "s1");
    assert_bound(&w, "c", "s2");
    assert!(has_event(&events, "claim/c", "Rebinding"));
}

#[test]
fn bound_claim_whose_ref_was_cleared_gets_it_back() {
    // Unlike a PVC's volumeName, serverRef can be cleared where admission does not
    // refuse it; the bound claim never moves: the claim writes the ref back ([j]).
    let mut w = Truth::new(
        vec![server("s1").claimed_for("c", "uid-c"), server("s2")],
        vec![
            claim("c").bind_completed().phase(ClaimPhase::Bound),
            claim("d").created(20),
        ],
    );
    let events = settle(&mut w);
    assert_eq!(phase(&w, "c"), Some(ClaimPhase::Bound));
    assert!(has_event(&events, "claim/c", "ServerRefRestored"));
    assert!(!has_event(&events, "server/s1", "RolledBack"));
    assert_eq!(
        w.server("s1").spec.server_claim_ref,
        Some(holder("c", Some("uid-c")))
    );
    assert_eq!(phase(&w, "d"), Some(ClaimPhase::Bound), "d binds s2");
}

#[test]
fn bound_claim_whose_server_vanished_is_lost() {
    let mut w = Truth::new(
        vec![],
        vec![
            claim("c")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound),
        ],
    );
    let events = settle(&mut w);
    assert_eq!(phase(&w, "c"), Some(ClaimPhase::Lost));
    assert_eq!(reason(&w, "c").as_deref(), Some("ServerMissing"));
    assert!(has_event(&events, "claim/c", "ClaimLost"));
}

#[test]
fn bound_claim_whose_server_lost_its_ref_gets_it_back() {
    let mut w = Truth::new(
        vec![server("s1").phase(ServerPhase::Bound)],
        vec![
            claim("c")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound),
        ],
    );
    settle(&mut w);
    assert_bound(&w, "c", "s1");
}

#[test]
fn bound_claim_whose_server_names_another_claim_is_misbound() {
    let mut w = Truth::new(
        vec![server("s1").claimed_for("other", "uid-other")],
        vec![
            claim("c")
                .chose("s1")
                .bind_completed()
                .phase(ClaimPhase::Bound),
            claim("other").chose("s1").bind_completed(),
        ],
    );
    let events = settle(&mut w);
    assert_eq!(phase(&w, "c"), Some(ClaimPhase::Lost));
    assert_eq!(reason(&w, "c").as_deref(), Some("ServerMisbound"));
    assert!(has_event(&events, "claim/c", "ClaimMisbound"));
    assert_bound(&w, "other", "s1");
}

#[test]
fn server_bound_to_a_missing_claim_is_recycled() {
    let mut w = Truth::new(
        vec![
            server("s1")
                .claimed_for("gone", "uid-gone")
                .phase(ServerPhase::Bound),
        ],
        vec![],
    );
    let events = settle(&mut w);
    let s1 = w.server("s1");
    assert_eq!(s1.spec.server_claim_ref, None);
    assert!(!has_protection(s1));
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Available));
    assert!(has_event(&events, "server/s1", "Released"));
}

#[test]
fn server_bound_to_a_missing_claim_is_retained() {
    let mut w = Truth::new(
        vec![
            server("s1")
                .retain()
                .claimed_for("gone", "uid-gone")
                .phase(ServerPhase::Bound),
        ],
        vec![claim("c")],
    );
    settle(&mut w);
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Released));
    assert_eq!(
        w.server("s1").spec.server_claim_ref,
        Some(holder("gone", Some("uid-gone")))
    );
    assert_eq!(
        reason(&w, "c").as_deref(),
        Some("NoMatchingServer"),
        "Released is skipped"
    );
}

#[test]
fn server_bound_to_a_claim_that_names_another_server_controller_made_ref() {
    let mut w = Truth::new(
        vec![server("s1").claimed_for("c", "uid-c"), server("s2")],
        vec![claim("c").chose("s2")],
    );
    let events = settle(&mut w);
    assert!(has_event(&events, "server/s1", "RolledBack"));
    assert_eq!(w.server("s1").spec.server_claim_ref, None);
    assert_bound(&w, "c", "s2");
}

#[test]
fn server_bound_to_a_claim_that_names_another_server_user_made_ref() {
    let mut w = Truth::new(
        vec![server("s1").uid_filled_for("c", "uid-c"), server("s2")],
        vec![claim("c").names("s2")],
    );
    settle(&mut w);
    assert_eq!(
        w.server("s1").spec.server_claim_ref,
        Some(holder("c", None)),
        "keeps the name"
    );
    assert_eq!(server_phase(&w, "s1"), Some(ServerPhase::Available));
    assert_bound(&w, "c", "s2");
}

#[test]
fn deleting_a_bound_server_waits_for_its_claim() {
    let mut w = Truth::new(vec![server("s1")], vec![claim("c")]);
    settle(&mut w);
    w.delete_server("s1");
    let events = settle(&mut w);
    assert!(has_event(&events, "server/s1", "DeletionBlocked"));
    assert!(w.servers.contains_key("s1"), "the finalizer holds it");
    w.delete_claim("c");
    settle(&mut w);
    assert!(!w.servers.contains_key("s1"), "gone once the claim is");
}
