//! When this process last wrote each waiting claim's summary, for the coalescing rule of
//! [`crate::binding::coalesce`]: the rule is pure; the clock and the memory are here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::binding::ClaimKey;
use crate::binding::coalesce::summary_write_delay;

/// Entries kept before the first sweep of old ones.
const FIRST_SWEEP: usize = 1024;

pub struct SummaryWrites {
    interval: Duration,
    last: Mutex<Written>,
}

#[derive(Default)]
struct Written {
    at: HashMap<ClaimKey, Instant>,
    /// Sweep entries older than the interval once the map grows to this size: the cost
    /// stays amortised O(1) per write, and the map holds about the claims written within
    /// one interval.
    sweep_at: usize,
}

impl SummaryWrites {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: Mutex::new(Written {
                sweep_at: FIRST_SWEEP,
                ..Written::default()
            }),
        }
    }

    /// At most one summary write per claim per this interval; a waiting claim is looked
    /// at again after it.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How long a summary refresh of `key` must wait (`None`: write now).
    pub fn delay(&self, key: &ClaimKey) -> Option<Duration> {
        let since = self.last.lock().at.get(key).map(Instant::elapsed);
        summary_write_delay(since, self.interval)
    }

    /// Records that `key`'s summary was just written.
    pub fn wrote(&self, key: &ClaimKey) {
        let mut last = self.last.lock();
        last.at.insert(key.clone(), Instant::now());
        if last.at.len() >= last.sweep_at {
            let interval = self.interval;
            last.at.retain(|_, t| t.elapsed() < interval);
            last.sweep_at = (2 * last.at.len()).max(FIRST_SWEEP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_write_within_the_interval_waits() {
        let writes = SummaryWrites::new(Duration::from_secs(60));
        let key = ClaimKey::of("ns", "c");
        assert_eq!(writes.delay(&key), None, "never written: now");
        writes.wrote(&key);
        let wait = writes.delay(&key).expect("written just now: wait");
        assert!(wait > Duration::from_secs(59) && wait <= Duration::from_secs(60));
        assert_eq!(writes.delay(&ClaimKey::of("ns", "other")), None);
    }

    #[test]
    fn old_entries_are_swept_as_the_map_grows() {
        let writes = SummaryWrites::new(Duration::ZERO);
        for i in 0..3 * FIRST_SWEEP {
            writes.wrote(&ClaimKey::of("ns", &format!("c{i}")));
        }
        assert!(writes.last.lock().at.len() <= FIRST_SWEEP, "swept");
    }
}
