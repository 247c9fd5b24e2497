//! Release gates end to end (docs/binding.md, "Release gates"): the real controllers,
//! a cleaner played by the test through the status subresource with server-side apply,
//! as manifests/examples/cleaner.sh does with kubectl.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::PostParams;
use server_binder::api::names::{ANNOTATION_CLEANING, CONDITION_CLEANING};
use server_binder::api::{ClaimPhase, Server, ServerPhase};
use server_binder::binding::state::gates;
use server_binder::controllers::Options;

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// What a cleaner does: the gate's condition, "True", naming the release it read (the
/// `cleaning` annotation), written to the status with the resourceVersion it read (a
/// conflict: read again). Read-modify-write rather than server-side apply: the
/// embedded API server treats a list as atomic in an apply (docs/binding.md, "Release
/// gates"). A server not being cleaned is passed for its generation, as a sloppy
/// cleaner would (a pass that never counts).
pub(super) async fn pass_gate(env: &Env, server: &str, gate: &str) {
    let api = env.servers();
    let passed = || async {
        let mut s = api.get(server).await.expect("the server");
        let read = gates::release_record(&s.clone().into()).and_then(|r| r.release);
        let release = read.unwrap_or(s.metadata.generation.unwrap_or(0));
        let condition = gates::pass_condition(gate, release, &Time(Timestamp::now()));
        let status = s.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != gate);
        status.conditions.push(condition);
        api.replace_status(server, &PostParams::default(), &s)
            .await
            .is_ok()
    };
    eventually(
        &format!("the cleaner passes {gate} on {server}"),
        DEADLINE,
        passed,
    )
    .await;
}

fn server_phase(s: &Server) -> Option<ServerPhase> {
    s.status.as_ref().and_then(|s| s.phase)
}

fn is_cleaning(s: &Server) -> bool {
    server_phase(s) == Some(ServerPhase::Cleaning)
        && s.annotations().contains_key(ANNOTATION_CLEANING)
}

/// The message of the server's `Cleaning` condition, if it has one.
fn cleaning_message(s: &Server) -> Option<&str> {
    let conditions = s.status.as_ref()?.conditions.iter();
    let mut cleaning = conditions.filter(|c| c.type_ == CONDITION_CLEANING);
    cleaning.next().map(|c| c.message.as_str())
}

/// Waits until the operator's `/metrics` shows `sample`: the gauges are computed from
/// its watch cache, which may lag the API server, and a cleaning is counted after its
/// `Cleaned` event is recorded.
async fn wait_metric(metrics: std::net::SocketAddr, sample: &str) {
    let scrape = || async { http_get(metrics, "/metrics").await.1 };
    wait_for(sample, DEADLINE, scrape, |text| text.contains(sample)).await;
}

/// `a` holds s1 (gates wipe and power-off); `b` waits. Returns once `a` is Bound, with
/// the operator's metrics address.
async fn tenant_on_a_gated_server(env: &mut Env) -> std::net::SocketAddr {
    let metrics = env.start_with_endpoint(4).await;
    env.put_server(server("s1").gates(&["example.com/wipe", "example.com/power-off"]))
        .await;
    env.put_claim(claim("a").names("s1")).await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.put_claim(claim("b")).await;
    env.wait_claim_phase("b", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    metrics
}

/// The released server is never bound before every gate passes for this release; a
/// pass recorded before the release does not count; the waiting claim binds once the
/// last gate passes.
#[tokio::test]
async fn a_released_server_is_bound_only_after_its_gates_pass_for_this_release() {
    let mut env = Env::new().await;
    let metrics = tenant_on_a_gated_server(&mut env).await;
    // A stale pass: recorded while `a` still holds the server.
    pass_gate(&env, "s1", "example.com/wipe").await;
    env.delete_claim("a").await;
    // The release's own status write names the gates; the next reconcile, deciding
    // `Cleaning` on what it wrote, adds what it knows of each (the stale pass).
    let s1 = env
        .wait_server("s1", "Cleaning, saying wipe's pass is stale", |s| {
            is_cleaning(s) && cleaning_message(s).is_some_and(|m| m.contains("its pass is for"))
        })
        .await;
    let cleaning = cleaning_message(&s1).expect("the Cleaning condition");
    assert!(
        cleaning.contains("example.com/wipe (its pass is for release")
            && cleaning.contains(", example.com/power-off (a cleaner passes"),
        "{cleaning}"
    );
    let note = env.wait_event("Server", "s1", "Normal", "Cleaning").await;
    assert!(
        note.contains("example.com/wipe, example.com/power-off"),
        "{note}"
    );
    let why = "0/1 servers can serve this claim: 1 is being cleaned.";
    env.wait_claim("b", "told the server is being cleaned", |c| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Bound"))
            .is_some_and(|c| c.message == why)
    })
    .await;

    pass_gate(&env, "s1", "example.com/power-off").await;
    // Only wipe is left, and still for its stale pass: the controller has read the
    // power-off pass (the message before it also begins with wipe).
    env.wait_server("s1", "still Cleaning, for wipe alone", |s| {
        is_cleaning(s)
            && cleaning_message(s).is_some_and(|m| {
                m.contains("gates: example.com/wipe (its pass is for release")
                    && !m.contains("example.com/power-off")
            })
    })
    .await;
    assert_eq!(
        phase(&env.claim("b").await.unwrap()),
        Some(ClaimPhase::Pending)
    );
    wait_metric(metrics, "server_binder_servers{phase=\"Cleaning\"} 1").await;

    pass_gate(&env, "s1", "example.com/wipe").await;
    env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
    env.wait_event("Server", "s1", "Normal", "Cleaned").await;
    wait_metric(metrics, "server_binder_cleaning_duration_seconds_count 1").await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// The controller's `--release-gates` apply to a server that names none.
#[tokio::test]
async fn the_default_gates_apply_to_a_server_that_names_none() {
    let mut env = Env::new().await;
    env.start_with(Options {
        release_gates: vec!["example.com/wipe".into()],
        ..options(4)
    })
    .await;
    env.put_server(server("s1")).await;
    env.put_claim(claim("a").names("s1")).await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.delete_claim("a").await;
    env.wait_server("s1", "Cleaning", is_cleaning).await;
    pass_gate(&env, "s1", "example.com/wipe").await;
    env.wait_server("s1", "Available", |s| {
        server_phase(s) == Some(ServerPhase::Available) && !is_cleaning(s)
    })
    .await;
}

/// A crash (the API server fails every write from the k-th on, then the operator is
/// killed and restarted) at every write of a gated release: it converges to Cleaning,
/// never binds the waiting claim before the gates pass, and binds it after.
#[tokio::test]
async fn a_crash_after_any_write_of_a_gated_release_converges() {
    let covered = crash_after_each_write(
        6,
        4,
        "Cleaning",
        async |env: &mut Env| {
            tenant_on_a_gated_server(env).await;
        },
        async |env: &mut Env| env.delete_claim("a").await,
        async |env: &Env| env.server("s1").await.is_some_and(|s| is_cleaning(&s)),
        async |env: &Env, k| {
            env.wait_server(
                "s1",
                &format!("Cleaning after a crash after write {k}"),
                is_cleaning,
            )
            .await;
            assert_eq!(
                phase(&env.claim("b").await.unwrap()),
                Some(ClaimPhase::Pending)
            );
            pass_gate(env, "s1", "example.com/wipe").await;
            pass_gate(env, "s1", "example.com/power-off").await;
            env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
            let (servers, claims) = env.all().await;
            assert_invariants(&servers, &claims);
        },
    )
    .await;
    assert!(
        covered >= 2,
        "a gated release has two writes; covered {covered}"
    );
}

/// manifests/examples/cleaner.sh, run once with kubectl and jq against the embedded API
/// server, passes the gate of a server being cleaned: the waiting claim then binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_cleaner_passes_the_gate() {
    if !kubectl_present() || !tool_present("jq") {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1").gates(&["example.com/disk-wiped"]))
        .await;
    env.put_claim(claim("a").names("s1")).await;
    env.wait_claim_phase("a", ClaimPhase::Bound, "Bound").await;
    env.put_claim(claim("b")).await;
    env.delete_claim("a").await;
    env.wait_server("s1", "Cleaning", is_cleaning).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/examples/cleaner.sh");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .args([script, "example.com/disk-wiped"])
            .env("KUBECONFIG", &kubeconfig)
            .env("ONCE", "1")
            .output()
            .expect("sh runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("passed example.com/disk-wiped on s1"),
        "{stdout}"
    );
    env.wait_claim_phase("b", ClaimPhase::Bound, "Bound").await;
}
