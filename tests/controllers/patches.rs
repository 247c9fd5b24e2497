//! The controllers write merge patches of what their plans change, never whole objects:
//! a field the operator's types do not know (one a newer CRD added) and another
//! controller's annotations and labels survive a bind and a release, which a PUT of the
//! typed object would have erased.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use server_binder::api::{Server, ServerClaim, ServerPhase};

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// What "another controller" and a newer CRD put on each object.
const OTHER: &str = "other.example.com/owner";

/// Installs a newer version of `crd`: one more string field in `spec` and in `status`,
/// which the operator's Rust types do not have.
async fn add_fields(env: &Env, crd: &str, spec_field: &str, status_field: &str) {
    let crds = Api::<CustomResourceDefinition>::all(env.client.clone());
    let mut newer = serde_json::to_value(crds.get(crd).await.expect("CRD installed")).unwrap();
    let schema = &mut newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    schema["spec"]["properties"][spec_field] = json!({"type": "string"});
    schema["status"]["properties"][status_field] = json!({"type": "string"});
    let newer: CustomResourceDefinition = serde_json::from_value(newer).unwrap();
    crds.replace(crd, &PostParams::default(), &newer)
        .await
        .expect("the newer CRD replaces the old");
}

/// Writes the unknown fields and another controller's metadata onto an object, as raw
/// JSON (the typed client could not send them).
async fn stage_unknown(api: &Api<DynamicObject>, name: &str, spec: Value, status: Value) {
    let pp = PatchParams::default();
    let main = json!({
        "metadata": {"annotations": {OTHER: "them"}, "labels": {OTHER: "them"}},
        "spec": spec,
    });
    api.patch(name, &pp, &Patch::Merge(main))
        .await
        .expect("unknown spec field written");
    api.patch_status(name, &pp, &Patch::Merge(json!({ "status": status })))
        .await
        .expect("unknown status field written");
}

/// Fails unless the object still carries everything [`stage_unknown`] wrote.
async fn assert_kept(api: &Api<DynamicObject>, name: &str, spec: &Value, status: &Value) {
    let raw = api.get(name).await.expect("object read");
    let (annotations, labels) = (raw.metadata.annotations, raw.metadata.labels);
    assert_eq!(annotations.unwrap_or_default()[OTHER], "them", "{name}");
    assert_eq!(labels.unwrap_or_default()[OTHER], "them", "{name}");
    for (part, fields) in [("spec", spec), ("status", status)] {
        for (key, value) in fields.as_object().expect("fields") {
            assert_eq!(&raw.data[part][key], value, "{name}: {part}.{key}");
        }
    }
}

#[tokio::test]
async fn fields_the_operator_does_not_know_survive_a_bind_and_a_release() {
    let mut env = Env::new().await;
    add_fields(&env, "servers.metal.binder.dev", "rackPosition", "health").await;
    add_fields(
        &env,
        "serverclaims.metal.binder.dev",
        "costCenter",
        "billing",
    )
    .await;
    let servers =
        Api::<DynamicObject>::all_with(env.client.clone(), &ApiResource::erase::<Server>(&()));
    let claims = Api::<DynamicObject>::namespaced_with(
        env.client.clone(),
        NS,
        &ApiResource::erase::<ServerClaim>(&()),
    );
    let (s_spec, s_status) = (json!({"rackPosition": "u12"}), json!({"health": "ok"}));
    let (c_spec, c_status) = (json!({"costCenter": "cc-7"}), json!({"billing": "monthly"}));
    env.put_server(server("s1")).await;
    env.put_claim(claim("c")).await;
    stage_unknown(&servers, "s1", s_spec.clone(), s_status.clone()).await;
    stage_unknown(&claims, "c", c_spec.clone(), c_status.clone()).await;
    env.start(2).await;

    // The bind writes both objects and both statuses.
    wait_bound(&env, "c", "s1").await;
    assert_kept(&servers, "s1", &s_spec, &s_status).await;
    assert_kept(&claims, "c", &c_spec, &c_status).await;

    // The release writes the server and its status again, removing the ref.
    env.delete_claim("c").await;
    env.wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;
    assert_kept(&servers, "s1", &s_spec, &s_status).await;
    let raw = servers.get("s1").await.expect("server read");
    assert!(raw.data["spec"].get("serverClaimRef").is_none(), "{raw:?}");
}
