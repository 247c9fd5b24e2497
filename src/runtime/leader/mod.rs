//! Leader election for `run --leader-elect`: one role, to drive the `leading` channel
//! the controllers obey from a coordination.k8s.io/v1 Lease, through kube-lease-manager;
//! to set `server_binder_leader`; to log each change with this process's identity; and
//! to release the Lease on a graceful stop.
//!
//! What kube-lease-manager 0.13 does by itself, and what this module adds to it:
//!
//! - [`LeaseManager::changed`] takes the Lease when it is free or its term has run out,
//!   renews it `grace` before the term ends, and resolves only when the holder changes
//!   (or with an error). It does not report a renewal, a failed renewal comes back only
//!   as an error (its `watch()` logs that and goes on saying "leader"), and a request
//!   that hangs does not come back at all (kube's client has no read timeout). So this
//!   module does not take "we lead" from the manager: it reads the Lease itself and
//!   leads only while the Lease names this process and its `renewTime` (written with
//!   this process's clock) is less than `duration - margin` old. A renewal that does not
//!   land stops the controllers' writes before the term ends; the other candidates wait
//!   for the whole term (fail safe).
//! - A standby's manager sleeps until the end of the term it last saw, so on its own it
//!   would notice a released Lease only then. Every replica reads the Lease every
//!   `retry`; a standby that finds it free or run out starts a fresh manager, which
//!   takes it at once. A manager that errs is replaced the same way, after a backoff.
//! - There is no release on drop: on a graceful stop, once the controllers have
//!   stopped, [`LeaseManager::release`] clears the holder so a standby takes over
//!   within `retry` instead of a whole term. A crash releases nothing; the term runs out.
//!
//! The Lease requests, all in the Lease's namespace (see
//! manifests/base/leader-election-role.yaml): `get` (the manager's and this module's
//! reads), `create` (only when the Lease does not exist yet) and `patch` (server-side
//! apply to take it, strategic merge to renew, count transitions and release it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::time::{sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use crate::controllers::Metrics;

mod term;

pub use term::{
    DEFAULT_LEASE_DURATION_SECS, MIN_LEASE_DURATION_SECS, NotLeading, Observed, Timings,
    needs_fresh_manager, verdict,
};

/// While a renewal is due but not yet seen, the holder reads the Lease this often.
const CONFIRM_EVERY: Duration = Duration::from_millis(100);
/// The longest a graceful stop waits to release the Lease.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait after a manager failed (doubling up to `retry`).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Which Lease to contend for, and its term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    pub namespace: String,
    pub name: String,
    /// The Lease's `leaseDurationSeconds`, at least [`MIN_LEASE_DURATION_SECS`].
    pub lease_duration_secs: u64,
}

/// What `/readyz` sees of the election (cheap to clone).
#[derive(Clone, Debug)]
pub struct ElectionStatus {
    healthy: Arc<AtomicBool>,
    leading: watch::Receiver<bool>,
}

impl ElectionStatus {
    /// This process holds the Lease and runs the controllers' writes.
    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// The lease manager runs and the last read of the Lease succeeded: a healthy
    /// standby, ready to take over.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }
}

/// The election, to be run by [`Elector::run`].
pub struct Elector {
    client: Client,
    config: LeaderElection,
    timings: Timings,
    identity: String,
    metrics: Metrics,
    leading: watch::Sender<bool>,
    healthy: Arc<AtomicBool>,
}

type Pending<T> = Option<Pin<Box<dyn Future<Output = T> + Send>>>;
/// A lease manager's construction: built, failed, or timed out.
type Built = Result<kube_lease_manager::Result<LeaseManager>, tokio::time::error::Elapsed>;

/// What [`Elector::run`]'s loop remembers between wake-ups.
struct Contention {
    /// The running lease manager, and since when.
    manager: Option<(Arc<LeaseManager>, Instant)>,
    /// A manager being built.
    building: Pending<Built>,
    /// The manager's next change of view.
    changed: Pending<kube_lease_manager::Result<bool>>,
    /// When to build a manager next (after a failure: a backoff later).
    build_at: Instant,
    backoff: Backoff,
    /// What the manager last said: this process holds the Lease.
    believes: bool,
    /// The Lease as last read.
    observed: Option<Observed>,
    /// Whether the last read succeeded.
    read_ok: bool,
    next_read: Instant,
}

impl Contention {
    fn new(retry: Duration) -> Self {
        let now = Instant::now();
        Self {
            manager: None,
            building: None,
            changed: None,
            build_at: now,
            backoff: Backoff::new(retry),
            believes: false,
            observed: None,
            read_ok: false,
            next_read: now,
        }
    }
}

impl Elector {
    /// The elector, the channel the controllers follow (false until the Lease is
    /// ours), and the status for `/readyz`.
    pub fn new(
        client: Client,
        config: LeaderElection,
        identity: String,
        metrics: Metrics,
    ) -> (Self, watch::Receiver<bool>, ElectionStatus) {
        let (leading, rx) = watch::channel(false);
        metrics.set_leader(false);
        let healthy = Arc::new(AtomicBool::new(false));
        let status = ElectionStatus {
            healthy: healthy.clone(),
            leading: rx.clone(),
        };
        let elector = Self {
            client,
            timings: Timings::new(config.lease_duration_secs),
            config,
            identity,
            metrics,
            leading,
            healthy,
        };
        (elector, rx, status)
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn builder(&self) -> LeaseManagerBuilder {
        LeaseManagerBuilder::new(self.client.clone(), &self.config.name)
            .with_namespace(&self.config.namespace)
            .with_create_mode(LeaseCreateMode::AutoCreate)
            .with_identity(&self.identity)
            .with_duration(self.timings.duration.as_secs())
            .with_grace(self.timings.grace.as_secs())
    }

    fn set_leading(&self, leads: bool, why: Option<&NotLeading>) {
        let changed = self.leading.send_if_modified(|l| {
            let changed = *l != leads;
            *l = leads;
            changed
        });
        if !changed {
            return;
        }
        self.metrics.set_leader(leads);
        let (identity, lease) = (self.identity.as_str(), self.lease());
        match why {
            None => tracing::info!(identity, lease, "acquired leadership"),
            Some(NotLeading::ShuttingDown) => {
                tracing::info!(identity, lease, "stepping down: shutting down");
            }
            Some(why) => tracing::warn!(identity, lease, reason = %why, "lost leadership"),
        }
    }

    /// Contends for the Lease until `stop` is cancelled, then stops leading and releases
    /// the Lease if this process holds it. Cancel `stop` only once the controllers have
    /// stopped, so that no write of this process follows the release.
    pub async fn run(self, stop: CancellationToken) {
        let t = self.timings;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        tracing::info!(
            identity = %self.identity,
            lease = %self.lease(),
            duration_secs = t.duration.as_secs(),
            "contending for the Lease"
        );
        let mut c = Contention::new(t.retry);
        loop {
            let lead_until = self.publish(&c);
            if c.manager.is_none() && c.building.is_none() && Instant::now() >= c.build_at {
                let build = timeout(t.request_timeout * 2, self.builder().build());
                c.building = Some(Box::pin(build));
            }
            let waiting_to_build = c.manager.is_none() && c.building.is_none();
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                built = poll_pending(&mut c.building) => self.on_built(&mut c, built),
                changed = poll_pending(&mut c.changed) => self.on_changed(&mut c, changed),
                _ = sleep_until(c.next_read.into()) => self.read_lease(&mut c, &api).await,
                // Disabled (never polled) while this process does not lead.
                _ = sleep_until(lead_until.unwrap_or_else(Instant::now).into()), if lead_until.is_some() => {}
                _ = sleep_until(c.build_at.into()), if waiting_to_build => {}
            }
        }
        self.step_down(c).await;
    }

    /// Leads or not, as the Lease last read says; returns when that leadership ends
    /// unless a renewal is seen first, so the loop wakes up to stop leading then.
    fn publish(&self, c: &Contention) -> Option<Instant> {
        let now = SystemTime::now();
        let verdict = verdict(
            c.observed.as_ref(),
            &self.identity,
            self.timings.margin,
            now,
        );
        self.set_leading(verdict.is_ok(), verdict.as_ref().err());
        self.healthy
            .store(c.manager.is_some() && c.read_ok, Ordering::Relaxed);
        verdict
            .ok()
            .map(|until| Instant::now() + until.duration_since(now).unwrap_or_default())
    }

    /// A lease manager was built, or could not be: follow it, or retry after a backoff.
    fn on_built(&self, c: &mut Contention, built: Built) {
        c.building = None;
        match built {
            Ok(Ok(m)) => {
                let m = Arc::new(m);
                c.manager = Some((m.clone(), Instant::now()));
                c.changed = Some(Box::pin(async move { m.changed().await }));
                c.believes = false;
            }
            failed => {
                let error = match failed {
                    Ok(Err(error)) => error.to_string(),
                    _ => "timed out".to_string(),
                };
                tracing::warn!(%error, lease = %self.lease(), "cannot start the lease manager; retrying");
                c.build_at = c.backoff.next_attempt();
            }
        }
    }

    /// The manager's view changed (confirm it with a read of our own at once), or the
    /// manager failed (replace it after a backoff).
    fn on_changed(&self, c: &mut Contention, changed: kube_lease_manager::Result<bool>) {
        match changed {
            Ok(holds) => {
                tracing::debug!(holds, "the lease manager's view changed");
                c.believes = holds;
                c.backoff.reset();
                if let Some((m, _)) = &c.manager {
                    let m = m.clone();
                    c.changed = Some(Box::pin(async move { m.changed().await }));
                }
                c.next_read = Instant::now();
            }
            Err(error) => {
                // Leadership, if any, lasts until its confirmed term ends; a fresh
                // manager carries on meanwhile.
                tracing::warn!(%error, lease = %self.lease(), "the lease manager failed; restarting it");
                c.changed = None;
                c.manager = None;
                c.build_at = c.backoff.next_attempt();
            }
        }
    }

    /// Reads the Lease (what leadership is decided on), and replaces a manager that
    /// would otherwise sleep through a Lease it should act on now.
    async fn read_lease(&self, c: &mut Contention, api: &Api<Lease>) {
        let t = self.timings;
        let read = timeout(t.request_timeout, api.get_opt(&self.config.name)).await;
        let failure = match read {
            Ok(Ok(lease)) => {
                if !c.read_ok {
                    tracing::debug!(lease = %self.lease(), "read the Lease");
                }
                c.observed = lease.as_ref().map(Observed::from_lease);
                None
            }
            Ok(Err(error)) => Some(error.to_string()),
            Err(_) => Some("timed out".to_string()),
        };
        if let Some(error) = &failure
            && c.read_ok
        {
            tracing::warn!(%error, lease = %self.lease(), "cannot read the Lease");
        }
        c.read_ok = failure.is_none();
        c.next_read = self.next_read(c.observed.as_ref());
        let now = SystemTime::now();
        if c.read_ok
            && let Some((_, since)) = &c.manager
            && since.elapsed() >= t.retry
            && needs_fresh_manager(c.observed.as_ref(), &self.identity, c.believes, now)
        {
            tracing::debug!(observed = ?c.observed, believes = c.believes, "restarting the lease manager to act on the Lease now");
            c.changed = None;
            c.manager = None;
            c.build_at = Instant::now();
        }
    }

    /// Graceful stop (the controllers have stopped): stop leading and give the Lease up
    /// if this process holds it, so a standby takes over within `retry`.
    async fn step_down(&self, c: Contention) {
        let Contention {
            manager,
            building,
            changed,
            observed,
            believes,
            ..
        } = c;
        // The manager's pending change first: it may hold state that `release` needs.
        drop((changed, building));
        self.set_leading(false, Some(&NotLeading::ShuttingDown));
        self.healthy.store(false, Ordering::Relaxed);
        let holds = observed.as_ref().is_some_and(|o| o.held_by(&self.identity)) || believes;
        if !holds {
            return;
        }
        let release = async {
            let m = match manager {
                Some((m, _)) => m,
                None => Arc::new(self.builder().build().await?),
            };
            m.release().await
        };
        // Within the pod's termination grace period (30 s in deployment.yaml).
        match timeout(self.timings.duration.min(RELEASE_TIMEOUT), release).await {
            Ok(Ok(())) => {
                tracing::info!(identity = %self.identity, lease = %self.lease(), "released the Lease");
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, lease = %self.lease(), "cannot release the Lease; it runs out at the end of its term");
            }
            Err(_) => {
                tracing::warn!(lease = %self.lease(), "releasing the Lease timed out; it runs out at the end of its term");
            }
        }
    }

    /// When to read the Lease next: every `retry`; the holder also just after its
    /// renewal is due, then often until it sees it.
    fn next_read(&self, observed: Option<&Observed>) -> Instant {
        let t = self.timings;
        let now = Instant::now();
        let regular = now + t.retry;
        let Some(o) = observed.filter(|o| o.held_by(&self.identity)) else {
            return regular;
        };
        let Some(due) = o.expiry().and_then(|e| e.checked_sub(t.grace)) else {
            return now + CONFIRM_EVERY;
        };
        let wait = (due + CONFIRM_EVERY)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        now + wait.clamp(CONFIRM_EVERY, t.retry)
    }
}

/// Doubling waits between attempts to start a lease manager, from `FIRST_BACKOFF` up to
/// the retry period.
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(max: Duration) -> Self {
        Self {
            next: FIRST_BACKOFF,
            max,
        }
    }

    /// When to try next; the wait after that doubles.
    fn next_attempt(&mut self) -> Instant {
        let at = Instant::now() + self.next;
        self.next = (self.next * 2).min(self.max);
        at
    }

    fn reset(&mut self) {
        self.next = FIRST_BACKOFF;
    }
}

async fn poll_pending<T>(f: &mut Pending<T>) -> T {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
