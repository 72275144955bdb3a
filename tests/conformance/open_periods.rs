//! Open periods and the ways back from them: every policy starts afresh on every way back to
//! closed, no path opens a breaker longer than its `max_open_duration`, and an open period of
//! zero adopted at clock zero is half-open at once. (Items 1, 2 and 9 of the third
//! reliability round, each test named after its item: each failed on the code before its
//! fix; expected values come from the documented semantics.)

use std::time::Duration;

use lazybreaker::policy::{
    ConsecutiveFailures, Ema, EmaConfig, FailureCount, FailureRatio, SlowCalls, TripPolicy,
};
use lazybreaker::{Breaker, ConfigError, ManualClock, Rejected, State};

const MS: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_millis(50);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How long the open period has left, as the next call is told (the breaker must be open):
/// exactly, to the nanosecond.
fn retry_after<P: TripPolicy>(b: &Breaker<P>) -> Duration {
    match b.allow() {
        Err(Rejected::Open { retry_after }) => retry_after,
        other => panic!("open: {:?}", other.map(|_| ())),
    }
}

/// One call that takes `latency` on `clock` and ends as `ok` says.
fn call<P: TripPolicy>(b: &Breaker<P>, clock: &ManualClock, latency: Duration, ok: bool) {
    if let Ok(permit) = b.allow() {
        clock.advance(latency);
        if ok {
            permit.success()
        } else {
            permit.failure()
        }
    }
}

/// The ways back to closed from open that skip or shorten half-open.
#[derive(Debug, Clone, Copy)]
enum WayBack {
    /// The open period passes, and the probe succeeds.
    Probe,
    Release,
    ForceClosed,
    AdoptClosed,
    /// Half-open first, then released before a probe is sent.
    ReleaseFromHalfOpen,
}

const WAYS_BACK: [WayBack; 5] = [
    WayBack::Probe,
    WayBack::Release,
    WayBack::ForceClosed,
    WayBack::AdoptClosed,
    WayBack::ReleaseFromHalfOpen,
];

fn go_back<P: TripPolicy>(b: &Breaker<P>, clock: &ManualClock, way: WayBack) {
    match way {
        WayBack::Probe => {
            clock.advance(Duration::from_secs(3600));
            call(b, clock, MS, true);
        }
        WayBack::Release => b.release(),
        WayBack::ForceClosed => b.force_closed(),
        WayBack::AdoptClosed => b.adopt_closed(),
        WayBack::ReleaseFromHalfOpen => {
            clock.advance(Duration::from_secs(3600));
            assert_eq!(b.state(), State::HalfOpen);
            b.release();
        }
    }
    assert_eq!(b.state(), State::Closed, "{way:?}: closed again");
}

/// The first finding: brpc's EMA kept the outage's error cost after a close that skipped
/// half-open, so the first success re-tripped the breaker. Every built-in policy must start
/// afresh on every way back to closed: a success right after stays closed, and so do a few
/// failures fewer than the policy needs from a fresh start.
#[test]
fn item_1_every_policy_starts_afresh_on_every_way_back_to_closed() {
    type Make = fn() -> Box<dyn TripPolicy>;
    fn ema() -> Box<dyn TripPolicy> {
        let config = EmaConfig {
            short_window_size: 30,
            long_window_size: 60,
            min_isolation: ms(5),
            max_isolation: ms(80),
            ..EmaConfig::default()
        };
        Box::new(Ema::new(config).unwrap())
    }
    let policies: [(&str, Make, u32); 7] = [
        (
            "consecutive",
            || Box::new(ConsecutiveFailures::new(3).unwrap()),
            2,
        ),
        ("ratio", || Box::new(FailureRatio::new(0.5, 4).unwrap()), 1),
        ("count", || Box::new(FailureCount::new(3, 1).unwrap()), 2),
        (
            "slow",
            || Box::new(SlowCalls::new(ms(100), 0.5, 4).unwrap()),
            1,
        ),
        ("ema", ema, 0),
        (
            "any_of",
            || Box::new(ConsecutiveFailures::new(3).unwrap().or(ema())),
            0,
        ),
        (
            "backoff",
            || {
                let p = ConsecutiveFailures::new(3).unwrap();
                Box::new(p.with_backoff(ms(10), ms(80)).unwrap())
            },
            2,
        ),
    ];
    for (name, make, fresh_failures) in policies {
        for way in WAYS_BACK {
            let row = format!("{name} / {way:?}");
            let clock = ManualClock::new();
            let b = Breaker::builder()
                .policy(make())
                .timeout(TIMEOUT)
                .clock(clock.clone())
                .build();
            for _ in 0..500 {
                call(&b, &clock, MS, true);
            }
            for _ in 0..1000 {
                if b.state() != State::Closed {
                    break;
                }
                call(&b, &clock, ms(150), false); // slow, for the slow-call policy
            }
            assert_eq!(b.state(), State::Open, "{row}: tripped");
            go_back(&b, &clock, way);
            if matches!(way, WayBack::ForceClosed) {
                b.release(); // back to normal, closed
            }
            call(&b, &clock, MS, true);
            assert_eq!(b.state(), State::Closed, "{row}: a success after closing");
            for _ in 0..fresh_failures {
                call(&b, &clock, MS, false);
            }
            assert_eq!(
                b.state(),
                State::Closed,
                "{row}: {fresh_failures} failures after closing"
            );
        }
    }
}

/// The second finding: open periods were unbounded. No path opens a breaker longer than its
/// `max_open_duration`: a policy's own duration, `trip_for`, a permit's `failure_open_for`,
/// an adopted decision.
#[test]
fn item_2_no_open_period_outlasts_the_max_open_duration() {
    let cap = Duration::from_secs(300);
    let decade = Duration::from_secs(10 * 365 * 24 * 3600);
    let clock = ManualClock::new();
    let policy = ConsecutiveFailures::new(1)
        .unwrap()
        .with_backoff(Duration::from_secs(200), decade)
        .unwrap();
    let make = || {
        Breaker::builder()
            .policy(policy.clone())
            .max_open_duration(cap)
            .clock(clock.clone())
            .build()
    };

    let b = make();
    b.trip_for(decade);
    assert_eq!(retry_after(&b), cap, "trip_for");
    b.trip_for(decade); // an open period is extended, never past the cap
    assert_eq!(retry_after(&b), cap, "trip_for again");

    let b = make();
    b.allow().unwrap().failure_open_for(decade);
    assert_eq!(retry_after(&b), cap, "failure_open_for");

    let b = make();
    b.adopt_open(decade);
    assert_eq!(retry_after(&b), cap, "adopt_open");

    // The policy's own backoff: 200 s, then 400 s cut to 300 s.
    let b = make();
    call(&b, &clock, MS, false);
    assert_eq!(
        retry_after(&b),
        Duration::from_secs(200),
        "first open period"
    );
    clock.advance(Duration::from_secs(201));
    call(&b, &clock, MS, false); // the probe fails
    assert_eq!(retry_after(&b), cap, "the backoff's second period");

    // By default: one hour, or the timeout if longer.
    let hour = Duration::from_secs(3600);
    let b = Breaker::builder().clock(clock.clone()).build();
    b.trip_for(decade);
    assert_eq!(retry_after(&b), hour, "the default");
    let b = Breaker::builder()
        .timeout(2 * hour)
        .ready_to_trip(|c| c.consecutive_failures >= 1)
        .clock(clock.clone())
        .build();
    call(&b, &clock, MS, false);
    assert_eq!(retry_after(&b), 2 * hour, "a timeout longer than an hour");
    b.trip_for(decade);
    assert_eq!(retry_after(&b), 2 * hour, "capped at the timeout");

    // A cap shorter than the timeout: the strict reading refuses it, naming the field.
    let err: ConfigError = Breaker::builder()
        .timeout(Duration::from_secs(60))
        .max_open_duration(Duration::from_secs(30))
        .build_strict()
        .unwrap_err();
    assert_eq!(err.field(), "max_open_duration");
    assert_eq!(
        err.to_string(),
        "invalid `max_open_duration` = 30s: must not be shorter than `timeout`"
    );
}

/// The ninth finding: `adopt_open(Duration::ZERO)` at clock reading 0 stayed open for a
/// nanosecond, although the fleet is half-open already.
#[test]
fn item_9_adopt_open_zero_at_clock_zero_is_half_open_at_once() {
    let clock = ManualClock::new(); // reads zero
    let b = Breaker::builder().clock(clock.clone()).build();
    b.adopt_open(Duration::ZERO);
    assert_eq!(b.state(), State::HalfOpen);
    assert!(
        b.allow().is_ok(),
        "the next call, at this instant, is a probe"
    );
}
