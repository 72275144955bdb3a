//! `Pool::limit`: each endpoint its own adaptive concurrency limit; a pick skips an endpoint
//! at its limit as it skips an isolated one, answers `Rejected::Limited` at once when every
//! endpoint is at its limit, and a limit never trips a breaker or ejects an endpoint.

use std::future::Future;
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::limit::{Aimd, Fixed};
use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{OutlierDetection, Pool};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    for _ in 0..1_000 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
    panic!("the future did not finish");
}

fn pool(clock: &ManualClock) -> Pool<&'static str> {
    Pool::new(|_: &&str| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(1))
    })
    .clock(clock.clone())
}

#[test]
fn a_pick_skips_an_endpoint_at_its_limit_and_is_limited_when_all_are() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(Fixed::new(2));
    pool.set(["a", "b", "c"]);
    let picks: Vec<_> = (0..6).map(|_| pool.pick().unwrap()).collect();
    for key in ["a", "b", "c"] {
        assert_eq!(
            picks.iter().filter(|p| *p.key() == key).count(),
            2,
            "each endpoint takes its limit, no more: {key}"
        );
    }
    for _ in 0..5 {
        assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    }
    let stats = pool.stats();
    assert_eq!((stats.limited, stats.no_endpoint), (5, 0));
    assert!(
        stats.limit_skips >= 5,
        "each limited pick skipped endpoints"
    );
    assert_eq!(pool.summary().at_limit, 3);
    // No breaker heard of it.
    for (_, breaker) in pool.breakers() {
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(breaker.totals().admitted, 2);
    }
    // A place comes back with a report, or with a pick dropped.
    let mut picks = picks.into_iter();
    let freed = picks.next().unwrap();
    let key = *freed.key();
    freed.success();
    let next = pool.pick().unwrap();
    assert_eq!(*next.key(), key, "the one place free");
    drop(next);
    assert_eq!(
        *pool.pick().unwrap().key(),
        key,
        "a dropped pick gives it back"
    );
    let snapshot = pool.snapshot();
    assert!(snapshot.endpoints.iter().all(|e| e.limit == Some(2)));
}

#[test]
fn isolated_and_limited_together_say_limited_and_an_isolated_pool_says_no_endpoint() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(Fixed::new(1)).max_isolated(1.0);
    pool.set(["a", "b"]);
    pool.breaker(&"a").unwrap().allow().unwrap().failure();
    let held = pool.pick().unwrap();
    assert_eq!(*held.key(), "b");
    // "a" isolated, "b" at its limit: the one that could take it is full.
    assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    held.failure(); // "b" trips too: now nothing is at its limit, both isolated
    assert!(matches!(
        pool.pick().unwrap_err(),
        Rejected::NoEndpoint {
            retry_after: Some(_)
        }
    ));
}

#[test]
fn an_aimd_limit_learns_each_endpoints_own_latency_and_drops() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(
        Aimd::new()
            .initial_limit(4)
            .min_limit(1)
            .max_limit(10)
            .timeout(Duration::from_millis(100)),
    );
    pool.set(["only"]);
    // Four out (the limit), each answering in 5 ms, with 1, 2, 3 and 4 out when they went.
    let picks: Vec<_> = (0..4).map(|_| pool.pick().unwrap()).collect();
    assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    clock.advance(Duration::from_millis(5));
    for p in picks {
        p.success();
    }
    // In turn: 1 of 4 is below half (4); 2 of 4 is half (5); 3 of 5 (6); 4 of 6 (7).
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(7));
    // An overload answer is a drop: 7 × 0.9 = 6.
    pool.pick().unwrap().overloaded();
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(6));
    // A call past Aimd's timeout is a drop too: 6 × 0.9 = 5.
    let slow = pool.pick().unwrap();
    clock.advance(Duration::from_millis(150));
    slow.success();
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(5));
    // A failure says nothing of the queue (no deadline): unchanged, and the breaker trips.
    pool.pick().unwrap().failure();
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(5));
    assert_eq!(pool.breaker(&"only").unwrap().state(), State::Open);
    // An exclusion, a dropped pick: nothing either.
    clock.advance(Duration::from_millis(1_001));
    pool.pick().unwrap().success(); // the probe closes it; 1 of 5 out: no growth
    pool.pick().unwrap().exclude();
    drop(pool.pick().unwrap());
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(5));
    assert_eq!(pool.summary().in_flight, 0);
}

#[test]
fn with_a_deadline_a_failure_that_took_it_is_a_drop() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .deadline(Duration::from_millis(50))
        .limit(Aimd::new().initial_limit(10).min_limit(1));
    pool.set(["a"]);
    let late = pool.pick().unwrap();
    clock.advance(Duration::from_millis(50));
    late.failure();
    assert_eq!(pool.snapshot().endpoints[0].limit, Some(9), "10 × 0.9");
    let quick = pool.pick().unwrap();
    clock.advance(Duration::from_millis(1));
    quick.failure();
    assert_eq!(
        pool.snapshot().endpoints[0].limit,
        Some(9),
        "a quick failure: nothing"
    );
}

#[test]
fn a_limit_neither_trips_a_breaker_nor_ejects_an_endpoint() {
    let clock = ManualClock::new();
    let pool = pool(&clock)
        .limit(Fixed::new(1))
        .outlier_detection(OutlierDetection::new().interval(Duration::from_secs(1)));
    pool.set(["a", "b"]);
    for round in 0..20 {
        let held: Vec<_> = (0..2).map(|_| pool.pick().unwrap()).collect();
        for _ in 0..10 {
            assert_eq!(pool.pick().unwrap_err(), Rejected::Limited, "round {round}");
        }
        for p in held {
            p.success();
        }
        clock.advance(Duration::from_millis(200));
    }
    let stats = pool.stats();
    assert_eq!(stats.limited, 200);
    assert_eq!(
        stats.ejected_success_rate + stats.ejected_failure_percentage,
        0
    );
    for (_, breaker) in pool.breakers() {
        let totals = breaker.totals();
        assert_eq!((totals.failures, totals.opened), (0, 0));
        assert_eq!(totals.successes, 20);
    }
}

#[test]
fn pool_call_answers_limited_and_gives_places_back_after_a_panic() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(Fixed::new(1));
    pool.set(["a"]);
    let held = pool.pick().unwrap();
    let got = block_on(pool.call(|_| async { Ok::<_, ()>(()) }, OkIsSuccess));
    assert!(matches!(got, Err(Error::Rejected(Rejected::Limited))));
    drop(held);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        block_on(pool.call(
            |_| async {
                panic!("the call panics");
                #[allow(unreachable_code)]
                Ok::<(), ()>(())
            },
            OkIsSuccess,
        ))
    }));
    assert!(panicked.is_err(), "the panic is not swallowed");
    assert_eq!(pool.summary().at_limit, 0, "its place came back");
    // The panic was the endpoint's failure (its breaker trips on one): out for that, not
    // for its limit.
    assert!(matches!(
        pool.pick().unwrap_err(),
        Rejected::NoEndpoint { .. }
    ));
    clock.advance(Duration::from_millis(1_001));
    assert!(block_on(pool.call(|_| async { Ok::<_, ()>(()) }, OkIsSuccess)).is_ok());
}

#[test]
fn settings_out_of_range_are_refused_naming_the_field() {
    let err = Pool::new(|_: &&str| Breaker::builder())
        .try_limit(Aimd::new().backoff_ratio(2.0))
        .unwrap_err();
    assert_eq!(err.field(), "limit.backoff_ratio");
    let err = Pool::new(|_: &&str| Breaker::builder())
        .try_limit(Fixed::new(0))
        .unwrap_err();
    assert_eq!(err.field(), "limit.limit");
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .try_limit(Aimd::new())
        .unwrap();
    assert_eq!(pool.limit_algorithm().unwrap().limit(), 20);
}

#[test]
fn without_a_limit_nothing_is_limited() {
    let clock = ManualClock::new();
    let pool = pool(&clock);
    pool.set(["a"]);
    let picks: Vec<_> = (0..500).map(|_| pool.pick().unwrap()).collect();
    assert_eq!(pool.summary().in_flight, 500);
    assert_eq!(pool.snapshot().endpoints[0].limit, None);
    drop(picks);
    assert_eq!(pool.stats().limited, 0);
}

#[test]
fn a_hedge_never_goes_past_a_limit_and_the_call_still_answers() {
    use lazybreaker::retry::Hedge;
    use std::task::{Context, Poll, Waker};
    let clock = ManualClock::new();
    let pool = pool(&clock)
        .limit(Fixed::new(1))
        .hedge(Hedge::after(Duration::from_millis(20)));
    pool.set(["a", "b"]);
    let answer = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut call = std::pin::pin!(pool.call(
        |_| {
            let answer = std::sync::Arc::clone(&answer);
            std::future::poll_fn(move |_| {
                if answer.load(std::sync::atomic::Ordering::Relaxed) {
                    Poll::Ready(Ok::<_, ()>(()))
                } else {
                    Poll::Pending
                }
            })
        },
        OkIsSuccess,
    ));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(call.as_mut().poll(&mut cx).is_pending());
    // The other endpoint taken by another caller: the hedge finds no place.
    let other = pool.pick().unwrap();
    clock.advance(Duration::from_millis(25));
    assert!(call.as_mut().poll(&mut cx).is_pending());
    assert_eq!(pool.stats().hedges, 0, "no place for a hedge");
    assert_eq!(pool.summary().in_flight, 2, "never past either limit");
    answer.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(call.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
    drop(other);
    assert_eq!(pool.summary().in_flight, 0);
}

#[test]
fn a_retry_with_every_other_endpoint_at_its_limit_is_not_paid_for() {
    use lazybreaker::retry::Retry;
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .limit(Fixed::new(1))
        .retry(Retry::new(3).unwrap());
    pool.set(["a", "b"]);
    let held = pool.pick().unwrap();
    let busy = *held.key();
    let got = block_on(pool.call(|_| async { Err::<(), _>("500") }, OkIsSuccess));
    assert!(
        matches!(got, Err(Error::Inner("500"))),
        "the failure is the answer"
    );
    let stats = pool.stats();
    assert_eq!(stats.retries, 0, "nowhere to go: {stats:?}");
    let decided = pool.retry_policy().unwrap().stats();
    assert_eq!(
        (decided.retries, decided.budget_denied),
        (0, 0),
        "not asked"
    );
    // The failed attempt went to the one with a free place.
    let failed = pool
        .breakers()
        .into_iter()
        .find(|(k, _)| *k != busy)
        .unwrap()
        .1;
    assert_eq!(failed.totals().failures, 1);
    drop(held);
}

#[test]
fn an_endpoint_with_its_breakers_out_says_no_endpoint_even_with_its_limit_full() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(Fixed::new(1)).max_isolated(1.0);
    pool.set(["a", "b"]);
    pool.breaker(&"a").unwrap().allow().unwrap().failure();
    let held = pool.pick().unwrap();
    assert_eq!(*held.key(), "b");
    // "b" trips while its one call is still out: full, but out; so is "a".
    pool.breaker(&"b").unwrap().allow().unwrap().failure();
    assert!(matches!(
        pool.pick().unwrap_err(),
        Rejected::NoEndpoint {
            retry_after: Some(_)
        }
    ));
    assert_eq!(pool.stats().limited, 0);
    drop(held);
}

#[test]
fn limit_skips_outlive_the_endpoint_that_made_them() {
    let clock = ManualClock::new();
    let pool = pool(&clock).limit(Fixed::new(1));
    pool.set(["a"]);
    let held = pool.pick().unwrap();
    assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    let skips = pool.stats().limit_skips;
    assert!(skips >= 1);
    drop(held);
    pool.set(["b"]);
    assert_eq!(
        pool.stats().limit_skips,
        skips,
        "a counter: it never goes down"
    );
}

#[test]
fn threads_picking_at_once_leave_no_place_behind() {
    let pool = std::sync::Arc::new(Pool::new(|_: &&str| Breaker::builder()).limit(Fixed::new(4)));
    pool.set(["only"]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let pool = std::sync::Arc::clone(&pool);
            std::thread::spawn(move || {
                let mut admitted = 0u64;
                for _ in 0..20_000 {
                    if let Ok(pick) = pool.pick() {
                        admitted += 1;
                        pick.success();
                    }
                }
                admitted
            })
        })
        .collect();
    let admitted: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(admitted > 0);
    assert_eq!(pool.summary().in_flight, 0, "every place came back");
    // All four places are free again.
    let held: Vec<_> = (0..4).map(|_| pool.pick().unwrap()).collect();
    assert_eq!(pool.pick().unwrap_err(), Rejected::Limited);
    assert_eq!(pool.stats().picks, admitted + 4, "a pick counted once");
    drop(held);
}
