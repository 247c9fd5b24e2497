//! The status subresource: `/status` writes only status; main writes ignore status.

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn status_and_main_resource_write_disjoint_parts() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let mut w = widget("s", "blue");
    w.data["status"] = json!({"phase": "Ignored"});
    let w = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(
        w.data.get("status").is_none(),
        "status is dropped on create"
    );

    // PATCH /status: status changes, spec and labels in the same body do not.
    let patched = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"color": "red"}, "metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Ready");
    assert_eq!(patched.data["spec"]["color"], "blue");
    assert!(patched.metadata.labels.is_none());

    // PUT /status with a stale resourceVersion conflicts; with the current one it works.
    let mut stale = patched.clone();
    stale.metadata.resource_version = w.metadata.resource_version.clone();
    stale.data["status"]["phase"] = json!("Stale");
    let e = api_error(
        api.replace_status("s", &PostParams::default(), &stale)
            .await,
    );
    assert_eq!(e.code, 409);
    let mut fresh = patched.clone();
    fresh.data["status"]["phase"] = json!("Done");
    let replaced = api
        .replace_status("s", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["phase"], "Done");

    // GET /status returns the object.
    let got = api.get_status("s").await.unwrap();
    assert_eq!(got.data["status"]["phase"], "Done");

    // Main resource writes ignore status.
    let main = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Hacked"}, "spec": {"color": "green"}})),
        )
        .await
        .unwrap();
    assert_eq!(main.data["status"]["phase"], "Done");
    assert_eq!(main.data["spec"]["color"], "green");

    // Apply on /status.
    let applied = api
        .patch_status(
            "s",
            &PatchParams::apply("status-writer").force(),
            &Patch::Apply(json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "status": {"phase": "Applied"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["phase"], "Applied");
}
