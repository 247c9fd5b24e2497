//! The protocol's decisions and plans, one match arm per row of docs/binding.md's two
//! state tables: the claim side's and the server side's, the fair turn between claims
//! naming one server, and why a claim waits.

pub(super) mod claim_decision;
pub(super) mod claim_plan;
pub mod coalesce;
pub(super) mod describe;
pub(super) mod server_decision;
pub(super) mod server_plan;
pub mod why;
pub(super) mod winner;
