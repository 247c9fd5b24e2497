//! What explain reads from the cluster: the servers, and the claims it may list.

use kube::Client;
use kube::api::{Api, ListParams};

use super::error::ExplainError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

use crate::api::{CachedClaim, CachedServer, ServerClass, ServerDisruptionBudget, ServerQuota};
use crate::binding::{Binder, BinderConfig, Listing, Rules};
use k8s_openapi::jiff::Timestamp;

/// What explain read: every server, and the claims it may list.
pub(crate) struct World {
    pub servers: Vec<CachedServer>,
    pub claims: Vec<CachedClaim>,
    /// Listing claims in every namespace was forbidden: only the claim's namespace was
    /// read, so the fair order's view is partial.
    pub partial: bool,
    /// The release gates of a server that names none (`--release-gates`).
    pub release_gates: Vec<String>,
    /// The server classes, and the namespaces' labels their `namespaceSelector` reads
    /// (empty when listing namespaces is forbidden: then only a namespace's name label
    /// is known, as the binder knows it before it lists them).
    pub classes: Vec<ServerClass>,
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    /// The server quotas (of the claim's namespace only, when listing them in every
    /// namespace is forbidden).
    pub quotas: Vec<ServerQuota>,
    /// The disruption budgets (of the claim's namespace only, when listing them in
    /// every namespace is forbidden; none when they cannot be read).
    pub budgets: Vec<ServerDisruptionBudget>,
}

impl World {
    /// A binder that listed what was read, as a controller does at its start, with the
    /// release gates explain was given.
    pub fn binder(&self) -> Binder {
        let config = BinderConfig {
            status_interval: std::time::Duration::ZERO,
            release_gates: self.release_gates.clone(),
        };
        let listing = Listing {
            classes: self.classes.iter().cloned().map(Arc::new).collect(),
            namespaces: self.namespaces.clone(),
            quotas: self.quotas.iter().cloned().map(Arc::new).collect(),
            budgets: self.budgets.iter().cloned().map(Arc::new).collect(),
            ..Listing::of(self.servers.iter().cloned(), self.claims.iter().cloned())
        };
        Binder::listed(Rules::real(), config, listing, Timestamp::now())
    }

    pub async fn read(
        client: &Client,
        namespace: Option<&str>,
        release_gates: &[String],
    ) -> Result<Self, ExplainError> {
        let servers = list(Api::<CachedServer>::all(client.clone())).await?;
        let (claims, partial) = match list(Api::<CachedClaim>::all(client.clone())).await {
            Ok(claims) => (claims, false),
            Err(ExplainError::Cluster(_)) if namespace.is_some() => {
                let ns = namespace.unwrap_or_default();
                (list(Api::namespaced(client.clone(), ns)).await?, true)
            }
            Err(e) => return Err(e),
        };
        let classes = list(Api::<ServerClass>::all(client.clone())).await?;
        let quotas = match list(Api::<ServerQuota>::all(client.clone())).await {
            Ok(quotas) => quotas,
            Err(ExplainError::Cluster(_)) if namespace.is_some() => {
                let ns = namespace.unwrap_or_default();
                list(Api::namespaced(client.clone(), ns)).await?
            }
            Err(e) => return Err(e),
        };
        let budgets = match list(Api::<ServerDisruptionBudget>::all(client.clone())).await {
            Ok(budgets) => budgets,
            Err(_) => match namespace {
                Some(ns) => list(Api::namespaced(client.clone(), ns))
                    .await
                    .unwrap_or_default(),
                None => Vec::new(),
            },
        };
        let namespaces = match Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items.iter().map(labels_of).collect(),
            Err(_) => HashMap::new(),
        };
        // An empty entry (`--release-gates ''`) is no gate, as for `run`.
        let release_gates = release_gates.iter().filter(|g| !g.is_empty()).cloned();
        Ok(Self {
            servers,
            claims,
            partial,
            release_gates: release_gates.collect(),
            classes,
            namespaces,
            quotas,
            budgets,
        })
    }
}

fn labels_of(ns: &Namespace) -> (String, BTreeMap<String, String>) {
    let name = ns.metadata.name.clone().unwrap_or_default();
    (name, ns.metadata.labels.clone().unwrap_or_default())
}

async fn list<K>(api: Api<K>) -> Result<Vec<K>, ExplainError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let plural = K::plural(&());
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(ExplainError::Cluster(format!(
            "the {plural}.metal.binder.dev CRD is not installed in this cluster: install the CRDs with `kubectl apply -f manifests/crds/`"
        ))),
        Err(kube::Error::Api(s)) if s.code == 403 => Err(ExplainError::Cluster(format!(
            "listing {plural}.metal.binder.dev is forbidden: explain needs get and list on servers and serverclasses (cluster-wide) and serverclaims ({})",
            s.message
        ))),
        Err(e) => Err(ExplainError::Cluster(format!(
            "cannot reach the API server to list {plural}: {e}"
        ))),
    }
}
