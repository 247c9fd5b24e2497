//! `--churn-secs`: once the bind phase is over, servers change while claims wait, and
//! the bench counts the status writes the waiting claims cost. Each change cordons or
//! uncordons one server (`spec.unclaimable`), round-robin over the fleet: it changes
//! every waiting claim's "0/N servers can serve this claim: …" summary, which the
//! operator rewrites at most once per claim per `--status-interval`
//! (docs/binding.md, "Why a claim waits").

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;

use super::super::error::BenchError as Error;
use super::fleet;
use super::observe::Observer;
use super::operator::Operator;
use super::scrape::{self, WriteSample};
use crate::api::Server;

/// What to churn.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    pub duration: Duration,
    /// Server changes per second.
    pub rate: f64,
}

/// What the churn cost.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnReport {
    pub secs: f64,
    pub server_changes: u64,
    /// Claims not Bound when the churn started and when it ended.
    pub pending_at_start: usize,
    pub pending_at_end: usize,
    /// The operator's writes to `serverclaims/status` during the churn.
    pub claim_status_writes: u64,
    /// The same per waiting claim (the mean of start and end) per minute.
    pub status_writes_per_pending_claim_per_min: f64,
}

/// Cordons and uncordons servers at `churn.rate` for `churn.duration`, and counts the
/// claim status writes the operator made meanwhile.
pub async fn run(
    client: &kube::Client,
    operator: &mut Operator,
    observer: &Observer,
    (servers, claims): (usize, usize),
    churn: Churn,
) -> Result<ChurnReport, Error> {
    let api: Api<Server> = Api::all(client.clone());
    let pending = || claims - observer.counts().bound.min(claims);
    let pending_at_start = pending();
    eprintln!(
        "bench bind: churning {} server changes/s for {}s with {pending_at_start} claims waiting",
        churn.rate,
        churn.duration.as_secs()
    );
    let before = claim_status_writes(&operator.metrics().await?);
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / churn.rate));
    let mut changes = 0u64;
    while started.elapsed() < churn.duration && servers > 0 {
        tick.tick().await;
        let i = changes as usize;
        let (name, cordon) = (
            fleet::server_name(i % servers),
            (i / servers).is_multiple_of(2),
        );
        let patch = serde_json::json!({ "spec": { "unclaimable": cordon } });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::Failed(format!("churning server {name}: {e}")))?;
        changes += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    let writes = claim_status_writes(&operator.metrics().await?) - before;
    let pending_at_end = pending();
    let mean_pending = (pending_at_start + pending_at_end) as f64 / 2.0;
    Ok(ChurnReport {
        secs,
        server_changes: changes,
        pending_at_start,
        pending_at_end,
        claim_status_writes: writes,
        status_writes_per_pending_claim_per_min: if mean_pending > 0.0 {
            writes as f64 / mean_pending / (secs / 60.0)
        } else {
            0.0
        },
    })
}

/// The claim controller's `serverclaims/status` writes (ok and conflict) in an
/// exposition.
fn claim_status_writes(exposition: &str) -> u64 {
    let counted = |s: &WriteSample| s.resource == "serverclaims/status" && s.result != "error";
    scrape::api_writes(exposition)
        .iter()
        .filter(|s| counted(s))
        .map(|s| s.value as u64)
        .sum()
}
