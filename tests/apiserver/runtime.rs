//! kube-runtime against the server, unchanged: a `watcher` that survives a dropped
//! watch and a 410, and a `Controller` that reconciles a test CRD.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher::{self, Event};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use crate::apiserver::common::*;

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.example.dev",
    version = "v1",
    kind = "Widget",
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    pub color: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Names the watcher currently believes exist, fed from its events.
async fn watch_names(api: Api<Widget>) -> mpsc::UnboundedReceiver<(String, bool)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(ev) = stream.next().await {
            let sent = match ev {
                Ok(Event::Apply(w) | Event::InitApply(w)) => tx.send((w.name_any(), true)),
                Ok(Event::Delete(w)) => tx.send((w.name_any(), false)),
                Ok(Event::Init | Event::InitDone) => Ok(()),
                Err(_) => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
    });
    rx
}

async fn expect_name(rx: &mut mpsc::UnboundedReceiver<(String, bool)>, name: &str, present: bool) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some((n, p)) = rx.recv().await {
            if n == name && p == present {
                return;
            }
        }
        panic!("watcher ended");
    })
    .await
    .unwrap_or_else(|_| panic!("watcher never saw {name} present={present}"));
}

#[tokio::test]
async fn the_watcher_survives_a_dropped_watch_and_a_410() {
    let (server, c) = with_crds().await;
    let api: Api<Widget> = Api::all(c.clone());
    let mut rx = watch_names(api).await;
    create_widget(&c, "first", "blue").await;
    expect_name(&mut rx, "first", true).await;

    server.faults().close_watches();
    create_widget(&c, "after-drop", "blue").await;
    expect_name(&mut rx, "after-drop", true).await;

    server.faults().compact_history();
    create_widget(&c, "after-compaction", "blue").await;
    expect_name(&mut rx, "after-compaction", true).await;
    widgets(&c)
        .delete("first", &Default::default())
        .await
        .unwrap();
    expect_name(&mut rx, "first", false).await;
    let watches = server
        .request_log()
        .entries()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == "widgets")
        .count();
    assert!(watches >= 3, "the watcher re-watched ({watches} watches)");
    let relists = server
        .request_log()
        .entries()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "widgets")
        .count();
    assert!(relists >= 2, "the 410 made it re-list ({relists} lists)");
}

struct Ctx {
    api: Api<Widget>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let generation = w.metadata.generation;
    if w.status.as_ref().and_then(|s| s.observed_generation) != generation {
        let status = json!({"status": {"phase": format!("Painted-{}", w.spec.color), "observedGeneration": generation}});
        ctx.api
            .patch_status(
                &w.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Widget>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn a_controller_reconciles_against_the_server() {
    let (server, c) = with_crds().await;
    let api: Api<Widget> = Api::all(c.clone());
    let ctx = Arc::new(Ctx { api: api.clone() });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {}),
    );
    create_widget(&c, "w", "blue").await;
    let phase = |api: Api<Widget>| async move {
        api.get("w")
            .await
            .ok()
            .and_then(|w| w.status.and_then(|s| s.phase))
    };
    let p = eventually("first reconcile", Duration::from_secs(20), || {
        let api = api.clone();
        async move { phase(api).await.filter(|p| p == "Painted-blue") }
    })
    .await;
    assert_eq!(p, "Painted-blue");
    // A 500 on the status write is retried by the error policy.
    server.faults().fail(
        server_binder::apiserver::RequestMatcher::any()
            .verb("patch")
            .subresource("status"),
        1,
        500,
    );
    widgets(&c)
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "red"}})),
        )
        .await
        .unwrap();
    eventually("second reconcile", Duration::from_secs(20), || {
        let api = api.clone();
        async move { phase(api).await.filter(|p| p == "Painted-red") }
    })
    .await;
    controller.abort();
}
