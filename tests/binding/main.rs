//! The binding core, tested without I/O: every table row, the PV binder's scenarios,
//! the free-server index against brute force, and an exhaustive model check.

mod claim_table;
mod index_props;
mod pv_scenarios;
mod server_table;
mod support;
mod world;
