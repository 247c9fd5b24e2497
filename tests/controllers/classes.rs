//! Server classes end to end (docs/binding.md, "Server classes"): a claim of a class
//! binds only to the class's servers, a namespace the class does not let in waits with
//! a clear reason, a claim naming a missing class waits for it, and the default class is
//! written into claims without one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use server_binder::api::names::{ANNOTATION_CLEANING_GATES, ANNOTATION_DEFAULT_CLASS};
use server_binder::api::{
    ClaimPhase, ReleaseGate, ServerClaim, ServerClass, ServerClassSpec, ServerPhase,
    ServerSelector, Toleration,
};
use server_binder::controllers::Options;

use crate::controllers::stage::{ClaimExt, ServerExt, claim, server, wait_bound};
use crate::controllers::support::*;

fn selector(pairs: &[(&str, &str)]) -> ServerSelector {
    let match_labels: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ServerSelector {
        match_labels,
        ..ServerSelector::default()
    }
}

/// The class `gpu`: servers labelled `kind=gpu`, their taint `gpu` tolerated.
fn gpu_class() -> ServerClass {
    ServerClass::new(
        "gpu",
        ServerClassSpec {
            server_selector: Some(selector(&[("kind", "gpu")])),
            tolerations: vec![Toleration {
                key: "gpu".into(),
                operator: server_binder::api::TolerationOperator::Exists,
                ..Toleration::default()
            }],
            ..ServerClassSpec::default()
        },
    )
}

async fn create_class(env: &Env, class: ServerClass) {
    Api::<ServerClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class created");
}

fn of_class(name: &str, class: &str) -> ServerClaim {
    let mut c = claim(name);
    c.spec.server_class_name = Some(class.into());
    c
}

/// A claim of `gpu` takes the tainted gpu server, which it does not tolerate itself (the
/// class does), and never the cpu server, which a second claim of the class leaves free.
#[tokio::test]
async fn a_claim_of_a_class_binds_only_to_its_servers() {
    let mut env = Env::new().await;
    env.put_server(server("cpu-1").labelled(&[("kind", "cpu")]))
        .await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    create_class(&env, gpu_class()).await;
    env.start(4).await;
    env.put_claim(of_class("c", "gpu")).await;
    wait_bound(&env, "c", "gpu-1").await;
    env.put_claim(of_class("d", "gpu")).await;
    env.wait_claim_phase("d", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let cpu = env.server("cpu-1").await.expect("cpu-1");
    assert!(cpu.spec.server_claim_ref.is_none(), "{cpu:?}");
}

/// `gpu` lets in only namespaces labelled `gpu=yes`: team-b's claim waits, saying so,
/// until the admin labels team-b; then it binds.
#[tokio::test]
async fn a_namespace_the_class_does_not_let_in_waits_until_it_does() {
    let mut env = Env::new().await;
    env.create_namespace("team-b").await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    let mut gpu = gpu_class();
    gpu.spec.namespace_selector = Some(selector(&[("gpu", "yes")]));
    create_class(&env, gpu).await;
    env.start(4).await;
    let team_b = create_claim_in(&env, "team-b", of_class("c", "gpu")).await;
    eventually("c waits: ClassNotAllowed", DEADLINE, || async {
        let c = team_b.get("c").await.unwrap();
        bound_reason(&c).as_deref() == Some("ClassNotAllowed")
    })
    .await;

    Api::<Namespace>::all(env.client.clone())
        .patch(
            "team-b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"gpu": "yes"}}})),
        )
        .await
        .expect("team-b labelled");
    eventually("c Bound to gpu-1", DEADLINE, || async {
        let c = team_b.get("c").await.unwrap();
        phase(&c) == Some(ClaimPhase::Bound)
            && c.spec
                .server_ref
                .as_ref()
                .is_some_and(|r| r.name == "gpu-1")
    })
    .await;
}

/// A claim naming a class that does not exist waits, saying so, and binds once an admin
/// creates the class.
#[tokio::test]
async fn a_claim_naming_a_missing_class_waits_for_it() {
    let mut env = Env::new().await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    env.start(4).await;
    env.put_claim(of_class("c", "gpu")).await;
    env.wait_claim_phase("c", ClaimPhase::Pending, "ClassNotFound")
        .await;
    env.wait_event("ServerClaim", "c", "Warning", "ClassNotFound")
        .await;
    // explain reads the classes as the controller does, and says the same.
    let explained = explain_json(&env, "c").await;
    assert!(
        explained.to_string().contains("ClassNotFound"),
        "{explained}"
    );
    create_class(&env, gpu_class()).await;
    wait_bound(&env, "c", "gpu-1").await;
}

/// The default class is written into a claim without one, also into a claim created
/// before the class was made the default (as Kubernetes assigns a default
/// StorageClass), and the claim then takes a server of that class only.
#[tokio::test]
async fn the_default_class_is_written_into_claims_without_one() {
    let mut env = Env::new().await;
    env.put_server(server("cpu-1").labelled(&[("kind", "cpu")]))
        .await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    env.start(4).await;
    // No server fits `early` before the default exists: it tolerates no taint and
    // selects the gpu label.
    env.put_claim(claim("early").selects(&[("kind", "gpu")]))
        .await;
    env.wait_claim_phase("early", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let mut gpu = gpu_class();
    gpu.metadata.annotations = Some([(ANNOTATION_DEFAULT_CLASS.to_string(), "true".into())].into());
    create_class(&env, gpu).await;
    let early = env
        .wait_claim("early", "the default class written", |c| {
            c.spec.server_class_name.as_deref() == Some("gpu")
        })
        .await;
    // The class's tolerations narrow nothing the tenant wrote: the claim keeps its own.
    assert!(early.spec.tolerations.is_empty(), "{:?}", early.spec);
    wait_bound(&env, "early", "gpu-1").await;
    env.put_claim(claim("late")).await;
    env.wait_claim("late", "the default class written", |c| {
        c.spec.server_class_name.as_deref() == Some("gpu")
    })
    .await;
    env.wait_claim_phase("late", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let cpu = env.server("cpu-1").await.expect("cpu-1");
    assert!(cpu.spec.server_claim_ref.is_none(), "{cpu:?}");
}

/// A class's release gates: a server of the class that names none of its own, released
/// under `Recycle` from a claim, waits in `Cleaning` for the class's gate, recorded at
/// the release.
#[tokio::test]
async fn a_class_s_release_gates_hold_its_released_servers() {
    let mut env = Env::new().await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    let mut gpu = gpu_class();
    gpu.spec.release_gates = Some(vec![ReleaseGate {
        name: "example.com/gpu-wiped".into(),
    }]);
    create_class(&env, gpu).await;
    env.start(4).await;
    env.put_claim(of_class("c", "gpu")).await;
    wait_bound(&env, "c", "gpu-1").await;
    env.delete_claim("c").await;
    let s = env
        .wait_server_phase("gpu-1", ServerPhase::Cleaning, "Cleaning")
        .await;
    let gates = s.metadata.annotations.unwrap_or_default();
    assert_eq!(
        gates.get(ANNOTATION_CLEANING_GATES).map(String::as_str),
        Some("example.com/gpu-wiped"),
        "the class's gate recorded at the release"
    );
}

/// The gates recorded at the release that `gpu-1` goes `Cleaning` with.
async fn cleaning_gates(env: &Env) -> String {
    let s = env
        .wait_server_phase("gpu-1", ServerPhase::Cleaning, "Cleaning")
        .await;
    let annotations = s.metadata.annotations.unwrap_or_default();
    annotations
        .get(ANNOTATION_CLEANING_GATES)
        .cloned()
        .unwrap_or_default()
}

/// `gpu`, with a release gate, binds `c` to `gpu-1`; then `change` edits or deletes the
/// class so that the server falls outside it, and `c` is deleted. The release waits for
/// the gate the class named when `c` bound (it once went straight to Available,
/// unwiped, to the next tenant).
async fn a_class_changed_mid_bind_keeps_its_gate(change: fn(&Api<ServerClass>) -> Patchwork) {
    let mut env = Env::new().await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    let mut gpu = gpu_class();
    gpu.spec.release_gates = Some(vec![ReleaseGate {
        name: "example.com/class-wipe".into(),
    }]);
    create_class(&env, gpu).await;
    env.start(4).await;
    env.put_claim(of_class("c", "gpu")).await;
    wait_bound(&env, "c", "gpu-1").await;
    change(&Api::all(env.client.clone())).await;
    env.delete_claim("c").await;
    assert_eq!(cleaning_gates(&env).await, "example.com/class-wipe");
}

type Patchwork = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

#[tokio::test]
async fn a_class_narrowed_mid_bind_still_holds_its_released_server() {
    a_class_changed_mid_bind_keeps_its_gate(|classes| {
        let classes = classes.clone();
        Box::pin(async move {
            let patch = json!({"spec": {"serverSelector": {"matchLabels": {"kind": "other"}}}});
            classes
                .patch("gpu", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .expect("class narrowed");
        })
    })
    .await;
}

#[tokio::test]
async fn a_class_deleted_mid_bind_still_holds_its_released_server() {
    a_class_changed_mid_bind_keeps_its_gate(|classes| {
        let classes = classes.clone();
        Box::pin(async move {
            classes
                .delete("gpu", &Default::default())
                .await
                .expect("class deleted");
        })
    })
    .await;
}

/// A class narrowed under a bound claim is not the claim's selector: once the tenant adds
/// a selector of its own that still matches, the `Bound` condition says nothing of a
/// mismatch (it once blamed the tenant's selector for the class's edit).
#[tokio::test]
async fn a_class_narrowed_under_a_bound_claim_is_not_its_selector() {
    let mut env = Env::new().await;
    for name in ["gpu-1", "gpu-2"] {
        env.put_server(server(name).labelled(&[("kind", "gpu")]).taint("gpu"))
            .await;
    }
    create_class(&env, gpu_class()).await;
    env.start(4).await;
    env.put_claim(of_class("c", "gpu").names("gpu-1")).await;
    wait_bound(&env, "c", "gpu-1").await;
    let patch = json!({"spec": {"serverSelector": {"matchLabels": {"kind": "other"}}}});
    Api::<ServerClass>::all(env.client.clone())
        .patch("gpu", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("class narrowed");
    // Seen by the binder once a new claim of the class can no longer take gpu-2.
    env.put_claim(of_class("probe", "gpu")).await;
    env.wait_claim_phase("probe", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    env.add_claim_selector("c", "kind", "gpu").await;
    let c = env
        .wait_claim("c", "its condition for the new generation", |c| {
            let bound = c
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|k| k.type_ == "Bound").cloned());
            bound.is_some_and(|b| b.observed_generation == c.metadata.generation)
        })
        .await;
    assert_eq!(bound_reason(&c).as_deref(), Some("Bound"));
    let conditions = &c.status.as_ref().expect("a status").conditions;
    let bound = conditions.iter().find(|k| k.type_ == "Bound");
    let message = bound.map(|b| b.message.clone()).unwrap_or_default();
    assert!(!message.contains("no longer match"), "{message}");
    assert_eq!(
        env.count_events("ServerClaim", "c", "SelectorMismatch")
            .await,
        0
    );
}

/// A class created over a server already bound to a claim without a class, whose own
/// selector matches: the server shows the class (`status.classes`, the CLASS column),
/// the claim stays Bound, and nothing blames the claim's selector (a Warning
/// `SelectorMismatch` once said a selector had been added to it).
#[tokio::test]
async fn a_class_created_over_a_bound_server_warns_nobody() {
    let mut env = Env::new().await;
    env.put_server(server("lab-01").labelled(&[("kind", "gpu")]))
        .await;
    env.start(4).await;
    env.put_claim(claim("lab").selects(&[("kind", "gpu")]))
        .await;
    wait_bound(&env, "lab", "lab-01").await;
    let mut gpu = gpu_class();
    gpu.spec.tolerations.clear();
    create_class(&env, gpu).await;
    env.wait_server("lab-01", "its status names the class", |s| {
        s.status.as_ref().is_some_and(|s| s.classes == ["gpu"])
    })
    .await;
    // The claim is looked at again with the class known: a relist wakes everything.
    env.put_claim(claim("probe").selects(&[("kind", "gpu")]))
        .await;
    env.wait_claim_phase("probe", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    let c = env.claim("lab").await.expect("lab");
    assert_eq!(bound_reason(&c).as_deref(), Some("Bound"));
    assert_eq!(bound_message(&c), "bound to server lab-01");
    assert_eq!(
        env.count_events("ServerClaim", "lab", "SelectorMismatch")
            .await,
        0
    );
}

/// A server in two classes, `quiet` naming `releaseGates: []` and `gpu` naming none,
/// released from a claim of `gpu` with `--release-gates` set: the class it bound under
/// named none, so the controller's default holds it (it once took `quiet`'s `[]` and
/// went unwiped).
#[tokio::test]
async fn a_class_naming_no_gates_leaves_its_servers_to_the_default() {
    let mut env = Env::new().await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    create_class(&env, gpu_class()).await;
    let mut quiet = gpu_class();
    quiet.metadata.name = Some("quiet".into());
    quiet.spec.release_gates = Some(Vec::new());
    create_class(&env, quiet).await;
    env.start_with(Options {
        release_gates: vec!["example.com/default-wipe".into()],
        ..options(4)
    })
    .await;
    env.put_claim(of_class("c", "gpu")).await;
    wait_bound(&env, "c", "gpu-1").await;
    env.delete_claim("c").await;
    assert_eq!(cleaning_gates(&env).await, "example.com/default-wipe");
}

/// Servers a class takes in are set aside for its claims: without a default class, a
/// claim naming no class takes only servers no class takes in, however its selector and
/// tolerations fit the class's servers, by pick or by name.
#[tokio::test]
async fn a_claim_without_a_class_cannot_take_a_class_s_servers() {
    let mut env = Env::new().await;
    env.put_server(server("gpu-1").labelled(&[("kind", "gpu")]).taint("gpu"))
        .await;
    env.put_server(server("cpu-1").labelled(&[("kind", "cpu")]))
        .await;
    create_class(&env, gpu_class()).await;
    env.start(4).await;
    let picker = claim("picker").selects(&[("kind", "gpu")]).tolerates("gpu");
    env.put_claim(picker).await;
    env.put_claim(claim("namer").names("gpu-1").tolerates("gpu"))
        .await;
    env.wait_claim_phase("picker", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    env.wait_claim_phase("namer", ClaimPhase::Pending, "ServerMismatch")
        .await;
    // An unclassed server still goes to a claim without a class.
    env.put_claim(claim("plain")).await;
    wait_bound(&env, "plain", "cpu-1").await;
    let gpu = env.server("gpu-1").await.expect("gpu-1");
    assert!(gpu.spec.server_claim_ref.is_none(), "{gpu:?}");
    assert!(
        !gpu.metadata
            .labels
            .unwrap_or_default()
            .contains_key(server_binder::binding::world::classes::CLASSED_KEY),
        "the binder's view of a server is never written"
    );
}
