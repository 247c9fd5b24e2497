//! Error responses: metav1 Status with the right code and reason for malformed bodies,
//! unknown resources, wrong methods, oversized bodies.

use serde_json::json;
use server_binder::apiserver::Config;

use crate::apiserver::common::*;

#[tokio::test]
async fn malformed_bodies_unknown_paths_and_wrong_methods() {
    let (_s, c) = with_crds().await;
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["apiVersion"], "v1");
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(r.body["reason"], "BadRequest");
    assert_eq!(r.body["code"], 400);

    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/yaml")],
        b"a: [unclosed".to_vec(),
    )
    .await;
    assert_eq!(r.status, 400);

    let r = get_json(&c, "/apis/test.example.dev/v1/sprockets").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["reason"], "NotFound");
    assert_eq!(get_json(&c, "/apis/nope.dev/v1").await.status, 404);
    assert_eq!(
        get_json(&c, "/apis/test.example.dev/v1/widgets/w/scale")
            .await
            .status,
        404
    );

    let r = raw(
        &c,
        "PUT",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.body["reason"], "MethodNotAllowed");

    // A body of the wrong kind.
    let body = json!({"apiVersion": "test.example.dev/v1", "kind": "Gadget", "metadata": {"name": "x"}, "spec": {"color": "x"}});
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        get_json(&c, "/apis/test.example.dev/v1/widgets/x")
            .await
            .status
            == 404,
        "nothing stored"
    );
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let (_s, c) = with_crds_config(Config::default().max_body_bytes(1024)).await;
    let big = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"color": "x".repeat(4096)}});
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        big.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 413);
    assert_eq!(r.body["reason"], "RequestEntityTooLarge");
    assert_eq!(
        get_json(&c, "/apis/test.example.dev/v1/widgets/big")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn the_default_body_limit_is_three_mebibytes() {
    let (_s, c) = with_crds().await;
    let big = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"color": "x".repeat(3 * 1024 * 1024)}});
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        big.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 413);
    let ok = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "ok"}, "spec": {"color": "x".repeat(1024 * 1024)}});
    let r = raw(
        &c,
        "POST",
        "/apis/test.example.dev/v1/widgets",
        &[("content-type", "application/json")],
        ok.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 201);
}
