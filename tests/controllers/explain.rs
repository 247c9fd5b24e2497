//! `server-binder explain` through the real kubectl's plugin mechanism: the binary on
//! PATH as `kubectl-server_binder`, run as `kubectl server-binder explain …` against
//! the embedded API server with the real controllers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use server_binder::api::names::CONDITION_CLEANING;
use server_binder::api::{ClaimPhase, ServerPhase};
use server_binder::apiserver::{ApiServer, Config};
use server_binder::binding::find_bound;
use server_binder::controllers::Options;
use server_binder::runtime::explain::USER_AGENT_VALUE;

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// A directory holding the plugin, and the kubeconfig kubectl uses (the drain verbs'
/// tests drive it too).
#[derive(Clone)]
pub(super) struct Plugin {
    dir: std::sync::Arc<tempfile::TempDir>,
    kubeconfig: PathBuf,
}

impl Plugin {
    pub(super) fn install(write_kubeconfig: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("kubectl-server_binder");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_server-binder"), &plugin).unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        write_kubeconfig(&kubeconfig);
        Self {
            dir: std::sync::Arc::new(dir),
            kubeconfig,
        }
    }

    /// `kubectl ARGS` with the plugin's directory first on PATH, as a blocking child:
    /// the in-process API server keeps serving on the runtime's workers meanwhile.
    pub(super) async fn run(&self, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let kubeconfig = self.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            Command::new("kubectl")
                .args(&args)
                .env("PATH", path)
                .env("KUBECONFIG", kubeconfig)
                .output()
                .expect("kubectl runs")
        })
        .await
        .unwrap()
    }
}

pub(super) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Held, cordoned, tainted, not matching and being deleted: the plugin's text and JSON
/// name every server's first reason, best candidates first, and its summary is the
/// claim's condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_explains_a_pending_claim_with_mixed_reasons() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    env.stage_mixed_reasons(&["h1"]).await;
    env.put_claim(claim("web-0").selects(&[("rack", "r1")]))
        .await;
    let why = "0/5 servers can serve this claim: 1 is held by another claim, \
        1 does not match the selector (rack=r1), 1 has a taint it does not tolerate (gpu), \
        1 is unclaimable, 1 is being deleted.";
    env.wait_claim("web-0", "the summary", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Bound"))
            .is_some_and(|c| c.message == why)
    })
    .await;

    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    let listed = plugin.run(&["plugin", "list"]).await;
    assert!(
        stdout(&listed).contains("kubectl-server_binder"),
        "{listed:?}"
    );

    let out = plugin
        .run(&["server-binder", "explain", "serverclaim", "web-0", "-n", NS])
        .await;
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    // The condition carries the summary: it is said once, as the message.
    assert!(text.contains(&format!("Message:    {why}")), "{text}");
    assert!(!text.contains("Why now:"), "{text}");
    assert!(text.contains("row NoMatchingServer)"), "{text}");
    assert!(!text.contains("::"), "a Rust path in {text}");
    let order: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("SERVER"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(order, ["h1", "u1", "t1", "m1", "d1"], "{text}");

    let out = plugin
        .run(&[
            "server-binder",
            "explain",
            "scl",
            "web-0",
            "-n",
            NS,
            "-o",
            "json",
        ])
        .await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["kind"], "ServerClaimExplanation");
    assert_eq!(json["summary"], why);
    assert_eq!(json["message"], why, "what the controller wrote");
    assert_eq!(json["servers"][0]["cause"], "Held");
    let out = plugin
        .run(&[
            "server-binder",
            "explain",
            "scl",
            "web-0",
            "-n",
            NS,
            "-o",
            "yaml",
        ])
        .await;
    assert!(
        stdout(&out).contains("kind: ServerClaimExplanation"),
        "{out:?}"
    );

    // Read-only: every request the plugin made is a get or a list.
    let verbs: std::collections::BTreeSet<String> = env
        .apiserver
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| r.user_agent == USER_AGENT_VALUE)
        .map(|r| r.verb)
        .collect();
    assert_eq!(verbs, ["list".to_string()].into(), "explain only lists");
}

/// A bound server, a cordoned one, one named by two claims; a missing object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_explains_servers_and_says_what_is_missing() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1")).await;
    env.put_server(server("s2").unclaimable()).await;
    env.put_claim(claim("first").names("s1")).await;
    env.wait_claim_phase("first", ClaimPhase::Bound, "Bound")
        .await;
    env.put_claim(claim("second").names("s1")).await;
    env.wait_claim_phase("second", ClaimPhase::Pending, "ServerAlreadyClaimed")
        .await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());

    let out = plugin.run(&["server-binder", "explain", "srv", "s1"]).await;
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains(&format!("Holder:     bound to {NS}/first")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{NS}/first (chosen by user) (wins it)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{NS}/second (chosen by user)\n")),
        "{text}"
    );
    let out = plugin
        .run(&["server-binder", "explain", "server", "s2"])
        .await;
    assert!(
        stdout(&out).contains("the server is marked unclaimable"),
        "{out:?}"
    );

    // The row is in the words the controllers wrote: s1's condition, and second's.
    let s1 = env.server("s1").await.expect("s1");
    let wrote = find_bound(&s1.status.expect("a status").conditions).map(|c| c.message.clone());
    let json = explain_json(&plugin, &["srv", "s1"]).await;
    let row = json["row"].as_str().expect("a row");
    assert!(row.starts_with(&wrote.expect("a condition")), "{row}");
    let json = explain_json(&plugin, &["scl", "second", "-n", NS]).await;
    let (row, message) = (json["row"].as_str().expect("a row"), &json["message"]);
    assert_eq!(json["decision"], "ServerAlreadyClaimed");
    assert!(
        row.starts_with(message.as_str().expect("a message")),
        "{json}"
    );

    let out = plugin
        .run(&["server-binder", "explain", "scl", "nope", "-n", NS])
        .await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("(NotFound)"), "{out:?}");
    assert!(stderr(&out).contains("\"nope\" not found"), "{out:?}");
    let out = plugin
        .run(&["server-binder", "explain", "widget", "x"])
        .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `explain ARGS -o json`, which must succeed.
async fn explain_json(plugin: &Plugin, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["server-binder", "explain"];
    all.extend(args);
    all.extend(["-o", "json"]);
    let out = plugin.run(&all).await;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The operator's `--release-gates` cannot be read from the cluster: given the same,
/// explain judges a server naming no gates as the server controller does. Before the
/// controller acts on a server whose claim is gone, explain says it goes through
/// cleaning only when given the gates; once the controller (started with them) acted,
/// explain names the gate pending, in the controller's words. A bad gate name is bad
/// usage, as for `run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_judges_a_release_with_the_release_gates_it_is_given() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.put_server(server("s1").bound_to_deleted("gone")).await;
    env.put_server(server("s2").gates(&[]).bound_to_deleted("gone"))
        .await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    let gate = "example.com/wipe";
    let without = explain_json(&plugin, &["srv", "s1"]).await;
    assert_eq!(without["decision"], "Release", "{without}");
    let with = explain_json(&plugin, &["srv", "s1", "--release-gates", gate]).await;
    assert_eq!(with["decision"], "ReleaseToCleaning", "{with}");
    assert!(with["row"].as_str().unwrap().contains(gate), "{with}");
    let own = explain_json(&plugin, &["srv", "s2", "--release-gates", gate]).await;
    assert_eq!(own["decision"], "Release", "its own (no) gates win: {own}");

    let bad = plugin
        .run(&[
            "server-binder",
            "explain",
            "srv",
            "s1",
            "--release-gates",
            "wipe",
        ])
        .await;
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(stderr(&bad).contains("no domain prefix"), "{bad:?}");

    env.start_with(Options {
        release_gates: vec![gate.to_string()],
        ..options(2)
    })
    .await;
    let s1 = env
        .wait_server_phase("s1", ServerPhase::Cleaning, "Cleaning")
        .await;
    let cleaning = s1.status.expect("a status").conditions;
    let cleaning = cleaning.iter().find(|c| c.type_ == CONDITION_CLEANING);
    let json = explain_json(&plugin, &["srv", "s1"]).await;
    assert_eq!(json["decision"], "Cleaning", "{json}");
    let row = json["row"].as_str().expect("a row");
    assert!(
        row.starts_with(&cleaning.expect("Cleaning").message),
        "{row}"
    );
    let text = stdout(&plugin.run(&["server-binder", "explain", "srv", "s1"]).await);
    assert!(text.contains("the server is being cleaned"), "{text}");
}

/// Against an API server without the CRDs: a clear error and exit code 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_says_when_the_crds_are_missing() {
    if !kubectl_present() {
        return;
    }
    let apiserver = ApiServer::start(Config::default()).await.unwrap();
    let plugin = Plugin::install(|p| apiserver.write_kubeconfig(p).unwrap());
    let out = plugin.run(&["server-binder", "explain", "srv", "s1"]).await;
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(stderr(&out).contains("CRD is not installed"), "{out:?}");
    assert!(
        stderr(&out).contains("kubectl apply -f manifests/crds/"),
        "{out:?}"
    );
}
