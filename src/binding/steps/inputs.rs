//! [`StepInputs`]: all a step reads, borrowed from the binder that runs it.

use crate::binding::claim_side::ClaimSide;
use crate::binding::placement::in_flight::InFlight;
use crate::binding::world::World;

use super::rules::{BinderConfig, Rules};

/// What a claim's or a server's step reads: the rules, the world, and the claim side
/// whose picks in flight and claims backing off count. In the binary both controllers
/// share one binder; the model check, which runs them apart, hands a server step the
/// claim controller's claim side (docs/binding.md, "Whose pick is it").
#[derive(Clone, Copy)]
pub struct StepInputs<'a> {
    pub rules: &'a Rules,
    pub config: &'a BinderConfig,
    pub world: &'a World,
    pub claim_side: &'a ClaimSide,
    /// The claim side's picks counted per class and shape: only where the claim side
    /// is the world's own (they count the world's free servers).
    pub in_flight: Option<&'a InFlight>,
}
