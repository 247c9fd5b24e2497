//! The one watch that times the binds: serverclaims in all namespaces, opened (its
//! initial list done) before the first claim is created. For every claim it records
//! when it was first seen at all and when it was first seen with `status.phase: Bound`,
//! as `Instant`s taken the moment each event arrives; with `--hold-ms` it also passes
//! each claim first seen Bound on to the holder (`hold.rs`), which deletes it.
//!
//! Events are decoded into [`ObservedClaim`], which keeps only the name, the
//! resourceVersion (the watch resumes from it) and whether the phase is Bound, so a
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

/// A claim as the bench sees it on the watch.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "Wire")]
pub struct ObservedClaim {
    metadata: ObjectMeta,
    bound: bool,
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
}

impl From<Wire> for ObservedClaim {
    fn from(w: Wire) -> Self {
        Self {
            metadata: ObjectMeta {
                name: w.metadata.name,
                namespace: w.metadata.namespace,
                resource_version: w.metadata.resource_version,
                ..ObjectMeta::default()
            },
            bound: w.status.and_then(|s| s.phase).as_deref() == Some("Bound"),
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
    pub added_count: usize,
    pub bound_count: usize,
    /// The last time a claim was first seen or first seen Bound.
    pub last_change: Option<Instant>,
    pub watch_errors: u64,
}

impl Seen {
    fn new(claims: usize) -> Self {
        Self {
            added: vec![None; claims],
            bound: vec![None; claims],
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
        if claim.bound && self.bound[j].is_none() {
            self.bound[j] = Some(now);
            self.bound_count += 1;
            self.last_change = Some(now);
            return Some(j);
        }
        None
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

    /// Claims seen, claims seen Bound, and the last time either grew.
    pub fn counts(&self) -> (usize, usize, Option<Instant>) {
        let s = self.seen.lock();
        (s.added_count, s.bound_count, s.last_change)
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
