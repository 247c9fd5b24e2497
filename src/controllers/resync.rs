//! Waking every object without queueing them all at once: the controllers' start
//! ([`crate::binding::wakeups::on_start_step`]), a share at a time as the controllers
//! take them up, then the periodic resync, a safety net that convergence does not rely
//! on (docs/binding.md, "Wake-up rules"): every object once per interval, a share each
//! tick ([`crate::binding::wakeups::on_resync_tick`]), instead of each reconcile asking
//! kube-runtime to requeue its object after the interval. Every object woken at once sat
//! queued in kube-runtime's scheduler until its turn, with three copies of its key.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::binding::ResyncCursor;

use super::context::Context;

/// How often the resync wakes its next share.
const TICK: Duration = Duration::from_secs(1);
/// How many objects of each kind the start wakes per step: many times the controllers'
/// concurrency, so they never run dry, and few next to a fleet.
const START_SHARE: usize = 256;
/// The start wakes its next share once the controllers have begun this many reconciles
/// since the last (half a step: a step is a share of each kind)...
const START_REFILL: u64 = START_SHARE as u64;
/// ... or this long after it: the objects of a step may be gone, and a reconcile of a
/// deleted object never begins.
const START_STEP_MAX: Duration = Duration::from_secs(1);
/// How often the start looks whether the controllers have taken up its last step.
const START_POLL: Duration = Duration::from_millis(5);

/// Wakes every object, a share at a time as the controllers take them up, then every
/// object once per `interval`, a share per second, until `stop` is cancelled.
pub async fn run(ctx: Arc<Context>, interval: Duration, stop: CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => return,
        _ = start(&ctx) => {}
    }
    let ticks = ticks_per_pass(interval);
    let mut cursor = ResyncCursor::default();
    let mut clock = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
    clock.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = clock.tick() => ctx.informer.resync_tick(&mut cursor, ticks),
        }
    }
}

/// The controllers' start: every object woken, [`START_SHARE`] of each kind per step,
/// the next step once the controllers have taken up half of the last.
async fn start(ctx: &Context) {
    let mut cursor = ResyncCursor::default();
    loop {
        let begun = ctx.informer.reconciles_begun();
        if !ctx.informer.start_step(&mut cursor, START_SHARE) {
            return;
        }
        let deadline = tokio::time::Instant::now() + START_STEP_MAX;
        while ctx.informer.reconciles_begun() < begun + START_REFILL
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(START_POLL).await;
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
