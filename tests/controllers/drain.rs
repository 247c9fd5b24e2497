//! `server-binder cordon`, `uncordon` and `drain` through the real kubectl's plugin
//! mechanism (as `kubectl server-binder drain …`), against the embedded API server with
//! the real controllers: what each writes, what drain shows it will evict and when, the
//! wait until the claims are off, its timeout, and bad usage.

use std::process::{Command, Output, Stdio};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use server_binder::api::names::TAINT_DRAIN;
use server_binder::api::{
    ClaimPhase, Server, ServerClaim, ServerPhase, TaintEffect, Toleration, TolerationOperator,
};
use server_binder::apiserver::RequestMatcher;
use server_binder::runtime::drain::{EXIT_TIMED_OUT, USER_AGENT_VALUE};

use crate::controllers::explain::{Plugin, stderr, stdout};
use crate::controllers::stage::*;
use crate::controllers::support::*;

/// `claim` with a toleration of the drain taint's `Evict` effect, for `seconds` (none:
/// for ever).
fn tolerating(mut claim: ServerClaim, seconds: Option<i64>) -> ServerClaim {
    claim.spec.tolerations.push(Toleration {
        key: TAINT_DRAIN.into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: Some(TaintEffect::Evict),
        toleration_seconds: seconds,
    });
    claim
}

/// The server's drain taint, once it has one.
fn drain_taint(s: &Server) -> Option<&server_binder::api::Taint> {
    let mut taints = s.spec.taints.iter();
    taints.find(|t| t.key == TAINT_DRAIN && t.effect == TaintEffect::Evict)
}

/// How many writes the verbs made so far.
fn verb_writes(env: &Env) -> usize {
    let log = env.apiserver.request_log().entries();
    log.iter()
        .filter(|r| r.user_agent == USER_AGENT_VALUE && r.verb == "patch")
        .count()
}

/// `kubectl server-binder ARGS`, which must succeed; its standard output.
async fn verb(plugin: &Plugin, args: &[&str]) -> String {
    let out = run(plugin, args).await;
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

async fn run(plugin: &Plugin, args: &[&str]) -> Output {
    let mut all = vec!["server-binder"];
    all.extend(args);
    plugin.run(&all).await
}

/// Each claim, naming its server, created and waited for until bound to it.
async fn bound(env: &Env, pairs: &[(ServerClaim, &str)]) {
    for (claim, server) in pairs {
        env.put_claim(claim.clone().names(server)).await;
    }
    for (claim, server) in pairs {
        let name = claim.metadata.name.as_deref().expect("a name");
        wait_bound(env, name, server).await;
    }
}

/// Cordon then uncordon two servers of a rack by selector: each writes `unclaimable`
/// once, says so as kubectl says it of nodes, and changes nothing the second time; a
/// server of another rack is left alone; a name that does not exist writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_verbs_cordon_and_uncordon_a_rack_by_selector() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    for (name, rack) in [("a1", "r1"), ("a2", "r1"), ("b1", "r2")] {
        env.create_server(name, &[("rack", rack)]).await;
    }
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    let unclaimable = async |name: &str| env.server(name).await.expect(name).spec.unclaimable;

    let text = verb(&plugin, &["cordon", "-l", "rack=r1"]).await;
    assert_eq!(text, "server/a1 cordoned\nserver/a2 cordoned\n");
    assert!(unclaimable("a1").await && unclaimable("a2").await);
    assert!(!unclaimable("b1").await);
    assert_eq!(verb_writes(&env), 2);
    let text = verb(&plugin, &["cordon", "-l", "rack=r1"]).await;
    assert_eq!(
        text,
        "server/a1 already cordoned\nserver/a2 already cordoned\n"
    );
    assert_eq!(verb_writes(&env), 2, "nothing to write");
    let a1 = env.server("a1").await.expect("a1");
    let managers = a1.metadata.managed_fields.iter().flatten();
    let managers: Vec<_> = managers.filter_map(|m| m.manager.as_deref()).collect();
    assert!(managers.contains(&"server-binder-drain"), "{managers:?}");

    let text = verb(&plugin, &["uncordon", "-l", "rack=r1"]).await;
    assert_eq!(text, "server/a1 uncordoned\nserver/a2 uncordoned\n");
    assert!(!unclaimable("a1").await && !unclaimable("a2").await);
    let text = verb(&plugin, &["uncordon", "-l", "rack=r1"]).await;
    assert_eq!(
        text,
        "server/a1 already uncordoned\nserver/a2 already uncordoned\n"
    );

    let out = run(&plugin, &["cordon", "b1", "nope"]).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("\"nope\" not found"), "{out:?}");
    assert!(
        !unclaimable("b1").await,
        "nothing written when a name is wrong"
    );
    let out = run(&plugin, &["cordon", "-l", "rack=r9"]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("No servers match"), "{out:?}");
    assert_eq!(verb_writes(&env), 4);
}

/// A dry run shows the claim a drain would evict and its deadline, an hour after now
/// by its toleration, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_dry_run_shows_the_claim_and_its_deadline_and_writes_nothing() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    env.put_server(server("s1")).await;
    bound(&env, &[(tolerating(claim("web-0"), Some(3600)), "s1")]).await;
    let before = env.server("s1").await.expect("s1");
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());

    let started = Timestamp::now();
    let text = verb(&plugin, &["drain", "s1", "--dry-run"]).await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "server/s1 cordoned (dry run)",
            "server/s1 tainted metal.binder.dev/drain:Evict (dry run)"
        ],
        "{text}"
    );
    let evicting = format!("evicting {NS}/web-0 from s1 at ");
    let rest = lines[2].strip_prefix(&evicting).expect(&text);
    let (deadline, rest) = rest.split_once(' ').expect(&text);
    let deadline: Timestamp = deadline.parse().expect("a time");
    let ahead = deadline.duration_since(started);
    let hour = SignedDuration::from_secs(3600);
    assert!(ahead >= hour - SignedDuration::from_secs(2), "{text}");
    assert!(ahead <= hour + SignedDuration::from_secs(60), "{text}");
    // The stamp is a whole second, as the server controller's: up to one before now.
    assert!(
        ["(in 1h) (dry run)", "(in 59m 59s) (dry run)"].contains(&rest),
        "{text}"
    );

    assert_eq!(verb_writes(&env), 0);
    let after = env.server("s1").await.expect("s1");
    assert_eq!(after.spec, before.spec);
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
}

/// Drain with --wait of two bound servers whose claims tolerate nothing: both claims
/// end Lost / Evicted, a line says so for each, and the servers, released and still
/// tainted and cordoned, go to no new claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_wait_evicts_two_claims_and_the_servers_stay_out() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    for name in ["s1", "s2"] {
        env.create_server(name, &[("rack", "r1")]).await;
    }
    bound(&env, &[(claim("c1"), "s1"), (claim("c2"), "s2")]).await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());

    let args = ["drain", "-l", "rack=r1", "--wait", "--timeout", "30s"];
    let text = verb(&plugin, &args).await;
    for line in [
        format!("evicting {NS}/c1 from s1 now"),
        format!("evicting {NS}/c2 from s2 now"),
        "(1 of 2)".to_string(),
        "(2 of 2)".to_string(),
        "server/s1 drained\nserver/s2 drained\n".to_string(),
    ] {
        assert!(text.contains(&line), "{line:?} in:\n{text}");
    }
    assert!(
        text.contains(&format!("evicted {NS}/c1 from s1 (")),
        "{text}"
    );
    for name in ["c1", "c2"] {
        let c = env.claim(name).await.expect(name);
        assert!(is(&c, ClaimPhase::Lost, "Evicted"), "{c:?}");
    }
    for name in ["s1", "s2"] {
        let s = env
            .wait_server_phase(name, ServerPhase::Available, "Available")
            .await;
        assert!(s.spec.unclaimable && drain_taint(&s).is_some(), "{s:?}");
    }
    env.put_claim(claim("c3")).await;
    env.wait_claim_phase("c3", ClaimPhase::Pending, "NoMatchingServer")
        .await;
    for name in ["s1", "s2"] {
        let s = env.server(name).await.expect(name);
        assert!(s.spec.server_claim_ref.is_none(), "{s:?}");
    }
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// A claim tolerating the drain taint for ever: drain --wait runs out of time, exits 4
/// and says why the claim stays; drain --grace then sets a hard deadline on the same
/// taint (its time kept), and the claim is evicted by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_wait_times_out_on_a_claim_tolerating_for_ever_then_grace_evicts_it() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    env.put_server(server("s1")).await;
    bound(&env, &[(tolerating(claim("db-0"), None), "s1")]).await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());

    let out = run(&plugin, &["drain", "s1", "--wait", "--timeout", "2s"]).await;
    assert_eq!(
        out.status.code(),
        Some(i32::from(EXIT_TIMED_OUT)),
        "{out:?}"
    );
    let stays = format!(
        "{NS}/db-0 on s1 will not be evicted: it tolerates the drain taint for ever; --grace sets a hard deadline"
    );
    assert!(stdout(&out).contains(&stays), "{}", stdout(&out));
    let why = format!(
        "{NS}/db-0 on s1: tolerates the drain taint for ever; --grace sets a hard deadline"
    );
    let err = stderr(&out);
    assert!(
        err.contains("timed out after 2s with 1 of 1 claims still on their servers"),
        "{err}"
    );
    assert!(err.contains(&why), "{err}");
    let s1 = env
        .wait_server("s1", "the drain taint stamped", |s| {
            drain_taint(s).is_some_and(|t| t.time_added.is_some())
        })
        .await;
    let added = drain_taint(&s1).and_then(|t| t.time_added.clone());

    let text = verb(
        &plugin,
        &["drain", "s1", "--grace", "1s", "--wait", "--timeout", "30s"],
    )
    .await;
    assert!(text.contains("server/s1 hard deadline "), "{text}");
    assert!(
        text.contains(&format!("evicting {NS}/db-0 from s1 ")),
        "{text}"
    );
    assert!(
        text.contains(&format!("evicted {NS}/db-0 from s1 (1 of 1)")),
        "{text}"
    );
    let db = env.claim("db-0").await.expect("db-0");
    assert!(is(&db, ClaimPhase::Lost, "Evicted"), "{db:?}");
    let s1 = env.server("s1").await.expect("s1");
    let taint = drain_taint(&s1).expect("the drain taint");
    assert_eq!(taint.time_added, added, "the same taint, its time kept");
    assert!(taint.hard_deadline.is_some(), "{taint:?}");
    assert_eq!(s1.spec.taints.len(), 1, "{:?}", s1.spec.taints);
}

/// Uncordon after a drain removes the taint and the cordon, and a new claim binds the
/// server again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_then_uncordon_makes_the_server_claimable_again() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    env.put_server(server("s1").taint("example.com/other"))
        .await;
    bound(&env, &[(claim("c1").tolerates("example.com/other"), "s1")]).await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    verb(&plugin, &["drain", "s1", "--wait", "--timeout", "30s"]).await;
    env.wait_server_phase("s1", ServerPhase::Available, "Available")
        .await;

    let text = verb(&plugin, &["uncordon", "s1"]).await;
    assert_eq!(
        text,
        "server/s1 uncordoned\nserver/s1 untainted metal.binder.dev/drain:Evict\n"
    );
    let s1 = env.server("s1").await.expect("s1");
    assert!(!s1.spec.unclaimable, "{s1:?}");
    let keys: Vec<&str> = s1.spec.taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["example.com/other"], "the other taint kept");
    env.put_claim(claim("c2").tolerates("example.com/other"))
        .await;
    wait_bound(&env, "c2", "s1").await;
}

/// A write refused for a conflict (409: the server changed since it was read) is read
/// again and retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_retries_a_write_that_conflicted() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    env.put_server(server("s1").taint("example.com/other"))
        .await;
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    let patches = RequestMatcher::any()
        .verb("patch")
        .user_agent(USER_AGENT_VALUE);
    env.apiserver.faults().fail(patches, 2, 409);
    let text = verb(&plugin, &["drain", "s1"]).await;
    let expected = "server/s1 cordoned\nserver/s1 tainted metal.binder.dev/drain:Evict\n\
        server/s1 has no bound claim\n";
    assert_eq!(text, expected);
    assert_eq!(verb_writes(&env), 3, "two refused, the third written");
    let s1 = env.server("s1").await.expect("s1");
    let keys: Vec<&str> = s1.spec.taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["example.com/other", TAINT_DRAIN]);
    assert!(s1.spec.unclaimable);
}

/// Bad usage exits 2 with a message, before any cluster is reached.
#[test]
fn drain_verbs_refuse_bad_usage() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["drain"],
            "name the servers, or select them with -l SELECTOR",
        ),
        (&["cordon", "s1", "-l", "rack=r1"], "not both"),
        (
            &["uncordon", "-l", ""],
            "an empty selector selects every server",
        ),
        (&["drain", "s1", "--grace", "5x"], "e.g. 30s, 5m or 1h30m"),
        (&["drain", "s1", "--timeout", "5m"], "--wait"),
    ];
    for (args, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_server-binder"))
            .args(args)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// A dry run of a rack under a tenant's budget of one says which eviction the budget
/// holds: the first claim goes, the second waits (the claim controller's own rule, the
/// drain's first eviction counted), and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_dry_run_says_which_eviction_a_budget_holds() {
    if !kubectl_present() {
        return;
    }
    let mut env = Env::new().await;
    env.start(2).await;
    for name in ["a1", "a2"] {
        env.create_server(name, &[("rack", "r1")]).await;
    }
    let web = |name: &str| {
        let mut c = claim(name);
        let labels = c.metadata.labels.get_or_insert_with(Default::default);
        labels.insert("app".into(), "web".into());
        c
    };
    bound(&env, &[(web("w0"), "a1"), (web("w1"), "a2")]).await;
    let budget: server_binder::api::ServerDisruptionBudget =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "metal.binder.dev/v1alpha1",
            "kind": "ServerDisruptionBudget",
            "metadata": {"name": "web", "namespace": crate::common::names::NS},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
        }))
        .expect("a budget");
    kube::Api::namespaced(env.client.clone(), crate::common::names::NS)
        .create(&kube::api::PostParams::default(), &budget)
        .await
        .expect("the tenant's budget");
    let plugin = Plugin::install(|p| env.apiserver.write_kubeconfig(p).unwrap());
    let text = verb(&plugin, &["drain", "-l", "rack=r1", "--dry-run"]).await;
    assert!(
        text.contains("evicting team-a/w0 from a1 now (dry run)"),
        "{text}"
    );
    assert!(
        text.contains(
            "team-a/w1 on a2: due now, but disruption budget web (maxUnavailable 1) allows no eviction now"
        ),
        "{text}"
    );
    assert_eq!(verb_writes(&env), 0, "a dry run writes nothing");
}
