//! The half-bound states of issue 10 that did not converge, end to end: each is staged
//! through the API with the controllers stopped (as a crash, a hand edit, a copied
//! manifest or a tool would leave it), then the real operator starts and the test waits,
//! with a deadline, for the decided outcome. A wait that times out says what it expected
//! and dumps every stored object with its events; a state the decided behaviour rules
//! out ("never") fails the test as soon as it is seen. Every test ends by checking
//! invariants 1 and 2 on the objects it leaves.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use server_binder::api::names::*;
use server_binder::api::{ClaimPhase, Server, ServerClaim, ServerPhase};

use crate::controllers::stage::*;
use crate::controllers::support::{DEADLINE, Env, assert_invariants, eventually, phase};

const CLAIM: &str = "ServerClaim";
const SERVER: &str = "Server";

// ---- 1. `uid: ""` is a reservation by name ----

/// A server reserved with `uid: ""` (tools that serialise Go structs write it) is a
/// reservation by name, as with no uid: the claim of that name adopts it. Nothing was
/// ever bound, so nothing is released, and the other free server stays free.
#[tokio::test]
async fn empty_uid_is_a_reservation_by_name() {
    let mut env = Env::new().await;
    let s1 = env
        .put_server(server("s1").reserved_for("c1").uid_ref(""))
        .await;
    assert_eq!(
        claim_ref(&s1),
        Some(("c1", Some(""))),
        "staged with an explicit empty uid"
    );
    env.put_server(server("s2")).await;
    env.put_claim(claim("c1")).await;
    env.start(4).await;

    expect_while(
        &env,
        "c1 Bound to s1: the reservation by name adopted, s1's ref carrying c1's real uid",
        |w| w.bound("c1", "s1"),
        &[(
            "s2 must stay free (no ref): s1 is reserved for c1",
            &|w: &World| w.server("s2").is_some_and(|s| claim_ref(s).is_some()),
        )],
    )
    .await;
    settle_claim(&env, "c1").await;
    assert_nothing_released(&env, "s1").await;
    let w = expect(&env, "s2 Available / Available with no ref", |w| {
        w.server("s2")
            .is_some_and(|s| server_is(s, ServerPhase::Available, "Available"))
    })
    .await;
    assert_eq!(
        claim_ref(w.server("s2").unwrap()),
        None,
        "s2 stays free: c1 took the server reserved for it"
    );
    invariants_hold(&env).await;
}

/// The same on a `Retain` server, with no other server: s1 never goes `Released` (no
/// claim was ever bound to it), and c1 binds it.
#[tokio::test]
async fn empty_uid_on_a_retain_server_is_a_reservation_by_name() {
    let mut env = Env::new().await;
    env.put_server(server("s1").retain().reserved_for("c1").uid_ref(""))
        .await;
    env.put_claim(claim("c1")).await;
    env.start(4).await;

    expect_while(
        &env,
        "c1 Bound to s1: the reservation by name adopted, s1's ref carrying c1's real uid",
        |w| w.bound("c1", "s1"),
        &[(
            "s1 must never go Released: nothing was bound to it, so there is nothing to retain",
            &|w: &World| {
                w.server("s1")
                    .is_some_and(|s| server_phase_reason(s).0 == Some(ServerPhase::Released))
            },
        )],
    )
    .await;
    settle_claim(&env, "c1").await;
    assert_nothing_released(&env, "s1").await;
    invariants_hold(&env).await;
}

async fn assert_nothing_released(env: &Env, server: &str) {
    assert_eq!(
        env.count_events(SERVER, server, "Released").await,
        0,
        "no Released event on {server}: an empty uid is a reservation by name, nothing was \
         bound, nothing released; events on {server}: {:?}",
        env.events(SERVER, server).await
    );
    for policy in ["Recycle", "Retain"] {
        assert_eq!(
            env.metric("server_binder_releases_total", &[("policy", policy)]),
            0.0,
            "server_binder_releases_total{{policy=\"{policy}\"}} must stay 0: nothing was released"
        );
    }
}

// ---- 2. An orphaned controller-made reservation on a server that cannot serve its
// claim is rolled back ----

/// Why s1 cannot serve c1.
#[derive(Clone, Copy, Debug)]
enum Unservable {
    /// s1 is `unclaimable`.
    Cordoned,
    /// s1 has a taint c1 does not tolerate.
    Tainted,
    /// s1's labels do not match c1's selector.
    Unmatched,
}

impl Unservable {
    fn server(self, name: &str) -> Server {
        match self {
            Unservable::Cordoned => server(name).unclaimable(),
            Unservable::Tainted => server(name).taint("maintenance"),
            Unservable::Unmatched => server(name).labelled(&[("rack", "r1")]),
        }
    }

    fn claim(self, name: &str) -> ServerClaim {
        match self {
            Unservable::Unmatched => claim(name).selects(&[("rack", "r2")]),
            Unservable::Cordoned | Unservable::Tainted => claim(name),
        }
    }

    /// A free server c1 can use.
    fn eligible_server(self, name: &str) -> Server {
        match self {
            Unservable::Unmatched => server(name).labelled(&[("rack", "r2")]),
            Unservable::Cordoned | Unservable::Tainted => server(name),
        }
    }
}

/// The "server written first" crash point on a server that cannot serve the claim: s1
/// has c1's uid, `bound-by-controller`, the finalizer and phase Bound; c1 names nothing
/// and is not `bind-completed`.
async fn stage_orphan(env: &Env, why: Unservable) {
    let c1 = env.put_claim(why.claim("c1")).await;
    env.put_server(why.server("s1").bound_to(&c1)).await;
}

/// s1's reservation rolled back: no ref, no `bound-by-controller`, no finalizer,
/// phase `Available`.
fn rolled_back(s: &Server) -> bool {
    claim_ref(s).is_none()
        && !has_annotation(s, ANNOTATION_BOUND_BY_CONTROLLER)
        && !has_finalizer(s)
        && server_phase_reason(s).0 == Some(ServerPhase::Available)
}

async fn orphan_on_a_server_that_cannot_serve_its_claim_is_rolled_back(why: Unservable) {
    let mut env = Env::new().await;
    stage_orphan(&env, why).await;
    env.start(4).await;

    expect(
        &env,
        &format!(
            "s1 ({why:?}) rolled back: no serverClaimRef, no bound-by-controller, no \
             finalizer, phase Available"
        ),
        |w| w.server("s1").is_some_and(rolled_back),
    )
    .await;
    let note = env.wait_event(SERVER, "s1", "Normal", "RolledBack").await;
    assert!(
        !note.contains("names another server"),
        "s1's RolledBack note must not say that c1 names another server (c1 names none); \
         note: {note:?}"
    );
    let w = expect(
        &env,
        &format!("c1 Pending / NoMatchingServer (s1 is {why:?}, no other server)"),
        |w| {
            w.claim("c1")
                .is_some_and(|c| is(c, ClaimPhase::Pending, "NoMatchingServer"))
        },
    )
    .await;
    assert_eq!(server_ref(w.claim("c1").unwrap()), None, "c1 names nothing");
    invariants_hold(&env).await;
}

#[tokio::test]
async fn orphaned_reservation_on_a_cordoned_server_is_rolled_back() {
    orphan_on_a_server_that_cannot_serve_its_claim_is_rolled_back(Unservable::Cordoned).await;
}

#[tokio::test]
async fn orphaned_reservation_on_a_server_tainted_against_its_claim_is_rolled_back() {
    orphan_on_a_server_that_cannot_serve_its_claim_is_rolled_back(Unservable::Tainted).await;
}

#[tokio::test]
async fn orphaned_reservation_on_a_server_its_claim_does_not_select_is_rolled_back() {
    orphan_on_a_server_that_cannot_serve_its_claim_is_rolled_back(Unservable::Unmatched).await;
}

/// With a free eligible s2 the claim binds s2, and s1 is rolled back. (Here c1 may name
/// s2 by the time s1 rolls back, so the note is not checked.)
async fn orphan_rolled_back_and_its_claim_binds_a_free_server(why: Unservable) {
    let mut env = Env::new().await;
    stage_orphan(&env, why).await;
    env.put_server(why.eligible_server("s2")).await;
    env.start(4).await;

    expect(
        &env,
        &format!("c1 Bound to s2, and s1 ({why:?}) rolled back to Available with no ref"),
        |w| w.bound("c1", "s2") && w.server("s1").is_some_and(rolled_back),
    )
    .await;
    env.wait_event(SERVER, "s1", "Normal", "RolledBack").await;
    invariants_hold(&env).await;
}

#[tokio::test]
async fn orphaned_reservation_on_a_cordoned_server_lets_its_claim_bind_another() {
    orphan_rolled_back_and_its_claim_binds_a_free_server(Unservable::Cordoned).await;
}

#[tokio::test]
async fn orphaned_reservation_on_a_tainted_server_lets_its_claim_bind_another() {
    orphan_rolled_back_and_its_claim_binds_a_free_server(Unservable::Tainted).await;
}

#[tokio::test]
async fn orphaned_reservation_on_an_unselected_server_lets_its_claim_bind_another() {
    orphan_rolled_back_and_its_claim_binds_a_free_server(Unservable::Unmatched).await;
}

/// c1 can never adopt a cordoned s1, so c1 does not block s1's deletion.
#[tokio::test]
async fn deleting_a_cordoned_server_with_an_orphaned_reservation_completes() {
    let mut env = Env::new().await;
    stage_orphan(&env, Unservable::Cordoned).await;
    env.delete_server("s1").await;
    env.start(4).await;

    let w = expect(
        &env,
        "s1 gone: its deletion completes although c1 exists (c1 can never adopt a cordoned \
         server, so it must not block the deletion)",
        |w| w.server("s1").is_none(),
    )
    .await;
    assert!(w.claim("c1").is_some(), "c1 still exists");
    invariants_hold(&env).await;
}

// ---- 3. A selector added to a Bound claim that its server does not match ----

/// Adding a selector is allowed; the binding stays, and the claim says why its server
/// no longer matches, with one Warning.
#[tokio::test]
async fn selector_added_to_a_bound_claim_its_server_does_not_match_keeps_the_binding_and_warns() {
    let mut env = Env::new().await;
    let c1 = env.put_claim(claim("c1").bound("s1")).await;
    env.put_server(server("s1").labelled(&[("rack", "r1")]).bound_to(&c1))
        .await;
    env.start(4).await;
    wait_bound(&env, "c1", "s1").await;

    env.add_claim_selector("c1", "rack", "r2").await;
    let binding_undone = |w: &World| !w.holds("c1", "s1");
    expect_while(
        &env,
        "c1's Bound condition message to say that s1 no longer matches c1's serverSelector",
        |w| {
            w.claim("c1")
                .is_some_and(|c| bound_message(c).to_lowercase().contains("selector"))
        },
        &[(
            "c1 must stay Bound to s1 (a selector added later does not undo the binding)",
            &binding_undone,
        )],
    )
    .await;
    env.wait_event(CLAIM, "c1", "Warning", "SelectorMismatch")
        .await;
    settle_claim(&env, "c1").await;
    let mismatches: Vec<Recorded> = env
        .events(CLAIM, "c1")
        .await
        .into_iter()
        .filter(|e| e.reason == "SelectorMismatch")
        .collect();
    assert!(
        mismatches.len() == 1 && mismatches[0].count == 1 && mismatches[0].type_ == "Warning",
        "exactly one Warning SelectorMismatch on c1, even after further reconciles; found \
         {mismatches:?}"
    );
    let w = world(&env).await;
    assert!(
        w.holds("c1", "s1"),
        "c1 stays Bound to s1; stored:\n{}",
        dump(&env, &w).await
    );
    invariants_hold(&env).await;
}

// ---- 4. A claim naming a Released (Retain) server ----

/// The server's claim is gone and the server waits for an admin: the claim naming it
/// is told so, not that a claim that no longer exists holds it.
#[tokio::test]
async fn claim_naming_a_released_server_is_told_it_waits_for_an_admin() {
    let mut env = Env::new().await;
    env.put_server(
        server("s1")
            .retain()
            .reserved_for("gone")
            .uid_ref(DELETED_UID)
            .by_controller()
            .controller_status(ServerPhase::Released),
    )
    .await;
    env.put_claim(claim("c1").names("s1")).await;
    env.start(4).await;

    let w = expect(
        &env,
        "c1 Pending / ServerMismatch (s1 is Released and waits for an admin)",
        |w| {
            w.claim("c1")
                .is_some_and(|c| is(c, ClaimPhase::Pending, "ServerMismatch"))
        },
    )
    .await;
    let message = bound_message(w.claim("c1").unwrap());
    let lower = message.to_lowercase();
    assert!(
        lower.contains("released") && lower.contains("admin"),
        "c1's Bound condition must say that s1 is Released and waits for an admin; \
         message: {message:?}"
    );
    assert!(
        !message.contains("already claimed"),
        "c1's Bound condition must not say that s1 is already claimed (by the gone \
         claim that no longer exists); message: {message:?}"
    );
    let note = env
        .wait_event(CLAIM, "c1", "Warning", "ServerMismatch")
        .await;
    assert!(
        !note.contains("already claimed"),
        "the ServerMismatch note must not say that s1 is already claimed; note: {note:?}"
    );
    let s1 = w.server("s1").unwrap();
    assert_eq!(
        claim_ref(s1),
        Some(("gone", Some(DELETED_UID))),
        "s1 keeps its ref until an admin clears it"
    );
    assert_eq!(server_phase_reason(s1).0, Some(ServerPhase::Released));
    assert_eq!(
        server_ref(w.claim("c1").unwrap()),
        Some("s1"),
        "the user's ref stays"
    );
    invariants_hold(&env).await;
}

// ---- 5. A copied `bind-completed` annotation on a claim that never bound ----

/// A new claim carrying `bind-completed` (a copied manifest, a restore of one object) is
/// not Lost: it never bound. The stale annotation goes and the normal bind adds it back.
#[tokio::test]
async fn copied_bind_completed_on_a_claim_that_never_bound_is_ignored_and_it_binds() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c1").bind_completed()).await;
    env.start(4).await;

    expect_while(
        &env,
        "c1 Bound to s1 (a free server; the copied bind-completed means nothing)",
        |w| w.bound("c1", "s1"),
        &[("c1 must never go Lost: it never bound", &|w: &World| {
            w.claim("c1")
                .is_some_and(|c| phase(c) == Some(ClaimPhase::Lost))
        })],
    )
    .await;
    settle_claim(&env, "c1").await;
    assert_never_lost(&env, &["c1"]).await;
    assert_eq!(
        env.metric("server_binder_binds_total", &[]),
        1.0,
        "server_binder_binds_total counts c1's one bind"
    );
    invariants_hold(&env).await;
}

/// A copied manifest of a bound claim (`serverRef`, `pre-bound`, `bind-completed`, no
/// status) is a new claim: it neither steals nor loses the original's server, and binds
/// a free one.
#[tokio::test]
async fn copied_manifest_of_a_bound_claim_binds_a_free_server() {
    let mut env = Env::new().await;
    let orig = env.put_claim(claim("orig").bound("s1")).await;
    env.put_server(server("s1").bound_to(&orig)).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c1").chose("s1").bind_completed())
        .await;
    env.start(4).await;

    let orig_uid = ResourceExt::uid(&orig);
    let orig_holds_s1 = move |w: &World| {
        w.server("s1")
            .is_some_and(|s| claim_ref(s) == Some(("orig", orig_uid.as_deref())))
    };
    expect_while(
        &env,
        "c1 Bound to s2 and orig still Bound to s1",
        |w| w.bound("c1", "s2") && w.bound("orig", "s1"),
        &[
            (
                "c1 must never go Lost: it never bound, its copied annotations mean nothing",
                &|w: &World| {
                    w.claim("c1")
                        .is_some_and(|c| phase(c) == Some(ClaimPhase::Lost))
                },
            ),
            ("s1 must keep orig's ref throughout", &|w: &World| {
                !orig_holds_s1(w)
            }),
        ],
    )
    .await;
    settle_claim(&env, "c1").await;
    assert_never_lost(&env, &["c1", "orig"]).await;
    invariants_hold(&env).await;
}

async fn assert_never_lost(env: &Env, claims: &[&str]) {
    for c in claims {
        assert_eq!(
            env.count_events(CLAIM, c, "ClaimLost").await
                + env.count_events(CLAIM, c, "ClaimMisbound").await,
            0,
            "no ClaimLost or ClaimMisbound event on {c}; events: {:?}",
            env.events(CLAIM, c).await
        );
    }
    assert_eq!(
        metric_family_total(env, "server_binder_lost_claims_total"),
        0.0,
        "server_binder_lost_claims_total stays 0 for every reason"
    );
}

// ---- 6. `bind-completed` removed by hand from a Bound claim ----

/// The annotation comes back; the claim stays Bound, keeps its `boundTime`, and its bind
/// is not counted again.
#[tokio::test]
async fn bind_completed_removed_from_a_bound_claim_comes_back_without_a_new_bind() {
    let mut env = Env::new().await;
    let c1 = env.put_claim(claim("c1").bound("s1")).await;
    let bound_time = c1
        .status
        .as_ref()
        .and_then(|s| s.bound_time.clone())
        .expect("staged with a boundTime");
    env.put_server(server("s1").bound_to(&c1)).await;
    env.start(4).await;
    wait_bound(&env, "c1", "s1").await;

    env.remove_claim_annotation("c1", ANNOTATION_BIND_COMPLETED)
        .await;
    let same_time = bound_time.clone();
    expect_while(
        &env,
        "bind-completed back on c1",
        |w| {
            w.claim("c1")
                .is_some_and(|c| has_annotation(c, ANNOTATION_BIND_COMPLETED))
        },
        &[
            ("c1 must stay Bound", &|w: &World| {
                w.claim("c1")
                    .is_none_or(|c| phase(c) != Some(ClaimPhase::Bound))
            }),
            ("c1's status.boundTime must not change", &|w: &World| {
                w.claim("c1").is_none_or(|c| {
                    c.status.as_ref().and_then(|s| s.bound_time.as_ref()) != Some(&same_time)
                })
            }),
        ],
    )
    .await;
    settle_claim(&env, "c1").await;
    let w = world(&env).await;
    let c1 = w.claim("c1").unwrap();
    assert_eq!(
        c1.status.as_ref().and_then(|s| s.bound_time.clone()),
        Some(bound_time),
        "c1's status.boundTime is still the first bind's"
    );
    assert!(
        w.bound("c1", "s1"),
        "c1 stays Bound to s1; stored:\n{}",
        dump(&env, &w).await
    );
    assert_eq!(
        env.metric("server_binder_binds_total", &[]),
        0.0,
        "server_binder_binds_total stays 0: the operator started after c1 was bound, so \
         nothing may count a bind"
    );
    invariants_hold(&env).await;
}

// ---- 7. A Bound-path claim whose serverRef was cleared keeps its server ----

/// c1 (bind-completed, `boundTime` set, phase Lost, no serverRef) is still held by s1
/// (c1's uid, `bound-by-controller`, the finalizer). The tenant keeps the machine: c1's
/// serverRef is restored to s1, and the pending c2 never gets s1.
async fn cleared_server_ref_is_restored(controller_chosen: bool) {
    let mut env = Env::new().await;
    let mut c1 = claim("c1").bind_completed();
    if controller_chosen {
        c1 = c1.pre_bound();
    }
    let c1 = env
        .put_claim(c1.controller_status(ClaimPhase::Lost, "ServerRefCleared"))
        .await;
    env.put_server(server("s1").bound_to(&c1)).await;
    env.put_claim(claim("c2")).await;
    env.start(4).await;

    let c1_uid = ResourceExt::uid(&c1);
    let s1_holds_c1 = move |w: &World| {
        w.server("s1")
            .is_some_and(|s| claim_ref(s) == Some(("c1", c1_uid.as_deref())))
    };
    expect_while(
        &env,
        "c1's serverRef restored to s1 and c1 Bound to s1",
        |w| w.bound("c1", "s1"),
        &[
            ("s1 must keep c1's ref throughout", &|w: &World| {
                !s1_holds_c1(w)
            }),
            ("c2 must never get s1", &|w: &World| {
                w.claim("c2").is_some_and(|c| server_ref(c) == Some("s1"))
            }),
        ],
    )
    .await;
    let w = expect(&env, "c2 Pending / NoMatchingServer", |w| {
        w.claim("c2")
            .is_some_and(|c| is(c, ClaimPhase::Pending, "NoMatchingServer"))
    })
    .await;
    assert_eq!(server_ref(w.claim("c2").unwrap()), None, "c2 names nothing");
    invariants_hold(&env).await;
}

#[tokio::test]
async fn bound_claim_whose_server_ref_was_cleared_keeps_its_server() {
    cleared_server_ref_is_restored(false).await;
}

#[tokio::test]
async fn bound_claim_whose_controller_chosen_server_ref_was_cleared_keeps_its_server() {
    cleared_server_ref_is_restored(true).await;
}

// ---- Waiting and reading ----

/// The stored servers and claims at one moment.
struct World {
    servers: Vec<Server>,
    claims: Vec<ServerClaim>,
}

impl World {
    fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.name_any() == name)
    }

    fn claim(&self, name: &str) -> Option<&ServerClaim> {
        self.claims.iter().find(|c| c.name_any() == name)
    }

    /// Claim `c` and server `s` bound to each other, with both statuses `Bound` / `Bound`.
    fn bound(&self, c: &str, s: &str) -> bool {
        match (self.claim(c), self.server(s)) {
            (Some(claim), Some(server)) => bound_pair(claim, server),
            _ => false,
        }
    }

    /// Claim `c` in phase `Bound`, naming `s`, and `s`'s ref carrying `c`'s uid (whatever
    /// the conditions' reasons say).
    fn holds(&self, c: &str, s: &str) -> bool {
        match (self.claim(c), self.server(s)) {
            (Some(claim), Some(server)) => {
                phase(claim) == Some(ClaimPhase::Bound)
                    && server_ref(claim) == Some(s)
                    && claim_ref(server) == Some((c, claim.uid().as_deref()))
            }
            _ => false,
        }
    }
}

async fn world(env: &Env) -> World {
    let (servers, claims) = env.all().await;
    World { servers, claims }
}

/// A state the decided behaviour rules out while the test waits: what must hold, and a
/// check that is true when it is violated.
type Never<'a> = (&'a str, &'a dyn Fn(&World) -> bool);

/// Polls the stored objects until `done` holds and returns them; fails after
/// [`DEADLINE`] saying what was expected and dumping what is stored.
async fn expect(env: &Env, expected: &str, done: impl Fn(&World) -> bool) -> World {
    expect_while(env, expected, done, &[]).await
}

/// Like [`expect`], and fails as soon as one of `never` is seen.
async fn expect_while(
    env: &Env,
    expected: &str,
    done: impl Fn(&World) -> bool,
    never: &[Never<'_>],
) -> World {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let w = world(env).await;
        if let Some((rule, _)) = never.iter().find(|(_, violated)| violated(&w)) {
            panic!(
                "while waiting for {expected}: {rule}, but it was violated; stored now:\n{}",
                dump(env, &w).await
            );
        }
        if done(&w) {
            return w;
        }
        if Instant::now() >= deadline {
            panic!(
                "expected {expected} within {}s; stored instead:\n{}",
                DEADLINE.as_secs(),
                dump(env, &w).await
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every stored object with what the tests look at, and its events.
async fn dump(env: &Env, w: &World) -> String {
    let mut out = String::new();
    for s in &w.servers {
        let name = s.name_any();
        let _ = writeln!(
            out,
            "  server {name}: ref {:?}, {:?}, bound-by-controller {}, finalizer {}, \
             unclaimable {}, taints {:?}, labels {:?}, deleting {}",
            claim_ref(s),
            server_phase_reason(s),
            has_annotation(s, ANNOTATION_BOUND_BY_CONTROLLER),
            has_finalizer(s),
            s.spec.unclaimable,
            s.spec.taints.iter().map(|t| &t.key).collect::<Vec<_>>(),
            s.labels(),
            s.metadata.deletion_timestamp.is_some(),
        );
        for e in env.events(SERVER, &name).await {
            let _ = writeln!(out, "    event {e:?}");
        }
    }
    for c in &w.claims {
        let name = c.name_any();
        let _ = writeln!(
            out,
            "  claim {name} (uid {:?}): serverRef {:?}, {:?} {:?}, pre-bound {}, \
             bind-completed {}, boundTime {:?}, selector {:?}",
            c.uid(),
            server_ref(c),
            claim_phase_reason(c),
            bound_message(c),
            has_annotation(c, ANNOTATION_PRE_BOUND),
            has_annotation(c, ANNOTATION_BIND_COMPLETED),
            c.status.as_ref().and_then(|s| s.bound_time.as_ref()),
            c.spec.server_selector,
        );
        for e in env.events(CLAIM, &name).await {
            let _ = writeln!(out, "    event {e:?}");
        }
    }
    out
}

/// The message of the claim's `Bound` condition ("" without one).
fn bound_message(c: &ServerClaim) -> String {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_BOUND))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// The sum of every series of a counter family (all label values).
fn metric_family_total(env: &Env, name: &str) -> f64 {
    let text = env.operator.as_ref().expect("running").metrics.encode();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let metric = series.split('{').next()?;
            (metric == name).then(|| value.parse::<f64>().expect("a number"))
        })
        .sum()
}

/// An annotation of the tests' own: the controllers ignore it, but writing it wakes the
/// claim.
const POKE: &str = "test.binder.dev/poke";

fn claim_reconciles(env: &Env) -> f64 {
    env.metric(
        "server_binder_reconcile_duration_seconds_count",
        &[("controller", "claim")],
    )
}

/// Waits until the claim controller has finished a reconcile of `claim` that started
/// after everything the test has seen so far: the writes, events and metrics of the
/// reconcile that produced what it saw are then all recorded, and a later pass had the
/// chance to repeat them. Two rounds of: poke the claim, wait for a claim reconcile to
/// finish. Reconciles of one claim never overlap, so after the first round the one in
/// flight when the test looked has finished, and the one ending the second round
/// started after it. (The count is per controller, so this is exact only while no other
/// claim is being reconciled, as in the tests that rely on it.)
async fn settle_claim(env: &Env, claim: &str) {
    for round in 0..2 {
        let before = claim_reconciles(env);
        env.annotate_claim(claim, POKE, &format!("{before}-{round}"))
            .await;
        eventually(
            &format!("a claim reconcile of {claim} after poke {round}"),
            DEADLINE,
            || async { claim_reconciles(env) > before },
        )
        .await;
    }
}

/// Invariants 1 and 2 on the objects the test leaves.
async fn invariants_hold(env: &Env) {
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}
