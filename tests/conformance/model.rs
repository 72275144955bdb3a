//! Model-based tests: random sequences of operations run against a real [`Breaker`] and,
//! side by side, against a small reference model of gobreaker v2's semantics written here,
//! and after every step the two must agree on everything a user can observe.
//!
//! The model is written from the documented semantics (the crate's "Semantics" section,
//! `tests/data/gobreaker/README.md`, and gobreaker v2's `gobreaker.go` / `counter.go` for the
//! rolling window), not from the crate's code:
//!
//! - counts belong to a generation; a new one starts at every state change and when a closed
//!   fixed window expires (strictly after `interval`); a result from an older generation is
//!   dropped;
//! - an open breaker goes half-open strictly after `timeout` (zero means 60 s);
//! - `requests` is counted at admission, and the trip rule is consulted on closed-state
//!   failures only (a closed failure whose bucket has left a rolling window is not counted,
//!   but the rule is still consulted, as gobreaker does);
//! - half-open admits `max(1, max_requests)` probes minus exclusions, closes after that many
//!   consecutive successes, and reopens on any failure; once every slot is taken and no probe
//!   was admitted for longer than `probe_timeout` (zero means `timeout`; `u64::MAX` never),
//!   the next call takes the slots over (the crate's one departure from gobreaker, which
//!   never does; `Builder::probe_timeout`): with a `probe_timeout` given, the trial starts
//!   again in a new generation (the probes out are written off); by default (zero), the
//!   probes out are relieved of their slots and their results still count in the trial, the
//!   caller admitted in a slot of its own;
//! - with a bucket period, `interval` is rounded up to whole buckets; a single bucket is a
//!   fixed window; with two or more the window rolls bucket by bucket, at each boundary
//!   (inclusive), in the closed state only, trimming the consecutive counters as gobreaker's
//!   `rollingCounts.subtract` does;
//! - a permit dropped without a verdict is abandoned: an exclusion in the counts (the
//!   breaker's default), `abandoned` in the totals.
//!
//! After every step the breaker's `counts()` and `totals()` (pure reads) must equal the
//! model's, and every `allow()` must return what the model says, `retry_after` to the
//! nanosecond. `state()` evaluates expiries itself, so it is compared after every step in
//! "eager" cases and only at explicit [`Op::State`] steps in "lazy" ones, where `allow()` and
//! the verdicts have to do the lazy evaluation on their own.
//!
//! Every window kind (none, fixed, rolling) runs with a counting policy, whose closed-state
//! successes may take the crate's lock-free lane, and with [`LockedTrip`], the same rule
//! behind a policy that asks to see every success, which sends every call through the lock.

use std::time::Duration;

use lazybreaker::policy::{CallResult, ConsecutiveFailures, FailureRatio, Outcome, TripPolicy};
use lazybreaker::{Breaker, Counts, ManualClock, Permit, Rejected, State, Totals};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const NS: u64 = 1;
const MS: u64 = 1_000_000 * NS;
/// gobreaker's open duration when `timeout` is zero.
const DEFAULT_TIMEOUT: u64 = 60_000 * MS;

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// When the breaker trips: the same rule for the crate's counting policies, for [`LockedTrip`]
/// and for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trip {
    /// `consecutive_failures >= k` after a failure (`ConsecutiveFailures::new(k)`).
    Consecutive(u64),
    /// `requests >= min && total_failures / requests >= num / den` after a failure
    /// (`FailureRatio::new(num / den, min)`). Only ratios exact in binary are generated, so
    /// the policy's `f64` comparison is the exact rational one.
    Ratio { num: u64, den: u64, min: u64 },
}

impl Trip {
    /// Whether a closed breaker with these counts (after a failure was recorded) trips.
    fn trips(self, c: &Tally) -> bool {
        match self {
            Trip::Consecutive(k) => c.consecutive_failures >= k,
            Trip::Ratio { num, den, min } => {
                c.requests >= min && c.total_failures * den >= num * c.requests
            }
        }
    }
}

/// The closed-state count window, as given to the builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// `interval` zero: never cleared in closed (a bucket period, if set, is ignored).
    Never { bucket_period: u64 },
    /// A fixed window of `interval`.
    Fixed { interval: u64 },
    /// `interval` split into buckets of `bucket_period` (rounded up to whole buckets).
    Rolling { interval: u64, bucket_period: u64 },
}

impl Window {
    /// `(interval, bucket_period)` for the builder, in nanoseconds.
    fn knobs(self) -> (u64, u64) {
        match self {
            Window::Never { bucket_period } => (0, bucket_period),
            Window::Fixed { interval } => (interval, 0),
            Window::Rolling {
                interval,
                bucket_period,
            } => (interval, bucket_period),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Config {
    max_requests: u32,
    /// Nanoseconds; zero means 60 s.
    timeout: u64,
    /// Nanoseconds; zero means `timeout`, `u64::MAX` never.
    probe_timeout: u64,
    window: Window,
    trip: Trip,
    /// `true`: the crate's own counting policy (`capabilities().needs_successes == false`, so closed-state
    /// successes may take the lock-free lane); `false`: [`LockedTrip`].
    lane: bool,
    /// `true`: read `state()` (which evaluates expiries) after every step; `false`: only at
    /// [`Op::State`] steps, so the other calls do the lazy evaluation themselves.
    eager: bool,
}

/// The trip rule as a policy of the test's own that asks to see every success: the breaker
/// then sends every call through its lock.
#[derive(Debug)]
struct LockedTrip(Trip);

impl TripPolicy for LockedTrip {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        result.outcome == Outcome::Failure && self.0.trips(&Tally::of(result.counts))
    }

    fn capabilities(&self) -> lazybreaker::policy::Capabilities {
        lazybreaker::policy::Capabilities::default().needs_successes(true)
    }
}

// ---------------------------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------------------------

/// The six count fields, read from [`Counts`] field by field (it is about to become
/// `#[non_exhaustive]`, so the test never builds one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    requests: u64,
    total_successes: u64,
    total_failures: u64,
    total_exclusions: u64,
    consecutive_successes: u64,
    consecutive_failures: u64,
}

impl Tally {
    fn of(c: &Counts) -> Self {
        Tally {
            requests: c.requests,
            total_successes: c.total_successes,
            total_failures: c.total_failures,
            total_exclusions: c.total_exclusions,
            consecutive_successes: c.consecutive_successes,
            consecutive_failures: c.consecutive_failures,
        }
    }

    fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Success => {
                self.total_successes += 1;
                self.consecutive_successes += 1;
                self.consecutive_failures = 0;
            }
            Outcome::Failure => {
                self.total_failures += 1;
                self.consecutive_failures += 1;
                self.consecutive_successes = 0;
            }
            Outcome::Excluded => self.total_exclusions += 1,
            other => unreachable!("the model gives no {other:?} verdict"),
        }
    }
}

/// `(requests, total_successes, total_failures, total_exclusions, consecutive_successes,
/// consecutive_failures)`, for the hand-written scenarios.
fn tally(r: u64, s: u64, f: u64, e: u64, cs: u64, cf: u64) -> Tally {
    Tally {
        requests: r,
        total_successes: s,
        total_failures: f,
        total_exclusions: e,
        consecutive_successes: cs,
        consecutive_failures: cf,
    }
}

/// The lifetime counters, read from [`Totals`] field by field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Lifetime {
    admitted: u64,
    successes: u64,
    failures: u64,
    exclusions: u64,
    dropped: u64,
    opened: u64,
    abandoned: u64,
    probes_taken_over: u64,
}

impl Lifetime {
    fn of(t: &Totals) -> Self {
        Lifetime {
            admitted: t.admitted,
            successes: t.successes,
            failures: t.failures,
            exclusions: t.exclusions,
            dropped: t.dropped,
            opened: t.opened,
            abandoned: t.abandoned,
            probes_taken_over: t.probes_taken_over,
        }
    }
}

/// What the model hands out on admission: the generation and the window age (bucket) of the
/// request.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    generation: u64,
    age: u64,
}

/// What `allow()` returned, in comparable form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    Ok,
    Open { retry_after: Duration },
    TooManyRequests,
}

/// gobreaker v2's state machine on an explicit clock (nanoseconds since the breaker was built).
#[derive(Debug, Clone)]
struct Model {
    trip: Trip,
    /// `max(1, max_requests)`.
    probes: u64,
    /// The open duration (zero already replaced by 60 s).
    timeout: u64,
    /// How long every probe slot may be held (zero already replaced by `timeout`).
    probe_timeout: u64,
    /// Whether a takeover relieves the probes out (the default, `probe_timeout` zero) rather
    /// than writing them off.
    relieves: bool,
    /// Half-open: the first generation of the trial (results of any generation from it on
    /// count), and the slots given back by takeovers whose probes are out.
    trial_from: u64,
    relieved: u64,
    /// The effective closed window: zero for none, rounded up to whole buckets.
    interval: u64,
    /// The bucket length, when the window rolls (two or more buckets); zero otherwise.
    bucket_period: u64,

    state: State,
    generation: u64,
    /// When the current generation started.
    start: u64,
    /// The open state's last instant, or the fixed window's last instant, or half-open's
    /// last instant before the probes held may be taken over (from the latest admission);
    /// `None` otherwise.
    until: Option<u64>,
    counts: Tally,
    /// Bucket periods elapsed since `start`, as of the last roll (always zero unless rolling).
    age: u64,
    /// One per bucket when rolling (the bucket of age `a` is `buckets[a % len]`); else empty.
    buckets: Vec<Tally>,
    totals: Lifetime,
}

impl Model {
    fn new(cfg: &Config) -> Self {
        let (interval, bucket_period) = cfg.window.knobs();
        let (interval, bucket_period, buckets) = if interval == 0 {
            (0, 0, 0)
        } else if bucket_period == 0 {
            (interval, 0, 0)
        } else {
            let n = interval.div_ceil(bucket_period);
            if n >= 2 {
                (n * bucket_period, bucket_period, n)
            } else {
                // One bucket: a fixed window one bucket long.
                (bucket_period, 0, 0)
            }
        };
        let timeout = if cfg.timeout == 0 {
            DEFAULT_TIMEOUT
        } else {
            cfg.timeout
        };
        let mut model = Model {
            trip: cfg.trip,
            probes: u64::from(cfg.max_requests.max(1)),
            timeout,
            probe_timeout: match cfg.probe_timeout {
                0 => timeout,
                t => t,
            },
            relieves: cfg.probe_timeout == 0,
            trial_from: 0,
            relieved: 0,
            interval,
            bucket_period,
            state: State::Closed,
            generation: 0,
            start: 0,
            until: None,
            counts: Tally::default(),
            age: 0,
            buckets: vec![Tally::default(); buckets as usize],
            totals: Lifetime::default(),
        };
        model.new_generation(0);
        model
    }

    fn rolling(&self) -> bool {
        !self.buckets.is_empty()
    }

    fn new_generation(&mut self, now: u64) {
        self.generation += 1;
        self.trial_from = self.generation;
        self.relieved = 0;
        self.start = now;
        self.counts = Tally::default();
        self.age = 0;
        self.buckets.fill(Tally::default());
        self.until = match self.state {
            State::Closed if self.interval > 0 && !self.rolling() => Some(now + self.interval),
            State::Open => Some(now + self.timeout),
            _ => None,
        };
    }

    fn set_state(&mut self, to: State, now: u64) {
        if self.state == to {
            return;
        }
        self.state = to;
        self.new_generation(now);
        if to == State::Open {
            self.totals.opened += 1;
        }
    }

    /// The lazy evaluation every call starts with: expiries (strict) and bucket rolls
    /// (inclusive).
    fn refresh(&mut self, now: u64) {
        match self.state {
            State::Closed => match self.until {
                Some(until) if now > until => self.new_generation(now),
                _ if self.rolling() => self.roll_to((now - self.start) / self.bucket_period),
                _ => {}
            },
            State::Open => {
                if now > self.until.expect("an open breaker has a deadline") {
                    self.set_state(State::HalfOpen, now);
                }
            }
            State::HalfOpen => {}
        }
    }

    /// Rolls the window forward to `age`, one bucket at a time (or clears it when every bucket
    /// is gone). The generation does not change.
    fn roll_to(&mut self, age: u64) {
        if age <= self.age {
            return;
        }
        let n = self.buckets.len() as u64;
        if age - self.age >= n {
            self.counts = Tally::default();
            self.buckets.fill(Tally::default());
            self.age = age;
            return;
        }
        while self.age < age {
            self.age += 1;
            // The slot of the new age holds the bucket leaving the window.
            let leaving = (self.age % n) as usize;
            self.forget(leaving);
            self.buckets[leaving] = Tally::default();
        }
    }

    /// Takes the bucket at `leaving` out of the window's counts. The totals are subtracted
    /// (saturating); a consecutive run is shortened by the leaving bucket's own run only when
    /// the run spans the whole window from inside that bucket, i.e. equals the leaving
    /// bucket's run plus every other bucket's total of the same kind; otherwise it is kept.
    fn forget(&mut self, leaving: usize) {
        let old = self.buckets[leaving];
        let others = |f: fn(&Tally) -> u64| -> u64 {
            self.buckets
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != leaving)
                .map(|(_, b)| f(b))
                .sum()
        };
        let success_run = old.consecutive_successes + others(|b| b.total_successes);
        let failure_run = old.consecutive_failures + others(|b| b.total_failures);
        let c = &mut self.counts;
        if c.consecutive_successes == success_run {
            c.consecutive_successes = c
                .consecutive_successes
                .saturating_sub(old.consecutive_successes);
        }
        if c.consecutive_failures == failure_run {
            c.consecutive_failures = c
                .consecutive_failures
                .saturating_sub(old.consecutive_failures);
        }
        c.requests = c.requests.saturating_sub(old.requests);
        c.total_successes = c.total_successes.saturating_sub(old.total_successes);
        c.total_failures = c.total_failures.saturating_sub(old.total_failures);
        c.total_exclusions = c.total_exclusions.saturating_sub(old.total_exclusions);
    }

    fn state(&mut self, now: u64) -> State {
        self.refresh(now);
        self.state
    }

    fn allow(&mut self, now: u64) -> Result<Ticket, Admit> {
        self.refresh(now);
        match self.state {
            State::Open => {
                let until = self.until.expect("an open breaker has a deadline");
                return Err(Admit::Open {
                    // The open period's rest, without the nanosecond of the strict expiry;
                    // at the deadline itself (still open) 1 ns.
                    retry_after: Duration::from_nanos((until - now).max(1)),
                });
            }
            State::HalfOpen => {
                let taken = self
                    .counts
                    .requests
                    .saturating_sub(self.counts.total_exclusions)
                    .saturating_sub(self.relieved);
                if taken >= self.probes {
                    match self.until {
                        // Every slot held past the probe timeout, by default: the probes
                        // out give their slots back, and keep counting in this trial.
                        Some(until) if now > until && self.relieves => {
                            self.totals.probes_taken_over += 1;
                            self.relieved += taken;
                            self.generation += 1;
                        }
                        // With a probe timeout given: a new trial.
                        Some(until) if now > until => {
                            self.totals.probes_taken_over += 1;
                            self.new_generation(now);
                        }
                        _ => return Err(Admit::TooManyRequests),
                    }
                }
                self.until = Some(now.saturating_add(self.probe_timeout));
            }
            State::Closed => {}
        }
        self.counts.requests += 1;
        if self.rolling() {
            let i = (self.age % self.buckets.len() as u64) as usize;
            self.buckets[i].requests += 1;
        }
        self.totals.admitted += 1;
        Ok(Ticket {
            generation: self.generation,
            age: self.age,
        })
    }

    /// Records `outcome`; an `abandoned` call (a permit dropped without a verdict) counts
    /// as abandoned in the totals, whatever its generation or bucket, and as `outcome` (an
    /// exclusion, the breaker's default) in the counts.
    fn complete(&mut self, ticket: Ticket, outcome: Outcome, abandoned: bool, now: u64) {
        self.refresh(now);
        if abandoned {
            self.totals.abandoned += 1;
        }
        let in_trial = self.state == State::HalfOpen
            && ticket.generation >= self.trial_from
            && ticket.generation < self.generation;
        if in_trial && outcome == Outcome::Excluded {
            // A relieved probe's slot was given back by the takeover.
            self.relieved -= 1;
        }
        if ticket.generation != self.generation && !in_trial {
            if !abandoned {
                self.totals.dropped += 1; // stale
            }
            return;
        }
        // The request's bucket is still in the window (always, unless rolling).
        let in_window = ticket.age <= self.age
            && (!self.rolling() || self.age - ticket.age < self.buckets.len() as u64);
        if in_window {
            self.counts.record(outcome);
            if self.rolling() {
                let i = (ticket.age % self.buckets.len() as u64) as usize;
                self.buckets[i].record(outcome);
            }
            match outcome {
                _ if abandoned => {}
                Outcome::Success => self.totals.successes += 1,
                Outcome::Failure => self.totals.failures += 1,
                Outcome::Excluded => self.totals.exclusions += 1,
                other => unreachable!("the model gives no {other:?} verdict"),
            }
        } else if !abandoned {
            self.totals.dropped += 1; // out of window
        }
        match (self.state, outcome) {
            (State::Closed, Outcome::Failure) if self.trip.trips(&self.counts) => {
                self.set_state(State::Open, now);
            }
            (State::HalfOpen, Outcome::Failure) => self.set_state(State::Open, now),
            (State::HalfOpen, Outcome::Success)
                if self.counts.consecutive_successes >= self.probes =>
            {
                self.set_state(State::Closed, now);
            }
            _ => {}
        }
    }

    /// The next instant at which something time-based happens, if the model were evaluated
    /// now: the open state's last instant or the fixed window's (strict: the change comes one
    /// nanosecond later), or the next bucket boundary (inclusive: the roll happens at it).
    fn next_deadline(&self, now: u64) -> Option<u64> {
        let mut m = self.clone();
        m.refresh(now);
        match m.state {
            State::Closed if m.rolling() => {
                let age = (now - m.start) / m.bucket_period;
                Some(m.start + (age + 1) * m.bucket_period)
            }
            State::Closed | State::Open => m.until,
            // Never, with no probe timeout.
            State::HalfOpen => m.until.filter(|&until| until != u64::MAX),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operations, applied to the breaker and the model side by side
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Success,
    Failure,
    Exclude,
    /// Drop the permit without a verdict.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `breaker.allow()`; an admitted permit is held.
    Allow,
    /// A verdict on the held permit `index % held` (nothing when none is held).
    Verdict { index: usize, verdict: Verdict },
    /// Advance the clock by this many nanoseconds.
    Advance(u64),
    /// Advance the clock to the model's next deadline plus this many nanoseconds (-1, 0 or +1),
    /// when that is in the future.
    ToDeadline(i8),
    /// `breaker.state()`.
    State,
}

/// What one step showed: the model's values, which the breaker's matched.
#[derive(Debug, Clone, Copy)]
struct Observed {
    admit: Option<Admit>,
    state: Option<State>,
    counts: Tally,
    totals: Lifetime,
}

struct Harness<'b, P: TripPolicy> {
    breaker: &'b Breaker<P>,
    clock: ManualClock,
    model: Model,
    held: Vec<(Permit<'b, P>, Ticket)>,
    now: u64,
    eager: bool,
    step: usize,
}

impl<'b, P: TripPolicy> Harness<'b, P> {
    fn new(breaker: &'b Breaker<P>, clock: ManualClock, cfg: &Config) -> Self {
        Harness {
            breaker,
            clock,
            model: Model::new(cfg),
            held: Vec::new(),
            now: 0,
            eager: cfg.eager,
            step: 0,
        }
    }

    fn advance(&mut self, by: u64) {
        self.now += by;
        self.clock.advance(Duration::from_nanos(by));
    }

    fn step(&mut self, op: Op) -> Result<Observed, TestCaseError> {
        let step = self.step;
        self.step += 1;
        let mut admit = None;
        let mut state = None;
        match op {
            Op::Allow => {
                let expected = self.model.allow(self.now);
                let actual = self.breaker.allow();
                let got = match &actual {
                    Ok(_) => Admit::Ok,
                    Err(Rejected::Open { retry_after }) => Admit::Open {
                        retry_after: *retry_after,
                    },
                    Err(Rejected::TooManyRequests) => Admit::TooManyRequests,
                    Err(other) => {
                        return Err(TestCaseError::fail(format!(
                            "step {step} {op:?}: unknown rejection {other:?}"
                        )))
                    }
                };
                let want = expected.map_or_else(|e| e, |_| Admit::Ok);
                prop_assert_eq!(got, want, "step {} {:?}: allow()", step, op);
                if let (Ok(permit), Ok(ticket)) = (actual, expected) {
                    self.held.push((permit, ticket));
                }
                admit = Some(want);
            }
            Op::Verdict { index, verdict } => {
                if !self.held.is_empty() {
                    let (permit, ticket) = self.held.remove(index % self.held.len());
                    let outcome = match verdict {
                        Verdict::Success => Outcome::Success,
                        Verdict::Failure => Outcome::Failure,
                        Verdict::Exclude | Verdict::Drop => Outcome::Excluded,
                    };
                    let abandoned = verdict == Verdict::Drop;
                    self.model.complete(ticket, outcome, abandoned, self.now);
                    match verdict {
                        Verdict::Success => permit.success(),
                        Verdict::Failure => permit.failure(),
                        Verdict::Exclude => permit.exclude(),
                        Verdict::Drop => drop(permit),
                    }
                }
            }
            Op::Advance(by) => self.advance(by),
            Op::ToDeadline(delta) => {
                if let Some(deadline) = self.model.next_deadline(self.now) {
                    let target = deadline.saturating_add_signed(i64::from(delta));
                    if target > self.now {
                        self.advance(target - self.now);
                    }
                }
            }
            Op::State => {}
        }
        if op == Op::State || self.eager {
            let want = self.model.state(self.now);
            prop_assert_eq!(
                self.breaker.state(),
                want,
                "step {} {:?}: state()",
                step,
                op
            );
            state = Some(want);
        }
        let counts = self.model.counts;
        prop_assert_eq!(
            Tally::of(&self.breaker.counts()),
            counts,
            "step {} {:?}: counts()",
            step,
            op
        );
        let totals = self.model.totals;
        let actual = Lifetime::of(&self.breaker.totals());
        prop_assert_eq!(
            actual.admitted,
            actual.successes
                + actual.failures
                + actual.exclusions
                + actual.abandoned
                + actual.dropped
                + self.held.len() as u64,
            "step {} {:?}: every admitted request accounted for in {:?}",
            step,
            op,
            actual
        );
        prop_assert_eq!(actual, totals, "step {} {:?}: totals()", step, op);
        Ok(Observed {
            admit,
            state,
            counts,
            totals,
        })
    }

    /// Reads the state, then drops every permit still held, one at a time, checking each step.
    fn finish(mut self) -> Result<(), TestCaseError> {
        self.step(Op::State)?;
        while !self.held.is_empty() {
            self.step(Op::Verdict {
                index: 0,
                verdict: Verdict::Drop,
            })?;
        }
        Ok(())
    }
}

/// Something to run against a breaker built from a [`Config`], whatever its policy type.
trait Run {
    type Output;
    fn run<P: TripPolicy>(
        self,
        breaker: &Breaker<P>,
        clock: ManualClock,
        cfg: &Config,
    ) -> Self::Output;
}

/// Builds the breaker `cfg` describes (with the crate's counting policy, or with
/// [`LockedTrip`]) on a fresh [`ManualClock`] and runs `run` against it.
fn with_breaker<R: Run>(cfg: &Config, run: R) -> R::Output {
    let clock = ManualClock::new();
    let (interval, bucket_period) = cfg.window.knobs();
    let b = Breaker::builder()
        .max_requests(cfg.max_requests)
        .interval(Duration::from_nanos(interval))
        .bucket_period(Duration::from_nanos(bucket_period))
        .timeout(Duration::from_nanos(cfg.timeout))
        .probe_timeout(match cfg.probe_timeout {
            u64::MAX => Duration::MAX,
            t => Duration::from_nanos(t),
        })
        .clock(clock.clone());
    match (cfg.lane, cfg.trip) {
        (true, Trip::Consecutive(k)) => {
            let policy = ConsecutiveFailures::new(k).expect("k >= 1");
            assert!(
                !policy.capabilities().needs_successes,
                "a policy that may use the lane"
            );
            run.run(&b.policy(policy).build(), clock, cfg)
        }
        (true, Trip::Ratio { num, den, min }) => {
            let policy = FailureRatio::new(num as f64 / den as f64, min).expect("a valid ratio");
            assert!(
                !policy.capabilities().needs_successes,
                "a policy that may use the lane"
            );
            run.run(&b.policy(policy).build(), clock, cfg)
        }
        (false, trip) => {
            let policy = LockedTrip(trip);
            assert!(
                policy.capabilities().needs_successes,
                "a policy that keeps every call on the lock"
            );
            run.run(&b.policy(policy).build(), clock, cfg)
        }
    }
}

/// Random operations, compared step by step.
struct Ops<'a>(&'a [Op]);

impl Run for Ops<'_> {
    type Output = Result<(), TestCaseError>;

    fn run<P: TripPolicy>(
        self,
        breaker: &Breaker<P>,
        clock: ManualClock,
        cfg: &Config,
    ) -> Self::Output {
        let mut h = Harness::new(breaker, clock, cfg);
        for &op in self.0 {
            h.step(op)?;
        }
        h.finish()
    }
}

/// Runs `ops` on a breaker built from `cfg` and on the model, comparing after every step.
fn check(cfg: &Config, ops: &[Op]) -> Result<(), TestCaseError> {
    with_breaker(cfg, Ops(ops))
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn trip() -> impl Strategy<Value = Trip> {
    prop_oneof![
        (1u64..=4).prop_map(Trip::Consecutive),
        (
            prop::sample::select(vec![(1u64, 4u64), (1, 2), (3, 4), (1, 1)]),
            1u64..=4
        )
            .prop_map(|((num, den), min)| Trip::Ratio { num, den, min }),
    ]
}

fn never() -> impl Strategy<Value = Window> {
    // A bucket period without an interval is ignored.
    prop_oneof![3 => Just(0u64), 1 => (1u64..=3).prop_map(|ms| ms * MS)]
        .prop_map(|bucket_period| Window::Never { bucket_period })
}

fn fixed() -> impl Strategy<Value = Window> {
    (1u64..=20).prop_map(|ms| Window::Fixed { interval: ms * MS })
}

fn rolling() -> impl Strategy<Value = Window> {
    let buckets = prop_oneof![6 => 2u64..=5, 1 => Just(1u64)];
    // Mostly a bucket period that divides the interval; sometimes an interval short of whole
    // buckets by a part of one, which the breaker rounds up.
    let shortfall = prop_oneof![4 => Just(0u64), 1 => 1u64..100];
    (1u64..=6, buckets, shortfall).prop_map(|(bp_ms, n, percent)| {
        let bucket_period = bp_ms * MS;
        Window::Rolling {
            interval: n * bucket_period - bucket_period * percent / 100,
            bucket_period,
        }
    })
}

fn config(window: impl Strategy<Value = Window>, lane: bool) -> impl Strategy<Value = Config> {
    let timeout = prop_oneof![1 => Just(0u64), 8 => (1u64..=20).prop_map(|ms| ms * MS)];
    // The default (the timeout), never (gobreaker's), or a few milliseconds.
    let probe_timeout = prop_oneof![
        2 => Just(0u64),
        1 => Just(u64::MAX),
        2 => (1u64..=20).prop_map(|ms| ms * MS)
    ];
    (
        0u32..=4,
        (timeout, probe_timeout),
        window,
        trip(),
        any::<bool>(),
    )
        .prop_map(
            move |(max_requests, (timeout, probe_timeout), window, trip, eager)| Config {
                max_requests,
                timeout,
                probe_timeout,
                window,
                trip,
                lane,
                eager,
            },
        )
}

/// The durations that matter for `cfg`: the bucket period or the window, and the open
/// duration. Clock steps are drawn as fractions and multiples of them.
fn scales(cfg: &Config) -> Vec<u64> {
    let timeout = if cfg.timeout == 0 {
        DEFAULT_TIMEOUT
    } else {
        cfg.timeout
    };
    match cfg.window {
        Window::Never { .. } => vec![timeout],
        Window::Fixed { interval } => vec![interval, timeout],
        Window::Rolling { bucket_period, .. } => vec![bucket_period, timeout],
    }
}

/// One operation; verdicts are successes and failures in the proportion `health` (per case:
/// a dependency that mostly works, mostly fails, or anything between), with a few
/// exclusions and dropped permits.
fn op(scales: Vec<u64>, (successes, failures): (u32, u32)) -> impl Strategy<Value = Op> {
    let verdict = prop_oneof![
        successes => Just(Verdict::Success),
        failures => Just(Verdict::Failure),
        1 => Just(Verdict::Exclude),
        1 => Just(Verdict::Drop),
    ];
    let scale = prop::sample::select(scales);
    prop_oneof![
        8 => Just(Op::Allow),
        8 => (0usize..8, verdict).prop_map(|(index, verdict)| Op::Verdict { index, verdict }),
        // A quarter of a period to a period and a half.
        2 => (scale.clone(), 1u64..=6).prop_map(|(s, quarters)| Op::Advance(s * quarters / 4)),
        1 => (1u64..=3).prop_map(Op::Advance),
        // Several periods at once; or more than gobreaker's default timeout.
        1 => prop_oneof![
            3 => (scale, 2u64..=12).prop_map(|(s, n)| s * n),
            1 => Just(DEFAULT_TIMEOUT + MS),
        ]
        .prop_map(Op::Advance),
        2 => (-1i8..=1).prop_map(Op::ToDeadline),
        2 => Just(Op::State),
    ]
}

/// A configuration and up to 60 operations, the clock steps scaled to its durations.
fn case(
    window: impl Strategy<Value = Window>,
    lane: bool,
) -> impl Strategy<Value = (Config, Vec<Op>)> {
    let health = (1u32..=8, 1u32..=8);
    (config(window, lane), health).prop_flat_map(|(cfg, health)| {
        (
            Just(cfg),
            prop::collection::vec(op(scales(&cfg), health), 1..=60),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_window_lane((cfg, ops) in case(never(), true)) {
        check(&cfg, &ops)?;
    }

    #[test]
    fn no_window_locked((cfg, ops) in case(never(), false)) {
        check(&cfg, &ops)?;
    }

    #[test]
    fn fixed_window_lane((cfg, ops) in case(fixed(), true)) {
        check(&cfg, &ops)?;
    }

    #[test]
    fn fixed_window_locked((cfg, ops) in case(fixed(), false)) {
        check(&cfg, &ops)?;
    }

    #[test]
    fn rolling_window_lane((cfg, ops) in case(rolling(), true)) {
        check(&cfg, &ops)?;
    }

    #[test]
    fn rolling_window_locked((cfg, ops) in case(rolling(), false)) {
        check(&cfg, &ops)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Hand-written sequences: the model's values worked out by hand, and the breaker's compared
// ---------------------------------------------------------------------------------------------

/// The values a step should show, worked out by hand.
#[derive(Debug, Clone, Copy)]
struct Expect {
    admit: Option<Admit>,
    state: Option<State>,
    counts: Tally,
}

/// A hand-written sequence: the breaker is checked against the model at every step (by the
/// harness), and the model against the values worked out by hand.
struct Script<'a>(&'a [(Op, Expect)]);

impl Run for Script<'_> {
    /// The lifetime totals after the last step.
    type Output = Lifetime;

    fn run<P: TripPolicy>(
        self,
        breaker: &Breaker<P>,
        clock: ManualClock,
        cfg: &Config,
    ) -> Self::Output {
        let mut h = Harness::new(breaker, clock, cfg);
        let mut totals = Lifetime::default();
        for (i, &(op, expect)) in self.0.iter().enumerate() {
            let seen = h
                .step(op)
                .unwrap_or_else(|e| panic!("breaker and model disagree: {e}"));
            assert_eq!(seen.admit, expect.admit, "script step {i} {op:?}: allow");
            assert_eq!(seen.state, expect.state, "script step {i} {op:?}: state");
            assert_eq!(seen.counts, expect.counts, "script step {i} {op:?}: counts");
            totals = seen.totals;
        }
        h.finish()
            .unwrap_or_else(|e| panic!("breaker and model disagree: {e}"));
        totals
    }
}

fn scripted(cfg: Config, script: &[(Op, Expect)]) -> Lifetime {
    with_breaker(&cfg, Script(script))
}

/// A step that shows only counts (a verdict, an advance).
fn quiet(op: Op, counts: Tally) -> (Op, Expect) {
    let expect = Expect {
        admit: None,
        state: None,
        counts,
    };
    (op, expect)
}

fn allow(admit: Admit, counts: Tally) -> (Op, Expect) {
    let expect = Expect {
        admit: Some(admit),
        state: None,
        counts,
    };
    (Op::Allow, expect)
}

fn state(state: State, counts: Tally) -> (Op, Expect) {
    let expect = Expect {
        admit: None,
        state: Some(state),
        counts,
    };
    (Op::State, expect)
}

fn end(index: usize, verdict: Verdict, counts: Tally) -> (Op, Expect) {
    quiet(Op::Verdict { index, verdict }, counts)
}

fn open_for(ns: u64) -> Admit {
    Admit::Open {
        retry_after: Duration::from_nanos(ns),
    }
}

const ZERO: Tally = Tally {
    requests: 0,
    total_successes: 0,
    total_failures: 0,
    total_exclusions: 0,
    consecutive_successes: 0,
    consecutive_failures: 0,
};

fn lifetime(
    admitted: u64,
    successes: u64,
    failures: u64,
    exclusions: u64,
    dropped: u64,
    opened: u64,
    abandoned: u64,
) -> Lifetime {
    Lifetime {
        admitted,
        successes,
        failures,
        exclusions,
        dropped,
        opened,
        abandoned,
        probes_taken_over: 0,
    }
}

/// A fixed 10 ms window, two consecutive failures to trip, 20 ms open, two probes; the lane.
#[test]
fn scripted_fixed_window_through_every_state() {
    use Verdict::*;
    let cfg = Config {
        max_requests: 2,
        timeout: 20 * MS,
        probe_timeout: 0,
        window: Window::Fixed { interval: 10 * MS },
        trip: Trip::Consecutive(2),
        lane: true,
        eager: false,
    };
    let totals = scripted(
        cfg,
        &[
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // p0, generation 1 (t = 0)
            allow(Admit::Ok, tally(2, 0, 0, 0, 0, 0)), // p1
            end(0, Success, tally(2, 1, 0, 0, 1, 0)),  // p0
            // To the window's last instant (10 ms): the window has not expired.
            quiet(Op::ToDeadline(0), tally(2, 1, 0, 0, 1, 0)),
            state(State::Closed, tally(2, 1, 0, 0, 1, 0)),
            // One nanosecond later it has; `counts()` evaluates nothing, `state()` does.
            quiet(Op::Advance(1), tally(2, 1, 0, 0, 1, 0)),
            state(State::Closed, ZERO),
            // p1 belongs to generation 1: dropped without a verdict, it is stale.
            end(0, Drop, ZERO),
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // p2 (t = 10 ms + 1 ns)
            end(0, Failure, tally(1, 0, 1, 0, 0, 1)),
            allow(Admit::Ok, tally(2, 0, 1, 0, 0, 1)), // p3
            end(0, Failure, ZERO),                     // trips: open until 30 ms + 1 ns
            allow(open_for(20 * MS), ZERO),            // the whole timeout
            quiet(Op::ToDeadline(0), ZERO),            // t = 30 ms + 1 ns: still open
            allow(open_for(1), ZERO),                  // at the deadline: 1 ns, not zero
            quiet(Op::ToDeadline(1), ZERO),            // t = 30 ms + 2 ns
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // p4, the first probe
            state(State::HalfOpen, tally(1, 0, 0, 0, 0, 0)),
            allow(Admit::Ok, tally(2, 0, 0, 0, 0, 0)), // p5
            allow(Admit::TooManyRequests, tally(2, 0, 0, 0, 0, 0)),
            end(0, Exclude, tally(2, 0, 0, 1, 0, 0)), // p4 gives its slot back
            allow(Admit::Ok, tally(3, 0, 0, 1, 0, 0)), // p6
            end(0, Success, tally(3, 1, 0, 1, 1, 0)), // p5
            state(State::HalfOpen, tally(3, 1, 0, 1, 1, 0)),
            end(0, Success, ZERO), // p6: two consecutive successes close it
            state(State::Closed, ZERO),
        ],
    );
    // p1, dropped without a verdict after its generation ended, is abandoned (not dropped).
    assert_eq!(totals, lifetime(7, 3, 2, 1, 0, 1, 1));
}

/// Rolling 2 ms buckets over 6 ms, three consecutive failures to trip, through the lock: the
/// oldest bucket's failure leaves the run, since the run started inside it.
#[test]
fn scripted_rolling_window_trims_a_run_that_started_in_the_leaving_bucket() {
    use Verdict::*;
    let cfg = Config {
        max_requests: 0,
        timeout: 0,
        probe_timeout: 0,
        window: Window::Rolling {
            interval: 6 * MS,
            bucket_period: 2 * MS,
        },
        trip: Trip::Consecutive(3),
        lane: false,
        eager: false,
    };
    let totals = scripted(
        cfg,
        &[
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // a, bucket 0
            end(0, Failure, tally(1, 0, 1, 0, 0, 1)),
            quiet(Op::ToDeadline(0), tally(1, 0, 1, 0, 0, 1)), // t = 2 ms
            state(State::Closed, tally(1, 0, 1, 0, 0, 1)),     // bucket 1 (empty slot)
            allow(Admit::Ok, tally(2, 0, 1, 0, 0, 1)),         // b, bucket 1
            end(0, Failure, tally(2, 0, 2, 0, 0, 2)),
            quiet(Op::Advance(2 * MS), tally(2, 0, 2, 0, 0, 2)), // t = 4 ms
            allow(Admit::Ok, tally(3, 0, 2, 0, 0, 2)),           // c, bucket 2, held
            quiet(Op::ToDeadline(-1), tally(3, 0, 2, 0, 0, 2)),  // t = 6 ms - 1 ns
            state(State::Closed, tally(3, 0, 2, 0, 0, 2)),       // still bucket 2
            quiet(Op::Advance(1), tally(3, 0, 2, 0, 0, 2)),      // t = 6 ms
            // Bucket 0 leaves (a: 1 request, 1 failure). The run of 2 = bucket 0's run (1) +
            // the later buckets' failures (1): it started in bucket 0, so it loses 1.
            state(State::Closed, tally(2, 0, 1, 0, 0, 1)),
            allow(Admit::Ok, tally(3, 0, 1, 0, 0, 1)), // d, bucket 3
            end(1, Failure, tally(3, 0, 2, 0, 0, 2)),  // d
            end(0, Failure, ZERO), // c (bucket 2, still in the window): 3 in a row, trips
            state(State::Open, ZERO),
            allow(open_for(DEFAULT_TIMEOUT), ZERO), // timeout 0 means 60 s
            quiet(Op::ToDeadline(1), ZERO),
            state(State::HalfOpen, ZERO),
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // e; max_requests 0 means 1
            allow(Admit::TooManyRequests, tally(1, 0, 0, 0, 0, 0)),
            end(0, Success, ZERO),
            state(State::Closed, ZERO),
        ],
    );
    assert_eq!(totals, lifetime(5, 1, 4, 0, 0, 1, 0));
}

/// Rolling 2 ms buckets, a 5 ms interval rounded up to 6 ms (3 buckets), on the lane policy:
/// a run that started after the leaving bucket is kept whole, and a result whose bucket left
/// the window is dropped.
#[test]
fn scripted_rolling_window_keeps_a_later_run_and_drops_out_of_window_results() {
    use Verdict::*;
    let cfg = Config {
        max_requests: 1,
        timeout: 10 * MS,
        probe_timeout: 0,
        window: Window::Rolling {
            interval: 5 * MS,
            bucket_period: 2 * MS,
        },
        trip: Trip::Consecutive(2),
        lane: true,
        eager: false,
    };
    let totals = scripted(
        cfg,
        &[
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // a, bucket 0
            end(0, Failure, tally(1, 0, 1, 0, 0, 1)),
            allow(Admit::Ok, tally(2, 0, 1, 0, 0, 1)), // x, bucket 0, held
            quiet(Op::Advance(2 * MS), tally(2, 0, 1, 0, 0, 1)),
            allow(Admit::Ok, tally(3, 0, 1, 0, 0, 1)), // b, bucket 1
            end(1, Success, tally(3, 1, 1, 0, 1, 0)),
            allow(Admit::Ok, tally(4, 1, 1, 0, 1, 0)), // c, bucket 1
            end(1, Failure, tally(4, 1, 2, 0, 0, 1)),
            quiet(Op::Advance(4 * MS), tally(4, 1, 2, 0, 0, 1)), // t = 6 ms
            // Two rolls: bucket 2 (empty), then bucket 0 (a and x: 2 requests, 1 failure).
            // The failure run (c alone) started after b's success: kept at 1. Were the
            // interval not rounded up to 6 ms, bucket 0 would not have left yet.
            state(State::Closed, tally(2, 1, 1, 0, 0, 1)),
            // x's bucket has left the window: dropped, and no trip.
            end(0, Failure, tally(2, 1, 1, 0, 0, 1)),
            state(State::Closed, tally(2, 1, 1, 0, 0, 1)),
            quiet(Op::Advance(100 * MS), tally(2, 1, 1, 0, 0, 1)),
            state(State::Closed, ZERO), // every bucket gone at once
        ],
    );
    assert_eq!(totals, lifetime(4, 1, 2, 0, 1, 0, 0));
}

/// gobreaker consults `ReadyToTrip` after a closed-state failure even when the failure's
/// bucket has left the window (and the failure is not counted): the roll raised the failure
/// ratio, and that late failure trips the breaker.
#[test]
fn scripted_out_of_window_failure_still_consults_the_trip_rule() {
    use Verdict::*;
    let cfg = Config {
        max_requests: 1,
        timeout: 5 * MS,
        probe_timeout: 0,
        window: Window::Rolling {
            interval: 4 * MS,
            bucket_period: 2 * MS,
        },
        trip: Trip::Ratio {
            num: 1,
            den: 2,
            min: 1,
        },
        lane: true,
        eager: false,
    };
    let totals = scripted(
        cfg,
        &[
            allow(Admit::Ok, tally(1, 0, 0, 0, 0, 0)), // s, bucket 0
            end(0, Success, tally(1, 1, 0, 0, 1, 0)),
            allow(Admit::Ok, tally(2, 1, 0, 0, 1, 0)), // x, bucket 0, held
            quiet(Op::Advance(2 * MS), tally(2, 1, 0, 0, 1, 0)),
            allow(Admit::Ok, tally(3, 1, 0, 0, 1, 0)), // f, bucket 1
            end(1, Failure, tally(3, 1, 1, 0, 0, 1)),  // 1 of 3 failed: below 1/2
            quiet(Op::Advance(2 * MS), tally(3, 1, 1, 0, 0, 1)), // t = 4 ms
            state(State::Closed, tally(1, 0, 1, 0, 0, 1)), // bucket 0 left: 1 of 1 failed
            end(0, Failure, ZERO), // x: out of window, not counted, but the rule trips
            state(State::Open, ZERO),
            allow(open_for(5 * MS), ZERO),
        ],
    );
    assert_eq!(totals, lifetime(3, 1, 1, 0, 1, 1, 0));
}
