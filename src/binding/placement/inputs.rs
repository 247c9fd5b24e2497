//! What a pick weighs besides the servers.

use crate::binding::claim_side::assumed::AssumedChoices;
use crate::binding::claim_side::backoff::Refusal;
use crate::binding::meta::ClaimKey;
use crate::binding::placement::in_flight::InFlight;

use super::waiting_claims::WaitingClaims;

/// What a pick weighs besides the servers.
#[derive(Clone, Copy)]
pub struct PickInputs<'a> {
    /// Servers the pick passes over (`pass_over`: chosen for another claim, or named by a
    /// claim that would win them).
    pub skip: &'a dyn Fn(&str) -> bool,
    /// Servers whose last write the API server refused
    /// ([`crate::binding::claim_side::backoff::RefusingServers`]): `skip` passes them over too; this
    /// says why in a waiting claim's summary.
    pub refuses: &'a dyn Fn(&str) -> bool,
    /// The claim cache's waiting and serving claims.
    pub waiting: &'a WaitingClaims,
    /// Picks this controller made whose writes the caches may not show yet.
    pub assumed: &'a AssumedChoices,
    /// The claims backing off after a refused write (in this process's memory; the
    /// claim cache also shows it once their status says so): ahead of nobody.
    pub held_back: &'a [ClaimKey],
    /// This claim's refusal, while it backs off.
    pub refused: Option<&'a Refusal>,
    /// The picks in flight counted per class and shape, when they count `assumed`
    /// (the binder's own; `None` makes a pick walk `assumed`).
    pub in_flight: Option<&'a InFlight>,
}
