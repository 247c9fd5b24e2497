//! The binding protocol as pure decisions: no I/O, no clocks, no randomness.
//!
//! docs/binding.md is the reference; [`decide_claim`] and [`decide_server`] have one match
//! arm per row of its two tables, and [`plan_claim`] / [`plan_server`] turn a decision
//! into the writes, event and outcome the controllers carry out.

pub mod binder;
pub mod bounded;
pub mod claim_side;
mod effects;
mod few;
pub mod meta;
pub mod placement;
pub mod protocol;
pub mod reasons;
mod selector;
pub mod state;
pub mod steps;
pub mod wakeups;
pub mod world;

pub use binder::{Binder, Feed, Settles};
pub use claim_side::ClaimSide;
pub use claim_side::assumed::{AssumedChoices, claim_key};
pub use effects::{BindingEvent, EventKind, LostReason, Outcome, Related, RepairCase, Repairer};
pub use meta::{ClaimKey, claim_ref_of, is_controller_chosen};
pub use placement::index::{FreeServerIndex, is_free};
pub use placement::{ClaimShape, PickInputs, Placement, WAITING_FOR_TURN, WaitingClaims};
pub use protocol::claim_decision::{
    ClaimDecision, ClaimInputs, assumption_for, decide_claim, pass_over,
};
pub use protocol::claim_plan::{ClaimPlan, plan_claim};
pub use protocol::describe::CLAIM_BEING_DELETED;
pub use protocol::server_decision::{
    RecordProblem, RollBackCause, ServerDecision, decide_server, has_protection,
};
pub use protocol::server_plan::{ServerPlan, claim_of, is_user_made_ref, plan_server};
pub use protocol::why::{Cause, Hindrance, PickState, Unavailability, hindrance, selector_text};
pub use protocol::winner::{Admit, Turn, outranked_on, turn_on};
pub use reasons::{ClaimEventReason, EventReason, PendingReason, ServerEventReason};
pub use selector::{first_untolerated, selector_matches, tolerates};
pub use state::eligibility::{
    Ineligible, NotFree, RefMatch, describe_ref, eligibility, not_free, ref_match, ref_uid,
    server_is_claimable,
};
pub use state::evidence::{can_take_back, records_bind_to};
pub use state::status::{
    BoundCondition, OWN_CONDITIONS, claim_phase, claim_status_after, find_bound, server_phase,
    server_status_after,
};
pub use steps::{
    BinderConfig, ClaimDecider, ClaimStep, ClaimWork, LiveClaim, LiveServer, ObjectWrite, Rules,
    ServerDecider, ServerStep, ServerWork, Sight, claim_step_reading, server_step_reading,
};
pub use wakeups::{ResyncCursor, Triggers, Wake};
pub use world::view::{
    ClaimCatalog, ClaimView, Liveness, ServerCatalog, ServerView, WithLiveClaim, WithLiveServer,
};
pub use world::{Listing, World};
