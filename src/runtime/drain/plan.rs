//! What a drain will evict, and when: for the claim bound to each server, the deadline
//! of the project's one rule ([`eviction`]) on a copy of the server as the drain leaves
//! it, its drain taint stamped with the time now (as the server controller will stamp
//! it). Pure: the caller reads the objects and the clock.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::duration;
use super::edit::is_drain_taint;
use super::error::bounded;
use crate::api::names::CONDITION_DISRUPTION_TARGET;
use crate::api::{CachedClaim, CachedServer, Server, ServerClaim};
use crate::binding::meta;
use crate::binding::state::eviction::{Eviction, describe_taint, eviction, was_evicted};
use crate::binding::world::budgets::{BudgetHold, budget_hold};

use super::read::Budgets;

/// What the drain does to the claim bound to a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Its bind already ended under an eviction.
    AlreadyEvicted,
    /// Its bind ends at the eviction's deadline.
    Evicted(Eviction),
    /// It tolerates the drain taint (and every other `Evict` taint) for ever, and none
    /// carries a hard deadline.
    Stays,
}

/// The claim bound to a drained server, and what the drain does to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub server: String,
    /// `namespace/name`.
    pub claim: String,
    pub fate: Fate,
    /// The claim's `DisruptionTarget` condition, if it has one: reason and message.
    pub notice: Option<(String, String)>,
}

/// `server` (as the drain leaves it) with its drain taint stamped with `now` where the
/// server controller has not stamped it yet, as a whole second (as a stored time is).
pub fn stamped(server: &Server, now: Timestamp) -> CachedServer {
    let mut copy = CachedServer::from(server.clone());
    let second = Timestamp::from_second(now.as_second()).unwrap_or(now);
    for taint in copy.spec.taints.iter_mut().filter(|t| is_drain_taint(t)) {
        taint.time_added.get_or_insert(Time(second));
    }
    copy
}

/// What the drain of `server` (stamped, [`stamped`]) does to `claim` (`effective`: its
/// class's tolerations folded in).
pub fn plan(server: &CachedServer, claim: &ServerClaim, effective: &CachedClaim) -> Planned {
    let fate = if was_evicted(effective) {
        Fate::AlreadyEvicted
    } else {
        match eviction(server, effective) {
            Some(e) => Fate::Evicted(e),
            None => Fate::Stays,
        }
    };
    Planned {
        server: meta::name(server).to_string(),
        claim: format!("{}/{}", meta::namespace(claim), meta::name(claim)),
        fate,
        notice: notice(claim),
    }
}

/// The claim's `DisruptionTarget` condition, while it is True: its reason and message,
/// whatever controller wrote them (a taint's notice, a budget's hold).
pub fn notice(claim: &ServerClaim) -> Option<(String, String)> {
    let conditions = &claim.status.as_ref()?.conditions;
    let found = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_DISRUPTION_TARGET && c.status == "True")?;
    Some((found.reason.clone(), bounded(&found.message)))
}

/// Whether a disruption budget holds `planned` now, were it evicted after the claims of
/// `evicting` (the evictions the drain planned before it, due now too): by the rule the
/// claim controller applies ([`budget_hold`]). `None` for an eviction not due now or past
/// its hard deadline, whose budgets are weighed when it is due.
pub fn held(
    planned: &Planned,
    effective: &CachedClaim,
    budgets: &Budgets,
    evicting: &[String],
    now: Timestamp,
) -> Option<BudgetHold> {
    let Fate::Evicted(e) = &planned.fate else {
        return None;
    };
    if !e.is_due(now) || e.is_forced(now) {
        return None;
    }
    let namespace = meta::namespace(effective);
    let claims: Vec<&CachedClaim> = budgets
        .claims
        .iter()
        .filter(|c| meta::namespace(*c) == namespace)
        .collect();
    let key = |c: &CachedClaim| format!("{}/{}", meta::namespace(c), meta::name(c));
    let planned_first = |c: &CachedClaim| evicting.contains(&key(c));
    let of_namespace = budgets.catalog.of_namespace(namespace);
    budget_hold(effective, of_namespace, &claims, &planned_first)
}

/// The plan's lines, each ending in `suffix` (` (dry run)` or nothing); `hold`: the
/// budget that holds the eviction ([`held`]).
pub fn lines(p: &Planned, hold: Option<&BudgetHold>, now: Timestamp, suffix: &str) -> Vec<String> {
    let (claim, server) = (&p.claim, &p.server);
    let mut out = vec![match &p.fate {
        Fate::AlreadyEvicted => format!("{claim} on {server}: already evicted{suffix}"),
        Fate::Evicted(e) if let Some(hold) = hold => format!(
            "{claim} on {server}: due {}, but {hold}: it waits{suffix}",
            deadline_words(e, now)
        ),
        Fate::Evicted(e) => format!(
            "evicting {claim} from {server} {}{suffix}",
            deadline_words(e, now)
        ),
        Fate::Stays => format!(
            "{claim} on {server} will not be evicted: it tolerates the drain taint for \
             ever; --grace sets a hard deadline{suffix}"
        ),
    }];
    if let Some((reason, message)) = &p.notice {
        out.push(format!(
            "  {claim}: {CONDITION_DISRUPTION_TARGET} {reason}: {message}"
        ));
    }
    out
}

/// When the eviction ends the bind: `now`, or the deadline and how long until it; and
/// what sets it, where the claim's own tolerations do not.
fn deadline_words(e: &Eviction, now: Timestamp) -> String {
    let mut text = match when(e.deadline, now).as_str() {
        "now" => "now".to_string(),
        later => format!("at {} ({later})", e.deadline),
    };
    if e.hard_deadline == Some(e.deadline) {
        text.push_str(", the hard deadline");
    }
    if !is_drain_taint(&e.taint) {
        text.push_str(&format!(", under its taint {}", describe_taint(&e.taint)));
    }
    text
}

/// `deadline` as seen from `now`: `now` once it passed, else how long until it.
pub fn when(deadline: Timestamp, now: Timestamp) -> String {
    match deadline.duration_since(now) {
        left if left.as_millis() >= 500 => {
            format!("in {}", duration::words(left))
        }
        _ => "now".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;

    use super::*;
    use crate::api::{TaintEffect, Toleration, TolerationOperator};
    use crate::runtime::drain::edit::drain_taint;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn server(hard: Option<Timestamp>) -> Server {
        let mut s = Server::new("s1", Default::default());
        s.spec.taints.push(drain_taint(hard));
        s
    }

    fn claim(seconds: Option<i64>) -> ServerClaim {
        let mut c = ServerClaim::new("web-0", Default::default());
        c.metadata.namespace = Some("team-a".into());
        c.spec.tolerations.push(Toleration {
            key: "metal.binder.dev/drain".into(),
            operator: TolerationOperator::Exists,
            value: None,
            effect: Some(TaintEffect::Evict),
            toleration_seconds: seconds,
        });
        c
    }

    fn planned(server: &Server, claim: &ServerClaim) -> Planned {
        let copy = stamped(server, at(0));
        plan(&copy, claim, &CachedClaim::from(claim.clone()))
    }

    #[test]
    fn the_deadline_counts_from_now_with_the_claims_grace() {
        let p = planned(&server(None), &claim(Some(3600)));
        let Fate::Evicted(e) = &p.fate else {
            panic!("{p:?}")
        };
        assert_eq!(e.deadline, at(3600));
        let text = lines(&p, None, at(0), " (dry run)").join("\n");
        let expected = format!(
            "evicting team-a/web-0 from s1 at {} (in 1h) (dry run)",
            at(3600)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn a_claim_tolerating_for_ever_stays_unless_a_hard_deadline_is_set() {
        let p = planned(&server(None), &claim(None));
        assert_eq!(p.fate, Fate::Stays);
        let text = lines(&p, None, at(0), "").join("\n");
        assert!(text.contains("--grace sets a hard deadline"), "{text}");
        let p = planned(&server(Some(at(30))), &claim(None));
        assert!(
            matches!(&p.fate, Fate::Evicted(e) if e.deadline == at(30)),
            "{p:?}"
        );
        let text = lines(&p, None, at(0), "").join("\n");
        assert!(text.ends_with("(in 30s), the hard deadline"), "{text}");
    }

    #[test]
    fn a_time_already_stamped_is_kept() {
        let mut s = server(None);
        s.spec.taints[0].time_added = Some(Time(at(-600)));
        let p = planned(&s, &claim(Some(60)));
        assert!(
            matches!(&p.fate, Fate::Evicted(e) if e.deadline == at(-540)),
            "{p:?}"
        );
        assert_eq!(when(at(-540), at(0)), "now");
        assert_eq!(
            when(at(90), at(0) + SignedDuration::from_millis(600)),
            "in 1m 29s"
        );
        assert_eq!(
            when(at(90), at(0) + SignedDuration::from_millis(10)),
            "in 1m 30s"
        );
    }
}
