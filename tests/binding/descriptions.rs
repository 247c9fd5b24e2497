//! The decisions in words (`describe`, which `explain` prints as a row) against what the
//! plans write: a plan that says anything of its decision says it in those words. And
//! the rule of a free server (`not_free`), which the free-server index, eligibility and
//! `explain server` share.

use server_binder::api::*;
use server_binder::binding::state::eviction::Eviction;
use server_binder::binding::state::gates::Pending;
use server_binder::binding::*;

use crate::binding::support::*;

/// What a claim plan says: its `Bound` condition's message and its event's note.
fn claim_messages(plan: &ClaimPlan) -> Vec<String> {
    let status = plan.status.iter().flat_map(|s| find_bound(&s.conditions));
    let condition = status.map(|c| c.message.clone());
    condition
        .chain(plan.event.iter().map(|e| e.note.clone()))
        .collect()
}

/// What a server plan says: its conditions' messages and its event's note.
fn server_messages(plan: &ServerPlan) -> Vec<String> {
    let conditions = plan.status.iter().flat_map(|s| s.conditions.iter());
    let messages = conditions.map(|c| c.message.clone());
    // An empty message would begin every description.
    messages
        .chain(plan.event.iter().map(|e| e.note.clone()))
        .filter(|m| !m.is_empty())
        .collect()
}

/// One claim decision per variant but the two that wait (their condition carries the
/// summary), on a claim where its plan writes what it writes.
fn claim_examples() -> Vec<(CachedClaim, ClaimDecision)> {
    use ClaimDecision::*;
    let s1 = || s("s1");
    let other = || holder("other", Some("uid-other"));
    let bound = || {
        claim("c")
            .names("s1")
            .bind_completed()
            .phase(ClaimPhase::Bound)
    };
    let pending = || claim("c").names("s1").phase(ClaimPhase::Pending);
    let chose = || claim("c").chose("s1");
    let why = || Ineligible::Unclaimable;
    vec![
        (bound(), RestoreServerRef { server: s1() }),
        (claim("c").bind_completed(), ClearStaleBindCompleted),
        (
            claim("c").bind_completed().phase(ClaimPhase::Bound),
            BoundServerRefCleared,
        ),
        (bound(), ConfirmServerMissing { server: s1() }),
        (bound(), BoundServerMissing { server: s1() }),
        (bound(), BoundServerRefLost { server: s1() }),
        (
            bound(),
            BoundConfirmed {
                server: s1(),
                server_uid: s("uid-server-s1"),
                selector_mismatch: true,
                server_deleting: true,
                eviction: None,
                held: None,
            },
        ),
        (
            bound(),
            Evicted {
                server: s1(),
                eviction: Some(Eviction {
                    taint: Taint {
                        key: s("maintenance"),
                        value: None,
                        effect: TaintEffect::Evict,
                        time_added: Some(t(900)),
                        hard_deadline: None,
                    },
                    deadline: NOW,
                    hard_deadline: None,
                }),
            },
        ),
        (
            bound(),
            BoundMisbound {
                server: s1(),
                holder: other(),
            },
        ),
        (claim("c"), AdoptReservedServer { server: s1() }),
        (claim("c"), PickBestFit { server: s1() }),
        (chose(), WithdrawMissingServer { server: s1() }),
        (pending(), ServerNotFound { server: s1() }),
        (pending(), WaitForServer { server: s1() }),
        (
            chose(),
            WithdrawIneligibleServer {
                server: s1(),
                why: why(),
            },
        ),
        (
            pending(),
            ServerMismatch {
                server: s1(),
                why: why(),
            },
        ),
        (pending(), WaitForUid { server: s1() }),
        (
            claim("c").names("s1"),
            CompleteBind {
                server: s1(),
                server_uid: s("uid-server-s1"),
            },
        ),
        (
            chose(),
            WithdrawTakenServer {
                server: s1(),
                holder: other(),
            },
        ),
        (
            pending(),
            ServerAlreadyClaimed {
                server: s1(),
                holder: other(),
            },
        ),
    ]
}

#[test]
fn a_claim_plan_says_what_its_decision_describes() {
    for (claim, decision) in claim_examples() {
        let described = decision.describe();
        let said = claim_messages(&plan_claim(&claim, &decision, &now()));
        assert!(
            said.is_empty() || said.contains(&described),
            "{}: the plan says {said:?}, the decision {described:?}",
            decision.name()
        );
    }
}

/// One server decision per variant, on a server where its plan writes what it writes.
fn server_examples() -> Vec<(CachedServer, ServerDecision)> {
    use ServerDecision::*;
    let c = || holder("c", Some("uid-c"));
    let bound = || server("s1").claimed_for("c", "uid-c");
    let reserved = || server("s1").reserved_for("c");
    let cleaning = || server("s1").gates(&["x.io/wipe"]).cleaning(3);
    let recycle = ReclaimPolicy::Recycle;
    let gates = || vec![s("x.io/wipe")];
    vec![
        (server("s1"), Available),
        (
            server("s1"),
            ClaimForWinner {
                winner: c(),
                restoring: false,
            },
        ),
        (
            server("s1"),
            ClaimForWinner {
                winner: c(),
                restoring: true,
            },
        ),
        (reserved(), ReservedClaimMissing),
        (reserved(), FillUid { claim: c() }),
        (reserved(), ReservedAwaitingAdoption),
        (reserved(), ReservedClaimElsewhere),
        (bound(), ConfirmClaimGone { claim: c() }),
        (bound(), Release { policy: recycle }),
        (
            bound().retain(),
            Release {
                policy: ReclaimPolicy::Retain,
            },
        ),
        (bound(), BoundConfirmed),
        (bound(), BoundAwaitingAdoption),
        (
            bound(),
            RollBack {
                cause: RollBackCause::NamesAnother(s("s2")),
            },
        ),
        (
            bound(),
            RollBack {
                cause: RollBackCause::CannotAdopt(Ineligible::Unclaimable),
            },
        ),
        (bound().deleting(), DeletionBlocked { holder: c() }),
        (server("s1").deleting(), DeletionAllowed),
        (bound(), ReleaseToCleaning { gates: gates() }),
        (
            cleaning(),
            RepairCleaningRecord {
                release: 3,
                gates: gates(),
                problem: RecordProblem::GatesNotRecorded,
            },
        ),
        (
            cleaning(),
            Cleaning {
                release: 3,
                pending: vec![Pending::named("x.io/wipe")],
            },
        ),
        (cleaning().passed("x.io/wipe", 3), Cleaned),
    ]
}

/// A reserved server's condition says only whom it is reserved for, whatever keeps the
/// reservation: the description begins with it and says more.
#[test]
fn a_server_plan_says_what_its_decision_describes() {
    for (server, decision) in server_examples() {
        let described = decision.describe(&server);
        let said = server_messages(&plan_server(&server, &decision, &now()));
        assert!(
            said.is_empty() || said.iter().any(|m| described.starts_with(m.as_str())),
            "{}: the plan says {said:?}, the decision {described:?}",
            decision.name()
        );
    }
}

#[test]
fn a_free_server_has_no_reason_and_a_held_one_every_reason_in_eligibility_s_order() {
    let tainted = server("s1").taint("gpu");
    assert!(
        is_free(&tainted),
        "a taint narrows the claims, it frees none"
    );
    assert_eq!(not_free(&tainted).count(), 0);

    let everything = server("s1")
        .deleting()
        .unclaimable()
        .phase(ServerPhase::Released)
        .reserved_for("c");
    let reasons: Vec<String> = not_free(&everything).map(|r| r.to_string()).collect();
    let ineligible = [
        Ineligible::Deleting,
        Ineligible::Unclaimable,
        Ineligible::Released,
    ];
    let mut expected: Vec<String> = ineligible.iter().map(ToString::to_string).collect();
    expected.push(format!("the server is reserved by name for {NS}/c"));
    assert_eq!(reasons, expected);
    assert_eq!(server_is_claimable(&everything), Err(Ineligible::Deleting));
    assert!(!is_free(&everything));

    let cleaning = server("s1").gates(&["x.io/wipe"]).cleaning(3);
    let reasons: Vec<NotFree> = not_free(&cleaning).collect();
    assert_eq!(reasons, [NotFree::Ineligible(Ineligible::Cleaning)]);
    assert_eq!(server_is_claimable(&cleaning), Err(Ineligible::Cleaning));

    let bound = server("s1").claimed_for("c", "uid-c");
    let reasons: Vec<String> = not_free(&bound).map(|r| r.to_string()).collect();
    assert_eq!(
        reasons,
        [format!(
            "its serverClaimRef holds it for {NS}/c (uid uid-c)"
        )]
    );
    assert_eq!(
        server_is_claimable(&bound),
        Ok(()),
        "a ref is the claim's business"
    );
    assert!(!is_free(&bound));
}
