//! Why a claim waits: every reason a `Pending` claim's `Bound` condition can carry. The
//! claim plans take this enum, never a string, so the reasons `kubectl get scl` shows,
//! the metrics count (`server_binder_claims_pending{reason}`) and the alerts exclude are
//! one fixed list.

use crate::binding::claim_side::backoff::{SERVER_WRITE_REFUSED, WRITE_REFUSED};
use crate::binding::placement::WAITING_FOR_TURN;
use crate::binding::protocol::claim_decision::NO_MATCHING_SERVER;
use crate::binding::world::quota::{QUOTA_EXCEEDED, QUOTA_NOT_COUNTED};

/// The reason of a `Pending` claim's `Bound` condition (docs/operations.md, "Pending
/// claims: the Bound condition's reason").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PendingReason {
    /// No free server fits (`NoMatchingServer`).
    NoMatchingServer,
    /// Servers fit, but go to claims ahead of it (`WaitForTurn`).
    WaitingForTurn,
    /// A server is chosen; the server controller has not recorded the claim yet.
    WaitingForServer,
    /// The user-chosen server does not exist.
    ServerNotFound,
    /// The user-chosen server cannot serve the claim.
    ServerMismatch,
    /// The user-chosen server serves another claim.
    ServerAlreadyClaimed,
    /// The chosen server refuses the server controller's writes.
    ServerWriteRefused,
    /// The API server refused the claim's own write; the claim backs off.
    WriteRefused,
    /// The class named by `serverClassName` does not exist.
    ClassNotFound,
    /// The class does not admit the claim's namespace: an admin's policy.
    ClassNotAllowed,
    /// A full ServerQuota of the namespace: an admin's policy.
    QuotaExceeded,
    /// The quota has not counted the namespace's claims yet (seconds).
    QuotaNotCounted,
}

impl PendingReason {
    pub const ALL: [PendingReason; 12] = [
        PendingReason::NoMatchingServer,
        PendingReason::WaitingForTurn,
        PendingReason::WaitingForServer,
        PendingReason::ServerNotFound,
        PendingReason::ServerMismatch,
        PendingReason::ServerAlreadyClaimed,
        PendingReason::ServerWriteRefused,
        PendingReason::WriteRefused,
        PendingReason::ClassNotFound,
        PendingReason::ClassNotAllowed,
        PendingReason::QuotaExceeded,
        PendingReason::QuotaNotCounted,
    ];

    /// The condition's `reason`, as written.
    pub const fn as_str(self) -> &'static str {
        match self {
            PendingReason::NoMatchingServer => NO_MATCHING_SERVER,
            PendingReason::WaitingForTurn => WAITING_FOR_TURN,
            PendingReason::WaitingForServer => "WaitingForServer",
            PendingReason::ServerNotFound => "ServerNotFound",
            PendingReason::ServerMismatch => "ServerMismatch",
            PendingReason::ServerAlreadyClaimed => "ServerAlreadyClaimed",
            PendingReason::ServerWriteRefused => SERVER_WRITE_REFUSED,
            PendingReason::WriteRefused => WRITE_REFUSED,
            PendingReason::ClassNotFound => "ClassNotFound",
            PendingReason::ClassNotAllowed => "ClassNotAllowed",
            PendingReason::QuotaExceeded => QUOTA_EXCEEDED,
            PendingReason::QuotaNotCounted => QUOTA_NOT_COUNTED,
        }
    }

    /// The reason a condition's `reason` names, if it is one of these.
    pub fn parse(reason: &str) -> Option<PendingReason> {
        Self::ALL.into_iter().find(|r| r.as_str() == reason)
    }

    /// Whether the claim waits because an admin's policy says so (a full quota, a class
    /// closed to its namespace), not for the fleet or the controllers: nothing is broken,
    /// and `ServerBinderClaimsPending` does not fire for it.
    pub const fn is_policy(self) -> bool {
        matches!(
            self,
            PendingReason::QuotaExceeded | PendingReason::ClassNotAllowed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::PendingReason;

    #[test]
    fn every_reason_reads_back_and_names_its_variant() {
        for r in PendingReason::ALL {
            assert_eq!(PendingReason::parse(r.as_str()), Some(r));
            assert_eq!(format!("{r:?}"), r.as_str());
        }
        assert_eq!(PendingReason::parse("Bound"), None);
    }
}
