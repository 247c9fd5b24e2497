//! Watch semantics: event types, resumption, 410, timeouts, bookmarks, selector
//! transitions, initial events.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{DynamicObject, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;
use server_binder::apiserver::Config;

use crate::apiserver::common::*;

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>;

async fn next_any(events: &mut Events) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("an event within 5s")
        .expect("no stream error")
        .expect("the stream goes on")
}

/// The next event that is not a bookmark (kube asks for bookmarks by default).
async fn next(events: &mut Events) -> WatchEvent<DynamicObject> {
    loop {
        match next_any(events).await {
            WatchEvent::Bookmark(_) => continue,
            other => return other,
        }
    }
}

fn describe(e: &WatchEvent<DynamicObject>) -> String {
    let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
    match e {
        WatchEvent::Added(o) => format!("ADDED {}", name(o)),
        WatchEvent::Modified(o) => format!("MODIFIED {}", name(o)),
        WatchEvent::Deleted(o) => format!("DELETED {}", name(o)),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {}", s.code),
    }
}

#[tokio::test]
async fn a_watch_from_now_streams_every_change() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "before", "blue").await;
    let list = api.list(&Default::default()).await.unwrap();
    let mut events = api
        .watch(
            &WatchParams::default(),
            list.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    create_widget(&c, "w", "blue").await;
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"color": "red"}})),
    )
    .await
    .unwrap();
    api.delete("w", &Default::default()).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next(&mut events).await));
    }
    assert_eq!(seen, ["ADDED w", "MODIFIED w", "DELETED w"]);
}

#[tokio::test]
async fn resource_version_zero_or_unset_starts_with_the_current_state() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    create_widget(&c, "a", "blue").await;
    create_widget(&c, "b", "blue").await;
    for rv in ["0", ""] {
        let mut events = api
            .watch(&WatchParams::default(), rv)
            .await
            .unwrap()
            .boxed();
        let first = [
            describe(&next(&mut events).await),
            describe(&next(&mut events).await),
        ];
        assert_eq!(first, ["ADDED a", "ADDED b"], "rv={rv:?}");
    }
}

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version_by_replaying_history() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let a = create_widget(&c, "a", "blue").await;
    create_widget(&c, "b", "blue").await;
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"color": "red"}})),
    )
    .await
    .unwrap();
    let mut events = api
        .watch(
            &WatchParams::default(),
            &a.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let seen = [
        describe(&next(&mut events).await),
        describe(&next(&mut events).await),
    ];
    assert_eq!(seen, ["ADDED b", "MODIFIED a"]);
}

#[tokio::test]
async fn a_resource_version_older_than_history_gets_410_expired() {
    let (_s, c) = with_crds_config(Config::default().watch_history(3)).await;
    let api = widgets(&c);
    let first = create_widget(&c, "w0", "blue").await;
    for i in 1..6 {
        create_widget(&c, &format!("w{i}"), "blue").await;
    }
    let mut events = api
        .watch(
            &WatchParams::default(),
            &first.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match next(&mut events).await {
        WatchEvent::Error(s) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert!(
                s.message.starts_with("too old resource version"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 410, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let started = std::time::Instant::now();
    let mut events = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "stream ends without events");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn bookmarks_arrive_periodically_with_a_current_resource_version() {
    let (_s, c) =
        with_crds_config(Config::default().bookmark_interval(Duration::from_millis(200))).await;
    let api = widgets(&c);
    let w = create_widget(&c, "w", "blue").await;
    let mut events = api
        .watch(
            &WatchParams::default(),
            &w.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    create_widget(&c, "x", "blue").await;
    let mut saw_added = false;
    loop {
        match next_any(&mut events).await {
            WatchEvent::Added(_) => saw_added = true,
            WatchEvent::Bookmark(b) => {
                assert!(saw_added, "the bookmark comes after the events it covers");
                let brv: u64 = b.metadata.resource_version.parse().unwrap();
                assert!(brv > rv(&w));
                break;
            }
            other => panic!("unexpected {}", describe(&other)),
        }
    }
}

#[tokio::test]
async fn selector_transitions_become_added_and_deleted() {
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let w = create_widget(&c, "w", "blue").await;
    let mut events = api
        .watch(
            &WatchParams::default().labels("team=x"),
            &w.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let label = |v: serde_json::Value| Patch::Merge(json!({"metadata": {"labels": {"team": v}}}));
    api.patch("w", &PatchParams::default(), &label(json!("x")))
        .await
        .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"color": "red"}})),
    )
    .await
    .unwrap();
    let last = api
        .patch("w", &PatchParams::default(), &label(json!("y")))
        .await
        .unwrap();
    let seen = [
        describe(&next(&mut events).await),
        describe(&next(&mut events).await),
        describe(&next(&mut events).await),
    ];
    assert_eq!(seen, ["ADDED w", "MODIFIED w", "DELETED w"]);
    let _ = last;

    // Field selectors work on watches too.
    let mut by_name = api
        .watch(&WatchParams::default().fields("metadata.name=other"), "0")
        .await
        .unwrap()
        .boxed();
    create_widget(&c, "unrelated", "blue").await;
    create_widget(&c, "other", "blue").await;
    assert_eq!(describe(&next(&mut by_name).await), "ADDED other");
}

#[tokio::test]
async fn send_initial_events_ends_with_a_marked_bookmark() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "a", "blue").await;
    let r = raw(
        &c,
        "GET",
        "/apis/test.example.dev/v1/widgets?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
        &[],
        Vec::new(),
    )
    .await;
    let text = match r.body {
        serde_json::Value::String(s) => s,
        one => one.to_string(),
    };
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn the_legacy_watch_path_streams_too() {
    let (_s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let r = get_json(
        &c,
        "/apis/test.example.dev/v1/watch/widgets?timeoutSeconds=1",
    )
    .await;
    let text = r
        .body
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| r.body.to_string());
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            first["type"].as_str(),
            first["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("w"))
    );
    let ns = get_json(
        &c,
        "/api/v1/watch/namespaces/default/events?timeoutSeconds=1",
    )
    .await;
    assert_eq!(ns.status, 200);
}

#[tokio::test]
async fn shutdown_ends_open_watches_and_stops_listening() {
    let (s, c) = with_crds().await;
    let url = s.url();
    let mut events = widgets(&c)
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    create_widget(&c, "w", "blue").await;
    assert_eq!(describe(&next(&mut events).await), "ADDED w");
    tokio::time::timeout(Duration::from_secs(10), s.shutdown())
        .await
        .expect("shutdown is prompt");
    let end = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("the watch ends");
    assert!(!matches!(end, Ok(Some(WatchEvent::Added(_)))));
    let addr = url.trim_start_matches("http://");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}
