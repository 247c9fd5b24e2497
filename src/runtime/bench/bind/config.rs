//! What `bench bind` runs: the fleet, the operator's settings, when to stop. A file of
//! its own, so that the report, which prints it, does not reach back up into
//! `bind/mod.rs` for it.

use std::time::Duration;

use super::churn;
use super::fleet::Mix;

/// What to run.
#[derive(Debug, Clone)]
pub struct BindConfig {
    pub servers: usize,
    pub claims: usize,
    pub mix: Mix,
    /// The operator's `--concurrency`.
    pub concurrency: u16,
    /// Claims per second, created while the operator runs; `None`: all claims first.
    pub rate: Option<f64>,
    pub namespaces: usize,
    /// Stop when no claim was created or bound for this long.
    pub stall: Duration,
    /// How long the write ceiling is measured.
    pub ceiling: Duration,
    /// Batch mode: leave the servers unregistered (see `--fresh-servers`).
    pub fresh_servers: bool,
    /// Change servers while claims wait, once the bind phase is over ([`churn`]).
    pub churn: Option<churn::Churn>,
}
