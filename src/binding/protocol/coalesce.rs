//! When a waiting claim's summary is written: a Pending claim's message counts every
//! server ([`crate::binding::protocol::why`]), so nearly any server change changes it. Writing each change
//! would cost a status write (and an event) per pending claim per server event; instead
//! a summary replaces a summary at most once per interval, and a claim that waits is
//! looked at again once the interval has passed, so its summary is never older than
//! about one interval.
//!
//! Everything else is written at once: a claim's first Pending status, a pick, a bind, a
//! loss, a user's ref that cannot be served.

use crate::api::{CachedClaim, ClaimPhase, ServerClaimStatus};

use crate::binding::protocol::claim_decision::SUMMARY_REASONS;
use crate::binding::protocol::claim_plan::ClaimPlan;
use crate::binding::state::status::find_bound;

/// Whether `status` shows a waiting claim's summary.
pub fn shows_summary(status: Option<&ServerClaimStatus>) -> bool {
    status.is_some_and(|s| {
        s.phase == Some(ClaimPhase::Pending)
            && find_bound(&s.conditions)
                .is_some_and(|c| SUMMARY_REASONS.contains(&c.reason.as_str()))
    })
}

/// Whether `plan` only replaces the summary `claim` shows with a newer one: a status
/// write and nothing else, from a summary to a summary. Such a write may wait
/// ([`summary_write_delay`]); the model check treats it as waiting for longer than it
/// runs.
pub fn is_summary_refresh(claim: &CachedClaim, plan: &ClaimPlan) -> bool {
    plan.object.is_none()
        && plan.confirm_server.is_none()
        && shows_summary(plan.status.as_ref())
        && shows_summary(claim.status.as_ref())
}
