//! A slow-call policy's calls on the lock-free lane: admitted and tracked in flight there,
//! fast successes counted without the policy, a call stuck past the threshold still counted
//! as slow when the next call arrives (exactly at the threshold it is not), more calls in
//! flight than the lane's slots, a clock reading behind the breaker's time, and a panicking
//! `lane_room` (asked for its quiet successes). Expected values are hand-computed from the scenario.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{CallResult, Capabilities, LaneRoom, SlowCalls, TripPolicy};
use lazybreaker::{Breaker, Counts, ManualClock, State};

const SEC: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `SlowCalls`, counting the results shown to it.
#[derive(Debug, Clone)]
struct Shown {
    policy: SlowCalls,
    shown: Arc<AtomicU64>,
    /// Whether `lane_room` panics.
    panics: Arc<AtomicBool>,
}

impl Shown {
    fn new(policy: SlowCalls) -> Self {
        Self {
            policy,
            shown: Arc::default(),
            panics: Arc::default(),
        }
    }

    fn shown(&self) -> u64 {
        self.shown.load(Ordering::SeqCst)
    }
}

impl TripPolicy for Shown {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.shown.fetch_add(1, Ordering::SeqCst);
        self.policy.on_result(result)
    }
    fn capabilities(&self) -> Capabilities {
        self.policy.capabilities()
    }
    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        assert!(
            !self.panics.load(Ordering::SeqCst),
            "quiet_successes panicked"
        );
        self.policy.lane_room(counts)
    }
}

fn breaker(policy: &Shown, clock: &ManualClock) -> Breaker<Shown> {
    Breaker::builder()
        .policy(policy.clone())
        .clock(clock.clone())
        .build()
}

#[test]
fn fast_successes_count_without_the_policy_and_a_slow_one_is_shown() {
    let clock = ManualClock::new();
    let policy = Shown::new(SlowCalls::new(SEC, 0.5, 10).unwrap());
    let b = breaker(&policy, &clock);
    for _ in 0..100 {
        let permit = b.allow().unwrap();
        clock.advance(ms(1));
        permit.success();
    }
    let c = b.counts();
    assert_eq!((c.requests, c.total_successes, c.slow_calls), (100, 100, 0));
    assert_eq!(policy.shown(), 0, "no fast success was shown to the policy");
    let slow = b.allow().unwrap();
    clock.advance(ms(1_500));
    slow.success();
    let c = b.counts();
    assert_eq!((c.requests, c.total_successes, c.slow_calls), (101, 101, 1));
    assert_eq!(policy.shown(), 1, "the slow success took the lock");
    let failed = b.allow().unwrap();
    failed.failure();
    assert_eq!(b.counts().total_failures, 1);
    assert_eq!(policy.shown(), 2, "a failure takes the lock");
    assert_eq!(b.totals().successes, 101);
}

#[test]
fn a_call_stuck_on_the_lane_counts_as_slow_when_the_next_call_arrives() {
    let clock = ManualClock::new();
    let policy = Shown::new(SlowCalls::new(SEC, 0.5, 3).unwrap());
    let b = breaker(&policy, &clock);
    let stuck = b.allow().unwrap();
    clock.advance(SEC);
    // Exactly the threshold in flight: not slow yet.
    let on_time = b.allow().unwrap();
    on_time.success();
    assert_eq!(b.counts().slow_calls, 0);
    assert_eq!(policy.shown(), 0);
    clock.advance(Duration::from_nanos(1));
    // One nanosecond past it: the next arrival counts it, and the policy is asked
    // (1 slow of 2 requests: below the minimum of 3).
    let third = b.allow().unwrap();
    assert_eq!(b.counts().slow_calls, 1);
    assert_eq!(policy.shown(), 1);
    assert_eq!(b.state(), State::Closed);
    third.success();
    // Its own return does not count it again; its success counts.
    stuck.success();
    let c = b.counts();
    assert_eq!((c.requests, c.total_successes, c.slow_calls), (3, 3, 1));
    // A second one stuck trips it when the next call arrives: 2 slow of 4 requests, before
    // the arrival is admitted, which is then turned away.
    let stuck = b.allow().unwrap();
    clock.advance(ms(1_001));
    assert!(b.allow().is_err());
    assert_eq!(b.state(), State::Open);
    // Shown: the first check, the third call's success (admitted under the lock, which
    // tracks it), the stuck call's return (counted already: under the lock), the trip.
    assert_eq!(policy.shown(), 4);
    drop(stuck);
}

#[test]
fn more_calls_in_flight_than_the_lanes_slots_are_all_tracked() {
    let clock = ManualClock::new();
    let policy = Shown::new(SlowCalls::new(SEC, 1.0, 1).unwrap());
    let b = breaker(&policy, &clock);
    for _ in 0..5 {
        b.allow().unwrap().success();
    }
    // 100 calls in flight: the lane holds 64, the machine the rest.
    let held: Vec<_> = (0..100).map(|_| b.allow().unwrap()).collect();
    clock.advance(ms(1_001));
    let next = b.allow().unwrap();
    assert_eq!(
        b.counts().slow_calls,
        100,
        "every call in flight, wherever tracked"
    );
    assert_eq!(
        b.state(),
        State::Closed,
        "100 slow of 105: below a ratio of 1"
    );
    next.success();
    for permit in held {
        permit.success();
    }
    let c = b.counts();
    assert_eq!(
        (c.requests, c.total_successes, c.slow_calls),
        (106, 106, 100),
        "none counted twice"
    );
    // The slots are free again: a new call stuck is counted once more.
    let stuck = b.allow().unwrap();
    clock.advance(ms(1_001));
    b.allow().unwrap().success();
    assert_eq!(b.counts().slow_calls, 101);
    stuck.success();
    assert_eq!(b.counts().slow_calls, 101);
}

#[test]
fn a_clock_reading_behind_the_breakers_time_starts_the_call_at_the_breakers_time() {
    // As a thread whose reading is older than another's lock step: the lane sends it to the
    // lock, which starts it at the latest time it saw (a call started earlier could be
    // overdue before the next check the lane was told of).
    let base = ManualClock::new();
    let clock = crate::support::clock::Behind::new(&base, ms(500));
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 1).unwrap())
        .clock(clock.clone())
        .build();
    base.advance(SEC);
    assert_eq!(b.state(), State::Closed); // the breaker has seen t = 1 s
    clock.set(true);
    let permit = b.allow().unwrap(); // reads 0.5 s: starts at the breaker's 1 s
    clock.set(false);
    base.advance(ms(600));
    permit.success(); // 600 ms after 1 s: not slow (1.1 s after the reading)
    assert_eq!(b.counts().slow_calls, 0);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_panicking_quiet_successes_continues_from_the_step_that_asked_and_loses_nothing() {
    let clock = ManualClock::new();
    let policy = Shown::new(SlowCalls::new(SEC, 0.5, 100).unwrap());
    let b = breaker(&policy, &clock);
    b.allow().unwrap().success();
    policy.panics.store(true, Ordering::SeqCst);
    // A slow success takes the lock; the step asks and panics after recording it.
    let slow = b.allow().unwrap();
    clock.advance(ms(1_500));
    let unwound = catch_unwind(AssertUnwindSafe(|| slow.success()));
    assert!(unwound.is_err(), "the panic continues from the report");
    policy.panics.store(false, Ordering::SeqCst);
    // Every call is counted, wherever it went.
    for _ in 0..3 {
        b.allow().unwrap().success();
    }
    let c = b.counts();
    assert_eq!((c.requests, c.total_successes, c.slow_calls), (5, 5, 1));
    assert_eq!(b.totals().successes, 5);
}
