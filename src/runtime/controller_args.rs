//! The flags `run` and `dev` share: what the controllers do, whichever process runs
//! them. A file of its own, below both commands.

use std::time::Duration;

use crate::controllers::{Options, RESYNC, STATUS_INTERVAL};

use super::logging::LogFormat;

/// Flags that `run` and `dev` share.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Reconciles each controller runs at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Log line format (filter with RUST_LOG, e.g. RUST_LOG=server_binder=debug).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// A Pending claim's "0/N servers can serve this claim: …" status is rewritten at
    /// most once per this many seconds, and refreshed about as often.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = STATUS_INTERVAL.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub status_interval: u64,
    /// The release gates of a server whose spec names none, comma-separated: a server
    /// released under Recycle waits in phase Cleaning until a cleaner passes each. Each
    /// is a domain-prefixed name such as example.com/disk-wiped. A release records the
    /// gates it waits for, so changing this flag changes no cleaning in progress.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = gate_name)]
    pub release_gates: Vec<String>,
    /// Every server and claim is reconciled again once per this many seconds even
    /// without a change, a share of them each second: a safety net, as Kubernetes'
    /// controllers resync.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = RESYNC.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86400)
    )]
    pub resync_interval: u64,
}

/// A `--release-gates` entry, checked as admission checks `spec.releaseGates`.
pub(super) fn gate_name(name: &str) -> Result<String, crate::binding::state::gates::GateNameError> {
    let name = name.trim();
    if name.is_empty() {
        return Ok(String::new());
    }
    crate::binding::state::gates::check_gate_name(name).map(|()| name.to_string())
}

impl ControllerArgs {
    /// The controllers' options these flags set.
    pub fn options(&self) -> Options {
        Options {
            concurrency: self.concurrency,
            status_interval: Duration::from_secs(self.status_interval),
            release_gates: self
                .release_gates
                .iter()
                .filter(|g| !g.is_empty())
                .cloned()
                .collect(),
            resync: Duration::from_secs(self.resync_interval),
        }
    }
}
