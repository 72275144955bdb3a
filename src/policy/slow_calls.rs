//! [`SlowCalls`]: trips on a share of slow calls (resilience4j's and Sentinel's slow-call rule).

use std::time::Duration;

use super::{CallResult, Capabilities, LaneRoom, Outcome, TripPolicy};
use crate::counts::Counts;
use crate::error::{ConfigError, Number};

/// Trips when too many calls are slow: a call slower than `threshold` is slow, and after
/// any result the breaker trips when `slow_calls / requests >= ratio` with at least
/// `min_requests` requests in the current window (Sentinel's `SlowRequestRatio`,
/// resilience4j's slow-call rate). A slow dependency that never errors, or a stuck process
/// whose TCP still answers (brpc's E1008), is the case it is for.
///
/// - **What is slow:** a success or a failure whose latency (admission to result, on the
///   breaker's clock) exceeds `threshold`; it is counted in
///   [`Counts::slow_calls`](crate::Counts::slow_calls), which rolls with the window's
///   buckets like every count. A failure is a failure too (as in resilience4j); combine
///   with [`FailureRatio`](super::FailureRatio) through [`or`](TripPolicy::or) to trip on
///   either.
/// - **Half-open:** a slow probe counts as failed and reopens the breaker.
/// - **Calls in flight count too.** The breaker keeps the calls in flight in admission
///   order (for this policy only: it takes the lock and reads the clock on every call
///   anyway), so when a call arrives, every call still outstanding for longer than
///   `threshold` is counted as slow then, and may trip the breaker, before it returns (if
///   ever: a stalled dependency is caught without a deadline). With zero timers this happens
///   when a call arrives, not at the moment the threshold passes. A call so counted is not
///   counted again when it returns; in half-open, an overdue probe has failed.
/// - It measures latency, so the breaker reads the clock at every admission and every
///   call takes the lock (the lock-free lane is for policies that need neither). Its
///   latencies need be right to within a hundredth of `threshold` only
///   ([`Capabilities::latency_resolution`]): a breaker given no clock of its own reads the
///   coarse one (2.6 ns a read, 1 to 4 ms ticks on Linux) when it ticks that finely, e.g.
///   for a threshold of 400 ms or more with 4 ms ticks, else the precise one (13 ns).
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::SlowCalls;
/// use lazybreaker::{Breaker, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// // Half of the calls slower than 1 s, over at least 4 calls.
/// let breaker = Breaker::builder()
///     .policy(SlowCalls::new(Duration::from_secs(1), 0.5, 4)?)
///     .clock(clock.clone())
///     .build();
/// for latency in [100, 1_500, 200, 2_000] {
///     let permit = breaker.allow().unwrap();
///     clock.advance(Duration::from_millis(latency));
///     permit.success(); // successes, but 2 of 4 slow
/// }
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowCalls {
    threshold: Duration,
    ratio: f64,
    min_requests: u64,
    latency_alone: bool,
}

impl SlowCalls {
    /// Slow above `threshold` (more than zero); trips at `ratio` (within `[0, 1]`) of slow
    /// calls once `min_requests` requests were admitted in the current window.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `threshold` when it is zero, `ratio` when it is NaN or outside
    /// `[0, 1]`.
    pub fn new(threshold: Duration, ratio: f64, min_requests: u64) -> Result<Self, ConfigError> {
        if threshold.is_zero() {
            return Err(ConfigError::new(
                "threshold",
                format!("{threshold:?}"),
                "must be more than zero",
            ));
        }
        if !(0.0..=1.0).contains(&ratio) {
            return Err(ConfigError::new(
                "ratio",
                Number(ratio),
                "must be within [0, 1]",
            ));
        }
        Ok(Self {
            threshold,
            ratio,
            min_requests,
            latency_alone: false,
        })
    }

    /// Judges half-open probes on latency alone, as Sentinel's slow-call strategy does: a
    /// probe that failed but was not slow counts as a success (it may close the breaker).
    /// By default (resilience4j's way) any failed probe reopens it. In the closed state the
    /// two agree: only the share of slow calls trips this policy.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::SlowCalls;
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let policy = SlowCalls::new(Duration::from_secs(1), 0.5, 1)?.judging_probes_on_latency_alone();
    /// let breaker = Breaker::builder().policy(policy).clock(clock.clone()).build();
    /// let slow = breaker.allow().unwrap();
    /// clock.advance(Duration::from_secs(2));
    /// slow.success(); // slow: trips
    /// clock.advance(Duration::from_secs(61));
    /// breaker.allow().unwrap().failure(); // a fast failed probe: judged on latency, a success
    /// assert_eq!(breaker.state(), State::Closed);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    #[must_use]
    pub fn judging_probes_on_latency_alone(mut self) -> Self {
        self.latency_alone = true;
        self
    }

    /// Whether half-open probes are judged on latency alone
    /// ([`judging_probes_on_latency_alone`](Self::judging_probes_on_latency_alone)).
    pub fn probes_on_latency_alone(&self) -> bool {
        self.latency_alone
    }

    /// The latency above which a call is slow.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }

    /// The share of slow calls that trips the breaker.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The number of requests needed before the ratio is considered.
    pub fn min_requests(&self) -> u64 {
        self.min_requests
    }
}

impl TripPolicy for SlowCalls {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        let c = result.counts;
        (result.outcome != Outcome::Excluded || result.in_flight)
            && c.requests >= self.min_requests
            && c.requests > 0
            && c.slow_calls as f64 / c.requests as f64 >= self.ratio
    }

    /// Latencies and a threshold; every success, since a slow success can trip it.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .needs_latency(true)
            .needs_successes(true)
            .slow_call_threshold(self.threshold)
            .probes_on_latency_alone(self.latency_alone)
            // A latency right to within a hundredth of the threshold decides as well.
            .latency_resolution(self.threshold / 100)
    }

    /// Below its ratio, no fast success trips it: the slow calls grow only under the lock,
    /// and admissions only lower their share (a correctly rounded division is monotonic).
    /// No failure (a slow-call threshold shows the policy every failure anyway).
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        let (requests, slow) = (counts.requests, counts.slow_calls);
        let quiet = if requests == 0 {
            slow == 0 && self.ratio > 0.0
        } else {
            // The very comparison `on_result` makes, negated (no NaN here: the ratio is
            // checked).
            (slow as f64 / requests as f64) < self.ratio
        };
        LaneRoom::NONE.quiet_successes(quiet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;

    #[test]
    fn invalid_knobs_are_refused_by_name() {
        let zero = SlowCalls::new(Duration::ZERO, 0.5, 1).unwrap_err();
        assert_eq!(zero.field(), "threshold");
        let ratio = SlowCalls::new(Duration::from_secs(1), 1.5, 1).unwrap_err();
        assert_eq!(ratio.field(), "ratio");
    }

    #[test]
    fn trips_on_the_share_of_slow_calls() {
        let mut p = SlowCalls::new(Duration::from_secs(1), 0.5, 4).unwrap();
        let at = |requests, slow| {
            Counts::default()
                .with_requests(requests)
                .with_slow_calls(slow)
        };
        let trips = |p: &mut SlowCalls, c: &Counts| {
            p.on_result(&CallResult::new(Outcome::Success, None, c, Duration::ZERO))
        };
        assert!(!trips(&mut p, &at(3, 3)), "below the minimum");
        assert!(!trips(&mut p, &at(4, 1)));
        assert!(trips(&mut p, &at(4, 2)));
        let excluded = at(4, 2);
        assert!(!p.on_result(&CallResult::new(
            Outcome::Excluded,
            None,
            &excluded,
            Duration::ZERO
        )));
    }
}
