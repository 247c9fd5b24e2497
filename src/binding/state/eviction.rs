//! Taking a server back: when an `Evict` taint ends a bound claim's bind, and how a
//! claim records that its bind ended so (docs/binding.md, "Eviction").

use std::fmt;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::{CachedClaim, CachedServer, ClaimPhase, Taint, TaintEffect, Toleration};

use crate::api::names::CONDITION_DISRUPTION_TARGET;
use crate::binding::selector::matches_taint;
use crate::binding::state::status::find_bound;

/// The reason of a claim's `Bound` condition once an eviction ended its bind.
pub const EVICTED: &str = "Evicted";

/// An eviction a server's taint starts for the claim bound to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// The `Evict` taint whose deadline comes first.
    pub taint: Taint,
    /// When the bind ends: the taint's `timeAdded` plus the longest `tolerationSeconds`
    /// among the claim's tolerations that match it (none matching: at once), or the
    /// taint's `hardDeadline` if that comes first. A disruption budget may hold it past
    /// this, never past `hard_deadline`.
    pub deadline: Timestamp,
    /// The admin's hard deadline of the taint, if it has one.
    pub hard_deadline: Option<Timestamp>,
}

impl Eviction {
    /// The eviction as done: under which taint, and when it was due (a budget may have
    /// held it past then).
    pub fn ended(&self) -> String {
        let mut text = format!(
            "the bind ended under server taint {}",
            describe_taint(&self.taint)
        );
        if let Some(added) = &self.taint.time_added {
            text.push_str(&format!(" (added {})", added.0));
        }
        text.push_str(&format!(", due at {}", self.deadline));
        text
    }

    /// Whether the bind ends now.
    pub fn is_due(&self, now: Timestamp) -> bool {
        now >= self.deadline
    }

    /// Whether the admin's hard deadline has passed: no budget holds the eviction now.
    pub fn is_forced(&self, now: Timestamp) -> bool {
        self.hard_deadline.is_some_and(|hard| now >= hard)
    }
}

impl fmt::Display for Eviction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let added = self.taint.time_added.as_ref().map(|t| t.0);
        write!(f, "server taint {}", describe_taint(&self.taint))?;
        if let Some(added) = added {
            write!(f, " (added {added})")?;
        }
        write!(f, " ends the bind at {}", self.deadline)?;
        match self.hard_deadline {
            Some(hard) if hard > self.deadline => write!(f, ", at the latest at {hard}"),
            _ => Ok(()),
        }
    }
}

/// A taint as `key=value:Effect`, as kubectl writes a node's.
pub fn describe_taint(taint: &Taint) -> String {
    let value = taint.value.as_deref().unwrap_or("");
    let effect = match taint.effect {
        TaintEffect::NoBind => "NoBind",
        TaintEffect::Evict => "Evict",
        TaintEffect::None => "None",
    };
    match value {
        "" => format!("{}:{effect}", taint.key),
        value => format!("{}={value}:{effect}", taint.key),
    }
}

/// The eviction `server`'s taints start for `claim` (its tolerations, its class's folded
/// in), if any: of the `Evict` taints the claim does not tolerate for ever (or that carry
/// a hard deadline), the one whose deadline comes first. A taint without `timeAdded`
/// evicts nobody yet: the server controller sets it first, and the grace counts from it.
pub fn eviction(server: &CachedServer, claim: &CachedClaim) -> Option<Eviction> {
    first_deadline(server, claim, TaintEffect::Evict)
}

/// What the report-only (`None`) taints of `server` say of `claim`: the eviction each
/// would start were its effect `Evict` (the first deadline), for `explain` and a drain's
/// dry run. Binding reads none of it.
pub fn would_evict(server: &CachedServer, claim: &CachedClaim) -> Option<Eviction> {
    first_deadline(server, claim, TaintEffect::None)
}

fn first_deadline(
    server: &CachedServer,
    claim: &CachedClaim,
    effect: TaintEffect,
) -> Option<Eviction> {
    server
        .spec
        .taints
        .iter()
        .filter(|t| t.effect == effect)
        .filter_map(|taint| {
            let added = taint.time_added.as_ref()?.0;
            // A report-only taint is read as the Evict taint it previews.
            let as_evict = Taint {
                effect: TaintEffect::Evict,
                ..taint.clone()
            };
            let hard = taint.hard_deadline.as_ref().map(|t| t.0);
            let graced = grace(&claim.spec.tolerations, &as_evict)
                .map(|grace| added.checked_add(grace).unwrap_or(Timestamp::MAX));
            let deadline = match (graced, hard) {
                (Some(graced), Some(hard)) => graced.min(hard),
                (deadline, None) | (None, deadline) => deadline?,
            };
            Some(Eviction {
                taint: taint.clone(),
                deadline,
                hard_deadline: hard,
            })
        })
        .min_by_key(|e| e.deadline)
}

/// How long `tolerations` let a bind stand under an `Evict` `taint`: `None` for ever (a
/// matching toleration without `tolerationSeconds`), else the longest `tolerationSeconds`
/// of those that match (zero or less, or none matching: no time at all).
fn grace(tolerations: &[Toleration], taint: &Taint) -> Option<SignedDuration> {
    let mut longest = SignedDuration::ZERO;
    for toleration in tolerations.iter().filter(|t| matches_taint(t, taint)) {
        let seconds = toleration.toleration_seconds?;
        longest = longest.max(SignedDuration::from_secs(seconds.max(0)));
    }
    Some(longest)
}

/// Whether the claim's status says an eviction runs against its bind: its
/// `DisruptionTarget` condition is True (the notice, or a budget's hold).
pub fn is_noticed(claim: &CachedClaim) -> bool {
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    status
        .conditions
        .iter()
        .any(|c| c.type_ == CONDITION_DISRUPTION_TARGET && c.status == "True")
}

/// Whether an eviction ended `claim`'s bind: its status (controller-written) says `Lost`
/// / `Evicted`. Such a claim is done, as a `Lost` PersistentVolumeClaim is: it takes no
/// server again, not even the one its status records; its tenant creates a new claim.
pub fn was_evicted(claim: &CachedClaim) -> bool {
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    status.phase == Some(ClaimPhase::Lost)
        && find_bound(&status.conditions).is_some_and(|c| c.reason == EVICTED)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::{ServerClaimSpec, ServerSpec, TolerationOperator};

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn taint(key: &str, effect: TaintEffect, added: Option<i64>) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect,
            time_added: added.map(|s| Time(at(s))),
            hard_deadline: None,
        }
    }

    fn toleration(key: &str, effect: Option<TaintEffect>, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: None,
            effect,
            toleration_seconds: seconds,
        }
    }

    fn deadline(taints: Vec<Taint>, tolerations: Vec<Toleration>) -> Option<Timestamp> {
        let server = CachedServer::new(
            "s",
            ServerSpec {
                taints,
                ..ServerSpec::default()
            },
        );
        let claim = CachedClaim::new(
            "c",
            ServerClaimSpec {
                tolerations,
                ..ServerClaimSpec::default()
            },
        );
        eviction(&server, &claim).map(|e| e.deadline)
    }

    #[test]
    fn the_deadline_is_the_time_added_plus_the_longest_matching_grace() {
        let evict = TaintEffect::Evict;
        let t = || taint("rack", evict, Some(0));
        // No toleration: at once.
        assert_eq!(deadline(vec![t()], vec![]), Some(at(0)));
        // The longest grace of those that match; one for another key does not count.
        let limited = vec![
            toleration("rack", Some(evict), Some(60)),
            toleration("", None, Some(300)),
            toleration("disk", None, None),
        ];
        assert_eq!(deadline(vec![t()], limited), Some(at(300)));
        // A matching toleration without seconds tolerates for ever.
        assert_eq!(
            deadline(vec![t()], vec![toleration("rack", None, None)]),
            None
        );
        // Negative seconds are no grace at all.
        let negative = vec![toleration("rack", None, Some(-5))];
        assert_eq!(deadline(vec![t()], negative), Some(at(0)));
    }

    #[test]
    fn only_a_stamped_evict_taint_evicts_and_the_effects_do_not_tolerate_each_other() {
        let (no_bind, evict) = (TaintEffect::NoBind, TaintEffect::Evict);
        assert_eq!(
            deadline(vec![taint("rack", no_bind, Some(0))], vec![]),
            None
        );
        assert_eq!(deadline(vec![taint("rack", evict, None)], vec![]), None);
        // A NoBind toleration does not tolerate an Evict taint.
        let no_bind_only = vec![toleration("rack", Some(no_bind), None)];
        assert_eq!(
            deadline(vec![taint("rack", evict, Some(10))], no_bind_only),
            Some(at(10))
        );
        // Of two taints, the first deadline.
        let two = vec![taint("a", evict, Some(50)), taint("b", evict, Some(20))];
        assert_eq!(deadline(two, vec![]), Some(at(20)));
    }

    #[test]
    fn a_grace_limited_toleration_does_not_let_a_claim_bind_an_evicting_server() {
        use crate::binding::selector::tolerates;
        let evict = taint("rack", TaintEffect::Evict, Some(0));
        assert!(!tolerates(&toleration("rack", None, Some(60)), &evict));
        assert!(tolerates(&toleration("rack", None, None), &evict));
        let no_bind = taint("rack", TaintEffect::NoBind, None);
        assert!(tolerates(&toleration("rack", None, Some(60)), &no_bind));
    }
    #[test]
    fn a_hard_deadline_overrides_a_longer_grace_and_a_toleration_for_ever() {
        let hard = |added: i64, by: i64| Taint {
            hard_deadline: Some(Time(at(by))),
            ..taint("rack", TaintEffect::Evict, Some(added))
        };
        let for_ever = vec![toleration("rack", None, None)];
        assert_eq!(deadline(vec![hard(0, 100)], for_ever), Some(at(100)));
        let long = vec![toleration("rack", None, Some(600))];
        assert_eq!(deadline(vec![hard(0, 100)], long), Some(at(100)));
        // A shorter grace still comes first; the hard deadline stays the limit.
        let short = vec![toleration("rack", None, Some(30))];
        assert_eq!(deadline(vec![hard(0, 100)], short.clone()), Some(at(30)));
        let server = CachedServer::new(
            "s",
            ServerSpec {
                taints: vec![hard(0, 100)],
                ..ServerSpec::default()
            },
        );
        let claim = CachedClaim::new(
            "c",
            ServerClaimSpec {
                tolerations: short,
                ..ServerClaimSpec::default()
            },
        );
        let e = eviction(&server, &claim).expect("an eviction");
        assert!(e.is_due(at(30)) && !e.is_forced(at(99)) && e.is_forced(at(100)));
    }

    #[test]
    fn a_report_only_taint_evicts_nobody_and_previews_the_evict_taint() {
        let none = taint("rack", TaintEffect::None, Some(0));
        assert_eq!(deadline(vec![none.clone()], vec![]), None);
        let server = CachedServer::new(
            "s",
            ServerSpec {
                taints: vec![none],
                ..ServerSpec::default()
            },
        );
        let graced = CachedClaim::new(
            "c",
            ServerClaimSpec {
                tolerations: vec![toleration("rack", Some(TaintEffect::Evict), Some(60))],
                ..ServerClaimSpec::default()
            },
        );
        let preview = would_evict(&server, &graced).expect("a preview");
        assert_eq!(preview.deadline, at(60));
        // Nor does it keep a claim off the server.
        assert!(crate::binding::first_untolerated(&server.spec.taints, &[]).is_none());
    }
}
