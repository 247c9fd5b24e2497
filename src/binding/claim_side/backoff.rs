//! Claims whose writes the API server refused, and how they back off (docs/binding.md,
//! "Refused writes"). Pure data: the time is passed in.
//!
//! An admission webhook of the cluster's own, a quota, a policy engine or the object
//! size limit can refuse a claim's write for good. A claim retried at once would keep its
//! place in the fair order and re-assume its server on every retry: the claims behind it
//! would wait beside a free server. So, as kube-scheduler moves a pod that failed into
//! its back-off queue, a refused claim steps out of the queue:
//!
//! - its write is retried after an exponential back-off ([`backoff_after`]), kept in
//!   this process's memory ([`RefusedWrites`]);
//! - its status says so (`Bound` condition, reason [`WRITE_REFUSED`], with the API
//!   server's message). That status is the durable, controller-written mark every
//!   decision reads ([`backs_off`]): such a claim is not ahead of anyone in the fair
//!   order, wins no server, and a server whose controller-made ref holds it is rolled
//!   back. So it holds no server while it backs off, whichever write was refused.
//! - its next try rewrites its status first (a pick, a summary), and with it the mark.
//!
//! A server's write can be refused too (its annotations at the size limit): until the
//! server changes, a pick passes it over and a claim naming it says so
//! ([`RefusingServers`]).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::{CachedClaim, CachedServer};

use crate::binding::meta::{self, ClaimKey};
use crate::binding::reasons::PendingReason;
use crate::binding::state::status::find_bound;

/// The `Bound` condition reason, and the Warning event's, of a claim whose write was
/// refused and that backs off.
pub const WRITE_REFUSED: &str = PendingReason::WriteRefused.as_str();

/// The first back-off after a refusal.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest back-off: a claim fixed by its tenant is retried within this long.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How long a claim backs off after its `count`-th refusal in a row (1, 2, 4 … seconds,
/// at most [`MAX_BACKOFF`]).
pub fn backoff_after(count: u32) -> Duration {
    let doublings = count.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

/// Whether the claim's status marks it as backing off after a refused write (and it
/// records no bind: a bound claim never backs off). Only controllers write status, so a
/// tenant can neither set nor clear the mark.
pub fn backs_off(claim: &CachedClaim) -> bool {
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    status.bound_server_ref.is_none()
        && find_bound(&status.conditions).is_some_and(|c| c.reason == WRITE_REFUSED)
}

/// One claim's refusals in a row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// The incarnation of the claim refused (a claim re-created under its name starts
    /// afresh).
    pub uid: Option<String>,
    /// Refusals since the claim last was bound.
    pub count: u32,
    /// When the claim may be tried again.
    pub until: Timestamp,
    /// What the refused write was for (the decision's name, e.g. `PickBestFit`).
    pub write: &'static str,
    /// Whether it was the write completing a bind (`CompleteBind`): the claim
    /// then gives back the server that holds its uid.
    pub completing: bool,
    /// The API server's answer.
    pub message: String,
}

impl Refusal {
    /// What the claim's condition and event say. It leaves out the count and the time,
    /// so a claim refused again with the same answer is not written again (the metric
    /// counts every refusal).
    pub fn describe(&self) -> String {
        format!(
            "the API server refused this claim's update ({}): {}; the controller retries with a back-off of up to {}s and holds no server meanwhile",
            self.write,
            self.message,
            MAX_BACKOFF.as_secs()
        )
    }
}

/// The claims that back off, by key. Entries end when the claim is deleted, re-created
/// or bound; an expired one keeps its count, so a claim refused again backs off longer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RefusedWrites {
    by_claim: BTreeMap<ClaimKey, Refusal>,
}

impl RefusedWrites {
    /// The claim's write (`write`: a decision's name, and whether it completes a bind) was
    /// refused at `now` with `message`.
    pub fn refused(
        &mut self,
        claim: &CachedClaim,
        (write, completing): (&'static str, bool),
        message: &str,
        now: Timestamp,
    ) {
        let key = ClaimKey::of(meta::namespace(claim), meta::name(claim));
        let uid = meta::uid(claim).map(str::to_string);
        let count = match self.by_claim.get(&key) {
            Some(r) if r.uid == uid => r.count + 1,
            _ => 1,
        };
        let back_off =
            SignedDuration::try_from(backoff_after(count)).unwrap_or(SignedDuration::MAX);
        let refusal = Refusal {
            uid,
            count,
            until: now.saturating_add(back_off).unwrap_or(now),
            write,
            completing,
            message: message.to_string(),
        };
        self.by_claim.insert(key, refusal);
    }

    /// The claim's refusal if it still backs off at `now`.
    pub fn backing_off(&self, key: &ClaimKey, now: Timestamp) -> Option<&Refusal> {
        self.by_claim.get(key).filter(|r| r.until > now)
    }

    /// The claims that back off at `now` (few: only refused ones).
    pub fn held_back(&self, now: Timestamp) -> Vec<ClaimKey> {
        let active = self.by_claim.iter().filter(|(_, r)| r.until > now);
        active.map(|(k, _)| k.clone()).collect()
    }

    /// Ends the claim's back-off now, keeping its count (for a driver that moves time in
    /// steps of its own, like the model check).
    pub fn expire(&mut self, key: &ClaimKey, now: Timestamp) {
        if let Some(r) = self.by_claim.get_mut(key) {
            r.until = r.until.min(now);
        }
    }

    /// A claim watch event (`None`: deleted): a claim gone, re-created, or bound starts
    /// afresh.
    pub fn observe_claim(&mut self, key: &ClaimKey, claim: Option<&CachedClaim>) {
        let Some(r) = self.by_claim.get(key) else {
            return;
        };
        let fresh = claim.is_none_or(|c| {
            meta::uid(c) != r.uid.as_deref()
                || c.status
                    .as_ref()
                    .is_some_and(|s| s.bound_server_ref.is_some())
        });
        if fresh {
            self.by_claim.remove(key);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_claim.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ClaimKey, &Refusal)> {
        self.by_claim.iter()
    }
}

/// The servers whose last write by the server controller the API server refused (an
/// annotation or object size limit, an admission webhook), each until it changes: an
/// admin's fix is a new resourceVersion. A claim naming such a server is told so, and a
/// pick passes it over (docs/binding.md, "Refused writes").
#[derive(Clone, Debug, Default)]
pub struct RefusingServers {
    by_name: BTreeMap<String, ServerRefusal>,
}

#[derive(Clone, Debug)]
struct ServerRefusal {
    /// The version of the server the refused write was made from.
    version: Option<String>,
    /// The API server's answer.
    message: String,
    /// When the server is tried again even if nothing changed (a webhook that refused
    /// for a while).
    until: Timestamp,
}

/// How long a server whose write was refused is passed over if it does not change.
pub const SERVER_REFUSAL_HOLD: Duration = Duration::from_secs(60);

impl RefusingServers {
    /// A write made from `server` as it was was refused at `now` with `message`.
    pub fn refused(&mut self, server: &CachedServer, message: &str, now: Timestamp) {
        let hold = SignedDuration::try_from(SERVER_REFUSAL_HOLD).unwrap_or(SignedDuration::ZERO);
        let refusal = ServerRefusal {
            version: server.meta().resource_version.clone(),
            message: message.to_string(),
            until: now.saturating_add(hold).unwrap_or(now),
        };
        self.by_name.insert(meta::name(server).to_string(), refusal);
    }

    /// The server changed (`None`: gone); true if that ends its refusal.
    pub fn observe(&mut self, name: &str, server: Option<&CachedServer>) -> bool {
        let Some(r) = self.by_name.get(name) else {
            return false;
        };
        let changed = server.is_none_or(|s| s.meta().resource_version != r.version);
        if changed {
            self.by_name.remove(name);
        }
        changed
    }

    /// What the API server said when it refused the server's last write, if it did and
    /// the hold has not ended at `now`.
    pub fn message(&self, name: &str, now: Timestamp) -> Option<&str> {
        let r = self.by_name.get(name).filter(|r| now < r.until)?;
        Some(r.message.as_str())
    }

    pub fn contains(&self, name: &str, now: Timestamp) -> bool {
        self.message(name, now).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServerClaimSpec;
    use kube::api::ObjectMeta;

    fn server(version: &str) -> CachedServer {
        CachedServer::from(crate::api::Server {
            metadata: ObjectMeta {
                name: Some("s0".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        })
    }

    #[test]
    fn a_refusing_server_is_held_until_it_changes_or_the_hold_ends() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut r = RefusingServers::default();
        r.refused(&server("7"), "too long (422)", t0);
        assert_eq!(r.message("s0", t0), Some("too long (422)"));
        assert!(!r.observe("s0", Some(&server("7"))), "the same version");
        assert!(r.contains("s0", t0 + SignedDuration::from_secs(59)));
        assert!(
            !r.contains("s0", t0 + SignedDuration::from_secs(60)),
            "the hold ended"
        );
        assert!(r.observe("s0", Some(&server("8"))), "an admin's fix");
        assert!(!r.contains("s0", t0));
        r.refused(&server("8"), "denied (403)", t0);
        assert!(r.observe("s0", None), "gone");
        assert!(!r.contains("s0", t0));
    }

    fn claim(uid: &str) -> CachedClaim {
        CachedClaim::from(crate::api::ServerClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("c".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: ServerClaimSpec::default(),
            status: None,
        })
    }

    #[test]
    fn back_off_doubles_up_to_its_cap() {
        let secs: Vec<u64> = (1..=8).map(|n| backoff_after(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff_after(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn refusals_in_a_row_back_off_longer_until_the_claim_starts_afresh() {
        let t0 = Timestamp::UNIX_EPOCH;
        let key = ClaimKey::of("ns", "c");
        let mut r = RefusedWrites::default();
        r.refused(&claim("u1"), ("PickBestFit", false), "too big", t0);
        assert!(r.backing_off(&key, t0).is_some());
        let t1 = t0 + SignedDuration::from_secs(1);
        assert!(
            r.backing_off(&key, t1).is_none(),
            "one second, then retried"
        );
        r.refused(&claim("u1"), ("PickBestFit", false), "too big", t1);
        assert_eq!(r.backing_off(&key, t1).map(|r| r.count), Some(2));
        assert!(
            r.backing_off(&key, t1 + SignedDuration::from_secs(1))
                .is_some()
        );
        assert_eq!(r.held_back(t1), vec![key.clone()]);
        r.observe_claim(&key, Some(&claim("u2")));
        assert!(r.is_empty(), "a re-created claim starts afresh");
    }
}
