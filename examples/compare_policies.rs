//! How fast do the built-in policies trip on the same failure pattern?
//!
//! `cargo run --example compare_policies`
//!
//! Each breaker sees 5 000 healthy calls (1 ms each), then one of five failure patterns,
//! and we count the calls after the onset until it trips. Time is a `ManualClock`, so the
//! latency-measuring policies see exact latencies and the run is instant and deterministic.
//!
//! Then an overload, which no breaker should trip on: a dependency that answers 40 % of its
//! calls with 503 for a minute. Throttles (Google SRE's adaptive throttling) with several
//! `k` shed in proportion: how much each sheds during the minute, and how fast it stops
//! once the dependency recovers.

use std::time::Duration;

use lazybreaker::policy::{
    ConsecutiveFailures, Ema, EmaConfig, FailureCount, FailureRatio, SlowCalls, TripPolicy,
};
use lazybreaker::throttle::Throttle;
use lazybreaker::{Breaker, ManualClock, Rejected, State};

/// One call's result and latency.
#[derive(Clone, Copy)]
struct Call {
    ok: bool,
    latency: Duration,
}

struct Pattern {
    name: &'static str,
    call: fn(u64) -> Call,
}

const MS: Duration = Duration::from_millis(1);
/// The closed-state count window of every breaker here.
const WINDOW: Duration = Duration::from_secs(10);

fn patterns() -> [Pattern; 5] {
    [
        Pattern {
            name: "timeouts: every call fails after 5 ms",
            call: |_| Call {
                ok: false,
                latency: 5 * MS,
            },
        },
        Pattern {
            name: "fast errors: every call refused in 100 µs",
            call: |_| Call {
                ok: false,
                latency: Duration::from_micros(100),
            },
        },
        Pattern {
            name: "degraded: 1 call in 4 fails, at 2 ms",
            // A fixed pseudo-random pick: the same for every policy.
            call: |i| Call {
                ok: (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) >= 2,
                latency: 2 * MS,
            },
        },
        Pattern {
            name: "slow: every call succeeds, in 2 s",
            call: |_| Call {
                ok: true,
                latency: 2_000 * MS,
            },
        },
        Pattern {
            name: "blip: 1 call in 500 fails, 100 µs each",
            // 0.2% of errors at 10 000 calls/s: a healthy dependency's noise.
            call: |i| Call {
                ok: i % 500 != 0,
                latency: Duration::from_micros(100),
            },
        },
    ]
}

/// Calls after the onset until `breaker` trips, or `None` within `limit` calls.
fn calls_to_trip(
    breaker: &Breaker<impl TripPolicy>,
    clock: &ManualClock,
    p: &Pattern,
) -> Option<u64> {
    for _ in 0..5_000 {
        let permit = breaker.allow().expect("healthy traffic is admitted");
        clock.advance(MS);
        permit.success();
    }
    for i in 1..=20_000 {
        let call = (p.call)(i);
        let permit = breaker.allow().ok()?;
        clock.advance(call.latency);
        if call.ok {
            permit.success()
        } else {
            permit.failure()
        }
        if breaker.state() == State::Open {
            return Some(i);
        }
    }
    None
}

fn run(policy: impl TripPolicy, p: &Pattern) -> String {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(WINDOW)
        .policy(policy)
        .clock(clock.clone())
        .build();
    match calls_to_trip(&breaker, &clock, p) {
        Some(n) => format!("{n:>8}"),
        None => format!("{:>8}", "never"),
    }
}

/// What a throttle did to the overload: calls shed during the minute (of those sent), calls
/// shed after it, and the last one shed, in seconds after the recovery.
struct Shed {
    during: u64,
    sent_during: u64,
    after: u64,
    last_after: Option<f64>,
}

/// 100 calls a second: 30 s healthy, 60 s of overload (40 % answered 503), 60 s healthy;
/// a rolling 10 s window that no overload trips (80 % failures over at least 100 calls).
fn overload(throttle: Throttle) -> Result<Shed, lazybreaker::ConfigError> {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .interval(WINDOW)
        .bucket_period(Duration::from_secs(1))
        .policy(FailureRatio::new(0.8, 100)?)
        .throttle(throttle)
        .clock(clock.clone())
        .build();
    let (start, end) = (3_000u64, 9_000u64);
    let mut shed = Shed {
        during: 0,
        sent_during: 0,
        after: 0,
        last_after: None,
    };
    for i in 0..15_000u64 {
        clock.advance(10 * MS);
        let overloaded = (start..end).contains(&i);
        match breaker.allow() {
            Ok(permit) => {
                // The same fixed pseudo-random 40 % for every throttle.
                let refused = overloaded && (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54) % 10 < 4;
                if refused {
                    permit.failure();
                } else {
                    permit.success();
                }
            }
            Err(Rejected::Throttled { .. }) if overloaded => shed.during += 1,
            Err(Rejected::Throttled { .. }) if i >= end => {
                shed.after += 1;
                shed.last_after = Some((i - end) as f64 / 100.0);
            }
            Err(_) => {}
        }
        shed.sent_during += u64::from(overloaded);
    }
    assert_eq!(breaker.totals().opened, 0, "an overload trips nothing here");
    Ok(shed)
}

fn main() -> Result<(), lazybreaker::ConfigError> {
    let consecutive = || ConsecutiveFailures::new(6);
    let ratio = || FailureRatio::new(0.2, 100);
    let count = || FailureCount::new(5, 100);
    let slow = || SlowCalls::new(Duration::from_secs(1), 0.5, 5);
    let ema = || Ema::new(EmaConfig::default());
    println!(
        "calls after the onset until the breaker trips (closed-state window {} s; \"never\": not within 20 000 calls)\n",
        WINDOW.as_secs()
    );
    println!(
        "{:<42}{:>11}{:>10}{:>10}{:>11}{:>9}{:>12}",
        "pattern", "6 in a row", "20%/100", "5 of 100", "slow 1 s", "brpc EMA", "20% | slow"
    );
    for p in patterns() {
        println!(
            "{:<42}{:>11}{:>10}{:>10}{:>11}{:>9}{:>12}",
            p.name,
            run(consecutive()?, &p),
            run(ratio()?, &p),
            run(count()?, &p),
            run(slow()?, &p),
            run(ema()?, &p),
            run(ratio()?.or(slow()?), &p),
        );
    }
    println!(
        "\nColumns: 6 consecutive failures; a 20% failure ratio over at least 100 calls; 5 failures\n\
         among at least 100 calls (Sentinel's ErrorCount); half of the calls slower than 1 s over\n\
         at least 5 (Sentinel's SlowRequestRatio); brpc's EMA; the ratio or the slow calls.\n\
         The EMA weighs each failure by its latency against the average success latency: slow\n\
         failures (timeouts) add up fast, fast failures barely count. Only the slow-call policy\n\
         sees a dependency that slows down without failing; an absolute count trips on a blip of\n\
         errors at high traffic, where a ratio does not. Counts clear with each window, so a run\n\
         can straddle a reset; `a.or(b)` trips on whichever comes first."
    );
    println!(
        "\nan overload: 40 % of calls answered 503 for 60 s, 100 calls/s, a rolling 10 s window\n"
    );
    println!(
        "{:<34}{:>14}{:>16}{:>22}",
        "throttle", "shed during", "shed after", "last shed after"
    );
    let throttles = [
        ("k = 1.1", Throttle::new(1.1)?),
        ("k = 1.5", Throttle::new(1.5)?),
        ("k = 2 (the book's)", Throttle::new(2.0)?),
        (
            "k = 1.1, throttled calls counted",
            Throttle::new(1.1)?.count_throttled(true),
        ),
    ];
    for (name, throttle) in throttles {
        let shed = overload(throttle)?;
        println!(
            "{:<34}{:>13.1}%{:>16}{:>22}",
            name,
            100.0 * shed.during as f64 / shed.sent_during as f64,
            shed.after,
            shed.last_after
                .map_or_else(|| "-".to_owned(), |s| format!("{s:.2} s")),
        );
    }
    println!(
        "\nA throttle with multiplier k sends about k times what the dependency accepts: with 60 %\n\
         accepted, k = 1.1 sheds about a third, k = 1.5 about a tenth, and k = 2 nothing (it waits\n\
         for accepts below half). Counting the throttled calls as requests (the book's way) sheds\n\
         more, and here never stops: each throttled call is a request never accepted, so p holds\n\
         itself at the cap long after the dependency recovered. Leave `count_throttled` off."
    );
    Ok(())
}
