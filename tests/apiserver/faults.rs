//! Fault injection and the request log.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;
use server_binder::apiserver::{FaultAction, RequestMatcher};

use crate::apiserver::common::*;

#[tokio::test]
async fn the_next_matching_requests_fail_with_the_chosen_code() {
    let (s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let api = widgets(&c);
    let faults = s.faults();
    faults.fail(
        RequestMatcher::any().verb("get").resource("widgets"),
        2,
        500,
    );
    assert_eq!(api_error(api.get("w").await).code, 500);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "list does not match"
    );
    assert_eq!(api_error(api.get("w").await).code, 500);
    api.get("w").await.unwrap();

    faults.fail(
        RequestMatcher::any().verb("patch").subresource("status"),
        1,
        409,
    );
    let e = api_error(
        api.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "x"}})),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": "large"}})),
    )
    .await
    .unwrap();

    // kube's client retries 429/503/504 by itself; see them with one that does not.
    let plain = no_retry_client(&s);
    faults.fail(RequestMatcher::any().resource("widgets"), 1, 504);
    assert_eq!(api_error(widgets(&plain).get("w").await).reason, "Timeout");

    faults.throttle(RequestMatcher::any().verb("list"), 1, 7);
    let r = get_json(&plain, "/apis/test.example.dev/v1/widgets").await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers.get("retry-after").unwrap(), "7");
    assert_eq!(r.body["reason"], "TooManyRequests");

    // The default client rides over a 429 with Retry-After: two requests, one answer.
    s.request_log().clear();
    faults.throttle(RequestMatcher::any().verb("get"), 1, 1);
    api.get("w").await.unwrap();
    let codes: Vec<u16> = s.request_log().entries().iter().map(|r| r.status).collect();
    assert_eq!(codes, [429, 200]);

    faults.fail(RequestMatcher::any().namespace("kube-system"), 5, 500);
    faults.clear();
    assert!(
        gadgets(&c, "kube-system")
            .list(&ListParams::default())
            .await
            .is_ok()
    );
}

/// A fault can pick out one client's requests by its User-Agent: another client's
/// requests of the same kind pass.
#[tokio::test]
async fn a_fault_can_match_one_clients_user_agent() {
    let (s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let matcher = RequestMatcher::any().verb("get").user_agent("probe/1.0");
    s.faults().fail(matcher, 1, 500);
    widgets(&c)
        .get("w")
        .await
        .expect("another client's get passes");
    let path = "/apis/test.example.dev/v1/widgets/w";
    let probe = |c| raw(c, "GET", path, &[("user-agent", "probe/1.0")], Vec::new());
    assert_eq!(probe(&c).await.status, 500, "the probe's get fails");
    assert_eq!(probe(&c).await.status, 200, "once");
}

#[tokio::test]
async fn delays_hold_requests() {
    let (s, c) = with_crds().await;
    s.faults().inject(
        RequestMatcher::any().verb("list"),
        1,
        FaultAction::Delay(Duration::from_millis(300)),
    );
    let t = Instant::now();
    widgets(&c).list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
}

/// A held-back response: the write is stored and a watch sees it while the writer still
/// waits for its answer, which then carries the same resourceVersion as the event.
#[tokio::test]
async fn a_delayed_response_lets_a_watch_see_the_write_first() {
    let (s, c) = with_crds().await;
    create_widget(&c, "w", "blue").await;
    let api = widgets(&c);
    let list = api.list(&ListParams::default()).await.unwrap();
    let mut events = api
        .watch(
            &WatchParams::default(),
            list.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let hold = Duration::from_millis(800);
    s.faults().delay_response(
        RequestMatcher::any().verb("patch").resource("widgets"),
        1,
        hold,
    );
    let t = Instant::now();
    let writer = tokio::spawn({
        let api = api.clone();
        async move {
            let patch = Patch::Merge(json!({"spec": {"size": "large"}}));
            api.patch("w", &PatchParams::default(), &patch).await
        }
    });
    let seen = loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .expect("an event within 5s")
            .expect("no stream error")
            .expect("the stream goes on");
        match event {
            WatchEvent::Modified(o) => break o,
            WatchEvent::Bookmark(_) => continue,
            other => panic!("expected MODIFIED w, got {other:?}"),
        }
    };
    assert!(
        !writer.is_finished() && t.elapsed() < hold,
        "the event arrived after the response ({:?})",
        t.elapsed()
    );
    assert_eq!(seen.data["spec"]["size"], "large");
    let answered = writer.await.unwrap().expect("the write succeeds");
    assert!(t.elapsed() >= hold, "the response was held back");
    assert_eq!(rv(&answered), rv(&seen));
    assert_eq!(rv(&api.get("w").await.unwrap()), rv(&seen), "written once");
}

#[tokio::test]
async fn the_request_log_records_rbac_verbs() {
    let (s, c) = with_crds().await;
    let log = s.request_log();
    log.clear();
    let api = widgets(&c);
    create_widget(&c, "w", "blue").await;
    api.get("w").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    api.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "x"}})),
    )
    .await
    .unwrap();
    let w = api.get("w").await.unwrap();
    api.replace("w", &Default::default(), &w).await.unwrap();
    api.delete("w", &Default::default()).await.unwrap();
    api.delete_collection(&Default::default(), &ListParams::default())
        .await
        .unwrap();
    gadgets(&c, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let entries: Vec<(String, String, String)> = log
        .entries()
        .into_iter()
        .filter(|r| r.is_resource_request())
        .map(|r| (r.verb, r.resource, r.subresource))
        .collect();
    let expect = |v: &str, r: &str, sub: &str| (v.to_owned(), r.to_owned(), sub.to_owned());
    assert_eq!(
        entries,
        [
            expect("create", "widgets", ""),
            expect("get", "widgets", ""),
            expect("list", "widgets", ""),
            expect("patch", "widgets", "status"),
            expect("get", "widgets", ""),
            expect("update", "widgets", ""),
            expect("delete", "widgets", ""),
            expect("deletecollection", "widgets", ""),
            expect("list", "gadgets", ""),
        ]
    );
    let last = log.entries().pop().unwrap();
    assert_eq!(last.group, GROUP);
    assert_eq!(last.namespace.as_deref(), Some("default"));
    assert_eq!(last.status, 200);
    raw(
        &c,
        "GET",
        "/api/v1/namespaces/default",
        &[("user-agent", "probe/1.0")],
        Vec::new(),
    )
    .await;
    let probe = log.entries().pop().unwrap();
    assert_eq!(
        (
            probe.verb.as_str(),
            probe.resource.as_str(),
            probe.user_agent.as_str()
        ),
        ("get", "namespaces", "probe/1.0")
    );
    assert_eq!(probe.namespace.as_deref(), Some("default"));
    log.clear();
    assert!(log.entries().is_empty());
}

#[tokio::test]
async fn the_request_log_is_bounded() {
    let s = start_with(server_binder::apiserver::Config::default().request_log_capacity(3)).await;
    let c = s.client();
    for _ in 0..5 {
        get_json(&c, "/version").await;
    }
    assert_eq!(s.request_log().entries().len(), 3);
}
