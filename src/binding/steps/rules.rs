//! The rules a binder runs and how it is configured: the project's, or a model check's
//! mutant.

use std::time::Duration;

use crate::api::{CachedClaim, CachedServer};
use crate::binding::claim_side::assumed::{EndRule, ends_on_claim_event};
use crate::binding::protocol::claim_decision::{ClaimDecision, ClaimInputs, decide_claim};
use crate::binding::protocol::server_decision::{ServerDecision, decide_server};
use crate::binding::protocol::winner::{Admit, Turn};
use crate::binding::state::gates::{self, ClassGatesRule};
use crate::binding::wakeups::Triggers;
use crate::binding::world::quota::{self, CountedRule};
use crate::binding::world::view::{ClaimView, Liveness, ServerView};

/// The claim controller's decision function (swappable for the model check's mutants).
pub type ClaimDecider =
    fn(&CachedClaim, &dyn ServerView, &ClaimInputs<'_>, Liveness) -> ClaimDecision;
/// The server controller's decision function; the slice is the default release gates,
/// then whether a claim naming the server has its turn, and whether its quotas charge
/// it.
pub type ServerDecider =
    fn(&CachedServer, &dyn ClaimView, Liveness, &[String], Turn<'_>, Admit<'_>) -> ServerDecision;

/// The rules a binder runs: the project's ([`Rules::real`]), or a model check's mutant.
#[derive(Clone, Copy)]
pub struct Rules {
    pub claim: ClaimDecider,
    pub server: ServerDecider,
    pub triggers: Triggers,
    pub assumption_ends: EndRule,
    /// Whether a quota was counted for its spec, so it may admit ([`quota::is_counted`]).
    pub quota_counted: CountedRule,
    /// The class gates a release of a server waits for, given the gates of the classes
    /// that take it in now ([`gates::class_gates`]: those its bind recorded).
    pub class_gates: ClassGatesRule,
}

impl Rules {
    pub fn real() -> Self {
        Self {
            claim: |claim, servers, inputs, liveness| {
                decide_claim(claim, servers, inputs, liveness)
            },
            server: |server, claims, liveness, gates, turn, admit| {
                decide_server(server, claims, liveness, gates, turn, admit)
            },
            triggers: Triggers::real(),
            assumption_ends: ends_on_claim_event,
            quota_counted: quota::is_counted,
            class_gates: gates::class_gates,
        }
    }
}

impl std::fmt::Debug for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rules")
    }
}

/// How a binder is configured: the process's flags that rules read.
#[derive(Clone, Debug)]
pub struct BinderConfig {
    /// A waiting claim's summary is rewritten at most once per this interval.
    pub status_interval: Duration,
    /// The release gates of a server that names none in `spec.releaseGates`.
    pub release_gates: Vec<String>,
}

/// What a cache shows of the other claims when a claim is decided. The binary's cache
/// shows all it holds; the model check also decides as a cache that has not yet seen
/// the claims naming servers (another process's picks) would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sight {
    All,
    NotYetRivals,
}
