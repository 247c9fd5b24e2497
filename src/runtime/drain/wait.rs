//! `--wait`: reads the drained servers and their claims a few times a second until no
//! claim holds one, printing a line as each leaves and as a claim's `DisruptionTarget`
//! notice changes; past `--timeout`, says for each claim still bound why it stays.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::Api;

use super::duration;
use super::edit::is_drain_taint;
use super::error::DrainError;
use super::plan::{notice, when};
use super::read::effective;
use crate::api::names::CONDITION_DISRUPTION_TARGET;
use crate::api::{CachedClaim, CachedServer, Server, ServerClaim};
use crate::binding::state::eviction::{eviction, was_evicted};
use crate::binding::world::classes::ClassCatalog;
use crate::binding::{meta, ref_uid};

/// How often the objects are read again.
const POLL: Duration = Duration::from_millis(250);
/// At most this many claims are named when the wait times out.
const MOST_NAMED: usize = 20;

/// A claim bound to a drained server when the drain wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    pub server: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The claim's `DisruptionTarget` reason and message as last printed.
    pub notice: Option<(String, String)>,
}

impl Watched {
    fn claim(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Waits until every watched claim has left its server, or `timeout` (none or zero:
/// no limit) has passed.
pub async fn wait(
    client: &Client,
    watched: Vec<Watched>,
    timeout: Option<SignedDuration>,
    catalog: Option<&ClassCatalog>,
) -> Result<(), DrainError> {
    let timeout = timeout.filter(|t| !t.is_zero());
    let deadline = timeout.and_then(|t| Timestamp::now().checked_add(t).ok());
    let total = watched.len();
    let mut done = 0;
    let mut pending = watched;
    loop {
        let mut still = Vec::new();
        for mut w in pending {
            let (server, claim) = read(client, &w).await?;
            if let Some(how) = left(server.as_ref(), claim.as_ref(), &w) {
                done += 1;
                println!("{how} ({done} of {total})");
                continue;
            }
            let now_notice = claim.as_ref().and_then(notice);
            if let Some((reason, message)) = now_notice
                .as_ref()
                .filter(|n| w.notice.as_ref() != Some(*n))
            {
                let claim = w.claim();
                println!("  {claim}: {CONDITION_DISRUPTION_TARGET} {reason}: {message}");
            }
            w.notice = now_notice;
            still.push((w, server, claim));
        }
        if still.is_empty() {
            return Ok(());
        }
        if deadline.is_some_and(|d| Timestamp::now() >= d) {
            let waited = timeout.unwrap_or_default();
            return Err(timed_out(&still, total, waited, catalog));
        }
        pending = still.into_iter().map(|(w, _, _)| w).collect();
        tokio::time::sleep(POLL).await;
    }
}

async fn read(
    client: &Client,
    w: &Watched,
) -> Result<(Option<Server>, Option<ServerClaim>), DrainError> {
    let servers: Api<Server> = Api::all(client.clone());
    let claims: Api<ServerClaim> = Api::namespaced(client.clone(), &w.namespace);
    let failed = |what: String| move |e| DrainError::from_api(&what, e);
    let server = servers.get_opt(&w.server).await;
    let server = server.map_err(failed(format!("read server {}", w.server)))?;
    let claim = claims.get_opt(&w.name).await;
    let claim = claim.map_err(failed(format!("read claim {}", w.claim())))?;
    Ok((server, claim))
}

/// How the watched claim left its server, if it has.
fn left(server: Option<&Server>, claim: Option<&ServerClaim>, w: &Watched) -> Option<String> {
    let (c, s) = (w.claim(), &w.server);
    let Some(claim) = claim.filter(|c| meta::uid(*c) == Some(w.uid.as_str())) else {
        return Some(format!("{c} deleted, off {s}"));
    };
    if was_evicted(&CachedClaim::from(claim.clone())) {
        return Some(format!("evicted {c} from {s}"));
    }
    let Some(server) = server else {
        return Some(format!("server {s} deleted, {c} off it"));
    };
    let r = server.spec.server_claim_ref.as_ref();
    let holds = r.and_then(ref_uid) == Some(w.uid.as_str());
    (!holds).then(|| format!("{c} no longer holds {s}"))
}

fn timed_out(
    still: &[(Watched, Option<Server>, Option<ServerClaim>)],
    total: usize,
    waited: SignedDuration,
    catalog: Option<&ClassCatalog>,
) -> DrainError {
    let now = Timestamp::now();
    let mut text = format!(
        "timed out after {} with {} of {total} claims still on their servers:",
        duration::words(waited),
        still.len()
    );
    for (w, server, claim) in still.iter().take(MOST_NAMED) {
        let why = why(server.as_ref(), claim.as_ref(), catalog, now);
        text.push_str(&format!("\n  {} on {}: {why}", w.claim(), w.server));
    }
    if still.len() > MOST_NAMED {
        text.push_str(&format!("\n  … and {} more", still.len() - MOST_NAMED));
    }
    DrainError::TimedOut(text)
}

/// Why a claim still holds its drained server: its notice, else what the eviction rule
/// says of it now.
fn why(
    server: Option<&Server>,
    claim: Option<&ServerClaim>,
    catalog: Option<&ClassCatalog>,
    now: Timestamp,
) -> String {
    if let Some((reason, message)) = claim.and_then(notice) {
        return format!("{CONDITION_DISRUPTION_TARGET} {reason}: {message}");
    }
    let (Some(server), Some(claim)) = (server, claim) else {
        return "it changed since it was last read".into();
    };
    let Some(taint) = server.spec.taints.iter().find(|t| is_drain_taint(t)) else {
        return "the drain taint was removed from its server".into();
    };
    if taint.time_added.is_none() {
        return "the drain taint has no timeAdded yet: the server controller stamps it \
                (is server-binder running?)"
            .into();
    }
    let server = CachedServer::from(server.clone());
    match eviction(&server, &effective(claim, catalog)) {
        None => "tolerates the drain taint for ever; --grace sets a hard deadline".into(),
        Some(e) if e.deadline > now => {
            format!(
                "its eviction is due at {} ({})",
                e.deadline,
                when(e.deadline, now)
            )
        }
        Some(e) => format!(
            "its deadline {} has passed but its bind has not ended (is server-binder running?)",
            e.deadline
        ),
    }
}
