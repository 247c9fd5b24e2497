//! The Lease's term, as arithmetic: every delay derived from the lease duration, what a
//! read of the Lease says, and whether this process may lead on it. Pure: the elector
//! (`super`) does the reads and the waiting.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;

/// The default lease term, as client-go's.
pub const DEFAULT_LEASE_DURATION_SECS: u64 = 15;
/// The shortest term (kube-lease-manager needs a whole-second grace shorter than it).
pub const MIN_LEASE_DURATION_SECS: u64 = 2;

/// Every delay of the election, derived from the lease term `D`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// `D`: a candidate takes over a Lease not renewed for this long.
    pub duration: Duration,
    /// The holder renews this long before the term ends: `D/3` rounded up to whole
    /// seconds (kube-lease-manager's `grace`), so a renewal every two thirds of a term.
    pub grace: Duration,
    /// The holder stops leading this long before the term ends unless it has seen its
    /// renewal: `grace/2`. So it has `grace/2` to renew, and `grace/2` is left for the
    /// controllers to stop and for clock skew.
    pub margin: Duration,
    /// Every replica reads the Lease this often: `D/5`, at most 2 s (client-go's retry
    /// period). Bounds the takeover after a release.
    pub retry: Duration,
    /// The limit on each of this module's own requests: `min(retry, margin)`.
    pub request_timeout: Duration,
}

impl Timings {
    pub fn new(duration_secs: u64) -> Self {
        let secs = duration_secs.max(MIN_LEASE_DURATION_SECS);
        let duration = Duration::from_secs(secs);
        let grace = Duration::from_secs(secs.div_ceil(3));
        let margin = grace / 2;
        let retry = (duration / 5).min(Duration::from_secs(2));
        Self {
            duration,
            grace,
            margin,
            retry,
            request_timeout: retry.min(margin),
        }
    }
}

/// The Lease as last read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub holder: Option<String>,
    pub renewed: Option<SystemTime>,
    pub duration: Option<Duration>,
}

impl Observed {
    pub fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0.into()),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|d| u64::try_from(d).ok())
                .map(Duration::from_secs),
        }
    }

    /// When the term ends (`renewTime + leaseDurationSeconds`), if it has one.
    pub fn expiry(&self) -> Option<SystemTime> {
        self.renewed?.checked_add(self.duration?)
    }

    pub fn held_by(&self, identity: &str) -> bool {
        self.holder.as_deref() == Some(identity)
    }

    /// Free, or its term has run out: a candidate may take it.
    fn takeable(&self, now: SystemTime) -> bool {
        self.holder.is_none() || self.expiry().is_none_or(|e| now > e)
    }
}

/// Whether `identity` may lead `now` on what it last read of the Lease: until when, or
/// why not.
pub fn verdict(
    observed: Option<&Observed>,
    identity: &str,
    margin: Duration,
    now: SystemTime,
) -> Result<SystemTime, NotLeading> {
    let Some(o) = observed else {
        return Err(NotLeading::NoLease);
    };
    match &o.holder {
        None => return Err(NotLeading::Free),
        Some(h) if h != identity => return Err(NotLeading::HeldBy(h.clone())),
        Some(_) => {}
    }
    let until = o
        .expiry()
        .and_then(|e| e.checked_sub(margin))
        .ok_or(NotLeading::Unconfirmed)?;
    if now < until {
        Ok(until)
    } else {
        Err(NotLeading::Unconfirmed)
    }
}

/// Why a process does not lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotLeading {
    /// The Lease was not read yet, or does not exist.
    NoLease,
    /// Nobody holds it (released).
    Free,
    HeldBy(String),
    /// It names this process, but no renewal was seen in time (fail safe).
    Unconfirmed,
    ShuttingDown,
}

impl std::fmt::Display for NotLeading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoLease => f.write_str("the Lease has not been read"),
            Self::Free => f.write_str("the Lease is free"),
            Self::HeldBy(h) => write!(f, "the Lease is held by {h}"),
            Self::Unconfirmed => f.write_str(
                "the Lease's renewal was not confirmed before the end of its term (fail safe)",
            ),
            Self::ShuttingDown => f.write_str("shutting down"),
        }
    }
}

/// Whether the lease manager should be replaced by a fresh one, which reads the Lease
/// at once: when the Lease is missing (it creates it), when it may be taken (a manager
/// that saw it held sleeps until the end of the term it saw), when the manager thinks
/// it holds a Lease held by another, or when the Lease names this process but its term
/// ran out (the manager's renewals do not land: it may be stuck on a request).
pub fn needs_fresh_manager(
    observed: Option<&Observed>,
    identity: &str,
    believes: bool,
    now: SystemTime,
) -> bool {
    let Some(o) = observed else {
        return true;
    };
    if o.held_by(identity) {
        o.expiry().is_none_or(|e| now > e)
    } else {
        believes || o.takeable(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn timings_follow_the_term() {
        let t = Timings::new(15);
        assert_eq!(
            (t.duration, t.grace, t.margin, t.retry, t.request_timeout),
            (
                secs(15),
                secs(5),
                Duration::from_millis(2500),
                secs(2),
                secs(2)
            )
        );
        let t = Timings::new(3);
        assert_eq!(
            (t.grace, t.margin, t.retry, t.request_timeout),
            (
                secs(1),
                Duration::from_millis(500),
                Duration::from_millis(600),
                Duration::from_millis(500)
            )
        );
        let t = Timings::new(4);
        assert_eq!((t.grace, t.margin), (secs(2), secs(1)));
        for d in 2..=120 {
            let t = Timings::new(d);
            // kube-lease-manager panics unless 0 < grace < duration.
            assert!(
                t.grace > Duration::ZERO && t.grace < t.duration,
                "{d}: {t:?}"
            );
            assert!(t.margin < t.grace && t.retry < t.duration, "{d}: {t:?}");
        }
        assert_eq!(Timings::new(0).duration, secs(MIN_LEASE_DURATION_SECS));
    }

    fn lease(holder: Option<&str>, renewed: SystemTime, d: u64) -> Observed {
        Observed {
            holder: holder.map(str::to_owned),
            renewed: Some(renewed),
            duration: Some(secs(d)),
        }
    }

    #[test]
    fn leads_only_on_a_confirmed_term_of_its_own() {
        let r = SystemTime::UNIX_EPOCH + secs(1_000_000);
        let m = Duration::from_millis(500);
        let mine = lease(Some("me"), r, 3);
        assert_eq!(
            verdict(Some(&mine), "me", m, r + secs(1)),
            Ok(r + Duration::from_millis(2500))
        );
        assert_eq!(
            verdict(Some(&mine), "me", m, r + Duration::from_millis(2500)),
            Err(NotLeading::Unconfirmed)
        );
        assert_eq!(
            verdict(Some(&lease(Some("other"), r, 3)), "me", m, r),
            Err(NotLeading::HeldBy("other".into()))
        );
        assert_eq!(
            verdict(Some(&lease(None, r, 3)), "me", m, r),
            Err(NotLeading::Free)
        );
        assert_eq!(verdict(None, "me", m, r), Err(NotLeading::NoLease));
        let no_time = Observed {
            holder: Some("me".into()),
            ..Observed::default()
        };
        assert_eq!(
            verdict(Some(&no_time), "me", m, r),
            Err(NotLeading::Unconfirmed)
        );
    }

    #[test]
    fn a_fresh_manager_when_the_lease_can_be_taken_or_the_manager_is_wrong() {
        let r = SystemTime::UNIX_EPOCH + secs(1_000_000);
        let held = lease(Some("other"), r, 3);
        assert!(!needs_fresh_manager(Some(&held), "me", false, r + secs(2)));
        assert!(needs_fresh_manager(Some(&held), "me", false, r + secs(4)));
        assert!(needs_fresh_manager(Some(&held), "me", true, r + secs(2)));
        assert!(needs_fresh_manager(
            Some(&lease(None, r, 3)),
            "me",
            false,
            r
        ));
        assert!(needs_fresh_manager(None, "me", false, r));
        let mine = lease(Some("me"), r, 3);
        assert!(!needs_fresh_manager(Some(&mine), "me", true, r + secs(2)));
        assert!(!needs_fresh_manager(Some(&mine), "me", false, r + secs(2)));
        assert!(needs_fresh_manager(Some(&mine), "me", true, r + secs(4)));
    }
}
