//! `server-binder bench bind`: the real operator binding a generated fleet on the
//! embedded API server, measured from outside.
//!
//! In order: start the embedded API server on loopback and measure its write ceiling
//! ([`ceiling`]); install the CRDs, create the namespaces and the servers ([`setup`]);
//! open the claims watch ([`observe`]); then either create every claim and start the
//! operator (batch), or start the operator, wait until it is ready and settled and
//! create claims at `--rate` per second, in the namespaces and at the times `--tenants`
//! gives them ([`tenants`]). The operator is this binary's `run` in a child process
//! ([`operator`]); the bench samples its RSS and prints progress ([`progress`]) until
//! every claim is Bound (or, with `--mix classes-quotas`, waits `QuotaExceeded`) or
//! nothing happens for the stall timeout, with `--hold-ms`
//! deleting each claim a while after it is Bound ([`hold`]); it scrapes the operator's
//! `/metrics` once ([`scrape`]), kills it and reports ([`report`], with `--tenants flood`
//! each namespace's figures and the fairness: [`tenant_report`]).

mod ceiling;
pub mod churn;
mod config;
mod cpu;
pub mod fleet;
mod hold;
mod observe;
mod operator;
mod progress;
pub mod report;
mod rss;
mod scrape;
mod setup;
mod stats;
mod tenant_report;
pub mod tenants;

use std::time::{Duration, Instant};

pub use config::BindConfig;

use super::error::BenchError as Error;
use crate::apiserver::{ApiServer, ApiServerHandle, Config};
use observe::Observer;
use operator::{Operator, WorkDir};
use report::{BindReport, Measured};
use scrape::Counters;
use tenants::Tenants;

/// Runs the benchmark. Fails only if it cannot run (the API server, a create, the
/// operator fails); claims left unbound are a figure of the report.
pub async fn run(config: BindConfig) -> Result<BindReport, Error> {
    if config.namespaces == 0 || config.concurrency == 0 {
        return Err(Error::Failed(
            "namespaces and concurrency must be at least 1".into(),
        ));
    }
    if config.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(Error::Failed("--rate must be a positive number".into()));
    }
    if config.tenants == Tenants::Flood && config.namespaces < 2 {
        return Err(Error::Failed(
            "--tenants flood needs --namespaces 2 or more: the flood and a small tenant".into(),
        ));
    }
    let server = ApiServer::start(Config::default().watch_coalesce(config.watch_coalesce)).await?;
    // On SIGINT or SIGTERM the run is dropped, and with it the operator's guard, so that
    // no operator outlives the bench.
    let result = tokio::select! {
        result = run_on(&server, &config) => result,
        signalled = crate::runtime::signals::terminated() => Err(Error::Failed(match signalled {
            Ok(()) => "interrupted".into(),
            Err(e) => format!("cannot wait for signals: {e}"),
        })),
    };
    server.shutdown().await;
    result
}

/// The operator, and the instants the figures count from.
struct Started {
    operator: Operator,
    ready: Instant,
    clock_start: Instant,
    /// The operator's metrics when claims began to arrive (`--rate`; empty: none), and
    /// how long after readiness its startup writes took to stop.
    baseline: String,
    settle: Option<Duration>,
    /// The paced claim creator, with `--rate`.
    creator: progress::Task,
}

async fn run_on(server: &ApiServerHandle, config: &BindConfig) -> Result<BindReport, Error> {
    eprintln!(
        "bench bind: measuring the API server's write ceiling for {}s",
        config.ceiling.as_secs()
    );
    let ceiling = ceiling::measure(server, config.ceiling).await?;
    eprintln!("bench bind: write ceiling {ceiling:.0} updates/s");
    let client = server.try_client()?;
    crate::runtime::crds::install_crds(&client).await?;
    setup::namespaces(&client, config.namespaces).await?;
    setup::servers(&client, config.servers, config.mix).await?;
    setup::classes_and_quotas(&client, config.mix, config.schedule(), config.quota_scale).await?;
    let dir = WorkDir::create()?;
    server.write_kubeconfig(&dir.kubeconfig())?;
    let (on_bound, mut holder) = holder(&client, config);
    let observer = Observer::start(&client, config.claims, on_bound).await?;
    let mut started = match config.rate {
        None => batch(&client, config, &dir).await?,
        Some(rate) => paced(&client, config, &dir, rate).await?,
    };
    let cpu_before = cpu_at_start(config, started.operator.pid());
    let waited = progress::wait(
        &observer,
        &mut started.operator,
        &mut [&mut started.creator, &mut holder],
        config.claims,
        config.stall,
        started.ready.max(started.clock_start),
    )
    .await?;
    // Still creating after a stall cannot be (each create is progress); stop it anyway.
    // Claims are used only in the bind phase: the churn's waiting claims stay waiting.
    for task in [started.creator.take(), holder.take()]
        .into_iter()
        .flatten()
    {
        task.abort();
    }
    // The bind figures end here; the churn's writes are its own.
    let metrics = started.operator.metrics().await?;
    let cpu = cpu_since(cpu_before, started.operator.pid());
    let quota_bytes = setup::quota_status_bytes(&client).await?;
    let churned = match config.churn {
        Some(c) => {
            let fleet = (config.servers, config.claims);
            Some(churn::run(&client, &mut started.operator, &observer, fleet, c).await?)
        }
        None => None,
    };
    // The high-water mark must be read while the process lives.
    let memory = rss::read(started.operator.pid()).unwrap_or_default();
    let operator_started = started.operator.started;
    drop(started.operator);
    Ok(report::build(
        config,
        Measured {
            seen: observer.finish(),
            operator_started,
            operator_ready: started.ready,
            clock_start: started.clock_start,
            writes: scrape::api_writes(&metrics),
            baseline: scrape::api_writes(&started.baseline),
            counters: Counters::of(&metrics).since(&Counters::of(&started.baseline)),
            quota_bytes,
            settle: started.settle,
            peak_rss_kib: memory.hwm_kib.max(waited.peak_rss_kib),
            peak_anon_kib: memory.anon_kib.max(waited.peak_anon_kib),
            cpu,
            ceiling,
            churn: churned,
        },
    ))
}

/// CPU seconds so far, where the bind phase starts: all of a batch operator's life
/// counts (it starts with the clock), a paced one's from its first claim; this
/// process's (the API server, with the bench's own watch and creates) from here.
fn cpu_at_start(config: &BindConfig, operator: u32) -> report::CpuSeconds {
    report::CpuSeconds {
        operator: match config.rate {
            None => 0.0,
            Some(_) => cpu::seconds(operator).unwrap_or_default(),
        },
        apiserver: cpu::seconds(std::process::id()).unwrap_or_default(),
    }
}

/// CPU seconds of the bind phase, from its start's figures.
fn cpu_since(start: report::CpuSeconds, operator: u32) -> report::CpuSeconds {
    report::CpuSeconds {
        operator: cpu::seconds(operator).unwrap_or_default() - start.operator,
        apiserver: cpu::seconds(std::process::id()).unwrap_or_default() - start.apiserver,
    }
}

/// Every claim first, then the operator: time counts from its start.
async fn batch(
    client: &kube::Client,
    config: &BindConfig,
    dir: &WorkDir,
) -> Result<Started, Error> {
    if !config.fresh_servers {
        register_fleet(dir, config).await?;
    }
    setup::claims(client, config.mix, config.schedule()).await?;
    eprintln!("bench bind: starting the operator");
    let mut operator = Operator::spawn(dir, config.concurrency)?;
    let ready = operator.wait_ready().await?;
    Ok(Started {
        clock_start: operator.started,
        operator,
        ready,
        baseline: String::new(),
        settle: None,
        creator: None,
    })
}

/// Has a first operator write every server's first status (Available), then stops it:
/// the measured operator meets a registered fleet, as it would in a cluster.
async fn register_fleet(dir: &WorkDir, config: &BindConfig) -> Result<(), Error> {
    eprintln!("bench bind: registering the fleet (a first operator makes every server Available)");
    let mut operator = Operator::spawn(dir, config.concurrency)?;
    operator.wait_ready().await?;
    operator.settle().await?;
    Ok(())
}

/// With `--hold-ms`: the sender the claims watch reports binds to, and the task that
/// deletes each claim a hold time after it is Bound.
fn holder(
    client: &kube::Client,
    config: &BindConfig,
) -> (Option<observe::BoundSender>, progress::Task) {
    let Some(hold) = config.hold else {
        return (None, None);
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(hold::run(client.clone(), config.schedule(), hold, rx));
    (Some(tx), Some(task))
}

/// The operator first, ready and settled (done with the first status of every fresh
/// server), then claims at `rate`: time counts from the first claim, and the writes the
/// operator made before it are not counted per bind.
async fn paced(
    client: &kube::Client,
    config: &BindConfig,
    dir: &WorkDir,
    rate: f64,
) -> Result<Started, Error> {
    eprintln!("bench bind: starting the operator");
    let mut operator = Operator::spawn(dir, config.concurrency)?;
    let ready = operator.wait_ready().await?;
    let (baseline, settled) = operator.settle().await?;
    let settle = Some(settled.saturating_duration_since(ready));
    eprintln!("bench bind: creating {} claims at {rate}/s", config.claims);
    let clock_start = Instant::now();
    let (client, mix, schedule) = (client.clone(), config.mix, config.schedule());
    let creator = tokio::spawn(async move {
        setup::paced_claims(&client, mix, schedule, rate, clock_start).await
    });
    Ok(Started {
        operator,
        ready,
        clock_start,
        baseline,
        settle,
        creator: Some(creator),
    })
}
