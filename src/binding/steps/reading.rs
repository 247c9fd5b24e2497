//! The one way a driver whose live reads answer at once (the model check, `explain`,
//! the tests) carries a step through the read it asks for. The controllers, whose reads
//! go over the network, do the same in two calls: the step, the read, the step again.

use crate::api::{CachedClaim, CachedServer, ServerClaimRef};

use super::work::{ClaimStep, LiveClaim, LiveServer, ServerStep};

/// A claim's step taken once, and again with the server it asks to read, as `read`
/// answers.
pub fn claim_step_reading(
    step: impl Fn(LiveServer<'_>) -> ClaimStep,
    read: impl Fn(&str) -> Option<CachedServer>,
) -> ClaimStep {
    match step(None) {
        ClaimStep::ReadServer(name) => {
            let live = read(&name);
            step(Some((&name, live.as_ref())))
        }
        step => step,
    }
}

/// A server's step taken once, and again with the claim it asks to read, as `read`
/// answers.
pub fn server_step_reading(
    step: impl Fn(LiveClaim<'_>) -> ServerStep,
    read: impl Fn(&ServerClaimRef) -> Option<CachedClaim>,
) -> ServerStep {
    match step(None) {
        ServerStep::ReadClaim(r) => {
            let live = read(&r);
            step(Some((&r, live.as_ref())))
        }
        step => step,
    }
}
