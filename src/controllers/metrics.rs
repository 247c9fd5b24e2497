//! The `server_binder_*` metrics of docs/binding.md, registered in one registry that the
//! runtime serves on `--metrics-addr`.
//!
//! Counters and histograms are updated when a plan's writes succeed; the `claims` and
//! `servers` gauges are recomputed from the watch caches at every scrape, so they are
//! right after a restart instead of drifting with missed events.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use k8s_openapi::jiff::Timestamp;

use crate::api::{CachedClaim, ClaimPhase, ReclaimPolicy, ServerPhase};
use crate::binding::meta;
use crate::binding::state::eviction::was_evicted;
use crate::binding::world::budgets::held_condition;
use crate::binding::world::classes::{ClassCatalog, capacity};
use crate::binding::world::quota::{self, QuotaCatalog};
use crate::binding::{
    ClaimCatalog, LostReason, Outcome, PendingReason, RepairCase, Repairer, ServerCatalog,
    claim_phase, find_bound, server_phase,
};

/// Which controller a metric sample is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerKind {
    Claim,
    Server,
    /// The classes' status counts ([`super::class_status`]).
    Class,
    /// The quotas' charges: the claim controller's, and the recount's
    /// ([`super::quota`]).
    Quota,
    /// The disruption budgets' records and counts: the claim controller's, and the
    /// recount's ([`super::budget_status`]).
    Budget,
}

impl ControllerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerKind::Claim => "claim",
            ControllerKind::Server => "server",
            ControllerKind::Class => "class",
            ControllerKind::Quota => "quota",
            ControllerKind::Budget => "budget",
        }
    }

    pub fn resource(self) -> &'static str {
        match self {
            ControllerKind::Claim => "serverclaims",
            ControllerKind::Server => "servers",
            ControllerKind::Class => "serverclasses",
            ControllerKind::Quota => "serverquotas",
            ControllerKind::Budget => "serverdisruptionbudgets",
        }
    }
}

/// How a write the controllers issued ended, for `api_writes_total{result}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteResult {
    Ok,
    Conflict,
    Error,
}

impl WriteResult {
    fn as_str(self) -> &'static str {
        match self {
            WriteResult::Ok => "ok",
            WriteResult::Conflict => "conflict",
            WriteResult::Error => "error",
        }
    }
}

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// The process collector's `process_*` metrics, unprefixed as every Prometheus
    /// client exports them (a registry's prefix would rename them).
    process: Registry,
    claims: IntGaugeVec,
    claims_pending: IntGaugeVec,
    claims_evicted: IntGaugeVec,
    evictions_held: IntGaugeVec,
    evictions_held_seconds: IntGaugeVec,
    evictions: IntCounterVec,
    servers: IntGaugeVec,
    class_servers: IntGaugeVec,
    class_claims: IntGaugeVec,
    quotas: IntGaugeVec,
    quota_refusals: IntCounterVec,
    bind_duration: HistogramVec,
    binds: IntCounter,
    releases: IntCounterVec,
    rebinds: IntCounter,
    lost_claims: IntCounterVec,
    repairs: IntCounterVec,
    api_writes: IntCounterVec,
    refused_writes: IntCounterVec,
    reconcile_duration: HistogramVec,
    reconcile_errors: IntCounterVec,
    watch_events: IntCounterVec,
    leader: IntGauge,
    cleaning_duration: HistogramVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn class_servers_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "class_servers",
        "Servers of each ServerClass, each counted once by state (available, bound, cleaning, released, unclaimable), as its status counts them",
        &["class", "state"],
    )
}

fn claims_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "claims",
        "ServerClaims in the controller's cache, by namespace and status.phase (Pending, Bound, Lost; a claim without status counts as Pending)",
        &["namespace", "phase"],
    )
}

fn claims_pending_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "claims_pending",
        "Pending ServerClaims by namespace, class (spec.serverClassName if that class exists, else \"\") and the reason of their Bound condition (Unknown: none yet)",
        &["namespace", "class", "reason"],
    )
}

fn claims_evicted_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "claims_evicted",
        "Lost ServerClaims whose bind an Evict taint ended, by namespace (every namespace with a claim)",
        &["namespace"],
    )
}

fn evictions_held_gauges(r: &Registrar<'_>) -> (IntGaugeVec, IntGaugeVec) {
    let held = r.gauges(
        "evictions_held",
        "ServerClaims whose eviction is due but a ServerDisruptionBudget holds (condition DisruptionTarget / EvictionHeldByBudget), by namespace (every namespace with a claim)",
        &["namespace"],
    );
    let oldest = r.gauges(
        "evictions_held_oldest_seconds",
        "How long the longest-held eviction of each namespace has waited on a ServerDisruptionBudget, in seconds (0: none held)",
        &["namespace"],
    );
    (held, oldest)
}

/// Every event's series exists from the start, at 0.
fn evictions_counter(r: &Registrar<'_>) -> IntCounterVec {
    let counter = r.counters(
        "evictions_total",
        "Evictions by Evict taints, by event: started (a claim's notice, or its deadline moved), held (a budget holds a due eviction), cancelled (the taint went or is tolerated), completed (the bind ended)",
        &["event"],
    );
    for event in ["started", "held", "cancelled", "completed"] {
        counter.with_label_values(&[event]);
    }
    counter
}

/// The `evictions_total` event a claim's event reason counts as, if any.
fn eviction_event(reason: &str) -> Option<&'static str> {
    match reason {
        "EvictionScheduled" => Some("started"),
        "EvictionHeldByBudget" => Some("held"),
        "EvictionCancelled" => Some("cancelled"),
        "ClaimEvicted" => Some("completed"),
        _ => None,
    }
}

fn class_claims_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "class_claims",
        "ServerClaims naming each ServerClass in spec.serverClassName, by status.phase; class=\"\" counts the claims naming a class that does not exist",
        &["class", "phase"],
    )
}

fn api_writes_counter(r: &Registrar<'_>) -> IntCounterVec {
    r.counters(
        "api_writes_total",
        "Writes the controllers issued to the API server, by controller (claim, server, class, quota), resource (servers, serverclaims, serverclasses, serverquotas, each also /status) and result (ok, conflict, error)",
        &["controller", "resource", "result"],
    )
}

fn watch_events_counter(r: &Registrar<'_>) -> IntCounterVec {
    r.counters(
        "watch_events_total",
        "Objects the controller's watches received (added, changed, deleted, or listed), by resource",
        &["resource"],
    )
}

fn quota_gauge(r: &Registrar<'_>) -> IntGaugeVec {
    r.gauges(
        "quota",
        "Each ServerQuota's limit (type=hard) and what it counts (type=used: its class's claims holding their bind, and those charged on their way to one), by namespace, quota and class",
        &["namespace", "quota", "class", "type"],
    )
}

fn quota_refusals_counter(r: &Registrar<'_>) -> IntCounterVec {
    r.counters(
        "quota_refusals_total",
        "ServerClaims a full ServerQuota turned away (they went Pending / QuotaExceeded), by class (\"\": a class that does not exist)",
        &["class"],
    )
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new_custom(Some("server_binder".into()), None)
            .expect("a valid metric prefix");
        let r = Registrar(&registry);
        build_info(&r);
        let (evictions_held, evictions_held_seconds) = evictions_held_gauges(&r);
        let metrics = Self {
            claims: claims_gauge(&r),
            claims_pending: claims_pending_gauge(&r),
            claims_evicted: claims_evicted_gauge(&r),
            evictions_held,
            evictions_held_seconds,
            evictions: evictions_counter(&r),
            servers: r.gauges(
                "servers",
                "Servers in the controller's cache, by status.phase (Available, Bound, Released, Cleaning; a server without status counts as Available)",
                &["phase"],
            ),
            class_servers: class_servers_gauge(&r),
            class_claims: class_claims_gauge(&r),
            quotas: quota_gauge(&r),
            quota_refusals: quota_refusals_counter(&r),
            // 10 ms to 10 min: a bind on an idle fleet takes a few round trips; a claim
            // that waits for a server to be freed can take minutes.
            bind_duration: r.histograms(
                "bind_duration_seconds",
                "Time from a ServerClaim's creation to its Bound status, in seconds",
                &[],
                &[
                    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                    300.0, 600.0,
                ],
            ),
            binds: r.counter("binds_total", "ServerClaims that became Bound"),
            releases: r.counters(
                "releases_total",
                "Servers released from a deleted claim, by reclaimPolicy (Recycle: Available again; Retain: Released until an admin clears the ref)",
                &["policy"],
            ),
            rebinds: r.counter(
                "rebinds_total",
                "Controller-chosen servers a claim gave up (taken by another claim, gone, or no longer eligible) to choose again",
            ),
            lost_claims: r.counters(
                "lost_claims_total",
                "Bound claims that became Lost, by reason (ServerRefCleared, ServerMissing, ServerMisbound)",
                &["reason"],
            ),
            repairs: r.counters(
                "repairs_total",
                "Half-bound states repaired, by controller (claim, server) and case (claim_status, adopted, claim_ref_restored, server_ref_restored, finalizer, rolled_back)",
                &["controller", "case"],
            ),
            api_writes: api_writes_counter(&r),
            refused_writes: refused_writes_counter(&r),
            reconcile_duration: r.histograms(
                "reconcile_duration_seconds",
                "Time one reconcile took, including its API calls, by controller",
                &["controller"],
                &[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
                ],
            ),
            reconcile_errors: r.counters(
                "reconcile_errors_total",
                "Reconciles that failed, by controller and error (api); write conflicts are counted in api_writes_total instead",
                &["controller", "error"],
            ),
            watch_events: watch_events_counter(&r),
            leader: r.gauge(
                "leader",
                "1 while this process leads and runs the controllers' writes, 0 while it is a standby",
            ),
            cleaning_duration: cleaning_histogram(&r),
            registry,
            process: process_registry(),
        };
        metrics.zero_known_series();
        metrics
    }

    /// Zero series for the known label values, so rate() and alerts see them from the
    /// first scrape rather than from the first occurrence.
    fn zero_known_series(&self) {
        for kind in [ControllerKind::Claim, ControllerKind::Server] {
            self.reconcile_errors
                .with_label_values(&[kind.as_str(), "api"]);
            for result in [WriteResult::Ok, WriteResult::Conflict, WriteResult::Error] {
                self.api_writes.with_label_values(&[
                    kind.as_str(),
                    kind.resource(),
                    result.as_str(),
                ]);
            }
        }
        for policy in [ReclaimPolicy::Recycle, ReclaimPolicy::Retain] {
            self.releases.with_label_values(&[policy_label(policy)]);
        }
        for reason in [
            LostReason::ServerRefCleared,
            LostReason::ServerMissing,
            LostReason::ServerMisbound,
            LostReason::Evicted,
        ] {
            self.lost_claims.with_label_values(&[reason.as_str()]);
        }
        for case in RepairCase::ALL {
            let kind = match case.repairer() {
                Repairer::ClaimController => ControllerKind::Claim,
                Repairer::ServerController => ControllerKind::Server,
            };
            self.repairs
                .with_label_values(&[kind.as_str(), case.as_str()]);
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts a plan's outcome once its writes succeeded.
    pub fn outcome(&self, controller: ControllerKind, outcome: Outcome, bind_seconds: Option<f64>) {
        match outcome {
            Outcome::Bound => {
                self.binds.inc();
                if let Some(s) = bind_seconds {
                    self.bind_duration.with_label_values::<&str>(&[]).observe(s);
                }
            }
            Outcome::Rebind => self.rebinds.inc(),
            Outcome::Lost(reason) => self.lost_claims.with_label_values(&[reason.as_str()]).inc(),
            Outcome::Released(policy) => self
                .releases
                .with_label_values(&[policy_label(policy)])
                .inc(),
            Outcome::Repair(case) => self
                .repairs
                .with_label_values(&[controller.as_str(), case.as_str()])
                .inc(),
        }
    }

    pub fn write(&self, controller: ControllerKind, resource: &str, result: WriteResult) {
        self.api_writes
            .with_label_values(&[controller.as_str(), resource, result.as_str()])
            .inc();
    }

    /// A claim's write for `write` (a decision's name) was refused: the claim backs off.
    pub fn write_refused(&self, write: &str) {
        self.refused_writes.with_label_values(&[write]).inc();
    }

    pub fn reconciled(&self, controller: ControllerKind, seconds: f64) {
        self.reconcile_duration
            .with_label_values(&[controller.as_str()])
            .observe(seconds);
    }

    pub fn reconcile_error(&self, controller: ControllerKind, error: &str) {
        self.reconcile_errors
            .with_label_values(&[controller.as_str(), error])
            .inc();
    }

    /// A released server's cleaning ended after `seconds`.
    pub fn cleaned(&self, seconds: f64) {
        self.cleaning_duration
            .with_label_values::<&str>(&[])
            .observe(seconds);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// A claim of `class` went Pending / QuotaExceeded.
    pub fn quota_refused(&self, classes: &ClassCatalog, class: &str) {
        let label = class_label(classes, class);
        self.quota_refusals.with_label_values(&[label]).inc();
    }

    /// Recomputes the `quota` gauges from the cache.
    /// Brings `watch_events_total` up to the watches' counts (`received`: by resource).
    pub fn refresh_watch_events(&self, received: &[(&str, u64)]) {
        for (resource, n) in received {
            let counter = self.watch_events.with_label_values(&[*resource]);
            counter.inc_by(n.saturating_sub(counter.get()));
        }
    }

    pub fn refresh_quotas(&self, quotas: &QuotaCatalog) {
        self.quotas.reset();
        for q in quotas.iter() {
            let (namespace, name) = (meta::namespace(&**q), meta::name(&**q));
            for (class, hard) in &q.spec.hard {
                let used = quota::used_in(q, class);
                for (kind, n) in [("hard", *hard), ("used", used)] {
                    let labels = [namespace, name, class.as_str(), kind];
                    self.quotas.with_label_values(&labels).set(n);
                }
            }
        }
    }

    /// Recomputes the `class_servers` and `class_claims` gauges from the caches.
    pub fn refresh_classes(
        &self,
        classes: &ClassCatalog,
        claims: &ClaimCatalog,
        servers: &ServerCatalog,
    ) {
        self.class_servers.reset();
        for class in classes.iter() {
            let name = crate::binding::meta::name(&**class);
            let counted = capacity(class, servers.iter());
            let states = [
                ("available", counted.available),
                ("bound", counted.bound),
                ("cleaning", counted.cleaning),
                ("released", counted.released),
                ("unclaimable", counted.unclaimable),
            ];
            for (state, n) in states {
                let gauge = self.class_servers.with_label_values(&[name, state]);
                gauge.set(i64::from(n));
            }
        }
        let mut by_class: BTreeMap<(&str, &'static str), i64> = BTreeMap::new();
        for c in claims.iter() {
            if let Some(class) = c.spec.server_class_name.as_deref() {
                let phase = claim_phase_name(claim_phase(c));
                let label = class_label(classes, class);
                *by_class.entry((label, phase)).or_default() += 1;
            }
        }
        self.class_claims.reset();
        for ((class, phase), n) in by_class {
            self.class_claims.with_label_values(&[class, phase]).set(n);
        }
    }

    /// Recomputes the `claims_pending` gauge from the caches: a series for each
    /// namespace, class and reason some Pending claim has, none at 0.
    pub fn refresh_pending(&self, classes: &ClassCatalog, claims: &ClaimCatalog) {
        let mut by_reason: BTreeMap<(&str, &str, &'static str), i64> = BTreeMap::new();
        for c in claims.iter() {
            if claim_phase(c) != ClaimPhase::Pending {
                continue;
            }
            let ns = c.meta().namespace.as_deref().unwrap_or_default();
            let class = c.spec.server_class_name.as_deref().unwrap_or_default();
            let key = (ns, class_label(classes, class), pending_reason_label(c));
            *by_reason.entry(key).or_default() += 1;
        }
        self.claims_pending.reset();
        for ((ns, class, reason), n) in by_reason {
            let labels = [ns, class, reason];
            self.claims_pending.with_label_values(&labels).set(n);
        }
    }

    /// Recomputes the `claims` and `servers` gauges from the caches.
    pub fn refresh_inventory(&self, claims: &ClaimCatalog, servers: &ServerCatalog) {
        let mut by_claim: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
        // Every namespace with a claim, evicted or not: the alert subtracts it.
        let mut evicted: BTreeMap<String, i64> = BTreeMap::new();
        let mut held = Held::default();
        let now = Timestamp::now();
        for c in claims.iter() {
            let phase = claim_phase_name(claim_phase(c));
            let ns = c.meta().namespace.clone().unwrap_or_default();
            *evicted.entry(ns.clone()).or_default() += i64::from(was_evicted(c));
            held.note(&ns, c, now);
            *by_claim.entry((ns, phase)).or_default() += 1;
        }
        let mut by_server: BTreeMap<&'static str, i64> = BTreeMap::new();
        for phase in ["Available", "Bound", "Released", "Cleaning"] {
            by_server.insert(phase, 0);
        }
        for s in servers.iter() {
            let phase = server_phase_name(server_phase(s));
            *by_server.entry(phase).or_default() += 1;
        }
        // Reset first: a namespace whose last claim went away must not keep its series.
        self.claims.reset();
        for ((ns, phase), n) in by_claim {
            self.claims.with_label_values(&[ns.as_str(), phase]).set(n);
        }
        self.claims_evicted.reset();
        for (ns, n) in evicted {
            self.claims_evicted.with_label_values(&[ns.as_str()]).set(n);
        }
        self.evictions_held.reset();
        self.evictions_held_seconds.reset();
        for (ns, (n, oldest)) in held.0 {
            self.evictions_held.with_label_values(&[ns.as_str()]).set(n);
            self.evictions_held_seconds
                .with_label_values(&[ns.as_str()])
                .set(oldest);
        }
        self.servers.reset();
        for (phase, n) in by_server {
            self.servers.with_label_values(&[phase]).set(n);
        }
    }

    /// Counts a claim's event that marks a step of an eviction.
    pub fn eviction_event(&self, reason: &str) {
        if let Some(event) = eviction_event(reason) {
            self.evictions.with_label_values(&[event]).inc();
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        let mut families = self.registry.gather();
        families.extend(self.process.gather());
        TextEncoder::new()
            .encode(&families, &mut buf)
            .expect("text encoding into a Vec cannot fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

/// 10 s to a day: a power-off takes seconds, a disk wipe hours. Exported (empty) from
/// the start, like the counters, so a dashboard sees it before the first cleaning.
/// `claim_writes_refused_total{write}`, with the writes a refusal usually hits zeroed.
fn refused_writes_counter(r: &Registrar) -> IntCounterVec {
    let c = r.counters(
        "claim_writes_refused_total",
        "Claim writes the API server refused (not conflicts) after which the claim backs off, by the decision whose write it was (PickBestFit, AdoptReservedServer, CompleteBind, ...)",
        &["write"],
    );
    for write in ["PickBestFit", "AdoptReservedServer", "CompleteBind"] {
        c.with_label_values(&[write]);
    }
    c
}

fn cleaning_histogram(r: &Registrar) -> HistogramVec {
    let h = r.histograms(
        "cleaning_duration_seconds",
        "Time a released server spent in phase Cleaning, from its release to its last release gate passing, in seconds",
        &[],
        &[
            10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0,
        ],
    );
    h.with_label_values::<&str>(&[]);
    h
}

/// The git revision the running binary was built from, as the binary names it
/// ([`set_revision`]); "unknown" until then, and in the tests.
static REVISION: OnceLock<&'static str> = OnceLock::new();

/// Names the revision in `server_binder_build_info`. The binary calls it once, first:
/// the revision is compiled into the binary alone (`SERVER_BINDER_REVISION` at build
/// time), so that a new commit rebuilds no library and no test.
pub fn set_revision(revision: &'static str) {
    let _ = REVISION.set(revision);
}

/// `server_binder_build_info{version,revision} 1`, as Prometheus exporters name the
/// build they run.
fn build_info(r: &Registrar) {
    let info = r.gauges(
        "build_info",
        "Always 1; the labels name the build: version (Cargo.toml) and revision (git)",
        &["version", "revision"],
    );
    let revision = REVISION.get().copied().unwrap_or("unknown");
    info.with_label_values(&[env!("CARGO_PKG_VERSION"), revision])
        .set(1);
}

/// CPU seconds, resident memory, open and maximum file descriptors, start time: the
/// standard `process_*` metrics of this process (Linux only).
fn process_registry() -> Registry {
    let registry = Registry::new();
    #[cfg(target_os = "linux")]
    registry
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("the process collector registers once");
    registry
}

/// The `class` label of a claim naming `class`: the name of a class that exists, or
/// [`MISSING_CLASS`]. A tenant writes any name it likes into spec.serverClassName, and a
/// label per name would let it add series at will; the classes are an admin's.
fn class_label<'a>(classes: &ClassCatalog, class: &'a str) -> &'a str {
    match classes.class(class) {
        Some(_) => class,
        None => MISSING_CLASS,
    }
}

/// The `reason` label of a Pending claim: its `Bound` condition's reason, one of
/// [`PendingReason`], or [`UNKNOWN_REASON`] (no condition yet, or a word this version
/// does not write): a fixed set of values, whatever a status says.
fn pending_reason_label(claim: &CachedClaim) -> &'static str {
    let conditions = claim.status.as_ref().map(|s| s.conditions.as_slice());
    find_bound(conditions.unwrap_or_default())
        .and_then(|c| PendingReason::parse(&c.reason))
        .map_or(UNKNOWN_REASON, PendingReason::as_str)
}

/// The `reason` label of a Pending claim without a reason this version writes: one the
/// claim controller has not decided on yet, or one it is binding right now (a claim
/// gets a status only when it waits).
pub const UNKNOWN_REASON: &str = "Unknown";

/// The `class` label of the claims that name a class that does not exist.
pub const MISSING_CLASS: &str = "";

fn claim_phase_name(p: ClaimPhase) -> &'static str {
    match p {
        ClaimPhase::Pending => "Pending",
        ClaimPhase::Bound => "Bound",
        ClaimPhase::Lost => "Lost",
    }
}

fn server_phase_name(p: ServerPhase) -> &'static str {
    match p {
        ServerPhase::Available => "Available",
        ServerPhase::Bound => "Bound",
        ServerPhase::Released => "Released",
        ServerPhase::Cleaning => "Cleaning",
    }
}

fn policy_label(p: ReclaimPolicy) -> &'static str {
    match p {
        ReclaimPolicy::Recycle => "Recycle",
        ReclaimPolicy::Retain => "Retain",
    }
}

/// Creates metrics and registers each in the registry as it is made. The names and
/// labels are constants of this file: a failure is a bug, caught by any test.
struct Registrar<'a>(&'a Registry);

impl Registrar<'_> {
    fn register<M: prometheus::core::Collector + Clone + 'static>(&self, metric: M) -> M {
        self.0
            .register(Box::new(metric.clone()))
            .expect("metric names are unique");
        metric
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.register(IntCounter::new(name, help).expect("a valid counter"))
    }

    fn counters(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        let metric = IntCounterVec::new(Opts::new(name, help), labels);
        self.register(metric.expect("a valid counter"))
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.register(IntGauge::new(name, help).expect("a valid gauge"))
    }

    fn gauges(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let metric = IntGaugeVec::new(Opts::new(name, help), labels);
        self.register(metric.expect("a valid gauge"))
    }

    fn histograms(&self, name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
        let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
        self.register(HistogramVec::new(opts, labels).expect("a valid histogram"))
    }
}

/// Each namespace's held evictions: how many, and the oldest hold's age in seconds.
#[derive(Default)]
struct Held(BTreeMap<String, (i64, i64)>);

impl Held {
    fn note(&mut self, namespace: &str, claim: &CachedClaim, now: Timestamp) {
        let entry = self.0.entry(namespace.to_string()).or_default();
        let Some(since) = held_since(claim) else {
            return;
        };
        let age = now.duration_since(since).as_secs().max(0);
        entry.0 += 1;
        entry.1 = entry.1.max(age);
    }
}

/// When a budget started holding the claim's eviction (its condition's transition).
fn held_since(claim: &CachedClaim) -> Option<Timestamp> {
    held_condition(claim).map(|c| c.last_transition_time.0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::{ServerClaimStatus, ServerClass, ServerClassSpec};

    /// A claim of namespace `ns`, naming `class`, in `phase` with a `Bound` condition of
    /// `reason` (`None`: no status at all, as a claim not decided on yet).
    fn claim(
        name: &str,
        ns: &str,
        class: Option<&str>,
        status: Option<(ClaimPhase, &str)>,
    ) -> CachedClaim {
        let mut c = CachedClaim::new(name, Default::default());
        c.meta_mut().namespace = Some(ns.into());
        c.spec.server_class_name = class.map(str::to_string);
        c.status = status.map(|(phase, reason)| ServerClaimStatus {
            phase: Some(phase),
            conditions: vec![Condition {
                type_: "Bound".into(),
                status: "False".into(),
                reason: reason.into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(Timestamp::now()),
            }],
            ..ServerClaimStatus::default()
        });
        c
    }

    fn pending_series(text: &str) -> Vec<&str> {
        text.lines()
            .filter(|l| l.starts_with("server_binder_claims_pending{"))
            .collect()
    }

    /// Each Pending claim counts under its namespace, its class (one that exists) and its
    /// condition's reason; a reason this version does not write, and a claim without a
    /// condition, count as Unknown; Bound claims are not counted.
    #[test]
    fn pending_claims_count_by_namespace_class_and_reason() {
        let mut classes = ClassCatalog::default();
        classes.upsert_class(Arc::new(ServerClass::new(
            "gpu",
            ServerClassSpec::default(),
        )));
        let pending = |reason| Some((ClaimPhase::Pending, reason));
        let claims = ClaimCatalog::from_claims([
            claim("a1", "team-a", Some("gpu"), pending("QuotaExceeded")),
            claim("a2", "team-a", Some("gpu"), pending("QuotaExceeded")),
            claim("a3", "team-a", None, pending("NoMatchingServer")),
            claim("a4", "team-a", None, None),
            claim("a5", "team-a", None, pending("SomeFutureReason")),
            claim("a6", "team-a", None, Some((ClaimPhase::Bound, "Bound"))),
            claim("b1", "team-b", Some("made-up"), pending("ClassNotFound")),
        ]);
        let metrics = Metrics::new();
        metrics.refresh_pending(&classes, &claims);
        let text = metrics.encode();
        assert_eq!(
            pending_series(&text),
            [
                r#"server_binder_claims_pending{class="",namespace="team-a",reason="NoMatchingServer"} 1"#,
                r#"server_binder_claims_pending{class="",namespace="team-a",reason="Unknown"} 2"#,
                r#"server_binder_claims_pending{class="",namespace="team-b",reason="ClassNotFound"} 1"#,
                r#"server_binder_claims_pending{class="gpu",namespace="team-a",reason="QuotaExceeded"} 2"#,
            ],
            "{text}"
        );
        // The last Pending claim gone: its series goes too.
        metrics.refresh_pending(&classes, &ClaimCatalog::new());
        assert!(pending_series(&metrics.encode()).is_empty());
    }
}
