//! Taking a server back with an `Evict` taint, end to end (docs/binding.md,
//! "Eviction"): the notice on the claim, the bind ended at the deadline, the server
//! released through its gates and not bound again while tainted, a cancel, and a
//! restart mid-grace; a disruption budget holding an eviction, and an admin's hard
//! deadline ending the hold.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use server_binder::api::names::{CONDITION_DISRUPTION_TARGET, REASON_EVICTION_HELD_BY_BUDGET};
use server_binder::api::{
    ClaimPhase, Server, ServerClaim, ServerDisruptionBudget, ServerDisruptionBudgetStatus,
    ServerPhase, TaintEffect, Toleration, TolerationOperator,
};

use crate::common::names::NS;
use crate::controllers::stage::*;
use crate::controllers::support::*;

/// The key of the maintenance taint.
const MAINTENANCE: &str = "example.com/maintenance";

/// A toleration of the maintenance taint's `Evict` effect for `seconds`.
fn tolerates_for(mut claim: ServerClaim, seconds: i64) -> ServerClaim {
    claim.spec.tolerations.push(Toleration {
        key: MAINTENANCE.into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: Some(TaintEffect::Evict),
        toleration_seconds: Some(seconds),
    });
    claim
}

/// An admin's write: the server's taints are exactly `taints` (key, effect), with no
/// `timeAdded`, as `kubectl patch` would write them.
async fn set_taints(env: &Env, server: &str, taints: &[(&str, &str)]) {
    let taints: Vec<serde_json::Value> = taints
        .iter()
        .map(|(key, effect)| serde_json::json!({"key": key, "effect": effect}))
        .collect();
    let patch = serde_json::json!({"spec": {"taints": taints}});
    env.servers()
        .patch(server, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the admin's taint");
}

/// The `DisruptionTarget` condition's message, while the claim has one.
fn disruption(c: &ServerClaim) -> Option<&str> {
    let conditions = &c.status.as_ref()?.conditions;
    let found = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET);
    found
        .filter(|c| c.status == "True" && c.reason == "EvictionByTaint")
        .map(|c| c.message.as_str())
}

/// When the server's maintenance taint was added, once the server controller set it.
fn time_added(s: &Server) -> Option<Timestamp> {
    let taint = s.spec.taints.iter().find(|t| t.key == MAINTENANCE)?;
    taint.time_added.as_ref().map(|t| t.0)
}

/// `a` bound to s1 (gated by a wipe), tolerating the maintenance taint for `seconds`;
/// `b`, tolerating nothing, waits.
async fn bound_with_grace(env: &mut Env, seconds: i64) {
    env.start(4).await;
    env.put_server(server("s1").gates(&["example.com/wipe"]))
        .await;
    env.put_claim(tolerates_for(claim("a").names("s1"), seconds))
        .await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.put_claim(claim("b")).await;
    env.wait_claim_phase("b", ClaimPhase::Pending, "NoMatchingServer")
        .await;
}

/// The notice, then the bind ends no earlier than `timeAdded` plus the grace; the server
/// goes through its gates and, still tainted, binds nobody; the evicted claim stays
/// `Lost` / `Evicted` when the taint goes, and the waiting claim gets the server.
#[tokio::test]
async fn an_evict_taint_gives_notice_then_ends_the_bind_through_the_gates() {
    let mut env = Env::new().await;
    bound_with_grace(&mut env, 3).await;
    set_taints(&env, "s1", &[(MAINTENANCE, "Evict")]).await;
    let s1 = env
        .wait_server("s1", "the taint stamped", |s| time_added(s).is_some())
        .await;
    let added = time_added(&s1).expect("timeAdded");
    let a = env
        .wait_claim("a", "DisruptionTarget", |c| disruption(c).is_some())
        .await;
    let notice = disruption(&a).expect("the notice").to_string();
    let deadline = added + SignedDuration::from_secs(3);
    assert!(notice.contains(&deadline.to_string()), "{notice}");
    assert_eq!(
        phase(&a),
        Some(ClaimPhase::Bound),
        "bound until the deadline"
    );
    let warning = env
        .wait_event("ServerClaim", "a", "Warning", "EvictionScheduled")
        .await;
    assert!(warning.contains(MAINTENANCE), "{warning}");

    let a = env.wait_claim_phase("a", ClaimPhase::Lost, "Evicted").await;
    let conditions = a.status.as_ref().map(|s| s.conditions.as_slice());
    let lost = conditions
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == "Bound");
    let lost_at = lost
        .map(|c| c.last_transition_time.0)
        .expect("the condition");
    assert!(
        lost_at >= deadline,
        "lost at {lost_at}, deadline {deadline}: {:?}",
        a.status
    );
    env.wait_event("ServerClaim", "a", "Warning", "ClaimEvicted")
        .await;
    env.wait_server_phase("s1", ServerPhase::Cleaning, "Cleaning")
        .await;
    env.wait_event("Server", "s1", "Normal", "Evicted").await;
    assert_eq!(
        env.metric("server_binder_lost_claims_total", &[("reason", "Evicted")]),
        1.0
    );

    // Wiped, and still tainted: nobody that does not tolerate it for ever binds it.
    super::gates::pass_gate(&env, "s1", "example.com/wipe").await;
    env.wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;
    let b = env.claim("b").await.expect("b");
    assert_eq!(phase(&b), Some(ClaimPhase::Pending));

    // Maintenance over: the waiting claim binds; the evicted one stays as it was.
    set_taints(&env, "s1", &[]).await;
    env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
    let a = env.claim("a").await.expect("a");
    assert!(is(&a, ClaimPhase::Lost, "Evicted"), "{a:?}");
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// A taint removed before the deadline cancels the eviction: the condition goes, a
/// Normal event says so, and the bind stays.
#[tokio::test]
async fn a_taint_removed_before_the_deadline_cancels_the_eviction() {
    let mut env = Env::new().await;
    bound_with_grace(&mut env, 3600).await;
    set_taints(&env, "s1", &[(MAINTENANCE, "Evict")]).await;
    env.wait_claim("a", "DisruptionTarget", |c| disruption(c).is_some())
        .await;
    set_taints(&env, "s1", &[]).await;
    let a = env
        .wait_claim("a", "the condition gone", |c| {
            let conditions = c.status.as_ref().map(|s| s.conditions.as_slice());
            let types = conditions.unwrap_or_default().iter().map(|c| &c.type_);
            !types.into_iter().any(|t| t == CONDITION_DISRUPTION_TARGET)
        })
        .await;
    assert!(is(&a, ClaimPhase::Bound, "Bound"), "{a:?}");
    let note = env
        .wait_event("ServerClaim", "a", "Normal", "EvictionCancelled")
        .await;
    assert!(note.contains("the bind stays"), "{note}");
    env.wait_server_phase("s1", ServerPhase::Bound, "Bound")
        .await;
}

/// The deadline is the taint's, not the process's: a controller stopped mid-grace and
/// started after the deadline ends the bind at once, at the deadline the notice named.
#[tokio::test]
async fn a_restart_mid_grace_keeps_the_deadline() {
    let mut env = Env::new().await;
    bound_with_grace(&mut env, 2).await;
    set_taints(&env, "s1", &[(MAINTENANCE, "Evict")]).await;
    let a = env
        .wait_claim("a", "DisruptionTarget", |c| disruption(c).is_some())
        .await;
    let notice = disruption(&a).expect("the notice").to_string();
    env.stop().await;
    let s1 = env.server("s1").await.expect("s1");
    let deadline = time_added(&s1).expect("stamped") + SignedDuration::from_secs(2);
    wait_for(
        "the clock past the deadline",
        DEADLINE,
        || async { Timestamp::now() },
        |now| *now > deadline,
    )
    .await;
    env.start(4).await;
    let a = env.wait_claim_phase("a", ClaimPhase::Lost, "Evicted").await;
    let message = bound_message(&a);
    assert!(message.contains(&deadline.to_string()), "{message}");
    assert!(notice.contains(&deadline.to_string()), "{notice}");
    env.wait_server_phase("s1", ServerPhase::Cleaning, "Cleaning")
        .await;
}

/// A patch of the server's taints, as an admin writes it.
async fn patch_taints(env: &Env, taints: serde_json::Value) -> kube::Result<Server> {
    let patch = serde_json::json!({"spec": {"taints": taints}});
    env.servers()
        .patch("s1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// An effect changed under an old `timeAdded` would evict at once: admission refuses it
/// and says what to do; without the time, the change goes through and the server
/// controller writes the time of the change.
#[tokio::test]
async fn an_effect_changed_under_an_old_time_added_is_refused() {
    let mut env = Env::new().await;
    env.start(2).await;
    env.put_server(server("s1")).await;
    let old = "2026-01-01T00:00:00Z";
    let taint = |effect: &str| serde_json::json!([{"key": MAINTENANCE, "effect": effect, "timeAdded": old}]);
    patch_taints(&env, taint("NoBind"))
        .await
        .expect("a NoBind taint with its time, as a restore leaves it");
    match patch_taints(&env, taint("Evict")).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains("takes a new timeAdded"), "{e:?}");
        }
        other => panic!("the effect changed under the old time: {other:?}"),
    }
    set_taints(&env, "s1", &[(MAINTENANCE, "Evict")]).await;
    let old: Timestamp = old.parse().expect("a timestamp");
    env.wait_server("s1", "the time of the change", |s| {
        time_added(s).is_some_and(|t| t > old)
    })
    .await;
}

/// `claim` labelled `app=web`, which the budget below covers.
fn web(mut claim: ServerClaim) -> ServerClaim {
    let labels = claim.metadata.labels.get_or_insert_with(Default::default);
    labels.insert("app".into(), "web".into());
    claim
}

/// A tenant's budget over its `app=web` claims.
async fn put_budget(env: &Env, spec: serde_json::Value) {
    let budget: ServerDisruptionBudget = serde_json::from_value(serde_json::json!({
        "apiVersion": "metal.binder.dev/v1alpha1",
        "kind": "ServerDisruptionBudget",
        "metadata": {"name": "web", "namespace": NS},
        "spec": spec,
    }))
    .expect("a budget");
    Api::<ServerDisruptionBudget>::namespaced(env.client.clone(), NS)
        .create(&PostParams::default(), &budget)
        .await
        .expect("the tenant's budget");
}

/// The `DisruptionTarget` condition's reason and message, while the claim has one.
fn disruption_reason(c: &ServerClaim) -> Option<(String, String)> {
    let conditions = &c.status.as_ref()?.conditions;
    let found = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET)?;
    Some((found.reason.clone(), found.message.clone()))
}

fn held(c: &ServerClaim) -> bool {
    disruption_reason(c).is_some_and(|(r, _)| r == REASON_EVICTION_HELD_BY_BUDGET)
}

/// Two `app=web` claims under `maxUnavailable: 1`, both servers tainted at once: one
/// bind ends, the other waits on the budget (its claim and its server say which), until
/// the tenant's replacement is Bound; then it ends too.
#[tokio::test]
async fn a_budget_holds_the_second_eviction_until_a_replacement_is_bound() {
    let mut env = Env::new().await;
    env.start(4).await;
    for s in ["s1", "s2", "s3"] {
        env.put_server(server(s)).await;
    }
    env.put_claim(web(claim("a").names("s1"))).await;
    env.put_claim(web(claim("b").names("s2"))).await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
    put_budget(
        &env,
        serde_json::json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    set_taints(&env, "s1", &[(MAINTENANCE, "Evict")]).await;
    set_taints(&env, "s2", &[(MAINTENANCE, "Evict")]).await;

    // One goes, the other is held.
    let (gone, kept) = loop_until_one_evicted(&env).await;
    let kept_claim = env.wait_claim(kept, "held by the budget", held).await;
    let (_, message) = disruption_reason(&kept_claim).expect("the condition");
    assert!(
        message.contains("disruption budget web (maxUnavailable 1)"),
        "{message}"
    );
    assert_eq!(phase(&kept_claim), Some(ClaimPhase::Bound));
    env.wait_event(
        "ServerClaim",
        kept,
        "Warning",
        REASON_EVICTION_HELD_BY_BUDGET,
    )
    .await;
    let kept_server = if kept == "a" { "s1" } else { "s2" };
    let s = env
        .wait_server(kept_server, "the hold on the server", |s| {
            server_message(s).contains("disruption budget web")
        })
        .await;
    assert_eq!(s.status.and_then(|s| s.phase), Some(ServerPhase::Bound));
    assert_eq!(
        env.metric("server_binder_evictions_total", &[("event", "held")]),
        1.0
    );
    // The budget's status records the eviction it let go ahead, and allows no more.
    let status = wait_budget(&env, "the budget counted", |s| {
        s.expected_claims == 2 && s.current_available == 1
    })
    .await;
    assert_eq!(status.disruptions_allowed, 0, "{status:?}");
    let recorded: Vec<&str> = status
        .disrupted_claims
        .iter()
        .map(|d| d.claim.as_str())
        .collect();
    assert_eq!(recorded, [gone]);

    // The tenant replaces the evicted claim; once it is Bound, the hold ends.
    env.delete_claim(gone).await;
    env.put_claim(web(claim("c"))).await;
    env.wait_claim_phase("c", ClaimPhase::Bound, "Bound").await;
    let ended = env
        .wait_claim_phase(kept, ClaimPhase::Lost, "Evicted")
        .await;
    assert_eq!(
        disruption_reason(&ended),
        None,
        "no hold once the bind ended"
    );
    // The deleted claim's record went (a read said it was gone); the kept one's stays
    // while the evicted claim exists.
    let status = wait_budget(&env, "the gone claim's record dropped", |s| {
        s.disrupted_claims.iter().all(|d| d.claim != gone)
    })
    .await;
    let recorded: Vec<&str> = status
        .disrupted_claims
        .iter()
        .map(|d| d.claim.as_str())
        .collect();
    assert_eq!(recorded, [kept]);
    assert_eq!(
        env.metric("server_binder_evictions_total", &[("event", "completed")]),
        2.0
    );
}

/// Waits until the `web` budget's status satisfies `ok`, and returns it.
async fn wait_budget(
    env: &Env,
    what: &str,
    ok: impl Fn(&ServerDisruptionBudgetStatus) -> bool,
) -> ServerDisruptionBudgetStatus {
    let budgets = Api::<ServerDisruptionBudget>::namespaced(env.client.clone(), NS);
    let read = || {
        let budgets = budgets.clone();
        async move { budgets.get("web").await.ok().and_then(|b| b.status) }
    };
    let status = wait_for(what, DEADLINE, read, |s| s.as_ref().is_some_and(&ok)).await;
    status.expect("a status")
}

/// A budget's record of an eviction counts whatever the cache shows of its claim: the
/// state a new leader finds when the old leader recorded `a`'s eviction and its write
/// has not landed (or not been seen). `b`'s due eviction waits, until `a` moves on
/// without being evicted: then the record goes and `b`'s eviction goes ahead.
#[tokio::test]
async fn a_recorded_eviction_not_yet_seen_holds_the_next_one() {
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1")).await;
    env.put_server(server("s2")).await;
    env.put_claim(web(claim("a").names("s1"))).await;
    env.put_claim(web(claim("b").names("s2"))).await;
    let a = env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
    put_budget(
        &env,
        serde_json::json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )
    .await;
    wait_budget(&env, "the budget counted", |s| s.disruptions_allowed == 1).await;
    // The old leader's record of `a`'s eviction, at `a`'s version.
    let record = serde_json::json!({"status": {"disruptedClaims": [{
        "claim": "a",
        "uid": a.metadata.uid,
        "resourceVersion": a.metadata.resource_version,
        "time": Timestamp::now().to_string(),
    }]}});
    Api::<ServerDisruptionBudget>::namespaced(env.client.clone(), NS)
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&record))
        .await
        .expect("the record");
    let status = wait_budget(&env, "the record counted", |s| s.disruptions_allowed == 0).await;
    assert_eq!(status.current_available, 1, "{status:?}");

    set_taints(&env, "s2", &[(MAINTENANCE, "Evict")]).await;
    let b = env.wait_claim("b", "held by the budget", held).await;
    assert_eq!(phase(&b), Some(ClaimPhase::Bound));
    // `a` is still at the version recorded: the eviction could still land, so the
    // record stays.
    let status = wait_budget(&env, "recounted", |s| s.disruptions_allowed == 0).await;
    assert_eq!(status.disrupted_claims.len(), 1);

    // The tenant relabels `a` (still covered): it moved on, never evicted by that
    // decision; the record goes, and `b`'s eviction goes ahead.
    let patch = serde_json::json!({"metadata": {"labels": {"rack": "r1"}}});
    env.claims()
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the tenant's label");
    env.wait_claim_phase("b", ClaimPhase::Lost, "Evicted").await;
    let a = env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    assert!(disruption_reason(&a).is_none());
    let status = wait_budget(&env, "b's eviction recorded", |s| {
        s.disrupted_claims
            .iter()
            .map(|d| d.claim.as_str())
            .eq(["b"])
    })
    .await;
    assert_eq!(status.disruptions_allowed, 0, "{status:?}");
}

/// Waits until exactly one of `a` and `b` is evicted (the other Bound), and returns
/// (evicted, kept).
async fn loop_until_one_evicted(env: &Env) -> (&'static str, &'static str) {
    let a = env
        .wait_claim("a", "a evicted or held", |c| {
            phase(c) == Some(ClaimPhase::Lost) || held(c)
        })
        .await;
    if phase(&a) == Some(ClaimPhase::Lost) {
        let b = env.wait_claim("b", "b held", held).await;
        assert_eq!(phase(&b), Some(ClaimPhase::Bound));
        ("a", "b")
    } else {
        env.wait_claim_phase("b", ClaimPhase::Lost, "Evicted").await;
        ("b", "a")
    }
}

/// The server's `Bound` condition's message.
fn server_message(s: &Server) -> String {
    let conditions = s.status.as_ref().map(|s| s.conditions.as_slice());
    let bound = conditions
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == "Bound");
    bound.map(|c| c.message.clone()).unwrap_or_default()
}

/// A budget that allows nothing holds the eviction, until the taint's `hardDeadline`:
/// then the bind ends, budget or not.
#[tokio::test]
async fn a_hard_deadline_ends_a_bind_the_budget_holds() {
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1")).await;
    env.put_claim(web(claim("a").names("s1"))).await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    put_budget(&env, serde_json::json!({"minAvailable": "100%"})).await;
    let hard = Timestamp::now() + SignedDuration::from_secs(3);
    let patch = serde_json::json!({"spec": {"taints": [
        {"key": MAINTENANCE, "effect": "Evict", "hardDeadline": hard.to_string()}
    ]}});
    env.servers()
        .patch("s1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the admin's taint");
    let a = env.wait_claim("a", "held by the budget", held).await;
    let (_, message) = disruption_reason(&a).expect("the condition");
    assert!(message.contains("at the latest"), "{message}");
    let a = env.wait_claim_phase("a", ClaimPhase::Lost, "Evicted").await;
    let lost_at = a
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Bound"))
        .map(|c| c.last_transition_time.0)
        .expect("the condition");
    // Conditions carry whole seconds (metav1.Time).
    let hard_second = Timestamp::from_second(hard.as_second()).expect("a time");
    assert!(
        lost_at >= hard_second,
        "lost at {lost_at}, hard deadline {hard}"
    );
}
