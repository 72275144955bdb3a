//! How fast do the built-in policies trip on the same failure pattern?
//!
//! `cargo run --example compare_policies`
//!
//! Each breaker sees 5 000 healthy calls (1 ms each), then one of five failure patterns,
//! and we count the calls after the onset until it trips. Time is a `ManualClock`, so the
//! latency-measuring policies see exact latencies and the run is instant and deterministic.

use std::time::Duration;

use lazybreaker::policy::{
    ConsecutiveFailures, Ema, EmaConfig, FailureCount, FailureRatio, SlowCalls, TripPolicy,
};
use lazybreaker::{Breaker, ManualClock, State};

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
    Ok(())
}
