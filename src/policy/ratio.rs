//! [`FailureRatio`]: trips on a share of failures, once enough requests were made.

use super::{CallResult, Capabilities, LaneRoom, Outcome, TripPolicy};
use crate::counts::Counts;
use crate::error::{ConfigError, Number};

/// Trips when the share of failed requests reaches a ratio, once enough requests were seen.
///
/// After a failure, it trips when `requests >= min_requests` and
/// `total_failures / requests >= ratio`, computed in `f64` exactly as gobreaker's documented
/// example does. `requests` counts every request admitted in the current generation,
/// including those still in flight and excluded ones.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::FailureRatio;
/// use lazybreaker::{Breaker, State};
///
/// // Half of the calls failing, over at least 4 calls.
/// let breaker = Breaker::builder().policy(FailureRatio::new(0.5, 4)?).build();
/// let _ = breaker.execute(|| Ok::<_, &str>(()));
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// let _ = breaker.execute(|| Ok::<_, &str>(()));
/// assert_eq!(breaker.state(), State::Closed);
/// let _ = breaker.execute(|| Err::<(), _>("boom")); // 2 of 4
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureRatio {
    ratio: f64,
    min_requests: u64,
}

impl FailureRatio {
    /// Trips at `ratio` (within `[0, 1]`) of failures once `min_requests` requests were
    /// admitted in the current generation.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `ratio` when it is NaN or outside `[0, 1]`.
    pub fn new(ratio: f64, min_requests: u64) -> Result<Self, ConfigError> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(ConfigError::new(
                "ratio",
                Number(ratio),
                "must be within [0, 1]",
            ));
        }
        Ok(Self {
            ratio,
            min_requests,
        })
    }

    /// The failure ratio that trips the breaker.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The number of requests needed before the ratio is considered.
    pub fn min_requests(&self) -> u64 {
        self.min_requests
    }
}

impl TripPolicy for FailureRatio {
    #[inline]
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        let c = result.counts;
        result.outcome == Outcome::Failure
            && c.requests >= self.min_requests
            && c.total_failures as f64 / c.requests as f64 >= self.ratio
    }

    /// Only the counts after a failure matter: successes may be counted without the lock.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().needs_successes(false)
    }

    /// The requests only grow until the lane is next republished (a new window or bucket
    /// republishes it), so `failures / requests` stays at most `f / counts.requests` for `f`
    /// failures: the failures may grow while that stays below the ratio, in the same
    /// floating-point division `on_result` makes (division is monotonic in both operands). It
    /// trips on failures only: successes are quiet.
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        LaneRoom::NONE
            .failures(self.room_below_ratio(counts))
            .quiet_successes(true)
    }
}

impl FailureRatio {
    /// How many more failures from `counts` stay below the ratio (see
    /// [`lane_room`](TripPolicy::lane_room)).
    fn room_below_ratio(&self, counts: &Counts) -> u64 {
        if counts.requests == 0 {
            return 0;
        }
        let requests = counts.requests as f64;
        let below = |failures: u64| (failures as f64 / requests) < self.ratio;
        // The estimate is within one of the answer; rounding may leave it one too high. A few
        // steps down at most (this runs under the lock): past them, no room.
        let mut most = ((self.ratio * requests).ceil() as u64).saturating_sub(1);
        for _ in 0..4 {
            if most <= counts.total_failures || below(most) {
                break;
            }
            most -= 1;
        }
        if below(most) {
            most.saturating_sub(counts.total_failures)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counts::Counts;
    use std::time::Duration;

    fn counts(requests: u64, failures: u64) -> Counts {
        Counts {
            requests,
            total_failures: failures,
            consecutive_failures: failures,
            ..Counts::default()
        }
    }

    #[test]
    fn trips_at_the_ratio_once_the_minimum_is_reached() {
        let mut p = FailureRatio::new(0.25, 8).unwrap();
        let fail = |p: &mut FailureRatio, r, f| {
            p.on_result(&CallResult::new(
                Outcome::Failure,
                None,
                &counts(r, f),
                Duration::ZERO,
            ))
        };
        assert!(!fail(&mut p, 4, 4), "below min_requests");
        assert!(!fail(&mut p, 9, 2), "2/9 < 0.25");
        assert!(fail(&mut p, 8, 2), "2/8 == 0.25");
        assert!(!p.on_result(&CallResult::new(
            Outcome::Success,
            None,
            &counts(8, 8),
            Duration::ZERO
        )));
    }

    #[test]
    fn zero_requests_never_trip() {
        // 0/0 is NaN, which compares false: an out-of-window failure with nothing counted.
        let mut p = FailureRatio::new(0.0, 0).unwrap();
        assert!(!p.on_result(&CallResult::new(
            Outcome::Failure,
            None,
            &counts(0, 0),
            Duration::ZERO
        )));
    }

    #[test]
    fn ratios_outside_unit_interval_are_rejected_by_name() {
        for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let err = FailureRatio::new(bad, 1).unwrap_err();
            assert_eq!(err.field(), "ratio", "{bad}");
        }
        assert!(FailureRatio::new(0.0, 1).is_ok());
        assert!(FailureRatio::new(1.0, 1).is_ok());
    }
}
