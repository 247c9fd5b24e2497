//! The periodic resync, a safety net that convergence does not rely on (docs/binding.md,
//! "Wake-up rules"): every object is woken once per interval, a share each tick
//! ([`crate::binding::triggers::on_resync_tick`]), instead of each reconcile asking
//! kube-runtime to requeue its object after the interval. Those requests stayed queued,
//! one per object, and were a fifth of the operator's heap.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::binding::ResyncCursor;

use super::context::Context;

/// How often the resync wakes its next share.
const TICK: Duration = Duration::from_secs(1);

/// Wakes every object once per `interval`, a share per second, until `stop` is
/// cancelled. A pass starts at the first key when the controllers start (they have just
/// woken everything, so the first share waits a tick).
pub async fn run(ctx: Arc<Context>, interval: Duration, stop: CancellationToken) {
    let ticks = ticks_per_pass(interval);
    let mut cursor = ResyncCursor::default();
    let mut clock = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
    clock.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = clock.tick() => ctx.caches.resync_tick(&mut cursor, ticks),
        }
    }
}

/// The ticks in one pass: at least one.
fn ticks_per_pass(interval: Duration) -> u32 {
    let ticks = interval.as_millis() / TICK.as_millis();
    u32::try_from(ticks).unwrap_or(u32::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_takes_the_interval_in_whole_ticks() {
        assert_eq!(ticks_per_pass(Duration::from_secs(300)), 300);
        assert_eq!(ticks_per_pass(Duration::from_millis(2500)), 2);
        assert_eq!(ticks_per_pass(Duration::ZERO), 1);
    }
}
