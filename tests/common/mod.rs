//! What the suites share: the namespace, the one fixture builder, the invariants, one poll helper, one
//! tool-presence check, the model check's copy of the claim admission rules, the
//! listing of the project's source files the convention tests read, and the monitoring
//! files (the documented metrics, the dashboard's queries).

pub mod claim_admission;
pub mod fixtures;
pub mod invariants;
pub mod monitoring;
pub mod names;
pub mod poll;
pub mod sources;
pub mod tools;
