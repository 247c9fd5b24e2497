//! Object basics and the read/write verbs: server-set metadata, generation, scopes,
//! namespaces, create/get/list/replace/delete, selectors, pagination, finalizers.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn create_sets_uid_timestamp_generation_and_increasing_resource_versions() {
    let (_s, c) = with_crds().await;
    let a = create_widget(&c, "a", "blue").await;
    let b = create_widget(&c, "b", "red").await;
    assert_eq!(a.metadata.uid.as_deref().map(str::len), Some(36));
    assert_ne!(a.metadata.uid, b.metadata.uid);
    assert!(a.metadata.creation_timestamp.is_some());
    assert_eq!(a.metadata.generation, Some(1));
    assert!(rv(&b) > rv(&a), "resourceVersion is global and increasing");
    let g = gadgets(&c, "default")
        .create(&PostParams::default(), &gadget("g", None))
        .await
        .unwrap();
    assert!(rv(&g) > rv(&b), "one counter across resources");

    let mut generated = widget("", "green");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = widgets(&c)
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn create_conflicts_and_get_misses_are_status_errors() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "dup", "blue").await;
    let e = api_error(
        widgets(&c)
            .create(&PostParams::default(), &widget("dup", "red"))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "widgets.test.example.dev \"dup\" already exists");
    let e = api_error(widgets(&c).get("nope").await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "widgets.test.example.dev \"nope\" not found");
    let d = e.details.as_ref().unwrap();
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("nope", GROUP, "widgets")
    );
    let e = api_error(
        widgets(&c)
            .create(&PostParams::default(), &widget("", "x"))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let e = api_error(
        widgets(&c)
            .create(&PostParams::default(), &widget("Bad_Name", "x"))
            .await,
    );
    assert_eq!(e.code, 422);
}

#[tokio::test]
async fn namespaced_and_cluster_scoped_resources_and_the_initial_namespaces() {
    let (_s, c) = with_crds().await;
    let nss: Vec<String> = Api::<Namespace>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(nss.contains(&"default".to_owned()) && nss.contains(&"kube-system".to_owned()));
    let g = gadgets(&c, "kube-system")
        .create(&PostParams::default(), &gadget("g", None))
        .await
        .unwrap();
    assert_eq!(g.metadata.namespace.as_deref(), Some("kube-system"));
    assert!(api_error(gadgets(&c, "default").get("g").await).code == 404);
    let all: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &gadget_resource());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let e = api_error(
        gadgets(&c, "missing")
            .create(&PostParams::default(), &gadget("g", None))
            .await,
    );
    assert_eq!(e.code, 404);
    assert_eq!(e.message, "namespaces \"missing\" not found");
    let w = create_widget(&c, "w", "blue").await;
    assert_eq!(
        w.metadata.namespace, None,
        "cluster-scoped objects have no namespace"
    );
}

#[tokio::test]
async fn generation_moves_with_spec_only() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "w", "blue").await;
    let pp = PatchParams::default();
    let w = api
        .patch(
            "w",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "metadata changes keep generation"
    );
    let w = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "status changes keep generation"
    );
    let w = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"color": "red"}})))
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(2),
        "spec changes bump generation"
    );
    let before = rv(&w);
    let same = api
        .patch("w", &pp, &Patch::Merge(json!({"spec": {"color": "red"}})))
        .await
        .unwrap();
    assert_eq!(
        rv(&same),
        before,
        "a no-op write changes nothing, not even the resourceVersion"
    );
}

#[tokio::test]
async fn replace_with_a_stale_resource_version_conflicts() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let w = create_widget(&c, "x", "blue").await;
    let mut first = w.clone();
    first.data["spec"]["color"] = json!("red");
    let updated = api
        .replace("x", &PostParams::default(), &first)
        .await
        .unwrap();
    assert!(rv(&updated) > rv(&w));
    let mut stale = w.clone();
    stale.data["spec"]["color"] = json!("green");
    let e = api_error(api.replace("x", &PostParams::default(), &stale).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on widgets.test.example.dev \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let mut unconditional = updated.clone();
    unconditional.metadata.resource_version = None;
    let e = api_error(
        api.replace("x", &PostParams::default(), &unconditional)
            .await,
    );
    assert_eq!(
        e.code, 422,
        "custom resources need a resourceVersion on update"
    );
    let e = api_error(
        api.replace("nope", &PostParams::default(), &widget("nope", "x"))
            .await,
    );
    assert!(e.code == 404 || e.code == 422);
}

#[tokio::test]
async fn list_label_selectors_support_every_operator() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "db", "tier": "back"})),
        ("c", json!({"app": "web"})),
        ("d", json!({})),
    ] {
        let mut w = widget(name, "blue");
        w.metadata.labels = serde_json::from_value(labels).unwrap();
        api.create(&PostParams::default(), &w).await.unwrap();
    }
    let names = |sel: &'static str| {
        let api = api.clone();
        async move {
            let mut n: Vec<String> = api
                .list(&ListParams::default().labels(sel))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            n.sort();
            n.join(",")
        }
    };
    assert_eq!(names("app=web").await, "a,c");
    assert_eq!(names("app==web,tier=front").await, "a");
    assert_eq!(names("app!=web").await, "b,d");
    assert_eq!(names("app in (db, web)").await, "a,b,c");
    assert_eq!(names("app notin (web)").await, "b,d");
    assert_eq!(names("tier").await, "a,b");
    assert_eq!(names("!tier").await, "c,d");
    let e = api_error(api.list(&ListParams::default().labels("app in web")).await);
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn list_field_selectors_on_name_and_namespace() {
    let (_s, c) = with_crds().await;
    for ns in ["default", "kube-system"] {
        for n in ["one", "two"] {
            gadgets(&c, ns)
                .create(&PostParams::default(), &gadget(n, None))
                .await
                .unwrap();
        }
    }
    let all: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &gadget_resource());
    let count = |fs: &'static str| {
        let all = all.clone();
        async move {
            all.list(&ListParams::default().fields(fs))
                .await
                .map(|l| l.items.len())
        }
    };
    assert_eq!(count("metadata.name=one").await.unwrap(), 2);
    assert_eq!(count("metadata.namespace=kube-system").await.unwrap(), 2);
    assert_eq!(
        count("metadata.name=one,metadata.namespace!=default")
            .await
            .unwrap(),
        1
    );
    let e = api_error(count("spec.color=blue").await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "field label not supported: spec.color")
    );
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    for i in 0..7 {
        create_widget(&c, &format!("w{i}"), "blue").await;
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    let list_rv = first.metadata.resource_version.clone().unwrap();
    let mut seen: Vec<String> = first
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    let mut token = first.metadata.continue_.clone();
    // A write between pages does not change the list's resourceVersion.
    create_widget(&c, "zz-late", "red").await;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(list_rv.as_str())
        );
        seen.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.clone();
    }
    let expected: Vec<String> = (0..7)
        .map(|i| format!("w{i}"))
        .chain(["zz-late".into()])
        .collect();
    assert_eq!(seen, expected);
    let whole = api.list(&ListParams::default()).await.unwrap();
    assert!(whole.metadata.continue_.as_deref().unwrap_or("").is_empty());
    assert!(
        whole
            .metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > list_rv.parse::<u64>().unwrap()
    );
}

#[tokio::test]
async fn delete_without_finalizers_is_immediate_and_with_them_waits() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "plain", "blue").await;
    let gone = api.delete("plain", &DeleteParams::default()).await.unwrap();
    assert!(
        gone.is_right(),
        "an object without finalizers is gone at once"
    );
    assert_eq!(api_error(api.get("plain").await).code, 404);

    let mut held = widget("held", "blue");
    held.metadata.finalizers = Some(vec!["test.example.dev/hold".into()]);
    let held = api.create(&PostParams::default(), &held).await.unwrap();
    let mut events = api
        .watch(
            &WatchParams::default(),
            &held.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let pending = api.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = pending
        .left()
        .expect("a pending deletion returns the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    let still = api.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    // No new finalizers on an object being deleted.
    let e = api_error(
        api.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["test.example.dev/hold", "x/y"]}})),
        )
        .await,
    );
    assert_eq!(e.code, 422);
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_error(api.get("held").await).code,
        404,
        "gone once the finalizers are"
    );
    let mut kinds = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        match ev {
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => {
                kinds.push("DELETED");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(kinds, ["MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_preconditions_are_honoured() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let w = create_widget(&c, "p", "blue").await;
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-it".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let e = api_error(api.delete("p", &wrong_uid).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition: not-it"),
        "{}",
        e.message
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_error(api.delete("p", &wrong_rv).await).code, 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: w.metadata.uid.clone(),
            resource_version: w.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    api.delete("p", &right).await.unwrap();
    assert_eq!(api_error(api.get("p").await).code, 404);
}

#[tokio::test]
async fn delete_collection_honours_the_label_selector() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    for (n, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut w = widget(n, "blue");
        w.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
        api.create(&PostParams::default(), &w).await.unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("team=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert_eq!(left, ["c"]);
}
