//! Filling the API server over HTTP: the namespaces, the servers and the claims, many
//! creates in flight so that 100k objects take seconds; and, for `--rate`, claims paced
//! at a fixed rate.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

use super::super::error::BenchError as Error;
use super::fleet::{self, Mix};

/// Creates in flight at once: enough to keep both cores of the API server busy.
const IN_FLIGHT: usize = 32;

/// One create, by index.
type Create = Box<dyn Fn(usize) -> BoxFuture<'static, Result<(), Error>> + Send + Sync>;

fn failed(what: &str, name: &str, e: kube::Error) -> Error {
    Error::Failed(format!("creating {what} {name}: {e}"))
}

pub async fn namespaces(client: &kube::Client, count: usize) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let create: Create = Box::new(move |k| {
        let (api, name) = (api.clone(), fleet::namespace_name(k));
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Box::pin(async move {
            api.create(&PostParams::default(), &ns)
                .await
                .map(drop)
                .map_err(|e| failed("namespace", &name, e))
        })
    });
    create_all("namespaces", count, create).await
}

pub async fn servers(client: &kube::Client, count: usize, mix: Mix) -> Result<(), Error> {
    let api = Api::all(client.clone());
    let create: Create = Box::new(move |i| {
        let (api, server) = (api.clone(), fleet::server(i, mix));
        Box::pin(async move {
            api.create(&PostParams::default(), &server)
                .await
                .map(drop)
                .map_err(|e| failed("server", &fleet::server_name(i), e))
        })
    });
    create_all("servers", count, create).await
}

fn claim_creator(client: &kube::Client, mix: Mix, namespaces: usize) -> Create {
    let client = client.clone();
    Box::new(move |j| {
        let claim = fleet::claim(j, mix, namespaces);
        let api = Api::namespaced(client.clone(), &fleet::claim_namespace(j, namespaces));
        Box::pin(async move {
            api.create(&PostParams::default(), &claim)
                .await
                .map(drop)
                .map_err(|e| failed("claim", &fleet::claim_name(j), e))
        })
    })
}

/// Creates all claims as fast as the API server takes them.
pub async fn claims(
    client: &kube::Client,
    count: usize,
    mix: Mix,
    namespaces: usize,
) -> Result<(), Error> {
    let create = claim_creator(client, mix, namespaces);
    create_all("claims", count, create).await
}

/// Creates claim `j` at `start + j / rate` (later if the API server falls behind), quietly:
/// the bind progress line says how far it got.
pub async fn paced_claims(
    client: &kube::Client,
    count: usize,
    mix: Mix,
    namespaces: usize,
    rate: f64,
    start: Instant,
) -> Result<(), Error> {
    let create = claim_creator(client, mix, namespaces);
    let start = tokio::time::Instant::from_std(start);
    stream::iter(0..count)
        .then(|j| async move {
            tokio::time::sleep_until(start + Duration::from_secs_f64(j as f64 / rate)).await;
            j
        })
        .map(&create)
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|()| async { Ok(()) })
        .await
}

/// Runs `create(0..count)`, [`IN_FLIGHT`] at a time, with a line on stderr every second
/// and one at the end.
async fn create_all(what: &str, count: usize, create: Create) -> Result<(), Error> {
    let start = Instant::now();
    let mut last_line = start;
    let mut done = 0;
    let mut results = stream::iter(0..count)
        .map(&create)
        .buffer_unordered(IN_FLIGHT);
    while let Some(result) = results.next().await {
        result?;
        done += 1;
        if last_line.elapsed() >= Duration::from_secs(1) {
            last_line = Instant::now();
            eprintln!("bench bind: creating {what}: {done}/{count}");
        }
    }
    if count > 0 {
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "bench bind: {what}: {count} created in {secs:.1}s ({:.0}/s)",
            count as f64 / secs.max(1e-9)
        );
    }
    Ok(())
}
