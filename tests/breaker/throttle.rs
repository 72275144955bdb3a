//! Adaptive client-side throttling (`Builder::throttle`): the formula by hand (the cap,
//! `min_requests`, the window's expiry, both counting modes), the lock-free lane never
//! admitting past the point where `p` may rise, the trip policy never seeing a throttled
//! call, open and half-open unchanged, dry run, seeds, and the strict errors.

use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::throttle::Throttle;
use lazybreaker::{Breaker, ManualClock, Rejected, State};

const SECOND: Duration = Duration::from_secs(1);

/// A breaker that never trips (only the throttle acts), with a 10 s fixed window.
fn throttled(throttle: Throttle) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .name("orders")
        .interval(10 * SECOND)
        .never_trips(true)
        .throttle(throttle)
        .clock(clock.clone())
        .build();
    (breaker, clock)
}

/// SRE's formula, written out here: `max(0, (r - k a) / (r + 1))`, capped.
fn sre(requests: u64, accepts: u64, k: f64, cap: f64) -> f64 {
    ((requests as f64 - k * accepts as f64) / (requests as f64 + 1.0))
        .max(0.0)
        .min(cap)
}

#[test]
fn every_throttled_call_carries_the_formulas_probability_over_the_window() {
    let throttle = Throttle::new(2.0)
        .unwrap()
        .min_requests(4)
        .max_probability(1.0)
        .seed(11);
    let (breaker, _clock) = throttled(throttle);
    let (mut requests, mut accepts, mut throttled_calls) = (0u64, 0u64, 0u64);
    for i in 0..2_000u64 {
        // One call in five accepted: the throttle settles where about 2 in 5 are sent.
        match breaker.allow() {
            Ok(permit) => {
                requests += 1;
                if i % 5 == 0 {
                    accepts += 1;
                    permit.success();
                } else {
                    permit.failure();
                }
            }
            Err(Rejected::Throttled { probability }) => {
                throttled_calls += 1;
                assert!(requests >= 4, "no throttling below min_requests");
                assert_eq!(probability, sre(requests, accepts, 2.0, 1.0), "call {i}");
            }
            Err(other) => panic!("{other}"),
        }
    }
    let totals = breaker.totals();
    assert_eq!(totals.rejected_throttled, throttled_calls);
    assert_eq!(totals.admitted, requests);
    assert_eq!(totals.admitted + totals.rejected_throttled, 2_000);
    // The trip policy's counts hold the admitted calls only.
    assert_eq!(breaker.counts().requests, requests);
    assert_eq!(
        breaker.counts().throttled,
        0,
        "not counted as requests by default"
    );
    assert!(throttled_calls > 500, "{throttled_calls}");
}

#[test]
fn the_cap_bounds_p_and_a_zero_cap_never_throttles() {
    let (breaker, _clock) = throttled(
        Throttle::new(2.0)
            .unwrap()
            .min_requests(10)
            .max_probability(0.25),
    );
    let mut seen = 0u64;
    for _ in 0..4_000 {
        match breaker.allow() {
            Ok(permit) => permit.failure(),
            Err(Rejected::Throttled { probability }) => {
                assert_eq!(probability, 0.25);
                seen += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    // A quarter of the calls after the first ten, give or take a seeded draw.
    assert!((850..1_150).contains(&seen), "{seen}");

    let (never, _clock) = throttled(
        Throttle::new(1.0)
            .unwrap()
            .min_requests(0)
            .max_probability(0.0),
    );
    for _ in 0..1_000 {
        never.allow().expect("a zero cap never throttles").failure();
    }
    assert_eq!(never.totals().rejected_throttled, 0);
}

#[test]
fn below_min_requests_nothing_is_throttled_then_the_first_draw_is_at_n_over_n_plus_one() {
    let (breaker, _clock) = throttled(
        Throttle::new(2.0)
            .unwrap()
            .min_requests(10)
            .max_probability(1.0),
    );
    for _ in 0..10 {
        breaker.allow().expect("below min_requests").failure();
    }
    // 10 requests, no accepts: p = 10 / 11 from now on, for as long as every call fails.
    let mut rejected = 0;
    for _ in 0..200 {
        match breaker.allow() {
            Ok(permit) => permit.failure(),
            Err(Rejected::Throttled { probability }) => {
                rejected += 1;
                assert!(probability >= 10.0 / 11.0, "{probability}");
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(rejected > 150, "{rejected}");
}

#[test]
fn a_new_window_forgets_the_overload() {
    let (breaker, clock) = throttled(Throttle::new(2.0).unwrap().min_requests(5));
    let mut throttled_calls = 0;
    for _ in 0..100 {
        match breaker.allow() {
            Ok(permit) => permit.failure(),
            Err(Rejected::Throttled { .. }) => throttled_calls += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(throttled_calls > 50, "{throttled_calls}");
    clock.advance(10 * SECOND + Duration::from_nanos(1)); // the window ends strictly after 10 s
    for _ in 0..5 {
        breaker
            .allow()
            .expect("a new window: below min_requests")
            .failure();
    }
}

#[test]
fn a_rolling_window_lets_the_overload_roll_out() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(4 * SECOND)
        .bucket_period(SECOND)
        .never_trips(true)
        .throttle(
            Throttle::new(2.0)
                .unwrap()
                .min_requests(5)
                .max_probability(1.0),
        )
        .clock(clock.clone())
        .build();
    for _ in 0..5 {
        breaker.allow().unwrap().failure();
    }
    // Still in the window: 5 requests, no accepts.
    clock.advance(3 * SECOND);
    let drawn = (0..50)
        .filter(|_| matches!(breaker.allow(), Err(Rejected::Throttled { .. })))
        .count();
    assert!(drawn > 0);
    // The failures' bucket has left the window; the admissions since then succeed.
    clock.advance(SECOND + Duration::from_nanos(1));
    let _ = breaker.state(); // evaluates the expiry: the window rolls
    assert_eq!(breaker.counts().total_failures, 0);
    for _ in 0..100 {
        breaker.allow().expect("the overload rolled out").success();
    }
}

/// Runs an outage (every admitted call fails for `outage` calls), then a healed dependency
/// (every admitted call succeeds): how many calls are throttled after it healed.
fn throttled_after_healing(count_throttled: bool) -> (u64, u64) {
    let (breaker, _clock) = throttled(
        Throttle::new(2.0)
            .unwrap()
            .min_requests(10)
            .max_probability(0.9)
            .count_throttled(count_throttled)
            .seed(3),
    );
    for _ in 0..1_000 {
        if let Ok(permit) = breaker.allow() {
            permit.failure();
        }
    }
    let during = breaker.totals().rejected_throttled;
    for _ in 0..3_000 {
        if let Ok(permit) = breaker.allow() {
            permit.success();
        }
    }
    if count_throttled {
        // Every throttled call is a request of the throttle's, in the window.
        assert_eq!(
            breaker.counts().throttled,
            breaker.totals().rejected_throttled
        );
    } else {
        assert_eq!(breaker.counts().throttled, 0);
    }
    (during, breaker.totals().rejected_throttled - during)
}

#[test]
fn counting_the_throttled_calls_keeps_a_healed_dependency_cut_off_longer() {
    let (during_not, after_not) = throttled_after_healing(false);
    let (during_counted, after_counted) = throttled_after_healing(true);
    assert!(
        during_not > 700 && during_counted > 700,
        "{during_not} {during_counted}"
    );
    // Not counted: requests = 1 000 admitted-ish failures' worth, and each success is an
    // accept; p falls to zero once accepts reach half the requests.
    // Counted: the ~900 throttled calls are requests too, so it takes more successes.
    assert!(
        after_counted > after_not,
        "counted {after_counted} against {after_not}"
    );
}

#[test]
fn the_lane_never_admits_past_the_point_where_p_may_rise() {
    // min_requests 1, k 2: the first call finds no request (p = 0); with it still in flight
    // the second finds one request and no accept, p = 1 / 2. The lane must let the breaker
    // draw for the second, whatever the seed.
    let mut throttled_second = 0;
    for seed in 0..400 {
        let (breaker, _clock) = throttled(
            Throttle::new(2.0)
                .unwrap()
                .min_requests(1)
                .max_probability(1.0)
                .seed(seed),
        );
        let first = breaker.allow().expect("p = 0 with no request");
        match breaker.allow() {
            Ok(second) => second.success(),
            Err(Rejected::Throttled { probability }) => {
                assert_eq!(probability, 0.5);
                throttled_second += 1;
            }
            Err(other) => panic!("{other}"),
        }
        first.success();
    }
    assert!((140..260).contains(&throttled_second), "{throttled_second}");
}

#[test]
fn a_healthy_window_grows_the_lanes_room_and_never_throttles() {
    let (breaker, _clock) = throttled(Throttle::new(2.0).unwrap().min_requests(20));
    for _ in 0..100_000 {
        breaker.allow().expect("healthy").success();
    }
    assert_eq!(breaker.totals().rejected_throttled, 0);
    assert_eq!(breaker.counts().requests, 100_000);
}

#[test]
fn the_same_seed_and_calls_make_the_same_decisions() {
    fn decisions(seed: u64) -> Vec<bool> {
        let (breaker, _clock) = throttled(Throttle::new(2.0).unwrap().min_requests(5).seed(seed));
        (0..500u32)
            .map(|i| match breaker.allow() {
                Ok(permit) => {
                    if i % 3 == 0 {
                        permit.success();
                    } else {
                        permit.failure();
                    }
                    true
                }
                Err(_) => false,
            })
            .collect()
    }
    assert_eq!(decisions(42), decisions(42));
    assert_ne!(decisions(42), decisions(43));
}

#[test]
fn a_throttled_call_is_no_result_and_open_and_half_open_are_unchanged() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(ConsecutiveFailures::new(30).unwrap())
        .timeout(5 * SECOND)
        .throttle(
            Throttle::new(1.0)
                .unwrap()
                .min_requests(1)
                .max_probability(0.5),
        )
        .clock(clock.clone())
        .build();
    let mut calls = 0;
    while breaker.state() == State::Closed {
        calls += 1;
        assert!(calls < 1_000, "30 failures in a row trip it");
        if let Ok(permit) = breaker.allow() {
            permit.failure();
        }
    }
    // Exactly 30 failures tripped it; the throttled calls were none of them.
    let totals = breaker.totals();
    assert_eq!(totals.failures, 30);
    assert!(totals.rejected_throttled > 0);
    assert!(matches!(breaker.allow(), Err(Rejected::Open { .. })));
    clock.advance(5 * SECOND + Duration::from_nanos(1));
    // Half-open: the probe is admitted whatever the throttle would say.
    let probe = breaker.allow().expect("the probe");
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn in_dry_run_a_call_it_would_throttle_runs_and_counts_as_would_reject() {
    let breaker = Breaker::builder()
        .never_trips(true)
        .dry_run(true)
        .throttle(
            Throttle::new(1.0)
                .unwrap()
                .min_requests(1)
                .max_probability(0.9),
        )
        .clock(ManualClock::new())
        .build();
    for _ in 0..500 {
        breaker
            .allow()
            .expect("dry run admits everything")
            .failure();
    }
    let totals = breaker.totals();
    assert_eq!(totals.rejected_throttled, 0);
    assert!(totals.would_reject > 300, "{}", totals.would_reject);
    assert_eq!(totals.admitted + totals.would_reject, 500);
}

#[test]
fn build_strict_names_the_breaker_and_the_throttles_field() {
    let err = Breaker::builder()
        .name("search")
        .throttle(Throttle::new(2.0).unwrap().max_probability(1.5))
        .build_strict()
        .unwrap_err();
    assert_eq!(err.field(), "throttle.max_probability");
    assert_eq!(err.breaker(), Some("search"));
    let err = Breaker::builder()
        .count_window(100)
        .throttle(Throttle::new(2.0).unwrap().count_throttled(true))
        .build_strict()
        .unwrap_err();
    assert_eq!(err.field(), "throttle.count_throttled");
    assert_eq!(Throttle::new(0.5).unwrap_err().field(), "k");
    // `build` is lenient: a cap outside [0, 1] is clamped, and never panics.
    let lenient = Breaker::builder()
        .never_trips(true)
        .throttle(
            Throttle::new(2.0)
                .unwrap()
                .min_requests(1)
                .max_probability(f64::NAN),
        )
        .build();
    for _ in 0..50 {
        if let Ok(permit) = lenient.allow() {
            permit.failure();
        }
    }
    assert!(lenient.totals().rejected_throttled > 0);
}

#[test]
fn a_throttled_rejection_reads_as_a_number_and_says_so() {
    let rejected = Rejected::Throttled { probability: 0.25 };
    assert_eq!(rejected.throttle_probability(), Some(0.25));
    assert_eq!(rejected.retry_after(), None);
    assert_eq!(
        rejected.to_string(),
        "throttled: the dependency accepts less than it is sent (p = 0.250)"
    );
    assert_eq!(Rejected::TooManyRequests.throttle_probability(), None);
}

#[test]
fn forced_closed_lets_every_call_through_and_release_throttles_again() {
    let (breaker, _clock) = throttled(Throttle::new(2.0).unwrap().min_requests(5));
    for _ in 0..5 {
        breaker.allow().unwrap().failure();
    }
    assert!(breaker.throttle_probability().unwrap() > 0.0);
    breaker.force_closed();
    assert_eq!(breaker.throttle_probability(), Some(0.0));
    for _ in 0..200 {
        breaker
            .allow()
            .expect("forced closed: no throttling")
            .failure();
    }
    assert_eq!(breaker.totals().rejected_throttled, 0);
    breaker.release();
    let throttled_calls = (0..200)
        .filter(|_| match breaker.allow() {
            Ok(permit) => {
                permit.failure();
                false
            }
            Err(rejected) => rejected.throttle_probability().is_some(),
        })
        .count();
    assert!(throttled_calls > 100, "{throttled_calls}");
}
