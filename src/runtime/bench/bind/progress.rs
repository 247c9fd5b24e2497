//! Waiting for the binds: every 200 ms the operator's RSS is sampled and the watch's
//! counts are read; every second a progress line goes to stderr. The wait ends when
//! every claim is Bound or waits refused by a quota (`QuotaExceeded`), or when nothing
//! happened (no claim created, bound or refused) for the stall timeout, or with an error if the operator dies, a paced create or a `--hold-ms`
//! delete fails.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::super::error::BenchError as Error;
use super::observe::Observer;
use super::operator::Operator;
use super::rss;

const SAMPLE_EVERY: Duration = Duration::from_millis(200);
const LINE_EVERY: Duration = Duration::from_secs(1);

/// What a wait ends with (whether it stalled shows in the claims left unbound).
#[derive(Debug, Clone, Copy)]
pub struct Waited {
    /// The highest VmRSS sampled, in KiB (VmHWM, read at the end, is the true peak).
    pub peak_rss_kib: u64,
    /// The highest RssAnon sampled, in KiB (the kernel keeps no peak of it).
    pub peak_anon_kib: u64,
}

/// A task beside the operator (the paced claim creator, the holder), if one runs;
/// taken once it has finished.
pub type Task = Option<JoinHandle<Result<(), Error>>>;

/// Waits until `claims` are Bound or refused by a quota, or `stall` passes without a
/// change; `since` is when
/// the stall clock starts at the latest (the operator's readiness, as it cannot bind
/// before; with `--rate`, the first claim).
pub async fn wait(
    observer: &Observer,
    operator: &mut Operator,
    tasks: &mut [&mut Task],
    claims: usize,
    stall: Duration,
    since: Instant,
) -> Result<Waited, Error> {
    let mut waited = Waited {
        peak_rss_kib: 0,
        peak_anon_kib: 0,
    };
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    let (mut last_line, mut bound_at_line) = (Instant::now(), 0);
    loop {
        tick.tick().await;
        operator.check_alive()?;
        for task in tasks.iter_mut() {
            check(task).await?;
        }
        let memory = rss::read(operator.pid()).unwrap_or_default();
        let rss = memory.rss_kib;
        waited.peak_rss_kib = waited.peak_rss_kib.max(rss);
        waited.peak_anon_kib = waited.peak_anon_kib.max(memory.anon_kib);
        let counts = observer.counts();
        let (bound, refused) = (counts.bound, counts.refused);
        if bound + refused >= claims {
            return Ok(waited);
        }
        let quiet_since = counts.last_change.map_or(since, |t| t.max(since));
        if quiet_since.elapsed() >= stall {
            eprintln!(
                "bench bind: nothing happened for {}s; stopping with {} of {claims} claims neither Bound nor refused by a quota",
                stall.as_secs(),
                claims - bound - refused
            );
            return Ok(waited);
        }
        if last_line.elapsed() >= LINE_EVERY {
            let rate = (bound - bound_at_line) as f64 / last_line.elapsed().as_secs_f64();
            let refused = match refused {
                0 => String::new(),
                n => format!(", {n} refused by quota"),
            };
            eprintln!(
                "bench bind: {bound}/{claims} Bound ({} created{refused}), {rate:.0} binds/s, operator RSS {:.0} MiB",
                counts.added,
                rss as f64 / 1024.0
            );
            (last_line, bound_at_line) = (Instant::now(), bound);
        }
    }
}

/// The task's error, if it has failed.
async fn check(task: &mut Task) -> Result<(), Error> {
    if task.as_ref().is_some_and(JoinHandle::is_finished)
        && let Some(done) = task.take()
    {
        done.await
            .map_err(|e| Error::Failed(format!("a task of the bench: {e}")))??;
    }
    Ok(())
}
