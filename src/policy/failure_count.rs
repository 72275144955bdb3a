//! [`FailureCount`]: trips on a number of failures within the window.

use super::{CallResult, Capabilities, LaneRoom, Outcome, TripPolicy};
use crate::counts::Counts;
use crate::error::ConfigError;

/// Trips on a number of failures in the current window, once enough requests were seen
/// (Sentinel's `ErrorCount`).
///
/// After a failure, it trips when `total_failures >= failures` and `requests >= min_requests`
/// in the current generation (the breaker's `interval`, fixed or rolling). The minimum guards
/// against an absolute count misfiring at high traffic or tripping on the first few calls;
/// use [`FailureRatio`](super::FailureRatio) where the share matters more than the number.
/// Successes need not be seen (the lock-free lane counts them when the window does not
/// roll).
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::FailureCount;
/// use lazybreaker::{Breaker, State};
///
/// // 3 failures among at least 10 calls.
/// let breaker = Breaker::builder().policy(FailureCount::new(3, 10)?).build();
/// for _ in 0..7 {
///     breaker.execute(|| Ok::<_, &str>(())).unwrap();
/// }
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Closed);
/// let _ = breaker.execute(|| Err::<(), _>("boom")); // 3 failures, 10 calls
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FailureCount {
    failures: u64,
    min_requests: u64,
}

impl FailureCount {
    /// Trips on `failures` failures (at least 1) once `min_requests` requests were admitted
    /// in the current generation.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `failures` when it is zero.
    pub fn new(failures: u64, min_requests: u64) -> Result<Self, ConfigError> {
        if failures == 0 {
            return Err(ConfigError::new("failures", failures, "must be at least 1"));
        }
        Ok(Self {
            failures,
            min_requests,
        })
    }

    /// The number of failures that trips the breaker.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// The number of requests needed before the failures are considered.
    pub fn min_requests(&self) -> u64 {
        self.min_requests
    }
}

impl TripPolicy for FailureCount {
    #[inline]
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        let c = result.counts;
        result.outcome == Outcome::Failure
            && c.total_failures >= self.failures
            && c.requests >= self.min_requests
    }

    /// Only the counts after a failure matter: successes may be counted without the lock.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().needs_successes(false)
    }

    /// The failures may grow to one below the count, whatever the requests. It trips on
    /// failures only: successes are quiet.
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        LaneRoom::NONE
            .failures(
                self.failures
                    .saturating_sub(1)
                    .saturating_sub(counts.total_failures),
            )
            .quiet_successes(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;
    use std::time::Duration;

    fn result(outcome: Outcome, requests: u64, failures: u64) -> bool {
        let counts = Counts::default()
            .with_requests(requests)
            .with_total_failures(failures);
        let mut p = FailureCount::new(3, 10).unwrap();
        p.on_result(&CallResult::new(outcome, None, &counts, Duration::ZERO))
    }

    #[test]
    fn trips_on_the_count_once_the_minimum_is_reached() {
        assert!(!result(Outcome::Failure, 9, 3), "below the minimum");
        assert!(!result(Outcome::Failure, 10, 2), "below the count");
        assert!(result(Outcome::Failure, 10, 3));
        assert!(!result(Outcome::Success, 10, 3), "only a failure trips");
    }

    #[test]
    fn zero_failures_is_refused_by_name() {
        assert_eq!(FailureCount::new(0, 5).unwrap_err().field(), "failures");
    }
}
