//! Least privilege, checked against what the controllers really do: a scenario that
//! takes every path that talks to the API (bind, release, a live read of a gone claim
//! and of a gone server, a repeated event, leader election), with the embedded API
//! server's request log on; every (verb, group, resource, subresource) the operator
//! issued must be granted by manifests/base's ClusterRole or Role, and every grant must
//! have been used.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use server_binder::api::{
    ClaimPhase, ServerClass, ServerClassSpec, ServerDisruptionBudget, ServerDisruptionBudgetSpec,
    ServerQuota, ServerQuotaSpec,
};
use server_binder::runtime::client::USER_AGENT_VALUE;

use crate::controllers::stage::*;
use crate::controllers::support::*;

/// (verb, group, resource with `/subresource`, resource name, namespace): for a rule, a
/// name only if the rule lists `resourceNames`, and a namespace only for a Role's rule.
type Grant = (String, String, String, Option<String>, Option<String>);

/// Where manifests/base puts the Lease (the Deployment's --lease-namespace and
/// --lease-name, the Role's namespace and resourceNames).
const LEASE_NAMESPACE: &str = "server-binder-system";
const LEASE_NAME: &str = "server-binder";

/// The rules of one Role or ClusterRole file in manifests/base.
fn rules(file: &str) -> BTreeSet<Grant> {
    let path = format!("{}/manifests/base/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let role: serde_json::Value = serde_saphyr::from_str(&text).expect("a role in YAML");
    let namespace = role["metadata"]["namespace"].as_str().map(String::from);
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut grants = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let names = strings(&rule["resourceNames"]);
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.into_iter().map(Some).collect()
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        grants.insert((
                            verb.clone(),
                            group.clone(),
                            resource.clone(),
                            name.clone(),
                            namespace.clone(),
                        ));
                    }
                }
            }
        }
    }
    grants
}

/// Whether `grant` allows a request: a rule without names allows any name, a
/// ClusterRole's rule any namespace.
fn allows(grant: &Grant, request: &Grant) -> bool {
    grant.0 == request.0
        && grant.1 == request.1
        && grant.2 == request.2
        && (grant.3.is_none() || grant.3 == request.3)
        && (grant.4.is_none() || grant.4 == request.4)
}

#[tokio::test]
async fn the_roles_grant_exactly_what_the_controllers_use() {
    let mut env = Env::new().await;
    env.put_server(server("s1")).await;
    // A claim of a class (every server), whose status the controller writes.
    let mut c1 = claim("c1");
    c1.spec.server_class_name = Some("any".into());
    env.put_claim(c1).await;
    // A bound claim whose server is gone: the claim controller reads it live.
    env.put_claim(claim("lost").bound("gone")).await;
    // A claim naming a missing server: FailedBinding now, and again later (a patch of
    // the event's series).
    env.put_claim(claim("waits").names("s9")).await;
    Api::<ServerClass>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &ServerClass::new("any", ServerClassSpec::default()),
        )
        .await
        .expect("class created");
    // A quota of the class: the claim is charged (its status written) before it binds,
    // and the recount drops the charge once the claim is gone.
    let quotas = Api::<ServerQuota>::namespaced(env.client.clone(), NS);
    let spec = ServerQuotaSpec {
        hard: [("any".to_string(), 5)].into(),
    };
    quotas
        .create(&PostParams::default(), &ServerQuota::new("q", spec))
        .await
        .expect("quota created");
    let used = |n: i64| {
        let quotas = quotas.clone();
        async move {
            let q = quotas.get("q").await;
            q.is_ok_and(|q| q.status.is_some_and(|s| s.used.get("any") == Some(&n)))
        }
    };
    // A disruption budget over the namespace's claims: its recount writes its status.
    let budgets = Api::<ServerDisruptionBudget>::namespaced(env.client.clone(), NS);
    let spec = ServerDisruptionBudgetSpec {
        max_unavailable: Some(IntOrString::Int(1)),
        ..ServerDisruptionBudgetSpec::default()
    };
    budgets
        .create(
            &PostParams::default(),
            &ServerDisruptionBudget::new("b", spec),
        )
        .await
        .expect("budget created");
    env.start_leading(2, LEASE_NAMESPACE, LEASE_NAME).await;
    eventually("the budget's claims counted", DEADLINE, || async {
        let budget = budgets.get("b").await;
        budget.is_ok_and(|b| b.status.is_some_and(|s| s.expected_claims >= 1))
    })
    .await;
    eventually("the class's servers counted", DEADLINE, || async {
        let class = Api::<ServerClass>::all(env.client.clone()).get("any").await;
        class.is_ok_and(|c| c.status.is_some_and(|s| s.servers == 1))
    })
    .await;

    wait_bound(&env, "c1", "s1").await;
    eventually("c1 charged to the quota", DEADLINE, || used(1)).await;
    env.wait_claim_phase("lost", ClaimPhase::Lost, "ServerMissing")
        .await;
    env.wait_claim_phase("waits", ClaimPhase::Pending, "ServerNotFound")
        .await;
    // The release of a deleted claim's server reads the claim live.
    env.delete_claim("c1").await;
    env.wait_event("Server", "s1", "Normal", "Released").await;
    eventually("c1's charge dropped", DEADLINE, || used(0)).await;
    // s9 appears but cannot serve the claim, then goes: the same FailedBinding again.
    env.put_server(server("s9").unclaimable()).await;
    env.wait_claim_phase("waits", ClaimPhase::Pending, "ServerMismatch")
        .await;
    env.delete_server("s9").await;
    eventually("FailedBinding twice on waits", DEADLINE, || async {
        env.count_events("ServerClaim", "waits", "FailedBinding")
            .await
            >= 2
    })
    .await;
    // The Lease is taken (a patch), and released on a graceful stop (a patch).
    eventually("the Lease taken", DEADLINE, || async {
        let patches = env
            .apiserver
            .request_log()
            .entries()
            .into_iter()
            .filter(|r| {
                r.verb == "patch" && r.resource == "leases" && r.user_agent == USER_AGENT_VALUE
            });
        patches.count() >= 2
    })
    .await;
    env.stop().await;

    let used: BTreeSet<Grant> = env
        .apiserver
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| r.user_agent == USER_AGENT_VALUE)
        .map(|r| {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            (r.verb, r.group, resource, r.name, r.namespace)
        })
        .collect();
    assert!(
        !used.is_empty(),
        "the request log names the operator's User-Agent"
    );
    let granted: BTreeSet<Grant> = rules("clusterrole.yaml")
        .into_iter()
        .chain(rules("leader-election-role.yaml"))
        .collect();

    let denied: Vec<&Grant> = used
        .iter()
        .filter(|u| !granted.iter().any(|g| allows(g, u)))
        .collect();
    assert!(
        denied.is_empty(),
        "the operator needs grants it lacks (403 in a cluster): {denied:#?}"
    );
    let unused: Vec<&Grant> = granted
        .iter()
        .filter(|g| !used.iter().any(|u| allows(g, u)))
        .collect();
    assert!(unused.is_empty(), "granted but never used: {unused:#?}");
}
