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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::api::{CachedClaim, QuotaCharge, ServerQuota, ServerQuotaStatus};

use crate::binding::meta;

/// The condition reason (and event reason) of a claim over quota.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// The condition reason (and event reason) of a claim waiting for a quota's count.
pub const QUOTA_NOT_COUNTED: &str = "QuotaNotCounted";

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
    /// Charges per class.
    used: HashMap<String, i64>,
}

impl Counted {
    fn of(quota: Arc<ServerQuota>, counted: CountedRule) -> Self {
        let charges = charges(&quota);
        let charged = charges.iter().map(|c| c.uid.clone()).collect();
        let mut used = HashMap::new();
        for c in charges {
            *used.entry(c.class.clone()).or_insert(0) += 1;
        }
        Self {
            counted: counted(&quota),
            quota,
            charged,
            used,
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
            let used = counted.used.get(class).copied().unwrap_or(0);
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
    /// resourceVersion it was read at ([`charge`]).
    pub fn charges_for(&self, claim: &CachedClaim, class: &str, quotas: &[String]) -> Vec<Charge> {
        let namespace = meta::namespace(claim);
        quotas
            .iter()
            .filter_map(|name| self.quota(namespace, name))
            .filter_map(|quota| {
                let charged = charge(quota, claim, class)?;
                let read = quota.clone();
                Some(Charge { read, charged })
            })
            .collect()
    }
}

/// A charge to write: the quota as the decision read it (the write's precondition is its
/// resourceVersion, and the write changes only what differs from it) and the quota with
/// the claim charged.
#[derive(Clone, Debug)]
pub struct Charge {
    pub read: Arc<ServerQuota>,
    pub charged: ServerQuota,
}

/// The most servers of `class` the quota allows (`None`: it does not limit the class).
pub fn limit(quota: &ServerQuota, class: &str) -> Option<i64> {
    quota.spec.hard.get(class).copied()
}

/// The claims the quota charges.
pub fn charges(quota: &ServerQuota) -> &[QuotaCharge] {
    quota.status.as_ref().map_or(&[], |s| &s.charged)
}

/// How many servers of `class` these charges count: a quota's `used` for the class.
pub fn used_of(charges: &[QuotaCharge], class: &str) -> i64 {
    charges.iter().filter(|c| c.class == class).count() as i64
}

/// Whether a quota that counts `used` servers of a class whose `hard` limit this is can
/// charge one more: the one rule of a full quota, which the check, the charge, the
/// recount and `explain` all apply.
pub fn has_room(used: i64, hard: i64) -> bool {
    used < hard
}

/// The quota with `claim` charged for `class`, to be written with the quota's
/// resourceVersion as a precondition (`None`: it charges the claim already, or has no
/// room). Two writers that read the same version cannot both write: the second gets a
/// conflict and decides again on the quota as the first left it.
pub fn charge(quota: &ServerQuota, claim: &CachedClaim, class: &str) -> Option<ServerQuota> {
    let uid = meta::uid(claim)?;
    let hard = limit(quota, class)?;
    let all = charges(quota);
    if !has_room(used_of(all, class), hard) || all.iter().any(|c| c.uid == uid) {
        return None;
    }
    let mut charged = all.to_vec();
    charged.push(QuotaCharge {
        class: class.to_string(),
        claim: meta::name(claim).to_string(),
        uid: uid.to_string(),
    });
    let mut written = quota.clone();
    written.status = Some(status_of(quota, charged, generation(quota)));
    Some(written)
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
/// which the recount reads to free its charge if it is gone. A charge written by a
/// process whose claim cache lagged a delete is freed so, without waiting for a round.
pub fn wants_recount(
    quota: &ServerQuota,
    counted: CountedRule,
    shown: &dyn Fn(&QuotaCharge) -> bool,
) -> bool {
    !counted(quota) || !unconfirmed(quota, shown).is_empty()
}

/// The charges whose claims the cache does not show (`live` says whether it shows a
/// claim of that name with that uid): the recount reads each before it drops it.
pub fn unconfirmed<'q>(
    quota: &'q ServerQuota,
    live: &dyn Fn(&QuotaCharge) -> bool,
) -> Vec<&'q QuotaCharge> {
    charges(quota).iter().filter(|c| !live(c)).collect()
}

/// The quota's status counted from scratch: its charges but those whose claims are
/// `gone` (confirmed by a read: not found, or another uid under the name), plus every
/// claim of a class it limits that holds a server (`holders`: a claim bound before the
/// quota existed counts, even above `hard`), then the restored pairs while their class
/// has room, by name. `None`: the status says that already.
/// What the quotas' recount reads of one quota as a world shows it
/// ([`crate::binding::World::recounts`]): the charges whose claims the catalog does not
/// show, to read live, and the claims holding servers.
#[derive(Clone, Debug)]
pub struct Recount {
    pub quota: ServerQuota,
    pub unread: Vec<QuotaCharge>,
    pub holders: Vec<Holder>,
}

impl Recount {
    /// The quota with its status counted anew ([`recount`]), given the uids of the
    /// unread charges whose claims a live read found gone; `None` if nothing changes.
    pub fn recounted(&self, gone: &HashSet<String>) -> Option<ServerQuota> {
        let status = recount(&self.quota, gone, &self.holders)?;
        Some(ServerQuota {
            status: Some(status),
            ..self.quota.clone()
        })
    }
}

pub fn recount(
    quota: &ServerQuota,
    gone: &HashSet<String>,
    holders: &[Holder],
) -> Option<ServerQuotaStatus> {
    let mut charged: Vec<QuotaCharge> = charges(quota)
        .iter()
        .filter(|c| !gone.contains(&c.uid))
        .cloned()
        .collect();
    let mut known: HashSet<String> = charged.iter().map(|c| c.uid.clone()).collect();
    let mut restored: Vec<&Holder> = Vec::new();
    for h in holders {
        if limit(quota, &h.class).is_none() || known.contains(&h.uid) {
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
    restored.sort_by(|a, b| a.claim.cmp(&b.claim));
    for h in restored {
        let used = used_of(&charged, &h.class);
        if limit(quota, &h.class).is_some_and(|hard| has_room(used, hard))
            && known.insert(h.uid.clone())
        {
            charged.push(charge_of(h));
        }
    }
    let status = status_of(quota, charged, generation(quota));
    (quota.status.as_ref() != Some(&status)).then_some(status)
}

fn charge_of(h: &Holder) -> QuotaCharge {
    QuotaCharge {
        class: h.class.clone(),
        claim: h.claim.clone(),
        uid: h.uid.clone(),
    }
}

/// The status of a quota with these charges, counted for `spec.hard` at `observed`:
/// `used` counted from them for each class the quota limits, and the summary `kubectl
/// get` prints.
fn status_of(
    quota: &ServerQuota,
    mut charged: Vec<QuotaCharge>,
    observed: i64,
) -> ServerQuotaStatus {
    charged.sort();
    let used: BTreeMap<String, i64> = quota
        .spec
        .hard
        .keys()
        .map(|class| {
            let n = used_of(&charged, class);
            (class.clone(), n)
        })
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
            .collect();
        q.status = Some(status_of(&q, charged, 0));
        q
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
    fn a_recount_drops_only_confirmed_gone_claims_and_counts_holders() {
        let q = quota(&[("gpu", 1)], &[("gpu", "u1"), ("gpu", "u2")]);
        let unread = unconfirmed(&q, &|c| c.uid == "u1");
        assert_eq!(unread.len(), 1);
        assert_eq!(unread[0].uid, "u2");
        let gone = HashSet::from(["u2".to_string()]);
        let holder = Holder {
            class: "gpu".into(),
            claim: "old".into(),
            uid: "u0".into(),
            holds: Holds::Bound,
        };
        let status = recount(&q, &gone, std::slice::from_ref(&holder)).expect("changed");
        let mut uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        uids.sort();
        assert_eq!(uids, ["u0", "u1"]);
        assert_eq!(
            status.summary, "gpu: 2/1",
            "a holder counts even above hard"
        );
        let mut again = q.clone();
        again.status = Some(status);
        assert_eq!(recount(&again, &gone, &[holder]), None);
    }

    #[test]
    fn a_recount_charges_restored_pairs_only_within_hard() {
        let q = quota(&[("gpu", 2)], &[("gpu", "u1")]);
        let holder = |claim: &str, uid: &str, holds| Holder {
            class: "gpu".into(),
            claim: claim.into(),
            uid: uid.into(),
            holds,
        };
        let holders = [
            holder("c", "u3", Holds::Restored),
            holder("b", "u2", Holds::Restored),
            holder("a", "u1", Holds::Restored),
        ];
        let status = recount(&q, &HashSet::new(), &holders).expect("changed");
        let mut uids: Vec<&str> = status.charged.iter().map(|c| c.uid.as_str()).collect();
        uids.sort();
        assert_eq!(uids, ["u1", "u2"], "by name, while the class has room");
        assert_eq!(status.summary, "gpu: 2/2");
        let mut full = q.clone();
        full.status = Some(status);
        let bound = [
            holder("d", "u4", Holds::Bound),
            holder("e", "u5", Holds::Restored),
        ];
        let status = recount(&full, &HashSet::new(), &bound).expect("changed");
        assert_eq!(status.summary, "gpu: 3/2", "a bind counts even above hard");
    }
}
