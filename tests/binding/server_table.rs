//! The server controller's table (docs/binding.md) as a table: each row stages a server
//! and the claims the cache holds, names the docs row it is a case of, and says the
//! decision and what its plan writes (the docs' columns: writes, phase / condition
//! reason, event, metric outcome). `every_row_of_the_server_table` runs them all and
//! names every failing row. The release's record of its gates across several steps, and
//! the restore's rule for a pair, follow as tests of their own.

use EventKind::{Normal, Warning};
use ServerDecision as D;
use ServerPhase::{Available, Bound, Cleaning, Released};
use server_binder::api::names::*;
use server_binder::api::*;
use server_binder::binding::state::evidence;
use server_binder::binding::state::gates;
use server_binder::binding::state::gates::{Pending, PendingNote};
use server_binder::binding::*;

use crate::binding::support::*;
use Check::*;

/// A case of a row of the docs table.
struct Row {
    /// The docs row (its decision, with what tells it from a sibling row), then what the
    /// case shows.
    id: &'static str,
    server: CachedServer,
    /// The claims in the cache.
    claims: Vec<CachedClaim>,
    on: On,
    decision: Expect,
    /// What the plan for that decision, on that server, writes.
    plan: Vec<Check>,
}

/// How the server controller decides.
enum On {
    /// On the cache ([`decide_s`]).
    Cache,
    /// After a live read confirmed what the cache says ([`decide_s_live`]).
    Live,
    /// With these default release gates (`--release-gates`), as the binder computes the
    /// gates ([`gates::release_gates`], no class).
    Gates(Liveness, &'static [&'static str]),
    /// Any other set-up.
    With(fn(&CachedServer, &[CachedClaim]) -> ServerDecision),
}

enum Expect {
    Is(ServerDecision),
    Like(fn(&ServerDecision) -> bool),
}

/// What a plan writes.
enum Check {
    /// A live read of the claim first.
    ReadsLive,
    NoObject,
    /// The server written, its ref naming this claim (in [`NS`]) with this uid (`None`:
    /// cleared).
    Ref(Option<(&'static str, Option<&'static str>)>),
    /// The server written, with this annotation (`None`: without it).
    Annotation(&'static str, Option<&'static str>),
    /// The server written, with the `server-protection` finalizer or without it.
    Protected(bool),
    /// The server written: whether a new claim may take it.
    Eligible(Result<(), Ineligible>),
    /// The status's phase.
    Phase(ServerPhase),
    /// The status's claim: this one, in [`NS`].
    StatusClaim(&'static str),
    /// The event: its kind and reason; its note containing this.
    Event(EventKind, &'static str),
    NoteHas(&'static str),
    /// The metric outcome.
    Counts(Option<Outcome>),
    /// Once written, the same decision writes nothing (no churn, the warning given once).
    Settles,
    /// Anything else.
    Then(fn(&CachedServer, &ServerPlan)),
}

fn row(id: &'static str) -> Row {
    Row {
        id,
        server: server("s1"),
        claims: vec![],
        on: On::Cache,
        decision: Expect::Like(|_| panic!("the row names no decision")),
        plan: vec![],
    }
}

impl Row {
    fn server(self, server: CachedServer) -> Self {
        Row { server, ..self }
    }
    fn claims(self, claims: impl Into<Vec<CachedClaim>>) -> Self {
        let claims = claims.into();
        Row { claims, ..self }
    }
    fn on(self, on: On) -> Self {
        Row { on, ..self }
    }
    fn is(self, decision: ServerDecision) -> Self {
        let decision = Expect::Is(decision);
        Row { decision, ..self }
    }
    fn like(self, decision: fn(&ServerDecision) -> bool) -> Self {
        let decision = Expect::Like(decision);
        Row { decision, ..self }
    }
    fn writes(self, plan: impl Into<Vec<Check>>) -> Self {
        let plan = plan.into();
        Row { plan, ..self }
    }
}

#[test]
fn every_row_of_the_server_table() {
    let rows: Vec<Row> = [deleting_or_cleaning(), no_uid(), uid()]
        .into_iter()
        .flatten()
        .collect();
    run_rows("the server table", &rows, |row| row.id, run);
}

/// A deleting S, then a cleaning S (docs/binding.md, "Release gates").
fn deleting_or_cleaning() -> Vec<Row> {
    let holds_c = || server("s1").claimed_for("c", "uid-c");
    let cannot_adopt = [
        server("s1").unclaimable(),
        server("s1").taint("gpu"),
        server("s1").labelled(&[("rack", "r2")]),
    ];
    let cleaning = |release, pending| D::Cleaning { release, pending };
    let mut rows = vec![
        row("ConfirmClaimGone [a]: S deleting, H not in the cache")
            .server(holds_c().deleting())
            .like(|d| matches!(d, D::ConfirmClaimGone { .. })),
        row("DeletionBlocked [c] [e]: S deleting while a live claim holds it, warned once")
            .server(holds_c().deleting())
            .claims([claim("c").chose("s1").bind_completed()])
            .is(D::DeletionBlocked {
                holder: holder("c", Some("uid-c")),
            })
            // The finalizer stays.
            .writes([NoObject, Event(Warning, "DeletionBlocked"), Settles]),
        // A bound claim never moves: it restores its serverRef ([j]).
        row("DeletionBlocked [c]: H names nothing, its status records the bind to S")
            .server(holds_c().unclaimable().deleting())
            .claims([claim("c")
                .bind_completed()
                .phase(ClaimPhase::Lost)
                .records("s1")])
            .like(|d| matches!(d, D::DeletionBlocked { .. })),
        row("DeletionAllowed: S deleting, H gone as confirmed")
            .server(holds_c().deleting())
            .on(On::Live)
            .is(D::DeletionAllowed)
            .writes([Protected(false)]),
        // It can never adopt a deleting server ([c]).
        row("DeletionAllowed [c]: H names nothing and is not bind-completed")
            .server(holds_c().deleting())
            .claims([claim("c")])
            .is(D::DeletionAllowed),
        row("DeletionAllowed: deletion wins over cleaning")
            .server(server("s1").gates(&["wipe"]).cleaning(5).deleting())
            .is(D::DeletionAllowed),
        // A release id that is not a whole number becomes the generation.
        row("RepairCleaningRecord [t]: the release id unusable")
            .server(with_annotation(
                server("s1").gates(&["x.io/wipe"]).cleaning(5),
                ANNOTATION_CLEANING,
                Some("soon"),
            ))
            .is(D::RepairCleaningRecord {
                release: 1,
                gates: vec![s("x.io/wipe")],
                problem: RecordProblem::UnusableRelease(s("soon")),
            })
            .writes([
                Annotation(ANNOTATION_CLEANING, Some("1")),
                Phase(Cleaning),
                Event(Warning, "CleaningRecordRepaired"),
                NoteHas("\"soon\""),
            ]),
        // Missing gates become those in force now.
        row("RepairCleaningRecord [t]: the gates not recorded")
            .server(with_annotation(
                server("s1").cleaning(9),
                ANNOTATION_CLEANING_GATES,
                None,
            ))
            .on(On::Gates(Liveness::Cached, &["x.io/wipe"]))
            .is(D::RepairCleaningRecord {
                release: 9,
                gates: vec![s("x.io/wipe")],
                problem: RecordProblem::GatesNotRecorded,
            }),
        // A gate named after a condition the controllers write never passes, even when
        // that condition is True for this release (admission refuses such names; this
        // holds if a server got one anyway).
        row("Cleaning [t]: a gate named Cleaning does not pass itself")
            .server(
                server("s1")
                    .gates(&["Cleaning"])
                    .cleaning(3)
                    .passed("Cleaning", 3),
            )
            .is(cleaning(
                3,
                vec![Pending {
                    gate: s("Cleaning"),
                    note: Some(PendingNote::ControllerCondition),
                }],
            )),
        // Whoever names it; a pass recorded for an earlier release does not count.
        row("Cleaning [t]: a gate not passed for this release")
            .server(
                server("s1")
                    .gates(&["wipe", "power-off"])
                    .cleaning(5)
                    .passed("wipe", 4)
                    .passed("power-off", 5),
            )
            .claims([claim("c").chose("s1")])
            .is(cleaning(
                5,
                vec![Pending {
                    gate: s("wipe"),
                    note: Some(PendingNote::PassForOtherRelease(4)),
                }],
            ))
            // Status only; the cleaner's own conditions stay as they are.
            .writes([NoObject, Phase(Cleaning), Then(waits_for_wipe)]),
        // A reservation by name made during cleaning waits for the cleaning to end.
        row("Cleaning [t]: a reservation made while cleaning")
            .server(server("s1").gates(&["wipe"]).cleaning(5).reserved_for("c"))
            .claims([claim("c").names("s1")])
            .is(cleaning(5, vec![Pending::named("wipe")]))
            .writes([NoObject]),
        // One write drops the annotation, and the server is Available (and claimable).
        row("Cleaned [t]: every gate passed for this release")
            .server(server("s1").gates(&["wipe"]).cleaning(5).passed("wipe", 5))
            .is(D::Cleaned)
            .writes([
                Annotation(ANNOTATION_CLEANING, None),
                Annotation(ANNOTATION_CLEANING_GATES, None),
                Eligible(Ok(())),
                Phase(Available),
                Event(Normal, "Cleaned"),
            ]),
        // A record restored onto a younger object is matched as it is: the cleaner copies 9.
        row("Cleaned [t]: a record restored onto a younger object")
            .server(
                server("s1")
                    .gates(&["x.io/wipe"])
                    .cleaning(9)
                    .passed("x.io/wipe", 9),
            )
            .is(D::Cleaned),
    ];
    // Such a claim can never adopt it.
    let deleting = cannot_adopt.map(|s| {
        row("DeletionAllowed [c]: H names nothing and cannot adopt S")
            .server(s.claimed_for("c", "uid-c").deleting())
            .claims([claim("c").selects(&[("rack", "r1")])])
            .is(D::DeletionAllowed)
    });
    rows.extend(deleting);
    rows
}

/// R empty, or R with no uid.
fn no_uid() -> Vec<Row> {
    let winner = |name, uid, restoring| D::ClaimForWinner {
        winner: holder(name, Some(uid)),
        restoring,
    };
    let reserved = || server("s1").reserved_for("c");
    let forged = || claim("z").names("s1").bind_completed();
    let r1 = || server("s1").labelled(&[("rack", "r1")]);
    // A bind recorded to s1 by a claim now Lost.
    let recorded = || {
        let z = claim("z").chose("s1").bind_completed();
        z.phase(ClaimPhase::Lost).records("s1")
    };
    let fill = D::FillUid {
        claim: holder("c", Some("uid-c")),
    };
    vec![
        row("ClaimForWinner: a claim naming S, claimed in one write, then Bound")
            .server(server("s1"))
            .claims([claim("c").chose("s1")])
            .is(winner("c", "uid-c", false))
            .writes([
                Ref(Some(("c", Some("uid-c")))),
                Annotation(ANNOTATION_BOUND_BY_CONTROLLER, Some("yes")),
                Protected(true),
                Phase(Bound),
                StatusClaim("c"),
                Event(Normal, "Claimed"),
            ]),
        row("ClaimForWinner [n]: the bind-completed claim restoring its lost ref")
            .claims([
                claim("a").names("s1").created(1),
                claim("b").chose("s1").bind_completed().phase(ClaimPhase::Bound).created(50),
            ])
            .is(winner("b", "uid-b", true)),
        row("ClaimForWinner: user-chosen before controller-chosen")
            .claims([claim("a").chose("s1").created(1), claim("b").names("s1").created(50)])
            .like(|d| matches!(d, D::ClaimForWinner { winner, .. } if winner.name == "b")),
        row("ClaimForWinner: then the oldest")
            .claims([claim("a").chose("s1").created(9), claim("b").chose("s1").created(2)])
            .like(|d| matches!(d, D::ClaimForWinner { winner, .. } if winner.name == "b")),
        row("ClaimForWinner: then the name")
            .claims([claim("b").chose("s1").created(2), claim("a").chose("s1").created(2)])
            .like(|d| matches!(d, D::ClaimForWinner { winner, .. } if winner.name == "a")),
        // Only among claims in their turn: this controller's pick has it.
        row("ClaimForWinner [q]: a user's claim out of its turn, a pick in its turn")
            .claims([claim("u").names("s1").created(1), claim("p").chose("s1").created(50)])
            .on(On::With(picks_only))
            .like(|d| matches!(d, D::ClaimForWinner { winner, .. } if winner.name == "p")),
        // A claim restoring a bind is not asked its turn.
        row("ClaimForWinner [q]: a user's claim out of its turn, one restoring a bind")
            .claims([
                claim("u").names("s1").created(1),
                claim("r").names("s1").bind_completed().phase(ClaimPhase::Bound).created(50),
            ])
            .on(On::With(picks_only))
            .like(|d| {
                matches!(d, D::ClaimForWinner { winner, restoring: true } if winner.name == "r")
            }),
        // A bind-completed with no bind recorded (copied, forged) wins nothing
        // (docs/binding.md, "Trust").
        row("ClaimForWinner: a forged bind-completed is no winner over an older claim")
            .claims([forged().created(50), claim("a").names("s1").created(1)])
            .is(winner("a", "uid-a", false)),
        row("ClaimForWinner [n]: a recorded bind to this server object, cordoned since")
            .server(server("s1").unclaimable())
            .claims([recorded()])
            .like(|d| matches!(d, D::ClaimForWinner { restoring: true, .. })),
        row("Available: no R, and no claim naming S; the finalizer goes")
            .server(server("s1").finalizer())
            .claims([claim("other").names("s2")])
            .is(D::Available)
            .writes([Protected(false), Phase(Available)]),
        row("Available [h]: the claim naming S is not eligible for it")
            .server(r1())
            .claims([claim("a").names("s1").selects(&[("rack", "r2")])])
            .is(D::Available),
        row("Available [q]: the one claim naming S does not have its turn")
            .claims([claim("u").names("s1").created(1)])
            .on(On::With(picks_only))
            .is(D::Available),
        row("Available: a forged bind-completed, S unclaimable")
            .server(r1().unclaimable())
            .claims([forged().selects(&[("rack", "r1")])])
            .is(D::Available),
        row("Available: a forged bind-completed, S tainted")
            .server(r1().taint("gpu"))
            .claims([forged().selects(&[("rack", "r1")])])
            .is(D::Available),
        row("Available: a forged bind-completed, S not matching its selector")
            .server(server("s1").labelled(&[("rack", "r2")]))
            .claims([forged().selects(&[("rack", "r1")])])
            .is(D::Available),
        // A record of a bind to another server object of that name is no record of this.
        row("Available: a record of a bind to another s1")
            .server(with_uid(server("s1").unclaimable(), "uid-of-a-new-s1"))
            .claims([recorded()])
            .is(D::Available),
        row("Available: a stale bound-by-controller goes once the ref is cleared")
            .server(without_ref(server("s1").claimed_for("gone", "uid-gone")))
            .is(D::Available)
            .writes([Annotation(ANNOTATION_BOUND_BY_CONTROLLER, None)]),
        // A user's reservation is never cleared.
        row("ReservedClaimMissing: R by name, the claim missing")
            .server(reserved())
            .is(D::ReservedClaimMissing)
            .writes([NoObject, Phase(Available), StatusClaim("c")]),
        row("ReservedClaimMissing [o]: an empty uid, the claim missing")
            .server(server("s1").retain().reserved_for("c").uid_ref(""))
            .is(D::ReservedClaimMissing),
        // The ref stays user-made.
        row("FillUid [n]: R by name, the claim naming S")
            .server(reserved())
            .claims([claim("c").chose("s1")])
            .is(fill.clone())
            .writes([
                Ref(Some(("c", Some("uid-c")))),
                Annotation(ANNOTATION_BOUND_BY_CONTROLLER, None),
                Protected(true),
                Phase(Bound),
            ]),
        row("FillUid [o]: an empty uid is a reservation by name")
            .server(server("s1").retain().reserved_for("c").uid_ref(""))
            .claims([claim("c").chose("s1")])
            .is(fill),
        row("ReservedClaimElsewhere [h]: the claim names S but cannot take it")
            .server(reserved().labelled(&[("rack", "r2")]))
            .claims([claim("c").names("s1").selects(&[("rack", "r1")])])
            .is(D::ReservedClaimElsewhere),
        row("ReservedAwaitingAdoption: R by name, the claim naming nothing")
            .server(reserved())
            .claims([claim("c")])
            .is(D::ReservedAwaitingAdoption)
            .writes([NoObject]),
        row("ReservedAwaitingAdoption [o]: an empty uid, the claim naming nothing")
            .server(server("s1").retain().reserved_for("c").uid_ref(""))
            .claims([claim("c")])
            .is(D::ReservedAwaitingAdoption),
        row("ReservedClaimElsewhere: R by name, the claim naming another server")
            .server(reserved())
            .claims([claim("c").chose("s2")])
            .is(D::ReservedClaimElsewhere)
            .writes([NoObject, Phase(Available)]),
    ]
}

/// R has a uid.
fn uid() -> Vec<Row> {
    let holds_c = || server("s1").claimed_for("c", "uid-c");
    let recycle = D::Release {
        policy: ReclaimPolicy::Recycle,
    };
    let retain = D::Release {
        policy: ReclaimPolicy::Retain,
    };
    let cannot_adopt = [
        (server("s1").unclaimable(), Ineligible::Unclaimable),
        (
            server("s1").taint("gpu"),
            Ineligible::UntoleratedTaint { key: s("gpu") },
        ),
        (
            server("s1").labelled(&[("rack", "r2")]),
            Ineligible::SelectorMismatch,
        ),
    ];
    let mut rows = vec![
        row("ConfirmClaimGone [a]: H not in the cache: read it live first")
            .server(holds_c())
            .is(D::ConfirmClaimGone { claim: holder("c", Some("uid-c")) })
            .writes([ReadsLive]),
        row("ConfirmClaimGone [a]: the claim of R's name has another uid")
            .server(server("s1").claimed_for("c", "uid-old"))
            .claims([claim("c")])
            .like(|d| matches!(d, D::ConfirmClaimGone { .. })),
        // The ref goes and the cleaning annotation names the generation that write
        // produces; no claim may take it.
        row("ReleaseToCleaning [t]: H gone, Recycle, S has gates: released and cleaning in one write")
            .server(holds_c().gates(&["wipe", "power-off"]).phase(Bound))
            .on(On::Live)
            .is(D::ReleaseToCleaning { gates: vec![s("wipe"), s("power-off")] })
            .writes([
                Ref(None),
                Protected(false),
                Then(|srv, p| {
                    let next = srv.meta().generation.unwrap() + 1;
                    let w = written(p);
                    assert_eq!(annotation(w, ANNOTATION_CLEANING), Some(next.to_string()));
                }),
                Phase(Cleaning),
                Event(Normal, "Cleaning"),
                Counts(Some(Outcome::Released(ReclaimPolicy::Recycle))),
                Eligible(Err(Ineligible::Cleaning)),
            ]),
        // The controller's default gates apply to a server that names none.
        row("ReleaseToCleaning [t]: the default gates")
            .server(holds_c())
            .on(On::Gates(Liveness::Confirmed, &["wipe"]))
            .like(|d| matches!(d, D::ReleaseToCleaning { .. })),
        row("Release { policy: Recycle }: H gone, Recycle")
            .server(holds_c().phase(Bound))
            .on(On::Live)
            .is(recycle.clone())
            .writes([
                Ref(None),
                Annotation(ANNOTATION_BOUND_BY_CONTROLLER, None),
                Protected(false),
                Phase(Available),
                Event(Normal, "Released"),
                Counts(Some(Outcome::Released(ReclaimPolicy::Recycle))),
            ]),
        row("Release { policy: Recycle }: a user-made R loses only its uid")
            .server(server("s1").uid_filled_for("c", "uid-c"))
            .on(On::Live)
            .like(|d| matches!(d, D::Release { .. }))
            .writes([Ref(Some(("c", None))), Protected(false)]),
        row("Release { policy: Recycle } [a]: R names an older incarnation, confirmed live")
            .server(server("s1").claimed_for("c", "uid-old"))
            .claims([claim("c")])
            .on(On::Live)
            .is(recycle.clone()),
        // An empty list on the server means none.
        row("Release { policy: Recycle }: no gates on the server, whatever the default")
            .server(holds_c().gates(&[]))
            .on(On::Gates(Liveness::Confirmed, &["wipe"]))
            .is(recycle),
        // The ref is kept.
        row("Release { policy: Retain }: H gone, Retain")
            .server(holds_c().retain().phase(Bound))
            .on(On::Live)
            .is(retain.clone())
            .writes([
                Ref(Some(("c", Some("uid-c")))),
                Phase(Released),
                Counts(Some(Outcome::Released(ReclaimPolicy::Retain))),
            ]),
        // Retain never cleans.
        row("Release { policy: Retain }: Retain, whatever the default gates")
            .server(holds_c().retain())
            .on(On::Gates(Liveness::Confirmed, &["wipe"]))
            .is(retain),
        row("StampTaints: an Evict taint without timeAdded gets the time now")
            .server(unstamped(holds_c()))
            .claims([claim("c").chose("s1")])
            .is(D::StampTaints)
            .writes([
                Then(|_, plan| {
                    let written = plan.object.as_ref().expect("the server written");
                    let times = written.spec.taints.iter().map(|t| t.time_added.clone());
                    assert!(times.into_iter().all(|t| t == Some(now())));
                    assert!(plan.status.is_none() && plan.event.is_none());
                }),
            ]),
        row("Evict: H's status says Lost / Evicted: released as for a claim gone")
            .server(evicting(holds_c()))
            .claims([evicted(claim("c").chose("s1"))])
            .like(|d| matches!(d, D::Evict { policy: ReclaimPolicy::Recycle, .. }))
            .writes([
                Ref(None),
                Phase(Available),
                Event(Normal, "Evicted"),
                NoteHas("which an Evict taint evicted"),
                Counts(Some(Outcome::Released(ReclaimPolicy::Recycle))),
            ]),
        row("Evict: through its release gates")
            .server(holds_c().gates(&["wipe"]))
            .claims([evicted(claim("c").chose("s1"))])
            .like(|d| matches!(d, D::Evict { gates, .. } if gates == &["wipe".to_string()]))
            .writes([Phase(Cleaning), Event(Normal, "Evicted")]),
        // The claim side ends the bind first: its status is the record.
        row("BoundConfirmed: H's deadline passed, its status not Lost / Evicted yet")
            .server(evicting(holds_c()))
            .claims([claim("c").chose("s1").bind_completed().phase(ClaimPhase::Bound)])
            .is(D::BoundConfirmed),
        row("BoundConfirmed: H's grace under an Evict taint runs: the bind stays")
            .server(evicting(holds_c()))
            .claims([tolerating_for(
                claim("c").chose("s1").bind_completed().phase(ClaimPhase::Bound),
                600,
            )])
            .is(D::BoundConfirmed),
        row("BoundConfirmed: H names S; the finalizer put back, then no churn")
            .server(without_finalizers(holds_c()))
            .claims([claim("c").chose("s1")])
            .is(D::BoundConfirmed)
            .writes([
                Protected(true),
                Phase(Bound),
                Counts(Some(Outcome::Repair(RepairCase::Finalizer))),
                Settles,
            ]),
        // The ref stays for the claim to adopt.
        row("BoundAwaitingAdoption [c]: H names nothing, S eligible for it")
            .server(holds_c())
            .claims([claim("c")])
            .is(D::BoundAwaitingAdoption)
            .writes([NoObject]),
        // A bound claim never moves: a mistaken edit of its serverRef must not hand the
        // server to another claim. The claim side writes the ref back (RestoreServerRef).
        row("BoundAwaitingAdoption [c]: H names nothing, its status records the bind to S")
            .server(holds_c().unclaimable())
            .claims([claim("c").bind_completed().phase(ClaimPhase::Lost).records("s1")])
            .is(D::BoundAwaitingAdoption),
        row("RollBack [c]: H names another server; a controller-made R is cleared")
            .server(holds_c())
            .claims([claim("c").chose("s2")])
            .is(D::RollBack { cause: RollBackCause::NamesAnother(s("s2")) })
            .writes([Ref(None), Protected(false), Phase(Available), Event(Normal, "RolledBack")]),
        row("RollBack [c]: H names another server; a user-made R keeps the name")
            .server(server("s1").uid_filled_for("c", "uid-c"))
            .claims([claim("c").names("s2")])
            .like(|d| matches!(d, D::RollBack { .. }))
            .writes([Ref(Some(("c", None)))]),
        // No bind recorded in its status: it takes S only if it may (it adopts it).
        row("RollBack [c]: H names nothing, records no bind, S cordoned")
            .server(holds_c().unclaimable())
            .claims([claim("c").bind_completed().phase(ClaimPhase::Lost).no_record()])
            .is(D::RollBack { cause: RollBackCause::CannotAdopt(Ineligible::Unclaimable) }),
    ];
    let rolled_back = cannot_adopt.map(|(s, why)| {
        row("RollBack [c]: H names nothing and cannot adopt S: the note says why")
            .server(s.claimed_for("c", "uid-c"))
            .claims([claim("c").selects(&[("rack", "r1")])])
            .is(D::RollBack {
                cause: RollBackCause::CannotAdopt(why),
            })
            .writes([Ref(None), NoteHas("names no server")])
    });
    rows.extend(rolled_back);
    rows
}

fn run(row: &Row) {
    let (srv, world) = (&row.server, &row.claims[..]);
    let d = match &row.on {
        On::Cache => decide_s(srv, world),
        On::Live => decide_s_live(srv, world),
        On::Gates(liveness, default) => {
            let default: Vec<String> = default.iter().map(|g| s(g)).collect();
            let gates = gates::release_gates(srv, None, &default);
            decide_server(
                srv,
                &claims(world.to_vec()),
                *liveness,
                &gates,
                IN_TURN,
                ADMITTED,
            )
        }
        On::With(decide) => decide(srv, world),
    };
    match &row.decision {
        Expect::Is(want) => assert_eq!(&d, want, "the decision"),
        Expect::Like(ok) => assert!(ok(&d), "the decision: {d:?}"),
    }
    let p = plan(srv, &d);
    let event = || p.event.as_ref().expect("an event");
    for expected in &row.plan {
        match expected {
            ReadsLive => assert!(p.confirm_claim.is_some(), "a live read: {p:?}"),
            NoObject => assert!(p.object.is_none(), "no write of the server: {p:?}"),
            Ref(r) => {
                let want = r.map(|(name, uid)| holder(name, uid));
                assert_eq!(written(&p).spec.server_claim_ref, want);
            }
            Annotation(key, value) => {
                assert_eq!(annotation(written(&p), key).as_deref(), *value, "{key}")
            }
            Protected(yes) => assert_eq!(has_protection(written(&p)), *yes, "the finalizer"),
            Eligible(want) => assert_eq!(&eligibility(written(&p), &claim("next")), want),
            Phase(phase) => assert_eq!(p.status.as_ref().and_then(|s| s.phase), Some(*phase)),
            StatusClaim(name) => assert_eq!(
                p.status.as_ref().and_then(|s| s.claim.clone()),
                Some(format!("{NS}/{name}"))
            ),
            Event(kind, reason) => assert_eq!((event().kind, event().reason), (*kind, *reason)),
            NoteHas(text) => assert!(event().note.contains(text), "{}", event().note),
            Counts(outcome) => assert_eq!(p.outcome, *outcome, "the metric outcome"),
            Settles => {
                let mut settled = p.object.clone().unwrap_or_else(|| srv.clone());
                settled.status = p.status.clone();
                assert!(
                    plan(&settled, &d).is_noop(),
                    "once written, it writes nothing"
                );
            }
            Then(more) => more(srv, &p),
        }
    }
}

/// The server decision with `picks_only` as the turn: every `pre-bound` ref has its
/// turn, no other claim has it.
fn picks_only(srv: &CachedServer, world: &[CachedClaim]) -> ServerDecision {
    let picks_only: Turn<'_> = &|c| is_controller_chosen(c);
    decide_server(
        srv,
        &claims(world.to_vec()),
        Liveness::Cached,
        &[],
        picks_only,
        ADMITTED,
    )
}

/// The `Cleaning` condition names the pending gate, and the cleaner's own conditions
/// stay as they are.
fn waits_for_wipe(_: &CachedServer, p: &ServerPlan) {
    let status = p.status.as_ref().unwrap();
    let cleaning = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_CLEANING);
    assert!(
        cleaning.is_some_and(|c| c.message.contains("wipe")),
        "{status:?}"
    );
    assert!(status.conditions.iter().any(|c| c.type_ == "power-off"));
}

fn plan(server: &CachedServer, decision: &ServerDecision) -> ServerPlan {
    plan_server(server, decision, &now())
}

fn written(plan: &ServerPlan) -> &CachedServer {
    plan.object.as_ref().expect("an object write")
}

fn with_annotation(mut s: CachedServer, key: &str, value: Option<&str>) -> CachedServer {
    match value {
        Some(value) => s.annotations_mut().insert(key.into(), value.into()),
        None => s.annotations_mut().remove(key),
    };
    s
}

fn with_uid(mut s: CachedServer, uid: &str) -> CachedServer {
    s.meta_mut().uid = Some(uid.into());
    s
}

fn without_ref(mut s: CachedServer) -> CachedServer {
    s.spec.server_claim_ref = None;
    s
}

fn without_finalizers(mut s: CachedServer) -> CachedServer {
    s.meta_mut().finalizers = None;
    s
}

/// The decision with no claim in the cache and `default` for `--release-gates`, the gates
/// passed as the binder computes them ([`gates::release_gates`], no class).
fn decide_alone(server: &CachedServer, liveness: Liveness, default: &[String]) -> ServerDecision {
    let gates = gates::release_gates(server, None, default);
    decide_server(server, &claims(vec![]), liveness, &gates, IN_TURN, ADMITTED)
}

// ---- Across steps, and the restore's rule ----

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

/// `server` with an `Evict` taint `maintenance` no one stamped yet.
fn unstamped(mut server: CachedServer) -> CachedServer {
    server.spec.taints.push(Taint {
        key: "maintenance".into(),
        value: None,
        effect: TaintEffect::Evict,
        time_added: None,
        hard_deadline: None,
    });
    server
}
