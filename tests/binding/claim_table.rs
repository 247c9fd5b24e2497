//! The claim controller's table (docs/binding.md) as a table: each row stages a claim
//! and the servers the cache holds, names the docs row it is a case of, and says the
//! decision and what its plan writes (the docs' columns: writes, phase / condition
//! reason, event, metric outcome). `every_row_of_the_claim_table` runs them all and
//! names every failing row. The scenarios that take more than one claim's decision (the
//! fair order, the binder's own steps) follow as tests of their own.

use ClaimDecision as D;
use ClaimPhase::{Bound, Lost, Pending};
use EventKind::{Normal, Warning};
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::*;

use crate::binding::support::*;
use Check::*;

/// A case of a row of the docs table.
struct Row {
    /// The docs row (its decision, with what tells it from a sibling row), then what the
    /// case shows.
    id: &'static str,
    claim: CachedClaim,
    /// The servers in the cache.
    servers: Vec<CachedServer>,
    on: On,
    decision: Expect,
    /// What the plan for that decision, on that claim, writes.
    plan: Vec<Check>,
}

/// How the claim controller decides.
enum On {
    /// On the cache, with an empty assumed cache ([`decide_c`]).
    Cache,
    /// After a live read confirmed what the cache says ([`decide_c_live`]).
    Live,
    /// On the cache, the claim's `serverRef` its own pick in flight ([`decide_c_picked`]).
    Picked,
    /// On the cache with these claims waiting too, the pick passing over the servers one
    /// of them would win ([`pick_with_rivals`]).
    Rivals(Vec<CachedClaim>),
    /// Any other set-up.
    With(fn(&CachedClaim, &[CachedServer]) -> ClaimDecision),
}

enum Expect {
    Is(ClaimDecision),
    Like(fn(&ClaimDecision) -> bool),
}

/// What a plan writes.
enum Check {
    /// Nothing: no write, no live read.
    Noop,
    /// A live read of this server first, and nothing else.
    ReadsLive(&'static str),
    NoObject,
    NoStatus,
    NoEvent,
    /// The claim written, its `serverRef` this server (`None`: cleared).
    Ref(Option<&'static str>),
    /// The claim written, with this annotation (`None`: without it).
    Annotation(&'static str, Option<&'static str>),
    /// The claim written, its ref controller-chosen or not.
    ControllerChosen(bool),
    /// The status: its phase and its `Bound` condition's reason.
    Status(ClaimPhase, &'static str),
    /// The status's `boundTime` ([`t`] of these seconds; [`now`] is 1,000).
    BoundTime(i64),
    /// The status's record of the bind: this server, its uid as [`server`] makes it.
    Records(&'static str),
    /// The `Bound` condition's message: exactly this, or containing this.
    Message(&'static str),
    MessageHas(&'static str),
    /// The event: its kind and reason; its note exactly this, or containing this.
    Event(EventKind, &'static str),
    Note(&'static str),
    NoteHas(&'static str),
    /// The metric outcome.
    Counts(Option<Outcome>),
    /// Once the status is written, the same decision writes nothing (no churn, the event
    /// not repeated).
    Settles,
    /// The plan for the same decision on the claim changed so.
    Over(fn(CachedClaim) -> CachedClaim, Vec<Check>),
}

fn row(id: &'static str) -> Row {
    Row {
        id,
        claim: claim("c"),
        servers: vec![],
        on: On::Cache,
        decision: Expect::Like(|_| panic!("the row names no decision")),
        plan: vec![],
    }
}

impl Row {
    fn claim(self, claim: CachedClaim) -> Self {
        Row { claim, ..self }
    }
    fn servers(self, servers: impl Into<Vec<CachedServer>>) -> Self {
        let servers = servers.into();
        Row { servers, ..self }
    }
    fn on(self, on: On) -> Self {
        Row { on, ..self }
    }
    fn is(self, decision: ClaimDecision) -> Self {
        let decision = Expect::Is(decision);
        Row { decision, ..self }
    }
    fn like(self, decision: fn(&ClaimDecision) -> bool) -> Self {
        let decision = Expect::Like(decision);
        Row { decision, ..self }
    }
    fn writes(self, plan: impl Into<Vec<Check>>) -> Self {
        let plan = plan.into();
        Row { plan, ..self }
    }
}

#[test]
fn every_row_of_the_claim_table() {
    let rows: Vec<Row> = [bound_path(), unbound_ref_empty(), unbound_naming_a_server()]
        .into_iter()
        .flatten()
        .collect();
    run_rows("the claim table", &rows, |row| row.id, run);
}

/// Bound path: C has `bind-completed`.
fn bound_path() -> Vec<Row> {
    let no_ref = || claim("c").bind_completed().phase(Bound);
    let forged = || {
        claim("c")
            .names("s1")
            .bind_completed()
            .selects(&[("rack", "r1")])
    };
    let r1 = || server("s1").labelled(&[("rack", "r1")]);
    // A Lost claim its tenant pointed at s1: its record names a server that is gone.
    let lost_elsewhere = || {
        let c = claim("c").names("s1").bind_completed();
        c.phase(Lost).records("gone")
    };
    let holds_c = || server("s1").claimed_for("c", "uid-c");
    let other = || server("s1").claimed_for("other", "uid-other");
    let confirmed = |selector_mismatch, server_deleting| D::BoundConfirmed {
        server: s("s1"),
        server_uid: s("uid-server-s1"),
        selector_mismatch,
        server_deleting,
        eviction: None,
        held: None,
    };
    vec![
        row("RestoreServerRef [j]: the serverRef cleared: written back from the server holding it")
            .claim(no_ref())
            .servers([holds_c(), server("s0")])
            .is(D::RestoreServerRef { server: s("s1") })
            .writes([Event(Warning, "ServerRefRestored"), Ref(Some("s1"))]),
        row("ClearStaleBindCompleted [k]: copied: no boundTime, nothing holds it")
            .claim(claim("c").bind_completed())
            .servers([server("s1")])
            .is(D::ClearStaleBindCompleted)
            .writes([Annotation(ANNOTATION_BIND_COMPLETED, None)]),
        row("ClearStaleBindCompleted [k]: a copy of a bound claim: another claim holds S")
            .claim(claim("c").chose("s1").bind_completed())
            .servers([server("s1").claimed_for("orig", "uid-orig")])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: forged, S unclaimable")
            .claim(forged())
            .servers([r1().unclaimable()])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: forged, S tainted")
            .claim(forged())
            .servers([r1().taint("gpu")])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: forged, S not matching the selector")
            .claim(forged())
            .servers([server("s1").labelled(&[("rack", "r2")])])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: forged, S one it could take all the same")
            .claim(forged())
            .servers([r1()])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: Lost, pointed at another server, unclaimable")
            .claim(lost_elsewhere())
            .servers([server("s1").unclaimable()])
            .is(D::ClearStaleBindCompleted),
        row("ClearStaleBindCompleted [k]: Lost, pointed at another server, taken")
            .claim(lost_elsewhere())
            .servers([other()])
            .is(D::ClearStaleBindCompleted),
        // Gone, as is the server its record names, but it is another server: it never
        // held this claim.
        row("ClearStaleBindCompleted [k]: Lost, pointed at another server, missing live")
            .claim(lost_elsewhere())
            .on(On::Live)
            .is(D::ClearStaleBindCompleted),
        // No server holds it any more (else [j]).
        row("BoundServerRefCleared: the serverRef cleared, S held by another claim")
            .claim(no_ref())
            .servers([other()])
            .is(D::BoundServerRefCleared)
            .writes([
                Status(Lost, "ServerRefCleared"),
                Event(Warning, "ClaimLost"),
                Counts(Some(Outcome::Lost(LostReason::ServerRefCleared))),
                // A Lost claim keeps its metadata and spec.
                NoObject,
            ]),
        row("BoundServerRefCleared: the serverRef cleared, S free")
            .claim(no_ref())
            .servers([server("s1")])
            .is(D::BoundServerRefCleared),
        // The ref its pre-bound marked is gone: a ref its tenant writes next is its own.
        row("BoundServerRefCleared [k]: a Lost claim's cleared ref takes its pre-bound along")
            .claim(without_ref(claim("c").chose("gone").bind_completed().phase(Lost)))
            .servers([server("s1")])
            .is(D::BoundServerRefCleared)
            .writes([ControllerChosen(false), Status(Lost, "ServerRefCleared")]),
        row("ConfirmServerMissing [a]: S missing from the cache: read it live first")
            .claim(bound_to("s1"))
            .is(D::ConfirmServerMissing { server: s("s1") })
            .writes([ReadsLive("s1"), NoObject, NoStatus, NoEvent]),
        row("BoundServerMissing: S missing as confirmed live")
            .claim(bound_to("s1"))
            .on(On::Live)
            .is(D::BoundServerMissing { server: s("s1") })
            .writes([
                Status(Lost, "ServerMissing"),
                Event(Warning, "ClaimLost"),
                Counts(Some(Outcome::Lost(LostReason::ServerMissing))),
            ]),
        // The record names the server object, not its name. The server it was bound to
        // is gone; a Lost claim takes no other on its own.
        row("BoundServerMissing: S re-created under its name is another server")
            .claim(bound_to("s1"))
            .servers([with_uid(server("s1"), "uid-of-a-new-s1")])
            .is(D::BoundServerMissing { server: s("s1") }),
        row("BoundServerMissing [k]: Lost, its record naming S, S missing live")
            .claim(lost_elsewhere().no_record().records("s1"))
            .on(On::Live)
            .is(D::BoundServerMissing { server: s("s1") }),
        row("BoundServerRefLost [b]: S's ref empty: stays Bound, the server side restores it")
            .claim(bound_to("s1"))
            .servers([server("s1")])
            .is(D::BoundServerRefLost { server: s("s1") })
            .writes([Noop]),
        row("BoundServerRefLost [z]: a restore: S's ref names a gone uid of C's name, C names S")
            .claim(claim("c").names("s1").bind_completed())
            .servers([server("s1").claimed_for("c", "uid-older-c")])
            .is(D::BoundServerRefLost { server: s("s1") })
            .writes([Noop]),
        // The server side released it before it saw C: nothing restores it now, so the
        // copied annotation goes and the unbound path tells C why (never a claim left
        // without a phase, waiting for the server controller).
        row("ClearStaleBindCompleted [z]: a restore whose S was released first")
            .claim(claim("c").names("s1").bind_completed())
            .servers([server("s1").claimed_for("c", "uid-older-c").phase(ServerPhase::Released)])
            .is(D::ClearStaleBindCompleted)
            .writes([Annotation(ANNOTATION_BIND_COMPLETED, None)]),
        // boundTime is not lost; counted as a bind, not a repair.
        row("BoundConfirmed, no boundTime [d]: a crash fell between bind-completed and the status")
            .claim(claim("c").chose("s1").bind_completed())
            .servers([holds_c()])
            .like(|d| matches!(d, D::BoundConfirmed { .. }))
            .writes([BoundTime(1_000), Counts(Some(Outcome::Bound)), Event(Normal, "Bound")]),
        row("BoundConfirmed, boundTime set [d]: a Lost phase reverts to Bound, then no churn")
            .claim(bound_time(claim("c").chose("s1").bind_completed().phase(Lost), 5))
            .servers([holds_c()])
            .is(confirmed(false, false))
            .writes([
                Status(Bound, "Bound"),
                Counts(Some(Outcome::Repair(RepairCase::ClaimStatus))),
                Settles,
            ]),
        row("BoundConfirmed (selector_mismatch) [l]: a selector added after the bind: the binding stays")
            .claim(bound_to("s1").selects(&[("rack", "r2")]))
            .servers([r1().claimed_for("c", "uid-c")])
            .is(confirmed(true, false))
            .writes([Status(Bound, "Bound"), Event(Warning, "SelectorMismatch")]),
        // Its finalizer keeps it. News, not a repair; told once.
        row("BoundConfirmed (server_deleting) [s]: S being deleted: told on the claim, once")
            .claim(bound_time(bound_to("s1"), 5))
            .servers([holds_c().deleting()])
            .is(confirmed(false, true))
            .writes([
                Status(Bound, "Bound"),
                MessageHas("being deleted"),
                Event(Warning, "ServerDeleting"),
                Counts(None),
                Settles,
            ]),
        row("BoundMisbound: S's ref names another claim")
            .claim(bound_to("s1"))
            .servers([other()])
            .is(D::BoundMisbound { server: s("s1"), holder: holder("other", Some("uid-other")) })
            .writes([
                Status(Lost, "ServerMisbound"),
                Event(Warning, "ClaimMisbound"),
                Counts(Some(Outcome::Lost(LostReason::ServerMisbound))),
            ]),
        row("BoundMisbound: S's ref names another uid of C's name")
            .claim(bound_to("s1"))
            .servers([server("s1").claimed_for("c", "uid-older-c")])
            .like(|d| matches!(d, D::BoundMisbound { .. })),
        row("BoundConfirmed (eviction): past its deadline, C not told yet: the notice first")
            .claim(bound_to("s1"))
            .servers([evicting(holds_c())])
            .like(|d| matches!(d, D::BoundConfirmed { eviction: Some(_), held: None, .. }))
            .writes([
                Status(Bound, "Bound"),
                Event(Warning, "EvictionScheduled"),
            ]),
        row("Evicted: an Evict taint C does not tolerate is past its deadline")
            .claim(noticed(bound_to("s1")))
            .servers([evicting(holds_c())])
            .like(|d| matches!(d, D::Evicted { eviction: Some(_), .. }))
            .writes([
                Status(Lost, "Evicted"),
                MessageHas("evicted from server s1: the bind ended under server taint maintenance:Evict (added 2023-11-14T22:28:20Z), due at 2023-11-14T22:28:20Z"),
                Event(Warning, "ClaimEvicted"),
                Counts(Some(Outcome::Lost(LostReason::Evicted))),
            ]),
        row("Evicted: S released it past the deadline, its record naming S")
            .claim(bound_to("s1"))
            .servers([evicting(server("s1"))])
            .like(|d| matches!(d, D::Evicted { eviction: Some(_), .. })),
        row("Evicted: C's status says Lost / Evicted: it stays so, whatever it carries")
            .claim(evicted(claim("c").chose("s1")))
            .servers([server("s1")])
            .is(D::Evicted { server: s("s1"), eviction: None })
            .writes([Noop]),
        row("BoundConfirmed (eviction): the deadline is ahead: the notice")
            .claim(tolerating_for(bound_to("s1"), 600))
            .servers([evicting(holds_c())])
            .like(|d| matches!(d, D::BoundConfirmed { eviction: Some(_), .. }))
            .writes([
                Status(Bound, "Bound"),
                MessageHas("ends the bind at"),
                Event(Warning, "EvictionScheduled"),
            ]),
        row("BoundConfirmed (eviction): a toleration without seconds tolerates for ever")
            .claim(bound_to("s1").tolerates("maintenance"))
            .servers([evicting(holds_c())])
            .is(confirmed(false, false)),
        row("BoundConfirmed (held): the deadline passed, a disruption budget holds it")
            .claim(bound_to("s1"))
            .servers([evicting(holds_c())])
            .on(On::With(decide_c_budget_holds))
            .like(|d| matches!(d, D::BoundConfirmed { eviction: Some(_), held: Some(_), .. }))
            .writes([
                Status(Bound, "Bound"),
                MessageHas("disruption budget web (maxUnavailable 1) allows no eviction now"),
                Event(Warning, REASON_EVICTION_HELD_BY_BUDGET),
            ]),
        row("BoundConfirmed (held): a hard deadline ahead bounds the hold")
            .claim(bound_to("s1"))
            .servers([evicting_by(holds_c(), 60)])
            .on(On::With(decide_c_budget_holds))
            .like(|d| matches!(d, D::BoundConfirmed { held: Some(_), .. }))
            .writes([MessageHas("at the latest")]),
        row("Evicted: the taint's hard deadline passed: no budget holds it")
            .claim(noticed(bound_to("s1")))
            .servers([evicting_by(holds_c(), 0)])
            .on(On::With(decide_c_budget_holds))
            .like(|d| matches!(d, D::Evicted { eviction: Some(_), .. }))
            .writes([Status(Lost, "Evicted")]),
        row("Evicted: the hard deadline passed: a toleration for ever does not hold it")
            .claim(noticed(bound_to("s1")).tolerates("maintenance"))
            .servers([evicting_by(holds_c(), -5)])
            .like(|d| matches!(d, D::Evicted { eviction: Some(_), .. })),
    ]
}

/// Unbound path: C has no `bind-completed`; the rows of a standing bind, and of a claim
/// whose `serverRef` is empty.
fn unbound_ref_empty() -> Vec<Row> {
    let abc = || vec![server("a"), server("b").unclaimable(), server("c")];
    let rivals = |others: &[CachedClaim]| On::Rivals(others.to_vec());
    let summary = "0/2 servers can serve this claim: 1 does not match the selector (size=xl), \
        1 is unclaimable.";
    vec![
        row("CompleteBind [y]: a bound claim that lost only bind-completed keeps its boundTime")
            .claim(claim("c").chose("s1").phase(Bound))
            .servers([server("s1").claimed_for("c", "uid-c")])
            .is(D::CompleteBind {
                server: s("s1"),
                server_uid: s("uid-server-s1"),
            })
            .writes([
                BoundTime(5),
                Counts(Some(Outcome::Repair(RepairCase::ClaimStatus))),
            ]),
        row("AdoptReservedServer: a server reserved for C by name")
            .servers([server("s0"), server("s1").reserved_for("c")])
            .is(D::AdoptReservedServer { server: s("s1") })
            .writes([
                Ref(Some("s1")),
                Annotation(ANNOTATION_PRE_BOUND, Some("yes")),
                NoStatus,
                Counts(Some(Outcome::Repair(RepairCase::Adopted))),
            ]),
        row("AdoptReservedServer: a server bound to C's uid, after a crash")
            .servers([server("s0"), server("s1").claimed_for("c", "uid-c")])
            .is(D::AdoptReservedServer { server: s("s1") }),
        row("AdoptReservedServer [o]: a reservation with an empty uid")
            .servers([server("s1").reserved_for("c").uid_ref(""), server("s0")])
            .is(D::AdoptReservedServer { server: s("s1") }),
        row("PickBestFit: an ineligible reservation is not adopted")
            .claim(claim("c").selects(&[("rack", "r1")]))
            .servers([
                server("s1").reserved_for("c").labelled(&[("rack", "r2")]),
                server("s2").labelled(&[("rack", "r1")]),
            ])
            .is(D::PickBestFit { server: s("s2") }),
        row("PickBestFit: untainted first, then by name, in one write")
            .claim(claim("c").tolerates("gpu"))
            .servers([server("a").taint("gpu"), server("c"), server("b")])
            .is(D::PickBestFit { server: s("b") })
            .writes([
                Ref(Some("b")),
                Annotation(ANNOTATION_PRE_BOUND, Some("yes")),
                NoStatus,
                NoEvent,
            ]),
        row("PickBestFit: servers chosen for other claims are skipped")
            .servers([server("a"), server("b")])
            .on(On::With(|c, world| {
                let world = servers(world.to_vec());
                decide_claim(
                    c,
                    &world,
                    &ClaimInputs::unclassed(alone(&|n| n == "a")),
                    Liveness::Cached,
                )
            }))
            .is(D::PickBestFit { server: s("b") }),
        row("PickBestFit [i]: passes over a server a user's claim names")
            .claim(claim("c").created(1))
            .servers(abc())
            .on(rivals(&[claim("u").names("a").created(9)]))
            .is(D::PickBestFit { server: s("c") }),
        row("PickBestFit [i]: passes over a server a bound claim names")
            .claim(claim("c").created(1))
            .servers(abc())
            .on(rivals(&[claim("old")
                .chose("a")
                .bind_completed()
                .phase(Bound)
                .created(9)]))
            .is(D::PickBestFit { server: s("c") }),
        // With no bind recorded, it outranks nobody (docs/binding.md, "Trust").
        row("PickBestFit [i]: does not pass over a server a forged bind-completed names")
            .claim(claim("c").created(1))
            .servers(abc())
            .on(rivals(&[claim("forger")
                .chose("a")
                .bind_completed()
                .created(9)]))
            .is(D::PickBestFit { server: s("a") }),
        row("PickBestFit [i]: passes over a server an older chosen claim names")
            .claim(claim("c").created(5))
            .servers(abc())
            .on(rivals(&[claim("older").chose("a").created(1)]))
            .is(D::PickBestFit { server: s("c") }),
        row("PickBestFit [i]: still picks a server a younger chosen claim names")
            .claim(claim("c").created(1))
            .servers(abc())
            .on(rivals(&[claim("younger").chose("a").created(5)]))
            .is(D::PickBestFit { server: s("a") }),
        row("PickBestFit [i]: still picks a server whose naming claim could never take it")
            .claim(claim("c").created(1))
            .servers(abc())
            .on(rivals(&[claim("u")
                .names("a")
                .selects(&[("rack", "r9")])
                .created(9)]))
            .is(D::PickBestFit { server: s("a") }),
        // The scheduler's convention: every server counted by its first reason. The
        // event is not repeated on resync.
        row("NoMatchingServer [r]: nothing eligible")
            .claim(claim("c").selects(&[("size", "xl")]))
            .servers([
                server("a").unclaimable(),
                server("b").labelled(&[("size", "s")]),
            ])
            .like(|d| matches!(d, D::NoMatchingServer { .. }))
            .writes([
                Status(Pending, "NoMatchingServer"),
                Event(Normal, "FailedBinding"),
                Message(summary),
                Note(summary),
                Settles,
            ]),
        row("NoMatchingServer (stale pre-bound): a user cleared a controller-chosen ref")
            .claim(without_ref(claim("c").chose("s1")))
            .like(|d| matches!(d, D::NoMatchingServer { .. }))
            .writes([Annotation(ANNOTATION_PRE_BOUND, None)]),
    ]
}

/// Unbound path: C has no `bind-completed`, and names S.
fn unbound_naming_a_server() -> Vec<Row> {
    let holds_c = || server("s1").claimed_for("c", "uid-c");
    let other = || server("s1").claimed_for("other", "uid-other");
    let released = || {
        let s1 = server("s1").retain().uid_filled_for("gone", "uid-gone");
        s1.phase(ServerPhase::Released)
    };
    let mismatch = |why| D::ServerMismatch {
        server: s("s1"),
        why,
    };
    vec![
        row("WithdrawMissingServer [f]: controller-chosen, S missing")
            .claim(claim("c").chose("gone"))
            .servers([server("s1")])
            .is(D::WithdrawMissingServer { server: s("gone") })
            .writes([
                Ref(None),
                Annotation(ANNOTATION_PRE_BOUND, None),
                Counts(Some(Outcome::Rebind)),
            ]),
        // A user's serverRef is never cleared.
        row("ServerNotFound [g]: user-chosen, S missing")
            .claim(claim("c").names("gone"))
            .servers([server("s1")])
            .is(D::ServerNotFound { server: s("gone") })
            .writes([
                NoObject,
                Status(Pending, "ServerNotFound"),
                Event(Warning, "FailedBinding"),
            ]),
        // A new claim shows no status until its bind completes: no write for a Pending
        // that Bound would overwrite at once. One that showed an earlier status is told
        // what it waits for now.
        row("WaitForServer [p]: S eligible, its ref empty, C's ref its pick in flight")
            .claim(claim("c").chose("s1"))
            .servers([server("s1")])
            .on(On::Picked)
            .is(D::WaitForServer { server: s("s1") })
            .writes([
                Noop,
                Over(
                    |c| c.phase(Pending),
                    vec![Status(Pending, "WaitingForServer"), NoObject, NoEvent],
                ),
            ]),
        row("WaitForUid: S's ref names C without a uid")
            .claim(claim("c").names("s1"))
            .servers([server("s1").reserved_for("c")])
            .is(D::WaitForUid { server: s("s1") })
            .writes([NoObject]),
        row("WithdrawIneligibleServer: controller-chosen, S unclaimable")
            .claim(claim("c").chose("s1"))
            .servers([server("s1").unclaimable()])
            .is(D::WithdrawIneligibleServer {
                server: s("s1"),
                why: Ineligible::Unclaimable,
            })
            .writes([Ref(None), Event(Normal, "Rebinding")]),
        row("WithdrawIneligibleServer [m]: controller-chosen, S Released")
            .claim(claim("c").chose("s1"))
            .servers([released()])
            .like(|d| matches!(d, D::WithdrawIneligibleServer { .. })),
        row("ServerMismatch: user-chosen, S ineligible: the message says why")
            .claim(claim("c").names("s1").selects(&[("rack", "r1")]))
            .servers([server("s1").labelled(&[("rack", "r9")])])
            .is(mismatch(Ineligible::SelectorMismatch))
            .writes([
                NoObject,
                Status(Pending, "ServerMismatch"),
                Event(Warning, "ServerMismatch"),
                NoteHas("serverSelector"),
            ]),
        row("ServerMismatch: a reservation does not override the claim's selector")
            .claim(claim("c").names("s1").selects(&[("rack", "r1")]))
            .servers([server("s1").reserved_for("c").labelled(&[("rack", "r2")])])
            .is(mismatch(Ineligible::SelectorMismatch)),
        row("ServerMismatch [m]: user-chosen, S Released: it waits for an admin")
            .claim(claim("c").names("s1"))
            .servers([released()])
            .is(mismatch(Ineligible::Released)),
        row("CompleteBind: S's ref has C's uid")
            .claim(claim("c").chose("s1"))
            .servers([holds_c()])
            .is(D::CompleteBind {
                server: s("s1"),
                server_uid: s("uid-server-s1"),
            })
            .writes([
                Annotation(ANNOTATION_BIND_COMPLETED, Some("yes")),
                Status(Bound, "Bound"),
                BoundTime(1_000),
                Event(Normal, "Bound"),
                Counts(Some(Outcome::Bound)),
            ]),
        // A bind to another server than the one recorded is a new bind, not a repair,
        // with a new boundTime.
        row("CompleteBind [k]: the status records S; a bind to another is a new bind")
            .claim(claim("c").chose("s1"))
            .servers([holds_c()])
            .like(|d| matches!(d, D::CompleteBind { .. }))
            .writes([
                Records("s1"),
                Over(
                    |c| c.phase(Lost).records("s0"),
                    vec![Counts(Some(Outcome::Bound)), BoundTime(1_000)],
                ),
            ]),
        row("WithdrawTakenServer: controller-chosen, S's ref names another claim")
            .claim(claim("c").chose("s1"))
            .servers([other()])
            .is(D::WithdrawTakenServer {
                server: s("s1"),
                holder: holder("other", Some("uid-other")),
            })
            .writes([
                Ref(None),
                Event(Normal, "Rebinding"),
                Counts(Some(Outcome::Rebind)),
            ]),
        // A user's serverRef is never cleared.
        row("ServerAlreadyClaimed: user-chosen, S's ref names another claim")
            .claim(claim("c").names("s1"))
            .servers([other()])
            .like(|d| matches!(d, D::ServerAlreadyClaimed { .. }))
            .writes([
                NoObject,
                Status(Pending, "ServerAlreadyClaimed"),
                Event(Warning, "FailedBinding"),
            ]),
    ]
}

/// A claim bound to `server`, as the claim controller leaves it.
fn bound_to(server: &str) -> CachedClaim {
    claim("c").chose(server).bind_completed().phase(Bound)
}

fn bound_time(mut c: CachedClaim, seconds: i64) -> CachedClaim {
    c.status.as_mut().expect("status").bound_time = Some(t(seconds));
    c
}

fn without_ref(mut c: CachedClaim) -> CachedClaim {
    c.spec.server_ref = None;
    c
}

fn with_uid(mut s: CachedServer, uid: &str) -> CachedServer {
    s.meta_mut().uid = Some(uid.into());
    s
}

fn run(row: &Row) {
    let (c, world) = (&row.claim, &row.servers[..]);
    let d = match &row.on {
        On::Cache => decide_c(c, world),
        On::Live => decide_c_live(c, world),
        On::Picked => decide_c_picked(c, world),
        On::Rivals(others) => pick_with_rivals(c, world, others),
        On::With(decide) => decide(c, world),
    };
    match &row.decision {
        Expect::Is(want) => assert_eq!(&d, want, "the decision"),
        Expect::Like(ok) => assert!(ok(&d), "the decision: {d:?}"),
    }
    check(c, &d, &row.plan);
}

/// The pick passes over a server that another claim naming it would win: the picker
/// (controller-chosen once it picks) would only have to withdraw.
fn pick_with_rivals(c: &CachedClaim, world: &[CachedServer], others: &[CachedClaim]) -> D {
    let world = servers(world.to_vec());
    let others = claims([std::slice::from_ref(c), others].concat());
    let skip = pass_over(c, &world, &others, &|_| false, &|_, _| true);
    decide_claim(
        c,
        &world,
        &ClaimInputs::unclassed(alone(&skip)),
        Liveness::Cached,
    )
}

fn check(c: &CachedClaim, d: &ClaimDecision, checks: &[Check]) {
    let p = plan(c, d);
    let object = || p.object.as_ref().expect("a write of the claim");
    let status = || p.status.as_ref().expect("a status write");
    let condition = || find_bound(&status().conditions).expect("a Bound condition");
    let event = || p.event.as_ref().expect("an event");
    for expected in checks {
        match expected {
            Noop => assert!(p.is_noop(), "no write at all: {p:?}"),
            ReadsLive(server) => assert_eq!(p.confirm_server.as_deref(), Some(*server)),
            NoObject => assert!(p.object.is_none(), "no write of the claim: {p:?}"),
            NoStatus => assert!(p.status.is_none(), "no status write: {p:?}"),
            NoEvent => assert!(p.event.is_none(), "no event: {p:?}"),
            Ref(server) => {
                let want = server.map(|name| ServerRef { name: s(name) });
                assert_eq!(object().spec.server_ref, want);
            }
            Annotation(key, value) => {
                assert_eq!(annotation(object(), key).as_deref(), *value, "{key}")
            }
            ControllerChosen(chosen) => assert_eq!(is_controller_chosen(object()), *chosen),
            Status(phase, reason) => {
                let got = find_bound(&status().conditions).map(|c| c.reason.as_str());
                assert_eq!((status().phase, got), (Some(*phase), Some(*reason)));
            }
            BoundTime(seconds) => assert_eq!(status().bound_time, Some(t(*seconds))),
            Records(server) => {
                let record = status().bound_server_ref.as_ref().expect("a record");
                let uid = format!("uid-server-{server}");
                assert_eq!((&*record.name, &*record.uid), (*server, &*uid));
            }
            Message(text) => assert_eq!(condition().message, *text),
            MessageHas(text) => assert!(condition().message.contains(text), "{:?}", condition()),
            Event(kind, reason) => assert_eq!((event().kind, event().reason), (*kind, *reason)),
            Note(text) => assert_eq!(event().note, *text),
            NoteHas(text) => assert!(event().note.contains(text), "{}", event().note),
            Counts(outcome) => assert_eq!(p.outcome, *outcome, "the metric outcome"),
            Settles => {
                let mut written = c.clone();
                written.status = p.status.clone();
                assert!(
                    plan(&written, d).is_noop(),
                    "once written, it writes nothing"
                );
            }
            Over(change, checks) => check(&change(c.clone()), d, checks),
        }
    }
}

fn plan(claim: &CachedClaim, decision: &ClaimDecision) -> ClaimPlan {
    plan_claim(claim, decision, &now())
}

fn event(plan: &ClaimPlan) -> (EventKind, &'static str) {
    let e = plan.event.as_ref().expect("an event");
    (e.kind, e.reason)
}

fn status_reason(plan: &ClaimPlan) -> (Option<ClaimPhase>, Option<String>) {
    let status = plan.status.as_ref().expect("a status write");
    (
        status.phase,
        find_bound(&status.conditions).map(|c| c.reason.clone()),
    )
}

/// The summary of a `WaitForTurn` decision, as its message reads.
fn waits_turn(d: &ClaimDecision) -> String {
    match d {
        ClaimDecision::WaitForTurn { why } => why.to_string(),
        other => panic!("expected WaitForTurn, got {other:?}"),
    }
}

fn in_namespace(mut c: CachedClaim, namespace: &str) -> CachedClaim {
    c.meta_mut().namespace = Some(namespace.into());
    c
}

// ---- Scenarios: more than one claim's decision, the binder's own steps ----

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
    let d = decide_claim(&a, &world, &ClaimInputs::unclassed(pick), Liveness::Cached);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("s2") });
    let d = decide_claim(&b, &world, &ClaimInputs::unclassed(pick), Liveness::Cached);
    assert_eq!(d, ClaimDecision::PickBestFit { server: s("s1") });
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
        decide_claim(c, world, &ClaimInputs::unclassed(pick), Liveness::Cached)
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
    let d = decide_claim(
        &all[5],
        &world,
        &ClaimInputs::unclassed(pick),
        Liveness::Cached,
    );
    assert!(
        waits_turn(&d).ends_with(" Ahead of it: team-a/c1, team-a/c2, team-a/c3 and 2 more."),
        "{}",
        waits_turn(&d)
    );
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
        decide_claim(c, world, &ClaimInputs::unclassed(pick), Liveness::Cached)
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
        Listing::of(vec![server("s1")], all.clone()),
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
        Listing::of(vec![server("s1"), server("s2")], all),
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
    let ClaimStep::Act(work) = reconcile_claim(&mut binder, &c, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert_eq!(work.picked.as_deref(), Some("s1"));
    assert!(work.wakes.servers.contains("s1"), "{:?}", work.wakes);
    assert!(binder.claim_side().assumed.holds("s1", &claim_key(&c)));
    // Taken up, it is a pick in flight like any other.
    let ClaimStep::Act(work) = reconcile_claim(&mut binder, &c, None, Sight::All, now().0) else {
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
    let ClaimStep::Act(work) = binder.claim_step(&t, None, Sight::All, now().0) else {
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

    let ServerStep::Act(work) = binder.server_step(None, &server("s1"), None, now().0) else {
        panic!("a step")
    };
    assert_eq!(work.decision, ServerDecision::Available);
    let ClaimStep::Act(work) = binder.claim_step(&a, None, Sight::All, now().0) else {
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
    let ClaimStep::Act(work) = binder.claim_step(&t, None, Sight::All, now().0) else {
        panic!("a step")
    };
    assert!(matches!(work.decision, ClaimDecision::WaitForTurn { .. }));
    let object = work.plan.object.as_ref().expect("the annotation dropped");
    assert!(!is_controller_chosen(object));
}
