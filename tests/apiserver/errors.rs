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

/// A create whose body carries a resourceVersion (an object saved from a read, created
/// again as it was) is refused as kube-apiserver's storage refuses it: 500, no reason,
/// nothing stored. A value that is no resourceVersion ("-1") passes, as it does there.
#[tokio::test]
async fn a_create_carrying_a_resource_version_is_refused_as_kube_apiserver_does() {
    const WIDGETS: &str = "/apis/test.example.dev/v1/widgets";
    let (_s, c) = with_crds().await;
    let widget = |name: &str, rv: &str| {
        json!({
            "apiVersion": "test.example.dev/v1", "kind": "Widget",
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"color": "red"},
        })
    };
    let headers = [("content-type", "application/json")];
    let post =
        |body: serde_json::Value| raw(&c, "POST", WIDGETS, &headers, body.to_string().into_bytes());
    let r = post(widget("saved", "12")).await;
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.body["code"], 500);
    assert_eq!(
        r.body["message"],
        "resourceVersion should not be set on objects to be created"
    );
    assert!(r.body.get("reason").is_none(), "{}", r.body);
    assert_eq!(get_json(&c, &format!("{WIDGETS}/saved")).await.status, 404);
    let r = post(widget("odd", "-1")).await;
    assert_eq!(r.status, 201, "{}", r.body);
}
