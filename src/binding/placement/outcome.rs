//! What a pick answers: where a waiting claim goes, and the claims ahead of one that
//! waits its turn.

use crate::binding::meta::ClaimKey;
use crate::binding::reasons::PendingReason;

/// The condition reason of a claim that waits its turn (`WaitForTurn`).
pub const WAITING_FOR_TURN: &str = PendingReason::WaitingForTurn.as_str();

/// The claims ahead of a claim that waits its turn, in the fair order: the first few,
/// and how many there are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ahead {
    pub first: Vec<ClaimKey>,
    pub total: usize,
}

/// How many of the claims ahead a claim's message names.
pub const AHEAD_NAMED: usize = 3;

/// Where a waiting claim goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement<'a> {
    /// Take this server.
    Pick(&'a str),
    /// Servers fit, but every maximum matching needs them for claims ahead of this one
    /// (those that compete with it for the same servers).
    WaitForTurn(Ahead),
    /// No free server fits.
    NoMatch,
}
