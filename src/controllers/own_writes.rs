//! The controllers' own writes that their watch has not delivered yet.
//!
//! A plan may write an object twice (its spec, then its status), and the watch delivers
//! the first write while the second is in flight. The event wakes the object, and a
//! reconcile that started from that intermediate version would decide again on an object
//! older than what this process just wrote: its write is bound to fail with a conflict
//! (about half of all binds did, at fleet scale). So each successful write is recorded
//! here with the resourceVersion it produced, until the watch delivers that version; a
//! reconcile of an object still behind its own write waits for the watch instead.
//!
//! This only skips work that would fail: the decision, made once the watch catches up,
//! is the same. A record the watch never clears (the watch relisted, or an event was
//! lost) stops counting after [`OWN_WRITE_WAIT`], and a relist clears them all.
//!
//! The watch asks too what each delivery is against these writes ([`Delivered`]): the
//! delivery of an own write need not wake the object when its step there changes
//! nothing, and a version a later own write (done or in flight) supersedes need not wake
//! it at all ([`crate::binding::Settles`]). So writes in flight are counted as well,
//! from the request to its answer: of a plan's two writes, the first comes back while
//! the second is on its way.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a reconcile waits for the watch to deliver this process's own write before
/// deciding on what the cache shows anyway.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// What a watch event delivered, as against this process's last write of the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// The version this process wrote: its own write, come back.
    Written,
    /// A version a later write of this process supersedes: one it wrote since, or
    /// one it is writing (whose answer or failure is yet to come).
    Before,
    /// Anything else: no write of this process waits for it, or a later version or a
    /// deletion ends the wait.
    Other,
}

/// One kind's own writes in flight through the watch, by object key.
#[derive(Debug, Default)]
pub struct OwnWrites {
    pending: HashMap<String, (String, Instant)>,
    /// Writes sent and not answered yet, by object key ([`OwnWrites::began`]).
    writing: HashMap<String, Flight>,
}

/// An object's writes in flight.
#[derive(Debug, Default)]
struct Flight {
    count: u32,
    /// The last version the watch delivered meanwhile: perhaps a write's own, come back
    /// before its answer.
    delivered: Option<String>,
}

impl OwnWrites {
    /// Records that this process wrote `key`, producing `version`.
    pub fn wrote(&mut self, key: String, version: String, at: Instant) {
        self.pending.insert(key, (version, at));
    }

    /// This process sends a write of `key`; [`OwnWrites::ended`] follows, whatever
    /// becomes of it.
    pub fn began(&mut self, key: &str) {
        self.writing.entry(key.to_string()).or_default().count += 1;
    }

    /// A write of `key` begun earlier was answered with `version`, or failed or was
    /// dropped (`None`). True if the watch delivered that version (or a later one)
    /// before the answer came: that delivery counted as [`Delivered::Before`] and woke
    /// nobody for the object, so the writer must look at it again.
    pub fn ended(&mut self, key: &str, version: Option<String>, at: Instant) -> bool {
        let mut seen = None;
        if let Some(flight) = self.writing.get_mut(key) {
            flight.count -= 1;
            seen = flight.delivered.clone();
            if flight.count == 0 {
                self.writing.remove(key);
            }
        }
        let Some(version) = version else {
            return false;
        };
        let came_back = seen.is_some_and(|seen| {
            seen == version
                || numeric(&seen)
                    .zip(numeric(&version))
                    .is_some_and(|(s, v)| s > v)
        });
        if !came_back {
            self.wrote(key.to_string(), version, at);
        }
        came_back
    }

    /// The watch delivered `key` at `version` (`None`: deleted). Delivering the version
    /// written, a later one, or a deletion, ends the wait.
    ///
    /// While a write of `key` is in flight, whatever is delivered is
    /// [`Delivered::Before`]: the write lands after it, and the watch delivers it, or
    /// its answer finds it delivered ([`OwnWrites::ended`]), or it fails, and its
    /// reconcile goes again.
    pub fn delivered(&mut self, key: &str, version: Option<&str>) -> Delivered {
        let Some(version) = version else {
            self.pending.remove(key);
            return Delivered::Other;
        };
        if let Some(flight) = self.writing.get_mut(key) {
            flight.delivered = Some(version.to_string());
            self.catch_up(key, version);
            return Delivered::Before;
        }
        let Some((written, _)) = self.pending.get(key) else {
            return Delivered::Other;
        };
        if written == version {
            self.pending.remove(key);
            return Delivered::Written;
        }
        match numeric(version).zip(numeric(written)) {
            Some((v, w)) if v < w => Delivered::Before,
            Some(_) => {
                self.pending.remove(key);
                Delivered::Other
            }
            // Opaque versions cannot be ordered: the wait goes on, as in `behind`.
            None => Delivered::Other,
        }
    }

    /// Ends the wait for `key` if `version` is the one written or a later one.
    fn catch_up(&mut self, key: &str, version: &str) {
        let caught_up = self.pending.get(key).is_some_and(|(written, _)| {
            written == version
                || numeric(version)
                    .zip(numeric(written))
                    .is_some_and(|(v, w)| v > w)
        });
        if caught_up {
            self.pending.remove(key);
        }
    }

    /// Whether a look at `key` now can wait for this process's own write of it: one in
    /// flight, or answered less than [`OWN_WRITE_WAIT`] ago and not delivered yet. Its
    /// delivery (or its failure, or [`OwnWrites::ended`]) looks at the object again, on
    /// everything the watch delivered up to then.
    pub fn awaits(&self, key: &str, now: Instant) -> bool {
        self.writing.contains_key(key)
            || self
                .pending
                .get(key)
                .is_some_and(|(_, at)| now.duration_since(*at) < OWN_WRITE_WAIT)
    }

    /// A relist: the watch shows the latest of everything.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Whether a reconcile of `key` at `cached` (its resourceVersion in the cache)
    /// should wait for the watch: this process wrote a later version less than
    /// [`OWN_WRITE_WAIT`] ago.
    pub fn behind(&mut self, key: &str, cached: Option<&str>, now: Instant) -> bool {
        let Some((written, at)) = self.pending.get(key) else {
            return false;
        };
        if now.duration_since(*at) >= OWN_WRITE_WAIT {
            self.pending.remove(key);
            return false;
        }
        match (cached.and_then(numeric), numeric(written)) {
            // Versions are etcd revisions in practice, and the PV controller compares them
            // as numbers too: a newer version (someone wrote after this process, and its
            // event came before this write's response) is not behind.
            (Some(cached), Some(written)) => cached < written,
            _ => cached != Some(written.as_str()),
        }
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no write of this process is in flight or awaited.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.writing.is_empty()
    }
}

pub(crate) fn numeric(version: &str) -> Option<u64> {
    version.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconcile_waits_until_the_watch_delivers_the_write() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        own.wrote("c".into(), "4".into(), t0);
        assert!(
            own.behind("c", Some("3"), t0),
            "the spec write's event, status in flight"
        );
        own.delivered("c", Some("3"));
        assert!(
            own.behind("c", Some("3"), t0),
            "an older version does not end the wait"
        );
        own.delivered("c", Some("4"));
        assert!(!own.behind("c", Some("4"), t0));
        assert!(own.is_empty());
    }

    #[test]
    fn a_delivery_says_what_it_is_against_the_own_writes() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        assert_eq!(
            own.delivered("c", Some("1")),
            Delivered::Other,
            "none written"
        );
        own.began("c");
        assert!(!own.ended("c", Some("4".into()), t0), "answered first");
        assert_eq!(own.delivered("c", Some("3")), Delivered::Before);
        assert_eq!(own.delivered("c", Some("4")), Delivered::Written);
        assert!(own.is_empty());

        // The object write answered, the status write in flight: the first is superseded.
        own.began("c");
        own.ended("c", Some("6".into()), t0);
        own.began("c");
        assert_eq!(own.delivered("c", Some("6")), Delivered::Before);
        // The status write delivered before its answer: the answer must look again.
        assert_eq!(own.delivered("c", Some("7")), Delivered::Before);
        assert!(
            own.ended("c", Some("7".into()), t0),
            "delivered before its answer"
        );
        assert!(own.is_empty());
    }

    #[test]
    fn an_object_awaits_its_write_in_flight_and_answered_until_delivered() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        own.began("c");
        assert!(own.awaits("c", t0) && !own.awaits("d", t0));
        own.ended("c", Some("2".into()), t0);
        assert!(own.awaits("c", t0), "answered, not delivered");
        assert!(!own.awaits("c", t0 + OWN_WRITE_WAIT), "nor after the wait");
        assert_eq!(own.delivered("c", Some("2")), Delivered::Written);
        assert!(!own.awaits("c", t0));

        own.began("c");
        assert!(
            !own.ended("c", None, t0),
            "failed: its reconcile goes again"
        );
        assert!(!own.awaits("c", t0));
        assert_eq!(
            own.delivered("c", Some("3")),
            Delivered::Other,
            "someone else's"
        );
    }

    #[test]
    fn other_objects_and_the_written_version_do_not_wait() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        own.wrote("c".into(), "4".into(), t0);
        assert!(!own.behind("d", Some("1"), t0));
        assert!(!own.behind("c", Some("4"), t0));
        assert!(
            !own.behind("c", Some("5"), t0),
            "a later write by someone else"
        );
        own.wrote("o".into(), "x2".into(), t0);
        assert!(
            own.behind("o", Some("x3"), t0),
            "opaque versions: any other is behind"
        );
    }

    #[test]
    fn a_deletion_a_relist_or_time_ends_the_wait() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        own.wrote("a".into(), "2".into(), t0);
        own.delivered("a", None);
        assert!(!own.behind("a", Some("1"), t0));

        own.wrote("b".into(), "2".into(), t0);
        own.clear();
        assert!(!own.behind("b", Some("1"), t0));

        own.wrote("c".into(), "2".into(), t0);
        assert!(own.behind("c", Some("1"), t0 + OWN_WRITE_WAIT / 2));
        assert!(!own.behind("c", Some("1"), t0 + OWN_WRITE_WAIT));
        assert_eq!(own.len(), 0, "an expired record is dropped");
    }
}
