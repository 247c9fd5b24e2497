//! The README's walk and the classes example, as a user runs them with the real kubectl
//! in the documented order: `kubectl apply -f manifests/examples/`, then
//! `manifests/examples/classes/`, then the claims docs/operations.md creates ("Server
//! classes", "Quotas"), then `kubectl delete` of `gpu`. Each claim ends as the
//! examples' comments and the docs say, and `kubectl get` shows the columns the docs
//! name (docs/binding.md, "Printer columns").

use std::path::Path;

use crate::common::tools::kubectl_present;
use crate::controllers::support::*;
use server_binder::controllers::Options;

const README: &str = include_str!("../../README.md");
const OPERATIONS: &str = include_str!("../../docs/operations.md");

/// docs/operations.md, "Server classes": the gpu class's claim in a namespace it does
/// not let in.
const NOT_ALLOWED: &str = "metadata: {name: training, namespace: default}
spec: {serverClassName: gpu}";

/// docs/operations.md, "Quotas": a second claim of the class in team-b, at its quota.
const OVER_QUOTA: &str = "metadata: {name: training-2, namespace: team-b}
spec: {serverClassName: gpu}";

/// One `kubectl get` row as words: the row whose first word is `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name));
    line.unwrap_or("")
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn header(table: &str) -> Vec<String> {
    row(table, "NAME")
}

/// Waits until `kubectl get serverclaim NAME -n NS` shows `phase` and, for a claim
/// that waits, `reason` in its REASON column.
async fn claim_shows(kubectl: &impl Fn(&[&str]) -> String, ns: &str, name: &str, want: &[&str]) {
    let what = format!("kubectl get scl -n {ns} shows {name} {want:?}");
    eventually(&what, DEADLINE, || {
        let table = kubectl(&["get", "serverclaims", "-n", ns]);
        let seen = row(&table, name);
        let shows = want.iter().all(|w| seen.iter().any(|s| s == w));
        async move { if shows { Ok(()) } else { Err(table) } }
    })
    .await;
}

/// Applies a claim the docs create with a heredoc, after checking the docs still say it.
fn apply_documented(kubectl: &impl Fn(&[&str]) -> String, dir: &Path, yaml: &str) {
    assert!(
        OPERATIONS.contains(yaml),
        "docs/operations.md no longer creates:\n{yaml}"
    );
    let file = dir.join("claim.yaml");
    let manifest = format!("apiVersion: metal.binder.dev/v1alpha1\nkind: ServerClaim\n{yaml}\n");
    std::fs::write(&file, manifest).unwrap();
    kubectl(&["apply", "-f", file.to_str().unwrap()]);
}

// kubectl runs as a blocking child process: the in-process API server needs worker
// threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walk_and_the_classes_example_end_as_documented() {
    if !kubectl_present() {
        return;
    }
    for command in [
        "kubectl apply -f manifests/examples/\n",
        "kubectl apply -f manifests/examples/classes/\n",
    ] {
        assert!(
            README.contains(command),
            "the README no longer runs {command}"
        );
    }
    let mut env = Env::new().await;
    // Summaries and quotas are recounted once per status interval.
    let options = Options {
        status_interval: std::time::Duration::from_secs(1),
        ..options(4)
    };
    env.start_with(options).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let kubectl = |args: &[&str]| kubectl(&kubeconfig, args);

    readme_demo(&kubectl).await;
    kubectl(&["apply", "-f", &format!("{EXAMPLES}classes/")]);
    classes_example(&kubectl).await;
    apply_documented(&kubectl, dir.path(), NOT_ALLOWED);
    claim_shows(
        &kubectl,
        "default",
        "training",
        &["Pending", "gpu", "ClassNotAllowed"],
    )
    .await;
    apply_documented(&kubectl, dir.path(), OVER_QUOTA);
    claim_shows(
        &kubectl,
        "team-b",
        "training-2",
        &["Pending", "QuotaExceeded"],
    )
    .await;
    let quotas = kubectl(&["get", "serverquotas", "-A"]);
    assert_eq!(
        row(&quotas, "team-b")[1..4],
        ["gpu", "gpu:", "1/1"],
        "{quotas}"
    );

    // "delete `gpu` and it binds": the class's servers stay set aside for its claims.
    kubectl(&["delete", "serverclaim", "gpu"]);
    claim_shows(&kubectl, "default", "gpu-too", &["Bound", "rack2-gpu-01"]).await;
    cordon_shows(&kubectl).await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// `kubectl apply -f manifests/examples/`: four claims Bound, `gpu-too` waiting for the
/// one GPU server `gpu` holds; the columns of both kinds.
async fn readme_demo(kubectl: &impl Fn(&[&str]) -> String) {
    kubectl(&["apply", "-f", EXAMPLES]);
    for (claim, server) in [
        ("any-server", None),
        ("large-not-r1", Some("rack2-large-01")),
        ("by-ref", Some("rack1-small-01")),
        ("gpu", Some("rack2-gpu-01")),
    ] {
        let want: Vec<&str> = ["Bound"].into_iter().chain(server).collect();
        claim_shows(kubectl, "default", claim, &want).await;
    }
    claim_shows(
        kubectl,
        "default",
        "gpu-too",
        &["Pending", "NoMatchingServer"],
    )
    .await;
    eventually("gpu-too says gpu holds the GPU server", DEADLINE, || {
        let describe = kubectl(&["describe", "serverclaim", "gpu-too"]);
        let says = describe.contains("0/4 servers can serve this claim")
            && describe.contains("1 is held by another claim");
        async move { says }
    })
    .await;
    let claims = kubectl(&["get", "serverclaims"]);
    let columns = ["NAME", "PHASE", "SERVER", "CLASS", "REASON", "AGE"];
    assert_eq!(header(&claims), columns, "{claims}");
    // REASON says why a claim is not Bound, and nothing for a Bound one.
    assert_eq!(row(&claims, "by-ref").len(), 4, "{claims}");
    let wide = kubectl(&["get", "serverclaims", "-o", "wide"]);
    assert_eq!(header(&wide)[5], "DISRUPTION", "{wide}");
    let servers = kubectl(&["get", "servers"]);
    let columns = ["NAME", "STATUS", "CLAIM", "CLASS", "RECLAIM", "AGE"];
    assert_eq!(header(&servers), columns, "{servers}");
    let retained = row(&servers, "rack2-large-01");
    assert_eq!(
        retained[1..4],
        ["Bound", "default/large-not-r1", "Retain"],
        "{servers}"
    );
    let wide = kubectl(&["get", "servers", "-o", "wide"]);
    assert_eq!(header(&wide)[5], "REASON", "{wide}");
}

/// `kubectl apply -f manifests/examples/classes/`: each team's claim binds a server of
/// the class, `kubectl get servers` names the class, and `gpu-too` (no class) still
/// waits, told the class's servers are set aside.
async fn classes_example(kubectl: &impl Fn(&[&str]) -> String) {
    for team in ["team-a", "team-b"] {
        claim_shows(kubectl, team, "training", &["Bound", "gpu"]).await;
    }
    eventually("the class's servers show CLASS gpu", DEADLINE, || {
        let table = kubectl(&["get", "servers", "-l", "pool=gpu-shared"]);
        let classed = ["rack3-gpu-01", "rack3-gpu-02", "rack3-gpu-03"]
            .iter()
            .all(|s| row(&table, s).iter().any(|w| w == "gpu"));
        async move { if classed { Ok(()) } else { Err(table) } }
    })
    .await;
    eventually(
        "kubectl get serverclasses counts the gpu class",
        DEADLINE,
        || {
            let table = kubectl(&["get", "serverclasses"]);
            let columns = [
                "NAME",
                "DEFAULT",
                "SERVERS",
                "AVAILABLE",
                "BOUND",
                "CLEANING",
                "RELEASED",
                "UNCLAIMABLE",
                "AGE",
            ];
            assert_eq!(header(&table), columns, "{table}");
            let counted = row(&table, "gpu").get(1..7)
                == Some(&["3", "1", "2", "0", "0", "0"].map(String::from)[..]);
            async move { if counted { Ok(()) } else { Err(table) } }
        },
    )
    .await;
    eventually(
        "gpu-too says the class's servers are set aside",
        DEADLINE,
        || {
            let describe = kubectl(&["describe", "serverclaim", "gpu-too"]);
            let says = describe.contains("0/7 servers can serve this claim")
                && describe.contains("3 are set aside for server classes (the claim names none)");
            async move { if says { Ok(()) } else { Err(describe) } }
        },
    )
    .await;
}

/// A cordoned server reads `Bound,Unclaimable` in STATUS, as a cordoned Node reads
/// `Ready,SchedulingDisabled`, and keeps its claim (docs/operations.md, "cordon,
/// uncordon and drain").
async fn cordon_shows(kubectl: &impl Fn(&[&str]) -> String) {
    let cordon = r#"{"spec":{"unclaimable":true}}"#;
    kubectl(&[
        "patch",
        "server",
        "rack1-large-01",
        "--type",
        "merge",
        "-p",
        cordon,
    ]);
    eventually(
        "a cordoned server shows Bound,Unclaimable",
        DEADLINE,
        || {
            let table = kubectl(&["get", "servers"]);
            let seen = row(&table, "rack1-large-01");
            let shows = seen.get(1..3)
                == Some(&["Bound,Unclaimable".into(), "default/any-server".into()][..]);
            async move { if shows { Ok(()) } else { Err(table) } }
        },
    )
    .await;
}
