//! A restore from backup (docs/binding.md, "Restore"; docs/operations.md, "Backup and
//! restore"): bound pairs, backed up as `kubectl get -o yaml` lists them, created again
//! in a fresh API server (as Velero does by default: uids, resourceVersions and status
//! dropped, each server keeping `spec.serverClaimRef` with the old claim uid; as
//! `kubectl create` does with what was listed; with the refs stripped to names), servers
//! or claims first, with or without release gates, then the controllers started. Every
//! pair comes back as it was: no server released, cleaned or handed to another claim,
//! no claim re-picks, no quota exceeded. A claim re-created without its server never
//! inherits it; one re-created naming it gets no place past its quota.

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

/// How a backup is created again.
#[derive(Clone, Copy, Debug)]
enum Restore {
    /// As Velero does by default: no uid, resourceVersion, creation time, managed fields,
    /// generation or status (labels, annotations, finalizers and spec kept).
    Velero,
    /// `kubectl get -o yaml`, then `kubectl create -f` with only the resourceVersion
    /// deleted (the API server refuses a create carrying one): the old uid, creation time
    /// and status are sent, and the API server replaces or drops them.
    Kubectl,
    /// As Velero, and the admin strips each server's `claimRef.uid`: references by name.
    RefsByName,
}

/// Which kind is created first.
#[derive(Clone, Copy, Debug)]
enum Order {
    ServersFirst,
    ClaimsFirst,
}

/// The object as `how` creates it again.
fn as_restored<K: Resource + Serialize + DeserializeOwned>(object: &K, how: Restore) -> K {
    let mut value = serde_json::to_value(object).expect("serialize");
    let velero = ["uid", "creationTimestamp", "managedFields", "generation"];
    let dropped: &[&str] = match how {
        Restore::Kubectl => &[],
        Restore::Velero | Restore::RefsByName => {
            value.as_object_mut().unwrap().remove("status");
            &velero
        }
    };
    let meta = value["metadata"].as_object_mut().unwrap();
    for field in dropped.iter().chain(&["resourceVersion"]) {
        meta.remove(*field);
    }
    if let (Restore::RefsByName, Some(r)) = (how, value.pointer_mut("/spec/serverClaimRef")) {
        r.as_object_mut().unwrap().remove("uid");
    }
    serde_json::from_value(value).expect("deserialize")
}

async fn create_all<K>(api: impl Fn(&K) -> Api<K>, objects: &[K], how: Restore)
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    for object in objects {
        let name = object.meta().name.clone().unwrap_or_default();
        api(object)
            .create(&PostParams::default(), &as_restored(object, how))
            .await
            .unwrap_or_else(|e| panic!("restore {name}: {e}"));
    }
}

/// Restores into a fresh API server (classes and quotas, then servers and claims in
/// `order`: servers first tempts a controller to release them), then starts the
/// controllers with `options`.
async fn restored(backup: &Backup, how: Restore, order: Order, options: Options) -> Env {
    let mut env = Env::new().await;
    env.create_namespace(TEAM_B).await;
    let client = || env.client.clone();
    create_all(|_| Api::all(client()), &backup.classes, how).await;
    let in_ns = |q: &ServerQuota| Api::namespaced(client(), &q.namespace().unwrap());
    create_all(in_ns, &backup.quotas, how).await;
    let claims_in_ns = |c: &ServerClaim| Api::namespaced(client(), &c.namespace().unwrap());
    if let Order::ClaimsFirst = order {
        create_all(claims_in_ns, &backup.claims, how).await;
    }
    create_all(|_| Api::all(client()), &backup.servers, how).await;
    if let Order::ServersFirst = order {
        create_all(claims_in_ns, &backup.claims, how).await;
    }
    env.start_with(options).await;
    env
}

/// Backs up the bound fleet, restores it `how`, in `order`, and checks that every pair
/// comes back as it was, with its status rebuilt and the quota counted.
async fn restore_brings_every_pair_back(how: Restore, order: Order, options: Options) {
    let mut before = Env::new().await;
    let pairs = a_bound_fleet(&mut before).await;
    let backup = back_up(&before).await;
    before.stop().await;
    let after = restored(&backup, how, order, options).await;
    assert_eq!(all_bound(&after, 3).await, pairs, "{how:?}, {order:?}");
    let quota = Api::<ServerQuota>::namespaced(after.client.clone(), NS)
        .get("gpu-quota")
        .await
        .expect("quota");
    let status = quota.status.unwrap_or_default();
    assert_eq!(status.summary, "gpu: 2/2", "{status:?}");
}

/// Every pair comes back as it was after a Velero-style restore, servers first.
#[tokio::test]
async fn a_velero_style_restore_brings_every_pair_back_as_it_was() {
    restore_brings_every_pair_back(Restore::Velero, Order::ServersFirst, gated()).await;
}

/// And after `kubectl get -o yaml` created again with `kubectl create`, claims first.
#[tokio::test]
async fn a_kubectl_restore_claims_first_brings_every_pair_back() {
    restore_brings_every_pair_back(Restore::Kubectl, Order::ClaimsFirst, gated()).await;
}

/// And with the servers' refs stripped to names, without release gates.
#[tokio::test]
async fn a_restore_with_refs_by_name_and_no_gates_brings_every_pair_back() {
    let options = Options {
        release_gates: Vec::new(),
        ..options(4)
    };
    restore_brings_every_pair_back(Restore::RefsByName, Order::ServersFirst, options).await;
}

/// A claim re-created by hand after a restore that does not name its server never
/// inherits it: the server is released through its gate (the data on it is the old
/// claim's), and the claim binds as a new claim, to another server.
#[tokio::test]
async fn a_claim_re_created_without_its_server_never_inherits_it() {
    let mut before = Env::new().await;
    let pairs = a_bound_fleet(&mut before).await;
    let mut backup = back_up(&before).await;
    before.stop().await;
    let a = backup
        .claims
        .iter_mut()
        .find(|c| c.name_any() == "a")
        .unwrap();
    *a = of_gpu(claim("a"));
    let after = restored(&backup, Restore::Velero, Order::ServersFirst, gated()).await;
    let old = &pairs[&(NS.to_string(), "a".to_string())];
    after
        .wait_server_phase(old, ServerPhase::Cleaning, "Cleaning")
        .await;
    let a = after
        .wait_claim_phase("a", ClaimPhase::Bound, "Bound")
        .await;
    assert_ne!(server_ref(&a), Some(old.as_str()), "a never inherits {old}");
}

/// With the controllers down, as a restore or a quick script would: `name` deleted and
/// created again naming its server, with its annotations copied, of `class`.
async fn re_create(env: &mut Env, name: &str, class: Option<&str>) {
    env.stop().await;
    let held = env.claim(name).await.expect("the claim");
    env.delete_claim(name).await;
    let mut again = claim(name);
    again.spec.server_class_name = class.map(str::to_string);
    again.spec.server_ref = held.spec.server_ref.clone();
    again.metadata.annotations = held.metadata.annotations.clone();
    let again = env.put_claim(again).await;
    assert_ne!(ResourceExt::uid(&again), ResourceExt::uid(&held));
}

fn summary(q: ServerQuota) -> String {
    q.status.unwrap_or_default().summary
}

/// A tenant that deletes a bound claim of no class and creates it again, of a class,
/// naming the server, does not get it back: the pair does not agree (the bind was of no
/// class), the server is released through its gate (the data on it was left under no
/// class), and the new claim is a new claim of its class, under its quota.
#[tokio::test]
async fn a_claim_re_created_under_another_class_never_inherits_its_server() {
    let mut env = Env::new().await;
    env.put_server(server("s0")).await;
    env.start_with(gated()).await;
    env.create_claim("x").await;
    wait_bound(&env, "x", "s0").await;
    create_gpu_class(&env).await;
    create_quota(&env, 2).await;
    for name in ["s1", "s2"] {
        env.put_server(server(name)).await;
    }
    env.put_claim(of_gpu(claim("a"))).await;
    env.put_claim(of_gpu(claim("b"))).await;
    all_bound(&env, 3).await;

    re_create(&mut env, "x", Some("gpu")).await;
    env.start_with(gated()).await;
    env.wait_server_phase("s0", ServerPhase::Cleaning, "Cleaning")
        .await;
    let x = env
        .wait_claim_phase("x", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    assert_eq!(server_ref(&x), None, "{x:?}");
    let quota = Api::<ServerQuota>::namespaced(env.client.clone(), NS);
    let status = summary(quota.get("gpu-quota").await.expect("quota"));
    assert_eq!(status, "gpu: 2/2");
}

/// A pair brought back (a restore, or the claim deleted and created again as it was)
/// that its quota has no room for (lowered meanwhile) gets no place past it: the claim
/// waits `QuotaExceeded` keeping its `serverRef`, the server stays reserved for it
/// (neither released nor cleaned), and the pair completes once the quota has room.
#[tokio::test]
async fn a_pair_brought_back_over_its_quota_waits_keeping_the_server() {
    let mut env = Env::new().await;
    create_gpu_class(&env).await;
    create_quota(&env, 2).await;
    for name in ["s0", "s1"] {
        env.put_server(server(name)).await;
    }
    env.start_with(gated()).await;
    env.put_claim(of_gpu(claim("a"))).await;
    all_bound(&env, 1).await;
    env.put_claim(of_gpu(claim("x"))).await;
    let pairs = all_bound(&env, 2).await;
    let held = pairs[&(NS.to_string(), "x".to_string())].clone();

    re_create(&mut env, "x", Some("gpu")).await;
    let quota = Api::<ServerQuota>::namespaced(env.client.clone(), NS);
    let set_hard = |hard: i64| {
        let quota = quota.clone();
        async move {
            let mut q = quota.get("gpu-quota").await.expect("quota");
            q.spec.hard.insert("gpu".into(), hard);
            quota
                .replace("gpu-quota", &PostParams::default(), &q)
                .await
                .expect("quota edited");
        }
    };
    set_hard(1).await;
    env.start_with(gated()).await;

    let waiting = env
        .wait_claim_phase("x", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    let message = bound_message(&waiting);
    assert!(
        message.contains(&format!("server {held}")) && message.contains("kept for it"),
        "{message}"
    );
    assert_eq!(
        server_ref(&waiting),
        Some(held.as_str()),
        "it keeps its serverRef"
    );
    let server = env.server(&held).await.expect("the server");
    let kept = server
        .spec
        .server_claim_ref
        .as_ref()
        .map(|r| r.name.as_str());
    assert_eq!(kept, Some("x"), "{held} stays reserved for x: {server:?}");
    assert!(!server_is(&server, ServerPhase::Released, "Released"));
    assert_eq!(
        summary(quota.get("gpu-quota").await.expect("quota")),
        "gpu: 1/1"
    );

    set_hard(2).await;
    wait_bound(&env, "x", &held).await;
    all_bound(&env, 2).await;
    assert_eq!(
        summary(quota.get("gpu-quota").await.expect("quota")),
        "gpu: 2/2"
    );
}
