//! The pure state machine: gobreaker v2's semantics as a function of `(state, event, now)`.
//!
//! Nothing here reads a clock, takes a lock or calls user code other than the policy: the
//! [`Breaker`](crate::Breaker) reads the clock, locks, and passes `now` in. Every time-based
//! change is evaluated lazily, at the start of each operation ([`Machine::refresh`]).

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use crate::clock::{saturating_nanos, Nanos};
use crate::counts::{Tally, Totals, Window};
use crate::lane::{LaneView, Pending};
use crate::policy::{CallResult, Outcome, TripPolicy};
use crate::{Counts, Rejected};

/// The state of a circuit breaker.
///
/// # Examples
///
/// ```
/// use lazybreaker::State;
///
/// assert_eq!(State::HalfOpen.to_string(), "half-open");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum State {
    /// Calls go through; results are counted and the policy decides when to trip.
    Closed,
    /// A limited number of probe calls go through; their results decide between closed and
    /// open.
    HalfOpen,
    /// Calls are rejected until the open duration has passed.
    Open,
}

impl State {
    /// The name gobreaker prints: `closed`, `half-open` or `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::HalfOpen => "half-open",
            State::Open => "open",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A state change, as delivered to `on_state_change`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transition {
    pub(crate) from: State,
    pub(crate) to: State,
}

/// Generations count modulo 2^30 (they share the lane's word with its counters). A result
/// is mistaken for a current one only if its permit was held across 2^30 state changes.
pub(crate) const GENERATION_MASK: u64 = (1 << 30) - 1;

/// What an admitted request carries to its result: the generation and window age it was
/// admitted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    age: u64,
    // A u64 although it fits 30 bits: a permit made of whole words only is copied as whole
    // words, without the partial stores around padding that stall a later load.
    generation: u64,
}

impl Ticket {
    /// A request admitted on the lock-free lane: no window age (the lane is fast only
    /// without a rolling window).
    pub(crate) fn fast(generation: u64) -> Self {
        Self { age: 0, generation }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// The most buckets a rolling window has. A bucket period that would need more is widened
/// to `ceil(interval / MAX_BUCKETS)`, which keeps the memory and the catch-up work of the
/// window bounded (gobreaker allocates `interval / bucket_period` buckets whatever they are).
pub const MAX_BUCKETS: u64 = 1024;

/// The breaker's timing knobs, after gobreaker's zero-means-default rules were applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// Probes admitted in half-open, and consecutive successes that close it; at least 1.
    max_requests: u64,
    /// The closed-state fixed window; 0 when counts are never cleared or the window rolls.
    interval: Nanos,
    /// The rolling window's bucket period; 0 for a fixed window.
    bucket_period: Nanos,
    /// Number of buckets of a rolling window (0 for a fixed window).
    buckets: u64,
    /// The configured open duration (before the policy's say).
    timeout: Nanos,
}

impl Timing {
    /// gobreaker's defaults: `max_requests` 0 means 1, `timeout` zero means 60 s, `interval`
    /// zero means counts are never cleared in closed (and `bucket_period` is then ignored).
    /// With a bucket period, the interval is rounded up to a whole number of buckets, at most
    /// [`MAX_BUCKETS`] of them; a window of one bucket is a fixed window of that length.
    pub(crate) fn new(
        max_requests: u32,
        interval: Duration,
        bucket_period: Duration,
        timeout: Duration,
    ) -> Self {
        let max_requests = u64::from(max_requests.max(1));
        let timeout = match saturating_nanos(timeout) {
            0 => saturating_nanos(Duration::from_secs(60)),
            t => t,
        };
        let interval = saturating_nanos(interval);
        let mut bucket_period = saturating_nanos(bucket_period);
        let (interval, bucket_period, buckets) = if interval == 0 || bucket_period == 0 {
            (interval, 0, 0)
        } else {
            if interval.div_ceil(bucket_period) > MAX_BUCKETS {
                bucket_period = interval.div_ceil(MAX_BUCKETS);
            }
            let buckets = interval.div_ceil(bucket_period);
            let window = buckets.saturating_mul(bucket_period);
            if buckets == 1 {
                (window, 0, 0)
            } else {
                (0, bucket_period, buckets)
            }
        };
        Self {
            max_requests,
            interval,
            bucket_period,
            buckets,
            timeout,
        }
    }
}

/// gobreaker's state machine over a trip policy.
#[derive(Debug)]
pub(crate) struct Machine<P> {
    timing: Timing,
    policy: P,
    state: State,
    generation: u64,
    /// Whether closed can count on the lock-free lane: no rolling window, and a policy that
    /// needs neither successes nor latencies.
    lane_eligible: bool,
    /// When the current generation started.
    start: Nanos,
    /// Closed with a fixed window: when the window ends. Open: when the open period ends.
    /// Both expire strictly after this instant. `Nanos::MAX` when nothing expires.
    expiry: Nanos,
    window: Window,
    totals: Totals,
    /// A panic from the policy, held while the machine finishes the step it was taking.
    panicked: Option<Box<dyn Any + Send>>,
}

impl<P: TripPolicy> Machine<P> {
    /// A closed machine in generation 1, started at `now`.
    pub(crate) fn new(timing: Timing, policy: P, now: Nanos) -> Self {
        let lane_eligible =
            timing.buckets == 0 && !policy.needs_latency() && !policy.needs_successes();
        let mut machine = Self {
            timing,
            policy,
            state: State::Closed,
            generation: 0,
            lane_eligible,
            start: now,
            expiry: Nanos::MAX,
            window: Window::rolling(timing.buckets as usize),
            totals: Totals::default(),
            panicked: None,
        };
        machine.new_generation(now);
        machine
    }

    pub(crate) fn state(&self) -> State {
        self.state
    }

    pub(crate) fn counts(&self) -> &Counts {
        self.window.counts()
    }

    pub(crate) fn totals(&self) -> &Totals {
        &self.totals
    }

    pub(crate) fn policy(&self) -> &P {
        &self.policy
    }

    /// A panic the policy raised during the last operation, if it did: the operation was
    /// completed with a neutral answer (no trip, the configured timeout) so the machine stays
    /// consistent, and the caller must now let the panic continue.
    pub(crate) fn take_panic(&mut self) -> Option<Box<dyn Any + Send>> {
        self.panicked.take()
    }

    /// What callers may do without the lock, given the current state.
    pub(crate) fn lane_view(&self) -> LaneView {
        match self.state {
            State::Closed if self.lane_eligible && self.timing.interval > 0 => LaneView::Windowed {
                generation: self.generation,
                until: self.expiry,
            },
            State::Closed if self.lane_eligible => LaneView::Fast {
                generation: self.generation,
            },
            State::Open => LaneView::Open { until: self.expiry },
            State::Closed | State::HalfOpen => LaneView::Locked,
        }
    }

    /// Folds in what the lock-free lane recorded: admissions and successes in closed, in
    /// the current generation, as if each had been recorded here in turn.
    pub(crate) fn absorb(&mut self, pending: Pending) {
        if pending.is_empty() {
            return;
        }
        debug_assert!(self.lane_eligible && self.state == State::Closed);
        self.window.absorb(pending.requests, pending.successes);
        self.totals.admitted += pending.requests;
        self.totals.successes += pending.successes;
    }

    /// Lazy evaluation of everything time-based (gobreaker's `currentState`): a closed fixed
    /// window that expired starts a new generation, a rolling window rolls, and an open period
    /// that expired goes half-open.
    pub(crate) fn refresh(&mut self, now: Nanos) -> Option<Transition> {
        match self.state {
            State::Closed => {
                if now > self.expiry {
                    self.new_generation(now);
                } else if self.window.is_rolling() {
                    let age = now.saturating_sub(self.start) / self.timing.bucket_period;
                    self.window.advance_to(age);
                }
                None
            }
            State::Open if now > self.expiry => Some(self.set_state(State::HalfOpen, now)),
            State::Open | State::HalfOpen => None,
        }
    }

    /// Admits a request or says why not.
    pub(crate) fn admit(&mut self, now: Nanos) -> (Result<Ticket, Rejected>, Option<Transition>) {
        let transition = self.refresh(now);
        let admitted = match self.state {
            State::Open => Err(Rejected::open_until(self.expiry, now)),
            State::HalfOpen if self.half_open_in_flight() >= self.half_open_probes() => {
                Err(Rejected::TooManyRequests)
            }
            State::Closed | State::HalfOpen => {
                self.window.on_request();
                self.totals.admitted += 1;
                Ok(Ticket {
                    generation: self.generation,
                    age: self.window.age(),
                })
            }
        };
        (admitted, transition)
    }

    /// How many probes half-open admits and how many successes close it.
    fn half_open_probes(&self) -> u64 {
        self.policy
            .half_open_probes(self.timing.max_requests)
            .max(1)
    }

    /// Probes that hold a half-open slot: excluded results give theirs back.
    fn half_open_in_flight(&self) -> u64 {
        let c = self.window.counts();
        c.requests.saturating_sub(c.total_exclusions)
    }

    /// Records the result of a request admitted with `ticket`. A result from an older
    /// generation (the lazy evaluation of this very call included) is dropped.
    pub(crate) fn complete(
        &mut self,
        ticket: Ticket,
        outcome: Outcome,
        latency: Option<Duration>,
        now: Nanos,
    ) -> Option<Transition> {
        let transition = self.refresh(now);
        if transition.is_some() || ticket.generation != self.generation {
            // Stale: every state change starts a new generation, this very one included.
            self.totals.dropped += 1;
            return transition;
        }
        let tally = match outcome {
            Outcome::Success => Tally::Success,
            Outcome::Failure => Tally::Failure,
            Outcome::Excluded => Tally::Exclusion,
        };
        match self.state {
            State::Closed => {
                // A result whose bucket rolled out of the window is not counted, but the
                // policy is still consulted on the current counts, as gobreaker does.
                self.record(ticket.age, tally);
                let result = CallResult::new(outcome, latency, self.window.counts(), at(now));
                let trips = guarded(&mut self.policy, &mut self.panicked, false, |p| {
                    p.on_result(&result)
                });
                trips.then(|| self.set_state(State::Open, now))
            }
            State::HalfOpen => {
                if outcome == Outcome::Failure {
                    self.totals.on_result(tally);
                } else {
                    self.record(ticket.age, tally);
                }
                let result = CallResult::new(outcome, latency, self.window.counts(), at(now));
                guarded(&mut self.policy, &mut self.panicked, (), |p| {
                    p.on_probe_result(&result)
                });
                match outcome {
                    Outcome::Failure => Some(self.set_state(State::Open, now)),
                    Outcome::Success
                        if self.window.counts().consecutive_successes
                            >= self.half_open_probes() =>
                    {
                        Some(self.set_state(State::Closed, now))
                    }
                    Outcome::Success | Outcome::Excluded => None,
                }
            }
            // Unreachable in practice: an open breaker admits nothing, and entering open
            // starts a new generation. Dropping the result is the safe answer.
            State::Open => None,
        }
    }

    /// Records a result in the window, and in the totals as counted or dropped.
    fn record(&mut self, age: u64, tally: Tally) {
        if self.window.record(age, tally) {
            self.totals.on_result(tally);
        } else {
            self.totals.dropped += 1;
        }
    }

    /// Moves to `to`. The policy is asked for the open duration before anything changes and
    /// told of the change after everything has.
    fn set_state(&mut self, to: State, now: Nanos) -> Transition {
        let from = self.state;
        debug_assert_ne!(from, to);
        let expiry = self.expiry_of(to, now);
        self.state = to;
        if to == State::Open {
            self.totals.opened += 1;
        }
        self.start_generation(now, expiry);
        guarded(&mut self.policy, &mut self.panicked, (), |p| {
            p.on_state_change(from, to, at(now))
        });
        Transition { from, to }
    }

    /// A new generation of the current state, e.g. when a closed-state window expires.
    fn new_generation(&mut self, now: Nanos) {
        let expiry = self.expiry_of(self.state, now);
        self.start_generation(now, expiry);
    }

    /// When a generation of `state` starting at `now` expires (strictly after the result).
    fn expiry_of(&mut self, state: State, now: Nanos) -> Nanos {
        match state {
            State::Closed if self.timing.interval > 0 => now.saturating_add(self.timing.interval),
            State::Closed | State::HalfOpen => Nanos::MAX,
            State::Open => {
                let timeout = Duration::from_nanos(self.timing.timeout);
                let open_for = guarded(&mut self.policy, &mut self.panicked, timeout, |p| {
                    p.open_duration(timeout, at(now))
                });
                now.saturating_add(saturating_nanos(open_for))
            }
        }
    }

    fn start_generation(&mut self, now: Nanos, expiry: Nanos) {
        self.generation = (self.generation + 1) & GENERATION_MASK;
        self.start = now;
        self.window.clear();
        self.expiry = expiry;
    }
}

/// Runs user code (a policy hook); if it panics, keeps the first panic in `panicked` and
/// answers `fallback`, so that the machine can finish its step before the panic continues.
/// A policy that panics must never leave the machine half-way (an open state without an
/// expiry, a half-open probe whose failure was never applied), which would reject for ever.
fn guarded<P, R>(
    policy: &mut P,
    panicked: &mut Option<Box<dyn Any + Send>>,
    fallback: R,
    hook: impl FnOnce(&mut P) -> R,
) -> R {
    match panic::catch_unwind(AssertUnwindSafe(|| hook(policy))) {
        Ok(answer) => answer,
        Err(payload) => {
            panicked.get_or_insert(payload);
            fallback
        }
    }
}

/// An instant on the breaker's clock, as policies see it.
fn at(now: Nanos) -> Duration {
    Duration::from_nanos(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ConsecutiveFailures;

    const MS: Nanos = 1_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn machine(timing: Timing, threshold: u64) -> Machine<ConsecutiveFailures> {
        Machine::new(timing, ConsecutiveFailures::new(threshold).unwrap(), 0)
    }

    #[test]
    fn zero_knobs_take_gobreakers_defaults() {
        let t = Timing::new(0, Duration::ZERO, ms(5), Duration::ZERO);
        assert_eq!(t.max_requests, 1);
        assert_eq!(t.timeout, 60_000 * MS);
        assert_eq!((t.interval, t.bucket_period, t.buckets), (0, 0, 0));
    }

    #[test]
    fn interval_rounds_up_to_whole_buckets() {
        let t = Timing::new(1, ms(1000), ms(300), ms(1));
        assert_eq!((t.bucket_period, t.buckets), (300 * MS, 4));
        // A bucket as long as the interval or longer is a fixed window of one bucket.
        let t = Timing::new(1, ms(1000), ms(1500), ms(1));
        assert_eq!((t.interval, t.buckets), (1500 * MS, 0));
    }

    #[test]
    fn bucket_count_is_bounded() {
        let t = Timing::new(1, Duration::from_secs(3600), Duration::from_nanos(1), ms(1));
        assert_eq!(t.buckets, MAX_BUCKETS);
        // 3600 s / 1024 rounded up to whole nanoseconds.
        assert_eq!(t.bucket_period, 3_515_625_000);
    }

    #[test]
    fn open_expires_strictly_after_the_timeout() {
        let mut m = machine(Timing::new(1, Duration::ZERO, Duration::ZERO, ms(10)), 1);
        let (ticket, _) = m.admit(0);
        let t = m.complete(ticket.unwrap(), Outcome::Failure, None, 0);
        assert_eq!(
            t,
            Some(Transition {
                from: State::Closed,
                to: State::Open
            })
        );
        let (r, t) = m.admit(10 * MS);
        assert_eq!(
            r,
            Err(Rejected::Open {
                retry_after: Duration::from_nanos(1)
            })
        );
        assert_eq!(t, None);
        let (r, t) = m.admit(10 * MS + 1);
        assert!(r.is_ok());
        assert_eq!(
            t,
            Some(Transition {
                from: State::Open,
                to: State::HalfOpen
            })
        );
    }

    #[test]
    fn half_open_admits_max_requests_and_exclusions_give_slots_back() {
        let mut m = machine(Timing::new(2, Duration::ZERO, Duration::ZERO, ms(1)), 1);
        let (t, _) = m.admit(0);
        m.complete(t.unwrap(), Outcome::Failure, None, 0);
        let (a, _) = m.admit(2 * MS);
        let (b, _) = m.admit(2 * MS);
        assert_eq!(m.admit(2 * MS).0, Err(Rejected::TooManyRequests));
        assert_eq!(
            m.complete(a.unwrap(), Outcome::Excluded, None, 2 * MS),
            None
        );
        let (c, _) = m.admit(2 * MS);
        assert!(c.is_ok());
        assert_eq!(m.complete(b.unwrap(), Outcome::Success, None, 2 * MS), None);
        assert_eq!(
            m.complete(c.unwrap(), Outcome::Success, None, 2 * MS),
            Some(Transition {
                from: State::HalfOpen,
                to: State::Closed
            })
        );
    }

    #[test]
    fn a_result_from_an_older_generation_is_dropped() {
        let mut m = machine(Timing::new(1, ms(10), Duration::ZERO, ms(1)), 1);
        let (t, _) = m.admit(0);
        // The fixed window expires strictly after 10 ms; the result arrives after that.
        assert_eq!(
            m.complete(t.unwrap(), Outcome::Failure, None, 11 * MS),
            None
        );
        assert_eq!(m.state(), State::Closed);
        assert_eq!(*m.counts(), Counts::default());
    }
}
