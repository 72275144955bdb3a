//! [`Builder`]: every knob of a [`Breaker`], checked or defaulted, and the breaker it builds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::abandoned::AbandonedAs;
use crate::clock::{Clock, ClockSource};
use crate::contain;
use crate::counts::Counts;
use crate::error::ConfigError;
use crate::in_flight_slots::{InFlightSlots, SLOTS};
use crate::knobs::{Abandoned, Knobs};
use crate::lane::{Lane, Plan};
use crate::machine::{Machine, Rules};
use crate::nanos::saturating_nanos;
use crate::observe::Observer;
use crate::policy::{Capabilities, ConsecutiveFailures, ReadyToTrip, TripPolicy};
use crate::state::State;
use crate::sync::Mutex;
use crate::throttle::Throttle;

use super::check::HealthCheck;
use super::outbox::{Hooks, Observers, Outbox, StateChangeFn};
use super::shared_rules::shared;
use super::txn::Inner;
use super::Breaker;

/// Configures a [`Breaker`]; from [`Breaker::builder`].
///
/// Every knob follows gobreaker's zero-means-default rules, and [`build`](Self::build) reads
/// the few that can be out of range (a [`throttle`](Self::throttle), a
/// [`jitter`](Self::jitter)) leniently, as each says. [`build_strict`](Self::build_strict)
/// refuses them, naming the field; the policies' constructors check their own.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Counts, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .name("payments")
///     .max_requests(3)
///     .interval(Duration::from_secs(10))
///     .bucket_period(Duration::from_secs(1))
///     .timeout(Duration::from_secs(30))
///     .ready_to_trip(|c: &Counts| c.consecutive_failures > 3)
///     .on_state_change(|name: &str, from: State, to: State| println!("{name}: {from} -> {to}"))
///     .clock(clock.clone())
///     .build();
/// assert_eq!(breaker.name(), "payments");
/// ```
///
/// A builder is `Clone` when its policy and observer are (callbacks are shared, not copied),
/// so one template can build many breakers:
///
/// ```
/// use lazybreaker::Breaker;
/// use std::time::Duration;
///
/// let template = Breaker::builder().timeout(Duration::from_secs(5));
/// let a = template.clone().name("a").build();
/// let b = template.name("b").build();
/// assert_eq!((a.name(), b.name()), ("a", "b"));
/// ```
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Clone)]
pub struct Builder<P = ConsecutiveFailures, O = ()> {
    /// Every plain-value knob, as [`Knobs`] documents them.
    pub(super) knobs: Knobs,
    policy: P,
    observer: O,
    /// `None`: the default for the policy, chosen at `build`.
    pub(super) clock: Option<ClockSource>,
    pub(super) on_state_change: Option<Arc<StateChangeFn>>,
    /// The health check that revives the breaker, if any, and how long it may run.
    health_check: Option<Arc<HealthCheck>>,
}

impl Builder<ConsecutiveFailures> {
    pub(super) fn new() -> Self {
        Self {
            knobs: Knobs::default(),
            policy: ConsecutiveFailures::default(),
            observer: (),
            clock: None,
            on_state_change: None,
            health_check: None,
        }
    }
}

impl<P: TripPolicy, O: Observer> Builder<P, O> {
    /// The name passed to `on_state_change` and returned by [`Breaker::name`]. Default: empty.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.knobs.name = name.into();
        self
    }

    /// How many probes the half-open state admits at once, and how many consecutive
    /// successes close it. `0` means 1 (the default).
    pub fn max_requests(mut self, max_requests: u32) -> Self {
        self.knobs.max_requests = max_requests;
        self
    }

    /// The closed-state time window: the counts are cleared when it expires (strictly after
    /// `interval` since the window started). `Duration::ZERO` (the default) never clears them.
    /// For a window of the last N calls instead, see [`count_window`](Self::count_window).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.knobs.interval = interval;
        self
    }

    /// Splits `interval` into buckets of this length, making the window roll bucket by bucket
    /// instead of clearing at once. `interval` is rounded up to a whole number of buckets; a
    /// single bucket is a plain fixed window. Ignored when `interval` is zero; zero (the
    /// default) means a fixed window.
    ///
    /// At most [`MAX_BUCKETS`](crate::MAX_BUCKETS) buckets are kept: a shorter period is
    /// widened to `interval / MAX_BUCKETS` (rounded up to a whole nanosecond), so memory and
    /// the work of rolling stay bounded.
    pub fn bucket_period(mut self, bucket_period: Duration) -> Self {
        self.knobs.bucket_period = bucket_period;
        self
    }

    /// Counts over the last `n` results instead of over time: a count-based sliding window
    /// (resilience4j's `COUNT_BASED` window; recloser's ring). In the closed state the
    /// counts cover the last `n` successes and failures, each pushing out the oldest once
    /// the window is full: `requests` is the number of results held (calls still in flight
    /// are not in it), and an exclusion is counted in `total_exclusions` but takes no place
    /// (as an ignored exception in resilience4j). A slow call is counted as slow when it
    /// returns. Half-open counts its probes as usual.
    ///
    /// It replaces [`interval`](Self::interval) and [`bucket_period`](Self::bucket_period)
    /// (which `build` then ignores and [`build_strict`](Self::build_strict) refuses), and is
    /// cut to [`MAX_COUNT_WINDOW`](crate::MAX_COUNT_WINDOW) results. Zero (the default) means
    /// no count window. A policy that needs no success of its own
    /// ([`FailureRatio`](crate::policy::FailureRatio), the counting policies) counts its
    /// successes without the lock and without reading the clock.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::FailureRatio;
    /// use lazybreaker::{Breaker, State};
    ///
    /// // Trips when half of the last 10 calls failed, once 10 are in the window.
    /// let breaker = Breaker::builder()
    ///     .policy(FailureRatio::new(0.5, 10).unwrap())
    ///     .count_window(10)
    ///     .build();
    /// for _ in 0..20 {
    ///     let _ = breaker.execute(|| Ok::<_, ()>(()));
    /// }
    /// assert_eq!(breaker.counts().requests, 10, "the last 10 results, no more");
    /// for _ in 0..4 {
    ///     let _ = breaker.execute(|| Err::<(), _>("down"));
    /// }
    /// assert_eq!(breaker.state(), State::Closed, "4 of the last 10");
    /// let _ = breaker.execute(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Open, "5 of the last 10");
    /// ```
    pub fn count_window(mut self, n: u32) -> Self {
        self.knobs.count_window = n;
        self
    }

    /// Backs the open period off: each failed recovery (a failed half-open probe)
    /// doubles it, from [`timeout`](Self::timeout) up to `max`, and so does a trip within
    /// `max` of the last recovery (a relapse: a dependency that flaps is let back ever more
    /// slowly); a trip after a longer healthy spell starts over from `timeout` (brpc's
    /// isolation backoff, without wrapping the policy as [`TripPolicy::with_backoff`] does). A failed [health check](Self::health_check)
    /// re-arms the period at the length it has: checks are cheap and keep a steady cadence
    /// (brpc's and HAProxy's check intervals), so a recovered dependency is found within one
    /// period. Zero (the default): no backoff. In a configuration
    /// file: `backoff = "30s"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .policy(ConsecutiveFailures::new(1).unwrap())
    ///     .timeout(Duration::from_millis(100))
    ///     .backoff(Duration::from_secs(30))
    ///     .clock(clock.clone())
    ///     .build();
    /// let open_for = |b: &Breaker<_>| b.allow().unwrap_err().retry_after().unwrap();
    /// breaker.allow().unwrap().failure(); // trips: 100 ms
    /// assert_eq!(open_for(&breaker), Duration::from_millis(100));
    /// clock.advance(Duration::from_millis(101));
    /// breaker.allow().unwrap().failure(); // the probe fails: 200 ms
    /// assert_eq!(open_for(&breaker), Duration::from_millis(200));
    /// clock.advance(Duration::from_millis(201));
    /// breaker.allow().unwrap().success(); // recovered
    /// assert_eq!(breaker.state(), State::Closed);
    /// breaker.allow().unwrap().failure(); // a relapse at once: 400 ms
    /// assert_eq!(open_for(&breaker), Duration::from_millis(400));
    /// clock.advance(Duration::from_millis(401));
    /// breaker.allow().unwrap().success();
    /// clock.advance(Duration::from_secs(30)); // a healthy spell as long as `max`
    /// breaker.allow().unwrap().failure(); // starts over
    /// assert_eq!(open_for(&breaker), Duration::from_millis(100));
    /// ```
    pub fn backoff(mut self, max: Duration) -> Self {
        self.knobs.backoff = max;
        self
    }

    /// Spreads the open periods the breaker computes itself, so that breakers tripped by one
    /// outage (a fleet's, a pool's endpoints) do not all probe at the same instant: each is
    /// drawn uniformly from `[period × (1 − fraction), period]`, to the nanosecond. Never
    /// longer than configured: [`timeout`](Self::timeout), the [`backoff`](Self::backoff)'s
    /// doubling and [`max_open_duration`](Self::max_open_duration) stay upper bounds.
    ///
    /// Spread: a trip, a failed half-open probe (its backoff included), a failed
    /// [health check](Self::health_check)'s re-arm (so the checks' cadence spreads too), a
    /// pool's ejection of the endpoint for the breaker's own next period (a hang). Not
    /// spread: the periods someone asked for exactly ([`trip_for`](Breaker::trip_for), a
    /// permit's `failure_open_for`, an upstream's `Retry-After` through a classifier, a
    /// period adopted from a fleet, a forced open).
    ///
    /// The draws are a pure function of the [seed](Self::jitter_seed) (by default, a hash of
    /// the breaker's [name](Self::name)), the count of periods drawn so far and the period:
    /// the same breaker given the same calls at the same times opens for the same periods,
    /// live or replayed. Zero (the default for a lone breaker) keeps every period exact,
    /// gobreaker's; an endpoint of a [`Pool`](crate::pool::Pool) gets the pool's
    /// ([`Pool::jitter`](crate::pool::Pool::jitter)) unless its builder sets one. [`build_strict`](Self::build_strict) and configuration refuse a fraction that is
    /// not a number within `[0, 1]`, naming `jitter`; `build` reads a NaN as none and clamps
    /// the rest into `[0, 1]`. In a file: `jitter = 0.2`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breakers: Vec<_> = (0..10)
    ///     .map(|i| {
    ///         Breaker::builder()
    ///             .name(format!("replica-{i}"))
    ///             .policy(ConsecutiveFailures::new(1).unwrap())
    ///             .timeout(Duration::from_secs(10))
    ///             .jitter(0.5)
    ///             .clock(clock.clone())
    ///             .build()
    ///     })
    ///     .collect();
    /// for breaker in &breakers {
    ///     breaker.allow().unwrap().failure(); // one outage trips them all at once
    /// }
    /// let open_for: Vec<Duration> = breakers
    ///     .iter()
    ///     .map(|b| b.allow().unwrap_err().retry_after().unwrap())
    ///     .collect();
    /// // Each between 5 s and 10 s: the probes do not come back in lockstep.
    /// let (five, ten) = (Duration::from_secs(5), Duration::from_secs(10));
    /// assert!(open_for.iter().all(|d| (five..=ten).contains(d)));
    /// assert!(open_for.iter().any(|d| *d != open_for[0]));
    /// clock.advance(ten + Duration::from_nanos(1));
    /// assert!(breakers.iter().all(|b| b.state() == State::HalfOpen)); // never later
    /// ```
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.knobs.jitter = Some(fraction);
        self
    }

    /// The seed of the [jitter](Self::jitter)'s draws, in place of the default, a hash of
    /// the breaker's [name](Self::name) (FNV-1a: stable across builds and platforms). The
    /// same seed gives the same spread of the same periods; give breakers of the same name
    /// (in different processes of a fleet, say) seeds of their own to spread them. In a
    /// file: `jitter_seed = 7`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::{Breaker, ManualClock};
    /// use std::time::Duration;
    ///
    /// let open_for = |seed: u64| {
    ///     let breaker = Breaker::builder()
    ///         .policy(ConsecutiveFailures::new(1).unwrap())
    ///         .jitter(0.5)
    ///         .jitter_seed(seed)
    ///         .clock(ManualClock::new())
    ///         .build();
    ///     breaker.allow().unwrap().failure();
    ///     breaker.allow().unwrap_err().retry_after().unwrap()
    /// };
    /// assert_eq!(open_for(7), open_for(7)); // replayable
    /// assert!(open_for(7) <= Duration::from_secs(60)); // the default timeout, at most
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.knobs.jitter_seed = Some(seed);
        self
    }

    /// How long the breaker stays open before it admits a probe (it goes half-open strictly
    /// after this much time). `Duration::ZERO` (the default) means 60 s. A policy may choose
    /// another duration for each open period ([`TripPolicy::open_duration`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.knobs.timeout = timeout;
        self
    }

    /// The longest any open period lasts, whatever opens the breaker (its policy,
    /// [`trip_for`](Breaker::trip_for), a permit's `failure_open_for`, a decision adopted
    /// from a fleet): a longer one is cut to this. `Duration::ZERO` (the default) means one
    /// hour, or [`timeout`](Self::timeout) if that is longer. A forced open lasts until
    /// released. [`build_strict`](Self::build_strict) refuses one shorter than `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, Rejected};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .max_open_duration(Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build();
    /// breaker.trip_for(Duration::from_secs(10 * 365 * 24 * 3600)); // a misparsed Retry-After
    /// let Err(Rejected::Open { retry_after }) = breaker.allow() else { panic!("open") };
    /// assert_eq!(retry_after.as_secs(), 300); // five minutes, not ten years
    /// ```
    pub fn max_open_duration(mut self, max_open_duration: Duration) -> Self {
        self.knobs.max_open_duration = max_open_duration;
        self
    }

    /// How a call abandoned without a verdict counts, in the closed and in the half-open
    /// state: see [`AbandonedAs`] (the default, an exclusion in both, and why). An abandoned
    /// call is counted in [`Totals::abandoned`](crate::Totals::abandoned) either way, and
    /// never leaves a half-open breaker stuck.
    pub fn abandoned_as(mut self, closed: AbandonedAs, half_open: AbandonedAs) -> Self {
        self.knobs.abandoned_as = Abandoned { closed, half_open };
        self
    }

    /// Trips when `ready` returns `true` after a failure in the closed state (gobreaker's
    /// `ReadyToTrip`); replaces the policy.
    ///
    /// `ready` runs under the breaker's lock: keep it quick and do not call the breaker from
    /// it.
    pub fn ready_to_trip<F>(self, ready: F) -> Builder<ReadyToTrip<F>, O>
    where
        F: FnMut(&Counts) -> bool + Send,
    {
        self.policy(ReadyToTrip::new(ready))
    }

    /// Uses `policy` to decide when to trip; replaces the policy. The default is
    /// [`ConsecutiveFailures::default`].
    pub fn policy<Q: TripPolicy>(self, policy: Q) -> Builder<Q, O> {
        Builder {
            knobs: self.knobs,
            policy,
            observer: self.observer,
            clock: self.clock,
            on_state_change: self.on_state_change,
            health_check: self.health_check,
        }
    }

    /// Adds `observer` beside the one already set: both are told everything, the one set
    /// first first (the pair `(O, Q)`; see [`Observer`]'s tuple impl). For a layer that wraps
    /// a builder it did not configure and needs to observe too (the `redis` feature's shared
    /// breaker does).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::observe::{Observer, Transition};
    /// use lazybreaker::Breaker;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// #[derive(Default)]
    /// struct Count(AtomicU32);
    /// impl Observer for Count {
    ///     fn on_transition(&self, _: &Transition<'_>) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let breaker = Breaker::builder()
    ///     .ready_to_trip(|c| c.consecutive_failures >= 1)
    ///     .observer(Count::default())
    ///     .and_observer(Count::default())
    ///     .build();
    /// let _ = breaker.execute(|| Err::<(), _>("down"));
    /// let (a, b) = breaker.observer();
    /// assert_eq!((a.0.load(Ordering::Relaxed), b.0.load(Ordering::Relaxed)), (1, 1));
    /// ```
    pub fn and_observer<Q: Observer>(self, observer: Q) -> Builder<P, (O, Q)> {
        Builder {
            knobs: self.knobs,
            policy: self.policy,
            observer: (self.observer, observer),
            clock: self.clock,
            on_state_change: self.on_state_change,
            health_check: self.health_check,
        }
    }

    /// Revives the breaker with a health check instead of a user's request: once the open
    /// period is over, the first async call to arrive runs `check()` inside its own future,
    /// before its request is built.
    ///
    /// - **Passed** (`true`): the breaker goes half-open and that call's request is its first
    ///   probe; then the half-open rules as usual ([`max_requests`](Self::max_requests)
    ///   successes close it).
    /// - **Failed** (`false`, or a panic, which then continues): the breaker stays open for
    ///   the next open period, the policy's duration and backoff as after a failed probe,
    ///   and that call is rejected without its request being built. It is not another
    ///   opening (no state change: `opened` and the transitions do not move, `on_state_change`
    ///   is not called); observers are told of it as a transition from `Open` to `Open`
    ///   marked [`Origin::HealthCheck`](crate::observe::Origin::HealthCheck), and a
    ///   [`History`](crate::observe::History) folds a run of them into one entry.
    /// - **Due or running**, the breaker's [`snapshot`](Breaker::snapshot) says so
    ///   ([`Snapshot::check`](crate::Snapshot::check)), with no `retry_after`: there is no
    ///   time left to wait, a check must run.
    /// - **While it runs**, other calls are rejected at once with
    ///   [`Rejected::Checking`](crate::Rejected::Checking), never parked: the check runs
    ///   once, whatever the concurrency.
    /// - **Dropped** during its check (a cancelled future, a deadline around it), the call
    ///   releases the lease with no verdict, and the next call runs the check again. A check
    ///   that runs longer than [`check_timeout`](Self::check_timeout) is treated as lost by
    ///   the next call that finds it so, which runs the check itself (no timer: that call
    ///   compares the times). Give the check a deadline of its own, shorter than that.
    ///
    /// The calls that run the check are [`execute_async`](Breaker::execute_async) and
    /// [`execute_async_with`](Breaker::execute_async_with) (and `execute_async_classified`),
    /// the tower layers (the single-breaker service in `poll_ready`, the keyed one in its
    /// response future), the reqwest middleware (before the rest of the chain), and a
    /// fleet's shared breaker (one check per fleet, under its probe lease). Ready-made checks
    /// in the `lazybreaker-reqwest` crate: `lazybreaker_reqwest::tcp_check` (a TCP connect)
    /// and `lazybreaker_reqwest::path_check` (a health path that must answer 2xx). A sync call ([`execute`](Breaker::execute), [`allow`](Breaker::allow)) cannot wait
    /// for a future: when it finds a check due and none running, it probes as a breaker
    /// without a check would (the breaker goes half-open, that call is the probe); while a
    /// check runs, it is rejected like the others. In the closed state none of this runs.
    ///
    /// Counted in [`Totals::health_checks`](crate::Totals::health_checks) and
    /// [`Totals::health_checks_failed`](crate::Totals::health_checks_failed); the change a
    /// passed check makes (open to half-open) and the re-arm of a failed one are marked
    /// [`Origin::HealthCheck`](crate::observe::Origin::HealthCheck).
    /// Replaces an earlier check.
    ///
    /// brpc revives an isolated node with a periodic health check task (a TCP connect, or
    /// `health_check_path`); here the check runs lazily, in the call that finds it due.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, Rejected, State};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    ///
    /// let healthy = Arc::new(AtomicBool::new(false));
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .ready_to_trip(|c| c.consecutive_failures >= 1)
    ///     .timeout(Duration::from_secs(30))
    ///     .clock(clock.clone())
    ///     .health_check({
    ///         let healthy = Arc::clone(&healthy);
    ///         move || {
    ///             let healthy = healthy.load(Ordering::SeqCst);
    ///             async move { healthy } // e.g. a TCP connect, with a deadline
    ///         }
    ///     })
    ///     .build();
    /// let request = || async { Err::<(), _>("refused") };
    /// let _ = block_on(breaker.execute_async(request));
    /// assert_eq!(breaker.state(), State::Open);
    ///
    /// clock.advance(Duration::from_secs(31)); // the open period is over; the node is not
    /// let sent = std::cell::Cell::new(false);
    /// let r = block_on(breaker.execute_async(|| { sent.set(true); async { Ok::<_, ()>(()) } }));
    /// assert!(matches!(r, Err(lazybreaker::Error::Rejected(Rejected::Open { .. }))));
    /// assert!(!sent.get(), "no request reached a node that failed its check");
    /// assert_eq!(breaker.totals().health_checks_failed, 1);
    ///
    /// clock.advance(Duration::from_secs(31));
    /// healthy.store(true, Ordering::SeqCst);
    /// let r = block_on(breaker.execute_async(|| async { Ok::<_, ()>("hello") }));
    /// assert_eq!(r.unwrap(), "hello"); // the check passed, and this request was the probe
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(breaker.totals().health_checks, 2);
    /// ```
    pub fn health_check<F, Fut>(mut self, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        self.health_check = Some(Arc::new(HealthCheck::new(check)));
        self
    }

    /// How long a half-open probe may be out before it is written off. Once every probe slot
    /// has been held longer than this (no probe admitted for that long), the next call that
    /// finds them taken starts the half-open trial again as its first probe, instead of being
    /// rejected with [`Rejected::TooManyRequests`](crate::Rejected::TooManyRequests); the
    /// results of the probes it replaced are dropped when they come (their generation ended:
    /// counted in [`Totals::dropped`](crate::Totals::dropped), or in `abandoned` if their
    /// permits are dropped), and the takeover is counted in
    /// [`Totals::probes_taken_over`](crate::Totals::probes_taken_over). Give the deadline
    /// your probes have: a probe out longer is lost.
    ///
    /// **By default (not set, or `Duration::ZERO`) no probe is ever written off**, and none
    /// can hold the breaker half-open for good either: once every slot has been held longer
    /// than the open [`timeout`](Self::timeout) (as Polly grants another trial after each
    /// break duration), the next call is admitted as a probe of its own and the probes out
    /// are *relieved* of their slots, but keep their verdicts: a success that comes later
    /// still counts toward closing, a failure still reopens. So a dependency slower than the
    /// open period, which answers every call, closes its breaker about one open period plus
    /// one call's latency after the trip, at the cost of one more probe per open period
    /// while the first is out; a probe that hangs, or a permit kept by mistake, gives way to
    /// the next call. Counted in `probes_taken_over` too.
    ///
    /// `Duration::MAX` never takes a probe over, as gobreaker (which has no such setting).
    /// No timer either way: the takeover is decided by the call that arrives, and it is not
    /// a state change (the breaker stays half-open; `on_state_change` is not called). With a
    /// [health check](Self::health_check), the call that takes the slots over runs a check
    /// first, as the first probe did (a sync call, which cannot, probes as gobreaker's
    /// would). While a trial runs with every probe out, the breaker's
    /// [`Snapshot::retry_after`](crate::Snapshot::retry_after) and a pool's
    /// [`NoEndpoint`](crate::Rejected::NoEndpoint) say how long until a call is admitted
    /// again at the latest. In a configuration file: `probe_timeout = "30s"`.
    ///
    /// # Examples
    ///
    /// A probe deadline: a probe out longer than 5 s is lost.
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, Rejected, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .timeout(Duration::from_secs(10))
    ///     .probe_timeout(Duration::from_secs(5))
    ///     .ready_to_trip(|counts| counts.consecutive_failures >= 1)
    ///     .clock(clock.clone())
    ///     .build();
    /// breaker.allow().unwrap().failure(); // trips it
    /// clock.advance(Duration::from_secs(11));
    /// let hung = breaker.allow().unwrap(); // the probe, and it never reports
    /// assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    ///
    /// clock.advance(Duration::from_secs(6)); // the slot was held longer than 5 s
    /// breaker.allow().unwrap().success(); // takes it over, and closes the breaker
    /// assert_eq!(breaker.state(), State::Closed);
    /// hung.success(); // too late: dropped, it counts nowhere
    /// assert_eq!(breaker.totals().probes_taken_over, 1);
    /// assert_eq!(breaker.totals().dropped, 1);
    /// ```
    ///
    /// The default: a probe slower than the open period still closes the breaker.
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .timeout(Duration::from_millis(100))
    ///     .ready_to_trip(|counts| counts.consecutive_failures >= 1)
    ///     .clock(clock.clone())
    ///     .build();
    /// breaker.allow().unwrap().failure(); // trips it
    /// clock.advance(Duration::from_millis(101));
    /// let slow = breaker.allow().unwrap(); // the probe: the dependency takes 150 ms
    /// clock.advance(Duration::from_millis(101));
    /// let next = breaker.allow().unwrap(); // the slot held past 100 ms: another probe
    /// clock.advance(Duration::from_millis(49));
    /// slow.success(); // 150 ms: still counts
    /// assert_eq!(breaker.state(), State::Closed);
    /// next.success(); // admitted before the close: its generation ended
    /// assert_eq!(breaker.totals().probes_taken_over, 1);
    /// ```
    pub fn probe_timeout(mut self, probe_timeout: Duration) -> Self {
        self.knobs.probe_timeout = probe_timeout;
        self
    }

    /// How long a health check may run before the next call that finds it running takes it
    /// over (its result, when it comes, no longer counts). Zero, the default, means 500 ms
    /// (brpc's `health_check_timeout_ms`).
    pub fn check_timeout(mut self, check_timeout: Duration) -> Self {
        self.knobs.check_timeout = check_timeout;
        self
    }

    /// Whether nothing trips the breaker, neither its policy nor a fatal result; `false` by
    /// default. It still counts every call (for metrics), and the manual controls
    /// ([`force_open`](Breaker::force_open), [`trip_for`](Breaker::trip_for), a permit's
    /// `failure_open_for`) still apply. For a dependency that must never be cut off, such as
    /// a health check; a [`RegistrySettings`](crate::config::RegistrySettings) file sets it
    /// for its `exempt` keys.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::Outcome;
    /// use lazybreaker::{Breaker, State};
    ///
    /// let breaker = Breaker::builder()
    ///     .ready_to_trip(|c| c.consecutive_failures >= 1)
    ///     .never_trips(true)
    ///     .build();
    /// for _ in 0..3 {
    ///     let _ = breaker.execute(|| Err::<(), _>("down"));
    /// }
    /// breaker.allow().unwrap().record(Outcome::Fatal); // would open any other breaker at once
    /// assert_eq!(breaker.state(), State::Closed);
    /// assert_eq!(breaker.counts().total_failures, 4); // every call counted
    ///
    /// breaker.force_open(); // the manual controls still apply
    /// assert_eq!(breaker.state(), State::Open);
    /// ```
    pub fn never_trips(mut self, never_trips: bool) -> Self {
        self.knobs.never_trips = never_trips;
        self
    }

    /// Adaptive client-side throttling in the closed state (Google SRE's, [`Throttle`]):
    /// each admission first asks the throttle, which turns the call away with probability
    /// `p = max(0, (requests - k * accepts) / (requests + 1))` over the breaker's own
    /// closed-state window (its fixed interval, rolling buckets or count window), as
    /// [`Rejected::Throttled`](crate::Rejected::Throttled), counted in
    /// [`Totals::rejected_throttled`](crate::Totals::rejected_throttled) and never a result
    /// for the trip policy. Open and half-open are unchanged, a failure still trips the
    /// breaker as its policy says, and a breaker forced closed throttles nothing. In dry run, a call it would throttle runs as a shadow
    /// call, counted in [`Totals::would_reject`](crate::Totals::would_reject).
    ///
    /// No lock on the call path: while `p` is zero the lock-free lane admits as many calls
    /// as cannot raise it above zero, without a draw; while it is above zero the lane decides
    /// each call, one draw each (a count window, or dry run, decides under the lock). In a file:
    /// `throttle = { k = 2.0, min_requests = 20, max_probability = 0.9, seed = 7 }`.
    ///
    /// go-zero's `googlebreaker`, Kratos' `sre`, Envoy's admission control.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{throttle::Throttle, Breaker, ManualClock, Rejected};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .interval(Duration::from_secs(10))
    ///     .ready_to_trip(|c| c.consecutive_failures >= 100) // trips on a hard outage only
    ///     .throttle(Throttle::new(2.0)?.min_requests(10).seed(1))
    ///     .clock(clock.clone())
    ///     .build();
    /// // Overloaded: one call in four is accepted.
    /// for i in 0..40 {
    ///     match breaker.allow() {
    ///         Ok(permit) if i % 4 == 0 => permit.success(),
    ///         Ok(permit) => permit.failure(),
    ///         Err(Rejected::Throttled { probability }) => assert!(probability > 0.0),
    ///         Err(other) => panic!("{other}"),
    ///     }
    /// }
    /// assert!(breaker.totals().rejected_throttled > 0);
    /// clock.advance(Duration::from_secs(11)); // a new window: nothing to throttle on
    /// assert!(breaker.allow().is_ok());
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn throttle(mut self, throttle: Throttle) -> Self {
        self.knobs.throttle = Some(throttle);
        self
    }

    /// Dry run, or shadow mode: the breaker runs its state machine as usual (it trips,
    /// opens, goes half-open, closes, on the same calls at the same times as it would
    /// otherwise) but admits every call. A call it would have rejected (open, half-open
    /// with its probes out, forced open) runs as a *shadow call*: counted in
    /// [`Totals::would_reject`](crate::Totals::would_reject) and nowhere else, its result not counted (as a rejected call
    /// has none), so the breaker decides exactly as one that enforces. `false` by default.
    ///
    /// For trying settings on production traffic without cutting anything off: a candidate
    /// beside the real breaker (a second layer, or a registry of candidates), its
    /// [`Totals::would_reject`](crate::Totals::would_reject), its transitions (each marked
    /// [`dry_run`](crate::observe::Transition::dry_run)) and its snapshot compared with the
    /// real one's, or with a replay of the same traffic (`lazybreaker-replay`). A breaker in dry run runs no health check (it goes half-open by
    /// its open period alone, as a replay does). In a file: `dry_run = true`.
    ///
    /// Envoy's outlier detection with `enforcing_*` at 0, resilience4j's `METRICS_ONLY`
    /// state (for a whole breaker, not one state).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, State};
    ///
    /// let shadow = Breaker::builder()
    ///     .ready_to_trip(|c| c.consecutive_failures >= 2)
    ///     .dry_run(true)
    ///     .build();
    /// let mut ran = 0;
    /// for _ in 0..5 {
    ///     let _ = shadow.execute(|| {
    ///         ran += 1;
    ///         Err::<(), _>("down")
    ///     });
    /// }
    /// assert_eq!(ran, 5); // every call ran
    /// assert_eq!(shadow.state(), State::Open); // but it tripped, as it would have
    /// let totals = shadow.totals();
    /// assert_eq!((totals.admitted, totals.would_reject), (2, 3));
    /// assert_eq!(shadow.counts().total_failures, 0); // a new generation: the shadows count nowhere
    /// ```
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.knobs.dry_run = dry_run;
        self
    }

    /// Whether a success is judged at the latest time the breaker saw (its own admission's,
    /// or a later step's) rather than at a clock reading of its own. A call in a closed-state
    /// time window ([`interval`](Builder::interval), fixed or rolling) then reads the clock
    /// once, when it is admitted, instead of once more when it succeeds: the cost of a
    /// windowed call drops to that of a call without a window but for that one reading.
    /// Failures still read the clock (a trip's open period starts at its reading), and a
    /// policy that measures latency reads it for the latency anyway (this is ignored then).
    /// Only while the breaker is closed: a verdict that finds it open or half-open reads the
    /// clock as any step. And [`Breaker::execute`] counts a call's request with its success
    /// (one atomic step) whatever the policy, as it does by default only for a policy that
    /// reads no requests ([`Capabilities::reads_requests`]).
    ///
    /// The costs against gobreaker: a success whose window (or bucket) ended while the call
    /// ran still counts in it, unless a step since saw the end (gobreaker reads the clock in
    /// `afterRequest` and drops such a success as stale; the conformance vectors are replayed
    /// with the default, `false`: with `true`, 143 of the 400 random fixed-window vectors and
    /// 116 of the 400 rolling ones depart, each first at such a success); and a policy that
    /// reads the requests (a failure ratio) does not see an `execute` call in flight until
    /// it returns. Worth it where windows are long next to calls.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .interval(Duration::from_secs(10))
    ///     .verdict_at_latest(true)
    ///     .clock(clock.clone())
    ///     .build();
    /// let permit = breaker.allow().unwrap();
    /// clock.advance(Duration::from_secs(11)); // the window ends while the call runs
    /// permit.success();
    /// // Judged at the latest time the breaker saw (the admission's): counted in its window.
    /// assert_eq!(breaker.counts().total_successes, 1);
    /// ```
    pub fn verdict_at_latest(mut self, yes: bool) -> Self {
        self.knobs.verdict_at_latest = yes;
        self
    }

    /// Replaces every plain-value knob at once (the name included) with `knobs`; the policy,
    /// observer, clock and callback stay. [`Knobs::default`] holds the builder's defaults, so
    /// `Knobs { timeout, ..Knobs::default() }` sets one knob and resets the others.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{Breaker, Knobs};
    /// use std::time::Duration;
    ///
    /// let knobs = Knobs { name: "search".into(), max_requests: 3, ..Knobs::default() };
    /// let breaker = Breaker::builder()
    ///     .timeout(Duration::from_secs(5)) // replaced below: back to the default
    ///     .knobs(knobs)
    ///     .build();
    /// assert_eq!(breaker.name(), "search");
    /// ```
    pub fn knobs(mut self, knobs: Knobs) -> Self {
        self.knobs = knobs;
        self
    }

    /// Uses `observer` to observe the breaker (see [`crate::observe`]); replaces the observer.
    /// The default, `()`, observes nothing at no cost. [`on_state_change`](Self::on_state_change)
    /// is independent of it: both are told of every state change (the callback first).
    pub fn observer<Q: Observer>(self, observer: Q) -> Builder<P, Q> {
        Builder {
            knobs: self.knobs,
            policy: self.policy,
            observer,
            clock: self.clock,
            on_state_change: self.on_state_change,
            health_check: self.health_check,
        }
    }

    /// Called with the breaker's name and each state change; replaces an earlier callback.
    /// Sugar for an [`Observer`] whose [`on_transition`](Observer::on_transition) calls it.
    ///
    /// It never runs while the breaker's lock is held, so it may call the breaker (`state()`,
    /// `counts()`, even `execute()`). Changes are delivered exactly once each, in the order
    /// they happened, one at a time: the thread whose call made a change delivers it before
    /// that call returns, unless another thread is already delivering, which then delivers it
    /// next. A change made from inside the callback is delivered right after it returns.
    ///
    /// Two consequences of that contract: a thread that keeps delivering while other threads
    /// keep changing the state keeps running the callback; and while a slow callback runs,
    /// the changes waiting behind it are queued, in a queue that grows (allocates) past four.
    ///
    /// A callback that panics does not disturb the breaker: the changes after it are still
    /// delivered, and the panic then continues to the caller whose call delivered the change
    /// (normally the one that made it; see above), after giving back as an exclusion a call
    /// that this caller was being admitted for.
    pub fn on_state_change<F>(mut self, callback: F) -> Self
    where
        F: Fn(&str, State, State) + Send + Sync + 'static,
    {
        self.on_state_change = Some(Arc::new(callback));
        self
    }

    /// The clock to read time from. Tests pass a [`ManualClock`](crate::ManualClock).
    ///
    /// The default depends on the policy: a policy that measures latency
    /// ([`Capabilities::needs_latency`]) gets the precise
    /// [`PreciseClock`](crate::PreciseClock) (the processor's counter, half the cost of
    /// `Instant::now()` here); any other gets the platform's coarse monotonic clock (what
    /// [`CoarseMonotonicClock`](crate::CoarseMonotonicClock) reads, but from the platform's
    /// own origin, boot on Linux, so that it costs the breaker one word), eight times cheaper
    /// to read here, which measures durations to within one tick (1 to 4 ms on Linux) either
    /// way. Pass `MonotonicClock::new()` for timeouts exact to the nanosecond on a real clock.
    /// The instants policies and observers see are durations from the clock's origin.
    pub fn clock<C: Clock + 'static>(mut self, clock: C) -> Self {
        self.clock = Some(ClockSource::of(clock));
        self
    }

    /// The breaker, after checking the window knobs strictly: where [`build`](Self::build)
    /// follows gobreaker and silently rounds `interval` up to whole buckets (or widens a
    /// bucket period past [`MAX_BUCKETS`](crate::MAX_BUCKETS)), this refuses. Use it when the
    /// knobs come from users or files. (Not a fallible twin of `build`: a strict reading of
    /// the same knobs; `build` itself cannot fail.)
    ///
    /// # Errors
    ///
    /// [`ConfigError`](crate::ConfigError) naming `bucket_period` when it is set without an
    /// `interval`, exceeds `interval`, does not divide it into whole buckets, or makes more
    /// than `MAX_BUCKETS` of them; naming `count_window` when it is set with an `interval`
    /// or is longer than [`MAX_COUNT_WINDOW`](crate::MAX_COUNT_WINDOW); naming
    /// `throttle.max_probability` outside `[0, 1]`, `throttle.k` below 1 or not finite, and
    /// `throttle.count_throttled` with a count window, and `jitter` when it is not a number
    /// within `[0, 1]` (these two name the breaker too).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Breaker;
    /// use std::time::Duration;
    ///
    /// let err = Breaker::builder()
    ///     .interval(Duration::from_secs(10))
    ///     .bucket_period(Duration::from_secs(3))
    ///     .build_strict()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "bucket_period");
    /// assert_eq!(err.to_string(), "invalid `bucket_period` = 3s: must divide `interval` into whole buckets");
    /// ```
    pub fn build_strict(self) -> Result<Breaker<P, O>, ConfigError> {
        crate::window_check::check(self.knobs.interval, self.knobs.bucket_period)?;
        crate::window_check::check_count(self.knobs.interval, self.knobs.count_window)?;
        crate::window_check::check_open(self.knobs.timeout, self.knobs.max_open_duration)?;
        if let Some(err) = self
            .knobs
            .throttle
            .and_then(|t| t.invalid(self.knobs.count_window > 0))
        {
            return Err(err.within("throttle").for_breaker(&self.knobs.name));
        }
        if let Some(fraction) = self.knobs.jitter {
            crate::jitter::check(fraction).map_err(|err| err.for_breaker(&self.knobs.name))?;
        }
        Ok(self.build())
    }

    /// The breaker, closed, with its first generation starting now.
    ///
    /// # Panics
    ///
    /// Only if user code does: the clock, or a policy hook the breaker asks here
    /// ([`TripPolicy::capabilities`], [`TripPolicy::success_recorder`], and
    /// [`TripPolicy::lane_room`] for the empty counts); its panic continues from
    /// `build`.
    pub fn build(self) -> Breaker<P, O> {
        // The policy's capabilities, asked once: a panic continues from `build` (nothing is
        // admitted yet), not from some later call.
        let mut panics = contain::FirstPanic::default();
        let caps = panics.catch(Capabilities::default(), || self.policy.capabilities());
        let recorder = panics.catch(None, || self.policy.success_recorder());
        contain::resume(panics);
        let rules = Rules::from(&self.knobs)
            .with_capabilities(&caps)
            .health_check(self.health_check.is_some(), self.knobs.check_timeout);
        // What the lane may do, decided once from them.
        let plan = Plan::of(&caps, rules.rolls(), rules.by_count(), recorder.is_some())
            .verdict_at_latest(self.knobs.verdict_at_latest);
        // The recorder takes the closed-state successes only if the lane counts them.
        let recorder = recorder.filter(|_| plan.counts_closed() && caps.needs_successes);
        let clock = self.clock.unwrap_or_else(|| {
            ClockSource::default_for(plan.needs_latency(), caps.latency_resolution)
        });
        let now = clock.now();
        // A slow-call threshold over a time window: the calls the lane admits are tracked
        // in slots it shares with the machine.
        let tracked = caps
            .effective_slow_threshold()
            .filter(|_| plan.tracks())
            .map(|threshold| {
                (
                    Arc::new(InFlightSlots::new(SLOTS)),
                    saturating_nanos(threshold),
                )
            });
        let mut machine = Machine::new(shared(rules), self.policy, now)
            .with_throttle(self.knobs.throttle)
            .with_slots(tracked.as_ref().map(|(slots, _)| Arc::clone(slots)));
        machine.update_lane_room();
        contain::resume(machine.take_panic());
        let health_check = self.health_check.filter(|_| !self.knobs.dry_run);
        let checked = health_check.is_some();
        let observers = Observers {
            observer: self.observer,
            hooks: Hooks::of(
                self.on_state_change,
                health_check,
                self.knobs.name,
                recorder,
            ),
        };
        let observes = observers.observes_transitions();
        let records = observers.recorder().is_some();
        Breaker {
            lane: Lane::new(plan, machine.phase(), machine.lane_throttle(), tracked),
            inner: Mutex::new(Inner {
                machine,
                outbox: Outbox::new(observes),
            }),
            clock,
            observes,
            observers,
            needs_latency: plan.needs_latency(),
            checked,
            records,
            dry_run: self.knobs.dry_run,
        }
    }
}

impl<P: TripPolicy + fmt::Debug, O: Observer + fmt::Debug> fmt::Debug for Builder<P, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("knobs", &self.knobs)
            .field("policy", &self.policy)
            .field("observer", &self.observer)
            .field("on_state_change", &self.on_state_change.is_some())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
