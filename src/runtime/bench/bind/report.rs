//! The figures of one `bench bind` run, computed from what was observed, printed as a
//! table for people or serialised as JSON for machines.
//!
//! Definitions:
//! - *time to all Bound*: from the operator's start (batch mode: claims exist first) or
//!   from the first claim's creation (`--rate`) to the last claim seen Bound; if some
//!   stayed unbound, to the last one that did bind.
//! - *time to all settled* (`--mix classes-quotas`): from the same start to the first
//!   moment every claim was seen Bound or waiting refused by a quota (`QuotaExceeded`).
//! - *binds/s*: claims Bound ÷ time to all Bound.
//! - *writes per bind*: `server_binder_api_writes_total` ÷ claims Bound, by resource and
//!   result; the total counts ok and conflict writes (both cost the API server a
//!   request), errors are reported apart. In batch mode this includes the operator's
//!   startup writes (the first status of every fresh server it does not bind first);
//!   with `--rate` those are made before the first claim and left out.
//! - *bind latency* of a claim: Bound seen − max(claim ADDED seen, operator ready), all
//!   on the bench's watch and clock. With `--rate` the operator is ready before any
//!   claim exists, so this is creation to Bound; in batch mode it is dominated by the
//!   claim's wait in the operator's queue.
//! - *RSS per cached object*: the operator's peak RSS (VmHWM) ÷ (servers + claims).
//!   Beside it the anonymous part (RssAnon: heap and stacks; the rest is the binary's
//!   pages, file-backed, some 15 MiB whatever the fleet), at its highest sample (every
//!   200 ms and at the end: the kernel keeps no peak of it), and the same per object.
//! - *efficiency*: binds/s ÷ (write ceiling ÷ 5), 5 being the protocol's writes per bind.
//!   A capacity figure in batch mode; with `--rate`, binds/s is at most the rate.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::churn::ChurnReport;
use super::config::BindConfig;
use super::fleet::{Mix, QuotaScale};
use super::observe::Seen;
use super::scrape::Counters;
use super::scrape::WriteSample;
use super::stats::percentile;
use super::tenant_report::{self, TenantReport};
use super::tenants::Tenants;

/// The protocol's floor: the writes one bind needs (docs/binding.md).
pub const FLOOR_WRITES_PER_BIND: f64 = 5.0;

/// Bind latencies in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BindReport {
    pub servers: usize,
    pub claims: usize,
    pub mix: Mix,
    pub quota_scale: QuotaScale,
    pub concurrency: u16,
    /// Claims per second, or none: all claims created before the operator started.
    pub rate: Option<f64>,
    pub namespaces: usize,
    pub tenants: Tenants,
    /// Each claim was deleted this long after it was seen Bound (`--hold-ms`).
    pub hold_ms: Option<u64>,
    /// Batch mode: the servers were never registered by an operator (`--fresh-servers`).
    pub fresh_servers: bool,
    /// The embedded API server's watch coalescing window (`--watch-coalesce-ms`).
    pub watch_coalesce_ms: u64,
    pub bound: usize,
    /// Claims neither Bound nor refused by a quota at the end.
    pub unbound: usize,
    /// Claims waiting `QuotaExceeded` at the end (`--mix classes-quotas`).
    pub refused_by_quota: usize,
    /// The operator's start to its first 200 on /readyz.
    pub operator_ready_secs: f64,
    /// With `--rate`: readiness to the operator's last startup write (the first claim
    /// comes a quiet second later).
    pub operator_settle_secs: Option<f64>,
    /// With `--rate`: the startup writes, not counted per bind.
    pub writes_before_claims: u64,
    pub time_to_all_bound_secs: f64,
    /// To every claim Bound or refused by a quota; none if that was never seen.
    pub time_to_all_settled_secs: Option<f64>,
    pub binds_per_sec: f64,
    /// Writes by resource and result, as counted by the operator.
    pub writes: BTreeMap<String, BTreeMap<String, u64>>,
    /// The same per bind.
    pub writes_per_bind_by_resource: BTreeMap<String, BTreeMap<String, f64>>,
    /// ok + conflict writes per bind.
    pub writes_per_bind: f64,
    pub conflicts_per_bind: f64,
    pub write_errors: u64,
    /// Reconciles per bind, by controller (claim, server).
    pub reconciles_per_bind: BTreeMap<String, f64>,
    /// Objects the operator's watches received per bind, by resource.
    pub received_per_bind: BTreeMap<String, f64>,
    /// The quotas' statuses at the end (`--mix classes-quotas`).
    pub quota_status_bytes: Option<QuotaStatusBytes>,
    pub latency_ms: Latency,
    /// CPU seconds of the bind phase: the operator process's, and this process's (the
    /// embedded API server, with the bench's own claims watch and creates).
    pub operator_cpu_secs: f64,
    pub apiserver_cpu_secs: f64,
    /// The same per bind, in ms.
    pub operator_cpu_ms_per_bind: f64,
    pub apiserver_cpu_ms_per_bind: f64,
    pub operator_peak_rss_mib: f64,
    pub rss_per_object_kib: f64,
    /// The anonymous part of the resident set at its highest sample, and per object.
    pub operator_peak_anon_mib: f64,
    pub anon_per_object_kib: f64,
    /// Updates per second the API server sustained in this run (`bench apiserver`'s
    /// update phase, 8 writers, 2 watchers).
    pub write_ceiling_per_sec: f64,
    pub efficiency: f64,
    /// Watch failures the claims watch retried (each can delay a bind's timing).
    pub watch_errors: u64,
    pub release_build: bool,
    /// With `--churn-secs`: what server churn cost while claims waited.
    pub churn: Option<ChurnReport>,
    /// With `--tenants flood`: each namespace's figures and the fairness.
    pub by_tenant: Option<TenantReport>,
}

/// The size of the quotas' statuses as JSON, at the end of a run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct QuotaStatusBytes {
    pub quotas: usize,
    pub largest: usize,
    pub total: usize,
}

/// What a run measured, for [`build`].
pub struct Measured {
    pub seen: Seen,
    pub operator_started: Instant,
    pub operator_ready: Instant,
    /// Where time to all Bound is counted from.
    pub clock_start: Instant,
    pub writes: Vec<WriteSample>,
    /// The write counters when the first claim was created (`--rate`), else none.
    pub baseline: Vec<WriteSample>,
    /// Reconciles and objects received in the bind phase.
    pub counters: Counters,
    pub quota_bytes: Option<QuotaStatusBytes>,
    pub settle: Option<Duration>,
    pub peak_rss_kib: u64,
    pub peak_anon_kib: u64,
    pub cpu: CpuSeconds,
    pub ceiling: f64,
    pub churn: Option<ChurnReport>,
}

/// CPU seconds of the bind phase, by process.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSeconds {
    pub operator: f64,
    /// The bench's own process: the embedded API server, and the bench's clients.
    pub apiserver: f64,
}

/// Binds per second over `elapsed` (0 over no time).
fn rate(bound: usize, elapsed: Duration) -> f64 {
    match elapsed.is_zero() {
        true => 0.0,
        false => bound as f64 / elapsed.as_secs_f64(),
    }
}

/// Counts per bind (over at least one bind), the zero ones left out.
fn per_bind_of(counts: &BTreeMap<String, f64>, bound: usize) -> BTreeMap<String, f64> {
    let bound = bound.max(1) as f64;
    counts
        .iter()
        .filter(|(_, n)| **n > 0.0)
        .map(|(k, n)| (k.clone(), n / bound))
        .collect()
}

/// Each claim's latency (see the module's definition), sorted, in ms.
fn latencies(seen: &Seen, ready: Instant) -> Vec<f64> {
    let mut ms: Vec<f64> = (0..seen.bound.len())
        .filter_map(|j| seen.wait_ms(j, ready))
        .collect();
    ms.sort_unstable_by(f64::total_cmp);
    ms
}

fn latency(seen: &Seen, ready: Instant) -> Latency {
    let ms = latencies(seen, ready);
    Latency {
        p50: percentile(&ms, 0.50),
        p90: percentile(&ms, 0.90),
        p99: percentile(&ms, 0.99),
        max: ms.last().copied().unwrap_or(0.0),
    }
}

/// Sums the samples by resource and result (over both controllers).
fn writes_by_resource(samples: &[WriteSample]) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut by: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for s in samples {
        *by.entry(s.resource.clone())
            .or_default()
            .entry(s.result.clone())
            .or_default() += s.value as u64;
    }
    by
}

/// `end` minus `start`, by resource and result.
fn writes_since(
    end: &[WriteSample],
    start: &[WriteSample],
) -> BTreeMap<String, BTreeMap<String, u64>> {
    let before = writes_by_resource(start);
    let mut writes = writes_by_resource(end);
    for (resource, by) in &mut writes {
        for (result, n) in by {
            let was = before.get(resource).and_then(|b| b.get(result));
            *n = n.saturating_sub(was.copied().unwrap_or(0));
        }
    }
    writes
}

fn total(writes: &BTreeMap<String, BTreeMap<String, u64>>, result: &str) -> u64 {
    writes.values().filter_map(|r| r.get(result)).sum()
}

/// The report of a run of `config` that measured `m`.
pub fn build(config: &BindConfig, m: Measured) -> BindReport {
    let (bound, refused) = (m.seen.bound_count, m.seen.refused_count);
    let last_bound = m.seen.bound.iter().flatten().max().copied();
    let elapsed = last_bound.map_or(Duration::ZERO, |t| {
        t.saturating_duration_since(m.clock_start)
    });
    let binds_per_sec = rate(bound, elapsed);
    // Per bind: over at least one, so that a run that bound nothing still prints.
    let per_bind = |n: u64| n as f64 / bound.max(1) as f64;
    let writes = writes_since(&m.writes, &m.baseline);
    let before = writes_by_resource(&m.baseline);
    let per_resource = writes
        .iter()
        .map(|(res, by)| {
            let by = by.iter().map(|(r, n)| (r.clone(), per_bind(*n))).collect();
            (res.clone(), by)
        })
        .collect();
    let objects = (config.servers + config.claims).max(1) as f64;
    BindReport {
        servers: config.servers,
        claims: config.claims,
        mix: config.mix,
        quota_scale: config.quota_scale,
        concurrency: config.concurrency,
        rate: config.rate,
        namespaces: config.namespaces,
        tenants: config.tenants,
        hold_ms: config.hold.map(|h| h.as_millis() as u64),
        fresh_servers: config.fresh_servers && config.rate.is_none(),
        watch_coalesce_ms: config.watch_coalesce.as_millis() as u64,
        bound,
        unbound: config.claims - (bound + refused).min(config.claims),
        refused_by_quota: refused,
        operator_ready_secs: (m.operator_ready - m.operator_started).as_secs_f64(),
        operator_settle_secs: m.settle.map(|d| d.as_secs_f64()),
        writes_before_claims: ["ok", "conflict", "error"]
            .iter()
            .map(|r| total(&before, r))
            .sum(),
        time_to_all_bound_secs: elapsed.as_secs_f64(),
        time_to_all_settled_secs: m
            .seen
            .settled
            .map(|t| t.saturating_duration_since(m.clock_start).as_secs_f64()),
        binds_per_sec,
        writes_per_bind: per_bind(total(&writes, "ok") + total(&writes, "conflict")),
        conflicts_per_bind: per_bind(total(&writes, "conflict")),
        write_errors: total(&writes, "error"),
        reconciles_per_bind: per_bind_of(&m.counters.reconciles, bound),
        received_per_bind: per_bind_of(&m.counters.received, bound),
        quota_status_bytes: m.quota_bytes,
        writes,
        writes_per_bind_by_resource: per_resource,
        latency_ms: latency(&m.seen, m.operator_ready),
        operator_cpu_secs: m.cpu.operator,
        apiserver_cpu_secs: m.cpu.apiserver,
        operator_cpu_ms_per_bind: ms_per_bind(m.cpu.operator, bound),
        apiserver_cpu_ms_per_bind: ms_per_bind(m.cpu.apiserver, bound),
        operator_peak_rss_mib: m.peak_rss_kib as f64 / 1024.0,
        rss_per_object_kib: m.peak_rss_kib as f64 / objects,
        operator_peak_anon_mib: m.peak_anon_kib as f64 / 1024.0,
        anon_per_object_kib: m.peak_anon_kib as f64 / objects,
        write_ceiling_per_sec: m.ceiling,
        efficiency: if m.ceiling > 0.0 {
            binds_per_sec / (m.ceiling / FLOOR_WRITES_PER_BIND)
        } else {
            0.0
        },
        watch_errors: m.seen.watch_errors,
        release_build: !cfg!(debug_assertions),
        by_tenant: (config.tenants == Tenants::Flood).then(|| {
            let schedule = config.schedule();
            let clock = (m.operator_ready, m.clock_start);
            tenant_report::build(&schedule, &m.seen, clock, tenant_report::WINDOW)
        }),
        churn: m.churn,
    }
}

impl fmt::Display for BindReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_header(f)?;
        self.fmt_writes(f)?;
        let l = &self.latency_ms;
        writeln!(
            f,
            "bind latency       p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms  (Bound seen − max(created, operator ready))",
            l.p50, l.p90, l.p99, l.max
        )?;
        if let Some(tenants) = &self.by_tenant {
            writeln!(f, "{tenants}")?;
        }
        writeln!(
            f,
            "CPU per bind       operator {:.2} ms, API server {:.2} ms  ({:.1} s and {:.1} s in all; the API server's with the bench's own watch and creates)",
            self.operator_cpu_ms_per_bind,
            self.apiserver_cpu_ms_per_bind,
            self.operator_cpu_secs,
            self.apiserver_cpu_secs
        )?;
        writeln!(
            f,
            "operator RSS       peak {:.1} MiB, {:.2} KiB per cached object ({} servers + claims); anonymous {:.1} MiB, {:.2} KiB per object",
            self.operator_peak_rss_mib,
            self.rss_per_object_kib,
            self.servers + self.claims,
            self.operator_peak_anon_mib,
            self.anon_per_object_kib
        )?;
        writeln!(
            f,
            "write ceiling      {:.0} updates/s (bench apiserver update phase, 8 writers, 2 watchers, same server)",
            self.write_ceiling_per_sec
        )?;
        write!(
            f,
            "efficiency         {:.2}  (binds/s ÷ (ceiling ÷ {FLOOR_WRITES_PER_BIND})){}",
            self.efficiency,
            if self.rate.is_some() {
                "; binds/s follows --rate here"
            } else {
                ""
            }
        )?;
        if let Some(c) = &self.churn {
            write!(
                f,
                "\nchurn              {} server changes in {:.0} s, {} → {} claims waiting: {} claim status writes, {:.2} per waiting claim per minute",
                c.server_changes,
                c.secs,
                c.pending_at_start,
                c.pending_at_end,
                c.claim_status_writes,
                c.status_writes_per_pending_claim_per_min
            )?;
        }
        Ok(())
    }
}

impl BindReport {
    /// How the claims were created, and where time counts from.
    fn mode(&self) -> (String, &'static str) {
        match self.rate {
            Some(r) if self.tenants == Tenants::Flood => (
                format!("the flood's claims at once, the others at {r}/s"),
                "first claim created",
            ),
            Some(r) => (format!("claims at {r}/s"), "first claim created"),
            None if self.fresh_servers => (
                "claims before operator, fresh servers".to_owned(),
                "operator start",
            ),
            None => (
                "claims before operator, fleet registered".to_owned(),
                "operator start",
            ),
        }
    }

    /// Who created the claims, and how long each was used.
    fn fmt_tenants(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tenants == Tenants::Flood {
            let small = match self.namespaces {
                ..=2 => "tenant-1 has".to_owned(),
                n => format!("tenant-1..tenant-{} share", n - 1),
            };
            writeln!(
                f,
                "tenants            flood: tenant-0 has 4 in 5 claims; {small} the rest, round-robin"
            )?;
        }
        if let Some(hold) = self.hold_ms {
            writeln!(
                f,
                "hold               each claim deleted {hold} ms after it is seen Bound (its server then freed)"
            )?;
        }
        Ok(())
    }

    fn fmt_header(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mode, from) = self.mode();
        writeln!(
            f,
            "bench bind: {} servers, {} claims in {} namespace{}, mix {}{}, concurrency {}, {mode}, watch coalescing {} ms; {} CPUs, {} build",
            self.servers,
            self.claims,
            self.namespaces,
            if self.namespaces == 1 { "" } else { "s" },
            self.mix.name(),
            match (self.mix, self.quota_scale) {
                (Mix::ClassesQuotas, QuotaScale::Fleet) => " (quota scale: fleet)",
                _ => "",
            },
            self.concurrency,
            self.watch_coalesce_ms,
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            if self.release_build {
                "release"
            } else {
                "DEBUG (figures meaningless; use --release)"
            },
        )?;
        self.fmt_tenants(f)?;
        writeln!(
            f,
            "bound              {}/{} ({} unbound{})",
            self.bound,
            self.claims,
            self.unbound,
            match self.refused_by_quota {
                0 => String::new(),
                n => format!(", {n} refused by quota: QuotaExceeded"),
            }
        )?;
        writeln!(
            f,
            "operator ready     {:.2} s after its start",
            self.operator_ready_secs
        )?;
        if let Some(settle) = self.operator_settle_secs {
            writeln!(
                f,
                "operator settled   {settle:.2} s after ready, {} startup writes (not counted per bind)",
                self.writes_before_claims
            )?;
        }
        writeln!(
            f,
            "time to all Bound  {:.2} s from {from}{}",
            self.time_to_all_bound_secs,
            if self.unbound > 0 {
                " (to the last bind)"
            } else {
                ""
            }
        )?;
        if let Some(settled) = self
            .time_to_all_settled_secs
            .filter(|_| self.refused_by_quota > 0)
        {
            writeln!(
                f,
                "time to settled    {settled:.2} s from {from} (every claim Bound or refused by quota)"
            )?;
        }
        writeln!(f, "binds/s            {:.0}", self.binds_per_sec)?;
        if self.watch_errors > 0 {
            writeln!(
                f,
                "claims watch       {} failures retried: some Bound times may be late",
                self.watch_errors
            )?;
        }
        Ok(())
    }

    fn fmt_writes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "writes per bind    {:.2} (ok + conflict), {:.3} conflicts per bind, {} errors",
            self.writes_per_bind, self.conflicts_per_bind, self.write_errors
        )?;
        writeln!(
            f,
            "  {:<22} {:>8} {:>10} {:>8}   (per bind; total writes)",
            "resource", "ok", "conflict", "error"
        )?;
        for (resource, per) in &self.writes_per_bind_by_resource {
            let get = |r: &str| per.get(r).copied().unwrap_or(0.0);
            let count = |r: &str| self.writes[resource].get(r).copied().unwrap_or(0);
            writeln!(
                f,
                "  {resource:<22} {:>8.3} {:>10.3} {:>8.3}   ({} ok, {} conflict, {} error)",
                get("ok"),
                get("conflict"),
                get("error"),
                count("ok"),
                count("conflict"),
                count("error"),
            )?;
        }
        let line = |per: &BTreeMap<String, f64>| {
            let sum: f64 = per.values().sum();
            let each: Vec<String> = per.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
            format!("{sum:.2} ({})", each.join(", "))
        };
        writeln!(f, "reconciles/bind    {}", line(&self.reconciles_per_bind))?;
        writeln!(f, "objects recv/bind  {}", line(&self.received_per_bind))?;
        if let Some(q) = &self.quota_status_bytes {
            writeln!(
                f,
                "quota status       largest {:.1} KB, all {:.1} KB over {} quotas, at the end",
                q.largest as f64 / 1000.0,
                q.total as f64 / 1000.0,
                q.quotas
            )?;
        }
        Ok(())
    }
}

/// `secs` spread over `binds`, in ms (0 without a bind).
fn ms_per_bind(secs: f64, binds: usize) -> f64 {
    match binds {
        0 => 0.0,
        n => secs * 1000.0 / n as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_counts_from_the_later_of_creation_and_readiness() {
        let t0 = Instant::now();
        let at = |ms: u64| Some(t0 + Duration::from_millis(ms));
        let seen = Seen {
            // Created before readiness, created after it, never bound.
            added: vec![at(0), at(500), at(600)],
            bound: vec![at(300), at(540), None],
            ..Seen::default()
        };
        let ready = t0 + Duration::from_millis(100);
        assert_eq!(latencies(&seen, ready), [40.0, 200.0]);
    }

    #[test]
    fn writes_sum_over_controllers() {
        let s = |c: &str, res: &str, r: &str, v: f64| WriteSample {
            controller: c.into(),
            resource: res.into(),
            result: r.into(),
            value: v,
        };
        let by = writes_by_resource(&[
            s("claim", "serverclaims", "ok", 4.0),
            s("server", "serverclaims", "ok", 1.0),
            s("server", "servers", "conflict", 2.0),
        ]);
        assert_eq!(by["serverclaims"]["ok"], 5);
        assert_eq!(total(&by, "ok"), 5);
        assert_eq!(total(&by, "conflict"), 2);
    }

    #[test]
    fn writes_since_a_baseline() {
        let s = |res: &str, r: &str, v: f64| WriteSample {
            controller: "server".into(),
            resource: res.into(),
            result: r.into(),
            value: v,
        };
        let end = [s("servers/status", "ok", 1010.0), s("servers", "ok", 10.0)];
        let start = [s("servers/status", "ok", 1000.0)];
        let since = writes_since(&end, &start);
        assert_eq!(since["servers/status"]["ok"], 10);
        assert_eq!(since["servers"]["ok"], 10);
        assert_eq!(writes_since(&end, &[]), writes_by_resource(&end));
    }
}
