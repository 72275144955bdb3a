//! [`ReadyToTrip`]: gobreaker's `ReadyToTrip` closure over the counts, as a policy.

use std::fmt;

use super::{CallResult, Capabilities, Outcome, TripPolicy};
use crate::counts::Counts;

/// gobreaker's `ReadyToTrip`: a closure over the [`Counts`], consulted after each failure in
/// the closed state (never after a success or an exclusion, never in half-open).
///
/// [`Builder::ready_to_trip`](crate::Builder::ready_to_trip) wraps a closure in this policy.
/// The closure runs under the breaker's lock: keep it quick and do not call the breaker from
/// it.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Counts, State};
///
/// let breaker = Breaker::builder()
///     .ready_to_trip(|c: &Counts| c.requests >= 3 && c.total_failures * 2 > c.requests)
///     .build();
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Closed); // only 2 requests
/// let _ = breaker.execute(|| Err::<(), _>("boom"));
/// assert_eq!(breaker.state(), State::Open);
/// ```
pub struct ReadyToTrip<F> {
    ready: F,
}

impl<F> ReadyToTrip<F>
where
    F: FnMut(&Counts) -> bool + Send,
{
    /// A policy that trips when `ready` returns `true` after a failure.
    pub fn new(ready: F) -> Self {
        Self { ready }
    }
}

impl<F> fmt::Debug for ReadyToTrip<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyToTrip").finish_non_exhaustive()
    }
}

impl<F> TripPolicy for ReadyToTrip<F>
where
    F: FnMut(&Counts) -> bool + Send,
{
    #[inline]
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        result.outcome == Outcome::Failure && (self.ready)(result.counts)
    }

    /// Only the counts after a failure matter: successes may be counted without the lock.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().needs_successes(false)
    }
}
