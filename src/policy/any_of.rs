//! [`AnyOf`]: trips when either of two policies trips (`a.or(b)`).

use std::sync::Arc;
use std::time::Duration;

use super::{CallResult, Capabilities, LaneRoom, SuccessRecorder, TripPolicy};
use crate::counts::Counts;
use crate::state::State;

/// Trips when either of two policies trips; made by [`TripPolicy::or`].
///
/// Both policies see every result (neither is short-circuited, so each keeps its own view of
/// the traffic) and every state change. The open duration is the one chosen by the policy
/// that tripped (the longer one if both tripped on the same result); when the breaker reopens
/// from half-open, where no policy tripped, both are asked and the longer duration wins.
/// Half-open admits as many probes as the larger of the two asks for.
///
/// Chain [`or`](TripPolicy::or) for more than two: `a.or(b).or(c)`.
///
/// # Examples
///
/// ```
/// use lazybreaker::policy::{ConsecutiveFailures, FailureRatio, TripPolicy};
/// use lazybreaker::{Breaker, State};
///
/// let policy = ConsecutiveFailures::new(3)?.or(FailureRatio::new(0.5, 10)?);
/// let breaker = Breaker::builder().policy(policy).build();
/// for _ in 0..3 {
///     let _ = breaker.execute(|| Err::<(), _>("boom"));
/// }
/// assert_eq!(breaker.state(), State::Open); // the consecutive failures tripped it
/// # Ok::<(), lazybreaker::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct AnyOf<A, B> {
    first: A,
    second: B,
    /// Which of the two tripped on the last result: `(first, second)`.
    tripped: (bool, bool),
}

impl<A: TripPolicy, B: TripPolicy> AnyOf<A, B> {
    /// Trips when `first` or `second` trips.
    pub fn new(first: A, second: B) -> Self {
        Self {
            first,
            second,
            tripped: (false, false),
        }
    }

    /// The first policy.
    pub fn first(&self) -> &A {
        &self.first
    }

    /// The second policy.
    pub fn second(&self) -> &B {
        &self.second
    }
}

impl<A: TripPolicy, B: TripPolicy> TripPolicy for AnyOf<A, B> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        let first = self.first.on_result(result);
        let second = self.second.on_result(result);
        self.tripped = (first, second);
        first || second
    }

    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        self.first.on_probe_result(result);
        self.second.on_probe_result(result);
    }

    fn open_duration(&mut self, timeout: Duration, now: Duration) -> Duration {
        let (first, second) = std::mem::take(&mut self.tripped);
        // Reopening from half-open: nobody tripped, so everyone has a say.
        let (first, second) = if first || second {
            (first, second)
        } else {
            (true, true)
        };
        let a = first.then(|| self.first.open_duration(timeout, now));
        let b = second.then(|| self.second.open_duration(timeout, now));
        a.max(b).unwrap_or(timeout)
    }

    /// The room both leave: see [`LaneRoom::both`].
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        self.first
            .lane_room(counts)
            .both(self.second.lane_room(counts))
    }

    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        self.first.on_state_change(from, to, now);
        self.second.on_state_change(from, to, now);
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        self.first
            .half_open_probes(max_requests)
            .max(self.second.half_open_probes(max_requests))
    }

    /// What either needs: see [`Capabilities::either`].
    fn capabilities(&self) -> Capabilities {
        self.first.capabilities().either(self.second.capabilities())
    }

    /// A recorder when each policy either ignores successes or records them without the lock
    /// (both recorders then take each success); none if either needs to see successes
    /// under the lock.
    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        let (first, second) = (lane_side(&self.first), lane_side(&self.second));
        match (first.ok()?, second.ok()?) {
            (Some(a), Some(b)) => Some(Arc::new(Both(a, b))),
            (a, b) => a.or(b),
        }
    }

    /// Both policies' figures (a name both report is reported twice: the second wins).
    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        self.first.gauges(report);
        self.second.gauges(report);
    }
}

/// Two recorders, each taking every success.
#[derive(Debug)]
struct Both(Arc<dyn SuccessRecorder>, Arc<dyn SuccessRecorder>);

impl SuccessRecorder for Both {
    fn record_success(&self, latency: Option<Duration>) {
        self.0.record_success(latency);
        self.1.record_success(latency);
    }
}

/// What one side of an [`AnyOf`] makes of closed-state successes: `Ok` with its recorder, or
/// with none if it ignores successes; `Err` if it must see them under the lock. Its
/// capabilities are asked only if it has no recorder.
fn lane_side<P: TripPolicy>(policy: &P) -> Result<Option<Arc<dyn SuccessRecorder>>, ()> {
    match policy.success_recorder() {
        Some(recorder) => Ok(Some(recorder)),
        None if !policy.capabilities().needs_successes => Ok(None),
        None => Err(()),
    }
}
