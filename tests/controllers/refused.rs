//! A claim whose writes the API server refuses (docs/binding.md, "Refused writes"): it
//! backs off, says so on itself, and holds nobody back.

use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use server_binder::api::{ClaimPhase, Server, ServerClaim, ServerClaimSpec};

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// The API server's limit on all of an object's annotations together.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// A claim whose annotations are 20 bytes short of the limit: adding `pre-bound` is
/// refused (422), as an admission webhook of the cluster's own might refuse it.
fn too_big_to_pick(name: &str) -> ServerClaim {
    short_of_the_limit(name, 20)
}

/// A claim whose annotations leave `room` bytes under the limit.
fn short_of_the_limit(name: &str, room: usize) -> ServerClaim {
    let key = "example.com/blob";
    let value = "x".repeat(ANNOTATIONS_LIMIT - key.len() - room);
    let mut claim = ServerClaim::new(name, ServerClaimSpec::default());
    claim.metadata.annotations = Some([(key.to_string(), value)].into());
    claim
}

/// Waits until `bbb` is Bound to `s1`.
async fn bbb_binds_s1(env: &Env) {
    eventually("bbb Bound to s1", DEADLINE, || async {
        let bbb = env.claims().get("bbb").await.expect("bbb");
        let on = bbb.spec.server_ref.as_ref().map(|r| r.name.clone());
        (phase(&bbb) == Some(ClaimPhase::Bound) && on.as_deref() == Some("s1"))
            .then_some(())
            .ok_or(condition(&bbb))
    })
    .await;
}

/// The events of the fixtures' namespace.
async fn events(env: &Env) -> Vec<EventV1> {
    Api::<EventV1>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
}

fn condition(c: &ServerClaim) -> Option<(String, String)> {
    let status = c.status.as_ref()?;
    let bound = status.conditions.iter().find(|c| c.type_ == "Bound")?;
    Some((bound.reason.clone(), bound.message.clone()))
}

/// One free server; `aaa`, the older claim, can never take `pre-bound`; `bbb` can. Before
/// back-off, `aaa` kept its place in the fair order and `bbb` waited beside the free
/// server for good, while `aaa` showed no status at all.
#[tokio::test]
async fn a_claim_whose_pick_is_refused_steps_aside_and_says_why() {
    let mut env = Env::new().await;
    env.create_server("s1", &[]).await;
    let pp = PostParams::default();
    env.claims()
        .create(&pp, &too_big_to_pick("aaa"))
        .await
        .expect("aaa fits the limit");
    env.create_claim("bbb").await;
    let metrics = env.start_with_endpoint(2).await;

    bbb_binds_s1(&env).await;
    let (reason, message) = eventually("aaa says WriteRefused", DEADLINE, || async {
        let aaa = env.claims().get("aaa").await.expect("aaa");
        let said = condition(&aaa).filter(|(reason, _)| reason == "WriteRefused");
        said.ok_or(condition(&aaa))
    })
    .await;
    assert_eq!(reason, "WriteRefused");
    assert!(
        message.contains("PickBestFit") && message.contains("262144"),
        "the message quotes the API server: {message}"
    );
    let aaa = env.claims().get("aaa").await.expect("aaa");
    assert_eq!(phase(&aaa), Some(ClaimPhase::Pending));
    assert!(aaa.spec.server_ref.is_none(), "aaa holds no server");

    let events = events(&env).await;
    let warned = events.iter().any(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("aaa")
            && e.reason.as_deref() == Some("WriteRefused")
            && e.type_.as_deref() == Some("Warning")
    });
    assert!(warned, "a Warning WriteRefused on aaa");
    let (_, exposition) = http_get(metrics, "/metrics").await;
    let refused = exposition
        .lines()
        .find(|l| l.starts_with("server_binder_claim_writes_refused_total{write=\"PickBestFit\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    assert!(refused.is_some_and(|n| n >= 1.0), "counted: {refused:?}");
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);

    let explained = explain_json(&env, "aaa").await;
    assert_eq!(explained["reason"], "WriteRefused", "{explained}");
    assert_eq!(
        explained["decision"], "WriteRefused",
        "explain agrees: {explained}"
    );
    let row = explained["row"].as_str().unwrap_or_default();
    assert!(row.starts_with("backing off"), "{row}");
}

/// Room for `pre-bound` (29 bytes with its value) but not for `bind-completed` too: the
/// pick is let in and the completing write refused. `aaa` gives its server back (its
/// status records it), the server controller frees it, and `bbb` binds it. Before, `aaa`
/// held `s1` for good with no phase.
#[tokio::test]
async fn a_claim_whose_completing_write_is_refused_gives_its_server_back() {
    let mut env = Env::new().await;
    env.create_server("s1", &[]).await;
    env.claims()
        .create(&PostParams::default(), &short_of_the_limit("aaa", 40))
        .await
        .expect("aaa fits the limit");
    env.create_claim("bbb").await;
    env.start(2).await;

    bbb_binds_s1(&env).await;
    let aaa = env.claims().get("aaa").await.expect("aaa");
    let given_back = aaa
        .status
        .as_ref()
        .and_then(|s| s.given_back_server_ref.clone());
    assert_eq!(given_back.map(|r| r.name).as_deref(), Some("s1"), "{aaa:?}");
    // Its condition moves on once its back-off ends (NoMatchingServer: s1 is bbb's now);
    // the Warning stays.
    let events = events(&env).await;
    let gave_back = events.iter().any(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("aaa")
            && e.reason.as_deref() == Some("WriteRefused")
            && e.note
                .as_deref()
                .is_some_and(|n| n.contains("CompleteBind") && n.contains("gave back server s1"))
    });
    assert!(gave_back, "a Warning WriteRefused says aaa gave s1 back");
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// A server whose annotations leave `room` bytes under the limit.
fn server_short_of_the_limit(name: &str, room: usize) -> Server {
    let key = "example.com/blob";
    let mut s = server(name);
    let value = "x".repeat(ANNOTATIONS_LIMIT - key.len() - room);
    s.metadata.annotations = Some([(key.to_string(), value)].into());
    s
}

/// A server whose annotations are at the size limit refuses the server controller's
/// writes (422). A user's claim naming it says so (Pending `ServerWriteRefused`, a
/// Warning quoting the API server) and keeps its ref; a claim the controller picks for
/// passes it over; once an admin trims the server, the claim naming it binds.
#[tokio::test]
async fn a_server_whose_writes_are_refused_is_told_on_the_claim_and_passed_over() {
    let mut env = Env::new().await;
    env.put_server(server_short_of_the_limit("s0", 8)).await;
    env.put_server(server("s1")).await;
    env.start(4).await;
    env.put_claim(claim("named").names("s0")).await;
    let waiting = env
        .wait_claim_phase("named", ClaimPhase::Pending, "ServerWriteRefused")
        .await;
    let message = bound_message(&waiting);
    assert!(
        message.contains("server s0") && message.contains("(422)"),
        "{message}"
    );
    assert!(message.len() < 2048, "bounded: {} bytes", message.len());
    let note = env
        .wait_event("ServerClaim", "named", "Warning", "ServerWriteRefused")
        .await;
    assert!(note.contains("s0"), "{note}");
    assert_eq!(
        waiting.spec.server_ref.map(|r| r.name).as_deref(),
        Some("s0")
    );

    env.put_claim(claim("any")).await;
    wait_bound(&env, "any", "s1").await;

    let trim = json!({"metadata": {"annotations": {"example.com/blob": null}}});
    env.servers()
        .patch("s0", &PatchParams::default(), &Patch::Merge(trim))
        .await
        .expect("s0 trimmed");
    wait_bound(&env, "named", "s0").await;
}
