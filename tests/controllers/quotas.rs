//! Server quotas end to end (docs/binding.md, "Server quotas"): the real controllers
//! against the embedded API server. A quota holds under concurrency and holds no other
//! namespace back, a freed charge lets the next waiting claim in (also when the claim is
//! re-created under the same name), a changed `hard` is followed, a reservation by name
//! and a forged pick are no way around a quota, and claims bound before the quota
//! existed count. Each wait fails at once if a namespace ever holds more servers than
//! its quota allows (invariant 7).

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use server_binder::api::{
    ClaimPhase, ServerClaim, ServerClass, ServerClassSpec, ServerPhase, ServerQuota,
    ServerQuotaSpec,
};
use server_binder::controllers::Options;

use crate::common::invariants::Stored;
use crate::controllers::stage::{
    ClaimExt, as_new, claim, claim_ref, is, server, server_is, wait_bound,
};
use crate::controllers::support::*;

const GPU: &str = "gpu";
const QUOTA: &str = "gpu-quota";
const TEAM_B: &str = "team-b";

/// The class `gpu`, taking in every server.
pub async fn create_gpu_class(env: &Env) {
    let class = ServerClass::new(GPU, ServerClassSpec::default());
    Api::<ServerClass>::all(env.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("class created");
}

/// The class `gpu` and `count` servers `s0`, `s1`, ….
async fn gpu_fleet(env: &Env, count: usize) {
    create_gpu_class(env).await;
    for i in 0..count {
        env.put_server(server(&format!("s{i}"))).await;
    }
}

/// The claim, of class gpu.
pub fn of_gpu(mut c: ServerClaim) -> ServerClaim {
    c.spec.server_class_name = Some(GPU.into());
    c
}

/// The controllers with this many reconciles at once; quotas (and classes) recounted
/// every second, so a recount shows within the tests' deadlines.
async fn start(env: &mut Env, concurrency: u16) {
    let options = Options {
        status_interval: Duration::from_secs(1),
        ..options(concurrency)
    };
    env.start_with(options).await;
}

fn quotas(env: &Env) -> Api<ServerQuota> {
    Api::namespaced(env.client.clone(), NS)
}

/// Creates the quota `gpu-quota` of team-a: `hard: {gpu: hard}`.
pub async fn create_quota(env: &Env, hard: i64) {
    let mut quota = ServerQuota::new(
        QUOTA,
        ServerQuotaSpec {
            hard: [(GPU.to_string(), hard)].into(),
        },
    );
    quota.metadata.namespace = Some(NS.into());
    quotas(env)
        .create(&PostParams::default(), &quota)
        .await
        .expect("quota created");
}

/// Writes team-a's quota's status as the claim controller leaves it once it charged
/// these stored claims (of class gpu), for a row staged with the controllers stopped.
pub async fn stage_charges(env: &Env, claims: &[&ServerClaim]) {
    let charged: Vec<_> = claims
        .iter()
        .map(|c| json!({"class": GPU, "claim": c.name_any(), "uid": uid(c)}))
        .collect();
    let used = charged.len();
    let status = json!({"status": {"charged": charged, "used": {GPU: used}}});
    quotas(env)
        .patch_status(QUOTA, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("charges staged");
}

/// An admin sets `hard: {gpu: hard}` on team-a's quota.
async fn set_hard(env: &Env, hard: i64) {
    let patch = json!({"spec": {"hard": {GPU: hard}}});
    quotas(env)
        .patch(QUOTA, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("quota changed");
}

/// Waits until team-a's quota's status satisfies `check`, and returns the quota.
async fn wait_quota(env: &Env, what: &str, check: impl Fn(&ServerQuota) -> bool) -> ServerQuota {
    let read = || async { quotas(env).get(QUOTA).await.expect("get quota") };
    wait_for(&format!("quota: {what}"), DEADLINE, read, check).await
}

/// Whether the quota counts `used` servers of gpu and says `summary`.
fn counts(quota: &ServerQuota, used: i64, summary: &str) -> bool {
    let status = quota.status.clone().unwrap_or_default();
    status.used.get(GPU) == Some(&used) && status.summary == summary
}

/// Creates a claim of class gpu in `namespace`.
async fn create_gpu_claim(env: &Env, namespace: &str, name: &str) -> ServerClaim {
    let mut c = as_new(of_gpu(claim(name)));
    c.metadata.namespace = Some(namespace.into());
    Api::<ServerClaim>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &c)
        .await
        .unwrap_or_else(|e| panic!("claim {namespace}/{name} created: {e}"))
}

/// A namespace's claims as of one moment.
#[derive(Debug)]
struct Tally {
    bound: BTreeSet<String>,
    /// Pending / QuotaExceeded.
    exceeded: BTreeSet<String>,
    /// Live claims of class gpu holding a server: a server's ref carries their uid (as
    /// invariant 7 counts them).
    holding: usize,
}

async fn tally(env: &Env, namespace: &str) -> Tally {
    let (servers, claims) = env.all().await;
    let stored = Stored {
        classes: vec![ServerClass::new(GPU, ServerClassSpec::default())],
        ..Stored::new(&servers, &claims)
    };
    let mine: Vec<&ServerClaim> = claims
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(namespace))
        .collect();
    let named = |wanted: &dyn Fn(&ServerClaim) -> bool| -> BTreeSet<String> {
        mine.iter()
            .filter(|c| wanted(c))
            .map(|c| c.name_any())
            .collect()
    };
    Tally {
        bound: named(&|c| phase(c) == Some(ClaimPhase::Bound)),
        exceeded: named(&|c| is(c, ClaimPhase::Pending, "QuotaExceeded")),
        holding: stored.snapshot().bound_of_class(namespace, GPU).len(),
    }
}

/// Waits until team-a's claims satisfy `check`, failing at once if team-a ever holds
/// more than `most` servers (invariant 7). Returns the tally that satisfied it.
async fn wait_team_a(env: &Env, most: usize, what: &str, check: impl Fn(&Tally) -> bool) -> Tally {
    let check = |t: &Tally| {
        assert!(t.holding <= most, "team-a holds more than {most}: {t:?}");
        check(t)
    };
    wait_for(what, DEADLINE, || tally(env, NS), check).await
}

/// Waits until team-a has `bound` claims Bound and `waiting` Pending / QuotaExceeded,
/// never holding more than `most` servers meanwhile.
async fn settle(env: &Env, most: usize, bound: usize, waiting: usize) -> Tally {
    let what = format!("team-a: {bound} Bound, {waiting} QuotaExceeded");
    wait_team_a(env, most, &what, |t| {
        t.bound.len() == bound && t.exceeded.len() == waiting
    })
    .await
}

/// The quota lists charges of these claims only (`used` counts them all, see
/// [`counts`]): a claim leaves the list once it holds its bind, and a claim that holds
/// no server is never charged here.
fn assert_charges_within(quota: &ServerQuota, claims: &BTreeSet<String>) {
    let charged = charged_uids(quota);
    assert!(
        charged.is_subset(claims),
        "{charged:?} not within {claims:?}"
    );
}

/// The uids the quota charges.
fn charged_uids(quota: &ServerQuota) -> BTreeSet<String> {
    let status = quota.status.iter();
    status
        .flat_map(|s| &s.charged)
        .map(|c| c.uid.clone())
        .collect()
}

fn uid(c: &ServerClaim) -> String {
    c.metadata.uid.clone().expect("a stored claim")
}

/// The uids of these claims of team-a.
async fn uids(env: &Env, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut uids = BTreeSet::new();
    for name in names {
        let c = env.claim(name).await.expect("a live claim");
        uids.insert(uid(&c));
    }
    uids
}

/// The servers these claims of team-a name, in order.
async fn servers_of(env: &Env, names: &BTreeSet<String>) -> Vec<Option<String>> {
    let mut held = Vec::new();
    for name in names {
        let c = env.claim(name).await.expect("a live claim");
        held.push(c.spec.server_ref.map(|r| r.name));
    }
    held
}

/// Of `s0` and `s1`, the one the claim does not name.
async fn other_server(env: &Env, claim: &str) -> &'static str {
    let c = env.claim(claim).await.expect("a live claim");
    match c.spec.server_ref.map(|r| r.name).as_deref() {
        Some("s0") => "s1",
        _ => "s0",
    }
}

/// Ten claims of team-a created at once, 16 reconciles at a time, for a quota of 3 and 8
/// free servers: exactly 3 bind, never more meanwhile; the 7 others wait saying why;
/// team-b, without a quota, binds its claims meanwhile.
#[tokio::test]
async fn a_quota_holds_under_concurrency_and_holds_no_other_namespace_back() {
    let mut env = Env::new().await;
    env.create_namespace(TEAM_B).await;
    gpu_fleet(&env, 8).await;
    create_quota(&env, 3).await;
    start(&mut env, 16).await;
    let team_a = (0..10).map(|i| format!("a{i}")).map(|n| (NS, n));
    let team_b = (0..3).map(|i| format!("b{i}")).map(|n| (TEAM_B, n));
    let all: Vec<(&str, String)> = team_a.chain(team_b).collect();
    let creates = all.iter().map(|(ns, n)| create_gpu_claim(&env, ns, n));
    futures::future::join_all(creates).await;

    let what = "team-a: 3 Bound, 7 QuotaExceeded; team-b: 3 Bound";
    wait_for(
        what,
        DEADLINE,
        || async {
            let a = tally(&env, NS).await;
            assert!(a.holding <= 3, "team-a holds more than 3: {a:?}");
            (a, tally(&env, TEAM_B).await)
        },
        |(a, b)| a.bound.len() == 3 && a.exceeded.len() == 7 && b.bound.len() == 3,
    )
    .await;
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
    let team_a = tally(&env, NS).await;
    for name in &team_a.exceeded {
        let c = env.claim(name).await.unwrap();
        let said = bound_message(&c);
        assert!(
            said.contains("holds 3 of 3 servers of class gpu"),
            "{name}: {said}"
        );
        assert!(said.contains(QUOTA), "{name}: {said}");
    }
    let waiting = team_a.exceeded.first().unwrap();
    let note = env
        .wait_event("ServerClaim", waiting, "Warning", "QuotaExceeded")
        .await;
    assert!(
        note.contains("team-a holds 3 of 3 servers of class gpu (ServerQuota gpu-quota)"),
        "{note}"
    );
    let quota = wait_quota(&env, "gpu: 3/3", |q| counts(q, 3, "gpu: 3/3")).await;
    assert_charges_within(&quota, &uids(&env, &team_a.bound).await);
}

/// A bound claim goes: exactly one of the two waiting claims of its namespace binds, and
/// the quota counts 3 again.
#[tokio::test]
async fn the_next_waiting_claim_binds_when_a_bound_claim_goes() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 5).await;
    create_quota(&env, 3).await;
    start(&mut env, 4).await;
    for i in 0..5 {
        create_gpu_claim(&env, NS, &format!("c{i}")).await;
    }
    let before = settle(&env, 3, 3, 2).await;
    let gone = before.bound.first().unwrap().clone();
    env.delete_claim(&gone).await;

    let after = wait_team_a(&env, 3, "a waiting claim binds", |t| {
        t.bound.len() == 3 && !t.bound.contains(&gone) && t.exceeded.len() == 1
    })
    .await;
    let newcomer: Vec<_> = after.bound.difference(&before.bound).collect();
    assert_eq!(
        newcomer.len(),
        1,
        "one of the waiting: {before:?} → {after:?}"
    );
    assert!(
        before.exceeded.contains(newcomer[0]),
        "{before:?} → {after:?}"
    );
    let quota = wait_quota(&env, "gpu: 3/3", |q| counts(q, 3, "gpu: 3/3")).await;
    assert_charges_within(&quota, &uids(&env, &after.bound).await);
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// A bound claim deleted and at once created again under its name is a new claim: the
/// recount drops the old one's charge (a live read shows the new uid), one claim takes
/// the freed place, and team-a never holds more than 3 servers.
#[tokio::test]
async fn a_claim_re_created_under_its_name_is_charged_anew() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 5).await;
    create_quota(&env, 3).await;
    start(&mut env, 4).await;
    for i in 0..4 {
        create_gpu_claim(&env, NS, &format!("c{i}")).await;
    }
    let before = settle(&env, 3, 3, 1).await;
    let name = before.bound.first().unwrap().clone();
    let old = uid(&env.claim(&name).await.unwrap());
    env.delete_claim(&name).await;
    let new = uid(&create_gpu_claim(&env, NS, &name).await);
    assert_ne!(old, new);

    settle(&env, 3, 3, 1).await;
    let quota = wait_quota(&env, "the old charge dropped, 3 charged", |q| {
        !charged_uids(q).contains(&old) && counts(q, 3, "gpu: 3/3")
    })
    .await;
    // Settled: the quota is full, so what it charges is what is bound.
    let after = settle(&env, 3, 3, 1).await;
    assert_charges_within(&quota, &uids(&env, &after.bound).await);
    let (servers, claims) = env.all().await;
    assert_invariants(&servers, &claims);
}

/// Raising `hard` lets a waiting claim bind; lowering it below what is held takes no
/// server away and binds nothing more.
#[tokio::test]
async fn a_changed_hard_is_followed_and_a_lowered_one_takes_nothing_away() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 3).await;
    create_quota(&env, 1).await;
    start(&mut env, 4).await;
    create_gpu_claim(&env, NS, "a").await;
    create_gpu_claim(&env, NS, "b").await;
    settle(&env, 1, 1, 1).await;

    set_hard(&env, 2).await;
    let both = settle(&env, 2, 2, 0).await;
    wait_quota(&env, "gpu: 2/2", |q| counts(q, 2, "gpu: 2/2")).await;
    let held = servers_of(&env, &both.bound).await;

    set_hard(&env, 1).await;
    wait_quota(&env, "gpu: 2/1", |q| counts(q, 2, "gpu: 2/1")).await;
    create_gpu_claim(&env, NS, "c").await;
    let c = env
        .wait_claim_phase("c", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    assert!(
        bound_message(&c).contains("holds 2 of 1 servers of class gpu"),
        "{c:?}"
    );
    let now = settle(&env, 2, 2, 1).await;
    assert_eq!(now.bound, both.bound, "the bound claims stay bound");
    assert_eq!(servers_of(&env, &now.bound).await, held, "to their servers");
}

/// An admin reserves a free server by name for a claim over quota: the server stays
/// Available / Reserved and the claim waits QuotaExceeded; once a bound claim of its
/// namespace goes, it is charged and binds to its reserved server. (The claim names no
/// server while it waits, so the server's row is `ReservedAwaitingAdoption`; the row
/// `ReservedAwaitingQuota`, a claim that names its reserved server but is not charged
/// yet, is in server_rows.rs.)
#[tokio::test]
async fn a_reservation_by_name_waits_for_the_quota() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 2).await;
    create_quota(&env, 1).await;
    start(&mut env, 4).await;
    create_gpu_claim(&env, NS, "first").await;
    let first = settle(&env, 1, 1, 0).await;
    let free = other_server(&env, "first").await;
    let reserve = json!({"spec": {"serverClaimRef": {"namespace": NS, "name": "second"}}});
    env.servers()
        .patch(free, &PatchParams::default(), &Patch::Merge(reserve))
        .await
        .expect("reserved by name");
    create_gpu_claim(&env, NS, "second").await;

    settle(&env, 1, 1, 1).await;
    let s = env
        .wait_server_phase(free, ServerPhase::Available, "Reserved")
        .await;
    assert_eq!(
        claim_ref(&s),
        Some(("second", None)),
        "still a reservation by name"
    );
    assert_eq!(first.bound, BTreeSet::from(["first".to_string()]));

    env.delete_claim("first").await;
    let (second, _) = wait_bound(&env, "second", free).await;
    let charged = BTreeSet::from([uid(&second)]);
    wait_quota(&env, "gpu: 1/1, second charged", |q| {
        counts(q, 1, "gpu: 1/1") && charged_uids(q).is_subset(&charged)
    })
    .await;
}

/// A tenant forges a controller's pick (`pre-bound` and `serverRef`) on a claim over
/// quota: the ref is withdrawn, the claim waits QuotaExceeded, the server stays free.
#[tokio::test]
async fn a_forged_pick_over_quota_takes_no_server() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 2).await;
    create_quota(&env, 1).await;
    start(&mut env, 4).await;
    create_gpu_claim(&env, NS, "first").await;
    settle(&env, 1, 1, 0).await;
    let free = other_server(&env, "first").await;
    env.put_claim(of_gpu(claim("forger").chose(free))).await;

    wait_team_a(
        &env,
        1,
        "the forger waits QuotaExceeded, its ref withdrawn",
        |t| t.exceeded.contains("forger"),
    )
    .await;
    let forger = env
        .wait_claim("forger", "its forged ref withdrawn", |c| {
            c.spec.server_ref.is_none() && is(c, ClaimPhase::Pending, "QuotaExceeded")
        })
        .await;
    assert!(
        bound_message(&forger).contains("holds 1 of 1"),
        "{forger:?}"
    );
    let s = env.server(free).await.unwrap();
    assert_eq!(claim_ref(&s), None, "{s:?}");
    assert!(server_is(&s, ServerPhase::Available, "Available"), "{s:?}");
    settle(&env, 1, 1, 1).await;
}

/// Claims bound before the quota existed count in its recount, even above `hard`; the
/// namespace then binds nothing more of the class.
#[tokio::test]
async fn claims_bound_before_the_quota_existed_count() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 3).await;
    start(&mut env, 4).await;
    create_gpu_claim(&env, NS, "a").await;
    create_gpu_claim(&env, NS, "b").await;
    let early = settle(&env, 2, 2, 0).await;

    create_quota(&env, 1).await;
    let quota = wait_quota(&env, "gpu: 2/1", |q| counts(q, 2, "gpu: 2/1")).await;
    assert_charges_within(&quota, &uids(&env, &early.bound).await);
    create_gpu_claim(&env, NS, "c").await;
    let c = env
        .wait_claim_phase("c", ClaimPhase::Pending, "QuotaExceeded")
        .await;
    assert!(
        bound_message(&c).contains("holds 2 of 1 servers of class gpu"),
        "{c:?}"
    );
    let now = settle(&env, 2, 2, 1).await;
    assert_eq!(now.bound, early.bound);
}

/// team-a holding `s0` and `s1` with claims `a` and `b`, four gpu servers in all, the
/// controllers running.
async fn a_namespace_holding_two(env: &mut Env) -> Tally {
    gpu_fleet(env, 4).await;
    start(env, 4).await;
    create_gpu_claim(env, NS, "a").await;
    create_gpu_claim(env, NS, "b").await;
    settle(env, 2, 2, 0).await
}

/// Two more claims created the moment the quota (or its loss) is written: neither is
/// admitted before the quota counted the two team-a holds, so both wait, and team-a
/// never holds more than two (invariant 7 from the quota's creation).
async fn two_more_wait(env: &Env, held: &Tally) {
    create_gpu_claim(env, NS, "c").await;
    create_gpu_claim(env, NS, "d").await;
    let now = settle(env, 2, 2, 2).await;
    assert_eq!(now.bound, held.bound);
    let quota = wait_quota(env, "gpu: 2/2", |q| counts(q, 2, "gpu: 2/2")).await;
    let status = quota.status.expect("counted");
    assert_eq!(status.observed_generation, quota.metadata.generation);
}

/// A quota created over a namespace already at its limit admits nothing until it has
/// counted what the namespace holds (it once charged two claims against an empty
/// status: 4 held against 2).
#[tokio::test]
async fn a_quota_created_over_a_namespace_at_its_limit_admits_nobody_more() {
    let mut env = Env::new().await;
    let held = a_namespace_holding_two(&mut env).await;
    create_quota(&env, 2).await;
    two_more_wait(&env, &held).await;
}

/// A quota deleted and created again is counted again before it admits anyone.
#[tokio::test]
async fn a_quota_re_created_admits_nobody_before_its_count() {
    let mut env = Env::new().await;
    let held = a_namespace_holding_two(&mut env).await;
    create_quota(&env, 2).await;
    wait_quota(&env, "gpu: 2/2", |q| counts(q, 2, "gpu: 2/2")).await;
    quotas(&env)
        .delete(QUOTA, &Default::default())
        .await
        .expect("quota deleted");
    create_quota(&env, 2).await;
    two_more_wait(&env, &held).await;
}

/// A quota whose status is lost (wiped by hand, or by a tool that writes status) is
/// counted again before it admits anyone: its status shows room it does not have.
#[tokio::test]
async fn a_quota_whose_status_is_wiped_admits_nobody_before_its_count() {
    let mut env = Env::new().await;
    let held = a_namespace_holding_two(&mut env).await;
    create_quota(&env, 2).await;
    wait_quota(&env, "gpu: 2/2", |q| counts(q, 2, "gpu: 2/2")).await;
    let mut wiped = quotas(&env).get(QUOTA).await.expect("quota");
    wiped.status = Some(Default::default());
    quotas(&env)
        .replace_status(QUOTA, &PostParams::default(), &wiped)
        .await
        .expect("status wiped");
    two_more_wait(&env, &held).await;
}

/// `explain` judges a claim over quota as the controller does: it waits, QuotaExceeded,
/// and says which quota and how full (it once read no quotas and said "PickBestFit").
#[tokio::test]
async fn explain_says_a_claim_over_quota_waits_for_its_quota() {
    let mut env = Env::new().await;
    gpu_fleet(&env, 2).await;
    create_quota(&env, 1).await;
    start(&mut env, 4).await;
    create_gpu_claim(&env, NS, "first").await;
    create_gpu_claim(&env, NS, "second").await;
    settle(&env, 1, 1, 1).await;
    let waiting = tally(&env, NS).await.exceeded.pop_first().unwrap();
    let explained = explain_json(&env, &waiting).await;
    // The status it quotes says QuotaExceeded; its own verdict must say so too.
    assert_eq!(explained["decision"], "QuotaExceeded", "{explained:#}");
    let row = explained["row"].as_str().unwrap_or_default();
    assert!(
        row.contains("holds 1 of 1 servers of class gpu"),
        "{explained:#}"
    );
    let quotas = explained["quotas"].to_string();
    assert!(
        quotas.contains("1 of 1 servers of class gpu (full: this claim is not charged)"),
        "{explained:#}"
    );
}
