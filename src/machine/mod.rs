//! The sans-IO state machine: gobreaker v2's semantics as a function of `(state, event, now)`.
//!
//! Nothing here reads a clock, takes a lock, knows the lock-free lane or runs user code other
//! than the policy (through [`Guarded`], which contains its panics). The
//! [`Breaker`](crate::Breaker) reads the clock, locks, and passes `now` in. Every time-based
//! change is evaluated lazily, at the start of each operation ([`Machine::refresh`]).
//!
//! What others may know of the machine is its [`Phase`]: a neutral view of what the current
//! state allows, from which the lane decides what it can do without the lock.

mod check;
mod cold;
mod guarded;
mod judge;
mod overrides;
mod peek;
mod rules;
mod throttled;
mod ticket;

use std::sync::Arc;
use std::time::Duration;

use crate::contain::FirstPanic;
use crate::counts::{Counts, RetryTally, Tail, Totals, Transitions};
use crate::error::Rejected;
use crate::forced::Forced;
use crate::generation::Generation;
use crate::in_flight::InFlight;
use crate::in_flight_slots::{InFlightSlots, Released};
use crate::nanos::{instant, saturating_nanos, Nanos};
use crate::origin::Origin;
use crate::policy::{CallResult, LaneRoom, Outcome, TripPolicy};
use crate::state::State;
use crate::throttle::{Throttle, Throttling};
use crate::window::Window;

use check::Lease;
pub(crate) use check::{Admission, CheckTicket};
use cold::{Cold, Tally};
use guarded::{Guarded, Policy};
use judge::{judge, Judged};
pub use peek::Ready;
pub(crate) use rules::{Rules, RulesRef};
pub(crate) use ticket::Ticket;

/// The most buckets a rolling window has. A bucket period that would need more is widened
/// to `ceil(interval / MAX_BUCKETS)`, which keeps the memory and the catch-up work of the
/// window bounded (gobreaker allocates `interval / bucket_period` buckets whatever they are).
pub const MAX_BUCKETS: u64 = 1024;

/// The longest count window: the last 65,536 results (a byte each).
pub const MAX_COUNT_WINDOW: u64 = 1 << 16;

/// How a call ended: with a verdict, or abandoned without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Reported(Outcome),
    /// Counted in the totals as abandoned, and in the counts as the state's setting says.
    Abandoned,
}

/// A state change, with what caused it: the counts and totals at the moment of the change
/// (before the new generation cleared the counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) from: State,
    pub(crate) to: State,
    pub(crate) at: Nanos,
    pub(crate) counts: Counts,
    pub(crate) totals: Totals,
    /// Who made it: the policy or the clock, a manual control, or a decision adopted from
    /// elsewhere.
    pub(crate) origin: Origin,
    /// The decision, for a change to open: how long from `at` the open period lasts; `None`
    /// for other changes, and for a forced open (it lasts until released).
    pub(crate) open_for: Option<Nanos>,
    /// The manual override in force after the change.
    pub(crate) forced: Option<Forced>,
}

/// A neutral view of what the current state allows, for whoever wants to act without the
/// machine (the lock-free lane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Closed, counting in `generation` at window age `age` (always zero unless the window
    /// rolls), until `window_end` (inclusive: the period ends strictly after): the end of a
    /// fixed window, or of the current bucket of a rolling one; `None` where counts are
    /// never cleared.
    Closed {
        generation: Generation,
        age: u64,
        window_end: Option<Nanos>,
        /// How many admissions may be made without the machine (a throttle decides the
        /// next one once its `p` may have risen above zero); `u64::MAX`: no limit.
        room: u64,
        /// How many failures the lane may count without the machine: the policy's
        /// [`lane_room`](crate::policy::TripPolicy::lane_room)'s failures at the last
        /// [`update_lane_room`](Machine::update_lane_room); zero where the machine must
        /// see every failure (a count window, a slow-call threshold, a throttle, dry run).
        failure_room: u64,
        /// With no room: the throttle's requests and accepts in the window now, from which
        /// the lane may decide each admission itself, adding what it counts since (`None`:
        /// the machine decides; in dry run, or a count window).
        shed_from: Option<(u64, u64)>,
        /// With the lane's in-flight slots (a slow-call threshold): the latest time the
        /// machine saw, before which the lane admits nothing (so that every call it admits
        /// starts after the `window_end` published here was computed); 0 without.
        since: Nanos,
        /// With the lane's in-flight slots: every call takes the lock (the policy says a fast
        /// success may trip it, see
        /// [`lane_room`](crate::policy::TripPolicy::lane_room)'s quiet successes).
        locked: bool,
    },
    /// Open until `until` (inclusive: it goes half-open strictly after).
    Open { until: Nanos },
    /// Half-open: every admission and result needs the machine.
    HalfOpen,
    /// Forced open or closed: every admission and result needs the machine.
    Forced,
}

/// gobreaker's state machine over a trip policy.
#[derive(Debug)]
pub(crate) struct Machine<P> {
    /// Shared by the breakers built by the same rules.
    rules: RulesRef,
    /// Changed only through [`Guarded`] ([`Machine::guarded`]).
    policy: Policy<P>,
    state: State,
    generation: Generation,
    /// Closed with a fixed window: when the window ends. Open: when the open period ends.
    /// Half-open: when the probe slots held are taken over (`probe_timeout` after the latest
    /// probe's admission). All expire strictly after this instant. `Nanos::MAX` when nothing
    /// expires.
    expiry: Nanos,
    window: Window,
    /// The totals an idle closed breaker counts (the rest are the cold part's).
    totals: Tally,
    /// The latest time an operation was given: the time of a step whose clock reading failed.
    latest: Nanos,
    /// A manual override, until released.
    forced: Option<Forced>,
    /// Whether the breaker's own evidence says its dependency is down, for this open period:
    /// a failed health check, or a pool's judgement that it hangs. A pool keeps such an
    /// endpoint out whatever its isolation cap. Cleared by every state change.
    down: bool,
    /// What an idle closed breaker never touches (see [`Cold`]), built on its first need.
    cold: Option<Box<Cold>>,
    /// Whether the cold part holds a throttle (read without reaching for it).
    has_throttle: bool,
    /// Whether the throttle was turning calls away when last told ([`Machine::throttle_note`]).
    throttling: bool,
    /// What [`Phase::Closed`] publishes as `failure_room` (see there).
    failure_room: u64,
    /// Whether the cold part holds the lane's in-flight slots (read without reaching for
    /// them).
    has_slots: bool,
    /// Whether the policy said fast successes cannot trip it, at the last
    /// [`update_lane_room`](Machine::update_lane_room) (with slots only).
    quiet: bool,
}

impl<P: TripPolicy> Machine<P> {
    /// A closed machine in generation 1, started at `now`, over `policy`, by `rules` (which
    /// carry what the policy's capabilities ask of the machine).
    pub(crate) fn new(rules: impl Into<RulesRef>, policy: P, now: Nanos) -> Self {
        let rules: RulesRef = rules.into();
        let window = match rules.count_window {
            0 => Window::rolling(rules.buckets as usize),
            // At most `MAX_COUNT_WINDOW`: it fits a usize.
            n => Window::last(n as usize),
        };
        let mut machine = Self {
            rules,
            policy: Policy::new(policy),
            state: State::Closed,
            generation: Generation::default(),
            expiry: Nanos::MAX,
            window,
            totals: Tally::default(),
            latest: now,
            forced: None,
            down: false,
            cold: None,
            has_throttle: false,
            throttling: false,
            failure_room: 0,
            has_slots: false,
            quiet: false,
        };
        if machine.rules.slow_threshold.is_some() {
            machine.cold().in_flight = InFlight::with_capacity(64);
        }
        machine.new_generation(now);
        machine
    }

    /// This machine with `throttle` in its closed state ([`Throttling::new`] sanitizes it).
    pub(crate) fn with_throttle(mut self, throttle: Option<Throttle>) -> Self {
        if let Some(throttle) = throttle {
            self.cold().throttle = Some(Arc::new(Throttling::new(throttle)));
            self.has_throttle = true;
        }
        self
    }

    /// This machine sharing `slots` with its lane, which tracks the calls it admits in
    /// them (a slow-call threshold over a time window).
    pub(crate) fn with_slots(mut self, slots: Option<Arc<InFlightSlots>>) -> Self {
        if let Some(slots) = slots {
            self.cold().slots = Some(slots);
            self.has_slots = true;
        }
        self
    }

    /// The closed-state throttle and its generator, shared with the lock-free lane.
    fn throttling(&self) -> Option<&Arc<Throttling>> {
        if !self.has_throttle {
            return None;
        }
        self.cold.as_deref()?.throttle.as_ref()
    }

    /// The lane's in-flight slots, shared with it.
    fn slots(&self) -> Option<&InFlightSlots> {
        if !self.has_slots {
            return None;
        }
        self.cold.as_deref()?.slots.as_deref()
    }

    /// The throttle's settings, as it runs them.
    fn throttle(&self) -> Option<Throttle> {
        self.throttling().map(|t| t.settings)
    }

    /// The cold part, built now if it was not yet.
    #[inline]
    fn cold(&mut self) -> &mut Cold {
        if self.cold.is_none() {
            self.build_cold();
        }
        match &mut self.cold {
            Some(cold) => cold,
            None => unreachable!("built just above"),
        }
    }

    /// Builds the cold part: once, out of line (a copy of a few hundred bytes), so that
    /// the paths that find it built stay short.
    #[cold]
    #[inline(never)]
    fn build_cold(&mut self) {
        self.cold = Some(Box::new(Cold::new(self.rules.max_requests)));
    }

    /// Half-open: how many probes it admits and how many successes close it.
    fn probes(&self) -> u64 {
        self.cold
            .as_ref()
            .map_or(self.rules.max_requests, |c| c.probes)
    }

    /// The health-check lease in force, if a call holds one.
    fn lease(&self) -> Option<Lease> {
        self.cold.as_ref().and_then(|c| c.lease)
    }

    /// Ends the health-check lease in force, if any.
    fn end_lease(&mut self) {
        if let Some(cold) = self.cold.as_deref_mut() {
            cold.lease = None;
        }
    }

    pub(crate) fn state(&self) -> State {
        self.state
    }

    pub(crate) fn counts(&self) -> Counts {
        self.window.counts()
    }

    pub(crate) fn totals(&self) -> Totals {
        (self.totals).over(
            self.cold
                .as_ref()
                .map_or_else(Totals::default, |c| c.totals),
        )
    }

    /// Counts a retry layer's decision after a failed attempt through this breaker.
    pub(crate) fn tally_retry(&mut self, tally: RetryTally) {
        self.cold().totals.tally_retry(tally);
    }

    pub(crate) fn policy(&self) -> &P {
        self.policy.get()
    }

    /// The latest time an operation was given.
    pub(crate) fn latest(&self) -> Nanos {
        self.latest
    }

    /// The first panic the policy raised since the last call, if it did: every step was
    /// completed with a neutral answer (no trip, the configured timeout, `max_requests`
    /// probes) so the machine is consistent, and the caller must now let the panic continue.
    pub(crate) fn take_panic(&mut self) -> FirstPanic {
        match self.cold.as_deref_mut() {
            Some(cold) => cold.panic.take(),
            None => FirstPanic::default(),
        }
    }

    /// The policy's hooks, which contain its panics (kept in the cold part).
    #[inline]
    fn guarded(&mut self) -> Guarded<'_, P> {
        Guarded::new(&mut self.policy, &mut self.cold, &self.rules)
    }

    /// Whether a result may trip the closed machine: not while forced (closed), and never
    /// for a breaker that nothing trips.
    fn may_trip(&self) -> bool {
        self.forced.is_none() && !self.rules.never_trips
    }

    /// The manual override in force, if any.
    pub(crate) fn forced(&self) -> Option<Forced> {
        self.forced
    }

    /// Asks the policy what the lane may count without it, from the counts as they are now,
    /// before every publish: how many failures (see [`Phase::Closed`]'s `failure_room`), and,
    /// with in-flight slots, whether fast successes are quiet (its `locked`). A panic answers
    /// none and not quiet, and is kept for the next step to resume.
    pub(crate) fn update_lane_room(&mut self) {
        let lane_may_fail = self.state == State::Closed
            && self.forced.is_none()
            && !self.rules.dry_run
            && self.rules.slow_threshold.is_none()
            && !self.window.is_by_count()
            // A throttle tells its observers when a result starts or stops it: it sees them.
            && !self.has_throttle;
        let lane_may_succeed = self.has_slots
            && self.state == State::Closed
            && self.forced.is_none()
            && !self.rules.dry_run
            && !self.has_throttle;
        let room = if lane_may_fail || lane_may_succeed {
            let counts = self.window.counts();
            self.guarded().lane_room(&counts)
        } else {
            LaneRoom::NONE
        };
        self.failure_room = if lane_may_fail { room.failures } else { 0 };
        self.quiet = lane_may_succeed && room.quiet_successes;
    }

    /// Takes `failures` the lane counted out of the room it was given, without asking the
    /// policy (a read folds the lane and republishes it: no user code runs there). What is
    /// left holds by the room's own contract: those failures were among the ones it allowed.
    pub(crate) fn spend_failure_room(&mut self, failures: u64) {
        self.failure_room = self.failure_room.saturating_sub(failures);
    }

    /// What the current state allows.
    pub(crate) fn phase(&self) -> Phase {
        if self.forced.is_some() {
            return Phase::Forced;
        }
        match self.state {
            State::Closed => {
                let room = self.throttle_room();
                let (window_end, since) = match self.overdue_check_at() {
                    // Tracked on the lane: the lock also takes the first call that may find
                    // one in flight overdue.
                    Some(check_at) => (
                        Some(
                            self.closed_period_end()
                                .unwrap_or(Nanos::MAX - 1)
                                .min(check_at),
                        ),
                        self.latest,
                    ),
                    None => (self.closed_period_end(), 0),
                };
                Phase::Closed {
                    generation: self.generation,
                    age: self.window.age(),
                    window_end,
                    room,
                    failure_room: self.failure_room,
                    shed_from: self.shed_from(room),
                    since,
                    locked: self.has_slots && !self.quiet,
                }
            }
            State::Open => Phase::Open { until: self.expiry },
            State::HalfOpen => Phase::HalfOpen,
        }
    }

    /// With the lane's in-flight slots: the last instant at which no call in flight (the
    /// machine's, the slots', or one the lane admits from now on, which starts no earlier
    /// than the latest time the machine saw) can be overdue. Call with the lane closed.
    fn overdue_check_at(&self) -> Option<Nanos> {
        let slots = self.slots()?;
        let threshold = saturating_nanos(self.rules.slow_threshold?);
        let generation = self.generation;
        let oldest = slots
            .oldest(|key| Generation::from_bits(key) == generation)
            .into_iter()
            .chain(self.cold.as_ref().and_then(|c| c.in_flight.oldest()))
            .fold(self.latest, Nanos::min);
        Some(oldest.saturating_add(threshold))
    }

    /// The last instant of the current closed-state period: the fixed window's end, or the
    /// current bucket's end in a rolling window (the next age starts one nanosecond later);
    /// `None` when counts are never cleared.
    fn closed_period_end(&self) -> Option<Nanos> {
        if self.rules.interval > 0 {
            return Some(self.expiry);
        }
        self.window.is_rolling().then(|| {
            let next_age = self.window.age().saturating_add(1);
            (self.window.start())
                .saturating_add(next_age.saturating_mul(self.rules.bucket_period))
                .saturating_sub(1)
        })
    }

    /// Records `requests` admissions and `successes` successes made elsewhere (the lock-free
    /// lane) in the current closed generation, at the window's current age, as if each had
    /// been recorded here in turn. With failures (an uncontended lane's), `tail` is how the results end (see
    /// [`Tail`]).
    pub(crate) fn absorb(&mut self, requests: u64, successes: u64, failures: u64, tail: Tail) {
        if requests == 0 && successes == 0 && failures == 0 {
            return;
        }
        debug_assert!(self.state == State::Closed);
        self.window.absorb(requests, successes, failures, tail);
        self.totals.admitted += requests;
        self.totals.successes += successes;
        self.totals.failures += failures;
    }

    /// Counts the request of a call the lane admitted without counting it
    /// ([`Breaker::execute`](crate::Breaker::execute)'s one-step count), which the lane
    /// could not count when the call returned: in the current generation if it was admitted
    /// in it (closed: a lane's generation), at its window age (a rolling window: in its
    /// bucket, if still in the window), else in the totals only (that generation's counts
    /// are gone, as they are for a counted admission whose result comes back stale).
    pub(crate) fn count_request(&mut self, ticket: Ticket) {
        self.totals.admitted += 1;
        if self.state == State::Closed && ticket.generation() == self.generation {
            self.window.on_request_at(ticket.age());
        }
    }

    /// The policy's figures (see [`TripPolicy::gauges`]); a panic is kept for the caller,
    /// as for every policy hook.
    pub(crate) fn policy_gauges(&mut self, report: &mut dyn FnMut(&'static str, f64)) {
        self.guarded().gauges(report);
    }

    /// How many times the machine went from each state to each other.
    pub(crate) fn transitions(&self) -> Transitions {
        self.cold
            .as_ref()
            .map_or_else(Transitions::default, |c| c.transitions)
    }

    /// Failures counted since the breaker last recovered (closed after being open), or since
    /// it was built: brpc's `RecentErr`.
    pub(crate) fn recent_failures(&self) -> u64 {
        self.totals.failures - self.cold.as_ref().map_or(0, |c| c.failures_at_recovery)
    }

    /// Lazy evaluation of everything time-based (gobreaker's `currentState`): a closed fixed
    /// window that expired starts a new generation, a rolling window rolls, and an open period
    /// that expired goes half-open.
    pub(crate) fn refresh(&mut self, now: Nanos) -> Option<Change> {
        self.latest = self.latest.max(now);
        match self.state {
            State::Closed => {
                if now > self.expiry {
                    self.new_generation(now);
                } else if self.window.is_rolling() {
                    let age = now.saturating_sub(self.window.start()) / self.rules.bucket_period;
                    self.window.advance_to(age);
                }
                None
            }
            // With a health check, the open period ends when a check passes, not by itself.
            State::Open if now > self.expiry && !self.rules.checked() => {
                Some(self.set_state(State::HalfOpen, now))
            }
            State::Open | State::HalfOpen => None,
        }
    }

    /// Admits a request or says why not.
    pub(crate) fn admit(&mut self, now: Nanos) -> (Result<Ticket, Rejected>, Option<Change>) {
        let mut made = None;
        let admitted = self.admit_into(now, |change| made = Some(change));
        (admitted, made)
    }

    /// [`admit`](Self::admit), handing the change it made (at most one) to `made` rather
    /// than returning it: a returned `Option<Change>` is copied whether it holds one or
    /// not, and almost every admission makes none.
    #[inline]
    pub(crate) fn admit_into(
        &mut self,
        now: Nanos,
        mut made: impl FnMut(Change),
    ) -> Result<Ticket, Rejected> {
        // At most one change: a refresh that goes half-open starts a generation with no
        // call in flight, so nothing can be overdue after it.
        if let Some(change) = self.refresh(now).or_else(|| self.check_overdue(now)) {
            made(change);
        }
        if self.check_due(now) {
            // A call that cannot run the check: held back while one is under way, else it
            // probes as gobreaker's would (no check to wait for).
            if let Some(rejected) = self.admit_without_check(now) {
                return Err(rejected);
            }
            if self.state == State::Open {
                made(self.set_state(State::HalfOpen, now));
            }
        }
        match self.state {
            State::Open if self.forced == Some(Forced::Open) => self.refuse(Rejected::ForcedOpen),
            State::Open => self.refuse(Rejected::open_until(self.expiry, now)),
            State::HalfOpen => {
                if self.half_open_in_flight() >= self.probes() && !self.take_over_probes(now) {
                    return self.refuse(Rejected::TooManyRequests);
                }
                // The slots held expire strictly after `probe_timeout` without an admission.
                self.expiry = now.saturating_add(self.rules.probe_slot_timeout());
                Ok(self.admit_counted(now))
            }
            State::Closed => {
                if let Some(probability) = self.throttle_draw() {
                    return self.refuse(Rejected::Throttled { probability });
                }
                Ok(self.admit_counted(now))
            }
        }
    }

    /// Counts an admission at `now` in the current generation and hands out its ticket.
    #[inline]
    fn admit_counted(&mut self, now: Nanos) -> Ticket {
        self.window.on_request();
        self.totals.admitted += 1;
        let age = self.window.age();
        if self.rules.slow_threshold.is_some() {
            self.cold().in_flight.admit(now, age);
            return Ticket::aged(self.generation, age).by_machine();
        }
        Ticket::aged(self.generation, age)
    }

    /// Half-open with every probe slot taken: when no probe was admitted for longer than
    /// `probe_timeout` (the slots' `expiry`), the next call takes the slots over and is
    /// admitted as a probe; `true` then. Not a state change: the breaker stays half-open,
    /// with the same number of probes.
    ///
    /// What becomes of the probes taken over depends on the setting:
    /// - by default (no `probe_timeout` given), they are *relieved* of their slots and keep
    ///   their verdicts: a probe slower than the open period is still evidence of health,
    ///   so its success counts toward closing when it comes (and its failure reopens), as
    ///   any probe's of this trial. A new generation of probes starts within the trial
    ///   (the relieved ones are told apart by theirs), its counts kept;
    /// - with a `probe_timeout` given, a probe out that long is *lost*: the trial starts
    ///   again in a new generation, and the probes it replaces report late and are dropped.
    fn take_over_probes(&mut self, now: Nanos) -> bool {
        if now <= self.expiry {
            return false;
        }
        self.cold().totals.probes_taken_over += 1;
        if self.rules.relieves_probes() {
            let c = self.window.counts();
            let relieved = c.requests.saturating_sub(c.total_exclusions);
            self.cold().relieved = relieved;
            self.generation = self.generation.next();
        } else {
            self.start_generation(now, Nanos::MAX);
        }
        true
    }

    /// Whether a result admitted in `generation` counts now: one of the current generation,
    /// or, half-open, of the trial running (a probe relieved by a takeover).
    fn counts_generation(&self, generation: Generation) -> bool {
        generation == self.generation
            || (self.state == State::HalfOpen
                && self.cold.as_ref().is_some_and(|c| {
                    generation.since(c.trial_from) < self.generation.since(c.trial_from)
                }))
    }

    /// Turns a call away, counting it by its reason; in dry run, admits it as a shadow call
    /// instead ([`Ticket::SHADOW`]), counted as one it would have rejected.
    #[inline(always)]
    fn refuse(&mut self, rejected: Rejected) -> Result<Ticket, Rejected> {
        if self.rules.dry_run {
            self.cold().totals.would_reject += 1;
            return Ok(Ticket::SHADOW);
        }
        self.count_rejection(rejected);
        Err(rejected)
    }

    /// Whether a health check revives the breaker (configured, and not in dry run).
    pub(crate) fn health_checked(&self) -> bool {
        self.rules.checked()
    }

    /// Whether the breaker is in dry run ([`Knobs::dry_run`](crate::knobs::Knobs::dry_run)).
    pub(crate) fn dry_run(&self) -> bool {
        self.rules.dry_run
    }

    /// With a slow-call threshold: counts the calls still in flight that have passed it as
    /// slow now, rather than when (if ever) they return, and asks the policy whether that
    /// trips the breaker; in half-open an overdue probe has failed, and reopens it.
    fn check_overdue(&mut self, now: Nanos) -> Option<Change> {
        let threshold = saturating_nanos(self.rules.slow_threshold?);
        if self.window.is_by_count() {
            // A count window holds results: a slow call takes its place when it returns.
            return None;
        }
        let window = &mut self.window;
        // None: nothing in flight (a threshold builds the cold part).
        let cold = self.cold.as_deref_mut()?;
        let mut marked = cold
            .in_flight
            .take_overdue(now, threshold, |age| window.add_slow(age));
        if let Some(slots) = cold.slots.as_deref() {
            // The lane's calls (its cells are closed: see `InFlightSlots`).
            let generation = self.generation;
            marked += slots.mark_overdue(
                now,
                threshold,
                |key| Generation::from_bits(key) == generation,
                |key| window.add_slow(key >> Generation::BITS),
            );
        }
        if marked == 0 {
            return None;
        }
        match self.state {
            State::Closed => {
                let counts = self.window.counts();
                let result = CallResult::new(
                    Outcome::Excluded,
                    Some(Duration::from_nanos(threshold)),
                    &counts,
                    instant(now),
                )
                .with_in_flight(true);
                let trips = self.guarded().on_result(&result) && self.may_trip();
                trips.then(|| self.set_state(State::Open, now))
            }
            State::HalfOpen => Some(self.set_state(State::Open, now)),
            State::Open => None,
        }
    }

    /// Probes that hold a half-open slot: excluded results give theirs back, and a relieving
    /// takeover gives back every slot held (see [`take_over_probes`](Machine::take_over_probes)).
    fn half_open_in_flight(&self) -> u64 {
        let c = self.window.counts();
        c.requests
            .saturating_sub(c.total_exclusions)
            .saturating_sub(self.cold.as_ref().map_or(0, |c| c.relieved))
    }

    /// Records the result of a request admitted with `ticket`. A result from an older
    /// generation (the lazy evaluation of this very call included) is dropped.
    pub(crate) fn complete(
        &mut self,
        ticket: Ticket,
        verdict: Verdict,
        latency: Option<Duration>,
        now: Nanos,
    ) -> Option<Change> {
        // A shadow call changes nothing, not even the time the machine last saw: as a
        // rejected call, it was never there.
        if ticket.is_shadow() {
            return None;
        }
        let change = self.refresh(now);
        // A call the lane tracked gives its slot back, whatever its result: whether it was
        // counted as slow while in flight.
        let lane_counted = ticket.slot().map(|i| {
            self.slots()
                .is_some_and(|slots| slots.release(i) == Released::Counted)
        });
        // An abandoned call is counted as abandoned in the totals, whatever else happens to
        // it; a reported one as its outcome, or as dropped.
        let abandoned = verdict == Verdict::Abandoned;
        if abandoned {
            self.cold().totals.abandoned += 1;
        }
        if change.is_some() || !self.counts_generation(ticket.generation()) {
            // Stale: every state change starts a new generation, this very one included.
            if !abandoned {
                self.cold().totals.dropped += 1;
            }
            return change;
        }
        // A probe relieved of its slot by a takeover (see `take_over_probes`).
        let relieved = ticket.generation() != self.generation;
        // Slower than the policy's threshold: a call counted as slow while in flight is not
        // counted again. It is found by its admission time (a policy with a threshold
        // measures latency: `now - latency`).
        let counted_in_flight = match (self.rules.slow_threshold, latency) {
            _ if lane_counted.is_some() => lane_counted == Some(true),
            (Some(_), Some(latency)) => {
                let admitted = now.saturating_sub(saturating_nanos(latency));
                !self.cold().in_flight.complete(admitted)
            }
            _ => false,
        };
        let judged = judge(verdict, latency, self.state, &self.rules, counted_in_flight);
        let Judged {
            outcome,
            fatal,
            slow,
            reported: totals,
        } = judged;
        // Abandoned calls are in the totals already.
        match self.state {
            State::Closed => {
                // A result whose bucket rolled out of the window is not counted, but the
                // policy is still consulted on the current counts, as gobreaker does.
                self.record(ticket.age(), outcome, totals, slow);
                let counts = self.window.counts();
                let result =
                    CallResult::new(outcome, latency, &counts, instant(now)).with_fatal(fatal);
                // Forced closed (or exempt): the policy still sees every result, but never
                // trips it.
                let trips = (self.guarded().on_result(&result) || fatal) && self.may_trip();
                trips.then(|| self.set_state(State::Open, now))
            }
            State::HalfOpen => {
                if outcome == Outcome::Failure {
                    if totals {
                        self.total_result(outcome);
                    }
                } else {
                    self.record(ticket.age(), outcome, totals, slow);
                }
                if relieved && outcome.counted() == Outcome::Excluded {
                    // Its slot was given back by the takeover: not a second time.
                    let cold = self.cold();
                    cold.relieved = cold.relieved.saturating_sub(1);
                }
                let counts = self.window.counts();
                let result =
                    CallResult::new(outcome, latency, &counts, instant(now)).with_fatal(fatal);
                self.guarded().on_probe_result(&result);
                match outcome {
                    Outcome::Failure => Some(self.set_state(State::Open, now)),
                    Outcome::Success if counts.consecutive_successes >= self.probes() => {
                        Some(self.set_state(State::Closed, now))
                    }
                    Outcome::Success | Outcome::Excluded | Outcome::Fatal => None,
                }
            }
            // Unreachable in practice: an open breaker admits nothing, and entering open
            // starts a new generation. Dropping the result is the safe answer.
            State::Open => {
                if totals {
                    self.cold().totals.dropped += 1;
                }
                None
            }
        }
    }

    /// Records a result in the window, and (if `totals`) in the totals as counted or
    /// dropped.
    fn record(&mut self, age: u64, outcome: Outcome, totals: bool, slow: bool) {
        let counted = self.window.record_slow(age, outcome, slow);
        match (totals, counted) {
            (false, _) => {}
            (true, true) => self.total_result(outcome),
            (true, false) => self.cold().totals.dropped += 1,
        }
    }

    /// Counts a result in the totals (a fatal one as a failure).
    fn total_result(&mut self, outcome: Outcome) {
        match outcome.counted() {
            Outcome::Success => self.totals.successes += 1,
            Outcome::Excluded => self.cold().totals.exclusions += 1,
            _ => self.totals.failures += 1,
        }
    }

    /// Moves to `to` because of the policy or the clock: see [`enter`](Machine::enter).
    fn set_state(&mut self, to: State, now: Nanos) -> Change {
        self.enter(to, now, None, Origin::Breaker)
    }

    /// Moves to `to`, until `expiry` when given (else as the state's timing says). The policy
    /// is asked for the open duration (when needed) or the half-open probe count before
    /// anything changes and told of the change after everything has.
    fn enter(&mut self, to: State, now: Nanos, expiry: Option<Nanos>, origin: Origin) -> Change {
        let from = self.state;
        debug_assert_ne!(from, to);
        // Every change ends the health-check lease in force: a check settled after it is stale.
        self.end_lease();
        let counts = self.window.counts();
        let expiry = match expiry {
            Some(expiry) => expiry,
            None => self.expiry_of(to, now),
        };
        if to == State::HalfOpen {
            let max_requests = self.rules.max_requests;
            let probes = self.guarded().half_open_probes(max_requests);
            self.cold().probes = probes;
        }
        self.state = to;
        let failures = self.totals.failures;
        let cold = self.cold();
        cold.transitions.count(from, to);
        if to == State::Open {
            cold.totals.opened += 1;
        }
        if to == State::Closed {
            cold.failures_at_recovery = failures;
            cold.recovered_at = Some(now);
        }
        self.down = false;
        self.start_generation(now, expiry);
        self.guarded().on_state_change(from, to, now);
        let open_for =
            (to == State::Open && expiry != Nanos::MAX).then(|| expiry.saturating_sub(now));
        Change {
            from,
            to,
            at: now,
            counts,
            totals: self.totals(),
            origin,
            open_for,
            forced: self.forced,
        }
    }

    /// A new generation of the current state, e.g. when a closed-state window expires.
    fn new_generation(&mut self, now: Nanos) {
        let expiry = self.expiry_of(self.state, now);
        self.start_generation(now, expiry);
    }

    /// When a generation of `state` starting at `now` expires (strictly after the result).
    fn expiry_of(&mut self, state: State, now: Nanos) -> Nanos {
        match state {
            State::Closed if self.rules.interval > 0 => now.saturating_add(self.rules.interval),
            State::Closed | State::HalfOpen => Nanos::MAX,
            State::Open => {
                let (from, backoff) = (self.state, self.rules.backoff);
                let cold = self.cold();
                match from {
                    // A failed probe: a failed recovery. (A failed health check, open to
                    // open, re-arms the period at the level it has: checks keep a steady
                    // cadence.)
                    State::HalfOpen => {
                        cold.failed_recoveries = cold.failed_recoveries.saturating_add(1);
                    }
                    // A trip: a relapse soon after the last recovery backs off further,
                    // one after a long healthy spell starts over.
                    State::Closed => {
                        let relapse = cold
                            .recovered_at
                            .is_some_and(|at| now.saturating_sub(at) < backoff);
                        cold.failed_recoveries = if relapse {
                            cold.failed_recoveries.saturating_add(1)
                        } else {
                            0
                        };
                    }
                    State::Open => {}
                }
                let (failed, draw) = (cold.failed_recoveries, cold.open_draws);
                cold.open_draws = draw.wrapping_add(1);
                let timeout = Duration::from_nanos(self.rules.backed_off(failed));
                let open_for = saturating_nanos(self.guarded().open_duration(timeout, now));
                // The spread shortens it, never lengthens it: the configured period (and
                // the longest one) stays an upper bound.
                let open_for = (self.rules.jitter).spread(open_for.min(self.rules.max_open), draw);
                now.saturating_add(open_for)
            }
        }
    }

    fn start_generation(&mut self, now: Nanos, expiry: Nanos) {
        self.generation = self.generation.next();
        if let Some(cold) = self.cold.as_deref_mut() {
            cold.trial_from = self.generation;
            cold.relieved = 0;
            cold.in_flight.clear();
        }
        self.window.restart(self.state == State::Closed, now);
        self.expiry = expiry;
    }
}

#[cfg(test)]
mod tests;
