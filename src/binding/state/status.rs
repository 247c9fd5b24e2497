//! Building statuses and their `Bound` condition, following the Kubernetes conventions:
//! `lastTransitionTime` moves only when the condition's status flips, and a status that
//! would not change is not written at all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::names::{CONDITION_BOUND, CONDITION_CLEANING};
use crate::api::{
    CachedClaim, CachedServer, ClaimPhase, ServerClaimStatus, ServerPhase, ServerStatus,
};

use crate::binding::bounded::condition_message;
use crate::binding::meta;

/// The claim's phase; a claim without one has not been seen by the claim controller
/// yet, and is not bound: `Pending`.
pub fn claim_phase(claim: &CachedClaim) -> ClaimPhase {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(ClaimPhase::Pending)
}

/// The server's phase; a server without one has never been bound: `Available`.
pub fn server_phase(server: &CachedServer) -> ServerPhase {
    server
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or(ServerPhase::Available)
}

/// The desired `Bound` condition, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundCondition {
    pub bound: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The `Bound` condition among `conditions`, if any.
pub fn find_bound(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == CONDITION_BOUND)
}

/// `conditions` with the `Bound` condition set to `desired`, or `None` if it already says
/// exactly that for this generation.
pub fn with_bound(
    conditions: &[Condition],
    desired: &BoundCondition,
    generation: Option<i64>,
    now: &Time,
) -> Option<Vec<Condition>> {
    with_condition(conditions, CONDITION_BOUND, desired, generation, now)
}

/// `conditions` with the condition `type_` set to `desired` (`bound`: status "True"),
/// or `None` if it already says exactly that for this generation. Other conditions,
/// also those others wrote (a cleaner's gates), are kept as they are. The message is
/// bounded here ([`condition_message`]), whatever built it.
pub fn with_condition(
    conditions: &[Condition],
    type_: &str,
    desired: &BoundCondition,
    generation: Option<i64>,
    now: &Time,
) -> Option<Vec<Condition>> {
    let status = if desired.bound { "True" } else { "False" };
    let message = condition_message(&desired.message);
    let current = conditions.iter().find(|c| c.type_ == type_);
    if let Some(c) = current
        && c.status == status
        && c.reason == desired.reason
        && c.message == message
        && c.observed_generation == generation
    {
        return None;
    }
    let last_transition_time = match current {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    let mut out: Vec<Condition> = conditions
        .iter()
        .filter(|c| c.type_ != type_)
        .cloned()
        .collect();
    out.push(Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: desired.reason.to_string(),
        message: message.into_owned(),
        observed_generation: generation,
        last_transition_time,
    });
    Some(out)
}

/// The condition types the controllers own. Any other condition is someone else's (a
/// cleaner's release gate) and keeps the generation its writer observed.
pub const OWN_CONDITIONS: [&str; 2] = [CONDITION_BOUND, CONDITION_CLEANING];

/// Moves the controllers' own conditions stamped with the generation the plan read
/// (`from`) to the one its object write produced (`to`): the status describes the spec
/// just written. Never another writer's condition: restamping a cleaner's pass would
/// make a pass for an earlier release count for this one.
fn restamp(conditions: &mut [Condition], from: Option<i64>, to: Option<i64>) {
    let own = conditions
        .iter_mut()
        .filter(|c| OWN_CONDITIONS.contains(&c.type_.as_str()));
    for c in own {
        if c.observed_generation == from {
            c.observed_generation = to;
        }
    }
}

/// What `kubectl get servers` prints of a server beside its phase, as of its spec now
/// and `classes`, the classes that take it in: [`ServerStatus::summary`] (the phase,
/// then `Unclaimable` while cordoned and `Terminating` while being deleted) and
/// [`ServerStatus::classes`]. `planned` with them set; where nothing is planned, the
/// current status with them set if they changed (`None`: nothing to write). No decision
/// reads either field.
pub fn with_display(
    server: &CachedServer,
    classes: Vec<String>,
    planned: Option<ServerStatus>,
) -> Option<ServerStatus> {
    // A server on its way out is shown as it is: a status write could follow the write
    // that lets it go.
    if planned.is_none() && meta::is_deleting(server) {
        return None;
    }
    let base = planned.as_ref().or(server.status.as_ref())?;
    let deleting = meta::is_deleting(server);
    let summary = base
        .phase
        .map(|p| summary(p, server.spec.unclaimable, deleting));
    if base.summary == summary && base.classes == classes {
        return planned;
    }
    Some(ServerStatus {
        summary,
        classes,
        ..base.clone()
    })
}

/// A server's [`ServerStatus::summary`]: `Bound`, `Available,Unclaimable`,
/// `Bound,Terminating` (being deleted, as kubectl shows a PersistentVolume), ...
pub fn summary(phase: ServerPhase, unclaimable: bool, deleting: bool) -> String {
    let phase = match phase {
        ServerPhase::Available => "Available",
        ServerPhase::Bound => "Bound",
        ServerPhase::Released => "Released",
        ServerPhase::Cleaning => "Cleaning",
    };
    let mut summary = phase.to_string();
    if unclaimable {
        summary.push_str(",Unclaimable");
    }
    if deleting {
        summary.push_str(",Terminating");
    }
    summary
}

/// The status a server plan writes once its object write turned `read` into `written`.
pub fn server_status_after(
    status: &ServerStatus,
    read: &CachedServer,
    written: &CachedServer,
) -> ServerStatus {
    let (from, to) = (read.meta().generation, written.meta().generation);
    let mut status = status.clone();
    if status.observed_generation == from {
        status.observed_generation = to;
    }
    restamp(&mut status.conditions, from, to);
    status
}

/// The status a claim plan writes once its object write turned `read` into `written`.
pub fn claim_status_after(
    status: &ServerClaimStatus,
    read: &CachedClaim,
    written: &CachedClaim,
) -> ServerClaimStatus {
    let mut status = status.clone();
    let (from, to) = (read.meta().generation, written.meta().generation);
    restamp(&mut status.conditions, from, to);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServerSpec;

    fn server(phase: ServerPhase, unclaimable: bool) -> CachedServer {
        let spec = ServerSpec {
            unclaimable,
            ..ServerSpec::default()
        };
        let mut s = CachedServer::new("s", spec);
        s.status = Some(ServerStatus {
            phase: Some(phase),
            summary: Some(summary(phase, false, false)),
            ..ServerStatus::default()
        });
        s
    }

    #[test]
    fn the_summary_says_cordoned_and_the_classes_follow_the_catalog() {
        let cordoned = server(ServerPhase::Bound, true);
        let shown = with_display(&cordoned, vec!["gpu".into()], None).expect("a write");
        assert_eq!(shown.summary.as_deref(), Some("Bound,Unclaimable"));
        assert_eq!(shown.classes, ["gpu"]);
        let mut written = cordoned.clone();
        written.status = Some(shown);
        assert_eq!(with_display(&written, vec!["gpu".into()], None), None);
        let left = with_display(&written, Vec::new(), None).expect("the class went");
        assert!(left.classes.is_empty());
    }

    #[test]
    fn a_planned_status_gets_the_summary_of_its_own_phase() {
        let free = server(ServerPhase::Bound, false);
        let planned = ServerStatus {
            phase: Some(ServerPhase::Released),
            ..ServerStatus::default()
        };
        let shown = with_display(&free, Vec::new(), Some(planned)).expect("planned");
        assert_eq!(shown.summary.as_deref(), Some("Released"));
        assert_eq!(with_display(&free, Vec::new(), None), None);
    }
}
