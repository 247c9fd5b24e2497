//! `server-binder dev`: the embedded API server, the CRDs and both controllers in one
//! process, so a newcomer can try server-binder with kubectl and no cluster.
//!
//! The controllers reach the API server over HTTP like any other client; only the
//! process is shared.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::api::{Server, ServerSpec};
use crate::apiserver::{ApiServer, Config};

use super::cli::{DevArgs, identity};
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

pub async fn run(args: DevArgs) -> Result<(), String> {
    logging::init(args.controllers.log_format);
    let apiserver = ApiServer::start(Config::default().listen(args.listen))
        .await
        .map_err(|e| {
            format!(
                "cannot start the embedded API server on {}: {e}",
                args.listen
            )
        })?;
    apiserver
        .write_kubeconfig(&args.kubeconfig_out)
        .map_err(|e| e.to_string())?;
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
    let controllers_client = super::client::operator_client(apiserver.client_config())
        .map_err(|e| format!("cannot build the controllers' client: {e}"))?;
    let operator = operator::start(controllers_client, config)
        .await
        .map_err(|e| e.to_string())?;

    let kubeconfig =
        std::path::absolute(&args.kubeconfig_out).unwrap_or_else(|_| args.kubeconfig_out.clone());
    let metrics = operator
        .metrics_addr
        .map(|a| format!("http://{a}/metrics"))
        .unwrap_or_default();
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

    signals::terminated()
        .await
        .map_err(|e| format!("cannot wait for signals: {e}"))?;
    eprintln!("server-binder dev: shutting down");
    operator.shutdown().await;
    apiserver.shutdown().await;
    Ok(())
}

/// Installs the CRDs through the API, as `kubectl apply -f manifests/crds/` would
/// (`bench bind` installs them the same way).
pub(super) async fn install_crds(client: &kube::Client) -> Result<(), String> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in crate::api::crds() {
        api.create(&PostParams::default(), &crd)
            .await
            .map_err(|e| {
                format!(
                    "cannot install CRD {}: {e}",
                    crd.metadata.name.unwrap_or_default()
                )
            })?;
    }
    Ok(())
}

/// `server-01` .. `server-NN`, spread over three racks and three sizes, so selectors
/// have something to choose between.
async fn create_demo_servers(client: &kube::Client, count: u16) -> Result<(), String> {
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
            .map_err(|e| format!("cannot create demo server: {e}"))?;
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
            "/manifests/examples/claims.yaml"
        ));
        let described = TRY_IT[2].rsplit(' ').next().unwrap();
        assert!(
            examples
                .lines()
                .any(|l| l.trim() == format!("name: {described}")),
            "manifests/examples/claims.yaml has no claim {described}"
        );
    }
}
