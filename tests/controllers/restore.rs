//! A restore from backup (docs/binding.md, "Restore"; docs/operations.md, "Backup and
//! restore"): bound pairs, backed up as `kubectl get -o yaml` lists them, created again
//! in a fresh API server the way Velero does by default (uids, resourceVersions and
//! status dropped; each server keeps `spec.serverClaimRef` with the old claim uid), then
//! the controllers started. Every pair comes back as it was: no server released,
//! cleaned or handed to another claim, no claim re-picks, no quota exceeded.

use std::collections::BTreeMap;

use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use server_binder::api::{
    ClaimPhase, Server, ServerClaim, ServerClass, ServerClassSpec, ServerPhase, ServerQuota,
};
use server_binder::controllers::Options;

use crate::controllers::quotas::{create_gpu_class, create_quota, of_gpu};
use crate::controllers::stage::*;
use crate::controllers::support::*;

const TEAM_B: &str = "team-b";

/// What a backup holds of each kind: the objects as listed.
struct Backup {
    classes: Vec<ServerClass>,
    quotas: Vec<ServerQuota>,
    servers: Vec<Server>,
    claims: Vec<ServerClaim>,
}

/// team-a's `a` and `b` (class gpu, under a quota of 2) and team-b's `c` (class cpu),
/// each bound, with release gates on: the fleet a backup is taken of.
async fn a_bound_fleet(env: &mut Env) -> BTreeMap<(String, String), String> {
    env.create_namespace(TEAM_B).await;
    create_gpu_class(env).await;
    let cpu = ServerClass::new("cpu", ServerClassSpec::default());
    Api::<ServerClass>::all(env.client.clone())
        .create(&PostParams::default(), &cpu)
        .await
        .expect("class cpu");
    create_quota(env, 2).await;
    for i in 0..4 {
        env.put_server(server(&format!("s{i}"))).await;
    }
    env.start_with(gated()).await;
    env.put_claim(of_gpu(claim("a"))).await;
    env.put_claim(of_gpu(claim("b"))).await;
    let mut c = claim("c");
    c.spec.server_class_name = Some("cpu".into());
    create_claim_in(env, TEAM_B, as_new(c)).await;
    all_bound(env, 3).await
}

/// The controllers with a default release gate: a server released by mistake would go
/// `Cleaning`, which the checks below fail on.
fn gated() -> Options {
    Options {
        release_gates: vec!["example.com/wipe".into()],
        ..options(4)
    }
}

/// Waits until `n` claims are Bound, each to a server whose ref carries its uid, failing
/// at once if a server is ever Released or Cleaning; returns (namespace, claim) → server.
async fn all_bound(env: &Env, n: usize) -> BTreeMap<(String, String), String> {
    let pairs = || async {
        let (servers, claims) = env.all().await;
        for s in &servers {
            let phase = s.status.as_ref().and_then(|st| st.phase);
            assert!(
                !matches!(phase, Some(ServerPhase::Released | ServerPhase::Cleaning)),
                "server {} was released: {s:?}",
                s.name_any()
            );
        }
        let bound: BTreeMap<(String, String), String> = claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound))
            .filter_map(|c| {
                let on = server_ref(c)?;
                let s = servers.iter().find(|s| s.name_any() == on)?;
                bound_pair(c, s).then(|| ((c.namespace().unwrap(), c.name_any()), on.into()))
            })
            .collect();
        if bound.len() == n {
            Ok(bound)
        } else {
            Err(bound)
        }
    };
    let what = format!("{n} claims Bound, each to a server holding its uid");
    eventually(&what, DEADLINE, pairs).await
}

async fn list<K>(api: Api<K>) -> Vec<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.list(&Default::default()).await.expect("list").items
}

async fn back_up(env: &Env) -> Backup {
    let client = &env.client;
    Backup {
        classes: list(Api::all(client.clone())).await,
        quotas: list(Api::all(client.clone())).await,
        servers: list(Api::all(client.clone())).await,
        claims: list(Api::all(client.clone())).await,
    }
}

/// The object as Velero restores it by default: no uid, resourceVersion, creation time,
/// managed fields or status (labels, annotations, finalizers and spec kept).
fn stripped<K: Resource + Serialize + DeserializeOwned>(object: &K) -> K {
    let mut value = serde_json::to_value(object).expect("serialize");
    value.as_object_mut().unwrap().remove("status");
    let meta = value["metadata"].as_object_mut().unwrap();
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
    ] {
        meta.remove(field);
    }
    serde_json::from_value(value).expect("deserialize")
}

async fn create_all<K>(api: impl Fn(&K) -> Api<K>, objects: &[K])
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    for object in objects {
        let name = object.meta().name.clone().unwrap_or_default();
        api(object)
            .create(&PostParams::default(), &stripped(object))
            .await
            .unwrap_or_else(|e| panic!("restore {name}: {e}"));
    }
}

/// Restores into a fresh API server, servers before claims (the order that tempts a
/// controller to release them), then starts the controllers.
async fn restored(backup: &Backup) -> Env {
    let mut env = Env::new().await;
    env.create_namespace(TEAM_B).await;
    let client = || env.client.clone();
    create_all(|_| Api::all(client()), &backup.classes).await;
    let in_ns = |q: &ServerQuota| Api::namespaced(client(), &q.namespace().unwrap());
    create_all(in_ns, &backup.quotas).await;
    create_all(|_| Api::all(client()), &backup.servers).await;
    let in_ns = |c: &ServerClaim| Api::namespaced(client(), &c.namespace().unwrap());
    create_all(in_ns, &backup.claims).await;
    env.start_with(gated()).await;
    env
}

/// Every pair comes back as it was, with its status rebuilt and the quota counted.
#[tokio::test]
async fn a_velero_style_restore_brings_every_pair_back_as_it_was() {
    let mut before = Env::new().await;
    let pairs = a_bound_fleet(&mut before).await;
    let backup = back_up(&before).await;
    before.stop().await;
    let after = restored(&backup).await;
    assert_eq!(all_bound(&after, 3).await, pairs);
    let quota = Api::<ServerQuota>::namespaced(after.client.clone(), NS)
        .get("gpu-quota")
        .await
        .expect("quota");
    let status = quota.status.unwrap_or_default();
    assert_eq!(status.summary, "gpu: 2/2", "{status:?}");
}

/// A tenant that deletes a bound claim and re-creates it under the same name, naming the
/// server and now of a class under a full quota (the shape of a restore, made by hand),
/// gets no place past the quota: the claim waits `QuotaExceeded` keeping its `serverRef`,
/// the server stays reserved for it (neither released nor cleaned), and the pair
/// completes once the quota has room.
#[tokio::test]
async fn a_claim_re_created_naming_its_server_waits_for_its_quota_keeping_the_server() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await;
    env.start_with(gated()).await;
    let x = env.create_claim("x").await;
    wait_bound(&env, "x", "s0").await;
    create_gpu_class(&env).await;
    create_quota(&env, 2).await;
    for name in ["s1", "s2"] {
        env.put_server(server(name)).await;
    }
    env.put_claim(of_gpu(claim("a"))).await;
    env.put_claim(of_gpu(claim("b"))).await;
    all_bound(&env, 3).await;

    // With the controllers down, as a restore or a quick script would: x deleted and
    // created again, of class gpu, with its serverRef and annotations copied.
    env.stop().await;
    let held = env.claim("x").await.expect("x");
    env.delete_claim("x").await;
    let mut again = of_gpu(claim("x"));
    again.spec.server_ref = held.spec.server_ref.clone();
    again.metadata.annotations = held.metadata.annotations.clone();
    let again = env.put_claim(again).await;
    assert_ne!(ResourceExt::uid(&again), ResourceExt::uid(&x));
    env.start_with(gated()).await;

    let waiting = env
        .wait_claim_phase("x", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    let message = bound_message(&waiting);
    assert!(
        message.contains("server s0") && message.contains("kept for it"),
        "{message}"
    );
    assert_eq!(
        server_ref(&waiting),
        Some("s0"),
        "the claim keeps its serverRef"
    );
    let quota = Api::<ServerQuota>::namespaced(env.client.clone(), NS);
    let summary = |q: ServerQuota| q.status.unwrap_or_default().summary;
    assert_eq!(
        summary(quota.get("gpu-quota").await.expect("quota")),
        "gpu: 2/2"
    );
    let s0 = env.server("s0").await.expect("s0");
    let kept = s0.spec.server_claim_ref.as_ref().map(|r| r.name.as_str());
    assert_eq!(kept, Some("x"), "s0 stays reserved for x: {s0:?}");
    assert!(!server_is(&s0, ServerPhase::Released, "Released"));

    let mut raised = quota.get("gpu-quota").await.expect("quota");
    raised.spec.hard.insert("gpu".into(), 3);
    quota
        .replace("gpu-quota", &PostParams::default(), &raised)
        .await
        .expect("quota raised");
    wait_bound(&env, "x", "s0").await;
    all_bound(&env, 3).await;
    assert_eq!(
        summary(quota.get("gpu-quota").await.expect("quota")),
        "gpu: 3/3"
    );
}
