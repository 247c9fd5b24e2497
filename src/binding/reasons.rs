//! The reasons the binder writes for people to read: a Pending claim's `Bound` condition,
//! the claims' events and the servers' events ([`crate::binding::LostReason`], a Lost
//! claim's, is declared beside the outcomes it counts). One enum each, declared by
//! [`reasons!`], so that `ALL` lists every variant by construction: the plans take
//! these enums, not strings, and tests/binding/reason_rows.rs holds docs/operations.md's
//! troubleshooting tables to `ALL`, so a new reason cannot be left out of them. On the
//! ground floor of src/binding: the rooms above take their reason constants from here.

use crate::api::names::REASON_EVICTION_HELD_BY_BUDGET;

/// Declares an enum of reasons: each variant with the text the API objects carry,
/// `as_str`, and `ALL`, every variant in the order declared. The one list makes all
/// three, so none can leave a variant out.
macro_rules! reasons {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:expr,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every variant, in the order declared.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The reason as the API objects carry it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use reasons;

reasons! {
    /// The reason of a Pending claim's `Bound` condition: why it has no server yet.
    pub enum PendingReason {
        /// No free server can serve it; the message counts the servers by reason.
        NoMatchingServer => "NoMatchingServer",
        /// Servers fit, but the matching keeps them for claims ahead of it.
        WaitingForTurn => "WaitingForTurn",
        /// A server is chosen; the server side has not recorded the claim yet.
        WaitingForServer => "WaitingForServer",
        /// The user-chosen server does not exist.
        ServerNotFound => "ServerNotFound",
        /// The user-chosen server cannot serve the claim.
        ServerMismatch => "ServerMismatch",
        /// The user-chosen server serves another claim.
        ServerAlreadyClaimed => "ServerAlreadyClaimed",
        /// The user-chosen server refuses the server controller's writes.
        ServerWriteRefused => "ServerWriteRefused",
        /// The API server refused the claim's own write; it backs off.
        WriteRefused => "WriteRefused",
        /// The claim's class does not exist.
        ClassNotFound => "ClassNotFound",
        /// The claim's class does not let its namespace in.
        ClassNotAllowed => "ClassNotAllowed",
        /// A full quota of its namespace does not charge it.
        QuotaExceeded => "QuotaExceeded",
        /// A quota of its namespace has not counted what the namespace holds yet.
        QuotaNotCounted => "QuotaNotCounted",
    }
}

impl PendingReason {
    /// The reason a condition's `reason` names, if it is one of these.
    pub fn parse(reason: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.as_str() == reason)
    }

    /// Whether the claim waits because an admin's policy says so (a full quota, a class
    /// closed to its namespace), not for the fleet or the controllers: nothing is
    /// broken, and `ServerBinderClaimsPending` does not fire for it.
    pub const fn is_policy(self) -> bool {
        matches!(self, Self::QuotaExceeded | Self::ClassNotAllowed)
    }
}

reasons! {
    /// The reason of an event the claim controller records on a claim.
    pub enum ClaimEventReason {
        Bound => "Bound",
        FailedBinding => "FailedBinding",
        // A waiting claim's event carries its condition's reason.
        WaitingForTurn => PendingReason::WaitingForTurn.as_str(),
        Rebinding => "Rebinding",
        ServerMismatch => PendingReason::ServerMismatch.as_str(),
        ServerWriteRefused => PendingReason::ServerWriteRefused.as_str(),
        WriteRefused => PendingReason::WriteRefused.as_str(),
        ClassNotFound => PendingReason::ClassNotFound.as_str(),
        ClassNotAllowed => PendingReason::ClassNotAllowed.as_str(),
        QuotaExceeded => PendingReason::QuotaExceeded.as_str(),
        QuotaNotCounted => PendingReason::QuotaNotCounted.as_str(),
        ServerDeleting => "ServerDeleting",
        SelectorMismatch => "SelectorMismatch",
        ServerRefRestored => "ServerRefRestored",
        BindCompletedDropped => "BindCompletedDropped",
        ClaimLost => "ClaimLost",
        ClaimMisbound => "ClaimMisbound",
        EvictionScheduled => "EvictionScheduled",
        EvictionHeldByBudget => REASON_EVICTION_HELD_BY_BUDGET,
        EvictionCancelled => "EvictionCancelled",
        ClaimEvicted => "ClaimEvicted",
    }
}

reasons! {
    /// The reason of an event the server controller records on a server.
    pub enum ServerEventReason {
        Claimed => "Claimed",
        Released => "Released",
        RolledBack => "RolledBack",
        DeletionBlocked => "DeletionBlocked",
        Cleaning => "Cleaning",
        CleaningRecordRepaired => "CleaningRecordRepaired",
        Cleaned => "Cleaned",
        Evicted => "Evicted",
    }
}

/// An event's reason: a claim's or a server's. [`crate::binding::BindingEvent`]'s
/// constructors take only these, so every reason an event carries is a variant of one
/// of the enums above.
pub trait EventReason: Copy {
    /// The reason as the event carries it.
    fn text(self) -> &'static str;
}

impl EventReason for ClaimEventReason {
    fn text(self) -> &'static str {
        self.as_str()
    }
}

impl EventReason for ServerEventReason {
    fn text(self) -> &'static str {
        self.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_each_reason_once() {
        let texts =
            |all: &[&'static str]| all.iter().collect::<std::collections::BTreeSet<_>>().len();
        let pending: Vec<_> = PendingReason::ALL.iter().map(|r| r.as_str()).collect();
        let claim: Vec<_> = ClaimEventReason::ALL.iter().map(|r| r.as_str()).collect();
        let server: Vec<_> = ServerEventReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(texts(&pending), pending.len(), "{pending:?}");
        assert_eq!(texts(&claim), claim.len(), "{claim:?}");
        assert_eq!(texts(&server), server.len(), "{server:?}");
    }

    #[test]
    fn every_pending_reason_reads_back_and_names_its_variant() {
        for &r in PendingReason::ALL {
            assert_eq!(PendingReason::parse(r.as_str()), Some(r));
            assert_eq!(format!("{r:?}"), r.as_str());
        }
        assert_eq!(PendingReason::parse("Bound"), None);
    }
}
