//! The fixture builder (tests/common/fixtures.rs, re-exported here), and shorthands for
//! deciding on a small world.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use server_binder::api::*;
use server_binder::binding::state::gates;
pub use server_binder::binding::world::budgets::BudgetHold;
use server_binder::binding::*;

// The one fixture builder (shared with tests/controllers), its objects as the binder
// caches them, and the namespace.
pub use crate::common::fixtures::{
    ClaimExt, ServerExt, cached_claim as claim, cached_server as server, now, t,
};
pub use crate::common::names::NS;

pub fn servers(list: Vec<CachedServer>) -> ServerCatalog {
    ServerCatalog::from_servers(list)
}

pub fn claims(list: Vec<CachedClaim>) -> ClaimCatalog {
    ClaimCatalog::from_claims(list)
}

static NO_WAITING: std::sync::LazyLock<WaitingClaims> = std::sync::LazyLock::new(Default::default);
static NO_ASSUMED: std::sync::LazyLock<AssumedChoices> =
    std::sync::LazyLock::new(AssumedChoices::new);

/// What a pick weighs when no other claim waits and nothing is in flight: the claim is
/// alone, so the matching changes nothing and the pick is the plain best fit.
pub fn alone<'a>(skip: &'a dyn Fn(&str) -> bool) -> PickInputs<'a> {
    PickInputs {
        skip,
        refuses: &|_| false,
        waiting: &NO_WAITING,
        assumed: &NO_ASSUMED,
        held_back: &[],
        refused: None,
        in_flight: None,
    }
}

/// What a pick weighs among these waiting claims, with nothing in flight and no server
/// passed over.
pub fn among(waiting: &WaitingClaims) -> PickInputs<'_> {
    PickInputs {
        waiting,
        ..alone(&|_| false)
    }
}

/// The server a lone claim would pick.
pub fn pick_alone<'a>(
    servers: &'a ServerCatalog,
    claim: &CachedClaim,
    skip: &dyn Fn(&str) -> bool,
) -> Option<&'a str> {
    match servers.place(claim, &alone(skip)) {
        Placement::Pick(name) => Some(name),
        Placement::WaitForTurn(_) | Placement::NoMatch => None,
    }
}

/// The claim controller's decision with an empty assumed cache, on the cache.
pub fn decide_c(claim: &CachedClaim, world: &[CachedServer]) -> ClaimDecision {
    decide_c_with_budgets(claim, world, &|_| None)
}

/// [`decide_c`], with the disruption budgets' answer `budget_hold`.
fn decide_c_with_budgets(
    claim: &CachedClaim,
    world: &[CachedServer],
    budget_hold: &dyn Fn(&CachedClaim) -> Option<BudgetHold>,
) -> ClaimDecision {
    let servers = servers(world.to_vec()).tracking([claim]);
    decide_claim(
        claim,
        &servers,
        &ClaimInputs {
            now: NOW,
            budget_hold,
            ..ClaimInputs::unclassed(alone(&|_| false))
        },
        Liveness::Cached,
    )
}

/// The claim controller's decision on the cache when the claim's `serverRef` is its own
/// pick in flight (its assumed choices hold it).
pub fn decide_c_picked(claim: &CachedClaim, world: &[CachedServer]) -> ClaimDecision {
    let servers = servers(world.to_vec()).tracking([claim]);
    let mut assumed = AssumedChoices::new();
    let server = &claim
        .spec
        .server_ref
        .as_ref()
        .expect("a claim naming a server")
        .name;
    assumed.assume(server, claim_key(claim), None);
    let pick = PickInputs {
        assumed: &assumed,
        ..alone(&|_| false)
    };
    decide_claim(
        claim,
        &servers,
        &ClaimInputs::unclassed(pick),
        Liveness::Cached,
    )
}

/// A binder that listed these objects, with a summary interval that never holds a test
/// back.
pub fn listed(servers: Vec<CachedServer>, claims: Vec<CachedClaim>) -> Binder {
    let config = BinderConfig {
        status_interval: std::time::Duration::from_secs(10),
        release_gates: vec![],
    };
    Binder::listed(Rules::real(), config, Listing::of(servers, claims), now().0)
}

/// `binder` after its watches listed these classes and quotas too.
pub fn with_classes_and_quotas(
    mut binder: Binder,
    classes: Vec<ServerClass>,
    quotas: Vec<ServerQuota>,
) -> Binder {
    binder.relist(classes.into_iter().map(Arc::new).collect::<Vec<_>>());
    binder.relist(quotas.into_iter().map(Arc::new).collect::<Vec<_>>());
    binder
}

/// A claim's step, started at once: the claim controller's reconcile under the
/// binder's lock.
pub fn reconcile_claim(
    binder: &mut Binder,
    claim: &CachedClaim,
    live: LiveServer<'_>,
    sight: Sight,
    now: Timestamp,
) -> ClaimStep {
    let step = binder.claim_step(claim, live, sight, now);
    binder.start(claim, &step);
    step
}

/// The same after a live read confirmed what the view says.
pub fn decide_c_live(claim: &CachedClaim, world: &[CachedServer]) -> ClaimDecision {
    let servers = servers(world.to_vec()).tracking([claim]);
    decide_claim(
        claim,
        &servers,
        &ClaimInputs::unclassed(alone(&|_| false)),
        Liveness::Confirmed,
    )
}

/// Every claim naming a server has its turn for it: the server table's rows, with the
/// fair order's answer fixed (placement's part, held by the placement tests and the
/// model check).
pub const IN_TURN: Turn<'static> = &|_| true;

/// Every claim is charged to its quotas, or none limits it: the rows without quotas.
pub const ADMITTED: Admit<'static> = &|_| true;

/// The time the tables decide at: [`now`], 100 seconds after their `Evict` taints were
/// added ([`evicting`]).
pub const NOW: Timestamp = Timestamp::constant(1_700_001_000, 0);

/// `server` with an `Evict` taint `maintenance`, added 100 seconds before [`NOW`].
pub fn evicting(mut server: CachedServer) -> CachedServer {
    server.spec.taints.push(Taint {
        key: "maintenance".into(),
        value: None,
        effect: TaintEffect::Evict,
        time_added: Some(t(900)),
        hard_deadline: None,
    });
    server
}

/// `server` [`evicting`], its taint carrying an admin's hard deadline `seconds` after
/// [`NOW`] (negative: passed).
pub fn evicting_by(server: CachedServer, seconds: i64) -> CachedServer {
    let mut server = evicting(server);
    let hard = NOW.checked_add(SignedDuration::from_secs(seconds)).unwrap();
    server.spec.taints.last_mut().unwrap().hard_deadline = Some(Time(hard));
    server
}

/// A budget that holds every eviction it is asked about.
pub fn holding_budget() -> BudgetHold {
    BudgetHold {
        budget: "web".into(),
        limit: "maxUnavailable 1".into(),
        covered: 3,
        unavailable: 1,
    }
}

/// The claim controller's decision on the cache, a disruption budget holding any
/// eviction ([`holding_budget`]).
pub fn decide_c_budget_holds(claim: &CachedClaim, world: &[CachedServer]) -> ClaimDecision {
    decide_c_with_budgets(claim, world, &|_| Some(holding_budget()))
}

/// `claim` tolerating the `maintenance` taint's eviction for `seconds`.
pub fn tolerating_for(mut claim: CachedClaim, seconds: i64) -> CachedClaim {
    claim.spec.tolerations.push(Toleration {
        key: "maintenance".into(),
        operator: TolerationOperator::Exists,
        value: None,
        effect: Some(TaintEffect::Evict),
        toleration_seconds: Some(seconds),
    });
    claim
}

/// The server controller's decision, on the cache, with the gates a release of the
/// server records (its own; no class, no default), as the binder passes them.
pub fn decide_s(server: &CachedServer, world: &[CachedClaim]) -> ServerDecision {
    decide_server(
        server,
        &claims(world.to_vec()),
        Liveness::Cached,
        &gates::release_gates(server, None, &[]),
        IN_TURN,
        ADMITTED,
    )
}

pub fn decide_s_live(server: &CachedServer, world: &[CachedClaim]) -> ServerDecision {
    decide_server(
        server,
        &claims(world.to_vec()),
        Liveness::Confirmed,
        &gates::release_gates(server, None, &[]),
        IN_TURN,
        ADMITTED,
    )
}

pub fn holder(claim: &str, uid: Option<&str>) -> ServerClaimRef {
    ServerClaimRef {
        namespace: NS.into(),
        name: claim.into(),
        uid: uid.map(str::to_string),
    }
}

pub fn s(name: &str) -> String {
    name.to_string()
}

pub fn annotation<K: Parts>(obj: &CachedObject<K>, key: &str) -> Option<String> {
    obj.annotations().get(key).cloned()
}

/// The mutant of the placement's properties: the reference's pick, claim by claim,
/// lowest name first, seeing no other waiting claim.
pub fn lowest_name_first(
    claim: &CachedClaim,
    servers: &dyn ServerView,
    inputs: &ClaimInputs<'_>,
    liveness: Liveness,
) -> ClaimDecision {
    let nobody = WaitingClaims::default();
    let pick = PickInputs {
        waiting: &nobody,
        ..inputs.pick
    };
    decide_claim(claim, servers, &ClaimInputs { pick, ..*inputs }, liveness)
}

/// Runs every row of a table and fails once at the end, naming each failing row by `id`
/// with what failed in it, so one failing row hides no other.
pub fn run_rows<R>(table: &str, rows: &[R], id: impl Fn(&R) -> &str, run: impl Fn(&R)) {
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(row)));
            ran.err()
                .map(|e| format!("- {}\n    {}", id(row), panic_text(&*e)))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of the {} rows of {table} fail:\n{}",
        failed.len(),
        rows.len(),
        failed.join("\n")
    );
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic without a message)");
    text.replace('\n', "\n    ")
}

/// A bound claim whose status says an eviction runs against its bind (the notice,
/// `DisruptionTarget` True), as it does before an eviction can end the bind.
pub fn noticed(c: CachedClaim) -> CachedClaim {
    let mut c = c;
    let status = c.status.get_or_insert_with(Default::default);
    status
        .conditions
        .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: server_binder::api::names::CONDITION_DISRUPTION_TARGET.into(),
            status: "True".into(),
            reason: server_binder::api::names::REASON_EVICTION_BY_TAINT.into(),
            message: "the bind ends".into(),
            last_transition_time: t(500),
            observed_generation: Some(1),
        });
    c
}

/// A claim whose status says an eviction ended its bind to the server it names.
pub fn evicted(c: CachedClaim) -> CachedClaim {
    let mut c = c.bind_completed().phase(ClaimPhase::Lost);
    let status = c.status.as_mut().expect("status");
    status.conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: server_binder::api::names::CONDITION_BOUND.into(),
        status: "False".into(),
        reason: "Evicted".into(),
        message: "evicted".into(),
        last_transition_time: t(500),
        observed_generation: Some(1),
    }];
    c
}
