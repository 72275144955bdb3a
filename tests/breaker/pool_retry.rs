//! `Pool::retry`: a failed call goes again to another endpoint at once, each attempt a pick
//! with its own verdict, within the call's deadline and the retry's budget.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use lazybreaker::classify::OkIsSuccess;
use lazybreaker::policy::{ConsecutiveFailures, Outcome};
use lazybreaker::pool::Pool;
use lazybreaker::retry::{Retry, RetryBudget, TokenBucket};
use lazybreaker::{Breaker, Error, ManualClock};

/// Polls `f` to completion, at most 100 times.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    for _ in 0..100 {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v;
        }
    }
    panic!("not ready after 100 polls");
}

/// A pool whose breakers trip only after `failures` failures in a row (so that the retries,
/// not the isolation, are what the test sees), retrying with `retry`.
fn pool(clock: &ManualClock, failures: u64, retry: Retry) -> Pool<&'static str> {
    Pool::new(move |_: &&str| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(failures).unwrap())
            .timeout(Duration::from_secs(1))
    })
    .clock(clock.clone())
    .retry(retry)
}

/// A throttle that never throttles at the failure rates these tests make (half of the calls
/// failing gives back what it takes), so that a test sees the budget alone.
fn lenient() -> TokenBucket {
    TokenBucket::new(1000.0, 1.0).unwrap()
}

/// A budget on `clock` with no reserve.
fn budget(percent: f64, clock: &ManualClock) -> RetryBudget {
    RetryBudget::new(percent)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone())
}

/// The calls each key received.
#[derive(Default)]
struct Calls(Mutex<HashMap<&'static str, u32>>);

impl Calls {
    fn hit(&self, key: &'static str) {
        *self.0.lock().unwrap().entry(key).or_default() += 1;
    }
    fn of(&self, key: &str) -> u32 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

/// Calls `pool` once: `sick` keys fail.
fn call(
    pool: &Pool<&'static str>,
    calls: &Calls,
    sick: &[&str],
) -> Result<&'static str, Error<String>> {
    block_on(pool.call(
        |key| {
            calls.hit(key);
            let fails = sick.contains(&key);
            async move {
                if fails {
                    Err(format!("{key}: 503"))
                } else {
                    Ok(key)
                }
            }
        },
        OkIsSuccess,
    ))
}

#[test]
fn a_sick_replica_is_hidden_by_a_retry_elsewhere() {
    let clock = ManualClock::new();
    // 100 %: a retry for every call (no reserve: the budget grows with the calls). The sick
    // replica never trips, so half the calls fail: a lenient throttle.
    let retry = Retry::new(3)
        .unwrap()
        .budget(budget(1.0, &clock))
        .throttle(lenient());
    let pool = pool(&clock, 1000, retry.clone());
    pool.set(["sick", "well"]);
    let calls = Calls::default();
    for n in 0..200 {
        assert_eq!(call(&pool, &calls, &["sick"]), Ok("well"), "call {n}");
    }
    let sick = calls.of("sick");
    assert!(
        sick > 30,
        "the pool still sends the sick one its share: {sick}"
    );
    assert_eq!(calls.of("well"), 200, "every call ends on the well one");
    let stats = pool.stats();
    assert_eq!(stats.retries, u64::from(sick), "each failure retried once");
    assert_eq!(
        (stats.retries_budget_denied, stats.retries_exhausted),
        (0, 0)
    );
    let sick_totals = pool.breaker(&"sick").unwrap().totals();
    assert_eq!(
        sick_totals.retries,
        u64::from(sick),
        "counted where it failed"
    );
    assert_eq!(pool.breaker(&"well").unwrap().totals().retries, 0);
    assert_eq!(retry.stats().retries, u64::from(sick));
}

#[test]
fn a_total_outage_retries_within_the_budget_and_fails() {
    let clock = ManualClock::new();
    // A lenient throttle: the budget alone (the pool's own throttle is tested below).
    let retry = Retry::new(3)
        .unwrap()
        .budget(budget(0.2, &clock))
        .throttle(lenient());
    let pool = pool(&clock, 1000, retry);
    pool.set(["a", "b", "c"]);
    let calls = Calls::default();
    for _ in 0..100 {
        let got = call(&pool, &calls, &["a", "b", "c"]);
        assert!(matches!(got, Err(Error::Inner(_))), "{got:?}");
    }
    let attempts = calls.of("a") + calls.of("b") + calls.of("c");
    // 100 calls: 20 % is 20 retries, no reserve. Each retry is paid for when it is made.
    assert_eq!(attempts, 120, "100 calls and the budget's 20 retries");
    let stats = pool.stats();
    assert_eq!(stats.retries, 20);
    assert_eq!(
        stats.retries_budget_denied + stats.retries_exhausted,
        100,
        "every call ends refused by the budget or out of attempts: {stats:?}"
    );
}

#[test]
fn attempts_run_out() {
    let clock = ManualClock::new();
    let pool = pool(
        &clock,
        1000,
        Retry::new(2).unwrap().budget(budget(10.0, &clock)),
    );
    pool.set(["a", "b", "c"]);
    let calls = Calls::default();
    let got = call(&pool, &calls, &["a", "b", "c"]);
    assert!(matches!(got, Err(Error::Inner(_))));
    let attempts = calls.of("a") + calls.of("b") + calls.of("c");
    assert_eq!(attempts, 2, "two attempts, on two endpoints");
    assert!(
        [calls.of("a"), calls.of("b"), calls.of("c")]
            .iter()
            .all(|&n| n <= 1),
        "never the same endpoint twice while another is untried"
    );
    let stats = pool.stats();
    assert_eq!((stats.retries, stats.retries_exhausted), (1, 1));
}

#[test]
fn a_pool_of_one_does_not_retry_nor_pay() {
    let clock = ManualClock::new();
    let budget = budget(1.0, &clock);
    let pool = pool(&clock, 1000, Retry::new(3).unwrap().budget(budget.clone()));
    pool.set(["only"]);
    let calls = Calls::default();
    let got = call(&pool, &calls, &["only"]);
    assert_eq!(got, Err(Error::Inner("only: 503".to_owned())));
    assert_eq!(calls.of("only"), 1);
    assert_eq!(budget.balance(), 1, "the call deposited, nothing withdrawn");
    assert_eq!(pool.stats().retries, 0);
}

#[test]
fn an_isolated_endpoint_is_not_retried_on() {
    // Three endpoints, two of them tripped at their first failure (no cap on isolation): a
    // retry goes to the one left, never to an open one.
    let clock = ManualClock::new();
    let pool = pool(
        &clock,
        1,
        Retry::new(3).unwrap().budget(budget(10.0, &clock)),
    )
    .max_isolated(1.0);
    pool.set(["a", "b", "c"]);
    let calls = Calls::default();
    for _ in 0..20 {
        assert_eq!(call(&pool, &calls, &["a", "b"]), Ok("c"));
    }
    assert_eq!(calls.of("a"), 1, "tripped at its first failure");
    assert_eq!(calls.of("b"), 1);
}

#[test]
fn no_retry_past_the_deadline() {
    let clock = ManualClock::new();
    let retry = Retry::new(3)
        .unwrap()
        .budget(budget(10.0, &clock))
        .min_attempt_time(Duration::from_millis(60));
    let pool = pool(&clock, 1000, retry.clone()).deadline(Duration::from_millis(100));
    pool.set(["a", "b"]);
    let calls = Calls::default();
    let slow = |key: &'static str| {
        calls.hit(key);
        clock.advance(Duration::from_millis(50)); // the attempt takes 50 ms
        async move { Err::<&str, _>(format!("{key}: timeout")) }
    };
    let got = block_on(pool.call(slow, OkIsSuccess));
    assert!(matches!(got, Err(Error::Inner(_))));
    assert_eq!(
        calls.of("a") + calls.of("b"),
        1,
        "50 ms gone and 60 ms needed: past the 100 ms deadline"
    );
    assert_eq!(retry.stats().past_deadline, 1);
}

#[test]
fn exclusions_and_successes_are_not_retried() {
    let clock = ManualClock::new();
    let pool = pool(
        &clock,
        1000,
        Retry::new(3).unwrap().budget(budget(10.0, &clock)),
    );
    pool.set(["a", "b"]);
    let calls = Calls::default();
    let got = block_on(pool.call(
        |key| {
            calls.hit(key);
            async { Err::<(), _>("cancelled by the caller") }
        },
        |_: &Result<(), &str>| Outcome::Excluded,
    ));
    assert_eq!(got, Err(Error::Inner("cancelled by the caller")));
    assert_eq!(
        calls.of("a") + calls.of("b"),
        1,
        "an exclusion is not retried"
    );
    assert_eq!(pool.stats().retries, 0);
}

#[test]
fn a_panicking_call_is_not_retried_and_continues() {
    let clock = ManualClock::new();
    let pool = pool(
        &clock,
        1000,
        Retry::new(3).unwrap().budget(budget(10.0, &clock)),
    );
    pool.set(["a", "b"]);
    let calls = Calls::default();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        block_on(pool.call(
            |key| {
                calls.hit(key);
                async move {
                    panic!("the call panicked on {key}");
                    #[allow(unreachable_code)]
                    Ok::<(), String>(())
                }
            },
            OkIsSuccess,
        ))
    }));
    assert!(caught.is_err(), "the panic continues");
    assert_eq!(calls.of("a") + calls.of("b"), 1);
    let failures: u64 = ["a", "b"]
        .iter()
        .map(|k| pool.breaker(k).unwrap().totals().failures)
        .sum();
    assert_eq!(failures, 1, "counted as the endpoint's failure");
    assert_eq!(pool.in_flight(&"a"), Some(0));
    assert_eq!(pool.in_flight(&"b"), Some(0));
}

#[test]
fn the_pools_throttle_stops_retries_once_failures_are_everywhere() {
    // Every endpoint fails, the breakers never trip, the budget allows 20 % of the calls:
    // the pool's own throttle (20 tokens, retries while more than 10 are left) loses one
    // token per failed attempt. Call 5 makes a retry (20 % of 5), which fails too, and the
    // budget refuses a second; at call 9, 9 calls and that retry have failed, 10 tokens
    // are gone, and no retry goes out any more.
    let clock = ManualClock::new();
    let retry = Retry::new(3).unwrap().budget(budget(0.2, &clock));
    let pool = pool(&clock, 1000, retry.clone());
    pool.set(["a", "b", "c"]);
    let calls = Calls::default();
    for _ in 0..100 {
        assert!(call(&pool, &calls, &["a", "b", "c"]).is_err());
    }
    let attempts = calls.of("a") + calls.of("b") + calls.of("c");
    assert_eq!(attempts, 101);
    let stats = retry.stats();
    // Refused by the budget: calls 1 to 4 (20 % of fewer than 5 is none), the retry of
    // call 5, calls 6 to 8.
    assert_eq!((stats.retries, stats.budget_denied), (1, 8));
    assert_eq!(stats.throttled, 100 - 8, "every call from the 9th on");
    assert_eq!(pool.stats().retries_throttled, 92);
    let throttle = pool.retry_policy().unwrap().retry_throttle().unwrap();
    assert!(!throttle.allows_retry());
}

#[test]
fn the_pools_throttle_refills_with_the_calls_that_end_well() {
    // Drained by a total outage, the throttle is fed the successes that follow (counted
    // from the endpoints' own picks, nothing written per call): a tenth of a token each.
    let clock = ManualClock::new();
    let pool = pool(
        &clock,
        1000,
        Retry::new(2).unwrap().budget(budget(10.0, &clock)),
    );
    pool.set(["a", "b"]);
    let calls = Calls::default();
    for _ in 0..60 {
        let _ = call(&pool, &calls, &["a", "b"]);
    }
    let throttle = Arc::clone(pool.retry_policy().unwrap().retry_throttle().unwrap());
    assert!(!throttle.allows_retry(), "drained: {}", throttle.tokens());
    for _ in 0..500 {
        assert!(call(&pool, &calls, &[]).is_ok());
    }
    // The successes are fed at the next failure: 500 ended well, 50 tokens back (the
    // bucket holds 20), enough for eight failures of a sick "a" to be retried on "b".
    for _ in 0..8 {
        assert_eq!(call(&pool, &calls, &["a"]), Ok("b"), "retried on b");
    }
    assert!(throttle.tokens() >= 12.0, "{}", throttle.tokens());
    assert!(throttle.allows_retry());
}
