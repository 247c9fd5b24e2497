//! The four patch types and their preconditions.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn merge_patch_merges_and_nulls_delete() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "m", "blue").await;
    let w = api
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"size": "large"}, "metadata": {"labels": {"a": "1", "b": "2"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            w.data["spec"]["color"].as_str(),
            w.data["spec"]["size"].as_str()
        ),
        (Some("blue"), Some("large"))
    );
    let w = api
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null}}})),
        )
        .await
        .unwrap();
    let labels = w.metadata.labels.unwrap();
    assert!(
        !labels.contains_key("a") && labels.contains_key("b"),
        "{labels:?}"
    );
    assert_eq!(
        api_error(
            api.patch("nope", &PatchParams::default(), &Patch::Merge(json!({})))
                .await
        )
        .code,
        404
    );
}

#[tokio::test]
async fn json_patch_applies_operations_and_test_failures_are_rejected() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "j", "blue").await;
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/color", "value": "blue"},
        {"op": "replace", "path": "/spec/color", "value": "red"},
        {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
    ]))
    .unwrap();
    let w = api
        .patch("j", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["color"], "red");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/color", "value": "blue"}, {"op": "remove", "path": "/spec"}])).unwrap();
    let e = api_error(
        api.patch("j", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await,
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        api.get("j").await.unwrap().data["spec"]["color"],
        "red",
        "nothing half-applied"
    );
}

#[tokio::test]
async fn strategic_merge_is_for_built_ins_only() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "s", "blue").await;
    let e = api_error(
        widgets(&c)
            .patch(
                "s",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"color": "red"}})),
            )
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    let ns: Api<Namespace> = Api::all(c.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "smp", "labels": {"a": "1"}}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let n = ns
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"b": "2", "a": null}, "finalizers": ["x/y"], "$setElementOrder/finalizers": ["x/y"]}})),
        )
        .await
        .unwrap();
    let labels = n.metadata.labels.unwrap();
    assert_eq!(labels.get("b").map(String::as_str), Some("2"));
    assert!(!labels.contains_key("a"));
    assert_eq!(n.metadata.finalizers, Some(vec!["x/y".to_owned()]));
}

#[tokio::test]
async fn server_side_apply_creates_merges_and_detects_conflicts() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let cfg = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {"color": "blue", "size": "small"}});
    let w = api
        .patch("a", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], "small");
    let managers: Vec<String> = w
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["alice"]);
    // Alice stops applying `size`: it goes.
    let cfg2 = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {"color": "blue"}});
    let w = api
        .patch("a", &PatchParams::apply("alice"), &Patch::Apply(&cfg2))
        .await
        .unwrap();
    // (With the schema module the default, "medium", comes back, as on a real server.)
    assert_ne!(w.data["spec"]["size"], "small", "{}", w.data);
    // Bob applying a different color conflicts, unless forced.
    let bob = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {"color": "red"}});
    let e = api_error(
        api.patch("a", &PatchParams::apply("bob"), &Patch::Apply(&bob))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.color"
    );
    let w = api
        .patch("a", &PatchParams::apply("bob").force(), &Patch::Apply(&bob))
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["color"], "red");
    // Apply needs a field manager.
    let e = api_error(
        api.patch("a", &PatchParams::default(), &Patch::Apply(&bob))
            .await,
    );
    assert_eq!(e.code, 422);
}

#[tokio::test]
async fn a_resource_version_in_a_patch_is_a_precondition() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let w = create_widget(&c, "p", "blue").await;
    let stale = json!({"metadata": {"resourceVersion": "1"}, "spec": {"color": "red"}});
    let e = api_error(
        api.patch("p", &PatchParams::default(), &Patch::Merge(&stale))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let fresh = json!({"metadata": {"resourceVersion": w.metadata.resource_version}, "spec": {"color": "red"}});
    let red = api
        .patch("p", &PatchParams::default(), &Patch::Merge(&fresh))
        .await
        .unwrap();
    // The same on /status: the old version conflicts, the current one writes.
    let at = |rv: &Option<String>| json!({"metadata": {"resourceVersion": rv}, "status": {"phase": "Ready"}});
    let e = api_error(
        api.patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&at(&w.metadata.resource_version)),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let ready = api
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&at(&red.metadata.resource_version)),
        )
        .await
        .unwrap();
    assert_eq!(ready.data["status"]["phase"], "Ready");
}

#[tokio::test]
async fn an_unknown_patch_type_is_unsupported_media_type() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "u", "blue").await;
    let r = raw(
        &c,
        "PATCH",
        "/apis/test.example.dev/v1/widgets/u",
        &[("content-type", "application/xml")],
        b"<x/>".to_vec(),
    )
    .await;
    assert_eq!(r.status, 415);
    assert_eq!(r.body["reason"], "UnsupportedMediaType");
    assert_eq!(r.body["kind"], "Status");
}
