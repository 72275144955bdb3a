//! brpc's EMA policy inside a `Breaker`: the breaker trips on exactly the call brpc reports
//! unhealthy and stays open for exactly brpc's isolation duration; backoff, probation and
//! composition.

use crate::support;

use std::time::Duration;

use lazybreaker::policy::{
    ConsecutiveFailures, Ema, EmaConfig, EmaWindowState, Outcome, TripPolicy,
};
use lazybreaker::{Breaker, ManualClock, Rejected, State};
use support::brpc::{Scenario, Step, WindowState};

const NS: Duration = Duration::from_nanos(1);

/// Checks that `breaker` is open now and stays open for exactly `isolation`.
fn assert_open_for(breaker: &Breaker<impl TripPolicy>, clock: &ManualClock, isolation: Duration) {
    match breaker.allow() {
        Err(Rejected::Open { retry_after }) => assert_eq!(retry_after, isolation),
        other => panic!("expected open, got {other:?}"),
    }
    clock.advance(isolation);
    assert_eq!(
        breaker.state(),
        State::Open,
        "reopened before {isolation:?}"
    );
    clock.advance(NS);
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "still open after {isolation:?}"
    );
}

enum Replayed {
    /// Tripped where brpc said unhealthy, and stayed open as long as brpc isolates (or, where
    /// brpc's isolation was doubled by its reset at time zero, for `min_isolation`).
    Tripped { reset_at_zero: bool },
    /// brpc never said unhealthy, and the breaker never tripped.
    NeverTripped,
    /// The scenario calls `reset` or `mark_broken` before its first break: no breaker op.
    NotApplicable,
}

/// Drives a `Breaker<Ema>` through the scenario's calls, each with its latency measured on the
/// breaker's clock, up to brpc's first unhealthy verdict.
fn replay(scenario: &Scenario) -> Result<Replayed, String> {
    if let Some(Step::Reset | Step::MarkBroken { .. }) = scenario.steps.iter().find(|s| {
        matches!(s, Step::Reset | Step::MarkBroken { .. })
            || matches!(
                s,
                Step::Call {
                    expect_healthy: false,
                    ..
                }
            )
    }) {
        return Ok(Replayed::NotApplicable);
    }
    let config = scenario.flags.config();
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(Ema::new(config).map_err(|e| e.to_string())?)
        .clock(clock.clone())
        .build();
    for (i, step) in scenario.steps.iter().enumerate() {
        match *step {
            Step::AdvanceMs { ms } => clock.advance(Duration::from_millis(ms)),
            Step::Call {
                error,
                latency_us,
                expect_healthy,
                expect_isolation_ms,
                ..
            } => {
                let permit = breaker
                    .allow()
                    .map_err(|e| format!("step {i}: rejected while brpc was healthy: {e}"))?;
                clock.advance(Duration::from_micros(latency_us));
                permit.record(error.outcome());
                let state = breaker.state();
                if expect_healthy {
                    if state != State::Closed {
                        return Err(format!("step {i}: {state} where brpc is healthy"));
                    }
                    continue;
                }
                if state != State::Open {
                    return Err(format!("step {i}: {state} where brpc breaks"));
                }
                // brpc's recorder counts a revival at time zero, so a first break within
                // `max_isolation` of zero doubles its isolation (up to `max_isolation`); the
                // policy starts as never
                // revived (as brpc does on a real monotonic clock, far from zero), so its first
                // break isolates for `min_isolation`. Everywhere else the vector's figure must
                // hold exactly.
                let brpc = Duration::from_millis(expect_isolation_ms.expect("a break carries it"));
                let reset_at_zero = brpc != config.min_isolation;
                if reset_at_zero && brpc != (config.min_isolation * 2).min(config.max_isolation) {
                    return Err(format!("step {i}: brpc isolates {brpc:?}: not explained"));
                }
                assert_open_for(
                    &breaker,
                    &clock,
                    if reset_at_zero {
                        config.min_isolation
                    } else {
                        brpc
                    },
                );
                return Ok(Replayed::Tripped { reset_at_zero });
            }
            Step::Inspect(ref want) => {
                // The windows as brpc has them: the successes were recorded on the breaker's
                // lock-free lane, the failures under its lock.
                let window = |w: EmaWindowState| WindowState {
                    ema_latency: w.ema_latency_us,
                    ema_error_cost: w.ema_error_cost_us,
                    init_sample_count: w.initial_samples,
                    init_error_count: w.initial_errors,
                };
                let got = breaker.inspect_policy(|p| {
                    (
                        window(p.recorder().long_window()),
                        window(p.recorder().short_window()),
                    )
                });
                if got != (want.long, want.short) {
                    return Err(format!(
                        "step {i}: windows {got:?}, brpc {:?}",
                        (want.long, want.short)
                    ));
                }
            }
            Step::Reset | Step::MarkBroken { .. } => unreachable!("filtered out above"),
        }
    }
    Ok(Replayed::NeverTripped)
}

#[test]
fn trips_on_the_call_brpc_breaks_on_and_isolates_as_long() {
    let (mut tripped, mut reset_at_zero, mut never, mut skipped) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for file in ["handwritten.json", "random_a.json.gz"] {
        for scenario in support::load::<Scenario>("brpc", file) {
            match replay(&scenario) {
                Ok(Replayed::Tripped {
                    reset_at_zero: doubled,
                }) => {
                    tripped += 1;
                    reset_at_zero += usize::from(doubled);
                }
                Ok(Replayed::NeverTripped) => never += 1,
                Ok(Replayed::NotApplicable) => skipped += 1,
                Err(e) => failures.push(format!("{}: {e}", scenario.name)),
            }
        }
    }
    println!(
        "brpc vectors through a Breaker: {tripped} tripped on brpc's call ({} open exactly as \
         long as brpc isolates, {reset_at_zero} for min_isolation where brpc doubled it for its \
         reset at time zero), {never} never tripped as in brpc, {skipped} with reset/mark_broken \
         first (not breaker ops), {} failed",
        tripped - reset_at_zero,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        tripped >= 100 && never >= 50,
        "the vectors exercised both outcomes"
    );
}

/// A small configuration whose arithmetic is easy to follow by hand: 10- and 20-sample
/// windows tolerating 2 initial errors each, isolation 100 ms doubling up to 1 s.
fn small(half_open_window_size: u32) -> EmaConfig {
    EmaConfig {
        short_window_size: 10,
        short_window_error_percent: 20,
        long_window_size: 20,
        long_window_error_percent: 10,
        min_isolation: Duration::from_millis(100),
        max_isolation: Duration::from_secs(1),
        half_open_window_size,
        ..EmaConfig::default()
    }
}

fn call(breaker: &Breaker<impl TripPolicy>, clock: &ManualClock, outcome: Outcome) {
    let permit = breaker.allow().expect("admitted");
    clock.advance(Duration::from_millis(1));
    permit.record(outcome);
}

#[test]
fn isolation_doubles_on_repeated_breaks_and_restarts_after_a_quiet_spell() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(Ema::new(small(0)).unwrap())
        .max_requests(1)
        .clock(clock.clone())
        .build();
    // The third error of the initial stage breaks both windows' tolerance of 2.
    for _ in 0..3 {
        call(&breaker, &clock, Outcome::Failure);
    }
    assert_open_for(&breaker, &clock, Duration::from_millis(100));
    // Revived (half-open); the probe fails right away: a break soon after a revival.
    call(&breaker, &clock, Outcome::Failure);
    assert_open_for(&breaker, &clock, Duration::from_millis(200));
    call(&breaker, &clock, Outcome::Failure);
    assert_open_for(&breaker, &clock, Duration::from_millis(400));
    call(&breaker, &clock, Outcome::Failure);
    assert_open_for(&breaker, &clock, Duration::from_millis(800));
    call(&breaker, &clock, Outcome::Failure);
    assert_open_for(&breaker, &clock, Duration::from_secs(1)); // capped at max_isolation
    breaker.inspect_policy(|p| assert_eq!(p.recorder().isolated_times(), 5));

    // The probe succeeds: closed. A break more than max_isolation after the last revival
    // starts again from min_isolation.
    call(&breaker, &clock, Outcome::Success);
    assert_eq!(breaker.state(), State::Closed);
    clock.advance(Duration::from_secs(2));
    // Each revival restarted the windows' initial stage (neither had finished it), so they
    // count errors again: the third one breaks, 2 s after the last revival.
    for _ in 0..3 {
        call(&breaker, &clock, Outcome::Failure);
    }
    assert_open_for(&breaker, &clock, Duration::from_millis(100));
}

#[test]
fn probation_admits_its_window_and_closes_after_that_many_successes() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(Ema::new(small(3)).unwrap())
        .max_requests(1) // the policy's probation (3) takes precedence in half-open
        .clock(clock.clone())
        .build();
    for _ in 0..3 {
        call(&breaker, &clock, Outcome::Failure);
    }
    assert_open_for(&breaker, &clock, Duration::from_millis(100));

    let probes: Vec<_> = (0..3).map(|_| breaker.allow().expect("3 probes")).collect();
    assert_eq!(breaker.allow().unwrap_err(), Rejected::TooManyRequests);
    let mut probes = probes.into_iter();
    probes.next().unwrap().success();
    probes.next().unwrap().success();
    assert_eq!(breaker.state(), State::HalfOpen, "2 of 3 successes");
    probes.next().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
    breaker.inspect_policy(|p| assert!(!p.recorder().is_half_open(), "probation over"));

    // A failure on probation reopens, for a doubled isolation (less than max_isolation after
    // the revival).
    for _ in 0..3 {
        call(&breaker, &clock, Outcome::Failure);
    }
    let broken = breaker.inspect_policy(|p| p.recorder().isolation_duration());
    assert_open_for(&breaker, &clock, broken);
    call(&breaker, &clock, Outcome::Success);
    call(&breaker, &clock, Outcome::Failure);
    assert_open_for(&breaker, &clock, broken * 2);
}

#[test]
fn an_excluded_call_is_brpcs_elimit_ignored_entirely() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(Ema::new(small(0)).unwrap())
        .clock(clock.clone())
        .build();
    call(&breaker, &clock, Outcome::Failure);
    call(&breaker, &clock, Outcome::Failure);
    for _ in 0..100 {
        call(&breaker, &clock, Outcome::Excluded);
    }
    assert_eq!(breaker.state(), State::Closed);
    call(&breaker, &clock, Outcome::Failure);
    assert_eq!(breaker.state(), State::Open, "the third counted error");
}

#[test]
fn composition_trips_on_either_and_opens_for_the_trippers_duration() {
    // After a warm-up at 1 ms, fast (100 µs) errors cost little: brpc alone takes many of
    // them to trip. Consecutive failures catch them; their open duration is the timeout.
    fn warm(breaker: &Breaker<impl TripPolicy>, clock: &ManualClock) {
        for _ in 0..40 {
            let p = breaker.allow().unwrap();
            clock.advance(Duration::from_millis(1));
            p.success();
        }
    }
    fn fast_failure(breaker: &Breaker<impl TripPolicy>, clock: &ManualClock) {
        let p = breaker.allow().unwrap();
        clock.advance(Duration::from_micros(100));
        p.failure();
    }

    let clock = ManualClock::new();
    let ema_only = Breaker::builder()
        .policy(Ema::new(small(0)).unwrap())
        .clock(clock.clone())
        .build();
    warm(&ema_only, &clock);
    for _ in 0..5 {
        fast_failure(&ema_only, &clock);
    }
    assert_eq!(
        ema_only.state(),
        State::Closed,
        "5 fast errors are cheap for the EMA"
    );

    let clock = ManualClock::new();
    let both = Breaker::builder()
        .policy(
            ConsecutiveFailures::new(5)
                .unwrap()
                .or(Ema::new(small(0)).unwrap()),
        )
        .timeout(Duration::from_secs(7))
        .clock(clock.clone())
        .build();
    warm(&both, &clock);
    for _ in 0..5 {
        fast_failure(&both, &clock);
    }
    assert_open_for(&both, &clock, Duration::from_secs(7));
}

#[test]
fn composition_takes_the_ema_isolation_when_the_ema_trips() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .policy(
            ConsecutiveFailures::new(50)
                .unwrap()
                .or(Ema::new(small(0)).unwrap()),
        )
        .timeout(Duration::from_secs(7))
        .clock(clock.clone())
        .build();
    for _ in 0..3 {
        call(&breaker, &clock, Outcome::Failure);
    }
    assert_open_for(&breaker, &clock, Duration::from_millis(100));
}
