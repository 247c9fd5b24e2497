//! Object metadata as apimachinery validates and normalises it on every write path:
//! label keys and values, annotation keys and size, empty collections never stored.

use serde_json::{Value, json};

use crate::apiserver::common::*;

const WIDGETS: &str = "/apis/test.example.dev/v1/widgets";
const JSON: (&str, &str) = ("content-type", "application/json");
const MERGE: (&str, &str) = ("content-type", "application/merge-patch+json");
const JSON_PATCH: (&str, &str) = ("content-type", "application/json-patch+json");
const APPLY: (&str, &str) = ("content-type", "application/apply-patch+yaml");

const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn widget_with(meta: Value) -> Value {
    let mut m = json!({"name": "w"});
    if let (Value::Object(base), Value::Object(extra)) = (&mut m, meta) {
        base.extend(extra);
    }
    json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": m, "spec": {"color": "blue"}})
}

async fn post(c: &kube::Client, path: &str, body: &Value) -> Raw {
    raw(c, "POST", path, &[JSON], body.to_string().into_bytes()).await
}

/// A 422 whose causes are all about `field`; returns the cause messages.
fn invalid_causes(r: &Raw, field: &str) -> Vec<String> {
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid", "{}", r.body);
    let causes = r.body["details"]["causes"].as_array().expect("causes");
    assert!(!causes.is_empty());
    causes
        .iter()
        .map(|c| {
            assert_eq!(c["field"], field, "{}", r.body);
            c["message"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn bad_label_keys_and_values_are_invalid_on_create_and_nothing_is_stored() {
    let (_s, c) = with_crds().await;
    let r = post(
        &c,
        WIDGETS,
        &widget_with(json!({"labels": {"bad key!": "x"}})),
    )
    .await;
    let causes = invalid_causes(&r, "metadata.labels");
    assert_eq!(
        causes,
        [format!("Invalid value: \"bad key!\": {NAME_PART}")]
    );
    assert!(
        r.body["message"].as_str().unwrap().starts_with(
            "Widget.test.example.dev \"w\" is invalid: metadata.labels: Invalid value: \"bad key!\""
        ),
        "{}",
        r.body
    );
    assert_eq!(get_json(&c, &format!("{WIDGETS}/w")).await.status, 404);

    let long = "v".repeat(64);
    let r = post(&c, WIDGETS, &widget_with(json!({"labels": {"ok": long}}))).await;
    let causes = invalid_causes(&r, "metadata.labels");
    assert_eq!(
        causes,
        [format!(
            "Invalid value: \"{long}\": must be no more than 63 characters"
        )]
    );
    let r = post(
        &c,
        WIDGETS,
        &widget_with(json!({"labels": {"Bad_Prefix/x": "-v"}})),
    )
    .await;
    let causes = invalid_causes(&r, "metadata.labels");
    assert_eq!(causes.len(), 2, "{causes:?}");
    assert!(
        causes[0].contains("prefix part a lowercase RFC 1123 subdomain"),
        "{causes:?}"
    );
    assert!(
        causes[1].contains(
            "a valid label must be an empty string or consist of alphanumeric characters"
        ),
        "{causes:?}"
    );
    let r = post(
        &c,
        WIDGETS,
        &widget_with(
            json!({"labels": {&format!("{}/x", "a".repeat(254)): "v", &"n".repeat(64): ""}}),
        ),
    )
    .await;
    let causes = invalid_causes(&r, "metadata.labels");
    assert!(
        causes
            .iter()
            .any(|m| m.ends_with("prefix part must be no more than 253 characters"))
            && causes
                .iter()
                .any(|m| m.ends_with("name part must be no more than 63 characters")),
        "{causes:?}"
    );
    assert_eq!(
        get_json(&c, WIDGETS).await.body["items"],
        json!([]),
        "nothing was stored"
    );

    // Valid: a prefixed key, a 63-character name part, an empty value.
    let good = json!({"example.com/My_Name-1.x": "", &"n".repeat(63): "v.1_2-3"});
    let r = post(&c, WIDGETS, &widget_with(json!({"labels": good}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn bad_labels_are_invalid_on_every_update_path_and_for_built_ins() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let path = format!("{WIDGETS}/w");
    let merge = json!({"metadata": {"labels": {"bad key!": "x"}}}).to_string();
    let r = raw(&c, "PATCH", &path, &[MERGE], merge.into_bytes()).await;
    invalid_causes(&r, "metadata.labels");
    let jp = json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "-"}}]).to_string();
    let r = raw(&c, "PATCH", &path, &[JSON_PATCH], jp.into_bytes()).await;
    invalid_causes(&r, "metadata.labels");
    let apply = "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  labels:\n    'a/b/c': x\nspec:\n  color: blue\n";
    let r = raw(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=m"),
        &[APPLY],
        apply.as_bytes().to_vec(),
    )
    .await;
    invalid_causes(&r, "metadata.labels");
    let mut current = get_json(&c, &path).await.body;
    current["metadata"]["labels"] = json!({"x": "bad value!"});
    let r = raw(&c, "PUT", &path, &[JSON], current.to_string().into_bytes()).await;
    invalid_causes(&r, "metadata.labels");
    let stored = get_json(&c, &path).await.body;
    assert!(stored["metadata"].get("labels").is_none(), "{stored}");

    // A built-in kind is validated the same way.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x", "labels": {"bad key!": "x"}}});
    let r = post(&c, "/api/v1/namespaces", &ns).await;
    invalid_causes(&r, "metadata.labels");
    assert_eq!(get_json(&c, "/api/v1/namespaces/team-x").await.status, 404);
}

#[tokio::test]
async fn annotation_keys_and_total_size_are_validated() {
    let (_s, c) = with_crds().await;
    let r = post(
        &c,
        WIDGETS,
        &widget_with(json!({"annotations": {"bad key!": "anything goes in a value"}})),
    )
    .await;
    let causes = invalid_causes(&r, "metadata.annotations");
    assert_eq!(
        causes,
        [format!("Invalid value: \"bad key!\": {NAME_PART}")]
    );
    // Case does not matter in annotation keys.
    let r = post(
        &c,
        WIDGETS,
        &widget_with(json!({"annotations": {"Example.COM/Key": "v"}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let big = "x".repeat(256 * 1024);
    let r = raw(
        &c,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &[MERGE],
        json!({"metadata": {"annotations": {"big": big}}})
            .to_string()
            .into_bytes(),
    )
    .await;
    let causes = invalid_causes(&r, "metadata.annotations");
    assert_eq!(causes, ["Too long: may not be more than 262144 bytes"]);
}

#[tokio::test]
async fn empty_metadata_collections_are_never_stored_or_returned() {
    let (_s, c) = with_crds().await;
    let empty = json!({"finalizers": [], "labels": {}, "annotations": {}, "ownerReferences": []});
    let assert_clean = |what: &str, obj: &Value| {
        for k in ["finalizers", "labels", "annotations", "ownerReferences"] {
            assert!(
                obj["metadata"].get(k).is_none(),
                "{what}: {k} in {}",
                obj["metadata"]
            );
        }
    };
    let r = post(&c, WIDGETS, &widget_with(empty.clone())).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_clean("create response", &r.body);
    assert_clean("get", &get_json(&c, &format!("{WIDGETS}/w")).await.body);

    // Removing the last label or finalizer leaves no empty collection behind.
    let path = format!("{WIDGETS}/w");
    let add = json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x.dev/f"]}});
    let r = raw(&c, "PATCH", &path, &[MERGE], add.to_string().into_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let remove = json!([
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]);
    let r = raw(
        &c,
        "PATCH",
        &path,
        &[JSON_PATCH],
        remove.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_clean("json patch", &r.body);

    // The same through a PUT, an apply and a built-in kind.
    let mut current = r.body.clone();
    current["metadata"]["annotations"] = json!({});
    current["metadata"]["labels"] = json!({});
    let r = raw(&c, "PUT", &path, &[JSON], current.to_string().into_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_clean("put", &r.body);
    let apply = "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w2\n  annotations: {}\n  finalizers: []\nspec:\n  color: blue\n";
    let r = raw(
        &c,
        "PATCH",
        &format!("{WIDGETS}/w2?fieldManager=m"),
        &[APPLY],
        apply.as_bytes().to_vec(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_clean("apply", &r.body);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x", "annotations": {}, "finalizers": []}});
    let r = post(&c, "/api/v1/namespaces", &ns).await;
    assert_eq!(r.status, 201, "{}", r.body);
    for k in ["annotations", "finalizers"] {
        assert!(r.body["metadata"].get(k).is_none(), "namespace: {k}");
    }
}
