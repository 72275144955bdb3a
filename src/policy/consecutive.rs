//! [`ConsecutiveFailures`]: trips on a run of failures (the default policy).

use super::{CallResult, Capabilities, LaneRoom, Outcome, TripPolicy};
use crate::counts::Counts;
use crate::error::ConfigError;

/// Trips when the number of consecutive failures reaches a threshold.
///
/// The default threshold is 6, which is gobreaker's default `ReadyToTrip`
/// (`ConsecutiveFailures > 5`).
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::ConsecutiveFailures;
/// use lazybreaker::{Breaker, State};
///
/// let breaker = Breaker::builder()
///     .policy(ConsecutiveFailures::new(3)?)
///     .build();
/// for _ in 0..2 {
///     let _ = breaker.execute(|| Err::<(), _>("boom"));
/// }
/// assert_eq!(breaker.state(), State::Closed);
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsecutiveFailures {
    threshold: u64,
}

impl ConsecutiveFailures {
    /// gobreaker's default threshold: trip on the sixth consecutive failure.
    pub const DEFAULT_THRESHOLD: u64 = 6;

    /// Trips on the `threshold`-th consecutive failure.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `threshold` when it is zero (a breaker cannot trip before its
    /// first failure).
    pub fn new(threshold: u64) -> Result<Self, ConfigError> {
        if threshold == 0 {
            return Err(ConfigError::new(
                "threshold",
                threshold,
                "must be at least 1",
            ));
        }
        Ok(Self { threshold })
    }

    /// The number of consecutive failures that trips the breaker.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }
}

impl Default for ConsecutiveFailures {
    fn default() -> Self {
        Self {
            threshold: Self::DEFAULT_THRESHOLD,
        }
    }
}

impl TripPolicy for ConsecutiveFailures {
    #[inline]
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        result.outcome == Outcome::Failure && result.counts.consecutive_failures >= self.threshold
    }

    /// Only the counts after a failure matter: successes may be counted without the lock.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .needs_successes(false)
            .reads_requests(false)
    }

    /// Each failure adds one to the run at most: the run may grow to one below the threshold.
    /// It trips on failures only: successes are quiet.
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        LaneRoom::NONE
            .failures(
                self.threshold
                    .saturating_sub(1)
                    .saturating_sub(counts.consecutive_failures),
            )
            .quiet_successes(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;
    use std::time::Duration;

    fn failures(n: u64) -> Counts {
        Counts {
            requests: n,
            total_failures: n,
            consecutive_failures: n,
            ..Counts::default()
        }
    }

    #[test]
    fn default_is_gobreakers_more_than_five() {
        let mut p = ConsecutiveFailures::default();
        assert!(!p.on_result(&CallResult::new(
            Outcome::Failure,
            None,
            &failures(5),
            Duration::ZERO
        )));
        assert!(p.on_result(&CallResult::new(
            Outcome::Failure,
            None,
            &failures(6),
            Duration::ZERO
        )));
    }

    #[test]
    fn only_a_failure_can_trip() {
        let mut p = ConsecutiveFailures::new(1).unwrap();
        let c = failures(3);
        assert!(!p.on_result(&CallResult::new(Outcome::Success, None, &c, Duration::ZERO)));
        assert!(!p.on_result(&CallResult::new(
            Outcome::Excluded,
            None,
            &c,
            Duration::ZERO
        )));
        assert!(p.on_result(&CallResult::new(Outcome::Failure, None, &c, Duration::ZERO)));
    }

    #[test]
    fn zero_threshold_is_rejected_by_name() {
        let err = ConsecutiveFailures::new(0).unwrap_err();
        assert_eq!(err.field(), "threshold");
        assert_eq!(err.value(), "0");
    }
}
