//! Disruption budgets as the binder sees them: each namespace's
//! `ServerDisruptionBudget`s, and the rule of whether one holds an eviction
//! (docs/binding.md, "Disruption budgets"). Pure: the claims and the evictions in flight
//! are passed in.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::names::{CONDITION_DISRUPTION_TARGET, REASON_EVICTION_HELD_BY_BUDGET};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    CachedClaim, ClaimPhase, DisruptedClaim, ServerDisruptionBudget, ServerDisruptionBudgetStatus,
};
use crate::binding::meta;
use crate::binding::selector::selector_matches;
use crate::binding::state::eviction::was_evicted;

/// Every namespace's budgets, by namespace and name.
#[derive(Clone, Debug, Default)]
pub struct BudgetCatalog {
    by_namespace: BTreeMap<String, BTreeMap<String, Arc<ServerDisruptionBudget>>>,
}

impl BudgetCatalog {
    pub fn upsert(&mut self, budget: Arc<ServerDisruptionBudget>) {
        let namespace = meta::namespace(&*budget).to_string();
        let name = meta::name(&*budget).to_string();
        self.by_namespace
            .entry(namespace)
            .or_default()
            .insert(name, budget);
    }

    pub fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(budgets) = self.by_namespace.get_mut(namespace) {
            budgets.remove(name);
            if budgets.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    pub fn replace_all(&mut self, all: impl IntoIterator<Item = Arc<ServerDisruptionBudget>>) {
        self.by_namespace.clear();
        for budget in all {
            self.upsert(budget);
        }
    }

    /// The namespace's budgets, by name.
    pub fn of_namespace(&self, namespace: &str) -> impl Iterator<Item = &ServerDisruptionBudget> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(|b| b.values().map(|b| &**b))
    }

    /// The namespace's budgets, each shared.
    pub fn shared_of(&self, namespace: &str) -> impl Iterator<Item = &Arc<ServerDisruptionBudget>> {
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flat_map(|b| b.values())
    }

    /// Every budget, by namespace and name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ServerDisruptionBudget>> {
        self.by_namespace.values().flat_map(|b| b.values())
    }

    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.by_namespace.contains_key(namespace)
    }
}

/// A budget that holds an eviction, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetHold {
    /// The budget's name (of the claim's namespace).
    pub budget: String,
    /// The budget's limit as written (`minAvailable 2`, `maxUnavailable 25%`).
    pub limit: String,
    /// The claims it covers, and of them those without a server now (not `Bound`, or
    /// being evicted).
    pub covered: usize,
    pub unavailable: usize,
}

impl fmt::Display for BudgetHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "disruption budget {} ({}) allows no eviction now: {} of the {} claims it covers {} without a server",
            self.budget,
            self.limit,
            self.unavailable,
            self.covered,
            if self.unavailable == 1 { "is" } else { "are" }
        )
    }
}

/// The claim's `DisruptionTarget` condition while it says a budget holds its eviction
/// (controller-written): its message names the budget, its transition says since when.
pub fn held_condition(claim: &CachedClaim) -> Option<&Condition> {
    let conditions = &claim.status.as_ref()?.conditions;
    conditions.iter().find(|c| {
        c.type_ == CONDITION_DISRUPTION_TARGET && c.reason == REASON_EVICTION_HELD_BY_BUDGET
    })
}

/// Whether the claim's status says a budget holds its eviction ([`held_condition`]).
pub fn is_held_by_budget(claim: &CachedClaim) -> bool {
    held_condition(claim).is_some()
}

/// Whether a claim counts as available to its budgets: `Bound`, not evicted, and not
/// being evicted by a write not seen yet (`evicting`).
pub fn is_available(claim: &CachedClaim, evicting: &dyn Fn(&CachedClaim) -> bool) -> bool {
    let bound = claim.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound);
    bound && !was_evicted(claim) && !evicting(claim)
}

/// The first of `budgets` (the claim's namespace's) that covers `claim` and would be
/// broken were `claim` evicted now, given the namespace's `claims` and the evictions in
/// flight (`evicting`). A budget whose limit cannot be read holds every eviction it
/// covers (it can only hold its own namespace's claims; an admin's hard deadline ends
/// any hold).
pub fn budget_hold<'a>(
    claim: &CachedClaim,
    budgets: impl Iterator<Item = &'a ServerDisruptionBudget>,
    claims: &[&CachedClaim],
    evicting: &dyn Fn(&CachedClaim) -> bool,
) -> Option<BudgetHold> {
    budgets
        .filter(|b| covers(b, claim))
        .find_map(|budget| hold_of(budget, claim, claims, evicting))
}

/// Whether `budget` covers `claim` (its selector; none: every claim of its namespace).
pub fn covers(budget: &ServerDisruptionBudget, claim: &CachedClaim) -> bool {
    budget
        .spec
        .selector
        .as_ref()
        .is_none_or(|s| selector_matches(s, meta::labels(claim)))
}

fn hold_of(
    budget: &ServerDisruptionBudget,
    claim: &CachedClaim,
    claims: &[&CachedClaim],
    evicting: &dyn Fn(&CachedClaim) -> bool,
) -> Option<BudgetHold> {
    if is_recorded(budget, claim) {
        // The budget let this eviction go ahead already: it counts it as unavailable.
        return None;
    }
    let counts = BudgetCounts::of(budget, claims, evicting);
    // The claim itself counts as available until its eviction: it is bound.
    let available = counts
        .available
        .max(usize::from(is_available(claim, evicting)));
    let allowed = available > counts.desired;
    (!allowed).then(|| BudgetHold {
        budget: meta::name(budget).to_string(),
        limit: written_limit(budget),
        covered: counts.covered,
        unavailable: counts.unavailable(),
    })
}

/// A budget's claims counted as the rule reads them: the claims it covers, those of them
/// available (and not recorded as being evicted), and how many must stay available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetCounts {
    pub covered: usize,
    pub available: usize,
    pub desired: usize,
}

impl BudgetCounts {
    /// `budget`'s counts over its namespace's `claims`, the evictions on their way
    /// (`evicting`) and those it recorded counted as unavailable.
    pub fn of(
        budget: &ServerDisruptionBudget,
        claims: &[&CachedClaim],
        evicting: &dyn Fn(&CachedClaim) -> bool,
    ) -> Self {
        let (mut covered, mut available) = (0usize, 0usize);
        for c in claims.iter().filter(|c| covers(budget, c)) {
            covered += 1;
            available += usize::from(is_available(c, evicting) && !is_recorded(budget, c));
        }
        let desired = covered.saturating_sub(allowed_unavailable(budget, covered));
        Self {
            covered,
            available,
            desired,
        }
    }

    pub fn unavailable(&self) -> usize {
        self.covered - self.available.min(self.covered)
    }

    /// How many more evictions the budget lets go ahead now.
    pub fn disruptions_allowed(&self) -> usize {
        self.available.saturating_sub(self.desired)
    }
}

/// The budget's record of the evictions it let go ahead.
pub fn disrupted(budget: &ServerDisruptionBudget) -> &[DisruptedClaim] {
    budget
        .status
        .as_ref()
        .map_or(&[], |s| s.disrupted_claims.as_slice())
}

/// Whether the budget recorded an eviction of `claim` (by uid): it counts the claim as
/// unavailable whatever a cache shows of it, so a process whose cache has not seen the
/// eviction yet (a new leader) cannot let a second one go ahead.
pub fn is_recorded(budget: &ServerDisruptionBudget, claim: &CachedClaim) -> bool {
    meta::uid(claim).is_some_and(|uid| disrupted(budget).iter().any(|d| d.uid == uid))
}

/// The budget with an eviction of `claim` recorded at the version the cache shows
/// (`None`: recorded at that version already, or the claim has no uid), to be written
/// with the budget's resourceVersion as a precondition before the eviction: of two
/// writers that read the same version (two workers, two processes during a leader
/// hand-over), the second gets a conflict and decides again on the budget as the first
/// left it. A claim recorded at an older version (its eviction's write conflicted) is
/// recorded again at this one, so the recount never drops the record of an eviction
/// still on its way.
pub fn record(
    budget: &ServerDisruptionBudget,
    claim: &CachedClaim,
    now: &Time,
) -> Option<ServerDisruptionBudget> {
    let uid = meta::uid(claim)?;
    let version = claim.meta().resource_version.clone().unwrap_or_default();
    let mut recorded = budget.clone();
    let status = recorded.status.get_or_insert_with(Default::default);
    let disrupted = &mut status.disrupted_claims;
    match disrupted.iter_mut().find(|d| d.uid == uid) {
        Some(d) if d.resource_version == version => return None,
        Some(d) => {
            d.resource_version = version;
            d.time = now.clone();
        }
        None => {
            disrupted.push(DisruptedClaim {
                claim: meta::name(claim).to_string(),
                uid: uid.to_string(),
                resource_version: version,
                time: now.clone(),
            });
            // As the Eviction API does a PodDisruptionBudget's: the counts say so at once.
            status.disruptions_allowed = (status.disruptions_allowed - 1).max(0);
            status.current_available = (status.current_available - 1).max(0);
        }
    }
    Some(recorded)
}

/// Whether a read of a recorded eviction's claim (`None`: not found) lets the record go:
/// the claim is gone (or another claim took its name), or it moved on from the version
/// the eviction was decided on without being evicted, so that eviction's write, which
/// carries that version as a precondition, can never land. An evicted claim keeps its
/// record while it exists.
pub fn record_ends(record: &DisruptedClaim, read: Option<&CachedClaim>) -> bool {
    match read {
        Some(c) if meta::uid(c) == Some(record.uid.as_str()) => {
            !was_evicted(c)
                && c.meta().resource_version.as_deref() != Some(record.resource_version.as_str())
        }
        _ => true,
    }
}

/// The records whose claims the cache (`claims`, the budget's namespace's) does not show
/// at the version recorded, nor evicted: those a recount reads live ([`record_ends`]).
pub fn unconfirmed<'b>(
    budget: &'b ServerDisruptionBudget,
    claims: &[&CachedClaim],
) -> Vec<&'b DisruptedClaim> {
    disrupted(budget)
        .iter()
        .filter(|d| {
            let cached = claims.iter().find(|c| meta::name(**c) == d.claim);
            cached.is_none_or(|c| record_ends(d, Some(c)))
        })
        .collect()
}

/// The budget's status counted anew from its namespace's `claims` (the cache), keeping
/// every record but those in `ended` (by uid; read live, [`record_ends`]). As a
/// PodDisruptionBudget's: `disruptionsAllowed` is what [`budget_hold`] lets go ahead.
pub fn recount(
    budget: &ServerDisruptionBudget,
    claims: &[&CachedClaim],
    ended: &HashSet<String>,
) -> ServerDisruptionBudgetStatus {
    let mut kept = budget.clone();
    let status = kept.status.get_or_insert_with(Default::default);
    status.disrupted_claims.retain(|d| !ended.contains(&d.uid));
    let counts = BudgetCounts::of(&kept, claims, &|_| false);
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let status = kept.status.take().unwrap_or_default();
    ServerDisruptionBudgetStatus {
        observed_generation: budget.metadata.generation,
        expected_claims: count(counts.covered),
        current_available: count(counts.available),
        desired_available: count(counts.desired),
        disruptions_allowed: count(counts.disruptions_allowed()),
        disrupted_claims: status.disrupted_claims,
    }
}

/// A record to write before an eviction: the budget as the decision read it (the write's
/// precondition is its resourceVersion) and the budget with the eviction recorded.
#[derive(Clone, Debug)]
pub struct BudgetRecord {
    pub read: Arc<ServerDisruptionBudget>,
    pub recorded: ServerDisruptionBudget,
}

/// What a budget's recount reads: the budget, the records to read live
/// ([`unconfirmed`]), and the namespace's claims as the cache shows them.
#[derive(Clone, Debug)]
pub struct BudgetRecount {
    pub budget: ServerDisruptionBudget,
    pub unread: Vec<DisruptedClaim>,
    pub claims: Vec<Arc<CachedClaim>>,
}

impl BudgetRecount {
    /// The budget with its status counted anew ([`recount`]), given the uids of the
    /// unread records a live read ended; `None` if nothing changes.
    pub fn recounted(&self, ended: &HashSet<String>) -> Option<ServerDisruptionBudget> {
        let claims: Vec<&CachedClaim> = self.claims.iter().map(|c| &**c).collect();
        let status = recount(&self.budget, &claims, ended);
        (self.budget.status.as_ref() != Some(&status)).then(|| ServerDisruptionBudget {
            status: Some(status),
            ..self.budget.clone()
        })
    }
}

/// How many of `covered` claims the budget lets be without a server: `maxUnavailable`,
/// or the covered claims less `minAvailable` (a percentage rounded up, as a
/// PodDisruptionBudget's). None at all for a budget whose limit cannot be read.
pub fn allowed_unavailable(budget: &ServerDisruptionBudget, covered: usize) -> usize {
    let spec = &budget.spec;
    let allowed = match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), None) => scaled(min, covered).map(|min| covered.saturating_sub(min)),
        (None, Some(max)) => scaled(max, covered),
        _ => None,
    };
    allowed.unwrap_or(0)
}

/// A number, or a percentage of `of` rounded up.
pub fn scaled(value: &IntOrString, of: usize) -> Option<usize> {
    match value {
        IntOrString::Int(n) => usize::try_from(*n).ok(),
        IntOrString::String(s) => {
            let percent: usize = s.strip_suffix('%')?.parse().ok()?;
            Some((percent * of).div_ceil(100))
        }
    }
}

fn written_limit(budget: &ServerDisruptionBudget) -> String {
    let show = |v: &IntOrString| match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let spec = &budget.spec;
    match (&spec.min_available, &spec.max_unavailable) {
        (Some(min), None) => format!("minAvailable {}", show(min)),
        (None, Some(max)) => format!("maxUnavailable {}", show(max)),
        _ => "set exactly one of minAvailable and maxUnavailable".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ServerClaimSpec, ServerClaimStatus, ServerDisruptionBudgetSpec};

    fn claim(name: &str, web: bool, phase: ClaimPhase) -> CachedClaim {
        let mut c = CachedClaim::new(name, ServerClaimSpec::default());
        c.meta_mut().namespace = Some("team-a".into());
        if web {
            c.labels_mut().insert("app".into(), "web".into());
        }
        c.status = Some(ServerClaimStatus {
            phase: Some(phase),
            ..ServerClaimStatus::default()
        });
        c
    }

    fn budget(min: Option<IntOrString>, max: Option<IntOrString>) -> ServerDisruptionBudget {
        let selector = serde_json::from_value(serde_json::json!({"matchLabels": {"app": "web"}}));
        let mut b = ServerDisruptionBudget::new(
            "web",
            ServerDisruptionBudgetSpec {
                selector: Some(selector.expect("a selector")),
                min_available: min,
                max_unavailable: max,
            },
        );
        b.metadata.namespace = Some("team-a".into());
        b
    }

    fn hold(b: &ServerDisruptionBudget, claims: &[CachedClaim]) -> Option<BudgetHold> {
        let refs: Vec<&CachedClaim> = claims.iter().collect();
        budget_hold(&claims[0], std::iter::once(b), &refs, &|_| false)
    }

    #[test]
    fn a_percentage_rounds_up_as_a_pod_disruption_budget_s() {
        assert_eq!(scaled(&IntOrString::String("25%".into()), 5), Some(2));
        assert_eq!(scaled(&IntOrString::String("100%".into()), 3), Some(3));
        assert_eq!(scaled(&IntOrString::Int(2), 9), Some(2));
        assert_eq!(scaled(&IntOrString::String("lots".into()), 9), None);
        assert_eq!(scaled(&IntOrString::Int(-1), 9), None);
    }

    #[test]
    fn max_unavailable_counts_the_claims_without_a_server() {
        use ClaimPhase::{Bound, Pending};
        let one = budget(None, Some(IntOrString::Int(1)));
        let all_bound = [claim("a", true, Bound), claim("b", true, Bound)];
        assert_eq!(hold(&one, &all_bound), None);
        let one_pending = [claim("a", true, Bound), claim("b", true, Pending)];
        let held = hold(&one, &one_pending).expect("held");
        assert_eq!((held.covered, held.unavailable), (2, 1));
        // A claim the selector does not cover counts for nothing.
        let other_pending = [claim("a", true, Bound), claim("b", false, Pending)];
        assert_eq!(hold(&one, &other_pending), None);
        // Nor does a claim not covered get held.
        let refs: Vec<&CachedClaim> = one_pending.iter().collect();
        let outsider = claim("x", false, Bound);
        assert_eq!(
            budget_hold(&outsider, std::iter::once(&one), &refs, &|_| false),
            None
        );
    }

    #[test]
    fn min_available_and_an_eviction_in_flight() {
        use ClaimPhase::Bound;
        let two = budget(Some(IntOrString::Int(2)), None);
        let three = [
            claim("a", true, Bound),
            claim("b", true, Bound),
            claim("c", true, Bound),
        ];
        assert_eq!(hold(&two, &three), None);
        // `c` is being evicted: two left, and `a` may not go too.
        let refs: Vec<&CachedClaim> = three.iter().collect();
        let evicting = |c: &CachedClaim| meta::name(c) == "c";
        let held = budget_hold(&three[0], std::iter::once(&two), &refs, &evicting);
        assert!(held.is_some_and(|h| h.to_string().contains("minAvailable 2")));
    }

    #[test]
    fn a_record_follows_the_version_its_eviction_is_decided_on() {
        let mut a = claim("a", true, ClaimPhase::Bound);
        a.meta_mut().uid = Some("uid-a".into());
        a.meta_mut().resource_version = Some("5".into());
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let one = budget(None, Some(IntOrString::Int(1)));
        let recorded = record(&one, &a, &now).expect("a new record");
        assert!(is_recorded(&recorded, &a));
        // Recorded at this version already: nothing to write.
        assert!(record(&recorded, &a, &now).is_none());
        // The eviction's write conflicted and is decided again on version 6: recorded
        // again there, still once.
        a.meta_mut().resource_version = Some("6".into());
        let again = record(&recorded, &a, &now).expect("recorded again");
        let records = disrupted(&again);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].resource_version, "6");
        assert!(!record_ends(&records[0], Some(&a)));
    }

    #[test]
    fn a_budget_that_cannot_be_read_holds_what_it_covers() {
        use ClaimPhase::Bound;
        let both = budget(Some(IntOrString::Int(0)), Some(IntOrString::Int(5)));
        let claims = [claim("a", true, Bound)];
        assert!(hold(&both, &claims).is_some());
        let unreadable = budget(None, Some(IntOrString::String("half".into())));
        assert!(hold(&unreadable, &claims).is_some());
    }
}
