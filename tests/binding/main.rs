//! The binding core, tested without I/O: every table row, the PV binder's scenarios,
//! the free-server index against brute force, and an exhaustive model check.

// The model check's states are clones of small Kubernetes objects: allocation is most
// of its time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use crate::common::claim_admission;
mod claim_table;
mod class_rows;
mod decision_rows;
mod descriptions;
mod index_props;
mod late_shapes;
mod model;
mod pick_cost;
mod placement_props;
mod pv_scenarios;
mod quota_rows;
mod reason_rows;
mod server_table;
mod support;
mod wake_rules;
mod world;
