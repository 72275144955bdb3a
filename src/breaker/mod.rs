//! [`Breaker`]: the public call API, around the sans-IO [`Machine`](crate::machine::Machine).
//!
//! - `mod.rs`: the calls (`allow`, `execute`, reads) and the lock-free fast paths.
//! - `builder.rs`: [`Builder`].
//! - `permit.rs`: [`Permit`] and [`OwnedPermit`], the two-step API, and [`Report`], how a
//!   call's result reaches its breaker.
//! - `txn.rs`: the change transaction: lock, close the lane, step the machine, republish.
//! - `outbox.rs`: serial, ordered, exactly-once delivery of state changes to observers.
//! - `gate.rs`: the front door every other caller comes through (admission, health check,
//!   verdict); `holder.rs`: how an admission holds its breaker.
//! - `check.rs`: the user's health check and the lease a call holds to run it.
//! - `control.rs`: manual control (forcing, releasing, `trip_for`).
//! - `adopt.rs`: adopting decisions made elsewhere (a fleet's).
//! - `seam.rs`: what the layers in front of a breaker (the integration crates, the registry,
//!   the pool) may ask of it beyond the public API, each entry point in its table.
//!
//! User code that may panic (the clock, observers, classifiers, policies) is run through
//! [`crate::contain`], and every path below finishes its bookkeeping before a panic continues:
//! an admitted call is always accounted for, a state change is always delivered.

mod adopt;
mod builder;
mod check;
mod control;
pub(crate) mod gate;
pub(crate) mod holder;
mod outbox;
mod permit;
pub(crate) mod seam;
mod shared_rules;
mod txn;
mod uncounted;

pub use builder::Builder;
use permit::Grant;
pub use permit::{Handing, Report};
pub use permit::{OwnedPermit, Permit};
pub use seam::{BreakerSeam, BuilderSeam};

use std::sync::Arc;

use crate::clock::ClockSource;
use crate::contain::{self, FirstPanic};
use crate::counts::{Counts, Totals};
use crate::error::{Error, Rejected};
use crate::lane::{Entry, Lane};
use crate::machine::{Machine, Ticket, Verdict};
use crate::nanos::Nanos;
use crate::observe::Observer;
use crate::policy::{ConsecutiveFailures, Outcome, SuccessRecorder, TripPolicy};
use crate::snapshot::Snapshot;
use crate::state::State;
use crate::sync::Mutex;

use outbox::Observers;
use txn::Inner;

/// A circuit breaker: gobreaker's state machine (closed → open → half-open → closed) with no
/// timer, evaluated lazily from its clock whenever a call arrives.
///
/// `Breaker` is `Send + Sync` and every method takes `&self`: share it (in an `Arc`, a
/// `static`, a struct field) between all the threads that call the same dependency.
///
/// The type parameters are the trip policy `P` ([`ConsecutiveFailures`] by default; see
/// [`DynBreaker`](crate::DynBreaker) for one chosen at run time) and the
/// [`Observer`] `O` (`()` by default: nothing observed, at no cost).
///
/// # Panics in user code
///
/// Everything the breaker runs on your behalf may panic (the policy, the observers and the
/// `on_state_change` callback, the clock, a classifier, the call itself): the breaker first
/// finishes what it was doing (every admitted call is accounted for in [`totals`], every state
/// change is delivered, in order), then lets the panic continue to the caller. The panic is
/// never swallowed, with one exception that Rust imposes: if the thread is already unwinding
/// from a panic (a permit dropped by a panicking call), the first panic wins and the second
/// is dropped, because a second panic escaping during unwinding would abort the process.
///
/// [`totals`]: Breaker::totals
///
/// # Examples
///
/// ```
/// use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};
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
/// assert!(matches!(
///     breaker.execute(|| Ok::<_, &str>(1)),
///     Err(Error::Rejected(Rejected::Open { .. }))
/// ));
///
/// clock.advance(Duration::from_secs(31));
/// assert_eq!(breaker.execute(|| Ok::<_, &str>(1)).unwrap(), 1); // the half-open probe
/// assert_eq!(breaker.state(), State::Closed);
/// ```
// Laid out in this order (`repr(C)`), not aligned to a cache line: the state lock and the
// machine first, then the lane, so that in an `Arc` (a registry's, a tower layer's) the
// counts an `Arc` clone writes sit before the lock's 200-odd bytes, never on a line the
// lane's words share, without padding every breaker to a multiple of 128 bytes (which cost
// 72 bytes inline and 112 more in an `Arc`).
#[repr(C)]
pub struct Breaker<P = ConsecutiveFailures, O = ()> {
    /// The state lock and what it guards; written only by lock holders.
    inner: Mutex<Inner<P>>,
    /// What a call may do without the lock; published by every lock holder.
    lane: Lane,
    clock: ClockSource,
    observers: Observers<O>,
    /// Whether anyone observes state changes (otherwise they are not even queued).
    observes: bool,
    /// Whether the policy measures latency: then every admission reads the clock.
    needs_latency: bool,
    /// Dry run ([`Builder::dry_run`]): what it would reject, it admits as a shadow call.
    dry_run: bool,
    /// Whether a health check revives it ([`Builder::health_check`]; the check is in the
    /// observers' hooks): never in dry run, which never runs one.
    checked: bool,
    /// Whether the policy's success recorder takes the successes the lane counts (the
    /// recorder is in the observers' hooks): read on every success, the hooks only if so.
    records: bool,
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

impl<P: TripPolicy, O: Observer> Breaker<P, O> {
    /// The breaker's name, as given to [`Builder::name`].
    pub fn name(&self) -> &str {
        self.observers.name()
    }

    /// The breaker's observer, as given to [`Builder::observer`].
    pub fn observer(&self) -> &O {
        &self.observers.observer
    }

    /// The current state, after evaluating every expiry that is due (so reading the state can
    /// itself move an open breaker to half-open and deliver that change).
    pub fn state(&self) -> State {
        let now = self.clock.now();
        let mut panics = FirstPanic::default();
        let state = self.transact(Some(now), &mut panics, |m, now, changes| {
            changes.push(m.refresh(now));
            m.state()
        });
        contain::resume(panics);
        state
    }

    /// The counts of the current generation, as they are: unlike [`state`](Breaker::state),
    /// this evaluates no expiry and reads no clock.
    pub fn counts(&self) -> Counts {
        self.read(|m| m.counts())
    }

    /// The probability the throttle ([`Builder::throttle`](crate::Builder::throttle)) turns
    /// the next call away with, as the window stands now (zero unless closed): what
    /// [`Snapshot::throttle_probability`](crate::Snapshot::throttle_probability) says, without
    /// the rest of a snapshot. `None` without a throttle. Reads the clock once and takes the
    /// state lock once; changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::{throttle::Throttle, Breaker, ManualClock};
    ///
    /// let breaker = Breaker::builder()
    ///     .throttle(Throttle::new(2.0)?.min_requests(4))
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert_eq!(breaker.throttle_probability(), Some(0.0));
    /// for _ in 0..4 {
    ///     breaker.allow().unwrap().failure();
    /// }
    /// assert_eq!(breaker.throttle_probability(), Some(4.0 / 5.0)); // (4 - 2 * 0) / (4 + 1)
    /// assert_eq!(Breaker::builder().build().throttle_probability(), None);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn throttle_probability(&self) -> Option<f64> {
        let now = self.clock.now();
        let mut panics = FirstPanic::default();
        let p = self.read(|m| {
            let peek = m.peek(now);
            panics.merge(m.take_panic());
            m.throttle_probability_at(peek.state, &peek.counts)
        });
        contain::resume(panics);
        p
    }

    /// Everything a scrape reports of this breaker, read without side effects: the state
    /// the next call would find (computed, not made: no transition, no callback), its counts,
    /// the totals with rejections, the open period left, the forced mode, brpc's `nBreak` and
    /// `RecentErr`, and the policy's own figures. See [`Snapshot`](crate::Snapshot).
    ///
    /// Reads the clock once; takes the state lock once (folding in what the lock-free lane
    /// counted, so every call that returned before is in it).
    pub fn snapshot(&self) -> Snapshot {
        let mut panics = FirstPanic::default();
        let snapshot = self.snapshot_with(&mut panics);
        contain::resume(panics);
        snapshot
    }

    /// [`snapshot`](Self::snapshot), keeping a panic of the policy's gauges in `panics`
    /// (the snapshot then holds the figures reported before it).
    fn snapshot_with(&self, panics: &mut FirstPanic) -> Snapshot {
        let now = self.clock.now();
        self.read(|m| {
            let peek = m.peek(now);
            let mut policy = std::collections::BTreeMap::new();
            m.policy_gauges(&mut |name, value| {
                policy.insert(name, value);
            });
            panics.merge(m.take_panic());
            Snapshot {
                name: String::from(self.name()),
                at: crate::nanos::instant(now.max(m.latest())),
                state: peek.state,
                forced: m.forced(),
                dry_run: m.dry_run(),
                counts: peek.counts,
                totals: m.totals(),
                retry_after: peek.retry_after,
                check: peek.check,
                health_checked: m.health_checked(),
                throttle_probability: m.throttle_probability_at(peek.state, &peek.counts),
                transitions: m.transitions(),
                times_opened: m.totals().opened,
                recent_failures: m.recent_failures(),
                policy,
            }
        })
    }

    /// Lifetime counters since the breaker was built, for metrics: see [`Totals`]. A pure
    /// read, like [`counts`](Breaker::counts).
    pub fn totals(&self) -> Totals {
        self.read(|m| m.totals())
    }

    /// Asks to make a call: a [`Permit`] to report the call's result through, or why not.
    ///
    /// This is the two-step API, for async code and callbacks; [`execute`](Breaker::execute)
    /// does both steps around a closure.
    ///
    /// # Errors
    ///
    /// [`Rejected::Open`] while the breaker is open, [`Rejected::TooManyRequests`] when it is
    /// half-open and all its probe slots are taken, [`Rejected::ForcedOpen`] while it is
    /// forced open ([`force_open`](Breaker::force_open)).
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
    pub fn allow(&self) -> Result<Permit<'_, P, O>, Rejected> {
        let mut at = 0;
        match self.lane_admit(&mut at) {
            Entry::Admitted { ticket } => Ok(Permit::new(self, Grant::new(ticket, at))),
            other => self.allow_slow(other).map(|grant| Permit::new(self, grant)),
        }
    }

    /// Like [`allow`](Breaker::allow), for a breaker in an `Arc`: the permit holds a clone of
    /// the `Arc`, so it is `'static` and can move into a spawned task or thread.
    ///
    /// # Errors
    ///
    /// As [`allow`](Breaker::allow).
    #[inline(always)]
    pub fn allow_owned(self: &Arc<Self>) -> Result<OwnedPermit<P, O>, Rejected> {
        let mut at = 0;
        let grant = match self.lane_admit(&mut at) {
            Entry::Admitted { ticket } => Grant::new(ticket, at),
            other => self.allow_slow(other)?,
        };
        Ok(OwnedPermit::new(Arc::clone(self), grant))
    }

    /// The lane's answer for the next call, with the clock's reading kept in `at` if the lane
    /// took one (a latency policy's cells are windowed, so that its admissions do: the
    /// reading is the call's start). Through the closure rather than in the answer, which
    /// then stays three words on every path.
    #[inline(always)]
    pub(super) fn lane_admit(&self, at: &mut Nanos) -> Entry {
        self.lane.admit(
            #[inline(always)]
            || {
                let now = self.clock.now();
                *at = now;
                now
            },
        )
    }

    /// Admission off the lock-free lane: an open breaker's rejection (clock, no lock), or the
    /// lock.
    #[inline(never)]
    pub(super) fn allow_slow(&self, entry: Entry) -> Result<Grant, Rejected> {
        self.admit_slow(entry, |_| ()).map(|(grant, ())| grant)
    }

    /// What the lane's answer leaves to the lock: an open breaker's rejection (counted on
    /// the lane, no lock), or the time to admit at (the lane's clock reading, or a new one).
    #[inline(always)]
    pub(super) fn entry_now(&self, entry: Entry) -> Result<Nanos, Rejected> {
        match entry {
            // In dry run, the machine admits what it would reject, as a shadow call.
            Entry::Open { until, now } if now <= until && !self.dry_run => {
                self.lane.count_rejection();
                Err(Rejected::open_until(until, now))
            }
            Entry::Throttled { probability } => Err(Rejected::Throttled { probability }),
            Entry::Open { now, .. } | Entry::Locked { now: Some(now) } => Ok(now),
            Entry::Locked { now: None } | Entry::Admitted { .. } => Ok(self.clock.now()),
        }
    }

    /// [`allow_slow`](Self::allow_slow), with `note` also asked of the machine right after
    /// it admitted the call (under the same lock).
    #[inline(always)]
    pub(super) fn admit_slow<R>(
        &self,
        entry: Entry,
        note: impl FnOnce(&Machine<P>) -> R,
    ) -> Result<(Grant, R), Rejected> {
        let now = self.entry_now(entry)?;
        self.admit_at(now, note)
    }

    /// [`admit_slow`](Self::admit_slow) once the lane's answer left the call to the lock, at
    /// `now`: out of line, so that the open rejection before it (the lane's, no lock) keeps
    /// a small frame of its own whatever the machine's admission grows to.
    #[inline(never)]
    fn admit_at<R>(
        &self,
        now: Nanos,
        note: impl FnOnce(&Machine<P>) -> R,
    ) -> Result<(Grant, R), Rejected> {
        let mut panics = FirstPanic::default();
        // The admission's start is the time the machine admitted it at (the clock's reading,
        // or the latest time the machine saw if that is later): the latency a completion
        // measures from it is on the machine's own timeline.
        let admitted = self.transact(Some(now), &mut panics, |m, now, changes| {
            let ticket = m.admit_into(now, |change| changes.put(change));
            ticket.map(|ticket| (Grant::new(ticket, now), note(m)))
        });
        if panics.will_resume() {
            // The policy or an observer panicked on the way: the call will not be made, so
            // its admission is given back, as an exclusion, before the panic continues.
            if let Ok((grant, _)) = admitted {
                self.complete_with(grant, Verdict::Reported(Outcome::Excluded), &mut panics);
            }
            contain::resume(panics);
        }
        admitted
    }

    /// Runs `call` if the breaker admits it, and records its result: `Ok` is a success, `Err`
    /// a failure. The call runs outside the breaker's lock.
    ///
    /// A panic in `call` is recorded as a failure and then continues to unwind: it is never
    /// swallowed.
    ///
    /// With a policy whose decisions never read [`Counts::requests`] (the default
    /// [`ConsecutiveFailures`]; see
    /// [`Capabilities::reads_requests`](crate::policy::Capabilities::reads_requests)), no
    /// window and no throttle, a closed breaker counts the call's request together with its
    /// success when it returns, in one atomic step, rather than one at each end: the counts
    /// after every call are gobreaker's, but [`counts`](Breaker::counts) read while the call
    /// runs does not show its request yet. [`allow`](Breaker::allow) always counts at
    /// admission. With [`Builder::verdict_at_latest`] it counts so whatever the policy.
    ///
    /// # Errors
    ///
    /// [`Error::Rejected`] when the call was not made, [`Error::Inner`] with the call's own
    /// error when it failed.
    #[inline]
    pub fn execute<T, E, F>(&self, call: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        // `allow()` spelled out: the fast path builds the permit in place rather than through
        // a `Result`, whose layout (shared with `Rejected`) makes the compiler copy the permit
        // in pieces that stall the loads after the call.
        if let Some(ticket) = self.lane.admit_uncounted(
            #[inline(always)]
            || self.clock.now(),
        ) {
            return self.run_uncounted(ticket, call);
        }
        let mut at = 0;
        match self.lane_admit(&mut at) {
            Entry::Admitted { ticket } => {
                Self::run(Permit::new(self, Grant::new(ticket, at)), call)
            }
            other => self.execute_slow(other, call),
        }
    }

    /// [`execute`](Breaker::execute) off the lock-free lane, in the caller's return slot: an
    /// open breaker's rejection is written where the caller reads it (returned from a call
    /// of its own, the rejection was copied in pieces wider than the stores that had just
    /// made it, a store-forwarding stall of a third of the open rejection), and the lock's
    /// admission stays out of line.
    #[inline(never)]
    fn execute_slow<T, E, F>(&self, entry: Entry, call: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        let grant = match self.entry_now(entry) {
            Ok(now) => self.admit_at(now, |_| ())?.0,
            Err(rejected) => return Err(Error::Rejected(rejected)),
        };
        Self::run(Permit::new(self, grant), call)
    }

    /// Makes `call` on `permit` and records its result: `Ok` a success, `Err` a failure.
    #[inline(always)]
    fn run<T, E, F>(permit: Permit<'_, P, O>, call: F) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
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
    /// A panic in `call` counts as a failure; a panic in `classify` counts as an exclusion
    /// (the breaker cannot know what the result meant). Either panic then continues.
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
        C: Fn(&Result<T, E>) -> Outcome,
    {
        let mut permit = Some(self.allow()?);
        let mut result = call();
        gate::record(&mut permit, &classify, &mut result).resume();
        result.map_err(Error::Inner)
    }

    /// Like [`execute_classified`](Breaker::execute_classified), with any
    /// [`Classify`](crate::Classify) rather than a closure: a type that keeps configuration
    /// ([`http::StatusRules`](crate::http::StatusRules),
    /// [`classify::deadline`](crate::classify::deadline)), including one that says how long
    /// the dependency asked to be left alone ([`Classify::open_for`](crate::Classify::open_for):
    /// the breaker then opens for that long).
    ///
    /// # Errors
    ///
    /// As [`execute`](Breaker::execute).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::classify::Classify;
    /// use lazybreaker::policy::Outcome;
    /// use lazybreaker::{Breaker, State};
    /// use std::time::Duration;
    ///
    /// /// A service that answers `Err(Busy(secs))` when it wants to be left alone.
    /// struct Busy(u64);
    /// struct Backoff;
    /// impl Classify<(), Busy> for Backoff {
    ///     fn classify(&self, r: &Result<(), Busy>) -> Outcome {
    ///         if r.is_ok() { Outcome::Success } else { Outcome::Failure }
    ///     }
    ///     fn open_for(&self, r: &Result<(), Busy>) -> Option<Duration> {
    ///         r.as_ref().err().map(|Busy(secs)| Duration::from_secs(*secs))
    ///     }
    /// }
    ///
    /// let breaker = Breaker::builder().build(); // trips after 6 failures in a row...
    /// let _ = breaker.execute_with(|| Err(Busy(90)), Backoff);
    /// assert_eq!(breaker.state(), State::Open); // ...but the service asked for 90 s
    /// ```
    pub fn execute_with<T, E, F, C>(&self, call: F, classify: C) -> Result<T, Error<E>>
    where
        F: FnOnce() -> Result<T, E>,
        C: crate::classify::Classify<T, E>,
    {
        let mut permit = Some(self.allow()?);
        let mut result = call();
        gate::record(&mut permit, &classify, &mut result).resume();
        result.map_err(Error::Inner)
    }

    /// Records `outcome` for the admission `grant` after user code panicked with `payload`,
    /// then lets that panic continue (it comes first: a panic recording the outcome is dropped).
    pub(crate) fn record_grant_then_resume(
        &self,
        grant: Grant,
        outcome: Outcome,
        payload: contain::Payload,
    ) -> ! {
        let mut panics = FirstPanic::default();
        panics.keep(payload);
        self.complete_with(grant, Verdict::Reported(outcome), &mut panics);
        contain::resume_now(panics)
    }

    /// Runs `f` on the breaker's trip policy, for inspection.
    ///
    /// This takes the state lock for the duration of `f`: keep `f` quick and do not call the
    /// breaker from it.
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::policy::ConsecutiveFailures;
    /// use lazybreaker::Breaker;
    ///
    /// let breaker = Breaker::builder().policy(ConsecutiveFailures::new(3)?).build();
    /// assert_eq!(breaker.inspect_policy(|p| p.threshold()), 3);
    /// # Ok::<(), lazybreaker::ConfigError>(())
    /// ```
    pub fn inspect_policy<R>(&self, f: impl FnOnce(&P) -> R) -> R {
        self.locked(|m| f(m.policy()))
    }

    /// Makes the lock-free lane's stripes now, as the first collision of two threads would:
    /// the one test-only hook, for loom models that start striped.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_make_stripes(&self) {
        self.lane.make_stripes();
    }

    /// The policy's success recorder, if the lane counts successes for it.
    #[inline(always)]
    fn recorder(&self) -> Option<&Arc<dyn SuccessRecorder>> {
        if self.records {
            self.observers.recorder()
        } else {
            None
        }
    }

    /// Records a permit's result (called by the permits): lock-free in the common case.
    #[inline(always)]
    pub(crate) fn complete(&self, grant: Grant, verdict: Verdict) {
        if verdict == Verdict::Reported(Outcome::Success) {
            match self.recorder() {
                None => {
                    if self.lane.succeed_fast(
                        grant.ticket,
                        #[inline(always)]
                        || self.clock.now_infallible(),
                    ) {
                        return;
                    }
                }
                Some(recorder) => {
                    // One clock reading for the lane and the latency both.
                    if let Some(now) = self.clock.now_infallible() {
                        if self.lane.succeed_fast(grant.ticket, || Some(now)) {
                            let latency = grant.latency(now, self.needs_latency);
                            let mut panics = FirstPanic::default();
                            record(&**recorder, latency, &mut panics);
                            contain::resume(panics);
                            return;
                        }
                    }
                }
            }
        }
        if grant.ticket.tracked() {
            // A slow-call policy's call, tracked in flight: its slot goes with its result.
            // perf: two scalars, not the grant (see `complete_slow`).
            self.complete_tracked(grant.ticket, grant.started, verdict);
            return;
        }
        // A failure that cannot trip, on an uncontended lane (see `Lane::fail`).
        if verdict == Verdict::Reported(Outcome::Failure)
            && self.lane.fail(
                grant.ticket,
                #[inline(always)]
                || self.clock.now_infallible(),
            )
        {
            return;
        }
        // perf: two scalars, not the grant (see `complete_slow`).
        self.complete_slow(grant.ticket, grant.started, verdict);
    }

    /// [`complete`](Self::complete) for a call the lane tracks in an in-flight slot: a fast
    /// success on the lane (which frees the slot), anything else under the lock (which
    /// frees it there, and learns whether the call was counted as slow while in flight).
    #[inline(never)]
    fn complete_tracked(&self, ticket: Ticket, started: Nanos, verdict: Verdict) {
        if verdict == Verdict::Reported(Outcome::Success) && self.recorder().is_none() {
            if let Some(now) = self.clock.now_infallible() {
                if self.lane.succeed_tracked(ticket, started, now) {
                    return;
                }
            }
        }
        self.complete_slow(ticket, started, verdict);
    }

    /// [`complete`](Self::complete) off the fast path; then lets any panic of user code
    /// continue. (perf: `complete` passes the grant as two scalars, not as one 24-byte
    /// value: a copy of the whole would be read back with wide loads that the narrower stores
    /// which built it cannot forward to, a store-forwarding stall of about 10 ns.)
    #[inline(never)]
    fn complete_slow(&self, ticket: Ticket, started: Nanos, verdict: Verdict) {
        let mut panics = FirstPanic::default();
        self.complete_with(Grant::new(ticket, started), verdict, &mut panics);
        contain::resume(panics);
    }

    /// Records a permit's result, keeping any panic of user code (the clock, the policy, an
    /// observer) in `panics`. The verdict is recorded whatever panics: if the clock does, at
    /// the latest time the machine saw.
    fn complete_with(&self, grant: Grant, verdict: Verdict, panics: &mut FirstPanic) {
        let now = if verdict == Verdict::Reported(Outcome::Success) && grant.ticket.slot().is_some()
        {
            // A tracked call's (see `complete_tracked`), with a clock that may panic.
            let now = self.clock.try_now(panics);
            if let Some(now) = now {
                if self.lane.succeed_tracked(grant.ticket, grant.started, now) {
                    if let Some(recorder) = self.recorder() {
                        record(&**recorder, grant.latency(now, self.needs_latency), panics);
                    }
                    return;
                }
            }
            now
        } else if verdict == Verdict::Reported(Outcome::Success) {
            let lane = self.lane.succeed(grant.ticket, || {
                // A clock that panics reads as "later than any window": the lock then takes
                // the result, at the latest time the machine saw.
                self.clock.try_now(panics).unwrap_or(Nanos::MAX)
            });
            match lane {
                Ok(read) => {
                    // Counted on the lane: the policy's recorder takes it (a latency policy's
                    // cells are windowed, so the lane read the clock).
                    if let Some(recorder) = self.recorder() {
                        let latency = read.and_then(|now| grant.latency(now, self.needs_latency));
                        record(&**recorder, latency, panics);
                    }
                    return;
                }
                Err(now) => now.filter(|_| !panics.is_some()),
            }
        } else {
            None
        };
        // Under the lock: anything the lane cannot take, at the clock reading the lane took if
        // it took one.
        let now = match now {
            Some(now) => Some(now),
            None if panics.is_some() => None,
            None => self.clock.try_now(panics),
        };
        // `Builder::verdict_at_latest`: a success that finds the machine closed is judged at
        // the latest time the machine saw, not at the reading (decided under the lock, from
        // the machine's state: a lock holder mid-step elsewhere changes nothing); in any
        // other state at the reading, as any step.
        let latest = verdict == Verdict::Reported(Outcome::Success) && self.lane.latest_successes();
        let needs_latency = self.needs_latency;
        self.transact(now.filter(|_| !latest), panics, |m, at, changes| {
            let at = match now {
                Some(now) if latest && m.state() != State::Closed => now.max(at),
                _ => at,
            };
            let latency = grant.latency(at, needs_latency);
            changes.push(m.complete(grant.ticket, verdict, latency, at));
        });
    }
}

/// Hands a success the lane counted to the policy's recorder, keeping a panic of it in
/// `panics` (the success stays counted).
#[inline]
fn record(
    recorder: &dyn SuccessRecorder,
    latency: Option<std::time::Duration>,
    panics: &mut FirstPanic,
) {
    if let Err(payload) = contain::catch(|| recorder.record_success(latency)) {
        panics.keep(payload);
    }
}

/// A breaker stays consistent whatever panics (see [Panics in user code](Breaker#panics-in-user-code)),
/// so it may be used across `catch_unwind` without `AssertUnwindSafe`.
impl<P: TripPolicy, O: Observer> std::panic::RefUnwindSafe for Breaker<P, O> {}
impl<P: TripPolicy, O: Observer> std::panic::UnwindSafe for Breaker<P, O> {}

impl<P: TripPolicy, O: Observer> std::fmt::Debug for Breaker<P, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.name())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
