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
//! - a namespace's *demand* in the phase: its claims seen created before the phase
//!   ended; its *binds*: its claims seen Bound before it ended.
//! - its *fair share*: the phase's binds split max-min fairly over the demands
//!   ([`stats::max_min_shares`]): a namespace that asked for less than an even split gets
//!   all it asked for, and the others split what is left evenly.
//! - *Jain's index* of x = binds ÷ fair share over the namespaces with demand: 1.0
//!   exactly when every namespace got its max-min fair share, 1/n when one got it all.
//! - the *small tenants' wait*: p50 and p99 over the claims of every namespace but the
//!   flood that were created in the scarce phase and bound.

use std::fmt;
use std::time::Instant;

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
    /// Jain's index of binds ÷ fair share; none if nothing was bound.
    pub jain_index: Option<f64>,
    /// The small tenants' claims created in the scarce phase, and their waits.
    pub small_claims: usize,
    pub small_wait_p50_ms: f64,
    pub small_wait_p99_ms: f64,
}

/// What one namespace counted, before the percentiles and the shares.
#[derive(Clone, Default)]
struct Tally {
    created: usize,
    waits: Vec<f64>,
    demand: usize,
    binds: usize,
}

/// The figures of what `seen` saw of the claims `schedule` created; `ready` is the
/// operator's readiness and `start` where the clock starts.
pub fn build(schedule: &Schedule, seen: &Seen, ready: Instant, start: Instant) -> TenantReport {
    let end = scarce_end(schedule, seen);
    let in_phase = |at: Option<Instant>| at.zip(end).is_some_and(|(at, end)| at <= end);
    let mut tallies = vec![Tally::default(); schedule.namespaces];
    let (mut small_claims, mut small_waits) = (0, Vec::new());
    for j in 0..schedule.claims.min(seen.added.len()) {
        let k = schedule.namespace(j);
        let (t, wait) = (&mut tallies[k], seen.wait_ms(j, ready));
        t.created += usize::from(seen.added[j].is_some());
        t.waits.extend(wait);
        t.binds += usize::from(in_phase(seen.bound[j]));
        if in_phase(seen.added[j]) {
            t.demand += 1;
            if !schedule.is_flood(k) {
                small_claims += 1;
                small_waits.extend(wait);
            }
        }
    }
    let demands: Vec<usize> = tallies.iter().map(|t| t.demand).collect();
    let scarce_binds = tallies.iter().map(|t| t.binds).sum();
    let shares = stats::max_min_shares(&demands, scarce_binds);
    let xs: Vec<f64> = (tallies.iter().zip(&shares))
        .filter(|(_, share)| **share > 0.0)
        .map(|(t, share)| t.binds as f64 / share)
        .collect();
    let small = sorted(small_waits);
    TenantReport {
        namespaces: (tallies.into_iter().zip(shares).enumerate())
            .map(|(k, (t, share))| figures(schedule, k, t, share))
            .collect(),
        scarce_phase_secs: end.map_or(0.0, |e| e.saturating_duration_since(start).as_secs_f64()),
        scarce_binds,
        jain_index: stats::jain(&xs),
        small_claims,
        small_wait_p50_ms: stats::percentile(&small, 0.50),
        small_wait_p99_ms: stats::percentile(&small, 0.99),
    }
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

fn figures(schedule: &Schedule, k: usize, t: Tally, fair_share: f64) -> NamespaceFigures {
    let waits = sorted(t.waits);
    NamespaceFigures {
        namespace: fleet::namespace_name(k),
        flood: schedule.is_flood(k),
        created: t.created,
        bound: waits.len(),
        wait_p50_ms: stats::percentile(&waits, 0.50),
        wait_p99_ms: stats::percentile(&waits, 0.99),
        scarce_demand: t.demand,
        scarce_binds: t.binds,
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
            "scarce phase       {:.2} s (to the flood's last bind), {} binds; Jain's index {jain} (over binds ÷ max-min fair share)",
            self.scarce_phase_secs, self.scarce_binds
        )?;
        writeln!(
            f,
            "small tenants      wait p50 {:.1} ms, p99 {:.1} ms  ({} claims created in the scarce phase)",
            self.small_wait_p50_ms, self.small_wait_p99_ms, self.small_claims
        )?;
        write!(
            f,
            "  {:<18} {:>8} {:>8} {:>11} {:>11}   {:>8} {:>8} {:>10}   (scarce phase: demand, binds, fair share)",
            "namespace",
            "created",
            "bound",
            "wait p50",
            "wait p99",
            "demand",
            "binds",
            "fair share"
        )?;
        for n in &self.namespaces {
            let name = format!("{}{}", n.namespace, if n.flood { " (flood)" } else { "" });
            write!(
                f,
                "\n  {name:<18} {:>8} {:>8} {:>8.1} ms {:>8.1} ms   {:>8} {:>8} {:>10.1}",
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
    use std::time::Duration;

    use super::*;
    use crate::runtime::bench::bind::tenants::Tenants;

    /// Ten claims: 0..8 the flood's, created at 0; 8 and 9 one small tenant's each,
    /// created at 100 ms. `bound` gives each claim's bind time in ms.
    fn seen(bound: [Option<u64>; 10]) -> (Schedule, Seen, Instant) {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let schedule = Schedule::new(Tenants::Flood, 10, 3);
        let seen = Seen {
            added: (0..10)
                .map(|j| Some(at(if j < 8 { 0 } else { 100 })))
                .collect(),
            bound: bound.iter().map(|b| b.map(at)).collect(),
            ..Seen::default()
        };
        (schedule, seen, t0)
    }

    #[test]
    fn the_small_tenants_served_first_is_fair() {
        // Two servers, each used 100 ms: the small claims take the first ones to free.
        let ms = [10, 10, 200, 210, 300, 310, 400, 410, 110, 120].map(Some);
        let (schedule, seen, t0) = seen(ms);
        let r = build(&schedule, &seen, t0, t0);
        assert_eq!(r.scarce_binds, 10);
        assert!((r.scarce_phase_secs - 0.41).abs() < 1e-9, "{r:?}");
        assert_eq!(r.jain_index, Some(1.0));
        let flood = &r.namespaces[0];
        assert!(flood.flood && flood.created == 8 && flood.scarce_binds == 8);
        assert_eq!((flood.wait_p50_ms, flood.wait_p99_ms), (210.0, 410.0));
        assert_eq!(
            (r.small_claims, r.small_wait_p50_ms, r.small_wait_p99_ms),
            (2, 10.0, 20.0)
        );
        assert_eq!(r.namespaces[2].fair_share, 1.0);
    }

    #[test]
    fn the_small_tenants_served_after_the_flood_is_not() {
        // First come, first served: the small claims bind after the flood's last.
        let ms = [10, 10, 100, 110, 200, 210, 300, 310, 400, 410].map(Some);
        let (schedule, seen, t0) = seen(ms);
        let r = build(&schedule, &seen, t0, t0);
        // The phase ends at 310 ms: the flood's 8 binds, where max-min gives it 6 and
        // each small tenant its 1. x = (8/6, 0, 0): Jain's index 1/3.
        assert_eq!(r.scarce_binds, 8);
        assert_eq!(r.namespaces[0].fair_share, 6.0);
        let j = r.jain_index.unwrap();
        assert!((j - 1.0 / 3.0).abs() < 1e-9, "{j}");
        assert_eq!(r.small_wait_p99_ms, 310.0);
    }

    #[test]
    fn a_flood_never_done_ends_the_phase_at_the_last_bind() {
        let mut ms = [10, 10, 200, 210, 300, 310, 400, 410, 110, 120].map(Some);
        ms[7] = None;
        let (schedule, seen, t0) = seen(ms);
        let r = build(&schedule, &seen, t0, t0);
        assert_eq!(r.scarce_binds, 9);
        assert!((r.scarce_phase_secs - 0.40).abs() < 1e-9, "{r:?}");
        assert_eq!(r.namespaces[0].bound, 7);
        let nothing = build(
            &schedule,
            &Seen {
                bound: vec![None; 10],
                ..seen
            },
            t0,
            t0,
        );
        assert_eq!((nothing.jain_index, nothing.scarce_binds), (None, 0));
    }

    #[test]
    fn prints_a_line_per_namespace_and_the_index() {
        let ms = [10, 10, 200, 210, 300, 310, 400, 410, 110, 120].map(Some);
        let (schedule, seen, t0) = seen(ms);
        let text = build(&schedule, &seen, t0, t0).to_string();
        assert!(text.contains("Jain's index 1.000"), "{text}");
        assert!(text.contains("\n  tenant-0 (flood) "), "{text}");
        for k in 1..3 {
            assert!(text.contains(&format!("\n  tenant-{k} ")), "{text}");
        }
    }
}
