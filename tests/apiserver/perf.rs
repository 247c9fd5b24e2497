//! Load: hundreds of concurrent watches and thousands of writes, on a small machine.

use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use kube::api::PostParams;

use crate::apiserver::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_watches_follow_thousands_of_writes() {
    const WATCHERS: usize = 200;
    const WRITES: usize = 2000;
    let (_s, c) = with_crds().await;
    let api = widgets(&c);
    let start_rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // The watchers count lines instead of decoding objects, so this measures the
    // server, not 200 clients decoding JSON in the same (debug) process.
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let req = http::Request::get(format!(
            "/apis/test.example.dev/v1/widgets?watch=true&resourceVersion={start_rv}"
        ))
        .body(Vec::new())
        .unwrap();
        let mut lines = c.request_stream(req).await.unwrap().lines();
        watchers.push(tokio::spawn(async move {
            let mut added = 0;
            while added < WRITES {
                match tokio::time::timeout(Duration::from_secs(60), lines.next()).await {
                    Ok(Some(Ok(l))) if l.starts_with("{\"type\":\"ADDED\"") => added += 1,
                    Ok(Some(Ok(_))) => {}
                    other => panic!("watch ended early after {added}: {other:?}"),
                }
            }
        }));
    }
    let t = Instant::now();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (w..WRITES).step_by(4) {
                    api.create(&PostParams::default(), &widget(&format!("w{i:05}"), "blue"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let writes_done = t.elapsed();
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(120), w)
            .await
            .unwrap()
            .unwrap();
    }
    let all_seen = t.elapsed();
    eprintln!(
        "{WRITES} writes in {writes_done:?} ({:.0}/s); {WATCHERS} watchers saw all in {all_seen:?}",
        WRITES as f64 / writes_done.as_secs_f64()
    );
    assert!(all_seen < Duration::from_secs(120));
}
