//! Jitter (`Builder::jitter`, `Pool::jitter`) on a `ManualClock`: no spread keeps the open
//! period exact; a spread keeps every period within `[period × (1 − fraction), period]` and
//! breakers tripped together apart; the draws replay for the same seed and name; the
//! backoff's doubling stays an upper bound; a failed check's re-arm spreads; the periods
//! asked for exactly are not spread; a pool spreads its endpoints and its ejections.
//!
//! Every expected value is a bound or a count derived from the settings, not a drawn time.

use std::collections::BTreeSet;
use std::task::Poll;
use std::time::Duration;

use crate::checks::poll_once;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{Balance, OutlierDetection, Pool};
use lazybreaker::{Breaker, Error, ManualClock, Rejected, State};

const NS: Duration = Duration::from_nanos(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker named `name` that trips on its first failure, open for `timeout`, spread by
/// `jitter` (none: the builder's default).
fn breaker(
    name: &str,
    timeout: Duration,
    jitter: Option<f64>,
    clock: &ManualClock,
) -> Breaker<ConsecutiveFailures> {
    let builder = Breaker::builder()
        .name(name)
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(timeout)
        .clock(clock.clone());
    match jitter {
        Some(fraction) => builder.jitter(fraction),
        None => builder,
    }
    .build()
}

/// How long the open breaker stays open from now, as its rejection says.
fn open_for<P: lazybreaker::policy::TripPolicy>(breaker: &Breaker<P>) -> Duration {
    match breaker.allow() {
        Err(Rejected::Open { retry_after }) => retry_after,
        other => panic!("open: {other:?}"),
    }
}

#[test]
fn no_jitter_keeps_the_open_period_exact() {
    for jitter in [None, Some(0.0)] {
        let clock = ManualClock::new();
        let b = breaker("exact", secs(10), jitter, &clock);
        b.allow().unwrap().failure();
        assert_eq!(open_for(&b), secs(10), "{jitter:?}");
        clock.advance(secs(10) - NS);
        assert_eq!(
            b.state(),
            State::Open,
            "{jitter:?}: at the timeout less 1 ns"
        );
        clock.advance(NS);
        assert_eq!(b.state(), State::Open, "{jitter:?}: at the timeout");
        clock.advance(NS);
        assert_eq!(b.state(), State::HalfOpen, "{jitter:?}: strictly after");
    }
}

#[test]
fn breakers_tripped_together_come_back_apart_within_the_bounds() {
    let timeout = secs(1);
    let clock = ManualClock::new();
    let breakers: Vec<_> = (0..50)
        .map(|i| breaker(&format!("replica-{i}"), timeout, Some(0.5), &clock))
        .collect();
    for b in &breakers {
        b.allow().unwrap().failure(); // one outage, one instant
    }
    let periods: Vec<Duration> = breakers.iter().map(open_for).collect();
    assert!(
        periods.iter().all(|p| (timeout / 2..=timeout).contains(p)),
        "{periods:?}"
    );
    let distinct: BTreeSet<Duration> = periods.iter().copied().collect();
    assert!(distinct.len() >= 20, "{} distinct", distinct.len());
    // Each goes half-open strictly after its own period, and not before: at every instant
    // a period ends and just after, each breaker is half-open exactly when its period has
    // ended.
    let mut elapsed = Duration::ZERO;
    for end in distinct {
        for at in [end, end + NS] {
            clock.advance(at - elapsed);
            elapsed = at;
            for (b, period) in breakers.iter().zip(&periods) {
                let expected = if *period < at {
                    State::HalfOpen
                } else {
                    State::Open
                };
                assert_eq!(b.state(), expected, "{} at {at:?}", b.name());
            }
        }
    }
}

/// The open periods of a breaker made by `make` over `trips` rounds of trip, failed probe,
/// recovery.
fn sequence(make: impl Fn(&ManualClock) -> Breaker<ConsecutiveFailures>) -> Vec<Duration> {
    let clock = ManualClock::new();
    let b = make(&clock);
    let mut periods = Vec::new();
    for _ in 0..5 {
        b.allow().unwrap().failure(); // a trip
        periods.push(open_for(&b));
        clock.advance(*periods.last().unwrap() + NS);
        b.allow().unwrap().failure(); // a failed probe
        periods.push(open_for(&b));
        clock.advance(*periods.last().unwrap() + NS);
        b.allow().unwrap().success(); // recovered
        assert_eq!(b.state(), State::Closed);
    }
    periods
}

#[test]
fn the_same_seed_and_name_replay_the_same_periods() {
    let named =
        |name: &'static str| move |clock: &ManualClock| breaker(name, secs(10), Some(0.5), clock);
    let seeded = |name: &'static str, seed: u64| {
        move |clock: &ManualClock| {
            Breaker::builder()
                .name(name)
                .policy(ConsecutiveFailures::new(1).unwrap())
                .timeout(secs(10))
                .jitter(0.5)
                .jitter_seed(seed)
                .clock(clock.clone())
                .build()
        }
    };
    let a = sequence(named("payments"));
    assert_eq!(a.len(), 10);
    assert!(a.iter().all(|p| (secs(5)..=secs(10)).contains(p)), "{a:?}");
    assert!(
        a.iter().any(|p| *p != a[0]),
        "each period drawn anew: {a:?}"
    );
    assert_eq!(sequence(named("payments")), a, "same name, same periods");
    assert_ne!(sequence(named("search")), a, "another name, other periods");
    let seven = sequence(seeded("payments", 7));
    assert_eq!(sequence(seeded("payments", 7)), seven);
    assert_eq!(
        sequence(seeded("search", 7)),
        seven,
        "the seed, not the name"
    );
    assert_ne!(sequence(seeded("payments", 8)), seven, "another seed");
    assert_ne!(seven, a);
}

#[test]
fn the_backoff_stays_an_upper_bound() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .name("flapping")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(ms(100))
        .backoff(secs(30))
        .jitter(0.5)
        .clock(clock.clone())
        .build();
    b.allow().unwrap().failure();
    let mut longest = ms(100);
    let mut shorter = 0;
    for _ in 0..12 {
        let period = open_for(&b);
        assert!(
            (longest / 2..=longest).contains(&period),
            "{period:?} for a backed-off {longest:?}"
        );
        shorter += usize::from(period < longest);
        clock.advance(period + NS);
        b.allow().unwrap().failure(); // the probe fails: the period doubles
        longest = (longest * 2).min(secs(30));
    }
    assert_eq!(longest, secs(30), "the cap was reached");
    assert!(
        shorter > 6,
        "spread below the backoff's length: {shorter} of 12"
    );
}

#[test]
fn a_failed_checks_rearm_spreads_the_cadence() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .name("checked")
        .policy(ConsecutiveFailures::new(1).unwrap())
        .timeout(secs(10))
        .jitter(0.5)
        .clock(clock.clone())
        .health_check(|| std::future::ready(false))
        .build();
    b.allow().unwrap().failure();
    let mut period = open_for(&b);
    let mut periods = vec![period];
    for _ in 0..10 {
        clock.advance(period + NS);
        let mut call = Box::pin(b.execute_async(|| std::future::ready(Ok::<_, ()>(()))));
        period = match poll_once(&mut call) {
            Poll::Ready(Err(Error::Rejected(Rejected::Open { retry_after }))) => retry_after,
            other => panic!("the check fails: {other:?}"),
        };
        periods.push(period);
    }
    assert_eq!(b.totals().health_checks_failed, 10);
    assert!(
        periods.iter().all(|p| (secs(5)..=secs(10)).contains(p)),
        "{periods:?}"
    );
    let distinct: BTreeSet<_> = periods.iter().collect();
    assert!(distinct.len() > 5, "{periods:?}");
}

#[test]
fn periods_asked_for_exactly_are_not_spread() {
    let clock = ManualClock::new();
    let b = breaker("asked", secs(10), Some(1.0), &clock);
    b.trip_for(secs(7));
    assert_eq!(open_for(&b), secs(7), "a manual trip");
    clock.advance(secs(7) + NS);
    b.allow().unwrap().failure_open_for(secs(20));
    assert_eq!(open_for(&b), secs(20), "a dependency's Retry-After");
}

#[test]
fn a_bad_fraction_is_read_leniently_by_build_and_refused_by_build_strict() {
    for bad in [f64::NAN, -0.5, 1.5, f64::INFINITY] {
        let clock = ManualClock::new();
        // `build` never panics on it: a NaN is none, the rest clamped into [0, 1].
        let b = breaker("lenient", secs(10), Some(bad), &clock);
        b.allow().unwrap().failure();
        assert!(open_for(&b) <= secs(10), "{bad}");
        let err = Breaker::builder()
            .name("strict")
            .jitter(bad)
            .build_strict()
            .unwrap_err();
        assert_eq!(err.field(), "jitter", "{bad}");
        assert_eq!(err.breaker(), Some("strict"));
        assert_eq!(err.reason(), "must be a number within [0, 1]");
    }
    for good in [0.0, 0.5, 1.0] {
        assert!(Breaker::builder().jitter(good).build_strict().is_ok());
    }
}

/// A pool of endpoints `keys` whose breakers trip on their first failure, open for the
/// pool's first period (100 ms).
fn tripping_pool(clock: &ManualClock) -> Pool<&'static str> {
    Pool::new(|_: &&str| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
        .clock(clock.clone())
        .max_isolated(1.0)
}

/// The instants (from now) at which `a` and `b`, tripped now, are half-open again.
fn revivals(pool: &Pool<&'static str>) -> [Duration; 2] {
    for key in ["a", "b"] {
        pool.breaker(&key).unwrap().allow().unwrap().failure();
    }
    ["a", "b"].map(|key| open_for(&pool.breaker(&key).unwrap()))
}

#[test]
fn a_pool_spreads_its_endpoints_unless_told_not_to() {
    // Spread: apart, within the pool's first period and its last tenth.
    let clock = ManualClock::new();
    let pool = tripping_pool(&clock).jitter(0.1);
    pool.set(["a", "b"]);
    let [a, b] = revivals(&pool);
    assert_ne!(a, b);
    assert!(
        [a, b].iter().all(|d| (ms(90)..=ms(100)).contains(d)),
        "{a:?} {b:?}"
    );
    // Each half-open exactly at its own time.
    let (first, second) = if a < b { ("a", "b") } else { ("b", "a") };
    clock.advance(a.min(b) + NS);
    let state = |key: &'static str| pool.breaker(&key).unwrap().state();
    assert_eq!(
        (state(first), state(second)),
        (State::HalfOpen, State::Open)
    );
    clock.advance(a.max(b) - a.min(b));
    assert_eq!(state(second), State::HalfOpen);

    // The default, and an explicit zero: together, exactly.
    for pool in [tripping_pool(&clock), tripping_pool(&clock).jitter(0.0)] {
        pool.set(["a", "b"]);
        assert_eq!(revivals(&pool), [ms(100), ms(100)]);
    }
    // An endpoint's own jitter wins over the pool's.
    let pool = Pool::new(|_: &&str| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .jitter(0.0)
    })
    .clock(clock.clone())
    .max_isolated(1.0)
    .jitter(1.0);
    pool.set(["a", "b"]);
    assert_eq!(revivals(&pool), [ms(100), ms(100)]);
}

#[test]
fn a_pool_refuses_a_bad_fraction_when_asked_to() {
    for bad in [f64::NAN, -0.1, 1.01] {
        let err = Pool::new(|_: &String| Breaker::builder())
            .try_jitter(bad)
            .unwrap_err();
        assert_eq!(err.field(), "jitter", "{bad}");
    }
    assert!(Pool::new(|_: &String| Breaker::builder())
        .try_jitter(0.25)
        .is_ok());
}

/// The ejection times of the endpoints `0..5` (of ten, the other five healthy) that fail
/// every call, ejected by one evaluation, with the pool spread by `jitter`.
fn ejections(jitter: f64) -> Vec<Duration> {
    let clock = ManualClock::new();
    let pool =
        Pool::new(|_: &u32| Breaker::builder().policy(ConsecutiveFailures::new(1_000).unwrap()))
            .clock(clock.clone())
            .balance(Balance::RoundRobin)
            .max_isolated(0.5)
            .jitter(jitter)
            .outlier_detection(
                OutlierDetection::new()
                    .interval(secs(10))
                    .base_ejection(secs(30))
                    .failure_percentage(50, 5, 50),
            );
    pool.set(0..10);
    // The first pick starts the first interval; then 60 calls to each endpoint.
    for _ in 0..600 {
        let pick = pool.pick().unwrap();
        if *pick.key() < 5 {
            pick.failure();
        } else {
            pick.success();
        }
    }
    clock.advance(secs(10));
    pool.pick().unwrap().success(); // judges the interval
    assert_eq!(pool.stats().ejected_failure_percentage, 5);
    (0..5)
        .map(|k| open_for(&pool.breaker(&k).unwrap()))
        .collect()
}

#[test]
fn a_pools_ejections_spread() {
    assert_eq!(ejections(0.0), vec![secs(30); 5], "exact without a spread");
    let spread = ejections(0.5);
    assert!(
        spread.iter().all(|d| (secs(15)..=secs(30)).contains(d)),
        "{spread:?}"
    );
    let distinct: BTreeSet<_> = spread.iter().collect();
    assert_eq!(distinct.len(), 5, "{spread:?}");
    assert_eq!(ejections(0.5), spread, "replayable");
}

#[test]
fn a_pool_spreads_the_open_periods_of_its_hung_endpoints() {
    let clock = ManualClock::new();
    let pool = Pool::new(|_: &&str| Breaker::builder())
        .clock(clock.clone())
        .deadline(ms(300))
        .balance(Balance::RoundRobin) // one hanging call each
        .jitter(0.5);
    pool.set(["a", "b", "c"]);
    let hanging: Vec<_> = (0..3).map(|_| pool.pick().unwrap()).collect();
    clock.advance(ms(300));
    // A deadline later, nothing back: all three out, each for its breaker's own first
    // period (the pool's 100 ms), spread.
    assert!(matches!(pool.pick(), Err(Rejected::NoEndpoint { .. })));
    assert_eq!(pool.stats().ejected_hung, 3);
    let periods: Vec<Duration> = ["a", "b", "c"]
        .iter()
        .map(|key| open_for(&pool.breaker(key).unwrap()))
        .collect();
    assert!(
        periods.iter().all(|d| (ms(50)..=ms(100)).contains(d)),
        "{periods:?}"
    );
    let distinct: BTreeSet<_> = periods.iter().collect();
    assert_eq!(distinct.len(), 3, "{periods:?}");
    drop(hanging);
}
