//! Every row of the claim controller's table (docs/binding.md), end to end:
//! the half-bound state is staged through the API with the controllers stopped, both
//! controllers start, and the test waits for what the row prescribes, then asserts the
//! objects, annotations, finalizer, phase, condition reason, event and metric.
//!
//! Rows whose action is to wait for the other controller ("keep Bound", "wait for the
//! server controller") are checked by what they leave alone and by the state the pair
//! converges to. The confirm-before-Lost row ([a]) is checked by the live GET it makes.

use kube::ResourceExt;
use server_binder::api::names::*;
use server_binder::api::{ClaimPhase, ServerPhase};

use crate::controllers::quotas;
use crate::controllers::stage::*;
use crate::controllers::support::{Env, NS, assert_invariants};

const CLAIM: &str = "ServerClaim";
const SERVER: &str = "Server";

// ---- Bound path: the claim has `bind-completed` ----

/// `serverRef` empty, and the server still holds C's uid → the claim writes its
/// `serverRef` back, Warning ServerRefRestored, Bound ([j]). The server side waits for it
/// (`BoundAwaitingAdoption`): the tenant's machine never goes to the pending claim `d`.
#[tokio::test]
async fn bound_claim_with_its_server_ref_cleared_gets_it_back() {
    let mut env = Env::new().await;
    let c = env
        .put_claim(
            claim("c")
                .bind_completed()
                .pre_bound()
                .controller_status(ClaimPhase::Lost, "ServerRefCleared"),
        )
        .await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.put_claim(claim("d")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    env.wait_event(CLAIM, "c", "Warning", "ServerRefRestored")
        .await;
    env.wait_claim_phase("d", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "claim"), ("case", "claim_ref_restored")]
        ),
        1.0
    );
    assert_eq!(env.count_events(CLAIM, "c", "ClaimLost").await, 0);
}

/// `serverRef` empty, no server holds C → Lost / ServerRefCleared, Warning ClaimLost.
#[tokio::test]
async fn bound_claim_with_its_server_ref_cleared_and_no_server_goes_lost() {
    let mut env = Env::new().await;
    env.put_claim(
        claim("c")
            .bind_completed()
            .pre_bound()
            .controller_status(ClaimPhase::Bound, "Bound"),
    )
    .await;
    env.put_server(server("s1")).await;
    env.start(2).await;

    let c = env
        .wait_claim_phase("c", ClaimPhase::Lost, "ServerRefCleared")
        .await;
    assert!(
        has_annotation(&c, ANNOTATION_BIND_COMPLETED),
        "stays on the bound path"
    );
    env.wait_event(CLAIM, "c", "Warning", "ClaimLost").await;
    assert_eq!(env.count_events(CLAIM, "c", "ClaimMisbound").await, 0);
}

/// S's ref has C's uid, no boundTime (a crash between CompleteBind's two writes, or a
/// wiped status) → status Bound with boundTime, Normal Bound, the bind counted.
#[tokio::test]
async fn bound_claim_without_status_finishes_its_bind() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").chose("s1").bind_completed()).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.start(2).await;

    let (c, _) = wait_bound(&env, "c", "s1").await;
    assert!(
        c.status.as_ref().unwrap().bound_time.is_some(),
        "boundTime set"
    );
    let note = env.wait_event(CLAIM, "c", "Normal", "Bound").await;
    assert_eq!(note, "claim is bound to server s1");
    assert_eq!(env.metric("server_binder_binds_total", &[]), 1.0);
}

/// S's ref has C's uid, boundTime set, status stale → repaired to Bound, "again".
#[tokio::test]
async fn bound_claim_with_a_stale_status_is_repaired() {
    let mut env = Env::new().await;
    let c = env
        .put_claim(
            claim("c")
                .chose("s1")
                .bind_completed()
                .controller_status(ClaimPhase::Lost, "ServerMissing"),
        )
        .await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    let note = env.wait_event(CLAIM, "c", "Normal", "Bound").await;
    assert_eq!(note, "claim is bound to server s1 again");
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "claim"), ("case", "claim_status")]
        ),
        1.0
    );
    assert_eq!(
        env.metric("server_binder_binds_total", &[]),
        0.0,
        "not a new bind"
    );
}

/// S's ref names another claim → Lost / ServerMisbound, Warning ClaimMisbound; the other
/// claim keeps the server.
#[tokio::test]
async fn bound_claim_whose_server_serves_another_claim_is_misbound() {
    let mut env = Env::new().await;
    env.put_claim(claim("c").bound("s1")).await;
    let d = env.put_claim(claim("d").bound("s1")).await;
    env.put_server(server("s1").bound_to(&d)).await;
    env.start(2).await;

    env.wait_claim_phase("c", ClaimPhase::Lost, "ServerMisbound")
        .await;
    let note = env.wait_event(CLAIM, "c", "Warning", "ClaimMisbound").await;
    assert!(note.contains(&format!("{NS}/d")), "{note}");
    assert_eq!(
        env.metric(
            "server_binder_lost_claims_total",
            &[("reason", "ServerMisbound")]
        ),
        1.0
    );
    let (d, s) = wait_bound(&env, "d", "s1").await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
    assert_eq!(claim_ref(&s), Some(("d", ResourceExt::uid(&d).as_deref())));
}

/// S's ref names C's name with another uid (an older incarnation; the Retain server
/// keeps that ref) → Lost / ServerMisbound.
#[tokio::test]
async fn bound_claim_whose_server_names_an_older_incarnation_is_misbound() {
    let mut env = Env::new().await;
    env.put_claim(claim("c").bound("s1")).await;
    env.put_server(server("s1").retain().bound_to_deleted("c"))
        .await;
    env.start(2).await;

    env.wait_claim_phase("c", ClaimPhase::Lost, "ServerMisbound")
        .await;
    env.wait_event(CLAIM, "c", "Warning", "ClaimMisbound").await;
    let s = env
        .wait_server_phase("s1", ServerPhase::Released, "Released")
        .await;
    assert_eq!(
        claim_ref(&s),
        Some(("c", Some(DELETED_UID))),
        "Retain keeps the ref"
    );
}

// ---- Unbound path ----

/// `serverRef` empty, a user reserved a server for C by name → adopt it (pre-bound).
#[tokio::test]
async fn unbound_claim_adopts_a_server_reserved_for_it_by_name() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await; // a better fit by name, not reserved
    env.put_server(server("s1").reserved_for("c")).await;
    env.put_claim(claim("c")).await;
    env.start(2).await;

    let (c, s) = wait_bound(&env, "c", "s1").await;
    assert!(
        has_annotation(&c, ANNOTATION_PRE_BOUND),
        "the adoption is controller-made"
    );
    assert!(
        !has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER),
        "the user's reservation stays user-made"
    );
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "claim"), ("case", "adopted")]
        ),
        1.0
    );
    env.wait_event(CLAIM, "c", "Normal", "Bound").await;
}

/// `serverRef` empty, a server already records C's uid (the crash after the server
/// write, when the claim's own choice was lost) → adopt it.
#[tokio::test]
async fn unbound_claim_adopts_a_server_that_recorded_it_before_a_crash() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await;
    let c = env.put_claim(claim("c")).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    let s0 = env.server("s0").await.unwrap();
    assert_eq!(claim_ref(&s0), None, "no second server taken");
    assert_eq!(
        env.metric(
            "server_binder_repairs_total",
            &[("controller", "claim"), ("case", "adopted")]
        ),
        1.0
    );
}

/// `serverRef` empty, eligible servers → best fit: untainted before tolerated-tainted,
/// then the lowest name; serverRef + pre-bound in one write.
#[tokio::test]
async fn unbound_claim_picks_the_best_fit() {
    let mut env = Env::new().await;
    // s-a is tainted (tolerated), s-0 does not match the selector.
    env.put_server(server("s-a").taint("gpu").labelled(&[("rack", "r1")]))
        .await;
    env.put_server(server("s-c").labelled(&[("rack", "r1")]))
        .await;
    env.put_server(server("s-b").labelled(&[("rack", "r1")]))
        .await;
    env.put_server(server("s-0").labelled(&[("rack", "r2")]))
        .await;
    env.put_claim(claim("c").tolerates("gpu").selects(&[("rack", "r1")]))
        .await;
    env.start(2).await;

    let (c, _) = wait_bound(&env, "c", "s-b").await;
    assert!(has_annotation(&c, ANNOTATION_PRE_BOUND));
    let note = env.wait_event(SERVER, "s-b", "Normal", "Claimed").await;
    assert!(note.contains(&format!("{NS}/c")), "{note}");
    assert_eq!(env.metric("server_binder_rebinds_total", &[]), 0.0);
}

/// The pick passes over a server that another claim naming it would win ([i]): a user's
/// claim names s1, so the claim that picks takes s2 at once, without a withdrawal.
#[tokio::test]
async fn unbound_claim_passes_over_a_server_a_users_claim_names() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("any")).await;
    env.put_claim(claim("mine").names("s1")).await;
    env.start(2).await;

    wait_bound(&env, "any", "s2").await;
    wait_bound(&env, "mine", "s1").await;
    assert_eq!(env.count_events(CLAIM, "any", "Rebinding").await, 0);
    assert_eq!(env.metric("server_binder_rebinds_total", &[]), 0.0);
}

/// `serverRef` empty, nothing eligible → Pending / NoMatchingServer, Normal FailedBinding
/// once; retried when a Server changes.
#[tokio::test]
async fn unbound_claim_with_nothing_eligible_waits_and_binds_when_a_server_fits() {
    let mut env = Env::new().await;
    env.put_server(server("s1").labelled(&[("rack", "r1")]))
        .await;
    env.put_claim(claim("c").selects(&[("rack", "r9")])).await;
    env.start(2).await;

    env.wait_claim_phase("c", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    env.wait_event(CLAIM, "c", "Normal", "FailedBinding").await;

    label(&env, "s1", "rack", "r9").await;
    wait_bound(&env, "c", "s1").await;
    assert_eq!(
        env.count_events(CLAIM, "c", "FailedBinding").await,
        1,
        "said once"
    );
}

/// A user cleared a controller-chosen serverRef and nothing is eligible: the stale
/// `pre-bound` goes, so a ref the user writes later counts as theirs.
#[tokio::test]
async fn unbound_claim_drops_a_stale_pre_bound_annotation() {
    let mut env = Env::new().await;
    env.put_claim(claim("c").pre_bound()).await;
    env.start(2).await;

    let c = env
        .wait_claim_phase("c", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let c = if has_annotation(&c, ANNOTATION_PRE_BOUND) {
        env.wait_claim("c", "pre-bound dropped", |c| {
            !has_annotation(c, ANNOTATION_PRE_BOUND)
        })
        .await
    } else {
        c
    };
    assert_eq!(server_ref(&c), None);
}

/// Controller-chosen, S missing → withdraw (Normal Rebinding), then pick again.
#[tokio::test]
async fn unbound_claim_withdraws_a_chosen_server_that_is_gone() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c").chose("s9")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    let note = env.wait_event(CLAIM, "c", "Normal", "Rebinding").await;
    assert!(note.contains("s9"), "{note}");
    assert_eq!(env.metric("server_binder_rebinds_total", &[]), 1.0);
}

/// User-chosen, S missing → Pending / ServerNotFound, Warning FailedBinding ([g]); binds
/// once the server appears.
#[tokio::test]
async fn unbound_claim_naming_a_missing_server_waits_for_it() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await;
    env.put_claim(claim("c").names("s9")).await;
    env.start(2).await;

    env.wait_claim_phase("c", ClaimPhase::Pending, "ServerNotFound")
        .await;
    let note = env.wait_event(CLAIM, "c", "Warning", "FailedBinding").await;
    assert!(note.contains("s9"), "{note}");
    assert_eq!(
        claim_ref(&env.server("s0").await.unwrap()),
        None,
        "the user's choice stays"
    );

    env.put_server(server("s9")).await;
    let (c, _) = wait_bound(&env, "c", "s9").await;
    assert!(
        !has_annotation(&c, ANNOTATION_PRE_BOUND),
        "still user-chosen"
    );
}

/// S's ref empty, S eligible → wait for the server controller, which completes the bind;
/// the claim never withdraws.
#[tokio::test]
async fn unbound_claim_waits_for_a_free_chosen_server_to_record_it() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c").chose("s1")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s1").await;
    assert_eq!(
        env.count_events(CLAIM, "c", "Rebinding").await,
        0,
        "never withdrew"
    );
    assert_eq!(env.metric("server_binder_rebinds_total", &[]), 0.0);
}

/// S's ref names C without a uid (a reservation), S eligible → wait; the server fills in
/// the uid without marking the ref controller-made.
#[tokio::test]
async fn unbound_claim_naming_its_reserved_server_waits_for_the_uid() {
    let mut env = Env::new().await;
    env.put_server(server("s1").reserved_for("c")).await;
    env.put_claim(claim("c").names("s1")).await;
    env.start(2).await;

    let (c, s) = wait_bound(&env, "c", "s1").await;
    assert!(!has_annotation(&c, ANNOTATION_PRE_BOUND), "user-chosen");
    assert!(
        !has_annotation(&s, ANNOTATION_BOUND_BY_CONTROLLER),
        "user-made"
    );
    let note = env.wait_event(SERVER, "s1", "Normal", "Claimed").await;
    assert!(note.contains("as reserved"), "{note}");
}

/// Controller-chosen, S's ref empty but S not eligible → withdraw (the note says why),
/// pick again.
#[tokio::test]
async fn unbound_claim_withdraws_a_chosen_server_that_became_ineligible() {
    let mut env = Env::new().await;
    env.put_server(server("s1").unclaimable()).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c").chose("s1")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s2").await;
    let note = env.wait_event(CLAIM, "c", "Normal", "Rebinding").await;
    assert!(note.contains("unclaimable"), "{note}");
    let s1 = env.server("s1").await.unwrap();
    assert_eq!(claim_ref(&s1), None);
}

/// User-chosen, S not eligible → Pending / ServerMismatch, Warning ServerMismatch with why.
#[tokio::test]
async fn unbound_claim_naming_an_ineligible_server_reports_the_mismatch() {
    let mut env = Env::new().await;
    env.put_server(server("s1").taint("maintenance")).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c").names("s1")).await;
    env.start(2).await;

    let c = env
        .wait_claim_phase("c", ClaimPhase::Pending, "ServerMismatch")
        .await;
    assert_eq!(server_ref(&c), Some("s1"), "the user's ref stays");
    let note = env
        .wait_event(CLAIM, "c", "Warning", "ServerMismatch")
        .await;
    assert!(note.contains("taint \"maintenance\""), "{note}");
    let s1 = env
        .wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;
    assert_eq!(claim_ref(&s1), None);
    assert_eq!(claim_ref(&env.server("s2").await.unwrap()), None);
}

/// A quota of C's namespace limits its class, is full (it charges `holder`, bound to
/// s1) and does not charge C ([x]) → C's controller-chosen ref to free s2 is withdrawn
/// with `pre-bound`; Pending / QuotaExceeded, Warning QuotaExceeded naming the quota;
/// s2 stays free. End to end under concurrency: `quotas.rs`.
#[tokio::test]
async fn unbound_claim_over_quota_waits_and_gives_up_its_pick() {
    let mut env = Env::new().await;
    quotas::create_gpu_class(&env).await;
    quotas::create_quota(&env, 1).await;
    let holder = env
        .put_claim(quotas::of_gpu(claim("holder").bound("s1")))
        .await;
    env.put_server(server("s1").bound_to(&holder)).await;
    quotas::stage_charges(&env, &[&holder]).await;
    env.put_server(server("s2")).await;
    env.put_claim(quotas::of_gpu(claim("c").chose("s2"))).await;
    env.start(2).await;

    let c = env
        .wait_claim("c", "Pending / QuotaExceeded, its pick withdrawn", |c| {
            is(c, ClaimPhase::Pending, "QuotaExceeded") && server_ref(c).is_none()
        })
        .await;
    assert!(!has_annotation(&c, ANNOTATION_PRE_BOUND), "{c:?}");
    let note = env.wait_event(CLAIM, "c", "Warning", "QuotaExceeded").await;
    let full = format!("{NS} holds 1 of 1 servers of class gpu (ServerQuota gpu-quota)");
    assert!(note.starts_with(&full), "{note}");
    let s2 = env
        .wait_server_phase("s2", ServerPhase::Available, "Available")
        .await;
    assert_eq!(claim_ref(&s2), None);
    wait_bound(&env, "holder", "s1").await;
}

/// S's ref has C's uid → bind-completed, then status Bound with boundTime, Normal Bound.
#[tokio::test]
async fn unbound_claim_whose_server_recorded_it_completes_the_bind() {
    let mut env = Env::new().await;
    let c = env.put_claim(claim("c").chose("s1")).await;
    env.put_server(server("s1").bound_to(&c)).await;
    env.start(2).await;

    let (c, _) = wait_bound(&env, "c", "s1").await;
    assert!(c.status.as_ref().unwrap().bound_time.is_some());
    let note = env.wait_event(CLAIM, "c", "Normal", "Bound").await;
    assert_eq!(note, "claim is bound to server s1");
    assert_eq!(env.metric("server_binder_binds_total", &[]), 1.0);
    assert_eq!(
        env.metric("server_binder_bind_duration_seconds_count", &[]),
        1.0,
        "bind latency observed"
    );
}

/// Controller-chosen, S serves another claim → withdraw, Normal Rebinding, pick again.
#[tokio::test]
async fn unbound_claim_withdraws_a_chosen_server_that_was_taken() {
    let mut env = Env::new().await;
    let d = env.put_claim(claim("d").bound("s1")).await;
    env.put_server(server("s1").bound_to(&d)).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c").chose("s1")).await;
    env.start(2).await;

    wait_bound(&env, "c", "s2").await;
    let note = env.wait_event(CLAIM, "c", "Normal", "Rebinding").await;
    assert!(note.contains(&format!("taken by {NS}/d")), "{note}");
    assert_eq!(env.metric("server_binder_rebinds_total", &[]), 1.0);
    wait_bound(&env, "d", "s1").await;
}

/// User-chosen, S serves another claim → Pending / ServerAlreadyClaimed, Warning
/// FailedBinding; the holder keeps it.
#[tokio::test]
async fn unbound_claim_naming_a_taken_server_waits_with_already_claimed() {
    let mut env = Env::new().await;
    let d = env.put_claim(claim("d").bound("s1")).await;
    env.put_server(server("s1").bound_to(&d)).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("c").names("s1")).await;
    env.start(2).await;

    let c = env
        .wait_claim_phase("c", ClaimPhase::Pending, "ServerAlreadyClaimed")
        .await;
    assert_eq!(server_ref(&c), Some("s1"));
    let note = env.wait_event(CLAIM, "c", "Warning", "FailedBinding").await;
    assert!(
        note.contains(&format!("already claimed by {NS}/d")),
        "{note}"
    );
    wait_bound(&env, "d", "s1").await;
    assert_eq!(claim_ref(&env.server("s2").await.unwrap()), None);
}

async fn label(env: &Env, server: &str, key: &str, value: &str) {
    use kube::api::{Patch, PatchParams};
    env.servers()
        .patch(
            server,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { key: value } } })),
        )
        .await
        .expect("label the server");
}
