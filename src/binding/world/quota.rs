//! Server quotas (docs/binding.md, "Server quotas"): how many servers of a class a
//! namespace's claims may hold. Pure data fed by the watches, and the rules both
//! controllers and the quota's recount read:
//!
//! - a claim of a class some quota of its namespace limits is **charged** to that quota
//!   (its uid in `status.charged`) by the claim controller before it can bind: the
//!   charge is written with the quota's resourceVersion as a precondition, so two
//!   writers (two workers, two processes during a hand-over) cannot both take the last
//!   server ([`charge`]), as Kubernetes' quota admission records usage before it admits;
//! - the server controller binds such a claim only once the charge shows
//!   ([`QuotaCheck::admits`]); a claim over quota takes no server, nor a place in the
//!   matching ([`QuotaCheck::Exceeded`]);
//! - a charge ends only when its claim is gone, confirmed by a read of the claim, and the
//!   count is rebuilt from the charges and the claims holding servers, never kept in one
//!   process's memory ([`recount`]), as Kubernetes' quota controller recomputes `used`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::api::{CachedClaim, ClaimPhase, QuotaCharge, ServerQuota, ServerQuotaStatus};

use crate::binding::meta;
use crate::binding::reasons::PendingReason;
use crate::binding::state::status::claim_phase;

/// The condition reason (and event reason) of a claim over quota.
pub const QUOTA_EXCEEDED: &str = PendingReason::QuotaExceeded.as_str();

/// The quotas, by namespace, as the watch shows them, each with its charges indexed.
#[derive(Clone, Debug)]
pub struct QuotaCatalog {
    by_namespace: HashMap<String, BTreeMap<String, Counted>>,
    /// Whether a quota was counted for its spec: [`is_counted`], or a model check's
    /// mutant.
    counted: CountedRule,
}

/// Whether a quota's status was counted for its spec as it is ([`is_counted`]).
pub type CountedRule = fn(&ServerQuota) -> bool;

impl Default for QuotaCatalog {
    fn default() -> Self {
        Self::new(is_counted)
    }
}

/// A quota and what its charges count.
#[derive(Clone, Debug)]
struct Counted {
    quota: Arc<ServerQuota>,
    /// Whether its status was counted for its spec as it is ([`is_counted`]).
    counted: bool,
    /// The uids charged.
    charged: HashSet<String>,
}

impl Counted {
    fn of(quota: Arc<ServerQuota>, counted: CountedRule) -> Self {
        let charged = charges(&quota).iter().map(|c| c.uid.clone()).collect();
        Self {
            counted: counted(&quota),
            charged,
            quota,
        }
    }
}

/// How a claim of a class stands with its namespace's quotas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaCheck {
    /// No quota of its namespace limits its class (or it has no class).
    Unlimited,
    /// Every quota limiting its class charges it: it may bind.
    Charged,
    /// These quotas (by name) limit its class, have room, and do not charge it yet: the
    /// claim controller charges it before it binds.
    Room(Vec<String>),
    /// A quota limiting its class is full and does not charge it: it waits.
    Exceeded(QuotaFull),
    /// A quota limiting its class has not counted the namespace's holders since it was
    /// created, edited, or its status was lost, and does not charge it: it waits for
    /// the count.
    NotCounted(QuotaUncounted),
}

impl QuotaCheck {
    /// Whether the server controller may bind the claim: no quota limits it, or each
    /// that does charges it.
    pub fn admits(&self) -> bool {
        matches!(self, QuotaCheck::Unlimited | QuotaCheck::Charged)
    }

    /// Whether the claim waits for a quota (full, or not counted yet): it takes no
    /// server and no place in the matching until that changes.
    pub fn holds_back(&self) -> bool {
        matches!(self, QuotaCheck::Exceeded(_) | QuotaCheck::NotCounted(_))
    }
}

/// A quota that must count its namespace's holders before it admits a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuotaUncounted {
    pub namespace: String,
    pub quota: String,
    pub class: String,
}

impl fmt::Display for QuotaUncounted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            namespace,
            quota,
            class,
        } = self;
        write!(
            f,
            "ServerQuota {quota} has not yet counted the servers of class {class} that {namespace} holds (it is new, was edited, or its status was lost)"
        )
    }
}

/// Whether the quota's status was counted for its spec as it is: its
/// `observedGeneration` is the quota's generation. A quota created (or re-created), whose
/// `spec.hard` changed, or whose status was lost admits nothing until its recount.
pub fn is_counted(quota: &ServerQuota) -> bool {
    let observed = quota.status.as_ref().and_then(|s| s.observed_generation);
    observed == Some(generation(quota))
}

/// The quota's generation (0 for an object the API server never wrote, as in tests).
fn generation(quota: &ServerQuota) -> i64 {
    quota.metadata.generation.unwrap_or(0)
}

/// A quota with no room left for a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuotaFull {
    pub namespace: String,
    pub quota: String,
    pub class: String,
    pub used: i64,
    pub hard: i64,
}

impl fmt::Display for QuotaFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            namespace,
            quota,
            class,
            used,
            hard,
        } = self;
        write!(
            f,
            "{namespace} holds {used} of {hard} servers of class {class} (ServerQuota {quota})"
        )
    }
}

impl QuotaCatalog {
    /// An empty catalog that judges whether a quota was counted by `counted`.
    pub fn new(counted: CountedRule) -> Self {
        Self {
            by_namespace: HashMap::new(),
            counted,
        }
    }

    /// The rule that judges whether a quota was counted for its spec.
    pub fn counted_rule(&self) -> CountedRule {
        self.counted
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    pub fn upsert(&mut self, quota: Arc<ServerQuota>) {
        let namespace = meta::namespace(&*quota).to_string();
        let name = meta::name(&*quota).to_string();
        let counted = Counted::of(quota, self.counted);
        self.by_namespace
            .entry(namespace)
            .or_default()
            .insert(name, counted);
    }

    pub fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(quotas) = self.by_namespace.get_mut(namespace) {
            quotas.remove(name);
            if quotas.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
    }

    pub fn replace_all(&mut self, all: impl IntoIterator<Item = Arc<ServerQuota>>) {
        self.by_namespace.clear();
        for quota in all {
            self.upsert(quota);
        }
    }

    /// Every quota, as the watch shows it.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ServerQuota>> {
        self.by_namespace
            .values()
            .flat_map(|q| q.values().map(|c| &c.quota))
    }

    /// The quotas of a namespace, by name.
    pub fn of_namespace(&self, namespace: &str) -> impl Iterator<Item = &Arc<ServerQuota>> {
        let quotas = self.by_namespace.get(namespace).into_iter();
        quotas.flat_map(|q| q.values().map(|c| &c.quota))
    }

    pub fn quota(&self, namespace: &str, name: &str) -> Option<&Arc<ServerQuota>> {
        let counted = self.by_namespace.get(namespace)?.get(name)?;
        Some(&counted.quota)
    }

    /// How `claim`, of `class` (`None`: no class applies), stands with its namespace's
    /// quotas: the first full quota (by name) that does not charge it makes it wait.
    pub fn check(&self, claim: &CachedClaim, class: Option<&str>) -> QuotaCheck {
        let (Some(class), Some(quotas)) = (class, self.by_namespace.get(meta::namespace(claim)))
        else {
            return QuotaCheck::Unlimited;
        };
        let uid = meta::uid(claim).unwrap_or_default();
        let mut limited = false;
        let mut room = Vec::new();
        for (name, counted) in quotas {
            let Some(hard) = limit(&counted.quota, class) else {
                continue;
            };
            limited = true;
            if counted.charged.contains(uid) {
                continue;
            }
            if !counted.counted {
                return QuotaCheck::NotCounted(QuotaUncounted {
                    namespace: meta::namespace(claim).to_string(),
                    quota: name.clone(),
                    class: class.to_string(),
                });
            }
            let used = used_in(&counted.quota, class);
            if !has_room(used, hard) {
                return QuotaCheck::Exceeded(QuotaFull {
                    namespace: meta::namespace(claim).to_string(),
                    quota: name.clone(),
                    class: class.to_string(),
                    used,
                    hard,
                });
            }
            room.push(name.clone());
        }
        match (limited, room.is_empty()) {
            (false, _) => QuotaCheck::Unlimited,
            (true, true) => QuotaCheck::Charged,
            (true, false) => QuotaCheck::Room(room),
        }
    }

    /// The quotas of `Room` with `claim` charged for `class`, each to be written with the
    /// resourceVersion it was read at ([`recharge`]); `bound` says which charges' claims
    /// the cache shows holding their bind (the charge leaves them out of the list).
    pub fn charges_for(
        &self,
        claim: &CachedClaim,
        class: &str,
        quotas: &[String],
        bound: &dyn Fn(&QuotaCharge) -> bool,
    ) -> Vec<Charge> {
        let namespace = meta::namespace(claim);
        let Some(uid) = meta::uid(claim) else {
            return Vec::new();
        };
        let entry = QuotaCharge {
            class: class.to_string(),
            claim: meta::name(claim).to_string(),
            uid: uid.to_string(),
        };
        quotas
            .iter()
            .filter_map(|name| self.quota(namespace, name))
            .filter_map(|quota| {
                let absorbed: Vec<String> = charges(quota)
                    .iter()
                    .filter(|c| bound(c))
                    .map(|c| c.uid.clone())
                    .collect();
                let Recharge::Write(charged) = recharge(quota, &entry, &absorbed) else {
                    return None;
                };
                Some(Charge {
                    read: quota.clone(),
                    charged: *charged,
                    entry: entry.clone(),
                    absorbed,
                })
            })
            .collect()
    }
}

/// Whose standing with a namespace's quotas a quota's change may move
/// ([`standing_may_change`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touched {
    /// Only the claims (by name) whose charge it added or dropped: every other claim of
    /// the namespace stands as it did.
    Claims(BTreeSet<String>),
    /// Any claim of the namespace: its spec, its count for the spec, or whether a class
    /// has room changed.
    Namespace,
}

/// Whose standing a quota's change from `old` to `new` (`None`: absent) may move. A
/// claim's [`QuotaCheck`] reads of a quota only whether it limits the claim's class, was
/// counted, charges the claim, and whether the class has room (with the count, when it
/// has none): so unless one of those changed for a class, only the claims whose charge
/// came or went can stand otherwise. A charge thus costs a wake-up of its own claim, not
/// a pass over the namespace.
pub fn standing_may_change(
    old: Option<&ServerQuota>,
    new: Option<&ServerQuota>,
    counted: CountedRule,
) -> Touched {
    let (Some(old), Some(new)) = (old, new) else {
        return Touched::Namespace;
    };
    if old.spec.hard != new.spec.hard || counted(old) != counted(new) {
        return Touched::Namespace;
    }
    for (class, &hard) in &new.spec.hard {
        let (was, is) = (used_in(old, class), used_in(new, class));
        if has_room(was, hard) != has_room(is, hard) || (!has_room(is, hard) && was != is) {
            return Touched::Namespace;
        }
    }
    let uids = |q: &ServerQuota| -> HashSet<(String, String)> {
        charges(q)
            .iter()
            .map(|c| (c.uid.clone(), c.claim.clone()))
            .collect()
    };
    let (before, after) = (uids(old), uids(new));
    let moved = before.symmetric_difference(&after);
    Touched::Claims(moved.map(|(_, claim)| claim.clone()).collect())
}

/// A charge to write: the quota as the decision read it (the write's precondition is its
/// resourceVersion, and the write changes only what differs from it) and the quota with
/// the claim charged.
#[derive(Clone, Debug)]
pub struct Charge {
    pub read: Arc<ServerQuota>,
    pub charged: ServerQuota,
    /// The charge itself, to compute it again on a newer version ([`recharge`]).
    pub entry: QuotaCharge,
    /// The uids of the charges the write leaves out of the list: their claims hold their
    /// bind ([`holds_bind`]), and `used` counts them as holders from then on.
    pub absorbed: Vec<String>,
}

/// The most servers of `class` the quota allows (`None`: it does not limit the class).
pub fn limit(quota: &ServerQuota, class: &str) -> Option<i64> {
    quota.spec.hard.get(class).copied()
}

/// The claims the quota charges.
pub fn charges(quota: &ServerQuota) -> &[QuotaCharge] {
    quota.status.as_ref().map_or(&[], |s| &s.charged)
}

/// How many servers of `class` the quota counts (`status.used`): its holders and its
/// charges.
pub fn used_in(quota: &ServerQuota, class: &str) -> i64 {
    let used = quota.status.as_ref().and_then(|s| s.used.get(class));
    used.copied().unwrap_or(0)
}

/// Whether a claim holds its bind as its status records it: `Bound`, which only the
/// claim controller writes, once the server's ref carries the claim's uid. A quota
/// counts such a claim as a holder in `used`, and lists no charge for it: the list
/// holds the claims on their way to a bind only, so a charge's write does not grow with
/// the quota. A tenant cannot write status, so no tenant write moves a claim between
/// the two.
pub fn holds_bind(claim: &CachedClaim) -> bool {
    claim_phase(claim) == ClaimPhase::Bound
}

/// Whether a quota that counts `used` servers of a class whose `hard` limit this is can
/// charge one more: the one rule of a full quota, which the check, the charge, the
/// recount and `explain` all apply.
pub fn has_room(used: i64, hard: i64) -> bool {
    used < hard
}

/// A charge computed on a version of the quota: the quota with it, or why there is none.
#[derive(Clone, Debug)]
pub enum Recharge {
    /// The quota with the charge added, to be written at that version's resourceVersion.
    Write(Box<ServerQuota>),
    /// The quota charges the claim already.
    Already,
    /// The class has no room (or the quota does not limit it).
    Full,
}

/// The charge `entry` on `quota` as this version of it shows it: the one rule of a
/// charge, whichever version it is written on. The claim controller computes it on the
/// version its decision read, or again on a newer one its own previous charge of the
/// quota wrote (docs/binding.md, "Server quotas", "Charges in a row"): either way the
/// write's content is computed on the version its precondition names. `used` for the
/// class goes up by one; the charges of `absorbed` (uids of claims that hold their bind,
/// [`holds_bind`]) leave the list, and `used` keeps counting them.
pub fn recharge(quota: &ServerQuota, entry: &QuotaCharge, absorbed: &[String]) -> Recharge {
    let Some(hard) = limit(quota, &entry.class) else {
        return Recharge::Full;
    };
    let all = charges(quota);
    if all.iter().any(|c| c.uid == entry.uid) {
        return Recharge::Already;
    }
    if !has_room(used_in(quota, &entry.class), hard) {
        return Recharge::Full;
    }
    let mut charged: Vec<QuotaCharge> = all
        .iter()
        .filter(|c| !absorbed.contains(&c.uid))
        .cloned()
        .collect();
    charged.push(entry.clone());
    let mut used = counts_of(quota);
    *used.entry(entry.class.clone()).or_insert(0) += 1;
    let mut written = quota.clone();
    written.status = Some(status_of(quota, charged, used, generation(quota)));
    Recharge::Write(Box::new(written))
}

/// The quota's `used`, with every class of `spec.hard` in it.
fn counts_of(quota: &ServerQuota) -> BTreeMap<String, i64> {
    let hard = quota.spec.hard.keys();
    hard.map(|class| (class.clone(), used_in(quota, class)))
        .collect()
}

/// A claim of the quota's namespace as its recount sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub class: String,
    pub claim: String,
    pub uid: String,
    pub holds: Holds,
}

/// How a [`Holder`] holds its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// The server's ref carries the claim's uid: the bind is a fact, counted even above
    /// `hard` (a claim bound before the quota existed).
    Bound,
    /// The pair agrees across a restore (`evidence::pair_agrees`): the server becomes
    /// the claim's once it is charged, and it is charged only while the class has room,
    /// as any new bind. A tenant that deletes a bound claim and re-creates it naming the
    /// server is no way past the quota.
    Restored,
}

/// Whether the recount has work on `quota`: it was not `counted` for its spec, or it
/// charges a claim the cache does not show (`shown`: a claim of that name with that uid),
/// which the recount's live list may show gone. A charge written by a process whose
/// claim cache lagged a delete is freed so, without waiting for a round.
pub fn wants_recount(
    quota: &ServerQuota,
    counted: CountedRule,
    shown: &dyn Fn(&QuotaCharge) -> bool,
) -> bool {
    !counted(quota) || charges(quota).iter().any(|c| !shown(c))
}

/// Whether a recount that writes `recounted` over `quota` changes what the quota
/// counts: its `used`, its count's generation, or a charge beyond those of claims that
/// hold their bind leaving the list. Such charges leaving is tidying a later round (or
/// the next charge) does as well; no wake-up waits for it.
pub fn changes_the_count(quota: &ServerQuota, recounted: &ServerQuota) -> bool {
    let (Some(was), Some(now)) = (&quota.status, &recounted.status) else {
        return quota.status != recounted.status;
    };
    let kept = now.charged.iter().all(|c| was.charged.contains(c));
    was.used != now.used || was.observed_generation != now.observed_generation || !kept
}

/// A claim of the quota's namespace as the recount's live list shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveClaim {
    pub uid: String,
    /// Its class, as its spec names it.
    pub class: Option<String>,
    /// Whether it holds its bind ([`holds_bind`]).
    pub bound: bool,
}

/// A namespace's claims as a live list (a read of the API server, never a cache) shows
/// them, by name: what the recount counts holders from.
pub type LiveClaims = HashMap<String, LiveClaim>;

/// The live list of `claims` (of one namespace) as the recount reads it.
pub fn live_claims<'a>(claims: impl IntoIterator<Item = &'a CachedClaim>) -> LiveClaims {
    let live = |c: &CachedClaim| {
        let uid = meta::uid(c)?.to_string();
        let claim = LiveClaim {
            uid,
            class: c.spec.server_class_name.clone(),
            bound: holds_bind(c),
        };
        Some((meta::name(c).to_string(), claim))
    };
    claims.into_iter().filter_map(live).collect()
}

/// What the quotas' recount reads of one quota as a world shows it
/// ([`crate::binding::World::recounts`]): the quota, and the claims the cache shows
/// holding servers.
#[derive(Clone, Debug)]
pub struct Recount {
    pub quota: ServerQuota,
    pub holders: Vec<Holder>,
}

impl Recount {
    /// The quota with its status counted anew ([`recount`]) from `live`, a live list of
    /// its namespace's claims read after the quota; `None` if what it counts does not
    /// change ([`changes_the_count`]): a bound claim's charge left in the list is tidied
    /// by the next charge, or by the next recount that writes anyway.
    pub fn recounted(&self, live: &LiveClaims) -> Option<ServerQuota> {
        let status = recount(&self.quota, live, &self.holders)?;
        let recounted = ServerQuota {
            status: Some(status),
            ..self.quota.clone()
        };
        changes_the_count(&self.quota, &recounted).then_some(recounted)
    }
}

/// The quota's status counted from scratch:
/// - `used` counts, for each class it limits, the claims of `live` (a live list read
///   after the quota, so no bind the quota's version knows of is missing from it) that
///   hold their bind ([`holds_bind`]), plus its charges;
/// - its charges are those of the quota whose claims `live` shows (that name, that uid)
///   not holding their bind yet, plus every claim the cache shows holding a server
///   (`holders`: a claim bound before the quota existed counts, even above `hard`) that
///   `live` shows and does not count yet, then the restored pairs while their class has
///   room, by name.
///
/// A charge whose claim is gone (not in `live`, or another uid under its name) is
/// dropped; one whose claim now holds its bind moves to the holders. `None`: the status
/// says that already.
pub fn recount(
    quota: &ServerQuota,
    live: &LiveClaims,
    holders: &[Holder],
) -> Option<ServerQuotaStatus> {
    let shows = |name: &str, uid: &str| live.get(name).filter(|l| l.uid == uid);
    let mut charged: Vec<QuotaCharge> = charges(quota)
        .iter()
        .filter(|c| shows(&c.claim, &c.uid).is_some_and(|l| !l.bound))
        .cloned()
        .collect();
    let mut used: BTreeMap<String, i64> = quota.spec.hard.keys().map(|c| (c.clone(), 0)).collect();
    let mut known: HashSet<String> = charged.iter().map(|c| c.uid.clone()).collect();
    for l in live.values().filter(|l| l.bound) {
        if let Some(n) = l.class.as_ref().and_then(|c| used.get_mut(c)) {
            *n += 1;
            known.insert(l.uid.clone());
        }
    }
    let mut restored: Vec<&Holder> = Vec::new();
    for h in holders {
        if limit(quota, &h.class).is_none() || known.contains(&h.uid) {
            continue;
        }
        if shows(&h.claim, &h.uid).is_none() {
            continue;
        }
        match h.holds {
            Holds::Bound => {
                known.insert(h.uid.clone());
                charged.push(charge_of(h));
            }
            Holds::Restored => restored.push(h),
        }
    }
    for c in &charged {
        *used.entry(c.class.clone()).or_insert(0) += 1;
    }
    restored.sort_by(|a, b| a.claim.cmp(&b.claim));
    for h in restored {
        let count = used.get(&h.class).copied().unwrap_or(0);
        if limit(quota, &h.class).is_some_and(|hard| has_room(count, hard))
            && known.insert(h.uid.clone())
        {
            *used.entry(h.class.clone()).or_insert(0) += 1;
            charged.push(charge_of(h));
        }
    }
    let status = status_of(quota, charged, used, generation(quota));
    (quota.status.as_ref() != Some(&status)).then_some(status)
}

fn charge_of(h: &Holder) -> QuotaCharge {
    QuotaCharge {
        class: h.class.clone(),
        claim: h.claim.clone(),
        uid: h.uid.clone(),
    }
}

/// The status of a quota with these charges and counts, counted for `spec.hard` at
/// `observed`, with the summary `kubectl get` prints.
fn status_of(
    quota: &ServerQuota,
    mut charged: Vec<QuotaCharge>,
    used: BTreeMap<String, i64>,
    observed: i64,
) -> ServerQuotaStatus {
    charged.sort();
    let used: BTreeMap<String, i64> = quota
        .spec
        .hard
        .keys()
        .map(|class| (class.clone(), used.get(class).copied().unwrap_or(0)))
        .collect();
    let summary = quota
        .spec
        .hard
        .iter()
        .map(|(class, hard)| format!("{class}: {}/{hard}", used[class]))
        .collect::<Vec<_>>()
        .join(", ");
    ServerQuotaStatus {
        observed_generation: Some(observed),
        used,
        charged,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServerQuotaSpec;

    /// [`recharge`] of `claim` for `class` with no bound claim absorbed: the quota with
    /// the charge (`None`: it charges the claim already, or has no room).
    fn charge(quota: &ServerQuota, claim: &CachedClaim, class: &str) -> Option<ServerQuota> {
        let entry = QuotaCharge {
            class: class.to_string(),
            claim: meta::name(claim).to_string(),
            uid: meta::uid(claim)?.to_string(),
        };
        match recharge(quota, &entry, &[]) {
            Recharge::Write(written) => Some(*written),
            Recharge::Already | Recharge::Full => None,
        }
    }

    fn quota(hard: &[(&str, i64)], charged: &[(&str, &str)]) -> ServerQuota {
        let mut q = ServerQuota::new(
            "q",
            ServerQuotaSpec {
                hard: hard.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            },
        );
        q.metadata.namespace = Some("team-a".into());
        let charged = charged
            .iter()
            .map(|(class, uid)| QuotaCharge {
                class: class.to_string(),
                claim: format!("c-{uid}"),
                uid: uid.to_string(),
            })
            .collect::<Vec<QuotaCharge>>();
        let mut used = BTreeMap::new();
        for c in &charged {
            *used.entry(c.class.clone()).or_insert(0) += 1;
        }
        q.status = Some(status_of(&q, charged, used, 0));
        q
    }

    /// A live list of claims `c-<uid>` of class gpu, each bound or not.
    fn live(claims: &[(&str, bool)]) -> LiveClaims {
        let claim = |(uid, bound): &(&str, bool)| {
            let live = LiveClaim {
                uid: uid.to_string(),
                class: Some("gpu".into()),
                bound: *bound,
            };
            (format!("c-{uid}"), live)
        };
        claims.iter().map(claim).collect()
    }

    fn claim(uid: &str) -> CachedClaim {
        let mut c = CachedClaim::new(&format!("c-{uid}"), Default::default());
        c.meta_mut().namespace = Some("team-a".into());
        c.meta_mut().uid = Some(uid.into());
        c
    }

    fn catalog(q: ServerQuota) -> QuotaCatalog {
        let mut catalog = QuotaCatalog::default();
        catalog.upsert(Arc::new(q));
        catalog
    }

    #[test]
    fn a_claim_is_charged_while_there_is_room_and_then_waits() {
        let q = quota(&[("gpu", 2)], &[("gpu", "u1")]);
        let all = catalog(q.clone());
        assert_eq!(all.check(&claim("u1"), Some("gpu")), QuotaCheck::Charged);
        assert_eq!(
            all.check(&claim("u2"), Some("gpu")),
            QuotaCheck::Room(vec!["q".into()])
        );
        assert_eq!(all.check(&claim("u2"), Some("cpu")), QuotaCheck::Unlimited);
        assert_eq!(all.check(&claim("u2"), None), QuotaCheck::Unlimited);
        let written = charge(&q, &claim("u2"), "gpu").expect("room for one more");
        let status = written.status.as_ref().unwrap();
        assert_eq!(status.used["gpu"], 2);
        assert_eq!(status.summary, "gpu: 2/2");
        let full = catalog(written.clone());
        let QuotaCheck::Exceeded(why) = full.check(&claim("u3"), Some("gpu")) else {
            panic!("a third claim waits");
        };
        assert_eq!(
            why.to_string(),
            "team-a holds 2 of 2 servers of class gpu (ServerQuota q)"
        );
        assert!(charge(&written, &claim("u3"), "gpu").is_none());
        assert!(
            charge(&written, &claim("u2"), "gpu").is_none(),
            "charged once"
        );
        assert!(full.check(&claim("u2"), Some("gpu")).admits());
        assert!(!full.check(&claim("u3"), Some("gpu")).admits());
    }

    #[test]
    fn a_recount_drops_gone_claims_moves_bound_ones_to_used_and_counts_holders() {
        let q = quota(
            &[("gpu", 2)],
            &[("gpu", "u1"), ("gpu", "u2"), ("gpu", "u3")],
        );
        assert!(wants_recount(&q, is_counted, &|c| c.uid != "u2"));
        // u2 is gone, u3 holds its bind, u4 holds one it was never charged for (the
        // quota came after it), and u1 is still on its way.
        let seen = live(&[("u1", false), ("u3", true), ("u4", true)]);
        let holder = Holder {
            class: "gpu".into(),
            claim: "c-u0".into(),
            uid: "u0".into(),
            holds: Holds::Bound,
        };
        let status = recount(&q, &seen, std::slice::from_ref(&holder)).expect("changed");
        let uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(
            uids,
            ["u1"],
            "a holder the live list does not show is not charged"
        );
        assert_eq!(status.summary, "gpu: 3/2", "holders count even above hard");
        let seen = live(&[("u0", false), ("u1", false), ("u3", true), ("u4", true)]);
        let status = recount(&q, &seen, std::slice::from_ref(&holder)).expect("changed");
        let uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(
            uids,
            ["u0", "u1"],
            "the cache's holder is charged while it binds"
        );
        assert_eq!(status.summary, "gpu: 4/2");
        let mut again = q.clone();
        again.status = Some(status);
        assert_eq!(recount(&again, &seen, &[holder]), None);
    }

    #[test]
    fn a_charge_leaves_bound_claims_out_of_the_list_and_counts_them() {
        let q = quota(&[("gpu", 3)], &[("gpu", "u1"), ("gpu", "u2")]);
        let entry = QuotaCharge {
            class: "gpu".into(),
            claim: "c-u3".into(),
            uid: "u3".into(),
        };
        let Recharge::Write(written) = recharge(&q, &entry, &["u1".into()]) else {
            panic!("room for u3");
        };
        let status = written.status.as_ref().unwrap();
        let uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(uids, ["u2", "u3"]);
        assert_eq!(status.summary, "gpu: 3/3", "u1 still counts, as a holder");
        let full = catalog((*written).clone());
        assert!(matches!(
            full.check(&claim("u4"), Some("gpu")),
            QuotaCheck::Exceeded(_)
        ));
        assert!(matches!(recharge(&written, &entry, &[]), Recharge::Already));
    }

    #[test]
    fn a_recount_charges_restored_pairs_only_within_hard() {
        let q = quota(&[("gpu", 2)], &[("gpu", "u1")]);
        let holder = |claim: &str, uid: &str, holds| Holder {
            class: "gpu".into(),
            claim: format!("c-{claim}"),
            uid: uid.into(),
            holds,
        };
        let holders = [
            holder("c", "u3", Holds::Restored),
            holder("b", "u2", Holds::Restored),
            holder("a", "u1", Holds::Restored),
        ];
        let mut seen = live(&[("u1", false)]);
        for (name, uid) in [("c-b", "u2"), ("c-c", "u3"), ("c-d", "u4"), ("c-e", "u5")] {
            let l = LiveClaim {
                uid: uid.into(),
                class: Some("gpu".into()),
                bound: false,
            };
            seen.insert(name.into(), l);
        }
        seen.remove("c-u1");
        seen.insert(
            "c-a".into(),
            LiveClaim {
                uid: "u1".into(),
                class: Some("gpu".into()),
                bound: false,
            },
        );
        let mut q = q;
        q.status.as_mut().unwrap().charged[0].claim = "c-a".into();
        let status = recount(&q, &seen, &holders).expect("changed");
        let uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        assert_eq!(uids, ["u1", "u2"], "by name, while the class has room");
        assert_eq!(status.summary, "gpu: 2/2");
        let mut full = q.clone();
        full.status = Some(status);
        let bound = [
            holder("d", "u4", Holds::Bound),
            holder("e", "u5", Holds::Restored),
        ];
        let status = recount(&full, &seen, &bound).expect("changed");
        assert_eq!(status.summary, "gpu: 3/2", "a bind counts even above hard");
    }

    #[test]
    fn a_charge_touches_only_its_claim_unless_the_class_fills() {
        let q = quota(&[("gpu", 3)], &[("gpu", "u1")]);
        let one_more = charge(&q, &claim("u2"), "gpu").unwrap();
        assert_eq!(
            standing_may_change(Some(&q), Some(&one_more), |_| true),
            Touched::Claims(BTreeSet::from(["c-u2".to_string()]))
        );
        let full = charge(&one_more, &claim("u3"), "gpu").unwrap();
        assert_eq!(
            standing_may_change(Some(&one_more), Some(&full), |_| true),
            Touched::Namespace,
            "the class has no room now: every claim of it waits"
        );
        assert_eq!(
            standing_may_change(Some(&full), Some(&one_more), |_| true),
            Touched::Namespace,
            "a freed charge makes room for every waiting claim"
        );
        let mut edited = one_more.clone();
        edited.spec.hard.insert("cpu".into(), 1);
        assert_eq!(
            standing_may_change(Some(&one_more), Some(&edited), |_| true),
            Touched::Namespace
        );
        let uncounted = |q: &ServerQuota| q.spec.hard.len() == 1;
        assert_eq!(
            standing_may_change(Some(&one_more), Some(&edited), uncounted),
            Touched::Namespace
        );
        assert_eq!(
            standing_may_change(None, Some(&q), |_| true),
            Touched::Namespace
        );
        assert_eq!(
            standing_may_change(Some(&q), None, |_| true),
            Touched::Namespace
        );
        assert_eq!(
            standing_may_change(Some(&q), Some(&q), |_| true),
            Touched::Claims(BTreeSet::new())
        );
    }
}
