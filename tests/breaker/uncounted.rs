//! `execute` on a closed breaker whose policy reads no requests: the call's request is
//! counted with its success when it returns (one atomic step) rather than at admission.
//! After every call the counts and totals are those the two-step API gives; only a reading
//! taken while the call runs differs, and only for such a policy.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, FailureRatio, TripPolicy};
use lazybreaker::throttle::Throttle;
use lazybreaker::{Breaker, Error, ManualClock, State};

const TIMEOUT: Duration = Duration::from_secs(10);
/// A script's short wait.
const TICK: Duration = Duration::from_millis(2_500);

fn breaker<P: TripPolicy>(policy: P, clock: &ManualClock) -> Breaker<P> {
    Breaker::builder()
        .timeout(TIMEOUT)
        .policy(policy)
        .clock(clock.clone())
        .build()
}

/// What a seeded script does at one step.
#[derive(Debug, Clone, Copy)]
enum Step {
    Succeed,
    Fail,
    Panic,
    Wait,
    /// A few seconds: a window's bucket, or the window, may end meanwhile.
    Tick,
}

/// A reproducible script of `len` steps from `seed` (xorshift): mostly successes, with runs
/// of failures that trip a threshold of 3, panics, and waits past the open period.
fn script(seed: u64, len: usize) -> Vec<Step> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 24 {
                0..=10 => Step::Succeed,
                11..=16 => Step::Fail,
                17 => Step::Panic,
                18..=19 => Step::Wait,
                _ => Step::Tick,
            }
        })
        .collect()
}

/// Runs `step` through `execute`.
fn by_execute<P: TripPolicy>(b: &Breaker<P>, clock: &ManualClock, step: Step) {
    let _ = match step {
        Step::Succeed => b.execute(|| Ok::<_, ()>(())),
        Step::Fail => b.execute(|| Err::<(), _>(())),
        Step::Panic => {
            let panicked = catch_unwind(AssertUnwindSafe(|| {
                b.execute(|| -> Result<(), ()> { panic!("the call blew up") })
            }));
            match panicked {
                Ok(rejected) => rejected,
                Err(payload) => {
                    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the call blew up"));
                    Ok(())
                }
            }
        }
        Step::Wait => {
            clock.advance(TIMEOUT + Duration::from_millis(1));
            Ok(())
        }
        Step::Tick => {
            clock.advance(TICK);
            Ok(())
        }
    };
}

/// Runs `step` through `allow` and the permit (a panic as the permit dropped while its
/// thread unwinds).
fn by_permit<P: TripPolicy>(b: &Breaker<P>, clock: &ManualClock, step: Step) {
    match step {
        Step::Wait => clock.advance(TIMEOUT + Duration::from_millis(1)),
        Step::Tick => clock.advance(TICK),
        _ => {
            let Ok(permit) = b.allow() else { return };
            match step {
                Step::Succeed => permit.success(),
                Step::Fail => permit.failure(),
                _ => {
                    let panicked = catch_unwind(AssertUnwindSafe(move || {
                        let _held = permit;
                        panic!("the call blew up")
                    }));
                    assert!(panicked.is_err());
                }
            }
        }
    }
}

/// The windows a differential script runs in: none, fixed, rolling (each window 20 s, the
/// rolling one in 5 s buckets), with and without `verdict_at_latest` (which changes nothing
/// here: no call spans a step of the clock); three failures in a row trip it, or with
/// `ratio` a failure ratio of a quarter over at least 8 requests (a policy that reads them).
fn windowed(
    window: (u64, u64),
    latest: bool,
    ratio: bool,
    clock: &ManualClock,
) -> Breaker<Box<dyn TripPolicy>> {
    let policy: Box<dyn TripPolicy> = if ratio {
        Box::new(FailureRatio::new(0.25, 8).unwrap())
    } else {
        Box::new(ConsecutiveFailures::new(3).unwrap())
    };
    Breaker::builder()
        .timeout(TIMEOUT)
        .interval(Duration::from_secs(window.0))
        .bucket_period(Duration::from_secs(window.1))
        .verdict_at_latest(latest)
        .policy(policy)
        .clock(clock.clone())
        .build()
}

#[test]
fn execute_counts_what_the_two_step_api_counts_after_every_call() {
    for window in [(0, 0), (20, 0), (20, 5)] {
        for (latest, ratio) in [(false, false), (true, false), (true, true)] {
            for seed in [1_u64, 7, 42, 2026] {
                let (one_clock, two_clock) = (ManualClock::new(), ManualClock::new());
                let one = windowed(window, latest, ratio, &one_clock);
                let two = windowed(window, false, ratio, &two_clock);
                let mut opened = 0;
                for (i, step) in script(seed, 2_000).into_iter().enumerate() {
                    by_execute(&one, &one_clock, step);
                    by_permit(&two, &two_clock, step);
                    let at = format!(
                        "{window:?} latest {latest} ratio {ratio} seed {seed}, step {i} ({step:?})"
                    );
                    assert_eq!(one.state(), two.state(), "{at}");
                    assert_eq!(one.counts(), two.counts(), "{at}");
                    assert_eq!(one.totals(), two.totals(), "{at}");
                    opened += usize::from(one.state() == State::Open);
                }
                assert!(
                    opened > 0,
                    "seed {seed}: the script never tripped the breaker"
                );
                assert!(
                    one.totals().admitted > 500,
                    "seed {seed}: {:?}",
                    one.totals()
                );
            }
        }
    }
}

#[test]
fn a_reading_inside_the_call_shows_its_request_only_where_the_policy_reads_requests() {
    let clock = ManualClock::new();
    let consecutive = breaker(ConsecutiveFailures::default(), &clock);
    let inside = consecutive.execute(|| Ok::<_, ()>(consecutive.counts().requests));
    assert_eq!(inside.unwrap(), 0, "counted with its success, not before");
    assert_eq!(consecutive.counts().requests, 1);
    assert_eq!(consecutive.counts().total_successes, 1);

    let ratio = breaker(FailureRatio::new(0.5, 10).unwrap(), &clock);
    let inside = ratio.execute(|| Ok::<_, ()>(ratio.counts().requests));
    assert_eq!(
        inside.unwrap(),
        1,
        "a ratio reads the requests: counted at admission"
    );

    let fixed = Breaker::builder()
        .interval(Duration::from_secs(60))
        .clock(clock.clone())
        .build();
    let inside = fixed.execute(|| Ok::<_, ()>(fixed.counts().requests));
    assert_eq!(
        inside.unwrap(),
        0,
        "a fixed window counts with the success too"
    );
    assert_eq!(fixed.counts().requests, 1);

    let rolling = Breaker::builder()
        .interval(Duration::from_secs(60))
        .bucket_period(Duration::from_secs(10))
        .clock(clock.clone())
        .build();
    let inside = rolling.execute(|| Ok::<_, ()>(rolling.counts().requests));
    assert_eq!(
        inside.unwrap(),
        0,
        "a rolling window counts with the success too"
    );
    assert_eq!(rolling.counts().requests, 1);

    let throttled = Breaker::builder()
        .throttle(Throttle::new(2.0).unwrap())
        .clock(clock.clone())
        .build();
    let inside = throttled.execute(|| Ok::<_, ()>(throttled.counts().requests));
    assert_eq!(
        inside.unwrap(),
        1,
        "a throttle counts at admission (its room)"
    );

    let permit = consecutive.allow().unwrap();
    assert_eq!(
        consecutive.counts().requests,
        2,
        "a permit counts at admission"
    );
    permit.success();
}

#[test]
fn a_success_whose_breaker_tripped_while_it_ran_is_stale_with_its_request_in_the_totals() {
    let clock = ManualClock::new();
    let b = breaker(ConsecutiveFailures::new(2).unwrap(), &clock);
    let returned = b.execute(|| {
        for _ in 0..2 {
            b.allow().unwrap().failure();
        }
        assert_eq!(b.state(), State::Open);
        Ok::<_, ()>("late")
    });
    assert_eq!(
        returned.unwrap(),
        "late",
        "the call's value is returned all the same"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.counts(),
        Default::default(),
        "nothing in the open generation"
    );
    let t = b.totals();
    assert_eq!(
        (t.admitted, t.failures, t.successes, t.dropped),
        (3, 2, 0, 1),
        "{t:?}"
    );
}

#[test]
fn a_reading_inside_the_call_closes_and_reopens_the_lane_and_the_call_still_counts_once() {
    let clock = ManualClock::new();
    let b = breaker(ConsecutiveFailures::default(), &clock);
    for round in 1..=3_u64 {
        let inside = b.execute(|| Ok::<_, ()>(b.counts()));
        let inside = inside.unwrap();
        assert_eq!(inside.requests, round - 1);
        let c = b.counts();
        assert_eq!((c.requests, c.total_successes), (round, round));
        assert_eq!(c.consecutive_successes, round);
    }
    let failed = b.execute(|| Err::<(), _>("down"));
    assert!(matches!(failed, Err(Error::Inner("down"))));
    let c = b.counts();
    assert_eq!(
        (c.requests, c.total_failures, c.consecutive_failures),
        (4, 1, 1)
    );
    assert_eq!(c.consecutive_successes, 0);
}

#[test]
fn a_panicking_call_counts_its_request_and_its_failure_and_the_panic_continues() {
    let clock = ManualClock::new();
    let b = breaker(ConsecutiveFailures::new(2).unwrap(), &clock);
    for round in 1..=2_u64 {
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            b.execute(|| -> Result<(), ()> { panic!("boom {round}") })
        }));
        let payload = panicked.expect_err("the panic continues");
        assert_eq!(
            payload.downcast_ref::<String>().map(String::as_str),
            Some(format!("boom {round}").as_str())
        );
    }
    assert_eq!(b.state(), State::Open, "two failures trip a threshold of 2");
    let t = b.totals();
    assert_eq!((t.admitted, t.failures), (2, 2), "{t:?}");
}

#[test]
fn calls_on_two_threads_each_count_once() {
    const CALLS: u64 = 20_000;
    let clock = ManualClock::new();
    let b = Arc::new(breaker(ConsecutiveFailures::default(), &clock));
    let start = Arc::new(Barrier::new(2));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (b, start) = (b.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..CALLS {
                    let c = b.execute(|| Ok::<_, ()>(i)).unwrap();
                    assert_eq!(c, i);
                    if i % 1_000 == 0 {
                        let c = b.counts();
                        assert!(c.requests >= c.total_successes, "{c:?}");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let c = b.counts();
    assert_eq!((c.requests, c.total_successes), (2 * CALLS, 2 * CALLS));
    let t = b.totals();
    assert_eq!((t.admitted, t.successes), (2 * CALLS, 2 * CALLS));
}

/// In a fixed window: a call whose window ended while it ran is stale (gobreaker's: the
/// success reads the clock), unless successes are judged at the latest time the breaker saw
/// (`verdict_at_latest`): then it counts in its window, as long as no step saw the end.
#[test]
fn a_success_after_its_windows_end_is_stale_unless_judged_at_the_latest_time() {
    const WINDOW: Duration = Duration::from_secs(10);
    for latest in [false, true] {
        let clock = ManualClock::new();
        let b = Breaker::builder()
            .interval(WINDOW)
            .verdict_at_latest(latest)
            .clock(clock.clone())
            .build();
        assert!(b.execute(|| Ok::<_, ()>(())).is_ok());
        let late = b.execute(|| {
            clock.advance(WINDOW + Duration::from_nanos(1));
            Ok::<_, ()>(())
        });
        assert!(late.is_ok());
        let t = b.totals();
        assert_eq!(t.admitted, 2, "latest {latest}: {t:?}");
        let c = b.counts();
        if latest {
            assert_eq!((t.successes, t.dropped), (2, 0), "{t:?}");
            assert_eq!(
                c.requests, 2,
                "both in the first window: no step saw its end"
            );
            assert_eq!(b.state(), State::Closed); // a step that reads the clock
            assert_eq!(b.counts().requests, 0, "it saw the end: a new window");
        } else {
            assert_eq!((t.successes, t.dropped), (1, 1), "{t:?}");
            assert_eq!(c.requests, 0, "the success started the new window, empty");
        }
        // Through the permit: the same.
        let permit = b.allow().unwrap();
        clock.advance(WINDOW + Duration::from_nanos(1));
        permit.success();
        let t = b.totals();
        assert_eq!(t.dropped, u64::from(!latest) * 2, "latest {latest}: {t:?}");
        // A step that saw the end first makes a success of the old window stale either way.
        let permit = b.allow().unwrap();
        clock.advance(WINDOW + Duration::from_nanos(1));
        assert_eq!(b.state(), State::Closed);
        permit.success();
        assert_eq!(
            b.totals().dropped,
            u64::from(!latest) * 2 + 1,
            "latest {latest}"
        );
    }
}

/// `verdict_at_latest` is about the closed state's window only: a verdict that finds the
/// breaker open reads the clock, and ends an open period that is over, as gobreaker's does.
#[test]
fn a_verdict_at_the_latest_time_still_ends_an_open_period() {
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b = {
        let seen = seen.clone();
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(TIMEOUT)
            .verdict_at_latest(true)
            .on_state_change(move |_, from, to| seen.lock().unwrap().push((from, to)))
            .clock(clock.clone())
            .build()
    };
    let slow = b.allow().unwrap();
    b.allow().unwrap().failure();
    assert_eq!(*seen.lock().unwrap(), [(State::Closed, State::Open)]);
    clock.advance(TIMEOUT + Duration::from_millis(1));
    slow.success(); // stale: the open generation; its step sees the period over
    assert_eq!(b.totals().dropped, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        [(State::Closed, State::Open), (State::Open, State::HalfOpen)],
        "the verdict's own step ended the open period"
    );
}
