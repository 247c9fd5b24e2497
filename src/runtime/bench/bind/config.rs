//! What `bench bind` runs: the fleet, the operator's settings, when to stop. A file of
//! its own, so that the report, which prints it, does not reach back up into
//! `bind/mod.rs` for it.

use std::time::Duration;

use super::churn;
use super::fleet::{Mix, QuotaScale};
use super::tenants::{Schedule, Tenants};

/// What to run.
#[derive(Debug, Clone)]
pub struct BindConfig {
    pub servers: usize,
    pub claims: usize,
    pub mix: Mix,
    /// How large the quotas of `classes-quotas` are.
    pub quota_scale: QuotaScale,
    /// The operator's `--concurrency`.
    pub concurrency: u16,
    /// Claims per second, created while the operator runs; `None`: all claims first.
    pub rate: Option<f64>,
    pub namespaces: usize,
    /// How the claims are spread over the namespaces and when they are created.
    pub tenants: Tenants,
    /// Delete each claim this long after it is seen Bound (`hold.rs`).
    pub hold: Option<Duration>,
    /// Stop when no claim was created or bound for this long.
    pub stall: Duration,
    /// How long the write ceiling is measured.
    pub ceiling: Duration,
    /// Batch mode: leave the servers unregistered (see `--fresh-servers`).
    pub fresh_servers: bool,
    /// The embedded API server's watch coalescing window (`--watch-coalesce-ms`).
    pub watch_coalesce: Duration,
    /// Change servers while claims wait, once the bind phase is over ([`churn`]).
    pub churn: Option<churn::Churn>,
}

impl BindConfig {
    /// Which namespace each claim goes in, and when it is created.
    pub fn schedule(&self) -> Schedule {
        Schedule::new(self.tenants, self.claims, self.namespaces)
    }
}
