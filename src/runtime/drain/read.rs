//! What the verbs read: the servers named or selected, the claim bound to each, and the
//! classes, whose tolerations a claim's eviction counts as binding does, and the
//! disruption budgets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams};

use super::error::DrainError;
use crate::api::{CachedClaim, Server, ServerClaim, ServerClass, ServerDisruptionBudget};
use crate::binding::world::budgets::BudgetCatalog;
use crate::binding::world::classes::ClassCatalog;
use crate::binding::{meta, ref_uid};

/// Which servers a verb acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    Names(Vec<String>),
    Selector(String),
}

/// The servers `selection` names, in the order named (by name for a selector). A name
/// that does not exist fails the whole command before anything is written.
pub async fn servers(client: &Client, selection: &Selection) -> Result<Vec<Server>, DrainError> {
    let api: Api<Server> = Api::all(client.clone());
    let params = match selection {
        Selection::Names(_) => ListParams::default(),
        Selection::Selector(s) => ListParams::default().labels(s),
    };
    let listed = api.list(&params).await;
    let mut listed = listed
        .map_err(|e| DrainError::from_api("list servers", e))?
        .items;
    let Selection::Names(names) = selection else {
        listed.sort_by(|a, b| meta::name(a).cmp(meta::name(b)));
        return Ok(listed);
    };
    let mut by_name: BTreeMap<String, Server> = listed
        .into_iter()
        .map(|s| (meta::name(&s).to_string(), s))
        .collect();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        match by_name.remove(name) {
            Some(server) => found.push(server),
            None if found.iter().any(|s| meta::name(s) == name) => {}
            None => missing.push(format!("{name:?}")),
        }
    }
    if !missing.is_empty() {
        return Err(DrainError::NotFound(format!(
            "servers.metal.binder.dev {} not found",
            missing.join(", ")
        )));
    }
    Ok(found)
}

/// The claim bound to `server`: the one its `serverClaimRef` names with a uid, if that
/// claim still exists with that uid.
pub async fn holder(client: &Client, server: &Server) -> Result<Option<ServerClaim>, DrainError> {
    let Some(r) = server.spec.server_claim_ref.as_ref() else {
        return Ok(None);
    };
    let Some(uid) = ref_uid(r) else {
        return Ok(None);
    };
    let api: Api<ServerClaim> = Api::namespaced(client.clone(), &r.namespace);
    let what = format!("read claim {}/{}", r.namespace, r.name);
    let claim = api
        .get_opt(&r.name)
        .await
        .map_err(|e| DrainError::from_api(&what, e))?;
    Ok(claim.filter(|c| meta::uid(c) == Some(uid)))
}

/// The classes and the namespaces' labels, as the controllers see them; `None` if they
/// cannot be listed (then a claim's own tolerations are all its eviction counts).
pub async fn classes(client: &Client) -> Option<ClassCatalog> {
    let classes = Api::<ServerClass>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await;
    let labels = |ns: &Namespace| {
        let name = ns.metadata.name.clone().unwrap_or_default();
        (name, ns.metadata.labels.clone().unwrap_or_default())
    };
    let namespaces: HashMap<String, BTreeMap<String, String>> = match namespaces {
        Ok(list) => list.items.iter().map(labels).collect(),
        Err(_) => HashMap::new(),
    };
    let mut catalog = ClassCatalog::default();
    catalog.replace_classes(classes.items.into_iter().map(Arc::new));
    catalog.replace_namespaces(namespaces);
    Some(catalog)
}

/// The claim as its eviction reads it: its class's tolerations folded in, as for binding.
pub fn effective(claim: &ServerClaim, catalog: Option<&ClassCatalog>) -> CachedClaim {
    let cached = CachedClaim::from(claim.clone());
    match catalog {
        Some(catalog) => catalog.resolve_ref(&cached).0.into_owned(),
        None => cached,
    }
}

/// The disruption budgets and the claims they count, as the claim controller sees
/// them; `None` if either cannot be listed (then a dry run says nothing of budgets).
pub async fn budgets(client: &Client) -> Option<Budgets> {
    let budgets = Api::<ServerDisruptionBudget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    let claims = Api::<CachedClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    let mut catalog = BudgetCatalog::default();
    catalog.replace_all(budgets.items.into_iter().map(Arc::new));
    Some(Budgets {
        catalog,
        claims: claims.items,
    })
}

/// What the budgets' rule reads ([`crate::binding::world::budgets::budget_hold`]).
pub struct Budgets {
    pub catalog: BudgetCatalog,
    pub claims: Vec<CachedClaim>,
}
