//! Trip policies: what decides that a closed breaker opens, and for how long.
//!
//! A [`TripPolicy`] sees the results the breaker records in the closed state (every one,
//! unless its [`Capabilities`] say that successes do not interest it), with the counts after that result
//! and, when the policy asks for it, the call's latency. It answers
//! whether to trip, and chooses how long each open period lasts.
//!
//! | policy | trips when |
//! |---|---|
//! | [`ConsecutiveFailures::new(n)`](ConsecutiveFailures::new) | the `n`-th consecutive failure (the default: 6, gobreaker's `> 5`) |
//! | [`FailureRatio::new(ratio, min_requests)`](FailureRatio::new) | `total_failures / requests >= ratio`, once `requests >= min_requests` |
//! | [`FailureCount::new(failures, min_requests)`](FailureCount::new) | `failures` failures, once `requests >= min_requests` (Sentinel's `ErrorCount`) |
//! | [`SlowCalls::new(threshold, ratio, min_requests)`](SlowCalls::new) | `slow_calls / requests >= ratio`, once `requests >= min_requests`, a call slower than `threshold` being slow, calls still in flight past it included (Sentinel's `SlowRequestRatio`); a slow probe fails |
//! | [`ReadyToTrip`] (`.ready_to_trip(\|c: &Counts\| ...)` on the builder) | a closure over [`Counts`] returns `true` after a failure (gobreaker's `ReadyToTrip`) |
//! | [`Ema`] | brpc's latency-weighted error cost exceeds its budget in a long or a short window; opens for brpc's doubling isolation duration (100 ms to 30 s by default) |
//! | [`AnyOf`] | any of two policies trips (`a.or(b)`); opens for the duration the tripping one chooses |
//! | [`Backoff`] | the wrapped policy trips (`p.with_backoff(initial, max)`); opens for `initial`, doubled on each failed recovery up to `max` |
//! | your own [`TripPolicy`] | it sees every outcome (with its latency when its [`Capabilities`] ask for it), and can choose the open duration |
//!
//! The constructors check their parameters: a ratio outside `[0, 1]` or a zero threshold is
//! a [`ConfigError`] that names the field.
//!
//! Whatever the policy, a call reported [`Outcome::Fatal`] (the connection is dead) opens the
//! breaker at once; [`classify::io_errors`](crate::classify::io_errors) reports a refused or
//! unreachable connection so. `cargo run --example brpc_style` composes brpc's default on
//! real loopback sockets: a refused connection trips at once, three connect timeouts in a
//! row trip (`ConsecutiveFailures::new(3)?.or(ema)`).
//!
//! brpc's algorithm is also available without a breaker, as the sans-IO [`EmaRecorder`] a
//! load balancer can keep per endpoint; it replays the 334 scenarios recorded from brpc's own
//! `circuit_breaker.cpp` bit for bit (`tests/conformance/conformance_brpc.rs`).
//!
//! # How fast each trips
//!
//! `cargo run --example compare_policies` prints how many calls after the onset of a failure
//! pattern each policy lets through before it trips, after 5 000 healthy calls of 1 ms, with
//! a 10 s closed-state window ("never": not within 20 000 calls):
//!
//! | pattern | 6 in a row | 20% of ≥100 | 5 of ≥100 | half slower than 1 s, ≥5 | brpc EMA | 20% or slow |
//! |---|---|---|---|---|---|---|
//! | timeouts: every call fails after 5 ms | 6 | 1101 | 5 | never | 77 | 1101 |
//! | fast errors: every call refused in 100 µs | 6 | 1250 | 5 | never | 1531 | 1250 |
//! | degraded: 1 call in 4 fails, at 2 ms | never | 2602 | 18 | never | 468 | 2602 |
//! | slow: every call succeeds, in 2 s | never | never | never | 8 | never | 8 |
//! | blip: 1 call in 500 fails, 100 µs each | never | never | 2500 | never | never | never |
//!
//! Only the slow-call policy sees a dependency that slows down without failing. An absolute
//! count ([`FailureCount`]) trips on a 0.2% blip at high traffic where a ratio does not. The
//! healthy calls still in the window dilute a ratio (1 101 calls to reach 20% here), which a
//! rolling window (`bucket_period`) shortens. The EMA weighs each failure by its latency
//! against the average success latency: slow failures (timeouts) add up fast, fast failures
//! barely count.
//!
//! # Policies run under the lock
//!
//! The breaker calls its policy while it holds its state lock, so that the decision and the
//! transition it causes are one atomic step. A policy (a `ready_to_trip` closure included)
//! must therefore be quick, must not block, and must not call back into the breaker: a call
//! back into the same breaker would deadlock.
//!
//! A failure the policy's [`lane_room`](TripPolicy::lane_room) says cannot
//! trip it may be counted without the lock and without `on_result` (an uncontended
//! breaker's lock-free lane does so): the counts the policy sees next include it. The
//! policies here answer how far they are from their threshold; a policy of your own keeps
//! the default (every failure shown) unless it decides on the counts alone.
//!
//! A policy that panics does not leave the breaker half-way through a step: the breaker
//! finishes it with a neutral answer (no trip; the configured `timeout` for an open period;
//! `max_requests` probes) and then lets the panic continue to the caller. The panic is never
//! swallowed. A policy's [`SuccessRecorder`] is the one part of it that runs outside the lock
//! (it takes closed-state successes on the lock-free lane), and may run on many threads at
//! once. Everything else the user gives the breaker (the wrapped call, the clock,
//! `on_state_change` and the observers, a classifier) runs outside the lock, except the
//! closure given to [`Breaker::inspect_policy`](crate::Breaker::inspect_policy).

mod any_of;
mod backoff;
mod capabilities;
mod consecutive;
mod ema;
mod failure_count;
mod lane_room;
mod ratio;
mod ready_to_trip;
mod slow_calls;
mod success_recorder;

pub use any_of::AnyOf;
pub use backoff::Backoff;
pub use capabilities::Capabilities;
pub use consecutive::ConsecutiveFailures;
pub use ema::{Ema, EmaConfig, EmaRecorder, EmaWindowState};
pub use failure_count::FailureCount;
pub use lane_room::LaneRoom;
pub use ratio::FailureRatio;
pub use ready_to_trip::ReadyToTrip;
pub use slow_calls::SlowCalls;
pub use success_recorder::SuccessRecorder;

pub use crate::outcome::Outcome;

use std::sync::Arc;
use std::time::Duration;

use crate::counts::Counts;
use crate::error::ConfigError;
use crate::state::State;

/// One result, as a [`TripPolicy`] sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CallResult<'a> {
    /// How the call ended.
    pub outcome: Outcome,
    /// The time between the call's admission and its result, on the breaker's clock; `None`
    /// unless the policy's [`Capabilities::needs_latency`] is set.
    pub latency: Option<Duration>,
    /// The breaker's counts after this result was recorded.
    pub counts: &'a Counts,
    /// When the result was recorded, on the breaker's clock.
    pub now: Duration,
    /// Whether the call was reported [`Outcome::Fatal`] (then `outcome` is `Failure`, and the
    /// breaker trips whatever the policy answers).
    pub fatal: bool,
    /// Not a result: calls still in flight have just passed the policy's slow-call threshold
    /// ([`Capabilities::slow_call_threshold`]) and were counted in `counts.slow_calls`; the
    /// policy may trip on that. `outcome` is then [`Outcome::Excluded`] (a policy that only
    /// looks at failures ignores it) and `latency` the threshold.
    pub in_flight: bool,
}

impl<'a> CallResult<'a> {
    /// A result to feed a policy by hand, e.g. in the policy's own tests.
    pub fn new(
        outcome: Outcome,
        latency: Option<Duration>,
        counts: &'a Counts,
        now: Duration,
    ) -> Self {
        Self {
            outcome,
            latency,
            counts,
            now,
            fatal: false,
            in_flight: false,
        }
    }

    /// The same, marked as calls in flight passing the slow threshold (see
    /// [`CallResult::in_flight`]).
    #[must_use]
    pub fn with_in_flight(mut self, in_flight: bool) -> Self {
        self.in_flight = in_flight;
        self
    }

    /// The same result, marked fatal (see [`CallResult::fatal`]).
    #[must_use]
    pub fn with_fatal(mut self, fatal: bool) -> Self {
        self.fatal = fatal;
        self
    }
}

/// Decides when a closed breaker trips, and how long it then stays open.
///
/// The breaker calls [`on_result`](TripPolicy::on_result) for every result it records in the
/// closed state (successes excepted, if its
/// [`capabilities`](TripPolicy::capabilities) say so), within the generation the request was admitted in (a result that arrives
/// after the counts were cleared is stale and never reaches the policy). In half-open the
/// breaker decides by itself (any failure reopens it, enough successes close it) and only
/// shows the policy the probes' results ([`on_probe_result`](TripPolicy::on_probe_result)).
///
/// All methods run under the breaker's lock: keep them quick and never call back into the
/// breaker from them (see the [module documentation](self)).
///
/// # Examples
///
/// A policy that trips on the third failure of a generation:
///
/// ```
/// use lazybreaker::policy::{CallResult, Outcome, TripPolicy};
/// use lazybreaker::{Breaker, State};
///
/// #[derive(Debug)]
/// struct ThreeStrikes;
///
/// impl TripPolicy for ThreeStrikes {
///     fn on_result(&mut self, result: &CallResult<'_>) -> bool {
///         result.outcome == Outcome::Failure && result.counts.total_failures >= 3
///     }
/// }
///
/// let breaker = Breaker::builder().policy(ThreeStrikes).build();
/// for _ in 0..3 {
///     let _ = breaker.execute(|| Err::<(), _>("boom"));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// ```
pub trait TripPolicy: Send {
    /// Called with each result recorded in the closed state; returns `true` to trip the
    /// breaker open.
    fn on_result(&mut self, result: &CallResult<'_>) -> bool;

    /// How long the breaker stays open, asked at every entry into the open state (a trip
    /// from closed, or a failure in half-open). `timeout` is the breaker's configured open
    /// duration and `now` the breaker's clock reading. The default keeps `timeout`; a policy
    /// with a backoff returns its own duration.
    fn open_duration(&mut self, timeout: Duration, now: Duration) -> Duration {
        let _ = now;
        timeout
    }

    /// Called with each result recorded in the half-open state, before the breaker acts on it
    /// (a failure reopens the breaker, enough consecutive successes close it). The policy
    /// cannot change that decision; it can learn from the probes. The default does nothing.
    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        let _ = result;
    }

    /// How many probes the half-open state admits, and how many consecutive successes close
    /// it, given the breaker's `max_requests` (at least 1). The default keeps
    /// `max_requests`; a policy with a probation of its own (brpc's
    /// `half_open_window_size`) returns its size.
    fn half_open_probes(&self, max_requests: u64) -> u64 {
        max_requests
    }

    /// Called after each state change, e.g. to reset the policy's own state when a breaker
    /// goes half-open. The default does nothing.
    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        let _ = (from, to, now);
    }

    /// What the policy needs from the breaker: latencies, every success, a slow-call
    /// threshold, probes judged on latency alone (see [`Capabilities`]). Asked once, when
    /// the breaker is built. The default, [`Capabilities::default`]: no latencies, every
    /// success, no slow calls.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// What the breaker's lock-free lane may count from `counts` without the lock and
    /// without showing `on_result`, which then sees it folded into the counts it is shown
    /// next (see [`LaneRoom`]):
    ///
    /// - [`failures`](LaneRoom::failures): how many more failures cannot make
    ///   [`on_result`](TripPolicy::on_result) trip, whatever admissions and successes come
    ///   among them. Only an uncontended breaker's lane takes failures so (one counter holds
    ///   every result in order, so the consecutive runs stay exact); a failure that could
    ///   trip, a fatal one, and any failure once threads contend, go to the lock as before.
    ///   Asked only where the lane may count failures (no slow-call threshold, count window,
    ///   throttle or dry run).
    /// - [`quiet_successes`](LaneRoom::quiet_successes): whether no closed-state success that
    ///   is not slow can make `on_result` trip, whatever admissions and such successes come
    ///   among them: a breaker with a slow-call threshold then counts those successes on its
    ///   lane (its calls in flight are tracked there too, so that a call past the threshold
    ///   is still counted as slow when the next call arrives). A breaker without a slow-call
    ///   threshold does not look at it: its lane counts successes whenever the
    ///   [`Capabilities`] allow.
    ///
    /// Asked under the lock after each step there (and at build, for the empty counts); the
    /// answer holds until the next (a read spends what the lane used of it, asking nothing).
    /// A panic answers [`LaneRoom::NONE`] and continues from the step that asked, once it is
    /// done.
    ///
    /// The default, [`LaneRoom::NONE`]: every failure reaches `on_result`, and every result
    /// of a slow-call policy's breaker takes the lock. Answer more only if `on_result` is a
    /// function of the counts alone, keeps no state of its own from the results the room
    /// lets pass, and (for failures) needs no latency. [`ConsecutiveFailures`],
    /// [`FailureRatio`] and [`FailureCount`] answer how far they are from their threshold and
    /// quiet successes (they trip on failures only); [`SlowCalls`] whether its share of slow
    /// calls is below its ratio (admissions only lower it); [`AnyOf`] the room both of its
    /// two leave ([`LaneRoom::both`]), [`Backoff`] its policy's.
    ///
    /// # Examples
    ///
    /// A policy that trips on the tenth failure of a generation: nine failures from none
    /// cannot trip it.
    ///
    /// ```
    /// use lazybreaker::policy::{CallResult, Capabilities, LaneRoom, Outcome, TripPolicy};
    /// use lazybreaker::{Breaker, Counts, State};
    ///
    /// #[derive(Debug)]
    /// struct TenFailures;
    ///
    /// impl TripPolicy for TenFailures {
    ///     fn on_result(&mut self, result: &CallResult<'_>) -> bool {
    ///         result.outcome == Outcome::Failure && result.counts.total_failures >= 10
    ///     }
    ///     fn capabilities(&self) -> Capabilities {
    ///         Capabilities::default().needs_successes(false)
    ///     }
    ///     fn lane_room(&self, counts: &Counts) -> LaneRoom {
    ///         LaneRoom::NONE
    ///             .failures(9u64.saturating_sub(counts.total_failures))
    ///             .quiet_successes(true) // it trips on failures only
    ///     }
    /// }
    ///
    /// assert_eq!(TenFailures.lane_room(&Counts::default()).failures, 9);
    /// let breaker = Breaker::builder().policy(TenFailures).build();
    /// for _ in 0..10 {
    ///     let _ = breaker.execute(|| Err::<(), _>("boom"));
    /// }
    /// assert_eq!(breaker.state(), State::Open, "the tenth took the lock and tripped");
    /// assert_eq!(breaker.totals().failures, 10);
    /// ```
    ///
    /// A slow-call policy's fast successes are quiet below its ratio:
    ///
    /// ```
    /// use lazybreaker::policy::{SlowCalls, TripPolicy};
    /// use lazybreaker::Counts;
    /// use std::time::Duration;
    ///
    /// let policy = SlowCalls::new(Duration::from_secs(1), 0.5, 10)?;
    /// let counts = |requests, slow| Counts::default().with_requests(requests).with_slow_calls(slow);
    /// assert!(policy.lane_room(&counts(10, 4)).quiet_successes, "4 of 10: below half, and only falling");
    /// assert!(!policy.lane_room(&counts(10, 5)).quiet_successes, "at the ratio: a success may trip");
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        let _ = counts;
        LaneRoom::NONE
    }

    /// A record of closed-state successes that the breaker updates without its lock, for a
    /// policy that must see every success but that no success can trip (see
    /// [`SuccessRecorder`]). Asked once, when the breaker is built. The default: none, so
    /// that every success the capabilities ask for reaches
    /// [`on_result`](TripPolicy::on_result) under the lock. [`Ema`] returns its windows.
    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        None
    }

    /// Reports the policy's own figures, each by a name, for
    /// [`Breaker::snapshot`](crate::Breaker::snapshot) (and the metrics built on it). The
    /// default reports none; [`Ema`] reports its windows. Called under the breaker's lock:
    /// keep it quick.
    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        let _ = report;
    }

    /// This policy, opening for `initial`, doubled on each trip after a failed recovery up to
    /// `max`: see [`Backoff`].
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `initial` when it is zero or exceeds `max`.
    fn with_backoff(self, initial: Duration, max: Duration) -> Result<Backoff<Self>, ConfigError>
    where
        Self: Sized,
    {
        Backoff::new(self, initial, max)
    }

    /// A policy that trips when this one or `other` trips: see [`AnyOf`].
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig, TripPolicy};
    ///
    /// // brpc's EMA catches a slow rise in the error rate; consecutive failures catch a
    /// // dependency that fails fast, which the EMA weighs lightly.
    /// let policy = ConsecutiveFailures::new(20)?.or(Ema::new(EmaConfig::default())?);
    /// let breaker = lazybreaker::Breaker::builder().policy(policy).build();
    /// # let _ = breaker;
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    fn or<Q: TripPolicy>(self, other: Q) -> AnyOf<Self, Q>
    where
        Self: Sized,
    {
        AnyOf::new(self, other)
    }
}

impl<P: TripPolicy + ?Sized> TripPolicy for Box<P> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        (**self).on_result(result)
    }

    fn open_duration(&mut self, timeout: Duration, now: Duration) -> Duration {
        (**self).open_duration(timeout, now)
    }

    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        (**self).on_probe_result(result)
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        (**self).half_open_probes(max_requests)
    }

    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        (**self).on_state_change(from, to, now)
    }

    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        (**self).gauges(report)
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        (**self).success_recorder()
    }

    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        (**self).lane_room(counts)
    }
}
