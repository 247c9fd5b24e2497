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

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a reconcile waits for the watch to deliver this process's own write before
/// deciding on what the cache shows anyway.
pub const OWN_WRITE_WAIT: Duration = Duration::from_secs(2);

/// One kind's own writes in flight through the watch, by object key.
#[derive(Debug, Default)]
pub struct OwnWrites {
    pending: HashMap<String, (String, Instant)>,
}

impl OwnWrites {
    /// Records that this process wrote `key`, producing `version`.
    pub fn wrote(&mut self, key: String, version: String, at: Instant) {
        self.pending.insert(key, (version, at));
    }

    /// The watch delivered `key` at `version` (`None`: deleted). Delivering the version
    /// written, or a deletion, ends the wait.
    pub fn delivered(&mut self, key: &str, version: Option<&str>) {
        let caught_up = match (self.pending.get(key), version) {
            (None, _) => return,
            (Some(_), None) => true,
            (Some((written, _)), Some(v)) => {
                written == v || numeric(v).zip(numeric(written)).is_some_and(|(v, w)| v > w)
            }
        };
        if caught_up {
            self.pending.remove(key);
        }
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

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
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
