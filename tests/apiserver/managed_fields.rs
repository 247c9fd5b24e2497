//! managedFields for every write, not only server-side apply: a non-apply write records
//! an `Update` entry for its manager (the `fieldManager` parameter, or the program name
//! of the User-Agent), takes the fields it changed, and a later apply leaves those
//! fields alone (or conflicts with them) as a real server does.

use serde_json::{Value, json};

use crate::apiserver::common::*;

const WIDGETS: &str = "/apis/test.example.dev/v1/widgets";
const MERGE: (&str, &str) = ("content-type", "application/merge-patch+json");
const APPLY: (&str, &str) = ("content-type", "application/apply-patch+yaml");

/// `manager`'s entry for `operation` on the main resource (`subresource: None`) or a
/// subresource.
fn entry_on<'a>(
    obj: &'a Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| {
            e["manager"] == manager
                && e["operation"] == operation
                && e["subresource"].as_str() == subresource
        })
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    entry_on(obj, manager, operation, None)
}

async fn apply(c: &kube::Client, path: &str, manager: &str, yaml: &str) -> Raw {
    raw(
        c,
        "PATCH",
        &format!(
            "{path}{}fieldManager={manager}",
            if path.contains('?') { '&' } else { '?' }
        ),
        &[APPLY],
        yaml.as_bytes().to_vec(),
    )
    .await
}

const BLUE_SMALL: &str = "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  color: blue\n  size: small\n";
const BLUE: &str =
    "apiVersion: test.example.dev/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  color: blue\n";

#[tokio::test]
async fn an_update_manager_owns_what_it_changed_and_a_reapply_leaves_it() {
    let (_s, c) = with_crds().await;
    let path = format!("{WIDGETS}/w");
    assert_eq!(apply(&c, &path, "alice", BLUE_SMALL).await.status, 201);
    let patch = json!({"spec": {"size": "large"}}).to_string();
    let r = raw(
        &c,
        "PATCH",
        &format!("{path}?fieldManager=bob"),
        &[MERGE],
        patch.into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let bob = entry(&r.body, "bob", "Update").expect("bob's Update entry");
    assert_eq!(bob["apiVersion"], "test.example.dev/v1");
    assert_eq!(bob["fieldsType"], "FieldsV1");
    assert_eq!(bob["fieldsV1"], json!({"f:spec": {"f:size": {}}}));
    assert!(bob["time"].as_str().is_some());
    assert!(bob.get("subresource").is_none());
    // Bob took `size` from alice.
    let alice = entry(&r.body, "alice", "Apply").expect("alice's entry");
    assert_eq!(alice["fieldsV1"], json!({"f:spec": {"f:color": {}}}));

    // Alice re-applies without `size`: bob's value stays.
    let r = apply(&c, &path, "alice", BLUE).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["size"], "large", "{}", r.body);
    // Alice applying another size conflicts with bob's Update, unless forced.
    let r = apply(&c, &path, "alice", BLUE_SMALL).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "Apply failed with 1 conflict: conflict with \"bob\" using test.example.dev/v1: .spec.size"
    );
    let r = apply(&c, &format!("{path}?force=true"), "alice", BLUE_SMALL).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["size"], "small");
    assert!(
        entry(&r.body, "bob", "Update").is_none(),
        "bob owned nothing more: {}",
        r.body["metadata"]["managedFields"]
    );
}

#[tokio::test]
async fn the_manager_is_the_field_manager_or_the_user_agents_program() {
    let (_s, c) = with_crds().await;
    let body = json!({"apiVersion": "test.example.dev/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "1"}}, "spec": {"color": "blue"}});
    let r = raw(
        &c,
        "POST",
        WIDGETS,
        &[
            ("content-type", "application/json"),
            ("user-agent", "my-tool/v1.2.3 (linux/amd64) abc"),
        ],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let e = entry(&r.body, "my-tool", "Update").expect("an entry named after the program");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:color": {}, "f:replicas": {}, "f:size": {}}})
    );
    // A write that changes nothing leaves managedFields (and its times) alone.
    let same = json!({"metadata": {"labels": {"a": "1"}}}).to_string();
    let again = raw(
        &c,
        "PATCH",
        &format!("{WIDGETS}/w?fieldManager=other"),
        &[MERGE],
        same.into_bytes(),
    )
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(
        again.body["metadata"]["managedFields"],
        r.body["metadata"]["managedFields"]
    );
    assert_eq!(
        again.body["metadata"]["resourceVersion"],
        r.body["metadata"]["resourceVersion"]
    );

    // Status the server sets on create (a namespace's phase) is nobody's: status is
    // the status subresource's, as the real server's reset fields have it.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
    let r = raw(
        &c,
        "POST",
        "/api/v1/namespaces",
        &[
            ("content-type", "application/json"),
            ("user-agent", "kubectl-create/v1.32.4"),
        ],
        ns.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let e = entry(&r.body, "kubectl-create", "Update").expect("kubectl-create's entry");
    assert!(e["fieldsV1"].get("f:status").is_none(), "{e}");
    assert!(e["fieldsV1"].get("f:metadata").is_some(), "{e}");

    // Status writes are recorded against the status subresource.
    let status = json!({"status": {"phase": "Ready"}}).to_string();
    let r = raw(
        &c,
        "PATCH",
        &format!("{WIDGETS}/w/status?fieldManager=ctrl"),
        &[MERGE],
        status.into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let e = entry_on(&r.body, "ctrl", "Update", Some("status")).expect("the status writer's entry");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
}

/// The scenario with the project's own ServerClaim: the user applies a claim
/// without `serverRef`, the controller (manager `server-binder`) sets it, and the
/// user's unchanged manifest re-applies cleanly, leaving `serverRef` to its manager.
#[tokio::test]
async fn a_claim_reapplied_without_server_ref_keeps_the_controllers_server_ref() {
    let server = start().await;
    install_real_crds(&server).await;
    let c = server.client();
    let claim = "/apis/metal.binder.dev/v1alpha1/namespaces/default/serverclaims/c1";
    let manifest = "apiVersion: metal.binder.dev/v1alpha1\nkind: ServerClaim\nmetadata:\n  name: c1\n  namespace: default\nspec:\n  serverSelector:\n    matchLabels:\n      size: small\n";
    let r = apply(&c, claim, "kubectl", manifest).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let bind = json!({"spec": {"serverRef": {"name": "server-01"}}}).to_string();
    let r = raw(
        &c,
        "PATCH",
        &format!("{claim}?fieldManager=server-binder"),
        &[MERGE],
        bind.into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let status = json!({"status": {"phase": "Bound"}}).to_string();
    let r = raw(
        &c,
        "PATCH",
        &format!("{claim}/status?fieldManager=server-binder"),
        &[MERGE],
        status.into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let owner = entry(&r.body, "server-binder", "Update").expect("the controller's entry");
    assert_eq!(
        owner["fieldsV1"],
        json!({"f:spec": {"f:serverRef": {"f:name": {}}}})
    );

    let r = apply(&c, claim, "kubectl", manifest).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["serverRef"]["name"], "server-01");
    assert_eq!(r.body["status"]["phase"], "Bound");
}
