//! [`Breaker`] and its [`Builder`]: the lock, the clock and the delivery of state changes
//! around the pure [`Machine`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::clock::{ClockSource, Nanos};
use crate::lane::{Admission, Lane, LaneView};
use crate::permit::{OwnedPermit, Permit};
use crate::policy::{ConsecutiveFailures, Outcome, ReadyToTrip, TripPolicy};
use crate::state::{Machine, Ticket, Timing, Transition};
use crate::sync::{Mutex, MutexGuard};
use crate::{Clock, Counts, Error, Rejected, State, Totals};

type StateChangeFn = dyn Fn(&str, State, State) + Send + Sync;

/// A circuit breaker: gobreaker's state machine (closed → open → half-open → closed) with no
/// timer, evaluated lazily from its clock whenever a call arrives.
///
/// `Breaker` is `Send + Sync` and every method takes `&self`: share it (in an `Arc`, a
/// `static`, a struct field) between all the threads that call the same dependency.
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Error, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .name("payments")
///     .timeout(Duration::from_secs(30))
///     .ready_to_trip(|c| c.consecutive_failures >= 2)
///     .clock(clock.clone())
///     .build();
///
/// let r: Result<u32, Error<&str>> = breaker.execute(|| Ok(7));
/// assert_eq!(r.unwrap(), 7);
/// for _ in 0..2 {
///     let _ = breaker.execute(|| Err::<u32, _>("downstream down"));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// assert!(matches!(breaker.execute(|| Ok::<_, &str>(1)), Err(Error::Open { .. })));
///
/// clock.advance(Duration::from_secs(31));
/// assert_eq!(breaker.execute(|| Ok::<_, &str>(1)).unwrap(), 1); // the half-open probe
/// assert_eq!(breaker.state(), State::Closed);
/// ```
pub struct Breaker<P: TripPolicy = ConsecutiveFailures> {
    /// What a call may do without the lock; published by every lock holder.
    lane: Lane,
    inner: Mutex<Inner<P>>,
    clock: ClockSource,
    name: String,
    on_state_change: Option<Box<StateChangeFn>>,
    needs_latency: bool,
}

/// Everything behind the state lock.
#[derive(Debug)]
struct Inner<P> {
    machine: Machine<P>,
    /// State changes not yet delivered to `on_state_change`, oldest first.
    undelivered: VecDeque<Transition>,
    /// Whether a thread is delivering state changes (running the callback) right now.
    delivering: bool,
}

impl Breaker<ConsecutiveFailures> {
    /// A builder with gobreaker's defaults: trip after more than 5 consecutive failures, stay
    /// open 60 s, admit 1 probe in half-open, never clear the closed-state counts.
    pub fn builder() -> Builder<ConsecutiveFailures> {
        Builder::new()
    }
}

impl Default for Breaker<ConsecutiveFailures> {
    fn default() -> Self {
        Builder::new().build()
    }
}

impl<P: TripPolicy> Breaker<P> {
    /// The breaker's name, as given to [`Builder::name`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current state, after evaluating every expiry that is due (so reading the state can
    /// itself move an open breaker to half-open and deliver that change).
    pub fn state(&self) -> State {
        self.locked(|m, now| {
            let transition = m.refresh(now);
            (m.state(), transition)
        })
    }

    /// The counts of the current generation, as they are: unlike [`state`](Breaker::state),
    /// this evaluates no expiry and reads no clock.
    pub fn counts(&self) -> Counts {
        *self.read_locked().machine.counts()
    }

    /// Lifetime counters since the breaker was built, for metrics: see [`Totals`]. A pure
    /// read, like [`counts`](Breaker::counts).
    pub fn totals(&self) -> Totals {
        *self.read_locked().machine.totals()
    }

    /// Asks to make a call: a [`Permit`] to report the call's result through, or why not.
    ///
    /// This is the two-step API, for async code and callbacks; [`execute`](Breaker::execute)
    /// does both steps around a closure.
    ///
    /// # Errors
    ///
    /// [`Rejected::Open`] while the breaker is open, [`Rejected::TooManyRequests`] when it is
    /// half-open and all its probe slots are taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Breaker;
    ///
    /// let breaker = Breaker::builder().build();
    /// let permit = breaker.allow().expect("a new breaker is closed");
    /// permit.failure();
    /// assert_eq!(breaker.counts().total_failures, 1);
    /// ```
    #[inline(always)]
    pub fn allow(&self) -> Result<Permit<'_, P>, Rejected> {
        match self.lane.admit(|| self.clock.now()) {
            Admission::Admitted { generation } => {
                Ok(Permit::new(self, Ticket::fast(generation), 0))
            }
            other => self.allow_slow(other),
        }
    }

    /// Admission off the lock-free lane: an open breaker's rejection (clock, no lock), or the
    /// lock.
    #[inline(never)]
    fn allow_slow(&self, admission: Admission) -> Result<Permit<'_, P>, Rejected> {
        let now = match admission {
            Admission::Open { until, now } if now <= until => {
                return Err(Rejected::open_until(until, now));
            }
            Admission::Open { now, .. } | Admission::Locked { now: Some(now) } => now,
            Admission::Locked { now: None } | Admission::Admitted { .. } => self.clock.now(),
        };
        let ticket = self.locked_at(now, |m, now| m.admit(now))?;
        Ok(Permit::new(self, ticket, now))
    }

    /// Like [`allow`](Breaker::allow), for a breaker in an `Arc`: the permit holds a clone of
    /// the `Arc`, so it is `'static` and can move into a spawned task or thread.
    ///
    /// # Errors
    ///
    /// As [`allow`](Breaker::allow).
    pub fn allow_owned(self: &Arc<Self>) -> Result<OwnedPermit<P>, Rejected> {
        self.allow()
            .map(|permit| permit.into_owned(Arc::clone(self)))
    }

    /// Runs `call` if the breaker admits it, and records its result: `Ok` is a success, `Err`
    /// a failure. The call runs outside the breaker's lock.
    ///
    /// A panic in `call` is recorded as a failure and then continues to unwind: it is never
    /// swallowed.
    ///
    /// # Errors
    ///
    /// [`Error::Open`] or [`Error::TooManyRequests`] when the call was not made,
    /// [`Error::Inner`] with the call's own error when it failed.
    #[inline]
    pub fn execute<T, E, F>(&self, call: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        // `allow()` spelled out: the fast path builds the permit in place rather than through
        // a `Result`, whose layout (shared with `Rejected`) makes the compiler copy the permit
        // in pieces that stall the loads after the call.
        let permit = match self.lane.admit(|| self.clock.now()) {
            Admission::Admitted { generation } => Permit::new(self, Ticket::fast(generation), 0),
            other => self.allow_slow(other)?,
        };
        match call() {
            Ok(value) => {
                permit.success();
                Ok(value)
            }
            Err(err) => {
                permit.failure();
                Err(Error::Inner(err))
            }
        }
    }

    /// Like [`execute`](Breaker::execute), with `classify` deciding how the result counts:
    /// gobreaker's `IsSuccessful` and `IsExcluded` in one function.
    ///
    /// # Errors
    ///
    /// As [`execute`](Breaker::execute): the call's `Err` is returned as [`Error::Inner`]
    /// whatever `classify` said of it.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{policy::Outcome, Breaker};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum CallError { NotFound, Unavailable }
    /// # let _ = CallError::Unavailable;
    ///
    /// let breaker = Breaker::builder().build();
    /// // A "not found" is the caller's problem, not the dependency's: don't count it.
    /// let r = breaker.execute_classified(
    ///     || Err::<(), _>(CallError::NotFound),
    ///     |r| match r {
    ///         Ok(_) => Outcome::Success,
    ///         Err(CallError::NotFound) => Outcome::Excluded,
    ///         Err(CallError::Unavailable) => Outcome::Failure,
    ///     },
    /// );
    /// assert_eq!(r.unwrap_err().into_inner(), Some(CallError::NotFound));
    /// assert_eq!(breaker.counts().total_failures, 0);
    /// assert_eq!(breaker.counts().total_exclusions, 1);
    /// ```
    pub fn execute_classified<T, E, F, C>(&self, call: F, classify: C) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
        C: FnOnce(&Result<T, E>) -> Outcome,
    {
        let permit = self.allow()?;
        let result = call();
        let outcome = classify(&result);
        permit.record(outcome);
        result.map_err(Error::Inner)
    }

    /// The breaker's trip policy, for inspection.
    ///
    /// This takes the state lock for the duration of `f`: keep `f` quick and do not call the
    /// breaker from it.
    pub fn with_policy<R>(&self, f: impl FnOnce(&P) -> R) -> R {
        f(self.inner.lock().machine.policy())
    }

    /// Records a permit's result (called by [`Permit`]).
    #[inline]
    pub(crate) fn complete(&self, ticket: Ticket, outcome: Outcome, started: Nanos) {
        let now = if outcome == Outcome::Success {
            match self.lane.succeed(ticket.generation(), || self.clock.now()) {
                Ok(()) => return,
                Err(now) => now,
            }
        } else {
            None
        };
        self.complete_locked(ticket, outcome, started, now);
    }

    /// Records a result under the lock: anything the lock-free lane cannot take. `now` is the
    /// clock reading the lane took, if any.
    #[inline(never)]
    fn complete_locked(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        started: Nanos,
        now: Option<Nanos>,
    ) {
        let now = now.unwrap_or_else(|| self.clock.now());
        let latency = self
            .needs_latency
            .then(|| Duration::from_nanos(now.saturating_sub(started)));
        self.locked_at(now, |m, now| {
            ((), m.complete(ticket, outcome, latency, now))
        });
    }

    fn locked<R>(&self, op: impl FnOnce(&mut Machine<P>, Nanos) -> (R, Option<Transition>)) -> R {
        self.locked_at(self.clock.now(), op)
    }

    /// Runs `op` on the machine under the lock, queues the state change it made, and delivers
    /// queued changes once the lock is released, unless another delivery is in progress (then
    /// that one delivers them next, in order).
    fn locked_at<R>(
        &self,
        now: Nanos,
        op: impl FnOnce(&mut Machine<P>, Nanos) -> (R, Option<Transition>),
    ) -> R {
        let (value, deliver, panicked) = {
            let mut locked = self.lock_changing();
            let inner = &mut *locked.inner;
            let (value, transition) = op(&mut inner.machine, now);
            if let (Some(transition), Some(_)) = (transition, &self.on_state_change) {
                inner.undelivered.push_back(transition);
            }
            // The policy panicked: the machine finished its step; the panic continues below,
            // once the lock is released.
            let panicked = inner.machine.take_panic();
            // A thread that is unwinding does not start running user callbacks: a panic in one
            // would abort the process. The lane then sends the next call to the lock, to
            // deliver instead (see `Locked`).
            let deliver = !inner.undelivered.is_empty()
                && !inner.delivering
                && panicked.is_none()
                && !thread::panicking();
            if deliver {
                inner.delivering = true;
            }
            (value, deliver, panicked)
        };
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
        if deliver {
            self.deliver();
        }
        value
    }

    /// The lock, for a holder about to change the machine: the lane is closed (its pending
    /// counts folded in) until the guard is dropped.
    fn lock_changing(&self) -> Locked<'_, P> {
        let mut inner = self.inner.lock();
        let pending = self.lane.close();
        inner.machine.absorb(pending);
        Locked {
            inner,
            lane: &self.lane,
        }
    }

    /// The lock, for a reader: the machine with the lane's pending counts folded in.
    fn read_locked(&self) -> MutexGuard<'_, Inner<P>> {
        let mut inner = self.inner.lock();
        let pending = self.lane.drain();
        inner.machine.absorb(pending);
        inner
    }

    /// Delivers queued state changes one at a time, outside the lock, until none is left.
    /// Only one thread runs this at a time (the one that set `delivering`).
    fn deliver(&self) {
        let Some(callback) = &self.on_state_change else {
            return;
        };
        /// Hands delivery back if the callback panics: dropping the lock guard sends the next
        /// call to the lock, which delivers what is left.
        struct Unwinding<'a, P: TripPolicy>(&'a Breaker<P>);
        impl<P: TripPolicy> Drop for Unwinding<'_, P> {
            fn drop(&mut self) {
                self.0.lock_changing().inner.delivering = false;
            }
        }
        let unwinding = Unwinding(self);
        loop {
            let next = {
                let mut inner = self.inner.lock();
                let next = inner.undelivered.pop_front();
                // Seeing the queue empty and giving up delivery is one step under the lock, so
                // a change queued by another thread is never left without a deliverer.
                inner.delivering = next.is_some();
                next
            };
            match next {
                Some(t) => callback(&self.name, t.from, t.to),
                None => break,
            }
        }
        std::mem::forget(unwinding);
    }
}

/// The state lock held by a thread that may change the machine, with the lane closed.
/// Dropping it (normally or while unwinding from a panicking policy) publishes what the state
/// allows without the lock, so the lane is never left closed.
struct Locked<'a, P: TripPolicy> {
    inner: MutexGuard<'a, Inner<P>>,
    lane: &'a Lane,
}

impl<P: TripPolicy> Drop for Locked<'_, P> {
    fn drop(&mut self) {
        let inner = &*self.inner;
        // State changes left without a deliverer (their thread was unwinding, or a callback
        // panicked): keep every call on the lock until one delivers them.
        let stranded = !inner.undelivered.is_empty() && !inner.delivering;
        self.lane.publish(if stranded {
            LaneView::Locked
        } else {
            inner.machine.lane_view()
        });
    }
}

impl<P: TripPolicy> fmt::Debug for Breaker<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.name)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// Configures a [`Breaker`]; from [`Breaker::builder`].
///
/// Every knob follows gobreaker's zero-means-default rules, so no value is invalid; knobs that
/// can be invalid belong to the policies, whose constructors check them.
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
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder<P: TripPolicy = ConsecutiveFailures> {
    name: String,
    max_requests: u32,
    interval: Duration,
    bucket_period: Duration,
    timeout: Duration,
    policy: P,
    on_state_change: Option<Box<StateChangeFn>>,
    /// `None`: the default for the policy, chosen at `build`.
    clock: Option<ClockSource>,
}

impl Builder<ConsecutiveFailures> {
    fn new() -> Self {
        Self {
            name: String::new(),
            max_requests: 0,
            interval: Duration::ZERO,
            bucket_period: Duration::ZERO,
            timeout: Duration::ZERO,
            policy: ConsecutiveFailures::default(),
            on_state_change: None,
            clock: None,
        }
    }
}

impl<P: TripPolicy> Builder<P> {
    /// The name passed to `on_state_change` and returned by [`Breaker::name`]. Default: empty.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many probes the half-open state admits at once, and how many consecutive
    /// successes close it. `0` means 1 (the default).
    pub fn max_requests(mut self, max_requests: u32) -> Self {
        self.max_requests = max_requests;
        self
    }

    /// The closed-state count window: the counts are cleared when it expires (strictly after
    /// `interval` since the window started). `Duration::ZERO` (the default) never clears them.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
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
        self.bucket_period = bucket_period;
        self
    }

    /// How long the breaker stays open before it admits a probe (it goes half-open strictly
    /// after this much time). `Duration::ZERO` (the default) means 60 s. A policy may choose
    /// another duration for each open period ([`TripPolicy::open_duration`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Trips when `ready` returns `true` after a failure in the closed state (gobreaker's
    /// `ReadyToTrip`); replaces the policy.
    ///
    /// `ready` runs under the breaker's lock: keep it quick and do not call the breaker from
    /// it.
    pub fn ready_to_trip<F>(self, ready: F) -> Builder<ReadyToTrip<F>>
    where
        F: FnMut(&Counts) -> bool + Send,
    {
        self.policy(ReadyToTrip::new(ready))
    }

    /// Uses `policy` to decide when to trip; replaces the policy. The default is
    /// [`ConsecutiveFailures::default`].
    pub fn policy<Q: TripPolicy>(self, policy: Q) -> Builder<Q> {
        Builder {
            name: self.name,
            max_requests: self.max_requests,
            interval: self.interval,
            bucket_period: self.bucket_period,
            timeout: self.timeout,
            policy,
            on_state_change: self.on_state_change,
            clock: self.clock,
        }
    }

    /// Called with the breaker's name and each state change.
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
    /// A change made by a thread that is unwinding from a panic is not delivered by it (a
    /// panicking callback would abort the process) but by the next call on the breaker.
    pub fn on_state_change<F>(mut self, callback: F) -> Self
    where
        F: Fn(&str, State, State) + Send + Sync + 'static,
    {
        self.on_state_change = Some(Box::new(callback));
        self
    }

    /// The clock to read time from. Tests pass a [`ManualClock`](crate::ManualClock).
    ///
    /// The default depends on the policy: a policy that measures latency
    /// ([`TripPolicy::needs_latency`]) gets the precise
    /// [`MonotonicClock`](crate::MonotonicClock); any other gets the
    /// [`CoarseMonotonicClock`](crate::CoarseMonotonicClock), eight times cheaper to read
    /// here, which measures durations to within one tick (1 to 4 ms on Linux) either way. Pass
    /// `MonotonicClock::new()` for timeouts exact to the nanosecond on a real clock.
    pub fn clock<C: Clock + 'static>(mut self, clock: C) -> Self {
        self.clock = Some(ClockSource::Custom(Arc::new(clock)));
        self
    }

    /// The breaker, after checking the window knobs strictly: where [`build`](Self::build)
    /// follows gobreaker and silently rounds `interval` up to whole buckets (or widens a
    /// bucket period past [`MAX_BUCKETS`](crate::MAX_BUCKETS)), this refuses. Use it when the
    /// knobs come from users or files.
    ///
    /// # Errors
    ///
    /// [`ConfigError`](crate::ConfigError) naming `bucket_period` when it is set without an
    /// `interval`, exceeds `interval`, does not divide it into whole buckets, or makes more
    /// than `MAX_BUCKETS` of them.
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
    ///     .try_build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "bucket_period");
    /// assert_eq!(err.to_string(), "invalid `bucket_period` = 3s: must divide `interval` into whole buckets");
    /// ```
    pub fn try_build(self) -> Result<Breaker<P>, crate::ConfigError> {
        crate::window_check::check(self.interval, self.bucket_period)?;
        Ok(self.build())
    }

    /// The breaker, closed, with its first generation starting now.
    pub fn build(self) -> Breaker<P> {
        let timing = Timing::new(
            self.max_requests,
            self.interval,
            self.bucket_period,
            self.timeout,
        );
        let needs_latency = self.policy.needs_latency();
        let clock = self
            .clock
            .unwrap_or_else(|| ClockSource::default_for(needs_latency));
        let now = clock.now();
        let machine = Machine::new(timing, self.policy, now);
        Breaker {
            lane: Lane::new(machine.lane_view()),
            inner: Mutex::new(Inner {
                machine,
                undelivered: VecDeque::with_capacity(4),
                delivering: false,
            }),
            clock,
            name: self.name,
            on_state_change: self.on_state_change,
            needs_latency,
        }
    }
}

impl<P: TripPolicy + fmt::Debug> fmt::Debug for Builder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("name", &self.name)
            .field("max_requests", &self.max_requests)
            .field("interval", &self.interval)
            .field("bucket_period", &self.bucket_period)
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
