//! `policy::SlowCalls`: hand-computed cases, the slow count rolling with the
//! window's buckets, half-open probes judged on latency, and composition.

use std::time::Duration;

use lazybreaker::policy::{FailureRatio, SlowCalls, TripPolicy};
use lazybreaker::{Breaker, ManualClock, State};

const SEC: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One call taking `latency` on the manual clock, succeeding or not.
fn call<P: TripPolicy>(b: &Breaker<P>, clock: &ManualClock, latency: Duration, ok: bool) {
    let permit = b.allow().expect("admitted");
    clock.advance(latency);
    if ok {
        permit.success();
    } else {
        permit.failure();
    }
}

#[test]
fn trips_on_the_share_of_slow_successes() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 4).unwrap())
        .clock(clock.clone())
        .build();
    call(&b, &clock, ms(1_500), true); // slow 1/1, below the minimum
    call(&b, &clock, ms(100), true); // 1/2
    call(&b, &clock, ms(1_000), true); // exactly the threshold is not slow: 1/3
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.counts().slow_calls, 1);
    call(&b, &clock, ms(1_001), true); // 2/4 = 0.5
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_slow_failure_counts_as_slow_and_as_a_failure() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.9, 100).unwrap())
        .clock(clock.clone())
        .build();
    call(&b, &clock, ms(2_000), false);
    let c = b.counts();
    assert_eq!((c.slow_calls, c.total_failures), (1, 1));
}

#[test]
fn the_slow_count_rolls_out_with_its_bucket() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.75, 4).unwrap())
        .interval(Duration::from_secs(4))
        .bucket_period(SEC)
        .clock(clock.clone())
        .build();
    // Bucket 0 (admitted at t = 0): two slow calls.
    call(&b, &clock, ms(1_500), true); // admitted at 0, ends at 1.5 s
    call(&b, &clock, ms(1_500), true); // admitted at 1.5 s (bucket 1), ends at 3 s
    assert_eq!(b.counts().slow_calls, 2);
    // t = 4.5 s: bucket 0 has left the 4 s window, and its slow call with it.
    clock.advance(ms(1_500));
    call(&b, &clock, ms(10), true);
    let c = b.counts();
    assert_eq!((c.requests, c.slow_calls), (2, 1), "{c:?}");
    assert_eq!(b.state(), State::Closed, "1 of 2 slow, below the minimum");
}

#[test]
fn a_slow_probe_reopens_and_a_fast_one_closes() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 1).unwrap())
        .timeout(Duration::from_secs(5))
        .clock(clock.clone())
        .build();
    call(&b, &clock, ms(1_200), true);
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(6));
    assert_eq!(b.state(), State::HalfOpen);
    call(&b, &clock, ms(1_200), true); // succeeded, but slow: failed
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(6));
    call(&b, &clock, ms(20), true);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn failure_ratio_or_slow_calls_trips_on_either() {
    let policy = || {
        FailureRatio::new(0.5, 4)
            .unwrap()
            .or(SlowCalls::new(SEC, 0.5, 4).unwrap())
    };
    // Slow, never failing.
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(policy())
        .clock(clock.clone())
        .build();
    for _ in 0..4 {
        call(&b, &clock, ms(1_500), true);
    }
    assert_eq!(b.state(), State::Open);
    // Failing fast.
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(policy())
        .clock(clock.clone())
        .build();
    for ok in [true, false, true, false] {
        call(&b, &clock, ms(5), ok);
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn without_a_slow_policy_nothing_is_slow() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(lazybreaker::policy::Ema::new(Default::default()).unwrap())
        .clock(clock.clone())
        .build();
    call(&b, &clock, Duration::from_secs(60), true);
    assert_eq!(b.counts().slow_calls, 0);
}

/// A dependency that stalls: no call returns, yet the calls in flight past the threshold are
/// counted as slow when the next calls arrive, and trip the breaker.
#[test]
fn calls_stuck_in_flight_trip_it_before_they_return() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 4).unwrap())
        .clock(clock.clone())
        .build();
    let mut stuck = Vec::new();
    for _ in 0..4 {
        stuck.push(b.allow().unwrap());
        clock.advance(ms(100));
    }
    assert_eq!(b.counts().slow_calls, 0, "none past the threshold yet");
    clock.advance(ms(950)); // the first two have been out for more than 1 s
                            // The next call's admission counts them: 2 slow of 4 requests.
    assert!(b.allow().is_err(), "tripped by the calls still in flight");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.totals().opened, 1);
    drop(stuck); // abandoned, stale: the breaker is in another generation
    assert_eq!(b.totals().dropped + b.totals().abandoned, 4);
}

#[test]
fn a_call_counted_in_flight_is_not_counted_again_when_it_returns() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.9, 100).unwrap())
        .clock(clock.clone())
        .build();
    let slow = b.allow().unwrap();
    clock.advance(ms(1_500));
    call(&b, &clock, ms(1), true); // its admission counts the first one as slow
    assert_eq!(b.counts().slow_calls, 1);
    slow.success(); // returns after 1.5 s: already counted
    let c = b.counts();
    assert_eq!((c.slow_calls, c.total_successes), (1, 2));
}

#[test]
fn an_overdue_half_open_probe_reopens() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 1).unwrap())
        .timeout(Duration::from_secs(5))
        .max_requests(2)
        .clock(clock.clone())
        .build();
    call(&b, &clock, ms(1_200), true);
    clock.advance(Duration::from_secs(6));
    let _hung = b.allow().unwrap(); // a probe that never returns
    clock.advance(ms(1_100));
    assert!(
        b.allow().is_err(),
        "the next call finds the probe overdue: reopened"
    );
    assert_eq!(b.state(), State::Open);
}

/// resilience4j's way (the default) against Sentinel's (`judging_probes_on_latency_alone`):
/// a fast failed probe reopens the first, counts as a success for the second; a slow
/// probe fails for both.
#[test]
fn probes_judged_on_failures_or_on_latency_alone() {
    for latency_alone in [false, true] {
        let clock = ManualClock::new();
        let policy = SlowCalls::new(SEC, 0.5, 1).unwrap();
        let policy = if latency_alone {
            policy.judging_probes_on_latency_alone()
        } else {
            policy
        };
        let b = Breaker::builder()
            .policy(policy)
            .timeout(Duration::from_secs(5))
            .clock(clock.clone())
            .build();
        call(&b, &clock, ms(1_500), true); // trips
        clock.advance(Duration::from_secs(6));
        call(&b, &clock, ms(1_500), false); // slow and failed: fails for both
        assert_eq!(b.state(), State::Open, "latency alone {latency_alone}");
        clock.advance(Duration::from_secs(6));
        call(&b, &clock, ms(10), false); // fast, failed
        let expected = if latency_alone {
            State::Closed
        } else {
            State::Open
        };
        assert_eq!(b.state(), expected, "latency alone {latency_alone}");
    }
}

/// A clock reading behind the breaker's latest time (another thread's later reading got in
/// first) must not lose track of the call: its latency is measured on the breaker's own
/// timeline, so the call is found when it completes and never counted slow afterwards.
#[test]
fn a_clock_reading_behind_the_latest_time_loses_no_call() {
    let base = ManualClock::new();
    let clock = crate::support::clock::Behind::new(&base, ms(500));
    let b = Breaker::builder()
        .policy(SlowCalls::new(SEC, 0.5, 1).unwrap())
        .clock(clock.clone())
        .build();
    base.advance(ms(1_000));
    assert_eq!(b.state(), State::Closed); // the breaker has now seen t = 1 s
    clock.set(true);
    let permit = b.allow().unwrap(); // reads 0.5 s: admitted at the breaker's 1 s
    clock.set(false);
    base.advance(ms(100));
    permit.success(); // 100 ms on the breaker's timeline
    assert_eq!(b.counts().slow_calls, 0);
    base.advance(ms(1_400));
    call(&b, &base, ms(10), true);
    // Had the first call been lost, it would now be "in flight" for 1.5 s: slow, and tripping.
    assert_eq!(b.counts().slow_calls, 0);
    assert_eq!(b.state(), State::Closed);
}

/// A policy that names a slow-call threshold but measures no latency has none: nothing is
/// tracked in flight, nothing counted slow, nothing tripped falsely.
#[test]
fn a_threshold_without_latencies_is_ignored() {
    #[derive(Debug)]
    struct NoLatency;
    impl TripPolicy for NoLatency {
        fn on_result(&mut self, r: &lazybreaker::policy::CallResult<'_>) -> bool {
            r.counts.slow_calls > 0
        }
        fn capabilities(&self) -> lazybreaker::policy::Capabilities {
            lazybreaker::policy::Capabilities::default().slow_call_threshold(ms(1))
        }
    }
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .policy(NoLatency)
        .clock(clock.clone())
        .build();
    for _ in 0..10 {
        call(&b, &clock, ms(100), true);
    }
    assert_eq!(b.counts().slow_calls, 0);
    assert_eq!(b.state(), State::Closed);
}
