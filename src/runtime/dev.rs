//! `server-binder dev`: the embedded API server, the CRDs and both controllers in one
//! process, so a newcomer can try server-binder with kubectl and no cluster.
//!
//! The controllers reach the API server over HTTP like any other client; only the
//! process is shared.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::api::{Server, ServerSpec};
use crate::apiserver::{ApiServer, Config};

use super::controller_args::ControllerArgs;
use super::crds::install_crds;
use super::error::CommandError;
use super::identity::identity;
use super::logging;
use super::operator::{self, OperatorConfig};
use super::signals;

/// What `dev` tells a newcomer to try; the README shows the same commands (a test below
/// holds them together).
const TRY_IT: [&str; 3] = [
    "kubectl apply -f manifests/examples/",
    "kubectl get servers,serverclaims",
    "kubectl describe serverclaim by-ref",
];

#[derive(Debug, Clone, clap::Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub controllers: ControllerArgs,
    /// Where the embedded API server listens (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write a kubeconfig for it (context namespace `default`).
    #[arg(long, default_value = "server-binder.kubeconfig")]
    pub kubeconfig_out: PathBuf,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Create this many demo servers (labelled with a rack and a size).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=10_000))]
    pub servers: u16,
    /// Start the API server alone, without the controllers (to restore a backup into it
    /// before `server-binder run` starts them, as docs/operations.md "Backup and restore"
    /// does with a Deployment scaled to 0).
    #[arg(long)]
    pub no_controllers: bool,
}

pub async fn run(args: DevArgs) -> Result<(), CommandError> {
    logging::init(args.controllers.log_format);
    let apiserver = ApiServer::start(Config::default().listen(args.listen))
        .await
        .map_err(|source| CommandError::ApiServerStart {
            listen: args.listen,
            source,
        })?;
    apiserver
        .write_kubeconfig(&args.kubeconfig_out)
        .map_err(CommandError::Kubeconfig)?;
    let client = apiserver.client();
    install_crds(&client).await?;
    create_demo_servers(&client, args.servers).await?;

    let config = OperatorConfig {
        options: args.controllers.options(),
        metrics_addr: Some(args.metrics_addr),
        identity: identity(),
        // One process: nobody to elect.
        leader_election: None,
    };
    // The controllers get a client of their own, as they would in a cluster.
    let operator = match args.no_controllers {
        true => None,
        false => {
            let client = super::client::operator_client(apiserver.client_config())
                .map_err(CommandError::ControllersClient)?;
            Some(operator::start(client, config).await?)
        }
    };

    let kubeconfig =
        std::path::absolute(&args.kubeconfig_out).unwrap_or_else(|_| args.kubeconfig_out.clone());
    let metrics = operator.as_ref().and_then(|o| o.metrics_addr).map_or_else(
        || "none (no controllers)".into(),
        |a| format!("http://{a}/metrics"),
    );
    println!(
        "server-binder dev: API server at {} (DEVELOPMENT ONLY: plain HTTP, no authentication), metrics at {metrics}
In another shell:

    export KUBECONFIG={}
    {}

Ctrl-C stops everything (nothing is kept).",
        apiserver.url(),
        kubeconfig.display(),
        TRY_IT.join("\n    "),
    );

    signals::terminated().await.map_err(CommandError::Signals)?;
    eprintln!("server-binder dev: shutting down");
    if let Some(operator) = operator {
        operator.shutdown().await;
    }
    apiserver.shutdown().await;
    Ok(())
}

/// `server-01` .. `server-NN`, spread over three racks and three sizes, so selectors
/// have something to choose between.
async fn create_demo_servers(client: &kube::Client, count: u16) -> Result<(), CommandError> {
    let api = Api::<Server>::all(client.clone());
    let width = count.to_string().len().max(2);
    for i in 1..=count {
        let labels = BTreeMap::from([
            ("rack".to_string(), format!("r{}", (i - 1) % 3 + 1)),
            (
                "size".to_string(),
                ["small", "medium", "large"][usize::from(i - 1) / 3 % 3].to_string(),
            ),
        ]);
        let server = Server {
            metadata: ObjectMeta {
                name: Some(format!("server-{i:0width$}")),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: ServerSpec::default(),
            status: None,
        };
        api.create(&PostParams::default(), &server)
            .await
            .map_err(CommandError::DemoServer)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::TRY_IT;

    #[test]
    fn the_readme_shows_what_dev_prints() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
        for command in TRY_IT {
            assert!(
                readme.lines().any(|l| l.trim() == command),
                "README.md does not show `{command}`, which `server-binder dev` prints"
            );
        }
        let examples = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/examples/02-claims.yaml"
        ));
        let described = TRY_IT[2].rsplit(' ').next().unwrap();
        assert!(
            examples
                .lines()
                .any(|l| l.trim() == format!("name: {described}")),
            "manifests/examples/02-claims.yaml has no claim {described}"
        );
    }
}
