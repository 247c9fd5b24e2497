//! A load generator for the embedded API server (`server-binder bench apiserver`).
//!
//! It starts a server in-process on loopback, installs a small cluster-scoped CRD with a
//! status subresource (`probes.bench.binder.dev`, built here), opens `watchers` watches
//! on it with `kube::Api::watch`, then, with `writers` concurrent tasks over real HTTP:
//!
//! 1. creates the first `checkpoint` objects, and updates them for a short while;
//! 2. creates the rest up to `objects`, and updates them for `duration`.
//!
//! Updates are merge patches, alternately of `spec` and of the `status` subresource,
//! each changing a counter so that every one is a real write. Every watcher counts the
//! events it receives and checks them against the writes (count, order and a fingerprint
//! of their resourceVersions). The clients run in the same process as the server, so the
//! figures include the cost of `watchers` + `writers` kube clients encoding and decoding JSON.
//!
//! Everything is bounded in count and time, stays on loopback and stops by itself.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::BenchError as Error;
use crate::apiserver::{ApiServer, ApiServerHandle, Config};

/// The benchmark's kind: small, cluster-scoped, with a status subresource.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bench.binder.dev",
    version = "v1",
    kind = "Probe",
    status = "ProbeStatus",
    doc = "An object the API server benchmark writes and watches."
)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSpec {
    /// Bumped by every spec update.
    pub seq: u64,
    /// Some bytes, so that objects are not trivially small.
    pub payload: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeStatus {
    /// Bumped by every status update.
    pub seq: u64,
    pub phase: String,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Objects created (and then updated).
    pub objects: usize,
    /// Concurrent writer tasks.
    pub writers: usize,
    /// Concurrent watches, each counting every event.
    pub watchers: usize,
    /// How long the objects are updated once all exist.
    pub duration: Duration,
    /// The smaller store size at which write rates are also measured (at most half of
    /// `objects`).
    pub checkpoint: usize,
    /// How long watchers may take to catch up after the last write.
    pub drain_timeout: Duration,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            objects: 5000,
            writers: 4,
            watchers: 200,
            duration: Duration::from_secs(10),
            checkpoint: 1000,
            drain_timeout: Duration::from_secs(60),
        }
    }
}

/// Writes of one kind: how many, how long, and their latencies.
#[derive(Debug, Clone, Default)]
pub struct WriteFigures {
    pub writes: u64,
    pub elapsed: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl WriteFigures {
    pub fn per_sec(&self) -> f64 {
        rate(self.writes, self.elapsed)
    }
}

/// Write rates with the store at one size.
#[derive(Debug, Clone)]
pub struct AtSize {
    pub store_size: usize,
    /// Creates per second over the last creates that brought the store to this size.
    pub create_per_sec: f64,
    pub update_per_sec: f64,
}

/// What one watcher saw.
#[derive(Debug, Clone, Default)]
pub struct WatcherFigures {
    pub added: u64,
    pub modified: u64,
    pub other: u64,
    /// Events not in strictly increasing resourceVersion order.
    pub out_of_order: u64,
    pub fingerprint: u64,
    pub last_rv: u64,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

impl WatcherFigures {
    pub fn events(&self) -> u64 {
        self.added + self.modified + self.other
    }
}

/// The figures of one run.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub config: BenchConfig,
    pub create: WriteFigures,
    pub update: WriteFigures,
    pub by_size: Vec<AtSize>,
    pub watchers: Vec<WatcherFigures>,
    /// From the first write until the last watcher had seen the last write.
    pub watch_elapsed: Duration,
    /// From the last write until every watcher had seen it.
    pub catch_up: Duration,
    /// Objects in the collection at the end (listed).
    pub store_size: usize,
    pub final_rv: u64,
    expected: Expected,
}

/// What every watcher must have seen.
#[derive(Debug, Clone, Copy, Default)]
struct Expected {
    added: u64,
    modified: u64,
    fingerprint: u64,
    last_rv: u64,
}

impl BenchReport {
    pub fn events_delivered(&self) -> u64 {
        self.watchers.iter().map(WatcherFigures::events).sum()
    }

    pub fn events_expected_per_watcher(&self) -> u64 {
        self.expected.added + self.expected.modified
    }

    /// Did this watcher see exactly every write, in order?
    pub fn watcher_complete(&self, w: &WatcherFigures) -> bool {
        w.error.is_none()
            && w.out_of_order == 0
            && w.other == 0
            && w.added == self.expected.added
            && w.modified == self.expected.modified
            && w.fingerprint == self.expected.fingerprint
            && w.last_rv == self.expected.last_rv
    }

    pub fn complete_watchers(&self) -> usize {
        self.watchers
            .iter()
            .filter(|w| self.watcher_complete(w))
            .count()
    }

    /// Every watcher saw every write, and the store holds every object.
    pub fn all_seen(&self) -> bool {
        self.complete_watchers() == self.watchers.len() && self.store_size == self.config.objects
    }
}

fn rate(n: u64, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        writeln!(
            f,
            "apiserver bench: {} objects, {} writers, {} watchers, {}s of updates; {} CPUs, {} build",
            c.objects,
            c.writers,
            c.watchers,
            c.duration.as_secs_f64(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            if cfg!(debug_assertions) {
                "DEBUG (figures meaningless; use --release)"
            } else {
                "release"
            },
        )?;
        writeln!(
            f,
            "  (server and all clients share this process: the figures include the clients' work)"
        )?;
        self.fmt_writes(f)?;
        self.fmt_watchers(f)?;
        write!(
            f,
            "store: {} objects (expected {}), resourceVersion {}",
            self.store_size, c.objects, self.final_rv
        )
    }
}

impl BenchReport {
    fn fmt_writes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, w) in [("create", &self.create), ("update", &self.update)] {
            writeln!(
                f,
                "{what}: {:>8} writes in {:>7.2}s = {:>7.0} writes/s   latency p50 {}  p99 {}  max {}",
                w.writes,
                w.elapsed.as_secs_f64(),
                w.per_sec(),
                ms(w.p50),
                ms(w.p99),
                ms(w.max),
            )?;
        }
        writeln!(f, "write rate by store size:")?;
        for s in &self.by_size {
            writeln!(
                f,
                "  {:>8} objects: create {:>7.0} writes/s   update {:>7.0} writes/s",
                s.store_size, s.create_per_sec, s.update_per_sec
            )?;
        }
        Ok(())
    }

    fn fmt_watchers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let delivered = self.events_delivered();
        writeln!(
            f,
            "watch: {} events delivered ({} per watcher expected) in {:.2}s = {:.0} events/s; caught up {} after the last write",
            delivered,
            self.events_expected_per_watcher(),
            self.watch_elapsed.as_secs_f64(),
            rate(delivered, self.watch_elapsed),
            ms(self.catch_up),
        )?;
        let complete = self.complete_watchers();
        writeln!(
            f,
            "every watcher saw every write: {} ({complete}/{} watchers complete)",
            if complete == self.watchers.len() {
                "yes"
            } else {
                "NO"
            },
            self.watchers.len(),
        )?;
        for (i, w) in self.watchers.iter().enumerate() {
            if !self.watcher_complete(w) {
                writeln!(
                    f,
                    "  watcher {i}: {} added, {} modified, {} other, {} out of order, last rv {}{}",
                    w.added,
                    w.modified,
                    w.other,
                    w.out_of_order,
                    w.last_rv,
                    w.error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default(),
                )?;
            }
        }
        Ok(())
    }
}

fn fail(what: &str, e: impl fmt::Display) -> Error {
    Error::Failed(format!("{what}: {e}"))
}

/// A resourceVersion's contribution to a fingerprint (order-independent: summed).
fn mix(rv: u64) -> u64 {
    // splitmix64's finaliser: different sets of resourceVersions collide only by chance.
    let mut z = rv.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn rv_of(p: &Probe) -> Result<u64, Error> {
    let rv = p.metadata.resource_version.as_deref().unwrap_or("");
    rv.parse()
        .map_err(|_| fail("a write returned no resourceVersion", format!("{rv:?}")))
}

fn probe_name(i: usize) -> String {
    format!("probe-{i:07}")
}

/// One completed write.
#[derive(Clone, Copy)]
struct Op {
    done: Instant,
    latency: Duration,
    rv: u64,
}

/// Runs `writers` tasks, writer `w` doing `job(i)` for its share of `range` (creates), or
/// until `until` round-robin over `0..range.end` (updates).
async fn run_writers(
    writers: usize,
    range: std::ops::Range<usize>,
    until: Option<Instant>,
    job: Job,
) -> Result<(Vec<Op>, Duration), Error> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let job = job.clone();
            let range = range.clone();
            tokio::spawn(async move {
                let mut ops = Vec::new();
                let mut i = range.start + w;
                loop {
                    match until {
                        None if i >= range.end => break,
                        Some(t) if Instant::now() >= t => break,
                        _ => {}
                    }
                    if i >= range.end {
                        i = w % range.end.max(1);
                    }
                    let t = Instant::now();
                    let p = job(i)
                        .await
                        .map_err(|e| fail(&format!("writing {}", probe_name(i)), e))?;
                    let done = Instant::now();
                    ops.push(Op {
                        done,
                        latency: done - t,
                        rv: rv_of(&p)?,
                    });
                    i += writers;
                }
                Ok::<_, Error>(ops)
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| fail("a writer task", e))??);
    }
    all.sort_by_key(|o| o.done);
    Ok((all, start.elapsed()))
}

/// Writes per second over the last `n` of `ops` (sorted by completion).
fn tail_rate(ops: &[Op], n: usize, phase_start: Instant) -> f64 {
    if ops.is_empty() {
        return 0.0;
    }
    let n = n.min(ops.len());
    let from = if n == ops.len() {
        phase_start
    } else {
        ops[ops.len() - n - 1].done
    };
    rate(n as u64, ops[ops.len() - 1].done - from)
}

fn figures(ops: &[&[Op]], elapsed: Duration) -> WriteFigures {
    let mut lat: Vec<Duration> = ops
        .iter()
        .flat_map(|o| o.iter().map(|o| o.latency))
        .collect();
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or_default()
    };
    WriteFigures {
        writes: lat.len() as u64,
        elapsed,
        p50: pct(0.50),
        p99: pct(0.99),
        max: lat.last().copied().unwrap_or_default(),
    }
}

type Events = futures::stream::BoxStream<'static, kube::Result<WatchEvent<Probe>>>;

/// Counts events until it has seen `target`'s resourceVersion or its deadline passes.
async fn watch_one(
    mut events: Events,
    mut target: watch::Receiver<Option<(u64, Instant)>>,
) -> WatcherFigures {
    let mut w = WatcherFigures::default();
    let mut goal: Option<(u64, Instant)> = None;
    // Made once, not once per event (each registers with a notifier all watchers share).
    let goal_set = async move { target.wait_for(Option::is_some).await.ok().and_then(|g| *g) };
    tokio::pin!(goal_set);
    let deadline = tokio::time::sleep(Duration::from_secs(24 * 3600));
    tokio::pin!(deadline);
    loop {
        if let Some((rv, _)) = goal
            && w.last_rv >= rv
        {
            return w;
        }
        tokio::select! {
            ev = events.next() => {
                let (probe, added) = match ev {
                    Some(Ok(WatchEvent::Added(p))) => (p, true),
                    Some(Ok(WatchEvent::Modified(p))) => (p, false),
                    Some(Ok(WatchEvent::Bookmark(_))) => continue,
                    Some(Ok(WatchEvent::Deleted(_))) => {
                        w.other += 1;
                        continue;
                    }
                    Some(Ok(WatchEvent::Error(s))) => {
                        w.error = Some(format!("watch error {}: {}", s.code, s.message));
                        return w;
                    }
                    Some(Err(e)) => {
                        w.error = Some(format!("watch failed: {e}"));
                        return w;
                    }
                    None => {
                        w.error = Some("the watch ended early".into());
                        return w;
                    }
                };
                let rv = probe
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                if rv <= w.last_rv {
                    w.out_of_order += 1;
                }
                w.last_rv = w.last_rv.max(rv);
                w.fingerprint = w.fingerprint.wrapping_add(mix(rv));
                if added {
                    w.added += 1;
                } else {
                    w.modified += 1;
                }
            }
            g = &mut goal_set, if goal.is_none() => match g {
                Some(g) => {
                    goal = Some(g);
                    deadline.as_mut().reset(g.1.into());
                }
                None => {
                    w.error = Some("the benchmark went away".into());
                    return w;
                }
            },
            () = &mut deadline, if goal.is_some() => {
                w.error = Some("did not catch up in time".into());
                return w;
            }
        }
    }
}

/// Runs the benchmark and returns its figures. Fails only if the benchmark itself
/// cannot run (a write fails, the server does not start); whether every watcher saw
/// every write is in the report ([`BenchReport::all_seen`]).
pub async fn run(config: BenchConfig) -> Result<BenchReport, Error> {
    validate(&config)?;
    // A generous bound on the whole run, so that it always stops by itself.
    let bound = Duration::from_secs(120)
        + config.duration * 2
        + config.drain_timeout
        + Duration::from_millis(20) * config.objects as u32;
    let server = ApiServer::start(Config::default()).await?;
    let result = tokio::time::timeout(bound, run_on(&server, config)).await;
    server.shutdown().await;
    result.map_err(|_| Error::Failed(format!("did not finish within {bound:?}")))?
}

fn validate(config: &BenchConfig) -> Result<(), Error> {
    if config.objects == 0 || config.writers == 0 {
        return Err(Error::Failed(
            "objects and writers must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Runs the benchmark on a server the caller started and stops (`bench bind` measures
/// its write ceiling this way, on the server it then loads). Installs the Probe CRD, so
/// it runs once per server; the probes stay. Unbounded in time: the caller bounds it.
pub async fn run_on(server: &ApiServerHandle, config: BenchConfig) -> Result<BenchReport, Error> {
    validate(&config)?;
    server.install_crd(&Probe::crd()).await?;
    let api: Api<Probe> = Api::all(server.try_client()?);
    let (target_tx, watchers) = open_watches(&api, config.watchers).await?;
    let first_write = Instant::now();
    let (phases, by_size) = write_phases(&api, &config).await?;
    let last_write = Instant::now();
    let expected = expected_events(&phases)?;
    // Watchers stop once they have seen the last write, or at the drain deadline.
    let _ = target_tx.send(Some((expected.last_rv, last_write + config.drain_timeout)));
    let mut seen = Vec::new();
    for w in watchers {
        seen.push(w.await.map_err(|e| fail("a watcher task", e))?);
    }
    let all_caught_up = Instant::now();

    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| fail("listing probes", e))?;
    let final_rv = list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok(BenchReport {
        create: Phase::figures(&phases, true),
        update: Phase::figures(&phases, false),
        by_size,
        watchers: seen,
        watch_elapsed: all_caught_up - first_write,
        catch_up: all_caught_up - last_write,
        store_size: list.items.len(),
        final_rv,
        expected,
        config,
    })
}

/// Where the watchers learn the last write's resourceVersion and their deadline.
type Target = watch::Sender<Option<(u64, Instant)>>;

/// Opens `n` watches from the current resourceVersion, each counted by a task of its
/// own. Every watch is open (subscribed, server side) before this returns.
async fn open_watches(
    api: &Api<Probe>,
    n: usize,
) -> Result<(Target, Vec<JoinHandle<WatcherFigures>>), Error> {
    let start_rv = api
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| fail("listing probes", e))?
        .metadata
        .resource_version
        .unwrap_or_default();
    let wp = WatchParams::default().timeout(290);
    let streams = futures::future::try_join_all((0..n).map(|_| api.watch(&wp, &start_rv)))
        .await
        .map_err(|e| fail("starting a watch", e))?;
    let (target_tx, target_rx) = watch::channel(None);
    let watchers = streams
        .into_iter()
        .map(|s| tokio::spawn(watch_one(s.boxed(), target_rx.clone())))
        .collect();
    Ok((target_tx, watchers))
}

/// One run of writers: its writes, how long it took, and whether they were creates.
struct Phase {
    ops: Vec<Op>,
    elapsed: Duration,
    creates: bool,
}

impl Phase {
    /// The figures of all creates (`creates`) or all updates.
    fn figures(phases: &[Phase], creates: bool) -> WriteFigures {
        let chosen: Vec<&Phase> = phases.iter().filter(|p| p.creates == creates).collect();
        let ops: Vec<&[Op]> = chosen.iter().map(|p| p.ops.as_slice()).collect();
        figures(&ops, chosen.iter().map(|p| p.elapsed).sum())
    }
}

/// Creates the first `checkpoint` objects and updates them briefly, then creates the
/// rest and updates them all for `duration`; measures the write rate at both sizes.
async fn write_phases(
    api: &Api<Probe>,
    config: &BenchConfig,
) -> Result<(Vec<Phase>, Vec<AtSize>), Error> {
    let (create, update) = (create_job(api), update_job(api));
    let checkpoint = config.checkpoint.min(config.objects / 2);
    let short = (config.duration / 4).min(Duration::from_secs(5));
    let mut sizes = vec![(checkpoint, short), (config.objects, config.duration)];
    if checkpoint == 0 {
        sizes.remove(0);
    }
    let (mut phases, mut by_size, mut created) = (Vec::new(), Vec::new(), 0);
    for (size, updating) in sizes {
        let t = Instant::now();
        let (c, ec) = run_writers(config.writers, created..size, None, create.clone()).await?;
        let until = Some(Instant::now() + updating);
        let (u, eu) = run_writers(config.writers, 0..size, until, update.clone()).await?;
        by_size.push(AtSize {
            store_size: size,
            create_per_sec: tail_rate(&c, 1000, t),
            update_per_sec: rate(u.len() as u64, eu),
        });
        phases.push(Phase {
            ops: c,
            elapsed: ec,
            creates: true,
        });
        phases.push(Phase {
            ops: u,
            elapsed: eu,
            creates: false,
        });
        created = size;
    }
    Ok((phases, by_size))
}

/// What every watcher must see: one event per write, ADDED for creates.
fn expected_events(phases: &[Phase]) -> Result<Expected, Error> {
    let mut rvs: Vec<u64> = phases
        .iter()
        .flat_map(|p| p.ops.iter().map(|o| o.rv))
        .collect();
    rvs.sort_unstable();
    rvs.dedup();
    if rvs.len() != phases.iter().map(|p| p.ops.len()).sum::<usize>() {
        return Err(Error::Failed(
            "two writes returned one resourceVersion (a write changed nothing)".into(),
        ));
    }
    let mut expected = Expected::default();
    for phase in phases {
        for o in &phase.ops {
            if phase.creates {
                expected.added += 1;
            } else {
                expected.modified += 1;
            }
            expected.fingerprint = expected.fingerprint.wrapping_add(mix(o.rv));
            expected.last_rv = expected.last_rv.max(o.rv);
        }
    }
    Ok(expected)
}

/// A write a writer task does for object `i`.
type Job = Arc<dyn Fn(usize) -> BoxFuture<'static, kube::Result<Probe>> + Send + Sync>;

/// Creates object `i`, with a small payload.
fn create_job(api: &Api<Probe>) -> Job {
    let api = api.clone();
    let payload = "x".repeat(128);
    Arc::new(move |i| {
        let api = api.clone();
        let spec = ProbeSpec {
            seq: 0,
            payload: payload.clone(),
        };
        let mut p = Probe::new(&probe_name(i), spec);
        p.metadata.labels = Some([("bench".to_owned(), "apiserver".to_owned())].into());
        Box::pin(async move { api.create(&PostParams::default(), &p).await })
    })
}

/// Updates object `i`: alternately a merge patch of its spec and of its status, each
/// changing a counter, so that every update is a real write.
fn update_job(api: &Api<Probe>) -> Job {
    let api = api.clone();
    // One sequence across all updates: every update changes its object.
    let seq = Arc::new(AtomicU64::new(0));
    Arc::new(move |i| {
        let api = api.clone();
        let n = seq.fetch_add(1, Ordering::Relaxed) + 1;
        Box::pin(async move {
            let name = probe_name(i);
            let pp = PatchParams::default();
            if n.is_multiple_of(2) {
                api.patch(&name, &pp, &Patch::Merge(json!({"spec": {"seq": n}})))
                    .await
            } else {
                let body = json!({"status": {"seq": n, "phase": "Busy"}});
                api.patch_status(&name, &pp, &Patch::Merge(body)).await
            }
        })
    })
}
