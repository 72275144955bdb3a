//! The retries, hedges and limiters held on their own, scraped: each driven by hand on a
//! `ManualClock` to figures worked out below, read back from the exposition text.

use std::sync::Arc;
use std::time::Duration;

use lazybreaker::limit::{Aimd, Algorithm, Fixed, Limiter, Sample};
use lazybreaker::prometheus::BreakerCollector;
use lazybreaker::retry::{Cause, Hedge, Next, Retry, RetryBudget, Stop, TokenBucket};
use lazybreaker::ManualClock;
use prometheus_client::encoding::text::encode;

use super::scrape::{get, parse};

const MS: Duration = Duration::from_millis(1);

/// The exposition of `collector`.
fn scrape(collector: BreakerCollector) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(collector));
    let mut text = String::new();
    encode(&mut text, &registry).expect("a scrape");
    text
}

/// A budget of half the calls, no reserve, on `clock`: its balance is ⌊calls / 2⌋ less the
/// retries (or hedges) paid.
fn half(clock: &ManualClock) -> RetryBudget {
    RetryBudget::new(0.5)
        .unwrap()
        .min_retries_per_second(0)
        .clock(clock.clone())
}

/// A retry of two attempts driven to each of its six decisions, a different count each, and
/// scraped through a clone (clones share the counters and the budget).
#[test]
fn a_retrys_decisions_and_budget_are_scraped() {
    let clock = ManualClock::new();
    let retry = Retry::new(2)
        .unwrap()
        .budget(half(&clock))
        .backoff(Duration::ZERO, Duration::ZERO)
        .seed(1)
        .throttle(TokenBucket::new(4.0, 0.5).unwrap());
    let other = Retry::new(5).unwrap();
    let collector = BreakerCollector::new()
        .retry("search", retry.clone())
        .retry("search", other.clone());

    // Four calls: a budget of two retries.
    let [mut a, mut b, mut c, mut d] = [(); 4].map(|()| retry.start(None));
    // a: retried, then its two attempts are made: exhausted. b: retried. (2 retried, 1
    // exhausted; the budget spent.)
    assert!(matches!(
        retry.next(&mut a, Cause::Failure),
        Next::Retry { .. }
    ));
    assert_eq!(
        retry.next(&mut a, Cause::Failure),
        Next::Stop(Stop::Exhausted)
    );
    assert!(matches!(
        retry.next(&mut b, Cause::Failure),
        Next::Retry { .. }
    ));
    // c: three refusals of the spent budget.
    for _ in 0..3 {
        assert_eq!(retry.next(&mut c, Cause::Failure), Next::Stop(Stop::Budget));
    }
    // d: the server says no four times.
    for _ in 0..4 {
        assert_eq!(
            retry.next(&mut d, Cause::Pushback(None)),
            Next::Stop(Stop::Pushback)
        );
    }
    // The throttle down to half its tokens: c throttled five times (asked before the budget).
    let throttle = retry.retry_throttle().unwrap();
    throttle.record_failure();
    throttle.record_failure();
    for _ in 0..5 {
        assert_eq!(
            retry.next(&mut c, Cause::Failure),
            Next::Stop(Stop::Throttled)
        );
    }
    // e: 10 ms to live; 10 ms later, six retries past the deadline (asked before the
    // throttle).
    let mut e = retry.start(Some(MS * 10));
    clock.advance(MS * 10);
    for _ in 0..6 {
        assert_eq!(
            retry.next(&mut e, Cause::Failure),
            Next::Stop(Stop::Deadline)
        );
    }
    // Three more calls: eight in all, a budget of four, two spent.
    for _ in 0..3 {
        let _ = retry.start(None);
    }
    // The other retry of the same name decided once: it is skipped, not added.
    let _ = other.next(&mut other.start(None), Cause::Failure);

    let text = scrape(collector);
    let series = parse(&text);
    let decision = |decision: &str| {
        get(
            &series,
            "circuit_breaker_retry_decisions_total",
            &[("retry", "search"), ("decision", decision)],
        )
    };
    assert_eq!(
        [
            "retried",
            "budget_denied",
            "exhausted",
            "past_deadline",
            "pushed_back",
            "throttled"
        ]
        .map(decision),
        [2.0, 3.0, 1.0, 6.0, 4.0, 5.0],
        "{text}"
    );
    assert_eq!(
        get(
            &series,
            "circuit_breaker_retry_budget_balance",
            &[("retry", "search")]
        ),
        2.0
    );
    assert!(text.contains("# TYPE circuit_breaker_retry_decisions counter"));
    assert!(text.contains("# TYPE circuit_breaker_retry_budget_balance gauge"));
    let series_of_retries = series
        .keys()
        .filter(|(_, labels)| labels.iter().any(|(label, _)| label == "retry"))
        .count();
    assert_eq!(series_of_retries, 7, "one retry named search: {text}");
    // No hedge or limiter was added: their families are left out.
    assert!(!text.contains("circuit_breaker_hedge_"), "{text}");
    assert!(!text.contains("circuit_breaker_limiter_"), "{text}");
}

/// A hedge of three attempts driven to each of its decisions, a different count each.
#[test]
fn a_hedges_decisions_and_budget_are_scraped() {
    let clock = ManualClock::new();
    let hedge = Hedge::after(MS * 20)
        .max_attempts(3)
        .budget(half(&clock))
        .throttle(TokenBucket::new(4.0, 0.5).unwrap());
    let collector = BreakerCollector::new().hedge("search", hedge.clone());

    // Six calls deposited by their caller: a budget of three hedges, all sent.
    for _ in 0..6 {
        hedge.hedge_budget().deposit();
    }
    for _ in 0..3 {
        assert_eq!(
            hedge.next_hedge(1, None),
            Next::Retry {
                after: Duration::ZERO
            }
        );
    }
    // Four refused by the spent budget; a call whose attempts are all out is no decision.
    for _ in 0..4 {
        assert_eq!(hedge.next_hedge(1, None), Next::Stop(Stop::Budget));
    }
    assert_eq!(hedge.next_hedge(3, None), Next::Stop(Stop::Exhausted));
    // Six past their call's deadline.
    for _ in 0..6 {
        assert_eq!(
            hedge.next_hedge(1, Some(Duration::ZERO)),
            Next::Stop(Stop::Deadline)
        );
    }
    // The throttle down to half: one refused by it.
    let throttle = hedge.hedge_throttle().unwrap();
    throttle.record_failure();
    throttle.record_failure();
    assert_eq!(hedge.next_hedge(1, None), Next::Stop(Stop::Throttled));
    // Two calls won by a hedge (two attempts cancelled each), one by its first attempt (one
    // cancelled): 2 won, 5 cancelled.
    hedge.count_end(true, 2);
    hedge.count_end(true, 2);
    hedge.count_end(false, 1);
    // Four more calls: ten in all, a budget of five, three spent.
    for _ in 0..4 {
        hedge.hedge_budget().deposit();
    }

    let text = scrape(collector);
    let series = parse(&text);
    let decision = |decision: &str| {
        get(
            &series,
            "circuit_breaker_hedge_decisions_total",
            &[("hedge", "search"), ("decision", decision)],
        )
    };
    assert_eq!(
        [
            "hedged",
            "won",
            "cancelled",
            "budget_denied",
            "throttled",
            "past_deadline"
        ]
        .map(decision),
        [3.0, 2.0, 5.0, 4.0, 1.0, 6.0],
        "{text}"
    );
    assert_eq!(
        get(
            &series,
            "circuit_breaker_hedge_budget_balance",
            &[("hedge", "search")]
        ),
        2.0
    );
    assert!(text.contains("# TYPE circuit_breaker_hedge_decisions counter"));
    assert!(!text.contains("circuit_breaker_retry_decisions"), "{text}");
    assert!(!text.contains("circuit_breaker_retry_budget"), "{text}");
}

/// Two limiters, one over a boxed algorithm (the default `Limiter`), one over a concrete
/// `Aimd`, each driven by hand: their limits, calls in flight and calls turned away.
#[test]
fn limiters_over_any_algorithm_are_scraped() {
    let boxed: Arc<Limiter> = Arc::new(Limiter::new(Box::new(Fixed::new(5))));
    let aimd: Arc<Limiter<Aimd>> =
        Arc::new(Limiter::new(Aimd::new().initial_limit(2).min_limit(1)));
    let collector = BreakerCollector::new()
        .limiter("fixed", Arc::clone(&boxed))
        .limiter("aimd", Arc::clone(&aimd));

    // Fixed at 5: two calls in flight, none turned away.
    let held = [
        boxed.try_acquire(Duration::ZERO),
        boxed.try_acquire(Duration::ZERO),
    ];
    // Aimd at 2: two calls out, four turned away; then the first answers in 5 ms, having
    // started with one of two out (half the limit): the limit grows to 3, one call out.
    let first = aimd.try_acquire(Duration::ZERO).unwrap();
    let second = aimd.try_acquire(Duration::ZERO).unwrap();
    for _ in 0..4 {
        assert!(aimd.try_acquire(Duration::ZERO).is_err());
    }
    assert_eq!(first.success(MS * 5), 3);

    let text = scrape(collector);
    let series = parse(&text);
    let of = |name: &str, limiter: &str| get(&series, name, &[("limiter", limiter)]);
    for (limiter, limit, in_flight, limited) in [("fixed", 5.0, 2.0, 0.0), ("aimd", 3.0, 1.0, 4.0)]
    {
        assert_eq!(
            of("circuit_breaker_limiter_limit", limiter),
            limit,
            "{limiter}"
        );
        assert_eq!(
            of("circuit_breaker_limiter_in_flight", limiter),
            in_flight,
            "{limiter}"
        );
        assert_eq!(
            of("circuit_breaker_limiter_limited_total", limiter),
            limited,
            "{limiter}"
        );
    }
    assert!(text.contains("# TYPE circuit_breaker_limiter_limit gauge"));
    assert!(text.contains("# TYPE circuit_breaker_limiter_limited counter"));
    drop((held, second));
}

/// A limiter whose algorithm panics when read costs the scrape that limiter's series only.
#[test]
fn a_panicking_limit_costs_only_its_limiters_series() {
    #[derive(Debug)]
    struct Broken;
    impl Algorithm for Broken {
        fn limit(&self) -> u32 {
            panic!("limit")
        }
        fn on_sample(&self, _: Sample) -> u32 {
            1
        }
        fn boxed_clone(&self) -> Box<dyn Algorithm> {
            Box::new(Broken)
        }
    }
    let fine = Arc::new(Limiter::new(Fixed::new(7)));
    let text = scrape(
        BreakerCollector::new()
            .limiter("broken", Arc::new(Limiter::new(Broken)))
            .limiter("fine", fine),
    );
    let series = parse(&text);
    assert_eq!(
        get(
            &series,
            "circuit_breaker_limiter_limit",
            &[("limiter", "fine")]
        ),
        7.0
    );
    assert!(!text.contains(r#"limiter="broken""#), "{text}");
}
