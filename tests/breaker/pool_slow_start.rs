//! `Pool::slow_start`: an endpoint that comes back gets a share of the picks that ramps up
//! over the window (Envoy's curve), computed at pick time from its return.

use std::time::Duration;

use lazybreaker::policy::ConsecutiveFailures;
use lazybreaker::pool::{Balance, Pool, SlowStart};
use lazybreaker::{Breaker, ManualClock, State};

const WINDOW: Duration = Duration::from_secs(10);
const PICKS: u32 = 6_000;

fn pool(clock: &ManualClock, slow_start: Option<SlowStart>) -> Pool<&'static str> {
    let pool = Pool::new(|_: &&str| {
        Breaker::builder()
            .policy(ConsecutiveFailures::new(1).unwrap())
            .timeout(Duration::from_secs(1))
    })
    .clock(clock.clone());
    let pool = match slow_start {
        Some(s) => pool.slow_start(s),
        None => pool,
    };
    pool.set(["a", "b", "c"]);
    pool
}

/// The share of `PICKS` picks (each reported at once) that land on `key`.
fn share(pool: &Pool<&'static str>, key: &str) -> f64 {
    let mut hits = 0;
    for _ in 0..PICKS {
        let pick = pool.pick().unwrap();
        if *pick.key() == key {
            hits += 1;
        }
        pick.success();
    }
    f64::from(hits) / f64::from(PICKS)
}

/// Trips `key`'s breaker, waits out its open period and closes it with a probe.
fn trip_and_return(pool: &Pool<&'static str>, clock: &ManualClock, key: &'static str) {
    let breaker = pool.breaker(&key).unwrap();
    breaker.allow().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_millis(1_001));
    breaker.allow().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
}

fn weight(pool: &Pool<&'static str>, key: &str) -> f64 {
    let snapshot = pool.snapshot();
    snapshot
        .endpoints
        .iter()
        .find(|e| e.key == key)
        .unwrap()
        .weight
}

#[test]
fn a_returning_endpoint_ramps_up_over_the_window() {
    let clock = ManualClock::new();
    let pool = pool(&clock, Some(SlowStart::new(WINDOW)));
    // The pool's first endpoints take their share at once.
    assert_eq!(weight(&pool, "a"), 1.0);
    let even = share(&pool, "a");
    assert!((0.28..0.39).contains(&even), "{even}");

    trip_and_return(&pool, &clock, "a");
    assert_eq!(weight(&pool, "a"), 0.1, "the minimum weight at first");
    let cold = share(&pool, "a");
    // A tenth of its third, about 3 %.
    assert!(cold < 0.08, "{cold}");

    clock.advance(WINDOW / 2);
    assert_eq!(weight(&pool, "a"), 0.5);
    let warming = share(&pool, "a");
    assert!(
        warming > cold + 0.05 && warming < even - 0.05,
        "{cold} {warming} {even}"
    );

    clock.advance(WINDOW / 2);
    assert_eq!(weight(&pool, "a"), 1.0);
    let warm = share(&pool, "a");
    assert!((0.28..0.39).contains(&warm), "{warm}");
}

#[test]
fn without_slow_start_a_returning_endpoint_gets_its_share_at_once() {
    let clock = ManualClock::new();
    let pool = pool(&clock, None);
    trip_and_return(&pool, &clock, "a");
    assert_eq!(weight(&pool, "a"), 1.0);
    let back = share(&pool, "a");
    assert!((0.28..0.39).contains(&back), "{back}");
}

#[test]
fn an_endpoint_added_to_a_running_pool_ramps_up() {
    let clock = ManualClock::new();
    let pool = pool(&clock, Some(SlowStart::new(WINDOW).min_weight_percent(0.0)));
    assert!(pool.insert("d"));
    let new = share(&pool, "d");
    // Weight 0 at first: the others' turns only (it is kept when drawn with no other).
    assert!(new < 0.02, "{new}");
    clock.advance(WINDOW);
    let later = share(&pool, "d");
    assert!((0.2..0.3).contains(&later), "{later}");
}

#[test]
fn aggression_bends_the_curve() {
    let (clock, other) = (ManualClock::new(), ManualClock::new());
    let eager = pool(&clock, Some(SlowStart::new(WINDOW).aggression(2.0)));
    let timid = pool(&other, Some(SlowStart::new(WINDOW).aggression(0.5)));
    trip_and_return(&eager, &clock, "a");
    trip_and_return(&timid, &other, "a");
    clock.advance(WINDOW / 4);
    other.advance(WINDOW / 4);
    // (1/4)^(1/2) = 1/2 and (1/4)^2 = 1/16, below the 10 % minimum.
    assert_eq!(weight(&eager, "a"), 0.5);
    assert_eq!(weight(&timid, "a"), 0.1);
}

#[test]
fn round_robin_ramps_too() {
    let clock = ManualClock::new();
    let pool =
        Pool::new(|_: &&str| Breaker::builder().policy(ConsecutiveFailures::new(1).unwrap()))
            .clock(clock.clone())
            .balance(Balance::RoundRobin)
            .slow_start(SlowStart::new(WINDOW));
    pool.set(["a", "b", "c"]);
    assert!(pool.insert("d"));
    let new = share(&pool, "d");
    assert!(new < 0.08, "{new}");
}

#[test]
fn bad_settings_are_refused_naming_the_field() {
    let cases = [
        (SlowStart::new(Duration::ZERO), "slow_start.window"),
        (
            SlowStart::new(WINDOW).aggression(f64::NAN),
            "slow_start.aggression",
        ),
        (
            SlowStart::new(WINDOW).aggression(-1.0),
            "slow_start.aggression",
        ),
        (
            SlowStart::new(WINDOW).aggression(0.0),
            "slow_start.aggression",
        ),
        (
            SlowStart::new(WINDOW).min_weight_percent(150.0),
            "slow_start.min_weight_percent",
        ),
        (
            SlowStart::new(WINDOW).min_weight_percent(f64::NAN),
            "slow_start.min_weight_percent",
        ),
    ];
    for (settings, field) in cases {
        assert_eq!(settings.validate().unwrap_err().field(), field);
        let refused = Pool::new(|_: &&str| Breaker::builder()).try_slow_start(settings);
        assert_eq!(refused.unwrap_err().field(), field);
        // Lenient: no slow start.
        let pool = Pool::new(|_: &&str| Breaker::builder()).slow_start(settings);
        assert!(pool.slow_start_settings().is_none());
    }
}
