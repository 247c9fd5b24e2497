//! The binding protocol as pure decisions: no I/O, no clocks, no randomness.
//!
//! docs/binding.md is the reference; [`decide_claim`] and [`decide_server`] have one match
//! arm per row of its two tables, and [`plan_claim`] / [`plan_server`] turn a decision
//! into the writes, event and outcome the controllers carry out.

pub mod assumed;
pub mod backoff;
pub mod binder;
pub mod bounded;
mod claim_decision;
mod claim_plan;
mod class_labels;
pub mod classes;
pub mod coalesce;
mod describe;
mod effects;
mod eligibility;
pub mod evidence;
mod few;
pub mod gates;
mod in_flight;
mod index;
pub mod meta;
mod pins;
pub mod placement;
pub mod quota;
mod selector;
mod server_decision;
mod server_plan;
mod shape;
mod status;
pub mod summaries;
pub mod triggers;
mod view;
pub mod why;
mod winner;

pub use assumed::{AssumedChoices, claim_key};
pub use binder::{
    Binder, BinderConfig, ClaimDecider, ClaimStep, ClaimWork, ObjectWrite, Rules, ServerDecider,
    ServerStep, ServerWork, Sight,
};
pub use claim_decision::{ClaimDecision, assumption_for, decide_claim, pass_over};
pub use claim_plan::{ClaimPlan, plan_claim};
pub use describe::CLAIM_BEING_DELETED;
pub use effects::{BindingEvent, EventKind, LostReason, Outcome, Related, RepairCase, Repairer};
pub use eligibility::{
    Ineligible, NotFree, RefMatch, describe_ref, eligibility, not_free, ref_match, ref_uid,
    server_is_claimable,
};
pub use evidence::{can_take_back, records_bind_to};
pub use index::{FreeServerIndex, is_free};
pub use meta::{ClaimKey, claim_ref_of, is_controller_chosen};
pub use placement::{ClaimShape, PickInputs, Placement, WAITING_FOR_TURN, WaitingClaims};
pub use selector::{first_untolerated, selector_matches, tolerates};
pub use server_decision::{
    RecordProblem, RollBackCause, ServerDecision, decide_server, has_protection,
};
pub use server_plan::{ServerPlan, claim_of, is_user_made_ref, plan_server};
pub use status::{
    BoundCondition, OWN_CONDITIONS, claim_phase, claim_status_after, find_bound, server_phase,
    server_status_after,
};
pub use triggers::{ResyncCursor, Triggers, Wake};
pub use view::{
    ClaimCatalog, ClaimView, Liveness, ServerCatalog, ServerView, WithLiveClaim, WithLiveServer,
};
pub use why::{Cause, Hindrance, PickState, Unavailability, hindrance, selector_text};
pub use winner::{Admit, Turn, outranked_on, turn_on};
