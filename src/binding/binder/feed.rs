//! How the watches feed each kind to the binder ([`Feed`]): a server's or a claim's
//! change moves the world, the claim side's memory and the picks in flight, and the
//! wake-up rules say whom it wakes; a class, a namespace or a quota sends the objects
//! it concerns through the classes and quotas again.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

use crate::api::{CachedClaim, CachedServer, ServerClass, ServerDisruptionBudget, ServerQuota};
use crate::binding::claim_side::assumed::claim_key;
use crate::binding::meta::{self, ClaimKey};
use crate::binding::wakeups::{Wake, on_relist};
use crate::binding::world::budgets::{is_available, is_held_by_budget};
use crate::binding::world::quota::{self, QuotaCheck, Touched};
use crate::binding::world::view::{ClaimCatalog, ClaimView, ServerView};
use crate::binding::world::{Change, Listing, World};

use super::{Binder, Feed};

/// A claim sent through the classes and quotas again: its key, and the claim before and
/// after, as the catalog holds them.
type Resolution = (ClaimKey, Option<Arc<CachedClaim>>, Arc<CachedClaim>);

impl Feed<CachedServer> for Binder {
    fn apply(&mut self, obj: Arc<CachedServer>) -> Wake {
        let name = meta::name(&*obj).to_string();
        self.change_server(&name, Change::applied(obj))
    }
    fn delete(&mut self, last: Arc<CachedServer>) -> Wake {
        let name = meta::name(&*last).to_string();
        self.change_server(&name, Change::deleted(last))
    }
    fn relist(&mut self, all: Vec<Arc<CachedServer>>) -> Wake {
        self.world.replace_servers(all);
        let servers = self.world.servers();
        let lookup = |name: &str| servers.server(name).cloned();
        self.claim_side.assumed.relisted_servers(&lookup);
        self.recount_in_flight();
        on_relist(self.world.servers(), self.world.claims())
    }
}

impl Feed<CachedClaim> for Binder {
    fn apply(&mut self, obj: Arc<CachedClaim>) -> Wake {
        self.change_claim(&claim_key(&obj), Change::applied(obj))
    }
    fn delete(&mut self, last: Arc<CachedClaim>) -> Wake {
        self.change_claim(&claim_key(&last), Change::deleted(last))
    }
    fn relist(&mut self, all: Vec<Arc<CachedClaim>>) -> Wake {
        self.world.replace_claims(all);
        let claims = self.world.claims();
        let lookup = |k: &ClaimKey| claims.claim(&k.namespace, &k.name).cloned();
        let rule = self.rules.assumption_ends;
        let ended = self.claim_side.assumed.relisted_claims(rule, &lookup);
        self.claim_side.evicting.relisted(&lookup);
        self.recount_in_flight();
        let mut wake = on_relist(self.world.servers(), self.world.claims());
        for server in ended {
            wake.extend(self.assumption_ended(&server));
        }
        wake
    }
}

/// A class changed: every claim may take other servers now.
impl Feed<ServerClass> for Binder {
    fn apply(&mut self, obj: Arc<ServerClass>) -> Wake {
        let name = meta::name(&*obj).to_string();
        let resolved = self.world.put_class(&name, Some(obj));
        self.resolved(resolved)
    }
    fn delete(&mut self, last: Arc<ServerClass>) -> Wake {
        let resolved = self.world.put_class(meta::name(&*last), None);
        self.resolved(resolved)
    }
    fn relist(&mut self, all: Vec<Arc<ServerClass>>) -> Wake {
        let resolved = self.world.replace_classes(all);
        self.resolved(resolved)
    }
}

/// A quota changed: the claims of its namespace whose standing with it changed are held
/// anew (one over quota takes no server) and woken, with the servers they name (a charge
/// lets the server side bind), and whom their change wakes as a watched change would.
impl Feed<ServerQuota> for Binder {
    fn apply(&mut self, obj: Arc<ServerQuota>) -> Wake {
        let namespace = meta::namespace(&*obj).to_string();
        let name = meta::name(&*obj).to_string();
        let was = self.world.quotas().quota(&namespace, &name).cloned();
        self.change_quota(&namespace, was.as_deref(), Some(obj))
    }
    fn delete(&mut self, last: Arc<ServerQuota>) -> Wake {
        let namespace = meta::namespace(&*last).to_string();
        self.change_quota(&namespace, Some(&last), None)
    }
    /// A relist brings every quota's latest charges at once, with no event per change.
    fn relist(&mut self, all: Vec<Arc<ServerQuota>>) -> Wake {
        let before = self.world.quota_checks(None);
        let resolved = self.world.replace_quotas(all);
        let mut wake = self.resolved(resolved);
        let after = self.world.quota_checks(None);
        wake.extend(self.apply_quota_standing(before, after));
        wake
    }
}

/// A budget changed: the evictions it may hold or free are decided again.
impl Feed<ServerDisruptionBudget> for Binder {
    fn apply(&mut self, obj: Arc<ServerDisruptionBudget>) -> Wake {
        let namespace = meta::namespace(&*obj).to_string();
        self.world.budgets_mut().upsert(obj);
        self.budget_holds(&namespace)
    }
    fn delete(&mut self, last: Arc<ServerDisruptionBudget>) -> Wake {
        let namespace = meta::namespace(&*last);
        self.world
            .budgets_mut()
            .remove(namespace, meta::name(&*last));
        self.budget_holds(namespace)
    }
    fn relist(&mut self, all: Vec<Arc<ServerDisruptionBudget>>) -> Wake {
        self.world.budgets_mut().replace_all(all);
        held_claims(self.world.claims().iter())
    }
}

/// Wakes those of `claims` whose eviction a budget holds.
fn held_claims<'a>(claims: impl Iterator<Item = &'a CachedClaim>) -> Wake {
    let mut wake = Wake::default();
    for claim in claims.filter(|c| is_held_by_budget(c)) {
        wake.claims.insert(claim_key(claim));
    }
    wake
}

/// Whether the claim counts as available to its budgets, as the watch shows it (no
/// eviction in flight: those change nothing another claim sees until written).
fn availability(claim: Option<&CachedClaim>) -> bool {
    claim.is_some_and(|c| is_available(c, &|_| false))
}

/// Namespaces matter only for their labels: a class's `namespaceSelector` reads them.
impl Feed<Namespace> for Binder {
    fn apply(&mut self, obj: Arc<Namespace>) -> Wake {
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        let resolved = self.world.put_namespace(meta::name(&*obj), Some(labels));
        self.resolved(resolved)
    }
    fn delete(&mut self, last: Arc<Namespace>) -> Wake {
        let resolved = self.world.put_namespace(meta::name(&*last), None);
        self.resolved(resolved)
    }
    fn relist(&mut self, all: Vec<Arc<Namespace>>) -> Wake {
        let resolved = self.world.replace_namespaces(Listing::labels_of(&all));
        self.resolved(resolved)
    }
}

/// The changes the feeds share.
impl Binder {
    fn change_server(&mut self, name: &str, change: Change<CachedServer>) -> Wake {
        let (old, new) = self.world.put_server(name, change);
        self.claim_side.assumed.observe_server(name, new.as_deref());
        self.sync_in_flight(&[name], &[]);
        let fixed = self.claim_side.refusing.observe(name, new.as_deref());
        let in_flight = self.claim_side.assumed.len();
        let (servers, claims) = (self.world.servers(), self.world.claims());
        let changed = self.rules.triggers.server_changed;
        let mut wake = changed(old.as_deref(), new.as_deref(), servers, claims, in_flight);
        if fixed {
            // Free for picks again, and no longer what the claims naming it wait for.
            wake.extend(self.server_refusal_changed(name));
        }
        wake
    }

    fn change_claim(&mut self, key: &ClaimKey, change: Change<CachedClaim>) -> Wake {
        let (old, new) = self.world.put_claim(key, change);
        self.claim_side.refused.observe_claim(key, new.as_deref());
        self.claim_side.evicting.observe(key, new.as_deref());
        let budgets_moved = self.world.budgets().has_namespace(&key.namespace)
            && availability(old.as_deref()) != availability(new.as_deref());
        let rule = self.rules.assumption_ends;
        let assumed = &mut self.claim_side.assumed;
        let ended = assumed.observe_claim_with(rule, key, new.as_deref());
        self.sync_in_flight(&[], &[key]);
        let (servers, claims) = (self.world.servers(), self.world.claims());
        let changed = self.rules.triggers.claim_changed;
        let mut wake = changed(old.as_deref(), new.as_deref(), servers, claims);
        if let Some(server) = ended {
            wake.extend(self.assumption_ended(&server));
        }
        if budgets_moved {
            wake.extend(self.budget_holds(&key.namespace));
        }
        wake
    }

    /// The claims of `namespace` whose eviction a budget holds: a budget or a claim it
    /// covers changed.
    fn budget_holds(&self, namespace: &str) -> Wake {
        held_claims(self.world.claims().in_namespace(namespace).map(|c| &**c))
    }

    /// Whether the claim holds its bind ([`quota::holds_bind`]) and no quota reads on its
    /// view: a bind-completed claim keeps its server whatever a quota says
    /// ([`World::over_quota`]), so the catalog's view of it stays the claim resolved now.
    fn holds_a_completed_bind(&self, key: &ClaimKey) -> bool {
        let claim = self.world.claims().claim(&key.namespace, &key.name);
        claim.is_some_and(|c| quota::holds_bind(c) && meta::is_bind_completed(c))
    }

    /// A quota of `namespace` changed from `was` to `now` (`None`: absent): the claims
    /// whose standing it may move ([`quota::standing_may_change`]) are sent through the
    /// classes and quotas again.
    fn change_quota(
        &mut self,
        namespace: &str,
        was: Option<&ServerQuota>,
        now: Option<Arc<ServerQuota>>,
    ) -> Wake {
        let counted = self.world.quotas().counted_rule();
        let touched = quota::standing_may_change(was, now.as_deref(), counted);
        let checks = |world: &World| match &touched {
            Touched::Namespace => world.quota_checks(Some(namespace)),
            Touched::Claims(names) => world.quota_checks_named(namespace, names),
        };
        let before = checks(&self.world);
        match (now, was) {
            (Some(q), _) => {
                let name = meta::name(&*q).to_string();
                self.world.put_quota(namespace, &name, Some(q));
            }
            (None, Some(last)) => self.world.put_quota(namespace, meta::name(last), None),
            (None, None) => {}
        }
        let after = checks(&self.world);
        self.apply_quota_standing(before, after)
    }

    /// The claims whose standing with the quotas changed from `before` to `after`, sent
    /// through the classes and quotas again: wakes them and the servers they name (a
    /// charge lets the server side bind). A claim that holds a completed bind is left as it is:
    /// no quota holds it back, and the charge that leaves the list once it is bound
    /// ([`quota::recharge`]) changes nothing for it or its server.
    fn apply_quota_standing(
        &mut self,
        before: BTreeMap<ClaimKey, QuotaCheck>,
        after: BTreeMap<ClaimKey, QuotaCheck>,
    ) -> Wake {
        let mut resolved = Vec::new();
        for (key, now) in after {
            if before.get(&key) == Some(&now) || self.holds_a_completed_bind(&key) {
                continue;
            }
            let Some((old, effective)) = self.world.resolve_claim_again(&key) else {
                continue;
            };
            self.sync_in_flight(&[], &[&key]);
            resolved.push((key, old, effective));
        }
        self.claims_resolved_again(resolved)
    }

    /// Whom claims sent through the quotas again at once wake: each, the servers they
    /// name, and the union of what the claim rule says of each change, against the
    /// catalogs after all of them. The rule's broad answer of claims (every waiting
    /// claim) is the same whichever change gives it, so once one change gave it the rest
    /// are asked against a catalog of the claims that name a server only (all the
    /// rule's broad answer of servers reads): a namespace's thousands of claims changing
    /// standing at once (its quota counted, a class full) cost one pass over the waiting
    /// claims, not one each.
    fn claims_resolved_again(&self, resolved: Vec<Resolution>) -> Wake {
        let rule = self.rules.triggers.claim_changed;
        let (servers, claims) = (self.world.servers(), self.world.claims());
        let naming = match resolved.len() > 1 {
            true => ClaimCatalog::from_claims(
                claims
                    .waiting()
                    .named()
                    .filter_map(|(_, k)| claims.shared(&k.namespace, &k.name).cloned()),
            ),
            false => ClaimCatalog::default(),
        };
        let mut pending_woken = false;
        let mut wake = Wake::default();
        for (key, old, effective) in resolved {
            if let Some(server) = &effective.spec.server_ref {
                wake.servers.insert(server.name.clone());
            }
            let (old, new) = (old.as_deref(), Some(&*effective));
            let narrow = rule(old, new, servers, &naming);
            if !pending_woken {
                let full = rule(old, new, servers, claims);
                pending_woken = full.claims.len() > narrow.claims.len();
                wake.extend(full);
            }
            wake.extend(narrow);
            wake.claims.insert(key);
        }
        wake
    }
}
