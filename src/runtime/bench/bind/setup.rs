//! Filling the API server over HTTP: the namespaces, the servers, the classes and
//! quotas (`--mix classes-quotas`) and the claims, many
//! creates in flight so that 100k objects take seconds; and, for `--rate`, claims paced
//! at a fixed rate (with `--tenants flood`, the flood's at once beside them).

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

use super::super::error::BenchError as Error;
use super::fleet::{self, Mix, QuotaScale};
use super::tenants::Schedule;
use crate::api::{ServerClass, ServerQuota};

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
    create_all("namespaces", 0..count, &create).await
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
    create_all("servers", 0..count, &create).await
}

/// Creates the mix's ServerClasses and ServerQuotas ([`fleet::classes`],
/// [`fleet::quotas`]; none for most mixes): before any claim, so that a claim's class
/// exists when it is first seen and no claim binds before its quota counts it.
pub async fn classes_and_quotas(
    client: &kube::Client,
    mix: Mix,
    schedule: Schedule,
    scale: QuotaScale,
) -> Result<(), Error> {
    let classes: Api<ServerClass> = Api::all(client.clone());
    for class in fleet::classes(mix) {
        let name = class.metadata.name.clone().unwrap_or_default();
        classes
            .create(&PostParams::default(), &class)
            .await
            .map_err(|e| failed("server class", &name, e))?;
    }
    let quotas = std::sync::Arc::new(fleet::quotas(mix, &schedule, scale));
    let client = client.clone();
    let all = quotas.clone();
    let create: Create = Box::new(move |q| {
        let quota = all[q].clone();
        let namespace = quota.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ServerQuota> = Api::namespaced(client.clone(), &namespace);
        Box::pin(async move {
            let name = format!(
                "{namespace}/{}",
                quota.metadata.name.as_deref().unwrap_or("")
            );
            api.create(&PostParams::default(), &quota)
                .await
                .map(drop)
                .map_err(|e| failed("server quota", &name, e))
        })
    });
    create_all("server quotas", 0..quotas.len(), &create).await
}

/// The size of the quotas' statuses at the end, as JSON: what a charge rewrites and
/// what each quota watch event carries. `None` when the run has no quota.
pub async fn quota_status_bytes(
    client: &kube::Client,
) -> Result<Option<super::report::QuotaStatusBytes>, Error> {
    let quotas: Api<ServerQuota> = Api::all(client.clone());
    let list = quotas
        .list(&Default::default())
        .await
        .map_err(|e| failed("server quotas", "list", e))?;
    let sizes: Vec<usize> = list
        .items
        .iter()
        .map(|q| serde_json::to_vec(&q.status).map_or(0, |v| v.len()))
        .collect();
    Ok(
        (!sizes.is_empty()).then(|| super::report::QuotaStatusBytes {
            quotas: sizes.len(),
            largest: sizes.iter().copied().max().unwrap_or(0),
            total: sizes.iter().sum(),
        }),
    )
}

fn claim_creator(client: &kube::Client, mix: Mix, schedule: Schedule) -> Create {
    let client = client.clone();
    Box::new(move |j| {
        let namespace = fleet::namespace_name(schedule.namespace(j));
        let api = Api::namespaced(client.clone(), &namespace);
        let claim = fleet::claim(j, mix, namespace);
        Box::pin(async move {
            api.create(&PostParams::default(), &claim)
                .await
                .map(drop)
                .map_err(|e| failed("claim", &fleet::claim_name(j), e))
        })
    })
}

/// Creates all claims as fast as the API server takes them.
pub async fn claims(client: &kube::Client, mix: Mix, schedule: Schedule) -> Result<(), Error> {
    let create = claim_creator(client, mix, schedule);
    create_all("claims", 0..schedule.claims, &create).await
}

/// Creates each claim at its time in the schedule at `rate`, counted from `start` (later
/// if the API server falls behind), quietly: the bind progress line says how far it got.
/// Claims the schedule creates at once (a flood) are created meanwhile, as fast as the
/// API server takes them: in the same stream they would hold up the paced ones.
pub async fn paced_claims(
    client: &kube::Client,
    mix: Mix,
    schedule: Schedule,
    rate: f64,
    start: Instant,
) -> Result<(), Error> {
    let create = claim_creator(client, mix, schedule);
    let (at_once, paced): (Vec<usize>, Vec<usize>) =
        (0..schedule.claims).partition(|&j| schedule.offset(j, rate).is_none());
    let start = tokio::time::Instant::from_std(start);
    let paced = stream::iter(paced)
        .then(|j| async move {
            let offset = schedule.offset(j, rate).unwrap_or_default();
            tokio::time::sleep_until(start + offset).await;
            j
        })
        .map(&create)
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|()| async { Ok(()) });
    let at_once = create_all("claims at once", at_once.into_iter(), &create);
    futures::try_join!(at_once, paced).map(drop)
}

/// Runs `create` on each of `indexes`, [`IN_FLIGHT`] at a time, with a line on stderr
/// every second and one at the end.
async fn create_all(
    what: &str,
    indexes: impl ExactSizeIterator<Item = usize>,
    create: &Create,
) -> Result<(), Error> {
    let start = Instant::now();
    let mut last_line = start;
    let (mut done, count) = (0, indexes.len());
    let mut results = stream::iter(indexes)
        .map(create)
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
