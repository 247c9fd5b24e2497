//! What the suites share: the namespace, the one fixture builder, the invariants, one poll helper, one
//! tool-presence check, the model check's copy of the claim admission rules, and the
//! listing of the project's source files the convention tests read.

pub mod claim_admission;
pub mod fixtures;
pub mod invariants;
pub mod names;
pub mod poll;
pub mod sources;
pub mod tools;
