//! The size limits kube-apiserver enforces, over real HTTP: an event's note (1 KiB,
//! 422), an object too large for storage (etcd's 1.5 MiB: 500 "etcdserver: request is
//! too large"). The request body (3 MiB, 413) is in errors.rs, the annotations (256 KiB,
//! 422) in metadata.rs.

use serde_json::{Value, json};

use crate::apiserver::common::*;

const NOTE_LIMIT: usize = 1024;

fn v1_event(name: &str, note: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "regarding": {"apiVersion": "test.example.dev/v1", "kind": "Widget", "name": "w"},
        "note": note, "reason": "Painted", "type": "Normal", "action": "Paint",
        "reportingController": "painter", "reportingInstance": "painter-0",
        "eventTime": "2025-01-01T00:00:00.000000Z",
    })
}

async fn post(c: &kube::Client, path: &str, body: &Value) -> Raw {
    let headers = [("content-type", "application/json")];
    raw(c, "POST", path, &headers, body.to_string().into_bytes()).await
}

async fn merge_patch(c: &kube::Client, path: &str, body: &Value) -> Raw {
    let headers = [("content-type", "application/merge-patch+json")];
    raw(c, "PATCH", path, &headers, body.to_string().into_bytes()).await
}

/// The 422 kube-apiserver's event validation answers: the core/v1 field `message`,
/// through either API.
fn assert_note_refused(r: &Raw, name: &str) {
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(r.body["code"], 422);
    let message = r.body["message"].as_str().expect("a message");
    assert!(
        message.starts_with("Event")
            && message.contains(&format!("\"{name}\" is invalid"))
            && message.ends_with("message: Invalid value: \"\": can have at most 1024 characters"),
        "{message}"
    );
    let cause = &r.body["details"]["causes"][0];
    assert_eq!(cause["field"], "message");
    assert_eq!(cause["reason"], "FieldValueInvalid");
}

const V1_EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
const CORE_EVENTS: &str = "/api/v1/namespaces/default/events";

#[tokio::test]
async fn an_events_v1_note_over_one_kibibyte_is_invalid() {
    let (_s, c) = with_crds().await;
    let r = post(
        &c,
        V1_EVENTS,
        &v1_event("long", &"n".repeat(NOTE_LIMIT + 1)),
    )
    .await;
    assert_note_refused(&r, "long");
    assert_eq!(get_json(&c, &format!("{V1_EVENTS}/long")).await.status, 404);
    // Bytes, not characters: 513 two-byte characters do not fit.
    let r = post(&c, V1_EVENTS, &v1_event("wide", &"é".repeat(513))).await;
    assert_note_refused(&r, "wide");

    let r = post(&c, V1_EVENTS, &v1_event("fits", &"n".repeat(NOTE_LIMIT))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    // An update is held to the same limit, and leaves the event as it was.
    let grow = json!({"note": "n".repeat(NOTE_LIMIT + 1)});
    let r = merge_patch(&c, &format!("{V1_EVENTS}/fits"), &grow).await;
    assert_note_refused(&r, "fits");
    let kept = get_json(&c, &format!("{V1_EVENTS}/fits")).await;
    assert_eq!(kept.body["note"].as_str().map(str::len), Some(NOTE_LIMIT));
}

#[tokio::test]
async fn a_core_event_message_is_held_to_the_limit_when_it_has_an_event_time() {
    let (_s, c) = with_crds().await;
    let core = |name: &str, time: bool| {
        let mut e = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Widget", "name": "w", "namespace": "default"},
            "message": "m".repeat(NOTE_LIMIT + 1), "reason": "Painted", "type": "Normal",
        });
        if time {
            e["eventTime"] = json!("2025-01-01T00:00:00.000000Z");
            e["action"] = json!("Paint");
            e["reportingComponent"] = json!("painter");
            e["reportingInstance"] = json!("painter-0");
        }
        e
    };
    let r = post(&c, CORE_EVENTS, &core("timed", true)).await;
    assert_note_refused(&r, "timed");
    // A legacy event (no eventTime) is not held to it, as kube-apiserver's legacy
    // validation is not.
    let r = post(&c, CORE_EVENTS, &core("legacy", false)).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

fn widget_of(name: &str, color_bytes: usize) -> Value {
    json!({
        "apiVersion": "test.example.dev/v1", "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": "x".repeat(color_bytes)},
    })
}

/// kube-apiserver passes etcd's refusal on as it comes: 500, no reason.
fn assert_too_large_for_storage(r: &Raw) {
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(r.body["code"], 500);
    assert_eq!(r.body["message"], "etcdserver: request is too large");
    assert!(r.body.get("reason").is_none(), "{}", r.body);
}

#[tokio::test]
async fn an_object_over_the_storage_limit_is_refused_as_etcd_refuses_it() {
    const WIDGETS: &str = "/apis/test.example.dev/v1/widgets";
    let (_s, c) = with_crds().await;
    // 2 MiB: under the 3 MiB body limit, over etcd's 1.5 MiB.
    let r = post(&c, WIDGETS, &widget_of("big", 2 * 1024 * 1024)).await;
    assert_too_large_for_storage(&r);
    assert_eq!(get_json(&c, &format!("{WIDGETS}/big")).await.status, 404);

    let r = post(&c, WIDGETS, &widget_of("grows", 1024 * 1024)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let grow = json!({"spec": {"color": "y".repeat(1536 * 1024)}});
    let r = merge_patch(&c, &format!("{WIDGETS}/grows"), &grow).await;
    assert_too_large_for_storage(&r);
    let kept = get_json(&c, &format!("{WIDGETS}/grows")).await;
    let color = kept.body["spec"]["color"].as_str().expect("a color");
    assert!(
        color.len() == 1024 * 1024 && color.starts_with('x'),
        "unchanged"
    );
}
