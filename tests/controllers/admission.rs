//! The claim CRD's admission rule that keeps a Bound claim's server: removing
//! `spec.serverRef` is refused while the stored claim is Bound, by every way of writing
//! it, and allowed otherwise. The controllers are not running: what is staged stays.

use std::process::Command;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::json;
use server_binder::api::{ClaimPhase, ServerClaim};

use crate::controllers::stage::{ClaimExt, claim, server_ref};
use crate::controllers::support::*;

const MESSAGE: &str =
    "spec.serverRef cannot be removed from a Bound claim; delete the claim to release its server";

fn refused<T: std::fmt::Debug>(result: kube::Result<T>) -> Status {
    match result {
        Err(kube::Error::Api(e)) => *e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn assert_refused<T: std::fmt::Debug>(how: &str, result: kube::Result<T>) {
    let e = refused(result);
    assert_eq!(
        (e.code, e.reason.as_str()),
        (422, "Invalid"),
        "{how}: {e:?}"
    );
    assert!(e.message.contains(MESSAGE), "{how}: {}", e.message);
}

const WAYS: [&str; 3] = ["update", "merge patch", "JSON patch"];

/// Removes the ref one way: an update, a JSON merge patch or a JSON patch.
/// Writes the claim's stored phase through the status subresource, as the controller does.
async fn set_phase(env: &Env, name: &str, phase: &str) {
    env.claims()
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap_or_else(|e| panic!("status patch of {name}: {e}"));
}

async fn remove_ref(env: &Env, name: &str, way: &str) -> kube::Result<ServerClaim> {
    let claims = env.claims();
    let pp = PatchParams::default();
    match way {
        "update" => {
            let mut cleared = env.claim(name).await.expect("staged");
            cleared.spec.server_ref = None;
            claims.replace(name, &PostParams::default(), &cleared).await
        }
        "merge patch" => {
            let patch = Patch::Merge(json!({"spec": {"serverRef": null}}));
            claims.patch(name, &pp, &patch).await
        }
        _ => {
            let ops = json!([{"op": "remove", "path": "/spec/serverRef"}]);
            let patch = Patch::Json::<()>(serde_json::from_value(ops).unwrap());
            claims.patch(name, &pp, &patch).await
        }
    }
}

#[tokio::test]
async fn removing_the_server_ref_of_a_bound_claim_is_refused_every_way() {
    let env = Env::new().await;
    env.put_claim(claim("c").bound("s1")).await;
    for how in WAYS {
        assert_refused(how, remove_ref(&env, "c", how).await);
    }
    // The stored status counts, not the one sent: a main-resource write cannot claim the
    // claim is Pending on the way.
    let mut pending = env.claim("c").await.unwrap();
    pending.spec.server_ref = None;
    pending.status.as_mut().unwrap().phase = Some(ClaimPhase::Pending);
    assert_refused(
        "update with a Pending status",
        env.claims()
            .replace("c", &PostParams::default(), &pending)
            .await,
    );
    let c = env.claim("c").await.unwrap();
    assert_eq!(server_ref(&c), Some("s1"), "nothing was written");

    // Server-side apply of a manifest that no longer has the ref its manager applied.
    let ssa = PatchParams::apply("tenant");
    let applied = |spec: serde_json::Value| {
        Patch::Apply(json!({
            "apiVersion": "metal.binder.dev/v1alpha1", "kind": "ServerClaim",
            "metadata": {"name": "applied"}, "spec": spec,
        }))
    };
    env.claims()
        .patch(
            "applied",
            &ssa,
            &applied(json!({"serverRef": {"name": "s2"}})),
        )
        .await
        .expect("applied");
    set_phase(&env, "applied", "Bound").await;
    // Apply removes only the field it owned (`serverRef.name`), leaving `serverRef: {}`,
    // which the schema refuses before the rule runs: refused all the same.
    let e = refused(
        env.claims()
            .patch("applied", &ssa, &applied(json!({})))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
    assert_eq!(server_ref(&env.claim("applied").await.unwrap()), Some("s2"));
}

#[tokio::test]
async fn removing_the_server_ref_of_a_pending_or_lost_claim_is_allowed() {
    let env = Env::new().await;
    for (name, phase, reason) in [
        ("pending", ClaimPhase::Pending, "WaitingForServer"),
        ("lost", ClaimPhase::Lost, "ClaimLost"),
    ] {
        env.put_claim(claim(name).chose("s1").controller_status(phase, reason))
            .await;
        for how in WAYS {
            let c = remove_ref(&env, name, how)
                .await
                .unwrap_or_else(|e| panic!("{name}, {how}: {e}"));
            assert_eq!(server_ref(&c), None, "{name}, {how}");
            // Put the ref back for the next way.
            env.claims()
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"serverRef": {"name": "s1"}}})),
                )
                .await
                .unwrap();
        }
    }
    // A claim that has no status yet (the controller has not seen it) may drop it too.
    env.put_claim(claim("fresh").names("s1")).await;
    let c = env
        .claims()
        .patch(
            "fresh",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serverRef": null}})),
        )
        .await
        .expect("a claim without status drops its ref");
    assert_eq!(server_ref(&c), None);
}

#[tokio::test]
async fn status_writes_on_a_bound_claim_pass_and_a_claim_no_longer_bound_may_drop_its_ref() {
    let env = Env::new().await;
    env.put_claim(claim("c").bound("s1")).await;
    // The claim controller's writes: the whole status through `/status`, a merge patch of it.
    let mut c = env.claim("c").await.unwrap();
    c.status.as_mut().unwrap().phase = Some(ClaimPhase::Lost);
    env.claims()
        .replace_status("c", &PostParams::default(), &c)
        .await
        .expect("status update");
    set_phase(&env, "c", "Bound").await;
    // Other spec edits of a Bound claim still pass.
    env.claims()
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}})),
        )
        .await
        .expect("a spec edit that keeps the ref");
    // Once the stored phase is no longer Bound, the ref may go.
    set_phase(&env, "c", "Lost").await;
    let c = env
        .claims()
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"serverRef": null}})),
        )
        .await
        .expect("a Lost claim drops its ref");
    assert_eq!(server_ref(&c), None);
}

fn kubectl_fails(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("kubectl runs");
    assert!(!out.status.success(), "kubectl {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

// kubectl runs as a blocking child process: the in-process API server needs worker
// threads of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_patch_and_apply_cannot_remove_a_bound_claims_server_ref() {
    if !kubectl_present() {
        return;
    }
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.apiserver.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = |path: &str, spec: &str| {
        let file = dir.path().join(path);
        let yaml = format!(
            "apiVersion: metal.binder.dev/v1alpha1\nkind: ServerClaim\nmetadata:\n  name: c\n  namespace: {NS}\nspec:\n{spec}"
        );
        std::fs::write(&file, yaml).unwrap();
        file.display().to_string()
    };
    let with_ref = manifest("with.yaml", "  serverRef:\n    name: s1\n");
    let without_ref = manifest("without.yaml", "  tolerations: []\n");
    kubectl(&kubeconfig, &["apply", "-f", &with_ref]);
    set_phase(&env, "c", "Bound").await;

    let patch = ["patch", "serverclaim", "c", "-n", NS, "--type", "merge"];
    let err = kubectl_fails(
        &kubeconfig,
        &[&patch[..], &["-p", r#"{"spec":{"serverRef":null}}"#]].concat(),
    );
    assert!(err.contains(MESSAGE), "{err}");
    // Client-side apply: the last-applied manifest had the ref, this one has none.
    let err = kubectl_fails(&kubeconfig, &["apply", "-f", &without_ref]);
    assert!(err.contains(MESSAGE), "{err}");
    assert_eq!(server_ref(&env.claim("c").await.unwrap()), Some("s1"));
}

/// The model check explores a tenant's writes through `admits_claim_update`, its copy of
/// the claim CRD's rules; here every write it can make, from every stored claim it can
/// meet, goes through the API server's real CEL, and the two must give the same verdict.
#[tokio::test]
async fn the_model_s_copy_of_the_claim_rules_agrees_with_admission() {
    use server_binder::api::ServerRef;

    let env = Env::new().await;
    let refs = [None, Some("s1"), Some("s2")];
    let racks = [None, Some("r1"), Some("r2")];
    let phases = [
        None,
        Some(ClaimPhase::Pending),
        Some(ClaimPhase::Bound),
        Some(ClaimPhase::Lost),
    ];
    let mut n = 0;
    for phase in phases {
        for (old_ref, old_rack) in refs.iter().flat_map(|r| racks.iter().map(move |k| (r, k))) {
            for (new_ref, new_rack) in refs.iter().flat_map(|r| racks.iter().map(move |k| (r, k))) {
                n += 1;
                let mut draft = claim(&format!("c{n}"));
                if let Some(r) = old_ref {
                    draft = draft.names(r);
                }
                if let Some(rack) = old_rack {
                    draft = draft.selects(&[("rack", rack)]);
                }
                let result = update_staged(&env, draft, phase, |new| {
                    new.spec.server_ref = new_ref.map(|n| ServerRef { name: n.into() });
                    new.spec.server_selector = new_rack.map(|rack| {
                        let mut with = claim("x").selects(&[("rack", rack)]);
                        with.spec.server_selector.take().unwrap()
                    });
                })
                .await;
                assert!(
                    result.agrees,
                    "{phase:?}: ref {old_ref:?} -> {new_ref:?}, rack {old_rack:?} -> {new_rack:?}: {:?}",
                    result.answer
                );
            }
        }
    }
    assert_eq!(n, 4 * 9 * 9);
    // The class: immutable once set, and never added to a Bound claim.
    let classes = [None, Some("gpu"), Some("cpu")];
    for phase in phases {
        for old_class in classes {
            for new_class in classes {
                n += 1;
                let mut draft = claim(&format!("c{n}"));
                draft.spec.server_class_name = old_class.map(str::to_string);
                let result = update_staged(&env, draft, phase, |new| {
                    new.spec.server_class_name = new_class.map(str::to_string);
                })
                .await;
                assert!(
                    result.agrees,
                    "{phase:?}: class {old_class:?} -> {new_class:?}: {:?}",
                    result.answer
                );
            }
        }
    }
}

/// What the API server answered an update, and whether the model's copy of the rules
/// ([`admits_claim_update`]) gives the same verdict.
struct Verdict {
    agrees: bool,
    answer: kube::Result<ServerClaim>,
}

/// Stores `draft` (with `phase` staged as the controller's status), changes it by
/// `change`, and sends the update.
async fn update_staged(
    env: &Env,
    draft: ServerClaim,
    phase: Option<ClaimPhase>,
    change: impl FnOnce(&mut ServerClaim),
) -> Verdict {
    use crate::controllers::claim_admission::admits_claim_update;
    let draft = match phase {
        Some(p) => draft.controller_status(p, "Staged"),
        None => draft,
    };
    let old = env.put_claim(draft).await;
    let mut new = old.clone();
    change(&mut new);
    let answer = env
        .claims()
        .replace(&old.name_any(), &PostParams::default(), &new)
        .await;
    Verdict {
        agrees: answer.is_ok() == admits_claim_update(&old, &new),
        answer,
    }
}
