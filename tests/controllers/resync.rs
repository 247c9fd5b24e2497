//! The periodic resync (docs/binding.md, "Wake-up rules"): with nothing changing, every
//! server and claim is reconciled again, a share of them each second, once per pass.

use std::time::Duration;

use server_binder::api::ClaimPhase;
use server_binder::controllers::Options;

use crate::controllers::stage::*;
use crate::controllers::support::*;

fn reconciles(env: &Env) -> f64 {
    ["claim", "server"]
        .iter()
        .map(|c| {
            env.metric(
                "server_binder_reconcile_duration_seconds_count",
                &[("controller", c)],
            )
        })
        .sum()
}

#[tokio::test]
async fn an_idle_fleet_is_reconciled_again_every_resync_pass() {
    let mut env = Env::new().await;
    env.start_with(Options {
        resync: Duration::from_secs(1),
        ..options(2)
    })
    .await;
    env.put_server(server("s1")).await;
    env.put_server(server("s2")).await;
    env.put_claim(claim("a")).await;
    env.put_claim(claim("b")).await;
    env.wait_claim_phase("a", server_binder::api::ClaimPhase::Bound, "Bound")
        .await;
    env.wait_claim_phase("b", server_binder::api::ClaimPhase::Bound, "Bound")
        .await;
    // The binds' own trailing reconciles are a few per object; three whole passes over
    // the four objects are more than those, and only the resync makes them once the
    // fleet is idle.
    let before = reconciles(&env);
    eventually("three resync passes", DEADLINE, || async {
        reconciles(&env) >= before + 3.0 * 4.0
    })
    .await;
    invariants_hold_now(&env).await;
}

/// A fleet the operator finds at its start, larger than one step of the start (256 of
/// each kind): every claim is woken, in several steps, and binds. Nothing else wakes
/// them: no object changes after the operator starts.
#[tokio::test]
async fn the_start_wakes_a_fleet_larger_than_one_step() {
    let mut env = Env::new().await;
    let n = 600;
    let creates = (0..n).map(|i| {
        let env = &env;
        async move {
            env.put_server(server(&format!("s{i:03}"))).await;
            env.put_claim(claim(&format!("c{i:03}"))).await;
        }
    });
    futures::future::join_all(creates).await;
    env.start(4).await;
    eventually("every claim of the fleet Bound", DEADLINE, || async {
        let (_, claims) = env.all().await;
        claims
            .iter()
            .filter(|c| phase(c) == Some(ClaimPhase::Bound))
            .count()
            == n
    })
    .await;
    invariants_hold_now(&env).await;
}

async fn invariants_hold_now(env: &Env) {
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}
