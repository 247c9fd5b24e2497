//! What one step of a claim or a server answers: a live read to make first, or the
//! writes to do and what follows them.

use std::time::Duration;

use crate::api::{CachedClaim, CachedServer, ServerClaimRef};
use crate::binding::meta::ClaimKey;
use crate::binding::protocol::claim_decision::ClaimDecision;
use crate::binding::protocol::claim_plan::ClaimPlan;
use crate::binding::protocol::server_decision::ServerDecision;
use crate::binding::protocol::server_plan::ServerPlan;
use crate::binding::wakeups::Wake;
use crate::binding::world::budgets::BudgetRecord;
use crate::binding::world::quota::Charge;

/// The server a claim's step asked to read, as read (`None` inside: NotFound).
pub type LiveServer<'a> = Option<(&'a str, Option<&'a CachedServer>)>;
/// The claim a server's step asked to read, as read (`None` inside: NotFound).
pub type LiveClaim<'a> = Option<(&'a ServerClaimRef, Option<&'a CachedClaim>)>;

/// One claim reconcile's answer.
#[derive(Clone, Debug)]
pub enum ClaimStep {
    /// Nothing to do until the claim changes: it is being deleted (claims carry no
    /// finalizer of ours; its server is released once it is gone).
    Idle,
    /// The cache says this server is gone: read it live (the PV controller's rule: ask
    /// the API server before declaring the claim Lost), then reconcile again with it.
    ReadServer(String),
    /// The decision only refreshes the claim's summary, which may not be rewritten yet:
    /// write nothing, look again after this long.
    Wait {
        decision: Box<ClaimDecision>,
        after: Duration,
    },
    /// Write the plan, reporting each write's result ([`Binder::claim_object_written`],
    /// [`Binder::claim_status_written`]).
    Act(Box<ClaimWork>),
}

impl ClaimStep {
    /// Whether carrying the step out changes nothing: no read, write, event, count,
    /// timer, assumption or wake-up. A reconcile that takes it only ends, so the
    /// controllers need not queue one to take it (docs/binding.md, "Wake-up rules").
    pub fn changes_nothing(&self) -> bool {
        match self {
            ClaimStep::Idle => true,
            ClaimStep::ReadServer(_) | ClaimStep::Wait { .. } => false,
            ClaimStep::Act(work) => work.changes_nothing(),
        }
    }
}

/// Writes to do for a claim, and what follows them.
#[derive(Clone, Debug)]
pub struct ClaimWork {
    pub key: ClaimKey,
    pub decision: ClaimDecision,
    pub plan: ClaimPlan,
    /// The server this pick assumed chosen (the assumption started with this step).
    pub picked: Option<String>,
    /// Look at the claim again after this long (`None`: on a change, or the resync).
    pub then: Option<Duration>,
    /// Whom to wake once the step has started: a pick taken up without a write
    /// (`ResumePick`) wakes its server, which no watch event will.
    pub wakes: Wake,
    /// Seconds from the claim's creation to this step, for the bind duration metric.
    pub since_created: Option<f64>,
    /// The quotas to charge the claim to before any other write, each with the charge
    /// added and to be written at the resourceVersion it was read at (docs/binding.md,
    /// "Server quotas"). If one cannot be written, nothing else is: the pick is given up
    /// as a conflicting write would be, and the claim decides again.
    pub charges: Vec<Charge>,
    /// The disruption budgets to record the claim's eviction on before any other write
    /// (docs/binding.md, "Disruption budgets"), each to be written at the
    /// resourceVersion it was read at; as for a charge, if one cannot be written, nothing
    /// else is.
    pub records: Vec<BudgetRecord>,
}

impl ClaimWork {
    fn changes_nothing(&self) -> bool {
        let plan = &self.plan;
        plan.is_noop()
            && plan.event.is_none()
            && plan.outcome.is_none()
            && self.picked.is_none()
            && self.then.is_none()
            && self.wakes.is_empty()
            && self.charges.is_empty()
            && self.records.is_empty()
            && !self.decision.ends_a_bind_by_eviction()
    }

    /// Whether the binder needs to hear how the object write ended: a pick's, which
    /// starts or ends its assumption, and a refusal that makes the claim back off.
    pub fn reports_object_write(&self, written: &ObjectWrite<'_>) -> bool {
        self.picked.is_some()
            || matches!(written, ObjectWrite::Refused(_)) && self.decision.backs_off_when_refused()
    }

    /// Whether the binder needs to hear of the status write: only a waiting claim's
    /// summary, which starts its interval.
    pub fn reports_status_write(&self) -> bool {
        self.decision.waits() && self.plan.status.is_some()
    }
}

/// One server reconcile's answer.
#[derive(Clone, Debug)]
pub enum ServerStep {
    /// Releasing on a stale cache would free a server whose claim still exists (the PV
    /// controller's rule): read this claim live, then reconcile again with it.
    ReadClaim(ServerClaimRef),
    Act(Box<ServerWork>),
}

impl ServerStep {
    /// Whether carrying the step out changes nothing: no read, write, event or count
    /// ([`ClaimStep::changes_nothing`]).
    pub fn changes_nothing(&self) -> bool {
        match self {
            ServerStep::ReadClaim(_) => false,
            ServerStep::Act(work) => {
                let plan = &work.plan;
                plan.is_noop()
                    && plan.event.is_none()
                    && plan.outcome.is_none()
                    && work.cleaning_took.is_none()
            }
        }
    }
}

/// Writes to do for a server.
#[derive(Clone, Debug)]
pub struct ServerWork {
    pub decision: ServerDecision,
    pub plan: ServerPlan,
    /// How long the server's cleaning took, when this step ends it (for the metric).
    pub cleaning_took: Option<Duration>,
}

/// How a claim's object write ended, as the binder needs to hear it.
#[derive(Clone, Copy, Debug)]
pub enum ObjectWrite<'a> {
    /// Written; the claim as the API server returned it.
    Written(&'a CachedClaim),
    /// The resourceVersion precondition failed: the claim changed, decide again.
    Conflict,
    /// Refused or failed, with the API server's message (or the transport's). A lost
    /// response counts too: the claim backs off, and its next try sees what was written.
    Refused(&'a str),
}
