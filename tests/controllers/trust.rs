//! Tenants are untrusted (docs/binding.md, "Trust"): the six ways through that were found
//! from outside, each end to end against the real controllers over HTTP. A tenant writes
//! its claims' spec, labels and annotations; only the controllers and admins write
//! servers and status; cleaners write gate conditions. Each test stages what the tenant,
//! the admin or the cleaner did, and fails as soon as a claim is Bound where it must
//! never be.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use server_binder::api::names::*;
use server_binder::api::{ClaimPhase, Server, ServerClaim, ServerPhase};
use server_binder::controllers::Options;

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// Waits until `check` holds for the claim, failing at once if it is ever Bound.
async fn wait_never_bound(env: &Env, name: &str, what: &str, check: impl Fn(&ServerClaim) -> bool) {
    env.wait_claim(name, what, |c| {
        assert_ne!(
            phase(c),
            Some(ClaimPhase::Bound),
            "claim {name} is Bound to {:?}, which it may never have: {c:?}",
            server_ref(c)
        );
        check(c)
    })
    .await;
}

/// 1. A forged `bind-completed` on a claim naming a free server it may not have (cordoned,
/// tainted, not matching its own selector) is dropped, and the claim is told why; nothing
/// is "restored"; and it does not outrank an older user-chosen claim for a free server.
#[tokio::test]
async fn a_forged_bind_completed_takes_no_server() {
    let mut env = Env::new().await;
    env.put_server(server("cordoned").unclaimable()).await;
    env.put_server(server("gpu").taint("gpu")).await;
    env.put_server(server("rack-2").labelled(&[("rack", "r2")]))
        .await;
    env.put_server(server("free")).await;
    for (name, target) in [("f1", "cordoned"), ("f2", "gpu")] {
        env.put_claim(claim(name).names(target).bind_completed())
            .await;
    }
    env.put_claim(
        claim("f3")
            .selects(&[("rack", "r1")])
            .names("rack-2")
            .bind_completed(),
    )
    .await;
    // An honest user-chosen claim for `free`, older and sorting first, and a forger.
    env.put_claim(claim("a-user").names("free")).await;
    env.put_claim(claim("z-forger").names("free").bind_completed())
        .await;
    env.start_with_endpoint(4).await;

    for name in ["f1", "f2", "f3"] {
        wait_never_bound(
            &env,
            name,
            "Pending / ServerMismatch, bind-completed dropped",
            |c| {
                is(c, ClaimPhase::Pending, "ServerMismatch")
                    && !has_annotation(c, ANNOTATION_BIND_COMPLETED)
            },
        )
        .await;
    }
    let note = env
        .wait_event("ServerClaim", "f1", "Warning", "BindCompletedDropped")
        .await;
    assert!(note.contains("no bind of this claim is recorded"), "{note}");
    wait_bound(&env, "a-user", "free").await;
    wait_never_bound(&env, "z-forger", "Pending / ServerAlreadyClaimed", |c| {
        is(c, ClaimPhase::Pending, "ServerAlreadyClaimed")
    })
    .await;
    for name in ["cordoned", "gpu", "rack-2"] {
        let s = env
            .wait_server(name, "Available with no ref", |s| {
                server_phase_reason(s).0 == Some(ServerPhase::Available)
            })
            .await;
        assert_eq!(claim_ref(&s), None, "{name} was given to a forger");
    }
    let restored = [("controller", "server"), ("case", "server_ref_restored")];
    assert_eq!(env.metric("server_binder_repairs_total", &restored), 0.0);
    let f3 = env.claim("f3").await.unwrap();
    assert!(
        !bound_message(&f3).contains("no longer match the claim's serverSelector"),
        "{f3:?}"
    );
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// 2. A `Lost` claim (its server force-deleted) re-pointed by its tenant at a cordoned or
/// tainted free server does not take it: a record of a bind names the server it was for.
#[tokio::test]
async fn a_lost_claim_re_pointed_takes_no_server() {
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("old")).await;
    env.put_server(server("cordoned").unclaimable()).await;
    env.put_server(server("gpu").taint("gpu")).await;
    env.put_claim(claim("lost")).await;
    wait_bound(&env, "lost", "old").await;
    // An admin force-deletes the machine: the finalizer goes by hand.
    env.delete_server("old").await;
    env.servers()
        .patch(
            "old",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed by hand");
    env.wait_claim_phase("lost", ClaimPhase::Lost, "ServerMissing")
        .await;

    for target in ["cordoned", "gpu"] {
        let claims = env.claims();
        let clear = Patch::Merge(json!({"spec": {"serverRef": null}}));
        claims
            .patch("lost", &PatchParams::default(), &clear)
            .await
            .expect("a Lost claim may drop its serverRef");
        // The controller drops the `pre-bound` of the ref that went, so the next ref is
        // the tenant's own (docs/binding.md, "Stale pre-bound").
        wait_never_bound(&env, "lost", "pre-bound dropped with the ref", |c| {
            !has_annotation(c, ANNOTATION_PRE_BOUND)
        })
        .await;
        let point = Patch::Merge(json!({"spec": {"serverRef": {"name": target}}}));
        claims
            .patch("lost", &PatchParams::default(), &point)
            .await
            .expect("and name another server");
        wait_never_bound(
            &env,
            "lost",
            &format!("told it cannot have {target}"),
            |c| server_ref(c) == Some(target) && bound_message(c).contains(target),
        )
        .await;
        let s = env.server(target).await.unwrap();
        assert_eq!(claim_ref(&s), None, "{target} was given to the Lost claim");
    }
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

// ---- Release gates ----

/// The release a server is being cleaned after: the `cleaning` annotation's value.
fn release_of(s: &Server) -> Option<i64> {
    s.annotations().get(ANNOTATION_CLEANING)?.parse().ok()
}

fn server_phase(s: &Server) -> Option<ServerPhase> {
    s.status.as_ref().and_then(|s| s.phase)
}

fn cleaning(s: &Server) -> bool {
    server_phase(s) == Some(ServerPhase::Cleaning) && release_of(s).is_some()
}

/// A cleaner's pass of `gate` naming `release` (its `observedGeneration`), written with
/// the resourceVersion read, as docs/operations.md's cleaner contract says.
async fn pass(env: &Env, server: &str, gate: &str, release: i64) {
    let api = env.servers();
    let written = || async {
        let mut s = api.get(server).await.expect("the server");
        let status = s.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != gate);
        status.conditions.push(Condition {
            type_: gate.into(),
            status: "True".into(),
            observed_generation: Some(release),
            reason: "Passed".into(),
            message: "passed by the test's cleaner".into(),
            last_transition_time: Time(Timestamp::now()),
        });
        api.replace_status(server, &PostParams::default(), &s)
            .await
            .is_ok()
    };
    eventually(&format!("{gate} passed on {server}"), DEADLINE, written).await;
}

/// Binds `claim` to `s1` and deletes it; returns the release `s1` is then cleaned after.
async fn bind_and_leave(env: &Env, claim_name: &str) -> i64 {
    env.put_claim(claim(claim_name).names("s1")).await;
    wait_bound(env, claim_name, "s1").await;
    env.delete_claim(claim_name).await;
    let s1 = env.wait_server("s1", "Cleaning", cleaning).await;
    release_of(&s1).expect("a release")
}

/// 3. A gate may not be named after a condition the controllers write (`Cleaning`,
/// `Bound`), nor lack a domain, nor sit in the binder's own domain: admission refuses the
/// server, and the operator refuses such a default gate before it starts.
#[tokio::test]
async fn a_gate_named_like_a_controller_condition_is_refused() {
    let mut env = Env::new().await;
    for bad in ["Cleaning", "Bound", "disk-wiped", "metal.binder.dev/wiped"] {
        let draft = as_new(server("s1").gates(&[bad]));
        let refused = env.servers().create(&PostParams::default(), &draft).await;
        match refused {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{bad}: {e:?}");
                assert!(e.message.contains("releaseGates"), "{bad}: {}", e.message);
                assert!(e.message.contains("example.com/"), "{bad}: {}", e.message);
            }
            other => panic!("gate {bad:?} was accepted: {other:?}"),
        }
    }
    env.put_server(server("s1").gates(&["example.com/disk-wiped"]))
        .await;
    // The CRD's CEL rule and `check_gate_name` (for --release-gates) agree on every name.
    let long = |n: usize| format!("a.b/{}", "x".repeat(n));
    let names = [
        "a.b/c",
        "1.2/3",
        "a.b/x.y_z-1",
        "wipe.example.com/Power_Off.1",
        "metal.binder.dev.example.com/x",
        "Example.com/x",
        "example.com/-x",
        "example.com/x-",
        "example.com/",
        "a_b.c/x",
        "-a.b/x",
        "a..b/x",
        "a.b/x/y",
        "x.metal.binder.dev/y",
        "example/x",
        "",
    ];
    let names = names
        .iter()
        .map(|n| n.to_string())
        .chain([long(63), long(64)]);
    for (i, name) in names.enumerate() {
        let draft = as_new(server(&format!("n{i}")).gates(&[&name]));
        let admitted = env.servers().create(&PostParams::default(), &draft).await;
        let checked = server_binder::binding::state::gates::check_gate_name(&name);
        assert_eq!(
            admitted.is_ok(),
            checked.is_ok(),
            "{name:?}: admission {admitted:?}, --release-gates {checked:?}"
        );
    }
    let error = server_binder::runtime::operator::start(
        env.client.clone(),
        server_binder::runtime::operator::OperatorConfig {
            options: Options {
                release_gates: vec!["Cleaning".into()],
                ..options(4)
            },
            metrics_addr: None,
            identity: "test".into(),
            leader_election: None,
        },
    )
    .await
    .err()
    .expect("the operator refuses a default gate named Cleaning");
    assert!(error.to_string().contains("Cleaning"), "{error}");
    env.stop().await;
}

/// 4. The gates in force are fixed at the release: a restart with another
/// `--release-gates` leaves a server that is being cleaned waiting for the gates it was
/// released with.
#[tokio::test]
async fn a_restart_with_other_default_gates_keeps_the_cleaning_in_progress() {
    let mut env = Env::new().await;
    env.start_with(Options {
        release_gates: vec!["example.com/wipe".into()],
        ..options(4)
    })
    .await;
    env.put_server(server("s1")).await;
    let release = bind_and_leave(&env, "a").await;
    env.stop().await;
    env.start(4).await; // no default gates now
    env.put_claim(claim("b")).await;
    wait_never_bound(&env, "b", "waits: s1 is being cleaned", |c| {
        is(c, ClaimPhase::Pending, "NoMatchingServer") && bound_message(c).contains("being cleaned")
    })
    .await;
    env.wait_server("s1", "still Cleaning for example.com/wipe", |s| {
        cleaning(s) && release_of(s) == Some(release)
    })
    .await;
    pass(&env, "s1", "example.com/wipe", release).await;
    wait_bound(&env, "b", "s1").await;
}

/// Runs manifests/examples/cleaner.sh for one round against the embedded API server,
/// with `CLEAN_COMMAND` as its cleaning if given.
fn example_cleaner(env: &Env, dir: &std::path::Path, clean: Option<&str>) -> std::process::Child {
    let kubeconfig = dir.join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/examples/cleaner.sh");
    let mut cmd = std::process::Command::new("sh");
    cmd.args([script, "example.com/wipe"])
        .env("KUBECONFIG", &kubeconfig)
        .env("ONCE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(clean) = clean {
        cmd.env("CLEAN_COMMAND", clean);
    }
    cmd.spawn().expect("sh runs")
}

async fn finished(child: std::process::Child) -> String {
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("its output"))
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the cleaner failed: {text}");
    text
}

/// 5. A pass names the release it cleaned: the example cleaner, slow (it read the first
/// release and is still wiping) and fast (it passes that release), with the next tenant
/// coming and leaving in between. The slow one's late pass never counts for the second
/// release; a late pass written anyway (a cleaner that does not look again) does not
/// either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_pass_for_an_earlier_release_never_counts() {
    if !kubectl_present() || !tool_present("jq") {
        return;
    }
    let mut env = Env::new().await;
    env.start(4).await;
    env.put_server(server("s1").gates(&["example.com/wipe"]))
        .await;
    let first = bind_and_leave(&env, "a").await;
    let dir = tempfile::tempdir().unwrap();
    // The slow cleaner's wipe: says it started, then waits for the test's go-ahead.
    let (started, go) = (dir.path().join("started"), dir.path().join("go"));
    let wipe = dir.path().join("slow-wipe.sh");
    std::fs::write(
        &wipe,
        format!(
            "touch {started}\nfor i in $(seq 600); do [ -e {go} ] && exit 0; sleep 0.1; done\nexit 1\n",
            started = started.display(),
            go = go.display()
        ),
    )
    .unwrap();
    let slow_clean = format!("sh {}", wipe.display());
    let slow = example_cleaner(&env, dir.path(), Some(&slow_clean));
    eventually("the slow cleaner is wiping", DEADLINE, || {
        let started = started.exists();
        async move { started }
    })
    .await;
    let fast = finished(example_cleaner(&env, dir.path(), None)).await;
    assert!(
        fast.contains(&format!(
            "passed example.com/wipe on s1 for release {first}"
        )),
        "{fast}"
    );

    let second = bind_and_leave(&env, "b").await;
    assert!(second > first, "a new release: {first} then {second}");
    env.put_claim(claim("c")).await;
    std::fs::write(&go, "").unwrap();
    let slow = finished(slow).await;
    assert!(slow.contains("not passing example.com/wipe"), "{slow}");
    // A cleaner that does not look again writes its pass for the first release anyway.
    pass(&env, "s1", "example.com/wipe", first).await;
    wait_never_bound(&env, "c", "waits: s1 is being cleaned", |c| {
        is(c, ClaimPhase::Pending, "NoMatchingServer") && bound_message(c).contains("being cleaned")
    })
    .await;
    let s1 = env
        .wait_server("s1", "Cleaning, naming the late pass's release", |s| {
            cleaning(s)
                && s.status.as_ref().is_some_and(|st| {
                    st.conditions.iter().any(|c| {
                        c.type_ == CONDITION_CLEANING
                            && c.message
                                .contains(&format!("its pass is for release {first}"))
                    })
                })
        })
        .await;
    assert_eq!(release_of(&s1), Some(second));
    let fast = finished(example_cleaner(&env, dir.path(), None)).await;
    assert!(fast.contains(&format!("for release {second}")), "{fast}");
    wait_bound(&env, "c", "s1").await;
}

/// 6. A server created with a `cleaning` annotation (restored from a backup, or
/// re-created from `kubectl get -o yaml`) converges: a cleaner following the contract
/// passes it, and a value no cleaner can copy is repaired, with an event.
#[tokio::test]
async fn a_server_re_created_while_cleaning_converges() {
    let mut env = Env::new().await;
    let mut restored = as_new(server("s1").gates(&["example.com/wipe"]));
    restored
        .annotations_mut()
        .insert(ANNOTATION_CLEANING.into(), "9".into());
    env.servers()
        .create(&PostParams::default(), &restored)
        .await
        .expect("created at generation 1");
    let mut mangled = as_new(server("s2").gates(&["example.com/wipe"]));
    mangled
        .annotations_mut()
        .insert(ANNOTATION_CLEANING.into(), "soon".into());
    env.servers()
        .create(&PostParams::default(), &mangled)
        .await
        .expect("created");
    env.start(4).await;
    env.put_claim(claim("c").names("s1")).await;
    env.put_claim(claim("d").names("s2")).await;

    let s1 = env.wait_server("s1", "Cleaning", cleaning).await;
    assert_eq!(release_of(&s1), Some(9));
    pass(&env, "s1", "example.com/wipe", 9).await;
    wait_bound(&env, "c", "s1").await;

    let s2 = env
        .wait_server("s2", "Cleaning, its release repaired", cleaning)
        .await;
    let note = env
        .wait_event("Server", "s2", "Warning", "CleaningRecordRepaired")
        .await;
    assert!(note.contains("soon"), "{note}");
    let release = release_of(&s2).expect("a number now");
    pass(&env, "s2", "example.com/wipe", release).await;
    wait_bound(&env, "d", "s2").await;
}
