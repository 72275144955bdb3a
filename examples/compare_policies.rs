//! How fast do the built-in policies trip on the same failure pattern?
//!
//! `cargo run --example compare_policies`
//!
//! Each breaker sees 5 000 healthy calls (1 ms each), then one of three failure patterns,
//! and we count the calls after the onset until it trips. Time is a `ManualClock`, so the
//! EMA policy sees exact latencies and the run is instant and deterministic.

use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, Ema, EmaConfig, FailureRatio, TripPolicy};
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

fn patterns() -> [Pattern; 3] {
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
        .interval(Duration::from_secs(1))
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
    let ema = || Ema::new(EmaConfig::default());
    println!("calls after the onset until the breaker trips (closed-state window 1 s; \"never\": not within 20 000 calls)\n");
    println!(
        "{:<44}{:>12}{:>14}{:>10}{:>18}",
        "pattern", "6 in a row", "20% (min 100)", "brpc EMA", "6 in a row | EMA"
    );
    for p in patterns() {
        println!(
            "{:<44}{:>12}{:>14}{:>10}{:>18}",
            p.name,
            run(consecutive()?, &p),
            run(ratio()?, &p),
            run(ema()?, &p),
            run(consecutive()?.or(ema()?), &p),
        );
    }
    println!(
        "\nThe EMA weighs each failure by its latency against the average success latency: slow\n\
         failures (timeouts) add up fast, fast failures barely count, and a steady error rate\n\
         trips it once it exceeds the window's budget (5% over 3000 calls, 10% over 1500).\n\
         Counting policies ignore latency (and their counts clear with each 1 s window, so a run\n\
         can straddle a reset). `a.or(b)` trips on whichever comes first."
    );
    Ok(())
}
