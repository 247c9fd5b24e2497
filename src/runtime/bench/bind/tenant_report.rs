//! The figures of `--tenants flood`: each namespace's claims, binds and waits, and how
//! fairly the servers went round while they were scarce.
//!
//! Definitions (docs/performance.md, "Fairness under a flood", says the same):
//! - a claim's *wait*: Bound seen − max(created seen, operator ready), as the bind
//!   latency; with `--rate` the operator is ready first, so this is creation to Bound.
//! - the *scarce phase*: from the first claim to the flood's last bind (to the last bind
//!   of all, if a flood claim never bound). Throughout it the flood has a claim waiting,
//!   so every server that frees is wanted, and goes to the claim the fair order puts
//!   first.
//! - a namespace's *binds*: its claims seen Bound in the phase; its *demand*: its
//!   claims seen created in it.
//! - its *fair share*: the phase is cut into [`WINDOW`]s; each window's binds are split
//!   max-min fairly ([`stats::max_min_shares`]) over the namespaces' claims waiting in
//!   it (created before it ended, not bound before it began): a namespace that asks for
//!   less than an even split gets all it asks for, and the others split what is left
//!   evenly. Its fair share is the sum over the windows.
//! - *Jain's index* of x = binds ÷ fair share over the namespaces with a share:
//!   `(Σx)² / (n·Σx²)`, 1.0 exactly when every namespace got its fair share, 1/n when
//!   one got every bind.
//! - the *small tenants' wait*: p50 and p99 over the claims of every namespace but the
//!   flood that were created in the scarce phase and bound.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::fleet;
use super::observe::Seen;
use super::stats;
use super::tenants::Schedule;

/// One namespace's figures.
#[derive(Debug, Clone, Serialize)]
pub struct NamespaceFigures {
    pub namespace: String,
    pub flood: bool,
    /// Claims seen created, and seen Bound.
    pub created: usize,
    pub bound: usize,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    /// In the scarce phase: claims created, claims bound, and the max-min fair share of
    /// the phase's binds.
    pub scarce_demand: usize,
    pub scarce_binds: usize,
    pub fair_share: f64,
}

/// The tenants' figures of a run.
#[derive(Debug, Clone, Serialize)]
pub struct TenantReport {
    pub namespaces: Vec<NamespaceFigures>,
    /// From the clock's start (the first claim, with `--rate`) to the phase's end.
    pub scarce_phase_secs: f64,
    pub scarce_binds: usize,
    /// The windows whose binds are shared.
    pub window_secs: f64,
    /// Jain's index of binds ÷ fair share; none if nothing was bound.
    pub jain_index: Option<f64>,
    /// The small tenants' claims created in the scarce phase, and their waits.
    pub small_claims: usize,
    pub small_wait_p50_ms: f64,
    pub small_wait_p99_ms: f64,
}

/// The windows the scarce phase is cut into. In each, that window's binds are split
/// max-min fairly over the namespaces' claims waiting in it. Long enough to hold many
/// binds, so that a tenant whose claims are served as they come counts as getting all
/// it asked for; short against the phase, so that a tenant kept waiting while others
/// are served shows it: its waiting claims ask again in every window they wait.
pub const WINDOW: Duration = Duration::from_secs(1);

/// What one namespace counted, before the percentiles.
#[derive(Clone, Default)]
struct Tally {
    created: usize,
    waits: Vec<f64>,
    demand: usize,
}

/// The scarce phase, cut into windows from `start`.
struct Phase {
    start: Instant,
    end: Instant,
    window: Duration,
}

impl Phase {
    /// The window `at` falls in (the first, if before the start).
    fn index(&self, at: Instant) -> usize {
        (at.saturating_duration_since(self.start).as_nanos() / self.window.as_nanos().max(1))
            as usize
    }

    fn windows(&self) -> usize {
        self.index(self.end) + 1
    }
}

/// The figures of what `seen` saw of the claims `schedule` created; `ready` is the
/// operator's readiness, `start` where the clock starts, and `window` the length of
/// the windows whose binds are shared ([`WINDOW`]).
pub fn build(
    schedule: &Schedule,
    seen: &Seen,
    (ready, start): (Instant, Instant),
    window: Duration,
) -> TenantReport {
    let end = scarce_end(schedule, seen);
    let in_phase = |at: Option<Instant>| at.zip(end).is_some_and(|(at, end)| at <= end);
    let mut tallies = vec![Tally::default(); schedule.namespaces];
    let (mut small_claims, mut small_waits) = (0, Vec::new());
    for j in 0..schedule.claims.min(seen.added.len()) {
        let k = schedule.namespace(j);
        let (t, wait) = (&mut tallies[k], seen.wait_ms(j, ready));
        t.created += usize::from(seen.added[j].is_some());
        t.waits.extend(wait);
        if in_phase(seen.added[j]) {
            t.demand += 1;
            if !schedule.is_flood(k) {
                small_claims += 1;
                small_waits.extend(wait);
            }
        }
    }
    let phase = end.map(|end| Phase { start, end, window });
    let (binds, shares) = match &phase {
        Some(phase) => fair_shares(schedule, seen, phase),
        None => (vec![0; schedule.namespaces], vec![0.0; schedule.namespaces]),
    };
    let xs: Vec<f64> = (binds.iter().zip(&shares))
        .filter(|(_, share)| **share > 0.0)
        .map(|(&b, share)| b as f64 / share)
        .collect();
    let small = sorted(small_waits);
    TenantReport {
        scarce_phase_secs: end.map_or(0.0, |e| e.saturating_duration_since(start).as_secs_f64()),
        scarce_binds: binds.iter().sum(),
        window_secs: window.as_secs_f64(),
        jain_index: stats::jain(&xs),
        namespaces: (tallies
            .into_iter()
            .zip(binds.into_iter().zip(shares))
            .enumerate())
        .map(|(k, (t, share))| figures(schedule, k, t, share))
        .collect(),
        small_claims,
        small_wait_p50_ms: stats::percentile(&small, 0.50),
        small_wait_p99_ms: stats::percentile(&small, 0.99),
    }
}

/// Per namespace, its binds in the phase and its fair share of them: window by window,
/// the window's binds split max-min over the claims waiting in it (created before it
/// ended, not bound before it began), summed.
fn fair_shares(schedule: &Schedule, seen: &Seen, phase: &Phase) -> (Vec<usize>, Vec<f64>) {
    let (n, windows) = (schedule.namespaces, phase.windows());
    // Per namespace and window: claims that start (+1) and stop (-1) waiting there, and
    // binds.
    let mut waiting = vec![vec![0i64; windows + 1]; n];
    let mut binds = vec![vec![0usize; windows]; n];
    for j in 0..schedule.claims.min(seen.added.len()) {
        let Some(added) = seen.added[j].filter(|&a| a <= phase.end) else {
            continue;
        };
        let k = schedule.namespace(j);
        let bound = seen.bound[j].filter(|&b| b <= phase.end);
        waiting[k][phase.index(added)] += 1;
        waiting[k][bound.map_or(windows - 1, |b| phase.index(b)) + 1] -= 1;
        if let Some(b) = bound {
            binds[k][phase.index(b)] += 1;
        }
    }
    let (mut total, mut fair) = (vec![0; n], vec![0.0; n]);
    let mut demand = vec![0i64; n];
    for w in 0..windows {
        for k in 0..n {
            demand[k] += waiting[k][w];
            total[k] += binds[k][w];
        }
        let asked: Vec<usize> = demand.iter().map(|&d| d.max(0) as usize).collect();
        let shared = (0..n).map(|k| binds[k][w]).sum();
        for (k, share) in stats::max_min_shares(&asked, shared)
            .into_iter()
            .enumerate()
        {
            fair[k] += share;
        }
    }
    (total, fair)
}

/// When the scarce phase ended: the flood's last bind, or the last bind of all if a
/// flood claim never bound (the flood was still waiting then); none if nothing bound.
fn scarce_end(schedule: &Schedule, seen: &Seen) -> Option<Instant> {
    // The flood's claims are the first indexes.
    let flood = &seen.bound[..schedule.flood_claims().min(seen.bound.len())];
    let binds = if flood.iter().all(Option::is_some) {
        flood
    } else {
        &seen.bound[..]
    };
    binds.iter().flatten().max().copied()
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_unstable_by(f64::total_cmp);
    values
}

fn figures(
    schedule: &Schedule,
    k: usize,
    t: Tally,
    (binds, fair_share): (usize, f64),
) -> NamespaceFigures {
    let waits = sorted(t.waits);
    NamespaceFigures {
        namespace: fleet::namespace_name(k),
        flood: schedule.is_flood(k),
        created: t.created,
        bound: waits.len(),
        wait_p50_ms: stats::percentile(&waits, 0.50),
        wait_p99_ms: stats::percentile(&waits, 0.99),
        scarce_demand: t.demand,
        scarce_binds: binds,
        fair_share,
    }
}

impl fmt::Display for TenantReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let jain = self
            .jain_index
            .map_or("n/a".to_owned(), |j| format!("{j:.3}"));
        writeln!(
            f,
            "scarce phase       {:.2} s (to the flood's last bind), {} binds; Jain's index {jain} (binds ÷ fair share, max-min per {} s window)",
            self.scarce_phase_secs, self.scarce_binds, self.window_secs
        )?;
        writeln!(
            f,
            "small tenants      wait p50 {:.1} ms, p99 {:.1} ms  ({} claims created in the scarce phase)",
            self.small_wait_p50_ms, self.small_wait_p99_ms, self.small_claims
        )?;
        write!(
            f,
            "  {:<18} {:>8} {:>8} {:>11} {:>11}   {:>8} {:>8} {:>10} {:>7}   (scarce phase: demand, binds, fair share, binds ÷ share)",
            "namespace",
            "created",
            "bound",
            "wait p50",
            "wait p99",
            "demand",
            "binds",
            "fair share",
            "x"
        )?;
        for n in &self.namespaces {
            let name = format!("{}{}", n.namespace, if n.flood { " (flood)" } else { "" });
            let x = if n.fair_share > 0.0 {
                format!("{:.2}", n.scarce_binds as f64 / n.fair_share)
            } else {
                "-".to_owned()
            };
            write!(
                f,
                "\n  {name:<18} {:>8} {:>8} {:>8.1} ms {:>8.1} ms   {:>8} {:>8} {:>10.1} {x:>7}",
                n.created,
                n.bound,
                n.wait_p50_ms,
                n.wait_p99_ms,
                n.scarce_demand,
                n.scarce_binds,
                n.fair_share
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bench::bind::tenants::Tenants;

    const MS: Duration = Duration::from_millis(1);

    /// Which waiting claim comes first (the least key), from its index, its creation
    /// and the time, in ms.
    type Order = fn(usize, u64, u64) -> (bool, u64, usize);

    /// 50 claims over 3 namespaces: 0..40 the flood's, created at 0; 40..50 two small
    /// tenants' in turn, one every 40 ms from 100 ms. One server frees every 10 ms from
    /// 10 ms and goes to the waiting claim `first` puts first. Returns what the watch
    /// would have seen, and time zero.
    fn run(first: Order) -> (Schedule, Seen, Instant) {
        let t0 = Instant::now();
        let schedule = Schedule::new(Tenants::Flood, 50, 3);
        let created: Vec<u64> = (0..50)
            .map(|j| {
                if j < 40 {
                    0
                } else {
                    100 + 40 * (j as u64 - 40)
                }
            })
            .collect();
        let mut bound = vec![None; 50];
        for t in (10..).step_by(10).take(50) {
            let waiting = (0..50).filter(|&j| created[j] <= t && bound[j].is_none());
            if let Some(j) = waiting.min_by_key(|&j| first(j, created[j], t)) {
                bound[j] = Some(t);
            }
        }
        let at = |ms: u64| t0 + MS * ms as u32;
        let seen = Seen {
            added: created.iter().map(|&c| Some(at(c))).collect(),
            bound: bound.iter().map(|b| b.map(at)).collect(),
            ..Seen::default()
        };
        (schedule, seen, t0)
    }

    /// The small tenants first, then the oldest: what a fair order does here.
    fn small_first(j: usize, created: u64, _: u64) -> (bool, u64, usize) {
        (j < 40, created, j)
    }

    /// The oldest first.
    fn oldest_first(j: usize, created: u64, _: u64) -> (bool, u64, usize) {
        (false, created, j)
    }

    /// The flood first until 400 ms, then the small tenants.
    fn small_late(j: usize, created: u64, t: u64) -> (bool, u64, usize) {
        ((j < 40) == (t >= 400), created, j)
    }

    #[test]
    fn the_small_tenants_served_as_they_come_is_fair() {
        let (schedule, seen, t0) = run(small_first);
        let r = build(&schedule, &seen, (t0, t0), 100 * MS);
        // Every claim binds by 500 ms, the flood's last; the small ones as they come.
        assert_eq!(r.scarce_binds, 50);
        assert!((r.scarce_phase_secs - 0.5).abs() < 1e-9, "{r:?}");
        assert_eq!(r.jain_index, Some(1.0), "{r:#?}");
        assert_eq!((r.small_claims, r.small_wait_p99_ms), (10, 0.0));
        let flood = &r.namespaces[0];
        assert!(flood.flood && flood.created == 40 && flood.scarce_binds == 40);
        assert_eq!(flood.fair_share, 40.0);
        assert_eq!(r.namespaces[1].fair_share, 5.0);
    }

    #[test]
    fn the_small_tenants_served_after_the_flood_is_not() {
        let (schedule, seen, t0) = run(oldest_first);
        let r = build(&schedule, &seen, (t0, t0), 100 * MS);
        // The flood has all 40 binds to 400 ms while the small claims wait from 100 ms:
        // Jain's index of (40/24.7, 0, 0) is 1/3.
        assert_eq!(r.scarce_binds, 40);
        let j = r.jain_index.unwrap();
        assert!((j - 1.0 / 3.0).abs() < 1e-9, "{r:#?}");
        let flood_share = r.namespaces[0].fair_share;
        assert!((flood_share - (9.0 + 7.0 + 5.0 + 10.0 / 3.0 + 1.0 / 3.0)).abs() < 1e-9);
        // The first small claim, created at 100 ms, binds at 410 ms.
        assert_eq!(r.small_wait_p99_ms, 310.0);
    }

    #[test]
    fn the_small_tenants_kept_waiting_is_not_though_they_are_served_in_the_end() {
        let (schedule, seen, t0) = run(small_late);
        let r = build(&schedule, &seen, (t0, t0), 100 * MS);
        // Every claim binds in the phase, the small ones from 400 ms: they waited while
        // the flood took every bind.
        assert_eq!(r.scarce_binds, 50);
        let j = r.jain_index.unwrap();
        assert!(j < 0.8, "{r:#?}");
        // The whole phase as one window hides it: each got all it asked for.
        let whole = build(&schedule, &seen, (t0, t0), 1000 * MS);
        assert_eq!(whole.jain_index, Some(1.0), "{whole:#?}");
    }

    #[test]
    fn a_flood_never_done_ends_the_phase_at_the_last_bind() {
        let (schedule, mut seen, t0) = run(small_first);
        seen.bound[39] = None;
        let r = build(&schedule, &seen, (t0, t0), 100 * MS);
        assert_eq!(r.scarce_binds, 49);
        assert!((r.scarce_phase_secs - 0.49).abs() < 1e-9, "{r:?}");
        assert_eq!(r.namespaces[0].bound, 39);
        let nothing = Seen {
            bound: vec![None; 50],
            ..seen
        };
        let r = build(&schedule, &nothing, (t0, t0), 100 * MS);
        assert_eq!((r.jain_index, r.scarce_binds), (None, 0));
    }

    #[test]
    fn prints_a_line_per_namespace_and_the_index() {
        let (schedule, seen, t0) = run(small_first);
        let text = build(&schedule, &seen, (t0, t0), 100 * MS).to_string();
        assert!(text.contains("Jain's index 1.000"), "{text}");
        assert!(text.contains("\n  tenant-0 (flood) "), "{text}");
        for k in 1..3 {
            assert!(text.contains(&format!("\n  tenant-{k} ")), "{text}");
        }
    }
}
