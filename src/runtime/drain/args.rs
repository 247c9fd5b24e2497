//! The verbs' command lines.

use std::path::PathBuf;

use k8s_openapi::jiff::SignedDuration;

use super::duration;
use super::error::EXIT_CODES_HELP;

/// The servers a verb acts on, and how it connects: cordon's and uncordon's arguments,
/// and the first of drain's.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct VerbArgs {
    /// The servers, by name (or -l, not both).
    #[arg(value_name = "SERVER")]
    pub servers: Vec<String>,
    /// The servers whose labels match this selector instead (`rack=r1`,
    /// `rack in (r1,r2)`), as kubectl's.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Print what would be done, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The kubeconfig to use (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// Drain's arguments.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct DrainArgs {
    #[command(flatten)]
    pub verb: VerbArgs,
    /// A hard deadline DURATION from now (`30s`, `5m`, `1h30m`): every claim is off by
    /// then, whatever its tolerations and any disruption budget say. Without it, each
    /// claim gets the time its own tolerations give, and one tolerating the drain taint
    /// for ever stays. On a server drained already, it moves the hard deadline only
    /// earlier.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub grace: Option<SignedDuration>,
    /// After the writes, wait until no drained server is held by a bound claim.
    #[arg(long, conflicts_with = "dry_run")]
    pub wait: bool,
    /// How long --wait waits (default, or 0s: no limit), then exits 4 naming the claims
    /// still bound and why.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, requires = "wait")]
    pub timeout: Option<SignedDuration>,
}
