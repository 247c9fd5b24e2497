//! What a tenant reads about a binding: a waiting claim's reasons server by server
//! (docs/binding.md, "Why a claim waits"), written at most once per status interval
//! under server churn; events that name the other object, so describe never names a
//! former tenant; and a bound server being deleted.

use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ListParams};
use server_binder::api::{ClaimPhase, SelectorOperator, ServerClaim};
use server_binder::controllers::Options;

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// The `Bound` condition's message.
fn bound_message(c: &ServerClaim) -> Option<String> {
    let status = c.status.as_ref()?;
    let condition = status.conditions.iter().find(|c| c.type_ == "Bound")?;
    Some(condition.message.clone())
}

fn with_interval(secs: u64) -> Options {
    Options {
        status_interval: Duration::from_secs(secs),
        ..options(4)
    }
}

/// Every server counted once, by its first reason, most servers first.
#[tokio::test]
async fn a_pending_claim_counts_every_server_by_its_first_reason() {
    let mut env = Env::new().await;
    env.start_with(with_interval(1)).await;
    env.stage_mixed_reasons(&["h1", "h2"]).await;

    env.put_claim(claim("c").selects(&[("rack", "r1")])).await;
    let why = "0/6 servers can serve this claim: 2 are held by other claims, \
        1 does not match the selector (rack=r1), 1 has a taint it does not tolerate (gpu), \
        1 is unclaimable, 1 is being deleted.";
    let c = env
        .wait_claim("c", "the summary", |c| {
            bound_message(c).as_deref() == Some(why)
        })
        .await;
    assert_eq!(phase(&c), Some(ClaimPhase::Pending));
    let events = wait_for(
        "a FailedBinding event with the summary",
        DEADLINE,
        || env.events("ServerClaim", "c"),
        |events| {
            events
                .iter()
                .any(|e| e.reason == "FailedBinding" && e.note == why)
        },
    )
    .await;
    assert!(!events.is_empty());
}

/// A tenant's selector of 500 expressions: the condition and the event say which server
/// does not match it, name the requirements that fit and count the rest, and both stay
/// under the API's limits (the event reaches the API server, which refuses a note over
/// 1 KiB).
#[tokio::test]
async fn a_selector_of_500_expressions_is_told_within_the_api_limits() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    let mut c = claim("c");
    for i in 0..500 {
        c = c.expression(&format!("key-{i:03}"), SelectorOperator::In, &["value"]);
    }
    env.put_claim(c).await;
    env.start_with(with_interval(1)).await;
    let c = env
        .wait_claim("c", "a summary of the selector mismatch", |c| {
            bound_message(c).is_some_and(|m| m.contains("does not match the selector"))
        })
        .await;
    let message = bound_message(&c).expect("a message");
    assert!(message.len() <= 32 * 1024, "{} bytes", message.len());
    assert!(
        message.starts_with(
            "0/1 servers can serve this claim: 1 does not match the selector (key-000 in (value),key-001 in (value),"
        ),
        "{message}"
    );
    let more = message
        .split(" and ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" more requirements).").map(str::to_owned))
        .unwrap_or_else(|| panic!("no count of the requirements left out: {message}"));
    let named = message.matches(" in (value)").count();
    assert_eq!(
        more.parse::<usize>().expect("a count"),
        500 - named,
        "{message}"
    );
    let note = env
        .wait_event("ServerClaim", "c", "Normal", "FailedBinding")
        .await;
    assert!(note.len() <= 1024, "{} bytes: {note}", note.len());
    assert_eq!(note, message, "the note is the summary, whole");
}

/// Status writes to `claim`'s `/status` so far.
fn status_writes(env: &Env, claim: &str) -> usize {
    env.apiserver
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| {
            is_controller_write(r)
                && r.resource == "serverclaims"
                && r.subresource == "status"
                && r.name.as_deref() == Some(claim)
        })
        .count()
}

/// Servers come and go every 100 ms; the claim's summary changes with each, but it is
/// written at most once per interval, and still catches up with the last change.
#[tokio::test]
async fn server_churn_costs_at_most_one_status_write_per_interval() {
    const INTERVAL: u64 = 2;
    let mut env = Env::new().await;
    env.start_with(with_interval(INTERVAL)).await;
    env.put_claim(claim("c").selects(&[("rack", "r9")])).await;
    env.wait_claim_phase("c", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let before = status_writes(&env, "c");
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for i in 0..60 {
        tick.tick().await;
        env.put_server(server(&format!("s{i:02}")).labelled(&[("rack", "r1")]))
            .await;
    }
    let why = "0/60 servers can serve this claim: 60 do not match the selector (rack=r9).";
    env.wait_claim("c", "the summary of all 60 servers", |c| {
        bound_message(c).as_deref() == Some(why)
    })
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    let writes = status_writes(&env, "c") - before;
    // One write per interval, plus one for a window cut at either end.
    let most = (elapsed / INTERVAL as f64).ceil() as usize + 1;
    assert!(
        (1..=most).contains(&writes),
        "{writes} status writes in {elapsed:.1} s (at most {most}) for 60 server changes"
    );
}

/// A server claimed by one tenant, released, and claimed by the next: its events name
/// each claim as `related`, and describe shows the new tenant, never the old one's note
/// counted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_names_the_new_tenant_after_a_reclaim() {
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("server-01")).await;
    env.put_claim(claim("any-server").names("server-01")).await;
    env.wait_claim_phase("any-server", ClaimPhase::Bound, "Bound")
        .await;
    env.delete_claim("any-server").await;
    env.wait_server("server-01", "released", |s| {
        s.spec.server_claim_ref.is_none()
    })
    .await;
    env.put_claim(claim("second-tenant").names("server-01"))
        .await;
    env.wait_claim_phase("second-tenant", ClaimPhase::Bound, "Bound")
        .await;

    let events = Api::<EventV1>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    let on_server: Vec<&EventV1> = events
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("server-01"))
        .collect();
    let related = |reason: &str| -> Vec<String> {
        on_server
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.related.as_ref()?.name.clone())
            .collect()
    };
    assert_eq!(related("Claimed"), ["any-server", "second-tenant"]);
    assert_eq!(related("Released"), ["any-server"]);
    for e in &on_server {
        let r = e
            .related
            .as_ref()
            .expect("every server event names its claim");
        assert_eq!(r.kind.as_deref(), Some("ServerClaim"));
        assert_eq!(r.namespace.as_deref(), Some(NS));
        assert!(r.uid.is_some(), "{e:?}");
    }
    let claim_events: Vec<&EventV1> = events
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("second-tenant"))
        .collect();
    assert!(!claim_events.is_empty());
    for e in claim_events {
        let r = e
            .related
            .as_ref()
            .expect("a claim's bind event names its server");
        assert_eq!(
            (r.kind.as_deref(), r.name.as_deref()),
            (Some("Server"), Some("server-01"))
        );
    }

    if !kubectl_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let describe = tokio::task::spawn_blocking(move || {
        kubectl(&kubeconfig, &["describe", "server", "server-01"])
    })
    .await
    .unwrap();
    let claimed: Vec<&str> = describe.lines().filter(|l| l.contains("Claimed")).collect();
    assert_eq!(claimed.len(), 2, "{describe}");
    assert!(claimed[1].contains("second-tenant"), "{describe}");
    assert!(
        claimed.iter().all(|l| !l.contains("(x2")),
        "no series folds two tenants: {describe}"
    );
}

/// A bound server being deleted stays bound (its finalizer keeps it); the claim's
/// condition and a Warning, once, say so.
#[tokio::test]
async fn a_bound_server_being_deleted_is_told_to_its_claim() {
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c").names("s1")).await;
    env.wait_claim_phase("c", ClaimPhase::Bound, "Bound").await;
    env.delete_server("s1").await;
    let note = env
        .wait_event("ServerClaim", "c", "Warning", "ServerDeleting")
        .await;
    assert!(note.contains("server s1 is being deleted"), "{note}");
    let c = env
        .wait_claim("c", "the condition says so", |c| {
            bound_message(c).is_some_and(|m| m.contains("being deleted"))
        })
        .await;
    assert_eq!(phase(&c), Some(ClaimPhase::Bound));
    assert!(env.server("s1").await.is_some(), "the finalizer keeps it");
    env.delete_claim("c").await;
    eventually(
        "the server goes once its claim is gone",
        DEADLINE,
        || async { env.server("s1").await.is_none() },
    )
    .await;
    assert_eq!(
        env.count_events("ServerClaim", "c", "ServerDeleting").await,
        1
    );
}

/// `kubectl get metal` lists both kinds; a bound server being deleted shows
/// `DeletionBlocked` in `kubectl get srv`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_the_metal_category_and_a_deleting_bound_server() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("c").names("s1")).await;
    env.wait_claim_phase("c", ClaimPhase::Bound, "Bound").await;
    env.delete_server("s1").await;
    env.wait_server("s1", "DeletionBlocked", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.conditions.iter().any(|c| c.reason == "DeletionBlocked"))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let (metal, servers) = tokio::task::spawn_blocking(move || {
        (
            kubectl(&kubeconfig, &["get", "metal", "-A"]),
            kubectl(&kubeconfig, &["get", "srv", "-o", "wide"]),
        )
    })
    .await
    .unwrap();
    assert!(metal.contains("server.metal.binder.dev/s1"), "{metal}");
    assert!(metal.contains("serverclaim.metal.binder.dev/c"), "{metal}");
    let header: Vec<&str> = servers.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "STATUS", "CLAIM", "CLASS", "RECLAIM", "REASON", "AGE"
        ],
        "{servers}"
    );
    let row = servers
        .lines()
        .find(|l| l.starts_with("s1"))
        .expect("s1's row");
    assert!(row.contains("Bound,Terminating"), "{servers}");
    assert!(row.contains("DeletionBlocked"), "{servers}");
}
