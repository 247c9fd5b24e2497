//! Every row of the server controller's table (docs/binding.md), end to end,
//! staged as in `claim_rows.rs`. Three rows are the server's side of a state a claim row
//! already stages, and are asserted there on both objects:
//!
//! | server row | test |
//! |---|---|
//! | `FillUid` (name-only R, the claim names S) | `claim_rows::unbound_claim_naming_its_reserved_server_waits_for_the_uid` |
//! | `ReservedAwaitingAdoption` (name-only R, the claim names nothing) | `claim_rows::unbound_claim_adopts_a_server_reserved_for_it_by_name` |
//! | `BoundAwaitingAdoption` (R has the uid, the claim names nothing) | `claim_rows::unbound_claim_adopts_a_server_that_recorded_it_before_a_crash` |
//! | `ClaimForWinner` restoring a lost ref | `claim_rows::bound_claim_whose_server_lost_its_ref_stays_bound_and_the_ref_is_restored` |
//! | `BoundAwaitingAdoption` for a bound claim whose `serverRef` was cleared | `claim_rows::bound_claim_with_its_server_ref_cleared_gets_it_back` |
//! | `RollBack` of a ref to a claim that cannot adopt S | `half_bound.rs` (cordoned, tainted, relabelled) |

use kube::ResourceExt;
use server_binder::api::names::*;
use server_binder::api::{ClaimPhase, ServerPhase};

use server_binder::apiserver::RequestRecord;

use crate::controllers::quotas;
use crate::controllers::stage::*;
use crate::controllers::support::{
    DEADLINE, Env, NS, assert_invariants, controller_writes, eventually, is_controller_write,
};

const CLAIM: &str = "ServerClaim";
const SERVER: &str = "Server";

// ---- S is being deleted ----

/// A live claim holds S → the finalizer stays, Bound / DeletionBlocked, Warning once; once
/// the claim goes, the finalizer goes and S with it.
#[tokio::test]
async fn deleting_server_held_by_a_live_claim_is_blocked_until_the_claim_goes() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").bound("s1")).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.delete_server("s1").await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Bound, "DeletionBlocked")
        .await;
    assert!(has_finalizer(&s) && s.metadata.deletion_timestamp.is_some());
    let note = env
        .wait_event(SERVER, "s1", "Warning", "DeletionBlocked")
        .await;
    assert!(note.contains(&format!("{NS}/c")), "{note}");
    assert_eq!(
        env.count_events(SERVER, "s1", "DeletionBlocked").await,
        1,
        "warned once"
    );
    let c = env.claim("c").await.unwrap();
    assert!(
        is(&c, ClaimPhase::Bound, "Bound"),
        "the tenant keeps the machine"
    );

    env.delete_claim("c").await;
    env.wait_server_gone("s1").await;
}

/// No ref (a stale finalizer) → drop the finalizer; the API server removes S.
#[tokio::test]
async fn deleting_server_without_a_claim_goes() {
    let mut env = Env::new().await;
    env.put_server(server("s1").finalizer()).await;
    env.delete_server("s1").await;
    env.start(2).await;
    env.wait_server_gone("s1").await;
}

/// R has a uid whose claim is not in the cache → a live GET first ([a]); gone → allowed.
#[tokio::test]
async fn deleting_server_whose_claim_is_gone_goes_after_a_live_read() {
    let mut env = Env::new().await;
    env.put_server(server("s1").claimed_for("c", DELETED_UID))
        .await;
    env.delete_server("s1").await;
    env.start(2).await;
    env.wait_server_gone("s1").await;
    assert!(
        env.read_live("serverclaims", "c"),
        "confirmed by a live GET of c"
    );
}

/// R's claim names nothing and is not bind-completed: it can never adopt a deleting
/// server, so it does not block the deletion ([c]).
#[tokio::test]
async fn deleting_server_held_only_by_an_unbound_claim_naming_nothing_goes() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c")).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.delete_server("s1").await;
    env.start(2).await;
    env.wait_server_gone("s1").await;
}

// ---- R empty ----

/// Claims name S → the winner (user-chosen before controller-chosen, though younger:
/// the pick can take s2 instead, so the user's claim has its turn) gets R with its uid,
/// `bound-by-controller` and the finalizer in one write; Normal Claimed. The pick
/// withdraws and takes s2.
#[tokio::test]
async fn free_server_named_by_claims_goes_to_the_winner() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("controller-chosen").chose("s1")).await;
    env.put_claim(claim("user-chosen").names("s1")).await;
    env.start(2).await;

    let (_, s) = wait_bound(&env, "user-chosen", "s1").await;
    assert!(has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER));
    assert_eq!(
        s.status.as_ref().and_then(|s| s.claim.as_deref()),
        Some(format!("{NS}/user-chosen").as_str()),
        "the Claim column"
    );
    let note = env.wait_event(SERVER, "s1", "Normal", "Claimed").await;
    assert!(
        note.starts_with(&format!("server is claimed by {NS}/user-chosen (uid ")),
        "{note}"
    );
    // The loser withdraws and takes the other server.
    env.wait_event(CLAIM, "controller-chosen", "Normal", "Rebinding")
        .await;
    wait_bound(&env, "controller-chosen", "s2").await;
}

/// The same with one server: the pick, ahead in the fair order, needs s1, so the user's
/// younger claim does not have its turn and the pick keeps s1; the user's claim finds
/// it taken (docs/binding.md, "The matching").
#[tokio::test]
async fn a_pick_ahead_keeps_the_server_a_younger_users_claim_names() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("controller-chosen").chose("s1")).await;
    env.put_claim(claim("user-chosen").names("s1")).await;
    env.start(2).await;

    wait_bound(&env, "controller-chosen", "s1").await;
    env.wait_claim_phase("user-chosen", ClaimPhase::Pending, "ServerAlreadyClaimed")
        .await;
}

/// No claim names S → Available; a stale finalizer and `bound-by-controller` (left by a
/// hand edit of R) go.
#[tokio::test]
async fn free_server_nobody_names_is_available_and_tidied() {
    let mut env = Env::new().await;
    env.put_server(
        server("s1")
            .by_controller()
            .finalizer()
            .controller_status(ServerPhase::Bound),
    )
    .await;
    env.start(2).await;

    let s = env
        .wait_server("s1", "Available without finalizer", |s| {
            server_is(s, ServerPhase::Available, "Available") && !has_finalizer(s)
        })
        .await;
    assert!(!has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER));
    assert_eq!(s.status.as_ref().unwrap().claim, None);
}

// ---- R has no uid: a reservation by name ----

/// No claim of that name → Available / Reserved, still reserved.
#[tokio::test]
async fn server_reserved_for_a_missing_claim_stays_reserved() {
    let mut env = Env::new().await;
    env.put_server(server("s1").reserved_for("ghost")).await;
    env.put_claim(claim("other")).await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(
        claim_ref(&s),
        Some(("ghost", None)),
        "the user's reservation stays"
    );
    assert_eq!(
        s.status.as_ref().unwrap().claim.as_deref(),
        Some(format!("{NS}/ghost").as_str())
    );
    // Another claim cannot take it.
    env.wait_claim_phase("other", ClaimPhase::Pending, "NoMatchingServer")
        .await;
}

/// The claim names S and can take it, but the quota of its namespace that limits its
/// class has not charged it (every charge conflicts here, as if another writer always
/// won the quota, until the test lets one through)
/// → Available / Reserved, the ref still a name (`ReservedAwaitingQuota`); once the
/// charge is written, `FillUid` binds it.
#[tokio::test]
async fn server_reserved_for_a_claim_its_quota_has_not_charged_waits_for_the_charge() {
    let mut env = Env::new().await;
    quotas::create_gpu_class(&env).await;
    quotas::create_quota(&env, 1).await;
    env.put_server(server("s1").reserved_for("c")).await;
    env.put_claim(quotas::of_gpu(claim("c").names("s1"))).await;
    let charges = controller_writes().resource("serverquotas");
    env.apiserver.faults().fail(charges, 1_000_000, 409);
    env.start(2).await;

    let tried = || {
        let log = env.apiserver.request_log().entries();
        let charge = |r: &&RequestRecord| is_controller_write(r) && r.resource == "serverquotas";
        log.iter().filter(charge).any(|r| r.status == 409)
    };
    eventually("a charge tried and refused", DEADLINE, || {
        let t = tried();
        async move { t }
    })
    .await;
    let s = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(
        claim_ref(&s),
        Some(("c", None)),
        "still a reservation by name"
    );
    assert!(!has_finalizer(&s), "{s:?}");
    let c = env.claim("c").await.unwrap();
    assert_ne!(c.status.and_then(|s| s.phase), Some(ClaimPhase::Bound));

    env.apiserver.faults().clear();
    let (_, s) = wait_bound(&env, "c", "s1").await;
    assert!(
        !has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER),
        "the reservation stays user-made"
    );
}

/// The claim names S but S cannot serve it ([h]) → stays Available / Reserved; the
/// claim reports the mismatch.
#[tokio::test]
async fn server_reserved_for_a_claim_it_cannot_serve_stays_reserved() {
    let mut env = Env::new().await;
    env.put_server(server("s1").reserved_for("c").unclaimable())
        .await;
    env.put_claim(claim("c").names("s1")).await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(claim_ref(&s), Some(("c", None)), "no uid filled in");
    env.wait_claim_phase("c", ClaimPhase::Pending, "ServerMismatch")
        .await;
}

/// The claim names another server → nothing to do: Available / Reserved.
#[tokio::test]
async fn server_reserved_for_a_claim_bound_elsewhere_stays_reserved() {
    let mut env = Env::new().await;
    env.put_server(server("s1").reserved_for("c")).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c").names("s2")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s2").await;
    let s1 = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(claim_ref(&s1), Some(("c", None)));
}

// ---- R has a uid ----

/// The claim is gone (confirmed live), Recycle, controller-made R → R, the annotation
/// and the finalizer go; Available; Normal Released.
#[tokio::test]
async fn server_whose_claim_is_gone_is_recycled() {
    let mut env = Env::new().await;
    env.put_server(server("s1").bound_to_deleted("c")).await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;
    assert_eq!(claim_ref(&s), None);
    assert!(!has_finalizer(&s) && !has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER));
    let note = env.wait_event(SERVER, "s1", "Normal", "Released").await;
    assert!(note.contains(&format!("{NS}/c")), "{note}");
    assert!(
        env.read_live("serverclaims", "c"),
        "confirmed by a live GET of c"
    );
    assert_eq!(
        env.metric("server_binder_releases_total", &[("policy", "Recycle")]),
        1.0
    );
}

/// The same with a user-made R → only the uid goes; the name stays reserved.
#[tokio::test]
async fn server_whose_claim_is_gone_keeps_a_users_reservation() {
    let mut env = Env::new().await;
    env.put_server(
        server("s1")
            .uid_filled_for("c", DELETED_UID)
            .controller_status(ServerPhase::Bound),
    )
    .await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(claim_ref(&s), Some(("c", None)));
    assert!(!has_finalizer(&s));
    env.wait_event(SERVER, "s1", "Normal", "Released").await;
    // A new claim of that name gets it.
    env.put_claim(claim("c")).await;
    wait_bound(&env, "c", "s1").await;
}

/// Retain → Released, R stays, the finalizer goes; no claim can take it.
#[tokio::test]
async fn server_whose_claim_is_gone_is_retained_for_an_admin() {
    let mut env = Env::new().await;
    env.put_server(server("s1").retain().bound_to_deleted("c"))
        .await;
    env.put_claim(claim("next")).await;
    env.start(2).await;

    let s = env
        .wait_server_phase("s1", ServerPhase::Released, "Released")
        .await;
    assert_eq!(claim_ref(&s), Some(("c", Some(DELETED_UID))));
    assert!(!has_finalizer(&s));
    env.wait_event(SERVER, "s1", "Normal", "Released").await;
    assert_eq!(
        env.metric("server_binder_releases_total", &[("policy", "Retain")]),
        1.0
    );
    env.wait_claim_phase("next", ClaimPhase::Pending, "NoMatchingServer")
        .await;
}

/// The claim names S → ensure Bound and the finalizer (here missing: a repair).
#[tokio::test]
async fn bound_server_missing_its_finalizer_gets_it_back() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").bound("s1")).await;
    env.put_server(
        server("s1")
            .reserved_for("c")
            .uid_ref(&ResourceExt::uid(&c).unwrap())
            .by_controller(),
    )
    .await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "server"), ("case", "finalizer")]
        ),
        1.0
    );
}

/// The claim names another server, controller-made R → roll back: R cleared, Available,
/// Normal RolledBack.
#[tokio::test]
async fn server_whose_claim_went_elsewhere_rolls_back() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").names("s2")).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.put_server(server("s2")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s2").await;
    let s1 = env
        .wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;
    assert_eq!(claim_ref(&s1), None);
    assert!(!has_finalizer(&s1) && !has_annotation(&s1, ANNOTATION_BOUND_BY_CONTROLLER));
    env.wait_event(SERVER, "s1", "Normal", "RolledBack").await;
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "server"), ("case", "rolled_back")]
        ),
        1.0
    );
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// The same with a user-made R → the name stays, the uid goes: Available / Reserved.
#[tokio::test]
async fn server_whose_claim_went_elsewhere_keeps_a_users_reservation() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").names("s2")).await;
    env.put_server(
        server("s1")
            .uid_filled_for("c", &ResourceExt::uid(&c).unwrap())
            .controller_status(ServerPhase::Bound),
    )
    .await;
    env.put_server(server("s2")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s2").await;
    let s1 = env
        .wait_server_phase("s1", ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(claim_ref(&s1), Some(("c", None)), "the user's name stays");
    env.wait_event(SERVER, "s1", "Normal", "RolledBack").await;
}
