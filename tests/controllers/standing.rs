//! A bind a tenant's edit cannot undo (docs/binding.md, the claim table's note [y]): a
//! Bound claim whose record and server agree gets `bind-completed` back and keeps its
//! server, whatever its class or quota says now, and a write the API server refuses is
//! not sent again before its back-off ends. Found by the chaos test on seeds CI does not
//! run (2082, 2206): a stripped claim of a class under quota retried a refused give-back
//! every 1.5 ms for as long as it lived.

use kube::api::{Api, PostParams};
use server_binder::api::names::{ANNOTATION_BIND_COMPLETED, ANNOTATION_PRE_BOUND};
use server_binder::api::{ClaimPhase, ServerClaim, ServerClass, ServerClassSpec, ServerSelector};

use crate::controllers::quotas::{create_quota, of_gpu};
use crate::controllers::stage::*;
use crate::controllers::support::*;

/// The class `gpu`: the servers labelled `pool=gpu`.
async fn create_pool_class(env: &Env) {
    let selector = ServerSelector {
        match_labels: [("pool".to_string(), "gpu".to_string())].into(),
        ..ServerSelector::default()
    };
    let spec = ServerClassSpec {
        server_selector: Some(selector),
        ..ServerClassSpec::default()
    };
    Api::<ServerClass>::all(env.client.clone())
        .create(&PostParams::default(), &ServerClass::new("gpu", spec))
        .await
        .expect("class created");
}

/// `a`, of class gpu, Bound to `s1` (in the class) under a quota of one gpu server.
async fn a_bound_under_class_and_quota(env: &mut Env) -> ServerClaim {
    create_pool_class(env).await;
    create_quota(env, 1).await;
    env.put_server(server("s1").labelled(&[("pool", "gpu")]))
        .await;
    env.put_server(server("s2").labelled(&[("pool", "gpu")]))
        .await;
    env.start(2).await;
    env.put_claim(of_gpu(claim("a"))).await;
    eventually("a Bound", DEADLINE, || async {
        env.claim("a")
            .await
            .is_some_and(|c| phase(&c) == Some(ClaimPhase::Bound))
    })
    .await;
    env.claim("a").await.expect("a")
}

/// Waits until `a` carries `bind-completed` again, failing at once if it ever stops
/// naming the server it was bound to or stops being Bound.
async fn a_completes_again(env: &Env, bound: &ServerClaim) -> ServerClaim {
    let on = server_ref(bound).map(str::to_string);
    env.wait_claim("a", "bind-completed back", |c| {
        assert_eq!(server_ref(c), on.as_deref(), "a lost its server: {c:?}");
        assert_eq!(phase(c), Some(ClaimPhase::Bound), "a left Bound: {c:?}");
        has_annotation(c, ANNOTATION_BIND_COMPLETED)
    })
    .await
}

/// The class deleted under a bound claim, then its tenant strips `bind-completed` and
/// `pre-bound`: the claim, whose record and server agree, gets `bind-completed` back and
/// keeps its server (it once went `ClassNotFound`, tried to withdraw its ref, and was
/// refused by admission forever).
#[tokio::test]
async fn a_stripped_bound_claim_keeps_its_server_whatever_its_class_says_now() {
    let mut env = Env::new().await;
    let bound = a_bound_under_class_and_quota(&mut env).await;
    Api::<ServerClass>::all(env.client.clone())
        .delete("gpu", &Default::default())
        .await
        .expect("class deleted");
    env.remove_claim_annotation("a", ANNOTATION_BIND_COMPLETED)
        .await;
    env.remove_claim_annotation("a", ANNOTATION_PRE_BOUND).await;
    let a = a_completes_again(&env, &bound).await;
    let s1 = env.server(server_ref(&a).unwrap()).await.expect("server");
    assert!(bound_pair(&a, &s1), "the pair still agrees: {a:?} {s1:?}");
}

/// The completing write of a stripped claim refused once (a 500): the claim does not
/// give its server back (admission would refuse that too, and it once retried that
/// every 1.5 ms), and sends the refused write again only after its back-off.
#[tokio::test]
async fn a_refused_completion_of_a_standing_bind_waits_its_back_off() {
    let mut env = Env::new().await;
    let bound = a_bound_under_class_and_quota(&mut env).await;
    let claim_writes = controller_writes().resource("serverclaims").subresource("");
    env.apiserver.faults().fail(claim_writes, 1, 500);
    env.apiserver.request_log().clear();
    env.remove_claim_annotation("a", ANNOTATION_BIND_COMPLETED)
        .await;
    a_completes_again(&env, &bound).await;
    let writes = env.apiserver.request_log().entries();
    let sent: Vec<u16> = writes
        .iter()
        .filter(|r| {
            is_controller_write(r) && r.resource == "serverclaims" && r.subresource.is_empty()
        })
        .map(|r| r.status)
        .collect();
    assert!(
        sent.len() <= 3 && sent.first() == Some(&500),
        "the refused write, then one retry after the back-off: {sent:?}"
    );
}
