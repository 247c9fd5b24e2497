//! `server-binder explain`: why a claim waits and who holds a server, computed by the
//! same pure functions the controllers run (the decision, each server's first reason,
//! the summary), from what a read-only user can list. Also a kubectl plugin: installed
//! as `kubectl-server_binder`, it runs as `kubectl server-binder explain …`.

mod claim;
mod render;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;

use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Serialize;

use super::cli::gate_name;
use crate::api::{Server, ServerClaim};
use crate::binding::{Binder, BinderConfig, Rules};
use k8s_openapi::jiff::Timestamp;

/// What explain sends as its User-Agent, so audit logs tell its reads apart.
pub const USER_AGENT_VALUE: &str = concat!("server-binder-explain/", env!("CARGO_PKG_VERSION"));

/// Exit codes, as `--help` lists them.
pub const EXIT_NOT_FOUND: u8 = 1;
pub const EXIT_CLUSTER: u8 = 3;

#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Exit codes: 0 explained; 1 the object does not exist; 2 bad usage; \
3 the cluster cannot be reached, the CRDs are not installed, or reading is forbidden."
)]
pub struct ExplainArgs {
    /// serverclaim (serverclaims, scl) or server (servers, srv).
    pub kind: String,
    pub name: String,
    /// The claim's namespace (default: the kubeconfig context's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The kubeconfig to use (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The operator's --release-gates, which the cluster does not show: a server naming
    /// no gates of its own is judged with these, as the server controller judges it (a
    /// recycled server whose claim is gone is released into cleaning). Checked as `run`
    /// checks them.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = gate_name)]
    pub release_gates: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

/// Why explain could not explain.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0}")]
    Usage(String),
    #[error("Error from server (NotFound): {0}")]
    NotFound(String),
    #[error("{0}")]
    Cluster(String),
}

impl ExplainError {
    fn code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::NotFound(_) => EXIT_NOT_FOUND,
            Self::Cluster(_) => EXIT_CLUSTER,
        }
    }
}

/// Runs `explain` and prints its answer; the exit code says how it went.
pub async fn main(args: ExplainArgs) -> ExitCode {
    match explain(&args).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("server-binder explain: {e}");
            ExitCode::from(e.code())
        }
    }
}

async fn explain(args: &ExplainArgs) -> Result<String, ExplainError> {
    let (client, default_ns) = connect(args).await?;
    match args.kind.as_str() {
        "serverclaim" | "serverclaims" | "scl" => {
            let ns = args.namespace.clone().unwrap_or(default_ns);
            let world = World::read(&client, Some(&ns), &args.release_gates).await?;
            let e = claim::explain(&world, &ns, &args.name)?;
            render::output(&e, args.output, render::claim_text)
        }
        "server" | "servers" | "srv" => {
            let world = World::read(&client, None, &args.release_gates).await?;
            let e = server::explain(&world, &args.name)?;
            render::output(&e, args.output, render::server_text)
        }
        other => Err(ExplainError::Usage(format!(
            "unknown kind {other:?}: use serverclaim (scl) or server (srv)"
        ))),
    }
}

/// A client configured like kubectl's, and the context's namespace.
async fn connect(args: &ExplainArgs) -> Result<(Client, String), ExplainError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| ExplainError::Usage(format!("cannot read {}: {e}", path.display())))?;
            let config = Config::from_custom_kubeconfig(kubeconfig, &options).await;
            config.map_err(|e| e.to_string())
        }
        (None, Some(_)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        (None, None) => Config::infer().await.map_err(|e| e.to_string()),
    }
    .map_err(|e| ExplainError::Cluster(format!("cannot configure a Kubernetes client: {e}")))?;
    let namespace = config.default_namespace.clone();
    let mut config = config;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT_VALUE),
    ));
    let client = Client::try_from(config)
        .map_err(|e| ExplainError::Cluster(format!("cannot build a Kubernetes client: {e}")))?;
    Ok((client, namespace))
}

/// What explain read: every server, and the claims it may list.
pub(crate) struct World {
    pub servers: Vec<Server>,
    pub claims: Vec<ServerClaim>,
    /// Listing claims in every namespace was forbidden: only the claim's namespace was
    /// read, so the fair order's view is partial.
    pub partial: bool,
    /// The release gates of a server that names none (`--release-gates`).
    pub release_gates: Vec<String>,
}

impl World {
    /// A binder that listed what was read, as a controller does at its start, with the
    /// release gates explain was given.
    fn binder(&self) -> Binder {
        let config = BinderConfig {
            status_interval: std::time::Duration::ZERO,
            release_gates: self.release_gates.clone(),
        };
        let (servers, claims) = (self.servers.iter().cloned(), self.claims.iter().cloned());
        Binder::listed(Rules::real(), config, servers, claims, Timestamp::now())
    }

    async fn read(
        client: &Client,
        namespace: Option<&str>,
        release_gates: &[String],
    ) -> Result<Self, ExplainError> {
        let servers = list(Api::<Server>::all(client.clone())).await?;
        let (claims, partial) = match list(Api::<ServerClaim>::all(client.clone())).await {
            Ok(claims) => (claims, false),
            Err(ExplainError::Cluster(_)) if namespace.is_some() => {
                let ns = namespace.unwrap_or_default();
                (list(Api::namespaced(client.clone(), ns)).await?, true)
            }
            Err(e) => return Err(e),
        };
        // An empty entry (`--release-gates ''`) is no gate, as for `run`.
        let release_gates = release_gates.iter().filter(|g| !g.is_empty()).cloned();
        Ok(Self {
            servers,
            claims,
            partial,
            release_gates: release_gates.collect(),
        })
    }
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
            "listing {plural}.metal.binder.dev is forbidden: explain needs get and list on servers (cluster-wide) and serverclaims ({})",
            s.message
        ))),
        Err(e) => Err(ExplainError::Cluster(format!(
            "cannot reach the API server to list {plural}: {e}"
        ))),
    }
}

/// One server's verdict for a claim, as JSON and YAML print it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub name: String,
    pub usable: bool,
    /// The cause it is counted under in the summary, if it cannot serve the claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The first reason, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A pick would take this server now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub picked: bool,
}
