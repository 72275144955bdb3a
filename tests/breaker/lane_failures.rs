//! Failures that cannot trip, counted on the lock-free lane: the policy is not shown them,
//! the counts (the consecutive runs included) are those that recording each under the lock
//! gives, and a failure that may trip still reaches the policy and trips.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{
    CallResult, Capabilities, ConsecutiveFailures, FailureCount, FailureRatio, LaneRoom, Outcome,
    TripPolicy,
};
use lazybreaker::{Breaker, Counts, ManualClock, State};

/// `P`, counting the failures shown to it.
#[derive(Debug)]
struct Shown<P> {
    policy: P,
    failures: Arc<AtomicU64>,
}

impl<P: TripPolicy> TripPolicy for Shown<P> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        if result.outcome == Outcome::Failure {
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        self.policy.on_result(result)
    }

    fn capabilities(&self) -> Capabilities {
        self.policy.capabilities()
    }

    fn lane_room(&self, counts: &Counts) -> LaneRoom {
        self.policy.lane_room(counts)
    }
}

fn shown<P: TripPolicy>(policy: P) -> (Breaker<Shown<P>>, Arc<AtomicU64>, ManualClock) {
    let failures = Arc::new(AtomicU64::new(0));
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(Shown {
            policy,
            failures: failures.clone(),
        })
        .interval(Duration::from_secs(60))
        .clock(clock.clone())
        .build();
    (breaker, failures, clock)
}

/// Runs `pattern` ('S' a success, 'F' a failure) through `breaker`.
fn run<P: TripPolicy>(breaker: &Breaker<P>, pattern: &str) {
    for c in pattern.chars() {
        let _ = breaker.execute(|| if c == 'S' { Ok(()) } else { Err(()) });
    }
}

/// The counts of `pattern` recorded one result at a time, written out by hand for each.
fn counts(requests: u64, successes: u64, failures: u64, cs: u64, cf: u64) -> Counts {
    Counts::default()
        .with_requests(requests)
        .with_total_successes(successes)
        .with_total_failures(failures)
        .with_consecutive_successes(cs)
        .with_consecutive_failures(cf)
}

#[test]
fn failures_far_from_the_ratio_skip_the_policy_and_keep_the_runs() {
    // 50 % of at least 10: after 20 successes, 9 failures are far from it.
    let (breaker, shown, _clock) = shown(FailureRatio::new(0.5, 10).unwrap());
    run(&breaker, &"S".repeat(20));
    // The room is the policy's answer at the last step under the lock (here, the build: no
    // requests, no room; a read asks nothing). `state()` is a step: from 20 requests, the
    // policy allows 9 more failures (the lane takes 7 at a time).
    assert_eq!(breaker.counts(), counts(20, 20, 0, 20, 0));
    assert_eq!(breaker.state(), State::Closed);
    run(&breaker, "FSFFSSSFFF");
    assert_eq!(shown.load(Ordering::SeqCst), 0, "no failure was shown");
    assert_eq!(breaker.counts(), counts(30, 24, 6, 0, 3));
    assert_eq!(breaker.totals().failures, 6);
    run(&breaker, "S");
    assert_eq!(breaker.counts(), counts(31, 25, 6, 1, 0));
    run(&breaker, "FFS");
    assert_eq!(breaker.counts(), counts(34, 26, 8, 1, 0));
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn the_failure_that_may_trip_is_shown_and_trips() {
    let (breaker, shown, _clock) = shown(ConsecutiveFailures::new(3).unwrap());
    run(&breaker, "SFF");
    assert_eq!(shown.load(Ordering::SeqCst), 0, "two failures cannot trip");
    assert_eq!(breaker.counts(), counts(3, 1, 2, 0, 2));
    run(&breaker, "F");
    assert_eq!(shown.load(Ordering::SeqCst), 1, "the third could: shown");
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_run_broken_by_a_success_starts_over() {
    let (breaker, shown, _clock) = shown(ConsecutiveFailures::new(3).unwrap());
    // The room counts failures, not runs: two from a run of none, then one from each run
    // of one the lock found. So the third and the sixth failure are shown (neither trips),
    // and every count is as if each had been shown.
    run(&breaker, "FFSFFSFF");
    assert_eq!(breaker.counts(), counts(8, 2, 6, 0, 2));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(shown.load(Ordering::SeqCst), 2);
}

#[test]
fn a_failure_count_is_exact_at_its_threshold() {
    let (breaker, shown, _clock) = shown(FailureCount::new(4, 1).unwrap());
    run(&breaker, "FSFSF");
    assert_eq!(shown.load(Ordering::SeqCst), 0);
    assert_eq!(breaker.state(), State::Closed);
    run(&breaker, "SF");
    assert_eq!(shown.load(Ordering::SeqCst), 1);
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_failure_after_its_window_is_dropped_as_under_the_lock() {
    let (breaker, _shown, clock) = shown(FailureRatio::new(0.5, 10).unwrap());
    run(&breaker, &"S".repeat(20));
    let permit = breaker.allow().unwrap();
    clock.advance(Duration::from_secs(61));
    permit.failure();
    assert_eq!(
        breaker.totals().dropped,
        1,
        "its window ended before it came back"
    );
    assert_eq!(breaker.counts(), Counts::default());
}

#[test]
fn headrooms_stop_one_short_of_each_threshold() {
    let at = |requests, failures, run| counts(requests, requests - failures, failures, 0, run);
    let ratio = FailureRatio::new(0.5, 10).unwrap();
    assert_eq!(
        ratio.lane_room(&at(0, 0, 0)).failures,
        0,
        "no requests: no room"
    );
    // 100 requests: 49 failures stay below half, 50 reach it.
    assert_eq!(ratio.lane_room(&at(100, 0, 0)).failures, 49);
    assert_eq!(ratio.lane_room(&at(100, 40, 0)).failures, 9);
    assert_eq!(ratio.lane_room(&at(100, 49, 0)).failures, 0);
    assert_eq!(ratio.lane_room(&at(100, 60, 0)).failures, 0);
    // 0.1 of 30 is 3.0000000000000004 in floating point: 2 stay below it, 3 do not.
    let tenth = FailureRatio::new(0.1, 1).unwrap();
    assert_eq!(tenth.lane_room(&at(30, 0, 0)).failures, 2);
    assert_eq!(
        FailureRatio::new(0.0, 1)
            .unwrap()
            .lane_room(&at(100, 0, 0))
            .failures,
        0
    );
    let run = ConsecutiveFailures::new(6).unwrap();
    assert_eq!(run.lane_room(&at(10, 2, 2)).failures, 3);
    assert_eq!(run.lane_room(&at(10, 5, 5)).failures, 0);
    let count = FailureCount::new(5, 100).unwrap();
    assert_eq!(count.lane_room(&at(10, 3, 0)).failures, 1);
    assert_eq!(
        run.or(count).lane_room(&at(10, 3, 1)).failures,
        1,
        "the lesser"
    );
}

/// A policy that keeps the default sees every failure.
#[test]
fn the_default_shows_every_failure() {
    #[derive(Debug)]
    struct Every(Arc<AtomicU64>);
    impl TripPolicy for Every {
        fn on_result(&mut self, result: &CallResult<'_>) -> bool {
            self.0.fetch_add(
                u64::from(result.outcome == Outcome::Failure),
                Ordering::SeqCst,
            );
            false
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::default().needs_successes(false)
        }
    }
    let seen = Arc::new(AtomicU64::new(0));
    let breaker = Breaker::builder().policy(Every(seen.clone())).build();
    run(&breaker, "FSFF");
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

/// A policy whose headroom has a bug: it panics once it sees `requests` of at least
/// `from` (e.g. a division it got wrong).
#[derive(Debug)]
struct PanicsFrom(ConsecutiveFailures, u64);

impl TripPolicy for PanicsFrom {
    fn on_result(&mut self, r: &CallResult<'_>) -> bool {
        self.0.on_result(r)
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn lane_room(&self, c: &Counts) -> LaneRoom {
        if c.requests >= self.1 {
            panic!("headroom bug");
        }
        self.0.lane_room(c)
    }
}

fn headroom_bug(payload: &(dyn std::any::Any + Send)) -> bool {
    payload.downcast_ref::<&str>() == Some(&"headroom bug")
}

/// Asked at build for the empty counts: its panic continues from `build`, as the policy's
/// other build-time hooks' do.
#[test]
fn a_headroom_panicking_at_build_continues_from_build() {
    let built = std::panic::catch_unwind(|| {
        Breaker::builder()
            .policy(PanicsFrom(ConsecutiveFailures::new(3).unwrap(), 0))
            .build()
    });
    assert!(headroom_bug(&*built.unwrap_err()));
}

/// A read folds the lane without asking the policy (it spends the room the lane used), so
/// it never panics for the policy; the step that asks is the call its panic continues
/// from, once the step is done (every call counted, the breaker consistent). A panicking
/// headroom answers none: every failure then goes to the lock.
#[test]
fn a_headroom_panic_continues_from_the_step_that_asked() {
    let breaker = Breaker::builder()
        .policy(PanicsFrom(ConsecutiveFailures::new(3).unwrap(), 2))
        .build();
    run(&breaker, "SSS");
    assert_eq!(breaker.counts().requests, 3, "a read asks no user code");
    let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| breaker.state()));
    assert!(
        headroom_bug(&*step.unwrap_err()),
        "state() is a step: it asked"
    );
    let mut caught = 0;
    for _ in 0..3 {
        let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = breaker.execute(|| Err::<(), _>(()));
        }));
        if let Err(payload) = call {
            assert!(headroom_bug(&*payload));
            caught += 1;
        }
    }
    // The first two failures' steps ask (closed) and panic; the third trips, and an open
    // breaker asks nothing.
    assert_eq!(caught, 2);
    let t = breaker.totals();
    assert_eq!(
        (t.successes, t.failures),
        (3, 3),
        "every call counted: {t:?}"
    );
    assert_eq!(breaker.state(), State::Open, "three failures in a row");
}

/// One worker and a reader (a metrics scrape) on another thread: the reader's republish
/// between the worker's load and compare-and-swap (the room going from none to some) is
/// no collision, so the lane makes no stripes and keeps taking failures.
#[test]
fn a_readers_republish_is_no_collision() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let (breaker, shown, _clock) = shown(ConsecutiveFailures::new(3).unwrap());
    let breaker = Arc::new(breaker);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (breaker, stop) = (breaker.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) && reads < 10_000_000 {
                let _ = breaker.counts();
                reads += 1;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    for i in 0..100_000 {
        if i % 1024 == 0 && Instant::now() > deadline {
            break;
        }
        run(&breaker, "FFS");
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(breaker.state(), State::Closed);
    // Alone now: a success, then a step (`state()`) publishes room for two; a failure then
    // counts on the lane.
    run(&breaker, "S");
    assert_eq!(breaker.state(), State::Closed);
    let before = shown.load(Ordering::SeqCst);
    run(&breaker, "F");
    assert_eq!(
        shown.load(Ordering::SeqCst) - before,
        0,
        "the failure took the lock: the reader's republishes made the stripes"
    );
}
