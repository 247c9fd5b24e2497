//! What a decision leads to besides object writes: the event a human reads and the
//! outcome a metric counts. Kept as plain data so the pure core can say it and the
//! controllers can emit it.

use crate::api::{ReclaimPolicy, ServerClaimRef};

use crate::binding::reasons::{EventReason, reasons};

/// `Normal` or `Warning`, as in core/v1 Events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Normal,
    Warning,
}

/// An event to record on the object, emitted only when the plan's writes succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingEvent {
    pub kind: EventKind,
    /// The event's reason (`Bound`, `FailedBinding`, ...): a variant's text of
    /// [`crate::binding::reasons::ClaimEventReason`] or
    /// [`crate::binding::reasons::ServerEventReason`].
    pub reason: &'static str,
    /// What the controller did (`Binding`, `Releasing`, ...), for events.k8s.io `action`.
    pub action: &'static str,
    /// The human-readable note: which server, which claim, why.
    pub note: String,
    /// The other object of the binding (events.k8s.io `related`): the claim on a server's
    /// event, the server on a claim's. Part of the event's identity, so a series never
    /// folds two tenants' events into one.
    pub related: Option<Related>,
}

/// The other object an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Related {
    /// A claim, with the uid when the ref has one.
    Claim(ServerClaimRef),
    /// A server, by name.
    Server(String),
}

impl BindingEvent {
    pub fn normal(reason: impl EventReason, action: &'static str, note: impl Into<String>) -> Self {
        Self {
            kind: EventKind::Normal,
            reason: reason.text(),
            action,
            note: note.into(),
            related: None,
        }
    }

    pub fn warning(
        reason: impl EventReason,
        action: &'static str,
        note: impl Into<String>,
    ) -> Self {
        Self {
            kind: EventKind::Warning,
            reason: reason.text(),
            action,
            note: note.into(),
            related: None,
        }
    }
}

/// Which controller repaired what, for `repairs_total{controller,case}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairCase {
    /// The claim's status was lost or stale (e.g. a Lost claim whose server came back).
    ClaimStatus,
    /// A claim adopted a server reserved for it (by a user, or by a crash after the
    /// server write).
    Adopted,
    /// A bound claim's lost `serverClaimRef` was restored on its server.
    ServerRefRestored,
    /// A bound server's missing finalizer was added back.
    Finalizer,
    /// A server ref to a claim that names another server, or that cannot adopt the
    /// server, was rolled back.
    RolledBack,
    /// A bound claim's cleared `serverRef` was written back.
    ClaimRefRestored,
}

/// Which controller makes a repair: each writes only its own kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repairer {
    ClaimController,
    ServerController,
}

impl RepairCase {
    pub const ALL: [RepairCase; 6] = [
        Self::ClaimStatus,
        Self::Adopted,
        Self::ClaimRefRestored,
        Self::ServerRefRestored,
        Self::Finalizer,
        Self::RolledBack,
    ];

    /// Who makes this repair: the claim controller the ones written on claims, the
    /// server controller the ones written on servers.
    pub fn repairer(self) -> Repairer {
        match self {
            Self::ClaimStatus | Self::Adopted | Self::ClaimRefRestored => Repairer::ClaimController,
            Self::ServerRefRestored | Self::Finalizer | Self::RolledBack => {
                Repairer::ServerController
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaimStatus => "claim_status",
            Self::Adopted => "adopted",
            Self::ServerRefRestored => "server_ref_restored",
            Self::Finalizer => "finalizer",
            Self::RolledBack => "rolled_back",
            Self::ClaimRefRestored => "claim_ref_restored",
        }
    }
}

reasons! {
    /// Why a claim was lost: its `Bound` condition's reason, and
    /// `lost_claims_total{reason}`.
    pub enum LostReason {
        ServerRefCleared => "ServerRefCleared",
        ServerMissing => "ServerMissing",
        ServerMisbound => "ServerMisbound",
        /// An `Evict` taint ended the bind.
        Evicted => "Evicted",
    }
}

/// What a plan achieves, counted by metrics when its writes succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A claim became Bound (observe the bind latency, count `binds_total`).
    Bound,
    /// A claim gave up its chosen server to pick again.
    Rebind,
    /// A bound claim was lost.
    Lost(LostReason),
    /// A server was released from a claim that is gone.
    Released(ReclaimPolicy),
    /// Something half-bound was repaired.
    Repair(RepairCase),
}
