//! Built-in kinds: Events through both APIs over one store, Leases (and leader
//! election on them), Namespaces.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, ObjectReference};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube_lease_manager::LeaseManagerBuilder;
use serde_json::json;

use crate::apiserver::common::*;

#[tokio::test]
async fn events_are_stored_once_and_served_through_both_apis() {
    let (_s, c) = with_crds().await;
    let w = create_widget(&c, "w", "blue").await;
    let v1: Api<EventV1> = Api::namespaced(c.clone(), "default");
    let made = v1
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "w.1"},
                "regarding": {"apiVersion": "test.example.dev/v1", "kind": "Widget", "name": "w", "uid": w.metadata.uid},
                "related": {"kind": "Gadget", "name": "g"},
                "note": "painted", "reason": "Painted", "type": "Normal", "action": "Paint",
                "reportingController": "painter", "reportingInstance": "painter-0",
                "eventTime": "2025-01-01T00:00:00.000000Z",
                "series": {"count": 2, "lastObservedTime": "2025-01-01T00:01:00.000000Z"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(made.note.as_deref(), Some("painted"));
    let core: Api<CoreEvent> = Api::namespaced(c.clone(), "default");
    let e = core.get("w.1").await.unwrap();
    assert_eq!(e.involved_object.name.as_deref(), Some("w"));
    assert_eq!(e.message.as_deref(), Some("painted"));
    assert_eq!(e.reporting_component.as_deref(), Some("painter"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("painter")
    );
    assert_eq!(e.count, Some(2));
    assert_eq!(
        e.related.as_ref().and_then(|r| r.name.as_deref()),
        Some("g")
    );
    assert!(e.first_timestamp.is_some() && e.last_timestamp.is_some());
    assert_eq!(
        e.metadata.resource_version, made.metadata.resource_version,
        "one object"
    );

    // A core/v1 write is seen through events.k8s.io.
    core.patch(
        "w.1",
        &PatchParams::default(),
        &Patch::Merge(json!({"message": "repainted"})),
    )
    .await
    .unwrap();
    assert_eq!(
        v1.get("w.1").await.unwrap().note.as_deref(),
        Some("repainted")
    );

    // kubectl describe's field selector.
    let sel = format!(
        "involvedObject.name=w,involvedObject.namespace=,involvedObject.kind=Widget,involvedObject.uid={}",
        w.metadata.uid.clone().unwrap()
    );
    let all: Api<CoreEvent> = Api::all(c.clone());
    assert_eq!(
        all.list(&ListParams::default().fields(&sel))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert!(
        all.list(&ListParams::default().fields("involvedObject.name=other"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        v1.list(&ListParams::default().fields("regarding.name=w"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn kubes_recorder_publishes_and_aggregates_events() {
    let (_s, c) = with_crds().await;
    let g = gadgets(&c, "default")
        .create(&PostParams::default(), &gadget("g", None))
        .await
        .unwrap();
    let reference: ObjectReference = g.object_ref(&gadget_resource());
    let recorder = Recorder::new(
        c.clone(),
        Reporter {
            controller: "gadget-ctl".into(),
            instance: Some("gadget-ctl-0".into()),
        },
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: "Broken".into(),
        note: Some("it broke".into()),
        action: "Check".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let core: Api<CoreEvent> = Api::namespaced(c.clone(), "default");
    let events = core
        .list(
            &ListParams::default()
                .fields(&format!("involvedObject.uid={}", g.metadata.uid.unwrap())),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(
        events.len(),
        1,
        "the repeat became a series on the same event"
    );
    let e = &events[0];
    assert_eq!(e.reason.as_deref(), Some("Broken"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.count, Some(2));
}

/// Event names are DNS-1123 subdomains of at most 253 characters, as on a real server:
/// what makes an event about an object with a very long name fail unless shortened.
#[tokio::test]
async fn event_names_must_be_dns_subdomains_of_at_most_253_characters() {
    let (_s, c) = with_crds().await;
    let v1: Api<EventV1> = Api::namespaced(c.clone(), "default");
    let event = |name: &str| -> EventV1 {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "regarding": {"kind": "Widget", "name": "w"},
            "reason": "Painted", "type": "Normal", "action": "Paint",
            "reportingController": "painter", "reportingInstance": "painter-0",
            "eventTime": "2025-01-01T00:00:00.000000Z",
        }))
        .unwrap()
    };
    let longest = format!("{}.{}", "a".repeat(200), "b".repeat(52));
    assert_eq!(longest.len(), 253);
    v1.create(&PostParams::default(), &event(&longest))
        .await
        .unwrap();
    let too_long = format!("{longest}c");
    let e = api_error(v1.create(&PostParams::default(), &event(&too_long)).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message.contains("must be no more than 253 characters"),
        "{}",
        e.message
    );
    for bad in ["w-.1", "w..1", "w.-1", "-w.1", "w.1-"] {
        let e = api_error(v1.create(&PostParams::default(), &event(bad)).await);
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{bad}");
        assert!(
            e.message.contains("RFC 1123 subdomain"),
            "{bad}: {}",
            e.message
        );
    }
}

#[tokio::test]
async fn leases_support_the_verbs_leader_election_uses() {
    let (_s, c) = with_crds().await;
    let leases: Api<Lease> = Api::namespaced(c.clone(), "default");
    let l: Lease = serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}})).unwrap();
    let made = leases.create(&PostParams::default(), &l).await.unwrap();
    let mut next = made.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = leases
        .replace("l", &PostParams::default(), &next)
        .await
        .unwrap();
    assert_eq!(replaced.spec.unwrap().holder_identity.as_deref(), Some("b"));
    let e = api_error(leases.replace("l", &PostParams::default(), &next).await);
    assert_eq!(e.code, 409, "the stale resourceVersion of `next` conflicts");
    let patched = leases
        .patch(
            "l",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"leaseTransitions": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().lease_transitions, Some(3));
    // A type error in a built-in is refused.
    let r = raw(
        &c,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        &[("content-type", "application/json")],
        json!({"metadata": {"name": "bad"}, "spec": {"leaseDurationSeconds": "ten"}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn leader_election_with_kube_lease_manager_elects_exactly_one() {
    let (_s, c) = with_crds().await;
    let manager = |id: &str| {
        LeaseManagerBuilder::new(c.clone(), "leader")
            .with_identity(id)
            .with_duration(3)
            .with_grace(1)
            .build()
    };
    let a = manager("a").await.unwrap();
    let b = manager("b").await.unwrap();
    let (a_rx, a_task) = a.watch().await;
    let (b_rx, b_task) = b.watch().await;
    eventually("a leader", Duration::from_secs(20), || {
        let (a, b) = (*a_rx.borrow(), *b_rx.borrow());
        async move { (a || b).then_some(()) }
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < deadline {
        assert!(!(*a_rx.borrow() && *b_rx.borrow()), "never two leaders");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let leases: Api<Lease> = Api::namespaced(c.clone(), "default");
    let holder = leases
        .get("leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap();
    let leader_is_a = *a_rx.borrow();
    assert_eq!(holder, if leader_is_a { "a" } else { "b" });
    // The leader goes away (its lease is released): the other takes over.
    let (gone_rx, gone_task, other_rx) = if leader_is_a {
        (a_rx, a_task, b_rx)
    } else {
        (b_rx, b_task, a_rx)
    };
    drop(gone_rx);
    let _ = tokio::time::timeout(Duration::from_secs(10), gone_task).await;
    eventually("the other takes over", Duration::from_secs(20), || {
        let v = *other_rx.borrow();
        async move { v.then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn namespaces_are_cluster_scoped_and_deleting_one_empties_it() {
    let (_s, c) = with_crds().await;
    let ns: Api<Namespace> = Api::all(c.clone());
    let made = ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(made.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        made.metadata
            .labels
            .unwrap()
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("team")
    );
    gadgets(&c, "team")
        .create(&PostParams::default(), &gadget("g", None))
        .await
        .unwrap();
    ns.delete("team", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(ns.get("team").await).code, 404);
    assert_eq!(api_error(gadgets(&c, "team").get("g").await).code, 404);
    let e = api_error(ns.delete("default", &DeleteParams::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
}

#[tokio::test]
async fn unknown_fields_in_built_ins_follow_field_validation() {
    let (_s, c) = with_crds().await;
    let body = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"bogus": 1}}).to_string().into_bytes()
    };
    let ct = [("content-type", "application/json")];
    let strict = raw(
        &c,
        "POST",
        "/api/v1/namespaces?fieldValidation=Strict",
        &ct,
        body("s"),
    )
    .await;
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.body["message"],
        "strict decoding error: unknown field \"spec.bogus\""
    );
    let warn = raw(&c, "POST", "/api/v1/namespaces", &ct, body("w")).await;
    assert_eq!(warn.status, 201);
    assert_eq!(
        warn.headers.get("warning").unwrap(),
        "299 - \"unknown field \\\"spec.bogus\\\"\""
    );
    assert!(
        warn.body["spec"].get("bogus").is_none(),
        "dropped by decoding"
    );
    let ignore = raw(
        &c,
        "POST",
        "/api/v1/namespaces?fieldValidation=Ignore",
        &ct,
        body("i"),
    )
    .await;
    assert_eq!(ignore.status, 201);
    assert!(ignore.headers.get("warning").is_none());
}
