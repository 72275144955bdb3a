//! Failures that cannot trip, counted on the lock-free lane: the policy is not shown them,
//! the counts (the consecutive runs included) are those that recording each under the lock
//! gives, and a failure that may trip still reaches the policy and trips.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{
    CallResult, Capabilities, ConsecutiveFailures, FailureCount, FailureRatio, Outcome, TripPolicy,
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

    fn failure_headroom(&self, counts: &Counts) -> u64 {
        self.policy.failure_headroom(counts)
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
    // The room is the policy's answer at the last lock holder (here, the build: no requests,
    // no room); a read republishes it from 20 requests.
    assert_eq!(breaker.counts(), counts(20, 20, 0, 20, 0));
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
        ratio.failure_headroom(&at(0, 0, 0)),
        0,
        "no requests: no room"
    );
    // 100 requests: 49 failures stay below half, 50 reach it.
    assert_eq!(ratio.failure_headroom(&at(100, 0, 0)), 49);
    assert_eq!(ratio.failure_headroom(&at(100, 40, 0)), 9);
    assert_eq!(ratio.failure_headroom(&at(100, 49, 0)), 0);
    assert_eq!(ratio.failure_headroom(&at(100, 60, 0)), 0);
    // 0.1 of 30 is 3.0000000000000004 in floating point: 2 stay below it, 3 do not.
    let tenth = FailureRatio::new(0.1, 1).unwrap();
    assert_eq!(tenth.failure_headroom(&at(30, 0, 0)), 2);
    assert_eq!(
        FailureRatio::new(0.0, 1)
            .unwrap()
            .failure_headroom(&at(100, 0, 0)),
        0
    );
    let run = ConsecutiveFailures::new(6).unwrap();
    assert_eq!(run.failure_headroom(&at(10, 2, 2)), 3);
    assert_eq!(run.failure_headroom(&at(10, 5, 5)), 0);
    let count = FailureCount::new(5, 100).unwrap();
    assert_eq!(count.failure_headroom(&at(10, 3, 0)), 1);
    assert_eq!(
        run.or(count).failure_headroom(&at(10, 3, 1)),
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

/// A headroom that panics answers none: every failure goes to the lock, the breaker stays
/// consistent, and the panic reaches a caller (the next one to take the lock).
#[test]
fn a_panicking_headroom_answers_none_and_is_not_swallowed() {
    #[derive(Debug)]
    struct Panicky(ConsecutiveFailures, Arc<AtomicU64>);
    impl TripPolicy for Panicky {
        fn on_result(&mut self, result: &CallResult<'_>) -> bool {
            self.1.fetch_add(
                u64::from(result.outcome == Outcome::Failure),
                Ordering::SeqCst,
            );
            self.0.on_result(result)
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities()
        }
        fn failure_headroom(&self, _: &Counts) -> u64 {
            panic!("headroom bug")
        }
    }
    let shown = Arc::new(AtomicU64::new(0));
    let breaker = Breaker::builder()
        .policy(Panicky(ConsecutiveFailures::new(3).unwrap(), shown.clone()))
        .build();
    let mut caught = 0;
    for _ in 0..3 {
        let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = breaker.execute(|| Err::<(), _>(()));
        }));
        if let Err(payload) = call {
            assert_eq!(*payload.downcast_ref::<&str>().unwrap(), "headroom bug");
            caught += 1;
        }
    }
    assert!(caught > 0, "the panic was swallowed");
    assert_eq!(shown.load(Ordering::SeqCst), 3, "every failure was shown");
    assert_eq!(breaker.totals().failures, 3);
    assert_eq!(breaker.state(), State::Open);
}
