//! One step of a claim or a server, as a binder takes it: what it reads
//! ([`StepInputs`]), the decision and plan, and what the step answers (a live read to
//! make first, or the writes to do). The binder runs these; it keeps no rule of its own.

mod claim_step;
mod inputs;
mod reading;
mod rules;
mod server_step;
mod turns;
mod work;

pub use claim_step::{as_its_class_makes_it, claim_step, with_claim_inputs};
pub use inputs::StepInputs;
pub use reading::{claim_step_reading, server_step_reading};
pub use rules::{BinderConfig, ClaimDecider, Rules, ServerDecider, Sight};
pub use server_step::{release_gates, server_step};
pub use turns::{FirstNamed, has_turn};
pub use work::{ClaimStep, ClaimWork, LiveClaim, LiveServer, ObjectWrite, ServerStep, ServerWork};
