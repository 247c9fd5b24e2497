//! The one watch that times the binds: serverclaims in all namespaces, opened (its
//! initial list done) before the first claim is created. For every claim it records
//! when it was first seen at all and when it was first seen with `status.phase: Bound`,
//! as `Instant`s taken the moment each event arrives, and whether it waits refused by a
//! quota (`QuotaExceeded`, `--mix classes-quotas`); with `--hold-ms` it also passes
//! each claim first seen Bound on to the holder (`hold.rs`), which deletes it.
//!
//! Events are decoded into [`ObservedClaim`], which keeps only the name, the
//! resourceVersion (the watch resumes from it), whether the phase is Bound and whether
//! the claim is refused by a quota, so a
//! 100k-claim run costs the bench little to follow. The raw watcher keeps no store; on a
//! lost watch it re-lists, and a relisted claim counts only where it is seen first.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Resource;
use kube::api::{Api, ObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::super::error::BenchError as Error;
use super::fleet;
use crate::api::ServerClaim;
use crate::binding::world::quota::QUOTA_EXCEEDED;

/// A claim as the bench sees it on the watch.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "Wire")]
pub struct ObservedClaim {
    metadata: ObjectMeta,
    bound: bool,
    /// Pending with the reason `QuotaExceeded`.
    refused: bool,
}

/// What is decoded of a claim; serde skips the rest without building it.
#[derive(Deserialize)]
struct Wire {
    metadata: WireMeta,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

#[derive(Deserialize)]
struct WireStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<WireCondition>,
}

#[derive(Deserialize)]
struct WireCondition {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    reason: String,
}

impl From<Wire> for ObservedClaim {
    fn from(w: Wire) -> Self {
        let phase = w.status.as_ref().and_then(|s| s.phase.as_deref());
        let (bound, pending) = (phase == Some("Bound"), phase == Some("Pending"));
        let refused = pending
            && w.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Bound" && c.reason == QUOTA_EXCEEDED)
            });
        Self {
            metadata: ObjectMeta {
                name: w.metadata.name,
                namespace: w.metadata.namespace,
                resource_version: w.metadata.resource_version,
                ..ObjectMeta::default()
            },
            bound,
            refused,
        }
    }
}

/// Served as serverclaims: the same kind, read through a narrower type.
impl Resource for ObservedClaim {
    type DynamicType = ();
    type Scope = <ServerClaim as Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        ServerClaim::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        ServerClaim::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        ServerClaim::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        ServerClaim::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the watch saw, by claim index ([`fleet::claim_index`]).
#[derive(Debug, Default)]
pub struct Seen {
    pub added: Vec<Option<Instant>>,
    pub bound: Vec<Option<Instant>>,
    /// Whether each claim waits refused by a quota, as last seen.
    pub refused: Vec<bool>,
    pub added_count: usize,
    pub bound_count: usize,
    /// Claims waiting refused by a quota, as last seen.
    pub refused_count: usize,
    /// The last time a claim was first seen, first seen Bound, or refused or no longer.
    pub last_change: Option<Instant>,
    /// The first time every claim was seen Bound or refused by a quota.
    pub settled: Option<Instant>,
    pub watch_errors: u64,
}

impl Seen {
    fn new(claims: usize) -> Self {
        Self {
            added: vec![None; claims],
            bound: vec![None; claims],
            refused: vec![false; claims],
            ..Self::default()
        }
    }

    /// Records what `claim` shows at `now`; returns its index if it is first seen Bound.
    fn record(&mut self, claim: &ObservedClaim, now: Instant) -> Option<usize> {
        let index = claim.metadata.name.as_deref().and_then(fleet::claim_index);
        let j = index.filter(|&j| j < self.added.len())?;
        if self.added[j].is_none() {
            self.added[j] = Some(now);
            self.added_count += 1;
            self.last_change = Some(now);
        }
        let refused = claim.refused && self.bound[j].is_none();
        if refused != self.refused[j] {
            self.refused[j] = refused;
            if refused {
                self.refused_count += 1;
            } else {
                self.refused_count -= 1;
            }
            self.last_change = Some(now);
        }
        let newly_bound = claim.bound && self.bound[j].is_none();
        if newly_bound {
            self.bound[j] = Some(now);
            self.bound_count += 1;
            self.last_change = Some(now);
        }
        if self.settled.is_none() && self.bound_count + self.refused_count >= self.added.len() {
            self.settled = Some(now);
        }
        newly_bound.then_some(j)
    }

    /// Claim `j`'s wait in ms, if it was seen Bound: from when it was first seen, or
    /// from `ready` (the operator's readiness) if it was created before, as no bind can
    /// come earlier.
    pub fn wait_ms(&self, j: usize, ready: Instant) -> Option<f64> {
        let from = self.added.get(j)?.map_or(ready, |a| a.max(ready));
        let bound = (*self.bound.get(j)?)?;
        Some(bound.saturating_duration_since(from).as_secs_f64() * 1e3)
    }
}

/// Claims seen, seen Bound, and refused by a quota (as last seen), and the last time
/// one of these changed.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub added: usize,
    pub bound: usize,
    pub refused: usize,
    pub last_change: Option<Instant>,
}

/// Where the watch reports each claim the moment it is first seen Bound, and when
/// (for `--hold-ms`).
pub type BoundSender = mpsc::UnboundedSender<(usize, Instant)>;

/// The running watch.
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl Observer {
    /// Opens the watch and returns once its initial list is done, so that every claim
    /// created from now on arrives as an event.
    /// Each claim first seen Bound is also sent to `on_bound`, if given.
    pub async fn start(
        client: &kube::Client,
        claims: usize,
        on_bound: Option<BoundSender>,
    ) -> Result<Self, Error> {
        let seen = Arc::new(Mutex::new(Seen::new(claims)));
        let (synced_tx, synced) = oneshot::channel();
        let api: Api<ObservedClaim> = Api::all(client.clone());
        let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
        let task = tokio::spawn(follow(events, seen.clone(), synced_tx, on_bound));
        match tokio::time::timeout(Duration::from_secs(60), synced).await {
            Ok(Ok(())) => Ok(Self { seen, task }),
            _ => {
                task.abort();
                Err(Error::Failed("the claims watch did not start".into()))
            }
        }
    }

    /// What the watch has seen so far.
    pub fn counts(&self) -> Counts {
        let s = self.seen.lock();
        Counts {
            added: s.added_count,
            bound: s.bound_count,
            refused: s.refused_count,
            last_change: s.last_change,
        }
    }

    /// Stops the watch and returns what it saw.
    pub fn finish(self) -> Seen {
        self.task.abort();
        std::mem::take(&mut *self.seen.lock())
    }
}

async fn follow(
    events: impl futures::Stream<Item = watcher::Result<Event<ObservedClaim>>>,
    seen: Arc<Mutex<Seen>>,
    synced: oneshot::Sender<()>,
    on_bound: Option<BoundSender>,
) {
    let mut synced = Some(synced);
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        let now = Instant::now();
        match event {
            Ok(Event::Apply(c) | Event::InitApply(c)) => {
                let newly_bound = seen.lock().record(&c, now);
                // Sent in the order of `now`, which the holder relies on. A closed
                // channel (the holder has stopped) loses nothing the figures need.
                if let (Some(j), Some(tx)) = (newly_bound, &on_bound) {
                    let _ = tx.send((j, now));
                }
            }
            Ok(Event::InitDone) => {
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(Event::Init | Event::Delete(_)) => {}
            Err(e) => {
                let mut s = seen.lock();
                s.watch_errors += 1;
                // The watcher retries with backoff; a few lines say why, not thousands.
                if s.watch_errors <= 3 {
                    eprintln!("bench bind: the claims watch failed (retrying): {e}");
                }
            }
        }
    }
}
