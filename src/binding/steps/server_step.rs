//! One step of a server: its decision as the world shows it (the fair turn read from
//! the claim side), the plan that carries it out, the class a bind records, and what
//! `kubectl get` shows of the server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::names::ANNOTATION_BOUND_CLASS;
use crate::api::{CachedClaim, CachedServer};
use crate::binding::meta;
use crate::binding::protocol::server_decision::ServerDecision;
use crate::binding::protocol::server_plan::{ServerPlan, plan_server};
use crate::binding::protocol::winner::{Admit, Turn, may_take_named};
use crate::binding::state::gates::{self, BoundClass, cleaning_took};
use crate::binding::state::status;
use crate::binding::world::World;
use crate::binding::world::view::{Liveness, WithLiveClaim};

use super::inputs::StepInputs;
use super::rules::{BinderConfig, Rules};
use super::turns::{FirstNamed, has_turn};
use super::work::{LiveClaim, ServerStep, ServerWork};

/// The step for `server` (as it is, not as the classes label it); `live` is the claim a
/// previous [`ServerStep::ReadClaim`] named, as read.
pub fn server_step(
    inputs: &StepInputs<'_>,
    server: &CachedServer,
    live: LiveClaim<'_>,
    now: Timestamp,
) -> ServerStep {
    let world = inputs.world;
    let decide = inputs.rules.server;
    let gates = &release_gates(inputs.rules, inputs.config, world, server);
    let first = FirstNamed::default();
    let name = meta::name(server);
    let in_turn = |claim: &CachedClaim| {
        may_take_named(name, claim, &inputs.claim_side.assumed, || {
            has_turn(inputs, claim, name, now, &first)
        })
    };
    let turn: Turn<'_> = &in_turn;
    let charged = |claim: &CachedClaim| world.quota_check(claim).admits();
    let admit: Admit<'_> = &charged;
    let original = server;
    let view = world.classes().resolve_server(server);
    let server = view.as_ref().unwrap_or(original);
    let decision = match live {
        None => decide(server, world.claims(), Liveness::Cached, gates, turn, admit),
        Some((r, live)) => {
            let live = live.map(|c| world.classes().resolve_ref(c).0);
            let view = WithLiveClaim {
                base: world.claims(),
                namespace: &r.namespace,
                name: &r.name,
                live: live.as_deref(),
            };
            decide(server, &view, Liveness::Confirmed, gates, turn, admit)
        }
    };
    // What is written starts from the server as it is, never the classes' view.
    let mut plan = plan_server(original, &decision, &Time(now));
    record_bound_class(world, &decision, &mut plan);
    let classes = world.classes().classes_of(original).map(str::to_string);
    plan.status = status::with_display(original, classes.collect(), plan.status.take());
    if let Some(claim) = plan.confirm_claim {
        return ServerStep::ReadClaim(claim);
    }
    let cleaning_took = match decision {
        ServerDecision::Cleaned => cleaning_took(original, now),
        _ => None,
    };
    ServerStep::Act(Box::new(ServerWork {
        decision,
        plan,
        cleaning_took,
    }))
}

/// The gates a release of `server` records now ([`gates::release_gates`]): its own,
/// and those of the class its claim bound under as the server records it (for a
/// server bound without a record, the classes that take it in now), else the
/// controller's default.
pub fn release_gates(
    rules: &Rules,
    config: &BinderConfig,
    world: &World,
    server: &CachedServer,
) -> Vec<String> {
    let now = world.classes().release_gates_of(server);
    let class = (rules.class_gates)(server, now);
    gates::release_gates(server, class.as_deref(), &config.release_gates)
}

/// A write that binds a claim (its uid into the server's ref) records the class the
/// claim binds under and the gates that class names now ([`ANNOTATION_BOUND_CLASS`]):
/// its release waits for them whatever happens to the class since. A claim without a
/// class leaves no record.
fn record_bound_class(world: &World, decision: &ServerDecision, plan: &mut ServerPlan) {
    let claim = match decision {
        ServerDecision::ClaimForWinner { winner, .. } => winner,
        ServerDecision::FillUid { claim } => claim,
        _ => return,
    };
    let Some(object) = plan.object.as_mut() else {
        return;
    };
    let bound = world.claim_as_is(&claim.namespace, &claim.name);
    let class = bound.and_then(|c| c.spec.server_class_name.as_deref());
    let Some(class) = class.filter(|c| !c.is_empty()) else {
        return;
    };
    let named = world
        .classes()
        .class(class)
        .and_then(|c| c.spec.release_gates.as_ref());
    let record = BoundClass {
        class: class.to_string(),
        release_gates: named.map(|g| g.iter().map(|g| g.name.clone()).collect()),
    };
    meta::set_annotation_to(object, ANNOTATION_BOUND_CLASS, record.annotation());
}
