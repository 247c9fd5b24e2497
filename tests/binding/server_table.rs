//! One test per row of the server controller's table (docs/binding.md).

use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::state::evidence;
use server_binder::binding::state::gates;
use server_binder::binding::state::gates::{Pending, PendingNote};
use server_binder::binding::*;

use crate::binding::support::*;

fn plan(server: &CachedServer, decision: &ServerDecision) -> ServerPlan {
    plan_server(server, decision, &now())
}

fn phase(plan: &ServerPlan) -> Option<ServerPhase> {
    plan.status.as_ref().and_then(|s| s.phase)
}

fn written(plan: &ServerPlan) -> &CachedServer {
    plan.object.as_ref().expect("an object write")
}

#[test]
fn no_ref_and_no_claim_is_available_and_drops_the_finalizer() {
    let srv = server("s1").finalizer();
    let d = decide_s(&srv, &[claim("other").names("s2")]);
    assert_eq!(d, ServerDecision::Available);
    let p = plan(&srv, &d);
    assert!(!has_protection(written(&p)));
    assert_eq!(phase(&p), Some(ServerPhase::Available));
}

#[test]
fn no_ref_with_a_claim_naming_it_claims_it_in_one_write_then_bound() {
    let srv = server("s1");
    let d = decide_s(&srv, &[claim("c").chose("s1")]);
    assert_eq!(
        d,
        ServerDecision::ClaimForWinner {
            winner: holder("c", Some("uid-c")),
            restoring: false
        }
    );
    let p = plan(&srv, &d);
    let w = written(&p);
    assert_eq!(w.spec.server_claim_ref, Some(holder("c", Some("uid-c"))));
    assert_eq!(
        annotation(w, ANNOTATION_BOUND_BY_CONTROLLER).as_deref(),
        Some("yes")
    );
    assert!(has_protection(w));
    assert_eq!(phase(&p), Some(ServerPhase::Bound));
    assert_eq!(
        p.status.as_ref().and_then(|s| s.claim.clone()),
        Some(format!("{NS}/c"))
    );
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("Claimed"));
}

#[test]
fn winner_is_the_bind_completed_claim_restoring_its_lost_ref() {
    let srv = server("s1");
    let world = [
        claim("a").names("s1").created(1),
        claim("b")
            .chose("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
            .created(50),
    ];
    assert_eq!(
        decide_s(&srv, &world),
        ServerDecision::ClaimForWinner {
            winner: holder("b", Some("uid-b")),
            restoring: true
        }
    );
}

#[test]
fn winner_prefers_user_chosen_over_controller_chosen() {
    let srv = server("s1");
    let world = [
        claim("a").chose("s1").created(1),
        claim("b").names("s1").created(50),
    ];
    assert!(matches!(
        decide_s(&srv, &world),
        ServerDecision::ClaimForWinner { winner, .. } if winner.name == "b"
    ));
}

/// The server decision when no claim exists, with these default release gates.
/// The decision with no claim in the cache and `default` for `--release-gates`, the gates
/// passed as the binder computes them ([`gates::release_gates`], no class).
fn decide_alone(server: &CachedServer, liveness: Liveness, default: &[String]) -> ServerDecision {
    let gates = gates::release_gates(server, None, default);
    decide_server(server, &claims(vec![]), liveness, &gates, IN_TURN, ADMITTED)
}

/// [q] A claim out of its turn for the server is no candidate: the server stays
/// `Available` for the claims ahead, or goes to this controller's pick (here: every
/// `pre-bound` ref), or to a claim restoring a bind, which is not asked its turn.
#[test]
fn winner_is_only_among_claims_in_their_turn() {
    let srv = server("s1");
    let picks_only: Turn<'_> = &|c| is_controller_chosen(c);
    let decide = |world: Vec<CachedClaim>| {
        decide_server(
            &srv,
            &claims(world),
            Liveness::Cached,
            &[],
            picks_only,
            ADMITTED,
        )
    };
    let user = claim("u").names("s1").created(1);
    assert_eq!(decide(vec![user.clone()]), ServerDecision::Available);
    let pick = claim("p").chose("s1").created(50);
    assert!(matches!(
        decide(vec![user.clone(), pick]),
        ServerDecision::ClaimForWinner { winner, .. } if winner.name == "p"
    ));
    let restoring = claim("r")
        .names("s1")
        .bind_completed()
        .phase(ClaimPhase::Bound)
        .created(50);
    assert!(matches!(
        decide(vec![user, restoring]),
        ServerDecision::ClaimForWinner { winner, restoring: true } if winner.name == "r"
    ));
}

#[test]
fn winner_then_prefers_the_oldest_then_the_name() {
    let srv = server("s1");
    let oldest = [
        claim("a").chose("s1").created(9),
        claim("b").chose("s1").created(2),
    ];
    assert!(matches!(
        decide_s(&srv, &oldest),
        ServerDecision::ClaimForWinner { winner, .. } if winner.name == "b"
    ));
    let tie = [
        claim("b").chose("s1").created(2),
        claim("a").chose("s1").created(2),
    ];
    assert!(matches!(
        decide_s(&srv, &tie),
        ServerDecision::ClaimForWinner { winner, .. } if winner.name == "a"
    ));
}

#[test]
fn winner_is_only_among_claims_the_server_is_eligible_for() {
    let srv = server("s1").labelled(&[("rack", "r1")]);
    let world = [claim("a").names("s1").selects(&[("rack", "r2")])];
    assert_eq!(decide_s(&srv, &world), ServerDecision::Available);
}

#[test]
fn name_only_ref_with_the_claim_missing_stays_reserved() {
    let srv = server("s1").reserved_for("c");
    let d = decide_s(&srv, &[]);
    assert_eq!(d, ServerDecision::ReservedClaimMissing);
    let p = plan(&srv, &d);
    assert!(p.object.is_none(), "a user's reservation is never cleared");
    assert_eq!(phase(&p), Some(ServerPhase::Available));
    assert_eq!(
        p.status.as_ref().and_then(|s| s.claim.clone()),
        Some(format!("{NS}/c"))
    );
}

#[test]
fn name_only_ref_with_the_claim_naming_it_fills_in_the_uid() {
    let srv = server("s1").reserved_for("c");
    let d = decide_s(&srv, &[claim("c").chose("s1")]);
    assert_eq!(
        d,
        ServerDecision::FillUid {
            claim: holder("c", Some("uid-c"))
        }
    );
    let p = plan(&srv, &d);
    let w = written(&p);
    assert_eq!(w.spec.server_claim_ref, Some(holder("c", Some("uid-c"))));
    assert_eq!(
        annotation(w, ANNOTATION_BOUND_BY_CONTROLLER),
        None,
        "the ref stays user-made"
    );
    assert!(has_protection(w));
    assert_eq!(phase(&p), Some(ServerPhase::Bound));
}

#[test]
fn name_only_ref_with_the_claim_unchosen_waits_for_adoption() {
    let srv = server("s1").reserved_for("c");
    let d = decide_s(&srv, &[claim("c")]);
    assert_eq!(d, ServerDecision::ReservedAwaitingAdoption);
    assert!(plan(&srv, &d).object.is_none());
}

#[test]
fn name_only_ref_with_the_claim_elsewhere_stays_reserved() {
    let srv = server("s1").reserved_for("c");
    let d = decide_s(&srv, &[claim("c").chose("s2")]);
    assert_eq!(d, ServerDecision::ReservedClaimElsewhere);
    let p = plan(&srv, &d);
    assert!(p.object.is_none());
    assert_eq!(phase(&p), Some(ServerPhase::Available));
}

#[test]
fn uid_ref_with_the_claim_missing_from_cache_reads_it_live_first() {
    let srv = server("s1").claimed_for("c", "uid-c");
    let d = decide_s(&srv, &[]);
    assert_eq!(
        d,
        ServerDecision::ConfirmClaimGone {
            claim: holder("c", Some("uid-c"))
        }
    );
    assert!(plan(&srv, &d).confirm_claim.is_some());
}

#[test]
fn uid_ref_with_the_claim_gone_is_recycled() {
    let srv = server("s1")
        .claimed_for("c", "uid-c")
        .phase(ServerPhase::Bound);
    let d = decide_s_live(&srv, &[]);
    assert_eq!(
        d,
        ServerDecision::Release {
            policy: ReclaimPolicy::Recycle
        }
    );
    let p = plan(&srv, &d);
    let w = written(&p);
    assert_eq!(w.spec.server_claim_ref, None);
    assert_eq!(annotation(w, ANNOTATION_BOUND_BY_CONTROLLER), None);
    assert!(!has_protection(w));
    assert_eq!(phase(&p), Some(ServerPhase::Available));
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("Released"));
    assert_eq!(p.outcome, Some(Outcome::Released(ReclaimPolicy::Recycle)));
}

#[test]
fn recycling_a_user_made_ref_clears_only_the_uid() {
    let srv = server("s1").uid_filled_for("c", "uid-c");
    let d = decide_s_live(&srv, &[]);
    let p = plan(&srv, &d);
    assert_eq!(written(&p).spec.server_claim_ref, Some(holder("c", None)));
    assert!(!has_protection(written(&p)));
}

#[test]
fn uid_ref_with_the_claim_gone_is_retained_as_released() {
    let srv = server("s1")
        .claimed_for("c", "uid-c")
        .retain()
        .phase(ServerPhase::Bound);
    let d = decide_s_live(&srv, &[]);
    assert_eq!(
        d,
        ServerDecision::Release {
            policy: ReclaimPolicy::Retain
        }
    );
    let p = plan(&srv, &d);
    assert_eq!(
        written(&p).spec.server_claim_ref,
        Some(holder("c", Some("uid-c"))),
        "kept"
    );
    assert_eq!(phase(&p), Some(ServerPhase::Released));
    assert_eq!(p.outcome, Some(Outcome::Released(ReclaimPolicy::Retain)));
}

#[test]
fn uid_ref_to_an_older_incarnation_is_released_once_confirmed() {
    let srv = server("s1").claimed_for("c", "uid-old");
    let recreated = [claim("c")];
    assert!(matches!(
        decide_s(&srv, &recreated),
        ServerDecision::ConfirmClaimGone { .. }
    ));
    assert_eq!(
        decide_s_live(&srv, &recreated),
        ServerDecision::Release {
            policy: ReclaimPolicy::Recycle
        }
    );
}

#[test]
fn uid_ref_with_the_claim_naming_it_ensures_bound_and_the_finalizer() {
    let mut srv = server("s1").claimed_for("c", "uid-c");
    srv.meta_mut().finalizers = None;
    let d = decide_s(&srv, &[claim("c").chose("s1")]);
    assert_eq!(d, ServerDecision::BoundConfirmed);
    let p = plan(&srv, &d);
    assert!(has_protection(written(&p)));
    assert_eq!(phase(&p), Some(ServerPhase::Bound));
    assert_eq!(p.outcome, Some(Outcome::Repair(RepairCase::Finalizer)));
    let mut bound = written(&p).clone();
    bound.status = p.status.clone();
    assert!(plan(&bound, &d).is_noop(), "no status churn once Bound");
}

#[test]
fn uid_ref_with_the_claim_unchosen_waits_for_adoption() {
    let srv = server("s1").claimed_for("c", "uid-c");
    let d = decide_s(&srv, &[claim("c")]);
    assert_eq!(d, ServerDecision::BoundAwaitingAdoption);
    let p = plan(&srv, &d);
    assert!(p.object.is_none(), "the ref stays for the claim to adopt");
}

#[test]
fn uid_ref_with_the_claim_elsewhere_rolls_a_controller_made_ref_back() {
    let srv = server("s1").claimed_for("c", "uid-c");
    let d = decide_s(&srv, &[claim("c").chose("s2")]);
    assert_eq!(
        d,
        ServerDecision::RollBack {
            cause: RollBackCause::NamesAnother(s("s2"))
        }
    );
    let p = plan(&srv, &d);
    assert_eq!(written(&p).spec.server_claim_ref, None);
    assert!(!has_protection(written(&p)));
    assert_eq!(phase(&p), Some(ServerPhase::Available));
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("RolledBack"));
}

#[test]
fn rolling_back_a_user_made_ref_keeps_the_name() {
    let srv = server("s1").uid_filled_for("c", "uid-c");
    let d = decide_s(&srv, &[claim("c").names("s2")]);
    assert!(matches!(d, ServerDecision::RollBack { .. }), "{d:?}");
    assert_eq!(
        written(&plan(&srv, &d)).spec.server_claim_ref,
        Some(holder("c", None))
    );
}

#[test]
fn deleting_while_a_live_claim_holds_it_is_blocked_once() {
    let srv = server("s1").claimed_for("c", "uid-c").deleting();
    let d = decide_s(&srv, &[claim("c").chose("s1").bind_completed()]);
    assert_eq!(
        d,
        ServerDecision::DeletionBlocked {
            holder: holder("c", Some("uid-c"))
        }
    );
    let p = plan(&srv, &d);
    assert!(p.object.is_none(), "the finalizer stays");
    let e = p.event.as_ref().expect("warning");
    assert_eq!((e.kind, e.reason), (EventKind::Warning, "DeletionBlocked"));
    let mut blocked = srv.clone();
    blocked.status = p.status.clone();
    assert!(plan(&blocked, &d).is_noop(), "the warning is given once");
}

#[test]
fn deleting_with_no_live_claim_drops_the_finalizer() {
    let srv = server("s1").claimed_for("c", "uid-c").deleting();
    assert!(matches!(
        decide_s(&srv, &[]),
        ServerDecision::ConfirmClaimGone { .. }
    ));
    let d = decide_s_live(&srv, &[]);
    assert_eq!(d, ServerDecision::DeletionAllowed);
    assert!(!has_protection(written(&plan(&srv, &d))));
}

/// A `bind-completed` with no bind recorded (copied, forged) wins nothing: the server
/// goes to the older user-chosen claim, and a server the forger may not have goes to
/// nobody (docs/binding.md, "Trust").
#[test]
fn a_forged_bind_completed_is_no_winner() {
    let srv = server("s1");
    let world = [
        claim("z").names("s1").bind_completed().created(50),
        claim("a").names("s1").created(1),
    ];
    assert_eq!(
        decide_s(&srv, &world),
        ServerDecision::ClaimForWinner {
            winner: holder("a", Some("uid-a")),
            restoring: false
        }
    );
    let forged = [claim("z")
        .names("s1")
        .bind_completed()
        .selects(&[("rack", "r1")])];
    let r1 = server("s1").labelled(&[("rack", "r1")]);
    for cannot in [
        r1.clone().unclaimable(),
        r1.clone().taint("gpu"),
        server("s1").labelled(&[("rack", "r2")]),
    ] {
        assert_eq!(
            decide_s(&cannot, &forged),
            ServerDecision::Available,
            "{cannot:?}"
        );
    }
    // A record of a bind to another server object of that name is no record of this.
    let recreated = [claim("z")
        .chose("s1")
        .bind_completed()
        .phase(ClaimPhase::Lost)
        .records("s1")];
    let mut other = server("s1").unclaimable();
    other.meta_mut().uid = Some("uid-of-a-new-s1".into());
    assert_eq!(decide_s(&other, &recreated), ServerDecision::Available);
    assert!(matches!(
        decide_s(&server("s1").unclaimable(), &recreated),
        ServerDecision::ClaimForWinner {
            restoring: true,
            ..
        }
    ));
}

/// A claim whose uid a server carries, with no bind recorded in its status, takes that
/// server only if it may (it adopts it); a cordoned server rolls back.
#[test]
fn uid_ref_with_an_unrecorded_claim_that_names_nothing_needs_eligibility() {
    let srv = server("s1").claimed_for("c", "uid-c").unclaimable();
    let unrecorded = [claim("c")
        .bind_completed()
        .phase(ClaimPhase::Lost)
        .no_record()];
    assert!(matches!(
        decide_s(&srv, &unrecorded),
        ServerDecision::RollBack {
            cause: RollBackCause::CannotAdopt(Ineligible::Unclaimable)
        }
    ));
}

#[test]
fn uid_ref_with_a_bound_claim_that_cleared_its_ref_waits_for_it_to_restore_it() {
    // A bound claim never moves: a mistaken edit of its serverRef must not hand the
    // server to another claim. The claim side writes the ref back (RestoreServerRef).
    let srv = server("s1").claimed_for("c", "uid-c").unclaimable();
    let lost = [claim("c")
        .bind_completed()
        .phase(ClaimPhase::Lost)
        .records("s1")];
    assert_eq!(decide_s(&srv, &lost), ServerDecision::BoundAwaitingAdoption);
    let deleting = srv.deleting();
    assert!(matches!(
        decide_s(&deleting, &lost),
        ServerDecision::DeletionBlocked { .. }
    ));
}

#[test]
fn uid_ref_with_an_unbound_claim_that_cannot_adopt_the_server_rolls_back() {
    for (srv, why) in [
        (server("s1").unclaimable(), Ineligible::Unclaimable),
        (
            server("s1").taint("gpu"),
            Ineligible::UntoleratedTaint { key: s("gpu") },
        ),
        (
            server("s1").labelled(&[("rack", "r2")]),
            Ineligible::SelectorMismatch,
        ),
    ] {
        let srv = srv.claimed_for("c", "uid-c");
        let c = [claim("c").selects(&[("rack", "r1")])];
        let d = decide_s(&srv, &c);
        assert_eq!(
            d,
            ServerDecision::RollBack {
                cause: RollBackCause::CannotAdopt(why)
            }
        );
        let p = plan(&srv, &d);
        assert_eq!(written(&p).spec.server_claim_ref, None);
        let note = &p.event.as_ref().expect("RolledBack").note;
        assert!(note.contains("names no server"), "{note}");
        // Deleting it goes ahead: such a claim can never adopt it.
        assert_eq!(
            decide_s(&srv.deleting(), &c),
            ServerDecision::DeletionAllowed
        );
    }
}

#[test]
fn an_empty_uid_is_a_reservation_by_name() {
    let srv = server("s1").retain().reserved_for("c").uid_ref("");
    assert_eq!(
        decide_s(&srv, &[claim("c")]),
        ServerDecision::ReservedAwaitingAdoption
    );
    assert_eq!(
        decide_s(&srv, &[claim("c").chose("s1")]),
        ServerDecision::FillUid {
            claim: holder("c", Some("uid-c"))
        }
    );
    assert_eq!(decide_s(&srv, &[]), ServerDecision::ReservedClaimMissing);
}

#[test]
fn a_stale_bound_by_controller_annotation_goes_once_the_ref_is_cleared() {
    let mut srv = server("s1").claimed_for("gone", "uid-gone");
    srv.spec.server_claim_ref = None;
    let d = decide_s(&srv, &[]);
    assert_eq!(d, ServerDecision::Available);
    let p = plan(&srv, &d);
    assert_eq!(
        annotation(written(&p), ANNOTATION_BOUND_BY_CONTROLLER),
        None
    );
}

#[test]
fn a_reservation_fills_the_uid_only_for_a_claim_it_can_serve() {
    let srv = server("s1").reserved_for("c").labelled(&[("rack", "r2")]);
    let d = decide_s(&srv, &[claim("c").names("s1").selects(&[("rack", "r1")])]);
    assert_eq!(d, ServerDecision::ReservedClaimElsewhere);
}

#[test]
fn deleting_is_not_blocked_by_an_unbound_claim_that_names_nothing() {
    // It can never adopt a deleting server ([c]).
    let srv = server("s1").claimed_for("c", "uid-c").deleting();
    assert_eq!(
        decide_s(&srv, &[claim("c")]),
        ServerDecision::DeletionAllowed
    );
}

// ---- Release gates (docs/binding.md, "Release gates") ----

/// [t] A recycled server with gates is released and starts cleaning in one write: the
/// ref goes and the `cleaning` annotation names the generation that write produces.
#[test]
fn a_gated_recycle_releases_and_starts_cleaning_in_one_write() {
    let srv = server("s1")
        .claimed_for("c", "uid-c")
        .gates(&["wipe", "power-off"])
        .phase(ServerPhase::Bound);
    let d = decide_s_live(&srv, &[]);
    let gates = vec![s("wipe"), s("power-off")];
    assert_eq!(d, ServerDecision::ReleaseToCleaning { gates });
    let p = plan(&srv, &d);
    let w = written(&p);
    assert_eq!(w.spec.server_claim_ref, None);
    assert!(!has_protection(w));
    let generation = srv.meta().generation.unwrap() + 1;
    assert_eq!(
        annotation(w, ANNOTATION_CLEANING),
        Some(generation.to_string())
    );
    assert_eq!(phase(&p), Some(ServerPhase::Cleaning));
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("Cleaning"));
    assert_eq!(p.outcome, Some(Outcome::Released(ReclaimPolicy::Recycle)));
    assert_eq!(
        eligibility(w, &claim("next")),
        Err(Ineligible::Cleaning),
        "no claim may take it"
    );
}

/// [t] The release records the gates in force; from then on a change of the
/// controller's default gates changes nothing of the cleaning, a gate added to the spec
/// is waited for too, and one removed from it is not dropped.
#[test]
fn the_gates_in_force_are_recorded_at_the_release() {
    let bound = server("s1").claimed_for("c", "uid-c");
    let default = [s("x.io/wipe")];
    let d = decide_alone(&bound, Liveness::Confirmed, &default);
    let p = plan(&bound, &d);
    let w = written(&p);
    assert_eq!(
        annotation(w, ANNOTATION_CLEANING_GATES),
        Some(s("x.io/wipe"))
    );
    let mut cleaning = w.clone();
    cleaning.meta_mut().generation = Some(2);
    for flag in [vec![], vec![s("x.io/other")]] {
        let d = decide_alone(&cleaning, Liveness::Cached, &flag);
        assert_eq!(
            d,
            ServerDecision::Cleaning {
                release: 2,
                pending: vec![Pending::named("x.io/wipe")]
            },
            "--release-gates {flag:?}"
        );
    }
    let added = cleaning.clone().gates(&["x.io/burn-in"]);
    let d = decide_s(&added, &[]);
    assert!(
        matches!(&d, ServerDecision::Cleaning { pending, .. } if pending.len() == 2),
        "{d:?}"
    );
    let removed = cleaning.gates(&[]);
    assert!(matches!(
        decide_s(&removed, &[]),
        ServerDecision::Cleaning { .. }
    ));
}

/// [t] A gate named after a condition the controllers write never passes, even when
/// that condition is True for this release (admission refuses such names; this holds
/// if a server got one anyway).
#[test]
fn a_gate_named_cleaning_does_not_pass_itself() {
    let srv = server("s1")
        .gates(&["Cleaning"])
        .cleaning(3)
        .passed("Cleaning", 3);
    let d = decide_s(&srv, &[]);
    assert_eq!(
        d,
        ServerDecision::Cleaning {
            release: 3,
            pending: vec![Pending {
                gate: s("Cleaning"),
                note: Some(PendingNote::ControllerCondition),
            }]
        }
    );
}

/// [t] A record no cleaner can match is rewritten, with a Warning: a release id that is
/// not a whole number becomes the generation; missing gates become those in force now.
#[test]
fn a_record_that_cannot_be_matched_is_repaired() {
    let mut mangled = server("s1").gates(&["x.io/wipe"]).cleaning(5);
    mangled
        .annotations_mut()
        .insert(ANNOTATION_CLEANING.into(), "soon".into());
    let d = decide_s(&mangled, &[]);
    assert_eq!(
        d,
        ServerDecision::RepairCleaningRecord {
            release: 1,
            gates: vec![s("x.io/wipe")],
            problem: RecordProblem::UnusableRelease(s("soon")),
        }
    );
    let p = plan(&mangled, &d);
    assert_eq!(annotation(written(&p), ANNOTATION_CLEANING), Some(s("1")));
    assert_eq!(phase(&p), Some(ServerPhase::Cleaning));
    let e = p.event.as_ref().expect("a Warning");
    assert_eq!(
        (e.kind, e.reason),
        (EventKind::Warning, "CleaningRecordRepaired")
    );
    assert!(e.note.contains("\"soon\""), "{}", e.note);

    let mut legacy = server("s1").cleaning(9);
    legacy.annotations_mut().remove(ANNOTATION_CLEANING_GATES);
    let d = decide_alone(&legacy, Liveness::Cached, &[s("x.io/wipe")]);
    assert_eq!(
        d,
        ServerDecision::RepairCleaningRecord {
            release: 9,
            gates: vec![s("x.io/wipe")],
            problem: RecordProblem::GatesNotRecorded,
        }
    );
    // A record restored onto a younger object is matched as it is: the cleaner copies 9.
    let restored = server("s1")
        .gates(&["x.io/wipe"])
        .cleaning(9)
        .passed("x.io/wipe", 9);
    assert_eq!(decide_s(&restored, &[]), ServerDecision::Cleaned);
}

/// The controller's default gates apply to a server that names none; an empty list
/// on the server means none; `Retain` never cleans.
#[test]
fn the_default_gates_apply_unless_the_server_says_otherwise() {
    let bound = server("s1").claimed_for("c", "uid-c");
    let default = [s("wipe")];
    let d = decide_alone(&bound, Liveness::Confirmed, &default);
    assert!(
        matches!(d, ServerDecision::ReleaseToCleaning { .. }),
        "{d:?}"
    );
    let none = bound.clone().gates(&[]);
    let d = decide_alone(&none, Liveness::Confirmed, &default);
    assert_eq!(
        d,
        ServerDecision::Release {
            policy: ReclaimPolicy::Recycle
        }
    );
    let retained = bound.retain();
    let d = decide_alone(&retained, Liveness::Confirmed, &default);
    assert_eq!(
        d,
        ServerDecision::Release {
            policy: ReclaimPolicy::Retain
        }
    );
}

/// [t] While a gate is pending the server stays Cleaning, whoever names it; a pass
/// recorded for an earlier release does not count.
#[test]
fn a_cleaning_server_waits_for_passes_of_this_release_only() {
    let srv = server("s1")
        .gates(&["wipe", "power-off"])
        .cleaning(5)
        .passed("wipe", 4)
        .passed("power-off", 5);
    let naming = claim("c").chose("s1");
    let d = decide_s(&srv, &[naming]);
    assert_eq!(
        d,
        ServerDecision::Cleaning {
            release: 5,
            pending: vec![Pending {
                gate: s("wipe"),
                note: Some(PendingNote::PassForOtherRelease(4)),
            }]
        }
    );
    let p = plan(&srv, &d);
    assert!(p.object.is_none(), "status only");
    assert_eq!(phase(&p), Some(ServerPhase::Cleaning));
    let status = p.status.as_ref().unwrap();
    let cleaning = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_CLEANING);
    assert!(
        cleaning.is_some_and(|c| c.message.contains("wipe")),
        "{status:?}"
    );
    // The cleaner's own conditions stay as they are.
    assert!(status.conditions.iter().any(|c| c.type_ == "power-off"));
}

/// [t] Every gate passed for this release: one write drops the annotation, and the
/// server is Available (and claimable) again.
#[test]
fn every_gate_passed_ends_the_cleaning_in_one_write() {
    let srv = server("s1").gates(&["wipe"]).cleaning(5).passed("wipe", 5);
    let d = decide_s(&srv, &[]);
    assert_eq!(d, ServerDecision::Cleaned);
    let p = plan(&srv, &d);
    let w = written(&p);
    assert_eq!(annotation(w, ANNOTATION_CLEANING), None);
    assert_eq!(annotation(w, ANNOTATION_CLEANING_GATES), None);
    assert_eq!(eligibility(w, &claim("next")), Ok(()));
    assert_eq!(phase(&p), Some(ServerPhase::Available));
    assert_eq!(p.event.as_ref().map(|e| e.reason), Some("Cleaned"));
}

/// A cleaning server that is deleted goes (no claim holds it); a reservation by name
/// made during cleaning waits for the cleaning to end.
#[test]
fn deletion_wins_over_cleaning_and_a_reservation_waits_for_it() {
    let cleaning = server("s1").gates(&["wipe"]).cleaning(5);
    let d = decide_s(&cleaning.clone().deleting(), &[]);
    assert_eq!(d, ServerDecision::DeletionAllowed);
    let reserved = cleaning.reserved_for("c");
    let d = decide_s(&reserved, &[claim("c").names("s1")]);
    assert_eq!(
        d,
        ServerDecision::Cleaning {
            release: 5,
            pending: vec![Pending::named("wipe")]
        }
    );
    let p = plan(&reserved, &d);
    assert!(p.object.is_none(), "the reservation stays");
}

/// When a server's ref names a gone incarnation of a claim's name, the claim now living
/// under the name has it back only as the pair it was (docs/binding.md, "Restore"):
/// naming the server, with no other bind recorded, of the class the bind was recorded
/// under (no record: of no class).
#[test]
fn a_pair_agrees_across_a_restore_only_as_it_was() {
    let of_class = |class: Option<&str>| {
        let mut c = claim("x").names("s0").uid("uid-x");
        c.spec.server_class_name = class.map(str::to_string);
        c
    };
    let recorded = |class: Option<&str>| {
        let mut s = server("s0").claimed_for("x", "uid-x-old");
        if let Some(class) = class {
            let record = gates::BoundClass {
                class: class.into(),
                release_gates: None,
            };
            s.annotations_mut()
                .insert(ANNOTATION_BOUND_CLASS.into(), record.annotation());
        }
        s
    };
    let cases = [
        (None, None, true),
        (Some("gpu"), Some("gpu"), true),
        (None, Some("gpu"), false),
        (Some("gpu"), None, false),
        (Some("gpu"), Some("cpu"), false),
    ];
    for (bound_under, now, agrees) in cases {
        let (s, c) = (recorded(bound_under), of_class(now));
        assert_eq!(
            evidence::pair_agrees(&s, &c),
            agrees,
            "bound under {bound_under:?}, now {now:?}"
        );
    }
    let other_name = claim("x").uid("uid-x");
    assert!(
        !evidence::pair_agrees(&recorded(None), &other_name),
        "names nothing"
    );
    let same_uid = of_class(None).uid("uid-x-old");
    assert!(
        !evidence::pair_agrees(&recorded(None), &same_uid),
        "that is a bind"
    );
}
