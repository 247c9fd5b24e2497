//! One test per row of the claim controller's table (docs/binding.md), asserting the exact
//! decision and the writes, event and outcome of its plan.

use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;

fn plan(claim: &CachedClaim, decision: &ClaimDecision) -> ClaimPlan {
    plan_claim(claim, decision, &now())
}

fn status_reason(plan: &ClaimPlan) -> (Option<ClaimPhase>, Option<String>) {
    let status = plan.status.as_ref().expect("a status write");
    (
        status.phase,
        find_bound(&status.conditions).map(|c| c.reason.clone()),
    )
}

fn bound_message(plan: &ClaimPlan) -> String {
    let status = plan.status.as_ref().expect("a status write");
    find_bound(&status.conditions)
        .expect("a Bound condition")
        .message
        .clone()
}

fn event(plan: &ClaimPlan) -> (EventKind, &'static str) {
    let e = plan.event.as_ref().expect("an event");
    (e.kind, e.reason)
}

// ---- Bound path ----

#[test]
fn bound_with_server_ref_cleared_is_lost() {
    // No server holds it any more (else the claim restores its ref: [j]).
    let c = claim("c").bind_completed().phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1").claimed_for("other", "uid-other")]);
    assert_eq!(d, ClaimDecision::BoundServerRefCleared);
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Lost), Some(s("ServerRefCleared")))
    );
    assert_eq!(event(&p), (EventKind::Warning, "ClaimLost"));
    assert_eq!(p.outcome, Some(Outcome::Lost(LostReason::ServerRefCleared)));
    assert!(
        p.object.is_none(),
        "a Lost claim keeps its metadata and spec"
    );
}

#[test]
fn bound_with_server_missing_from_cache_reads_it_live_first() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[]);
    assert_eq!(d, ClaimDecision::ConfirmServerMissing { server: s("s1") });
    let p = plan(&c, &d);
    assert_eq!(p.confirm_server.as_deref(), Some("s1"));
    assert!(p.object.is_none() && p.status.is_none() && p.event.is_none());
}

#[test]
fn bound_with_server_missing_confirmed_live_is_lost() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let d = decide_c_live(&c, &[]);
    assert_eq!(d, ClaimDecision::BoundServerMissing { server: s("s1") });
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Lost), Some(s("ServerMissing")))
    );
    assert_eq!(event(&p), (EventKind::Warning, "ClaimLost"));
    assert_eq!(p.outcome, Some(Outcome::Lost(LostReason::ServerMissing)));
}

#[test]
fn bound_with_server_ref_empty_stays_bound_for_the_server_controller_to_restore() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1")]);
    assert_eq!(d, ClaimDecision::BoundServerRefLost { server: s("s1") });
    assert!(plan(&c, &d).is_noop(), "keep Bound: no write at all");
}

#[test]
fn bound_with_server_naming_its_uid_ensures_bound_and_reverts_a_lost_phase() {
    let mut c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Lost);
    c.status.as_mut().expect("status").bound_time = Some(t(5));
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c")]);
    assert_eq!(
        d,
        ClaimDecision::BoundConfirmed {
            server: s("s1"),
            server_uid: s("uid-server-s1"),
            selector_mismatch: false,
            server_deleting: false,
        }
    );
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Bound), Some(s("Bound")))
    );
    assert_eq!(p.outcome, Some(Outcome::Repair(RepairCase::ClaimStatus)));
    // Once the status says Bound, the same decision writes nothing.
    let mut repaired = c.clone();
    repaired.status = p.status.clone();
    assert!(plan(&repaired, &d).is_noop(), "no status churn");
}

#[test]
fn bound_with_server_naming_another_claim_is_misbound() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1").claimed_for("other", "uid-other")]);
    assert_eq!(
        d,
        ClaimDecision::BoundMisbound {
            server: s("s1"),
            holder: holder("other", Some("uid-other"))
        }
    );
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Lost), Some(s("ServerMisbound")))
    );
    assert_eq!(event(&p), (EventKind::Warning, "ClaimMisbound"));
    assert_eq!(p.outcome, Some(Outcome::Lost(LostReason::ServerMisbound)));
}

#[test]
fn bound_with_server_naming_another_uid_is_misbound() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-older-c")]);
    assert!(matches!(d, ClaimDecision::BoundMisbound { .. }), "{d:?}");
}

// ---- Unbound path ----

#[test]
fn unbound_adopts_a_server_reserved_for_it_by_name() {
    let c = claim("c");
    let d = decide_c(&c, &[server("s0"), server("s1").reserved_for("c")]);
    assert_eq!(d, ClaimDecision::AdoptReservedServer { server: s("s1") });
    let p = plan(&c, &d);
    let written = p.object.expect("one write");
    assert_eq!(written.spec.server_ref, Some(ServerRef { name: s("s1") }));
    assert_eq!(
        annotation(&written, ANNOTATION_PRE_BOUND).as_deref(),
        Some("yes")
    );
    assert!(p.status.is_none());
    assert_eq!(p.outcome, Some(Outcome::Repair(RepairCase::Adopted)));
}

#[test]
fn unbound_adopts_a_server_bound_to_its_uid_after_a_crash() {
    let c = claim("c");
    let d = decide_c(&c, &[server("s0"), server("s1").claimed_for("c", "uid-c")]);
    assert_eq!(d, ClaimDecision::AdoptReservedServer { server: s("s1") });
}

#[test]
fn unbound_does_not_adopt_an_ineligible_reservation() {
    let c = claim("c").selects(&[("rack", "r1")]);
    let world = [
        server("s1").reserved_for("c").labelled(&[("rack", "r2")]),
        server("s2").labelled(&[("rack", "r1")]),
    ];
    assert_eq!(
        decide_c(&c, &world),
        ClaimDecision::PickBestFit { server: s("s2") }
    );
}

#[test]
fn unbound_picks_the_best_fit_in_one_write() {
    let c = claim("c").tolerates("gpu");
    let world = [server("a").taint("gpu"), server("c"), server("b")];
    let d = decide_c(&c, &world);
    assert_eq!(
        d,
        ClaimDecision::PickBestFit { server: s("b") },
        "untainted first, then name"
    );
    let p = plan(&c, &d);
    let written = p.object.expect("one write");
    assert_eq!(written.spec.server_ref, Some(ServerRef { name: s("b") }));
    assert_eq!(
        annotation(&written, ANNOTATION_PRE_BOUND).as_deref(),
        Some("yes")
    );
    assert!(p.status.is_none() && p.event.is_none());
}

#[test]
fn unbound_skips_servers_already_chosen_for_other_claims() {
    let c = claim("c");
    let world = servers(vec![server("a"), server("b")]);
    let d = decide_claim(&c, &world, &alone(&|n| n == "a"), Liveness::Cached);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("b") });
}

/// The pick passes over a server that another claim naming it would win: the picker
/// (controller-chosen once it picks) would only have to withdraw.
fn pick_with_rivals(c: &CachedClaim, rivals: Vec<CachedClaim>) -> ClaimDecision {
    let world = servers(vec![server("a"), server("b").unclaimable(), server("c")]);
    let others = claims(rivals);
    let skip = pass_over(c, &world, &others, &|_| false, &|_, _| true);
    decide_claim(c, &world, &alone(&skip), Liveness::Cached)
}

#[test]
fn unbound_passes_over_a_server_a_users_claim_names() {
    let c = claim("c").created(1);
    let d = pick_with_rivals(&c, vec![c.clone(), claim("u").names("a").created(9)]);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("c") });
}

#[test]
fn unbound_passes_over_a_server_a_bound_claim_names() {
    let c = claim("c").created(1);
    let bound = claim("old")
        .chose("a")
        .bind_completed()
        .phase(ClaimPhase::Bound)
        .created(9);
    let d = pick_with_rivals(&c, vec![c.clone(), bound]);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("c") });
}

/// A `bind-completed` a tenant wrote, with no bind recorded, outranks nobody: the pick
/// does not pass over the server it names (docs/binding.md, "Trust").
#[test]
fn unbound_does_not_pass_over_a_server_a_forged_bind_completed_names() {
    let c = claim("c").created(1);
    let forged = claim("forger").chose("a").bind_completed().created(9);
    let d = pick_with_rivals(&c, vec![c.clone(), forged]);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("a") });
}

#[test]
fn unbound_passes_over_a_server_an_older_chosen_claim_names() {
    let c = claim("c").created(5);
    let d = pick_with_rivals(&c, vec![c.clone(), claim("older").chose("a").created(1)]);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("c") });
}

#[test]
fn unbound_still_picks_a_server_a_younger_chosen_claim_names() {
    let c = claim("c").created(1);
    let d = pick_with_rivals(&c, vec![c.clone(), claim("younger").chose("a").created(5)]);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("a") });
}

#[test]
fn unbound_still_picks_a_server_whose_naming_claim_it_cannot_serve() {
    let c = claim("c").created(1);
    let u = claim("u").names("a").selects(&[("rack", "r9")]).created(9);
    let d = pick_with_rivals(&c, vec![c.clone(), u]);
    assert_eq!(
        d,
        ClaimDecision::PickBestFit { server: s("a") },
        "u can never take a"
    );
}

#[test]
fn unbound_with_nothing_eligible_is_pending_no_matching_server() {
    let c = claim("c").selects(&[("size", "xl")]);
    let world = [
        server("a").unclaimable(),
        server("b").labelled(&[("size", "s")]),
    ];
    let d = decide_c(&c, &world);
    assert!(matches!(d, ClaimDecision::NoMatchingServer { .. }), "{d:?}");
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Pending), Some(s("NoMatchingServer")))
    );
    assert_eq!(event(&p), (EventKind::Normal, "FailedBinding"));
    // The scheduler's convention: every server counted by its first reason.
    let why = "0/2 servers can serve this claim: 1 does not match the selector (size=xl), \
        1 is unclaimable.";
    assert_eq!(bound_message(&p), why);
    assert_eq!(p.event.as_ref().map(|e| e.note.as_str()), Some(why));
    let mut pending = c.clone();
    pending.status = p.status.clone();
    assert!(
        plan(&pending, &d).is_noop(),
        "the event is not repeated on resync"
    );
}

#[test]
fn controller_chosen_missing_server_is_withdrawn() {
    let c = claim("c").chose("gone");
    let d = decide_c(&c, &[server("s1")]);
    assert_eq!(
        d,
        ClaimDecision::WithdrawMissingServer { server: s("gone") }
    );
    let p = plan(&c, &d);
    let written = p.object.expect("withdraw write");
    assert_eq!(written.spec.server_ref, None);
    assert_eq!(annotation(&written, ANNOTATION_PRE_BOUND), None);
    assert_eq!(p.outcome, Some(Outcome::Rebind));
}

#[test]
fn user_chosen_missing_server_is_pending_server_not_found() {
    let c = claim("c").names("gone");
    let d = decide_c(&c, &[server("s1")]);
    assert_eq!(d, ClaimDecision::ServerNotFound { server: s("gone") });
    let p = plan(&c, &d);
    assert!(p.object.is_none(), "a user's serverRef is never cleared");
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Pending), Some(s("ServerNotFound")))
    );
    assert_eq!(event(&p), (EventKind::Warning, "FailedBinding"));
}

#[test]
fn eligible_server_without_ref_waits_for_the_server_controller() {
    let c = claim("c").chose("s1");
    let d = decide_c_picked(&c, &[server("s1")]);
    assert_eq!(d, ClaimDecision::WaitForServer { server: s("s1") });
    // A new claim shows no status until its bind completes: no write for a Pending that
    // Bound would overwrite at once.
    assert!(plan(&c, &d).is_noop(), "{:?}", plan(&c, &d));
    // One that showed an earlier status is told what it waits for now.
    let c = c.phase(ClaimPhase::Pending);
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Pending), Some(s("WaitingForServer")))
    );
    assert!(p.object.is_none() && p.event.is_none());
}

#[test]
fn controller_chosen_ineligible_server_is_withdrawn() {
    let c = claim("c").chose("s1");
    let d = decide_c(&c, &[server("s1").unclaimable()]);
    assert_eq!(
        d,
        ClaimDecision::WithdrawIneligibleServer {
            server: s("s1"),
            why: Ineligible::Unclaimable
        }
    );
    let p = plan(&c, &d);
    assert_eq!(p.object.as_ref().expect("withdraw").spec.server_ref, None);
    assert_eq!(event(&p), (EventKind::Normal, "Rebinding"));
}

#[test]
fn user_chosen_ineligible_server_is_a_mismatch_with_the_reason() {
    let c = claim("c").names("s1").selects(&[("rack", "r1")]);
    let d = decide_c(&c, &[server("s1").labelled(&[("rack", "r9")])]);
    assert_eq!(
        d,
        ClaimDecision::ServerMismatch {
            server: s("s1"),
            why: Ineligible::SelectorMismatch
        }
    );
    let p = plan(&c, &d);
    assert!(p.object.is_none());
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Pending), Some(s("ServerMismatch")))
    );
    let e = p.event.expect("event");
    assert_eq!((e.kind, e.reason), (EventKind::Warning, "ServerMismatch"));
    assert!(e.note.contains("serverSelector"), "{}", e.note);
}

#[test]
fn server_naming_the_claim_without_uid_waits_for_the_uid() {
    let c = claim("c").names("s1");
    let d = decide_c(&c, &[server("s1").reserved_for("c")]);
    assert_eq!(d, ClaimDecision::WaitForUid { server: s("s1") });
    assert!(plan(&c, &d).object.is_none());
}

#[test]
fn server_naming_the_claim_uid_completes_the_bind() {
    let c = claim("c").chose("s1");
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c")]);
    assert_eq!(
        d,
        ClaimDecision::CompleteBind {
            server: s("s1"),
            server_uid: s("uid-server-s1")
        }
    );
    let p = plan(&c, &d);
    let written = p.object.expect("bind-completed write");
    assert_eq!(
        annotation(&written, ANNOTATION_BIND_COMPLETED).as_deref(),
        Some("yes")
    );
    let status = p.status.expect("then the status");
    assert_eq!(status.phase, Some(ClaimPhase::Bound));
    assert_eq!(status.bound_time, Some(now()));
    assert_eq!(p.event.expect("event").reason, "Bound");
    assert_eq!(p.outcome, Some(Outcome::Bound));
}

#[test]
fn controller_chosen_server_taken_by_another_claim_is_withdrawn_with_rebinding() {
    let c = claim("c").chose("s1");
    let d = decide_c(&c, &[server("s1").claimed_for("other", "uid-other")]);
    assert_eq!(
        d,
        ClaimDecision::WithdrawTakenServer {
            server: s("s1"),
            holder: holder("other", Some("uid-other"))
        }
    );
    let p = plan(&c, &d);
    assert_eq!(p.object.as_ref().expect("withdraw").spec.server_ref, None);
    assert_eq!(event(&p), (EventKind::Normal, "Rebinding"));
    assert_eq!(p.outcome, Some(Outcome::Rebind));
}

#[test]
fn user_chosen_server_taken_by_another_claim_is_already_claimed() {
    let c = claim("c").names("s1");
    let d = decide_c(&c, &[server("s1").claimed_for("other", "uid-other")]);
    assert!(
        matches!(d, ClaimDecision::ServerAlreadyClaimed { .. }),
        "{d:?}"
    );
    let p = plan(&c, &d);
    assert!(p.object.is_none(), "a user's serverRef is never cleared");
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Pending), Some(s("ServerAlreadyClaimed")))
    );
    assert_eq!(event(&p), (EventKind::Warning, "FailedBinding"));
}

#[test]
fn a_crash_between_bind_completed_and_the_status_still_finishes_the_bind() {
    let c = claim("c").chose("s1").bind_completed();
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c")]);
    let p = plan(&c, &d);
    let status = p.status.as_ref().expect("status");
    assert_eq!(status.bound_time, Some(now()), "boundTime is not lost");
    assert_eq!(
        p.outcome,
        Some(Outcome::Bound),
        "counted as a bind, not a repair"
    );
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("Bound"));
}

#[test]
fn a_stale_pre_bound_annotation_goes_when_a_user_cleared_the_ref() {
    let mut c = claim("c").chose("s1");
    c.spec.server_ref = None;
    let d = decide_c(&c, &[]);
    assert!(matches!(d, ClaimDecision::NoMatchingServer { .. }), "{d:?}");
    let p = plan(&c, &d);
    assert_eq!(
        annotation(p.object.as_ref().expect("write"), ANNOTATION_PRE_BOUND),
        None
    );
}

#[test]
fn a_reservation_does_not_override_the_claims_selector() {
    let c = claim("c").names("s1").selects(&[("rack", "r1")]);
    let d = decide_c(
        &c,
        &[server("s1").reserved_for("c").labelled(&[("rack", "r2")])],
    );
    assert_eq!(
        d,
        ClaimDecision::ServerMismatch {
            server: s("s1"),
            why: Ineligible::SelectorMismatch
        }
    );
}

#[test]
fn a_bound_claim_whose_server_ref_was_cleared_restores_it_from_the_server_holding_it() {
    let c = claim("c").bind_completed().phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c"), server("s0")]);
    assert_eq!(d, ClaimDecision::RestoreServerRef { server: s("s1") });
    let p = plan(&c, &d);
    assert_eq!(event(&p), (EventKind::Warning, "ServerRefRestored"));
    let written = p.object.expect("the ref written back");
    assert_eq!(written.spec.server_ref.map(|r| r.name), Some(s("s1")));
    // No server holds it: Lost.
    assert_eq!(
        decide_c(&c, &[server("s1")]),
        ClaimDecision::BoundServerRefCleared
    );
}

/// [k] A Lost claim's stale `pre-bound` goes with the ref it marked, so a ref its
/// tenant writes next is user-chosen.
#[test]
fn a_lost_claim_whose_ref_was_cleared_drops_its_pre_bound() {
    let c = claim("c")
        .chose("gone")
        .bind_completed()
        .phase(ClaimPhase::Lost);
    let mut cleared = c.clone();
    cleared.spec.server_ref = None;
    let d = decide_c(&cleared, &[server("s1")]);
    assert_eq!(d, ClaimDecision::BoundServerRefCleared);
    let p = plan(&cleared, &d);
    assert!(!is_controller_chosen(
        p.object.as_ref().expect("pre-bound dropped")
    ));
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Lost), Some(s("ServerRefCleared")))
    );
}

/// [k] (Trust) A `bind-completed` the tenant wrote, on a claim naming a server it may
/// not have, has no bind behind it: it is dropped, whatever the server, and the unbound
/// path then reports the mismatch. A Lost claim pointed at another server is the same.
#[test]
fn a_forged_or_left_over_bind_completed_naming_a_server_is_dropped() {
    let forged = claim("c")
        .names("s1")
        .bind_completed()
        .selects(&[("rack", "r1")]);
    let r1 = server("s1").labelled(&[("rack", "r1")]);
    for cannot in [
        r1.clone().unclaimable(),
        r1.clone().taint("gpu"),
        server("s1").labelled(&[("rack", "r2")]),
        r1.clone(),
    ] {
        let d = decide_c(&forged, std::slice::from_ref(&cannot));
        assert_eq!(d, ClaimDecision::ClearStaleBindCompleted, "{cannot:?}");
    }
    let lost = claim("c")
        .names("s1")
        .bind_completed()
        .phase(ClaimPhase::Lost)
        .records("gone");
    let d = decide_c(&lost, &[server("s1").unclaimable()]);
    assert_eq!(d, ClaimDecision::ClearStaleBindCompleted);
    let taken = [server("s1").claimed_for("other", "uid-other")];
    assert_eq!(
        decide_c(&lost, &taken),
        ClaimDecision::ClearStaleBindCompleted
    );
    // Its record names a server that is gone: so is the one it names now, but that is
    // another server (it never held this claim).
    assert_eq!(
        decide_c_live(&lost, &[]),
        ClaimDecision::ClearStaleBindCompleted
    );
    let recorded = lost.clone().no_record().records("s1");
    assert_eq!(
        decide_c_live(&recorded, &[]),
        ClaimDecision::BoundServerMissing { server: s("s1") }
    );
}

/// The claim's record of a bind names the server object: a server re-created under the
/// same name is another server, and the record is no evidence for it.
#[test]
fn a_record_names_the_server_object_not_its_name() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    assert_eq!(
        decide_c(&c, &[server("s1")]),
        ClaimDecision::BoundServerRefLost { server: s("s1") }
    );
    let mut recreated = server("s1");
    recreated.meta_mut().uid = Some("uid-of-a-new-s1".into());
    assert_eq!(
        decide_c(&c, &[recreated]),
        ClaimDecision::BoundServerMissing { server: s("s1") },
        "the server it was bound to is gone; a Lost claim takes no other on its own"
    );
}

/// `CompleteBind` records the server it bound in the status; a bind to another server
/// than the one recorded is a new bind, with a new `boundTime`.
#[test]
fn complete_bind_records_the_server_and_a_new_bind_gets_a_new_bound_time() {
    let c = claim("c").chose("s1");
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c")]);
    let status = plan(&c, &d).status.expect("the Bound status");
    let record = status.bound_server_ref.expect("a record");
    assert_eq!(
        (record.name.as_str(), record.uid.as_str()),
        ("s1", "uid-server-s1")
    );
    let elsewhere = claim("c").chose("s1").phase(ClaimPhase::Lost).records("s0");
    let p = plan(&elsewhere, &d);
    assert_eq!(p.outcome, Some(Outcome::Bound), "a new bind, not a repair");
    assert_eq!(p.status.expect("status").bound_time, Some(now()));
}

#[test]
fn a_copied_bind_completed_annotation_without_a_bind_is_dropped() {
    // Created from a copied manifest: no boundTime, nothing holds it.
    let fresh = claim("c").bind_completed();
    assert_eq!(
        decide_c(&fresh, &[server("s1")]),
        ClaimDecision::ClearStaleBindCompleted
    );
    let p = plan(&fresh, &ClaimDecision::ClearStaleBindCompleted);
    let written = p.object.expect("the annotation dropped");
    assert_eq!(annotation(&written, ANNOTATION_BIND_COMPLETED), None);
    // A copy of a bound claim's manifest: it names a server another claim holds.
    let copy = claim("c").chose("s1").bind_completed();
    let held = server("s1").claimed_for("orig", "uid-orig");
    assert_eq!(
        decide_c(&copy, &[held]),
        ClaimDecision::ClearStaleBindCompleted
    );
}

#[test]
fn a_bound_claim_that_lost_only_its_bind_completed_keeps_its_bound_time() {
    let c = claim("c").chose("s1").phase(ClaimPhase::Bound);
    let d = decide_c(&c, &[server("s1").claimed_for("c", "uid-c")]);
    assert_eq!(
        d,
        ClaimDecision::CompleteBind {
            server: s("s1"),
            server_uid: s("uid-server-s1")
        }
    );
    let p = plan(&c, &d);
    assert_eq!(p.status.expect("status").bound_time, Some(t(5)));
    assert_eq!(p.outcome, Some(Outcome::Repair(RepairCase::ClaimStatus)));
}

#[test]
fn a_selector_added_to_a_bound_claim_is_reported_and_the_binding_stays() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound)
        .selects(&[("rack", "r2")]);
    let srv = server("s1")
        .labelled(&[("rack", "r1")])
        .claimed_for("c", "uid-c");
    let d = decide_c(&c, &[srv]);
    assert_eq!(
        d,
        ClaimDecision::BoundConfirmed {
            server: s("s1"),
            server_uid: s("uid-server-s1"),
            selector_mismatch: true,
            server_deleting: false,
        }
    );
    let p = plan(&c, &d);
    let status = p.status.as_ref().expect("the message changes");
    assert_eq!(status.phase, Some(ClaimPhase::Bound));
    assert_eq!(event(&p), (EventKind::Warning, "SelectorMismatch"));
}

/// A bound server being deleted (its finalizer keeps it) stays bound; the claim's
/// condition and a Warning, once, tell the tenant.
#[test]
fn a_bound_server_being_deleted_is_reported_on_the_claim_once() {
    let c = claim("c")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound);
    let mut c = c;
    c.status.as_mut().expect("status").bound_time = Some(t(5));
    let srv = server("s1").claimed_for("c", "uid-c").deleting();
    let d = decide_c(&c, &[srv]);
    assert_eq!(
        d,
        ClaimDecision::BoundConfirmed {
            server: s("s1"),
            server_uid: s("uid-server-s1"),
            selector_mismatch: false,
            server_deleting: true,
        }
    );
    let p = plan(&c, &d);
    assert_eq!(
        status_reason(&p),
        (Some(ClaimPhase::Bound), Some(s("Bound")))
    );
    assert!(
        bound_message(&p).contains("being deleted"),
        "{}",
        bound_message(&p)
    );
    assert_eq!(event(&p), (EventKind::Warning, "ServerDeleting"));
    assert_eq!(p.outcome, None, "news, not a repair");
    let mut told = c.clone();
    told.status = p.status.clone();
    assert!(plan(&told, &d).is_noop(), "told once");
}

#[test]
fn a_claim_naming_a_released_server_is_told_it_waits_for_an_admin() {
    let released = server("s1")
        .retain()
        .uid_filled_for("gone", "uid-gone")
        .phase(ServerPhase::Released);
    let d = decide_c(&claim("c").names("s1"), std::slice::from_ref(&released));
    assert_eq!(
        d,
        ClaimDecision::ServerMismatch {
            server: s("s1"),
            why: Ineligible::Released
        }
    );
    let d = decide_c(&claim("c").chose("s1"), &[released]);
    assert!(
        matches!(d, ClaimDecision::WithdrawIneligibleServer { .. }),
        "{d:?}"
    );
}

#[test]
fn an_empty_uid_reservation_is_adopted() {
    let srv = server("s1").reserved_for("c").uid_ref("");
    assert_eq!(
        decide_c(&claim("c"), &[srv, server("s0")]),
        ClaimDecision::AdoptReservedServer { server: s("s1") }
    );
}

/// [q] A claim that takes any server leaves a selective claim the only server it can use.
#[test]
fn unbound_pick_leaves_a_selective_claim_its_only_server() {
    let a = claim("a").created(1);
    let b = claim("b").selects(&[("rack", "r1")]).created(2);
    let world = servers(vec![
        server("s1").labelled(&[("rack", "r1")]),
        server("s2").labelled(&[("rack", "r2")]),
    ])
    .tracking([&a, &b]);
    let waiting = claims(vec![a.clone(), b.clone()]);
    let pick = PickInputs {
        waiting: waiting.waiting(),
        ..alone(&|_| false)
    };
    let d = decide_claim(&a, &world, &pick, Liveness::Cached);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("s2") });
    let d = decide_claim(&b, &world, &pick, Liveness::Cached);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("s1") });
}

fn in_namespace(mut c: CachedClaim, namespace: &str) -> CachedClaim {
    c.meta_mut().namespace = Some(namespace.into());
    c
}

/// [q] When servers are scarce, the claim the fair order reaches picks and the others
/// wait their turn: oldest first, namespaces in turn.
#[test]
fn scarce_servers_go_to_claims_in_turn_across_namespaces() {
    let a1 = in_namespace(claim("a1").created(1), "team-a");
    let a2 = in_namespace(claim("a2").created(2), "team-a");
    let b1 = in_namespace(claim("b1").created(3), "team-b");
    let decide = |c: &CachedClaim, world: &ServerCatalog, waiting: &ClaimCatalog| {
        let pick = PickInputs {
            waiting: waiting.waiting(),
            ..alone(&|_| false)
        };
        decide_claim(c, world, &pick, Liveness::Cached)
    };
    let world = servers(vec![server("s1")]);
    let waiting = claims(vec![a1.clone(), a2.clone(), b1.clone()]);
    assert_eq!(
        decide(&a1, &world, &waiting),
        ClaimDecision::PickBestFit { server: s("s1") }
    );
    // The message names the claims ahead, first in the fair order first.
    let turn = "0/1 servers can serve this claim: 1 is kept for claims ahead of it.";
    assert_eq!(
        waits_turn(&decide(&a2, &world, &waiting)),
        format!("{turn} Ahead of it: team-a/a1, team-b/b1.")
    );
    assert_eq!(
        waits_turn(&decide(&b1, &world, &waiting)),
        format!("{turn} Ahead of it: team-a/a1.")
    );

    // a1 was served (bound after a2 was created); one more server frees: team-b's turn,
    // although a2 is older than b1.
    let a1 = a1.chose("s1").bind_completed().phase(ClaimPhase::Bound);
    let world = servers(vec![server("s1").claimed_for("a1", "uid-a1"), server("s2")]);
    let waiting = claims(vec![a1, a2.clone(), b1.clone()]);
    assert_eq!(
        decide(&b1, &world, &waiting),
        ClaimDecision::PickBestFit { server: s("s2") }
    );
    let turn = "0/2 servers can serve this claim: 1 is held by another claim, \
        1 is kept for claims ahead of it. Ahead of it: team-b/b1.";
    assert_eq!(waits_turn(&decide(&a2, &world, &waiting)), turn);
}

/// A claim waiting its turn behind many names the first three ahead, then a count.
#[test]
fn a_claim_waiting_its_turn_names_the_first_claims_ahead_then_a_count() {
    let all: Vec<CachedClaim> = (1..=6)
        .map(|i| in_namespace(claim(&format!("c{i}")).created(i), "team-a"))
        .collect();
    let world = servers(vec![server("s1")]);
    let waiting = claims(all.clone());
    let pick = PickInputs {
        waiting: waiting.waiting(),
        ..alone(&|_| false)
    };
    let d = decide_claim(&all[5], &world, &pick, Liveness::Cached);
    assert!(
        waits_turn(&d).ends_with(" Ahead of it: team-a/c1, team-a/c2, team-a/c3 and 2 more."),
        "{}",
        waits_turn(&d)
    );
}

/// The summary of a `WaitForTurn` decision, as its message reads.
fn waits_turn(d: &ClaimDecision) -> String {
    match d {
        ClaimDecision::WaitForTurn { why } => why.to_string(),
        other => panic!("expected WaitForTurn, got {other:?}"),
    }
}

/// [q] A name is not a place in the queue: a user's claim naming the one free server
/// waits its turn while an older claim needs that server, and the older claim's pick does
/// not pass it over; with a second server for the older claim, the name has its turn.
#[test]
fn a_users_claim_naming_a_server_waits_its_turn() {
    let a = in_namespace(claim("a").created(1), "team-a");
    let b = in_namespace(claim("b").names("s1").created(2), "team-b");
    let decide = |c: &CachedClaim, world: &ServerCatalog, cache: &ClaimCatalog| {
        let turn = |rival: &CachedClaim, server: &str| {
            let pick = PickInputs {
                waiting: cache.waiting(),
                ..alone(&|_| false)
            };
            matches!(turn_on(server, rival, world, &pick), Placement::Pick(_))
        };
        let skip = pass_over(c, world, cache, &|_| false, &turn);
        let pick = PickInputs {
            waiting: cache.waiting(),
            ..alone(&skip)
        };
        decide_claim(c, world, &pick, Liveness::Cached)
    };
    let cache = claims(vec![a.clone(), b.clone()]);
    let one = servers(vec![server("s1")]);
    assert_eq!(
        waits_turn(&decide(&b, &one, &cache)),
        "0/1 servers can serve this claim: 1 is kept for claims ahead of it. \
         Ahead of it: team-a/a."
    );
    assert_eq!(
        decide(&a, &one, &cache),
        ClaimDecision::PickBestFit { server: s("s1") }
    );

    // Once `a` picked s1, `b` still does not have its turn: the pick needs s1.
    let a_picked = a.clone().chose("s1");
    let cache = claims(vec![a_picked, b.clone()]);
    assert!(matches!(
        decide(&b, &one, &cache),
        ClaimDecision::WaitForTurn { .. }
    ));

    // With s2 for `a`, the name has its turn, and `a` leaves s1 to it.
    let two = servers(vec![server("s1"), server("s2")]);
    let cache = claims(vec![a.clone(), b.clone()]);
    assert_eq!(
        decide(&b, &two, &cache),
        ClaimDecision::WaitForServer { server: s("s1") }
    );
    assert_eq!(
        decide(&a, &two, &cache),
        ClaimDecision::PickBestFit { server: s("s2") }
    );
}

/// [q] Of many users' claims naming one server, only the first in the fair order is asked
/// its turn: the oldest waiting claim still picks the server they all name, and the
/// first of them, with a second server for that claim, has its turn.
#[test]
fn only_the_first_of_many_claims_naming_a_server_has_its_turn() {
    let a = claim("a").created(1);
    let namers: Vec<CachedClaim> = (0..50)
        .map(|i| {
            in_namespace(
                claim(&format!("n{i:02}")).names("s1").created(2 + i),
                "team-b",
            )
        })
        .collect();
    let mut all = vec![a.clone()];
    all.extend(namers.iter().cloned());
    let binder = Binder::listed(
        Rules::real(),
        BinderConfig {
            status_interval: std::time::Duration::from_secs(10),
            release_gates: vec![],
        },
        vec![server("s1")],
        all.clone(),
        now().0,
    );
    assert!(!binder.has_turn(&namers[0], "s1", now().0), "a needs s1");
    assert!(
        namers.iter().all(|n| !binder.has_turn(n, "s1", now().0)),
        "nobody behind a has it"
    );
    let binder = Binder::listed(
        Rules::real(),
        BinderConfig {
            status_interval: std::time::Duration::from_secs(10),
            release_gates: vec![],
        },
        vec![server("s1"), server("s2")],
        all,
        now().0,
    );
    assert!(binder.has_turn(&namers[0], "s1", now().0));
    assert!(
        namers[1..]
            .iter()
            .all(|n| !binder.has_turn(n, "s1", now().0))
    );
}

/// Whose pick is it: a `pre-bound` ref the controller's picks do not hold (made before a
/// restart, by another replica, or written by hand) is taken up as its own pick in the
/// claim's turn: assumed without a write, and its server woken, since no watch event
/// will wake it.
#[test]
fn a_pre_bound_this_controller_did_not_pick_is_taken_up_in_its_turn() {
    let c = claim("c").chose("s1");
    let d = decide_c(&c, &[server("s1")]);
    assert_eq!(d, ClaimDecision::ResumePick { server: s("s1") });
    assert!(plan(&c, &d).is_noop(), "a new claim shows no status yet");
    let pending = c.clone().phase(ClaimPhase::Pending);
    assert_eq!(
        status_reason(&plan(&pending, &d)),
        (Some(ClaimPhase::Pending), Some(s("WaitingForServer"))),
        "as a pick in flight shows it"
    );

    let mut binder = listed(vec![server("s1")], vec![c.clone()]);
    let ClaimStep::Act(work) = binder.reconcile_claim(&c, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert_eq!(work.picked.as_deref(), Some("s1"));
    assert!(work.wakes.servers.contains("s1"), "{:?}", work.wakes);
    assert!(binder.assumed().holds("s1", &claim_key(&c)));
    // Taken up, it is a pick in flight like any other.
    let ClaimStep::Act(work) = binder.reconcile_claim(&c, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert_eq!(
        work.decision,
        ClaimDecision::WaitForServer { server: s("s1") }
    );
    assert!(work.wakes.is_empty());
}

/// Whose pick is it: a `pre-bound` ref the controller's picks do not hold, out of the
/// claim's turn, is withdrawn, and the claim queues again; the server controller does not
/// take it, so the claim ahead gets the server.
#[test]
fn a_pre_bound_out_of_its_turn_is_withdrawn_and_wins_nothing() {
    let a = claim("a").created(1);
    let t = in_namespace(claim("t").chose("s1").created(2), "team-b");
    let binder = listed(vec![server("s1")], vec![a.clone(), t.clone()]);
    let ClaimStep::Act(work) = binder.plan_claim(&t, None, Sight::All, now().0) else {
        panic!("a step")
    };
    let ClaimDecision::WithdrawOutOfTurn {
        server: named,
        ahead,
    } = &work.decision
    else {
        panic!("{:?}", work.decision)
    };
    assert_eq!((named.as_str(), ahead.total), ("s1", 1));
    let object = work.plan.object.as_ref().expect("a withdrawal");
    assert!(object.spec.server_ref.is_none());
    assert!(!is_controller_chosen(object), "pre-bound goes with the ref");
    assert_eq!(event(&work.plan), (EventKind::Normal, "Rebinding"));
    let note = &work.plan.event.as_ref().unwrap().note;
    assert!(note.contains(&format!("{NS}/a")), "{note}");

    let ServerStep::Act(work) = binder.reconcile_server(&server("s1"), None, now().0) else {
        panic!("a step")
    };
    assert_eq!(work.decision, ServerDecision::Available);
    let ClaimStep::Act(work) = binder.plan_claim(&a, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert_eq!(
        work.decision,
        ClaimDecision::PickBestFit { server: s("s1") }
    );
}

/// A `pre-bound` left on a claim that names no server (the annotation written alone) is
/// dropped by a claim waiting its turn too, not only by one no server fits.
#[test]
fn a_claim_waiting_its_turn_drops_a_stale_pre_bound() {
    let a = claim("a").created(1);
    let mut t = claim("t").created(2);
    *t.annotations_mut() = [(ANNOTATION_PRE_BOUND.to_string(), "yes".to_string())]
        .into_iter()
        .collect();
    let binder = listed(vec![server("s1")], vec![a, t.clone()]);
    let ClaimStep::Act(work) = binder.plan_claim(&t, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert!(matches!(work.decision, ClaimDecision::WaitForTurn { .. }));
    let object = work.plan.object.as_ref().expect("the annotation dropped");
    assert!(!is_controller_chosen(object));
}
