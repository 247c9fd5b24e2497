//! What one server or claim says on its own: its phase and status words, its release
//! gates, whether it can be claimed, and the evidence a bind leaves on it. Read by every
//! room above; reads no catalog.

pub(super) mod class_labels;
pub(super) mod eligibility;
pub mod eviction;
pub mod evidence;
pub mod gates;
pub(super) mod status;
