//! CRDs: full CRUD on the CRD objects, serving starts and stops with them, discovery.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn installing_a_crd_serves_it_at_once_and_deleting_it_stops_serving() {
    let server = start().await;
    let c = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    assert_eq!(
        api_error(widgets(&c).list(&Default::default()).await).code,
        404
    );
    let made = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let conditions = made.status.unwrap().conditions.unwrap();
    for ty in ["Established", "NamesAccepted"] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == ty && c.status == "True"),
            "{ty} is True"
        );
    }
    create_widget(&c, "w", "blue").await;
    assert_eq!(
        widgets(&c)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let listed = crds.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let got = crds.get("widgets.test.example.dev").await.unwrap();
    assert_eq!(got.metadata.generation, Some(1));

    crds.delete("widgets.test.example.dev", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        api_error(widgets(&c).list(&Default::default()).await).code,
        404
    );
    // Re-installing starts from empty.
    server.install_crd(&widget_crd()).await.unwrap();
    assert!(
        widgets(&c)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn a_crd_with_a_bad_name_is_invalid() {
    let server = start().await;
    let mut bad = widget_crd();
    bad.metadata.name = Some("wrong.test.example.dev".into());
    let e = api_error(
        Api::<CustomResourceDefinition>::all(server.client())
            .create(&PostParams::default(), &bad)
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("must be spec.names.plural+\".\"+spec.group"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn discovery_lists_groups_resources_verbs_and_names() {
    let (_s, c) = with_crds().await;
    let discovery = Discovery::new(c.clone()).run().await.unwrap();
    let group = discovery
        .groups()
        .find(|g| g.name() == GROUP)
        .expect("the test group");
    let (widget, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.kind == "Widget")
        .unwrap();
    assert_eq!(widget.plural, "widgets");
    assert_eq!(caps.scope, Scope::Cluster);
    assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
    assert!(caps.subresources.iter().any(|(r, _)| r.plural == "status"));

    let list = get_json(&c, "/apis/test.example.dev/v1").await.body;
    let resources = list["resources"].as_array().unwrap();
    let w = resources.iter().find(|r| r["name"] == "widgets").unwrap();
    assert_eq!(w["singularName"], "widget");
    assert_eq!(w["namespaced"], false);
    assert_eq!(w["shortNames"], json!(["wg"]));
    assert_eq!(w["categories"], json!(["testing"]));
    assert!(resources.iter().any(|r| r["name"] == "widgets/status"));
    let g = resources.iter().find(|r| r["name"] == "gadgets").unwrap();
    assert_eq!(g["namespaced"], true);

    let core = get_json(&c, "/api/v1").await.body;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"namespaces") && names.contains(&"events"));
    assert_eq!(get_json(&c, "/api").await.body["versions"], json!(["v1"]));
    let groups = get_json(&c, "/apis").await.body;
    let gnames: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for g in [
        "events.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        GROUP,
    ] {
        assert!(gnames.contains(&g), "{g} in {gnames:?}");
    }
    let version = c.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

/// The project's real CRDs (manifests/crds/, from main) install and serve.
#[tokio::test]
async fn the_real_metal_binder_crds_install_and_serve() {
    let server = start().await;
    let docs = install_real_crds(&server).await;
    assert_eq!(docs.len(), 5);
    let c = server.client();
    let ar = |kind: &str, plural: &str| {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("metal.binder.dev", "v1alpha1", kind),
            plural,
        )
    };
    let servers: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &ar("Server", "servers"));
    let claims: Api<kube::api::DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &ar("ServerClaim", "serverclaims"));
    assert!(
        servers
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        claims
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let list = get_json(&c, "/apis/metal.binder.dev/v1alpha1").await.body;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "servers",
        "servers/status",
        "serverclaims",
        "serverclaims/status",
        "serverquotas",
        "serverquotas/status",
    ] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
}

/// As apiextensions does: deleting a CRD marks it (deletionTimestamp, the
/// `customresourcecleanup` finalizer, a Terminating condition), deletes its custom
/// resources, refuses new ones, and removes the CRD only once the last instance is gone
/// (here, once a finalizer on it is removed). Watchers see every DELETED.
#[tokio::test]
async fn deleting_a_crd_waits_for_its_instances_finalizers() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};

    let (_s, c) = with_crds().await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let api = widgets(&c);
    let mut held = widget("held", "blue");
    held.metadata.finalizers = Some(vec!["test.example.dev/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    create_widget(&c, "free", "red").await;
    let mut widget_events = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut crd_events = crds
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    let deleted = crds
        .delete("widgets.test.example.dev", &DeleteParams::default())
        .await
        .unwrap();
    let pending = deleted.left().expect("the CRD waits on its instances");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let crd = crds.get("widgets.test.example.dev").await.unwrap();
    assert_eq!(
        crd.metadata.finalizers,
        Some(vec![
            "customresourcecleanup.apiextensions.k8s.io".to_owned()
        ])
    );
    let conditions = crd.status.unwrap().conditions.unwrap();
    let terminating = conditions
        .iter()
        .find(|c| c.type_ == "Terminating")
        .expect("a Terminating condition");
    assert_eq!(terminating.status, "True");
    assert_eq!(
        terminating.reason.as_deref(),
        Some("InstanceDeletionInProgress")
    );
    // The free widget is gone, the held one is being deleted; no new ones meanwhile.
    assert_eq!(api_error(api.get("free").await).code, 404);
    let still = api.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    let e = api_error(
        api.create(&PostParams::default(), &widget("new", "green"))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (405, "MethodNotAllowed"));
    assert_eq!(
        e.message,
        "create not allowed while custom resource definition is terminating"
    );
    // Releasing the last instance finishes the CRD's deletion.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the CRD to go", std::time::Duration::from_secs(5), || {
        let crds = crds.clone();
        async move {
            matches!(crds.get("widgets.test.example.dev").await, Err(kube::Error::Api(s)) if s.code == 404)
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        api_error(api.list(&Default::default()).await).code,
        404,
        "no longer served"
    );

    let mut seen = Vec::new();
    while let Ok(Some(Ok(e))) =
        tokio::time::timeout(std::time::Duration::from_secs(5), widget_events.try_next())
            .await
            .map(|r| r.transpose())
    {
        if let WatchEvent::Deleted(o) = e {
            seen.push(o.metadata.name.unwrap());
        }
    }
    seen.sort();
    assert_eq!(seen, ["free", "held"], "the widget watch saw both go");
    let crd_gone = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), crd_events.try_next())
            .await
            .expect("a CRD event within 5s")
            .expect("no stream error")
            .expect("the stream goes on");
        if let WatchEvent::Deleted(o) = e {
            break o;
        }
    };
    assert_eq!(
        crd_gone.metadata.name.as_deref(),
        Some("widgets.test.example.dev")
    );
    assert!(crd_gone.metadata.finalizers.unwrap_or_default().is_empty());
}
