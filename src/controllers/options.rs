//! The controllers' options, and the fixed intervals they requeue by. A file of their
//! own, below every controller file, so that none of them reaches back up into
//! `controllers/mod.rs` for a constant.

use std::time::Duration;

/// Every object is looked at again this often even without a change, by default: a
/// safety net, as the PV controller's periodic resync is ([`Options::resync`]).
pub const RESYNC: Duration = Duration::from_secs(300);
/// After a write conflict, decide again this soon (the watch usually brought the newer
/// version already, and its event re-triggers the object anyway).
pub const CONFLICT_RETRY: Duration = Duration::from_millis(100);
/// After any other failure.
pub const ERROR_RETRY: Duration = Duration::from_secs(5);

/// How often a waiting claim's summary may be rewritten, by default.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Options {
    /// Reconciles each controller runs at once.
    pub concurrency: u16,
    /// A waiting claim's summary is rewritten at most once per this interval
    /// ([`crate::binding::protocol::coalesce`]).
    pub status_interval: Duration,
    /// The release gates of a server that names none in `spec.releaseGates`
    /// ([`crate::binding::state::gates`]).
    pub release_gates: Vec<String>,
    /// Every object is woken once per this interval, a share each second
    /// (`src/controllers/resync.rs`).
    pub resync: Duration,
}

impl Options {
    /// What the binder reads of the options.
    pub fn binder_config(&self) -> crate::binding::BinderConfig {
        crate::binding::BinderConfig {
            status_interval: self.status_interval,
            release_gates: self.release_gates.clone(),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            concurrency: 4,
            status_interval: STATUS_INTERVAL,
            release_gates: Vec::new(),
            resync: RESYNC,
        }
    }
}
