//! When a waiting claim's summary may be rewritten ([`crate::binding::protocol::coalesce`]): the memory of
//! when this binder last wrote each claim's summary. Pure data: the time is passed in.
//!
//! A binder that has not written a claim's summary counts from its own start, so a
//! restarted controller does not rewrite every waiting claim's summary at once: each is
//! refreshed within one interval of the start, like any other.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::binding::meta::ClaimKey;

/// Entries kept before the first sweep of old ones.
const FIRST_SWEEP: usize = 1024;

#[derive(Clone, Debug)]
pub struct SummaryClock {
    interval: Duration,
    started: Timestamp,
    at: HashMap<ClaimKey, Timestamp>,
    /// Sweep entries older than the interval once the map grows to this size: the cost
    /// stays amortised O(1) per write, and the map holds about the claims written within
    /// one interval.
    sweep_at: usize,
}

impl SummaryClock {
    pub fn new(interval: Duration, started: Timestamp) -> Self {
        Self {
            interval,
            started,
            at: HashMap::new(),
            sweep_at: FIRST_SWEEP,
        }
    }

    /// At most one summary write per claim per this interval; a waiting claim is looked
    /// at again after it.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How long a summary refresh of `key` must wait at `now` (`None`: write now).
    pub fn delay(&self, key: &ClaimKey, now: Timestamp) -> Option<Duration> {
        let last = self.at.get(key).copied().unwrap_or(self.started);
        summary_write_delay(Some(elapsed(last, now)), self.interval)
    }

    /// Records that `key`'s summary was written at `now`.
    pub fn wrote(&mut self, key: &ClaimKey, now: Timestamp) {
        self.at.insert(key.clone(), now);
        if self.at.len() >= self.sweep_at {
            let interval = self.interval;
            self.at.retain(|_, t| elapsed(*t, now) < interval);
            self.sweep_at = (2 * self.at.len()).max(FIRST_SWEEP);
        }
    }

    /// How many claims' last writes are remembered (for tests).
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }
}

/// Time from `then` to `now`; zero if the clock went back.
fn elapsed(then: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// How long a summary refresh waits, given how long ago this process last wrote the
/// claim's summary (`None`: not since it started): `None` to write now.
pub fn summary_write_delay(since_last: Option<Duration>, interval: Duration) -> Option<Duration> {
    let since_last = since_last?;
    (since_last < interval).then(|| interval - since_last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_second_write_within_the_interval_waits() {
        let mut clock = SummaryClock::new(Duration::from_secs(60), at(0));
        let key = ClaimKey::of("ns", "c");
        assert_eq!(
            clock.delay(&key, at(60)),
            None,
            "an interval after the start"
        );
        clock.wrote(&key, at(60));
        assert_eq!(clock.delay(&key, at(61)), Some(Duration::from_secs(59)));
        assert_eq!(clock.delay(&key, at(120)), None);
    }

    #[test]
    fn a_fresh_binder_counts_from_its_start() {
        let clock = SummaryClock::new(Duration::from_secs(10), at(0));
        let key = ClaimKey::of("ns", "c");
        assert_eq!(clock.delay(&key, at(4)), Some(Duration::from_secs(6)));
        assert_eq!(clock.delay(&key, at(10)), None);
    }

    #[test]
    fn old_entries_are_swept_as_the_map_grows() {
        let mut clock = SummaryClock::new(Duration::ZERO, at(0));
        for i in 0..3 * FIRST_SWEEP {
            clock.wrote(&ClaimKey::of("ns", &format!("c{i}")), at(1));
        }
        assert!(clock.len() <= FIRST_SWEEP, "swept");
    }

    const TEN: Duration = Duration::from_secs(10);

    #[test]
    fn the_first_summary_and_a_late_one_are_written_at_once() {
        assert_eq!(summary_write_delay(None, TEN), None);
        assert_eq!(summary_write_delay(Some(TEN), TEN), None);
        assert_eq!(
            summary_write_delay(Some(Duration::from_secs(11)), TEN),
            None
        );
    }

    #[test]
    fn an_early_refresh_waits_out_the_interval() {
        let delay = summary_write_delay(Some(Duration::from_secs(3)), TEN);
        assert_eq!(delay, Some(Duration::from_secs(7)));
    }

    #[test]
    fn a_zero_interval_never_waits() {
        assert_eq!(
            summary_write_delay(Some(Duration::ZERO), Duration::ZERO),
            None
        );
    }
}
