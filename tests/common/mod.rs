//! What the suites share: the namespace, the one fixture builder, one poll helper, one
//! tool-presence check, and the model check's copy of the claim admission rules.

pub mod claim_admission;
pub mod fixtures;
pub mod names;
pub mod poll;
pub mod tools;
