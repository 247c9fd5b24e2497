//! Admission of custom resources through the schema module: defaults, required, enum,
//! CEL transition rules, unknown fields under each `fieldValidation`.
//!
//! These need the real `apiserver::schema` (the stub admits everything); they are
//! ignored until it lands.

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn defaults_are_applied_and_required_and_enum_are_enforced() {
    let (_s, c) = with_crds().await;
    let w = create_widget(&c, "w", "blue").await;
    assert_eq!(w.data["spec"]["size"], "medium");
    assert_eq!(w.data["spec"]["replicas"], 1);

    let mut missing = widget("m", "x");
    missing.data["spec"] = json!({"size": "small"});
    let e = api_error(widgets(&c).create(&PostParams::default(), &missing).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "Widget.test.example.dev \"m\" is invalid: spec.color: Required value"
    );
    let d = e.details.unwrap();
    assert_eq!(d.kind, "Widget");
    assert_eq!(d.causes[0].reason, "FieldValueRequired");
    assert_eq!(d.causes[0].field, "spec.color");

    let mut bad = widget("b", "x");
    bad.data["spec"]["size"] = json!("huge");
    let e = api_error(widgets(&c).create(&PostParams::default(), &bad).await);
    assert!(
        e.message.contains("spec.size: Unsupported value: \"huge\""),
        "{}",
        e.message
    );
    assert_eq!(
        e.details.unwrap().causes[0].reason,
        "FieldValueNotSupported"
    );
}

#[tokio::test]
async fn a_cel_transition_rule_rejects_switching_the_ref() {
    let (_s, c) = with_crds().await;
    let api = gadgets(&c, "default");
    api.create(&PostParams::default(), &gadget("g", Some("w1")))
        .await
        .unwrap();
    let e = api_error(
        api.patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ref": {"name": "w2"}}})),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "Gadget.test.example.dev \"g\" is invalid: spec: Invalid value: \"object\": ref may be set or cleared but not switched to another widget"
    );
    let cause = &e.details.unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueInvalid", "spec")
    );
    api.patch(
        "g",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"ref": null}})),
    )
    .await
    .unwrap();
    api.patch(
        "g",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"ref": {"name": "w2"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn unknown_fields_follow_field_validation() {
    let (_s, c) = with_crds().await;
    let body = |name: &str| {
        json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"color": "x", "foo": 1}})
            .to_string()
            .into_bytes()
    };
    let ct = [("content-type", "application/json")];
    let strict = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets?fieldValidation=Strict",
        &ct,
        body("s"),
    )
    .await;
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.body["message"],
        "strict decoding error: unknown field \"spec.foo\""
    );
    let warn = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &ct,
        body("w"),
    )
    .await;
    assert_eq!(warn.status, 201);
    assert_eq!(
        warn.headers.get("warning").unwrap(),
        "299 - \"unknown field \\\"spec.foo\\\"\""
    );
    assert!(warn.body["spec"].get("foo").is_none(), "pruned");
    let ignore = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets?fieldValidation=Ignore",
        &ct,
        body("i"),
    )
    .await;
    assert_eq!(ignore.status, 201);
    assert!(ignore.headers.get("warning").is_none());
    assert!(ignore.body["spec"].get("foo").is_none());
}

#[tokio::test]
async fn status_writes_are_validated_too() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let e = api_error(
        widgets(&c)
            .patch_status(
                "w",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"observedGeneration": "one"}})),
            )
            .await,
    );
    assert_eq!(e.code, 422);
}
