//! [`Backoff`]: a policy whose open periods double on each failed recovery.

use std::sync::Arc;
use std::time::Duration;

use super::{CallResult, Capabilities, LaneRoom, SuccessRecorder, TripPolicy};
use crate::counts::Counts;
use crate::error::ConfigError;
use crate::state::State;

/// Wraps a policy to open for a duration that doubles on each trip that follows a failed
/// recovery: `initial`, then twice that, and so on up to `max`, until the breaker closes again
/// (which starts over from `initial`). Made by [`TripPolicy::with_backoff`].
///
/// The wrapped policy still decides when to trip, sees every result and state change, and is
/// still asked for its own open duration (so a policy that keeps state there, like
/// [`Ema`](super::Ema), stays consistent); its answer is replaced by the backoff's.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{ConsecutiveFailures, TripPolicy};
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .policy(
///         ConsecutiveFailures::new(1)?
///             .with_backoff(Duration::from_secs(1), Duration::from_secs(60))?,
///     )
///     .clock(clock.clone())
///     .build();
/// let open_for = |breaker: &Breaker<_>| breaker.allow().unwrap_err().retry_after().unwrap();
///
/// breaker.allow().unwrap().failure();
/// assert_eq!(open_for(&breaker), Duration::from_secs(1));
/// clock.advance(Duration::from_secs(2));
/// breaker.allow().unwrap().failure(); // the probe fails: twice as long
/// assert_eq!(open_for(&breaker), Duration::from_secs(2));
/// clock.advance(Duration::from_secs(3));
/// breaker.allow().unwrap().success(); // recovered: the next trip starts over
/// assert_eq!(breaker.state(), State::Closed);
/// breaker.allow().unwrap().failure();
/// assert_eq!(open_for(&breaker), Duration::from_secs(1));
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Backoff<P> {
    inner: P,
    initial: Duration,
    max: Duration,
    /// The duration of the next open period.
    next: Duration,
}

impl<P: TripPolicy> Backoff<P> {
    /// `inner`, opening for `initial`, doubled on each trip after a failed recovery, at most
    /// `max`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `initial` when it is zero or exceeds `max`.
    pub fn new(inner: P, initial: Duration, max: Duration) -> Result<Self, ConfigError> {
        let show = |d: Duration| format!("{d:?}");
        if initial.is_zero() {
            return Err(ConfigError::new(
                "initial",
                show(initial),
                "must be above zero",
            ));
        }
        if initial > max {
            return Err(ConfigError::new(
                "initial",
                show(initial),
                "must not exceed `max`",
            ));
        }
        Ok(Self {
            inner,
            initial,
            max,
            next: initial,
        })
    }

    /// The wrapped policy.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The duration of the next open period.
    pub fn next_open_duration(&self) -> Duration {
        self.next
    }
}

impl<P: TripPolicy> TripPolicy for Backoff<P> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.inner.on_result(result)
    }

    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        self.inner.on_probe_result(result)
    }

    fn open_duration(&mut self, timeout: Duration, now: Duration) -> Duration {
        let _ = self.inner.open_duration(timeout, now);
        let open_for = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        open_for
    }

    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        self.inner.on_state_change(from, to, now);
        if to == State::Closed {
            self.next = self.initial;
        }
    }

    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        self.inner.lane_room(counts)
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        self.inner.half_open_probes(max_requests)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        self.inner.success_recorder()
    }

    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        self.inner.gauges(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ConsecutiveFailures;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn doubles_up_to_the_cap_and_starts_over_on_close() {
        let mut b = Backoff::new(ConsecutiveFailures::default(), S, 5 * S).unwrap();
        let seen: Vec<_> = (0..5).map(|_| b.open_duration(60 * S, S)).collect();
        assert_eq!(seen, [S, 2 * S, 4 * S, 5 * S, 5 * S]);
        b.on_state_change(State::HalfOpen, State::Closed, S);
        assert_eq!(b.open_duration(60 * S, S), S);
    }

    #[test]
    fn bad_bounds_are_named() {
        let err = Backoff::new(ConsecutiveFailures::default(), Duration::ZERO, S).unwrap_err();
        assert_eq!((err.field(), err.value()), ("initial", "0ns"));
        let err = Backoff::new(ConsecutiveFailures::default(), 2 * S, S).unwrap_err();
        assert_eq!(
            (err.field(), err.reason()),
            ("initial", "must not exceed `max`")
        );
    }
}
