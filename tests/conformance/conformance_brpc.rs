//! Replays the vectors recorded from apache/brpc's own `CircuitBreaker` (see
//! `tests/data/brpc/README.md`) against `EmaRecorder`: every `call` verdict, every isolation
//! duration and count after a break, the smoothing factors' bits, and every `inspect` snapshot
//! of the internals must match.

use crate::support;

use std::time::Duration;

use lazybreaker::policy::EmaRecorder;
use support::brpc::{Inspect, Scenario, Step, WindowState};

fn window_state(rec: &EmaRecorder, long: bool) -> WindowState {
    let w = if long {
        rec.long_window()
    } else {
        rec.short_window()
    };
    WindowState {
        ema_latency: w.ema_latency_us,
        ema_error_cost: w.ema_error_cost_us,
        init_sample_count: w.initial_samples,
        init_error_count: w.initial_errors,
    }
}

fn bits(hex: &str) -> Result<u64, String> {
    let digits = hex
        .strip_prefix("0x")
        .ok_or_else(|| format!("bit pattern without 0x: {hex}"))?;
    u64::from_str_radix(digits, 16).map_err(|e| format!("bit pattern {hex}: {e}"))
}

fn check_bits(what: &str, got: f64, want_hex: &str) -> Result<(), String> {
    let want = bits(want_hex)?;
    if got.to_bits() != want {
        return Err(format!(
            "{what}: got {got:e} ({:#018x}), brpc {} ({want_hex})",
            got.to_bits(),
            f64::from_bits(want)
        ));
    }
    Ok(())
}

fn check_getters(rec: &EmaRecorder, isolation_ms: u64, isolated_times: u64) -> Result<(), String> {
    let got = (rec.isolation_duration(), rec.isolated_times());
    let want = (Duration::from_millis(isolation_ms), isolated_times);
    if got != want {
        return Err(format!(
            "(isolation_duration, isolated_times) = {got:?}, brpc {want:?}"
        ));
    }
    Ok(())
}

fn check_inspect(rec: &EmaRecorder, clock_ms: u64, want: &Inspect) -> Result<(), String> {
    let mut diffs = Vec::new();
    let mut cmp = |what: &str, got: String, want: String| {
        if got != want {
            diffs.push(format!("{what} = {got}, brpc {want}"));
        }
    };
    cmp("now_ms", clock_ms.to_string(), want.now_ms.to_string());
    cmp(
        "broken",
        rec.is_broken().to_string(),
        want.broken.to_string(),
    );
    cmp(
        "is_half_open()",
        rec.is_half_open().to_string(),
        (want.half_open && !want.broken).to_string(),
    );
    // brpc keeps its probation count (and flag) across a break, where it is unobservable
    // (a broken recorder ignores calls; the next reset starts over): compare while on
    // probation.
    let want_successes = if want.half_open && !want.broken {
        want.half_open_success_count
    } else {
        0
    };
    cmp(
        "probation_successes()",
        rec.probation_successes().to_string(),
        want_successes.to_string(),
    );
    cmp(
        "last_reset()",
        format!("{:?}", rec.last_reset()),
        format!("{:?}", Some(Duration::from_millis(want.last_reset_time_ms))),
    );
    cmp(
        "isolation_duration",
        format!("{:?}", rec.isolation_duration()),
        format!("{:?}", Duration::from_millis(want.isolation_ms)),
    );
    cmp(
        "isolated_times",
        rec.isolated_times().to_string(),
        want.isolated_times.to_string(),
    );
    cmp(
        "long",
        format!("{:?}", window_state(rec, true)),
        format!("{:?}", want.long),
    );
    cmp(
        "short",
        format!("{:?}", window_state(rec, false)),
        format!("{:?}", want.short),
    );
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("inspect: {}", diffs.join("; ")))
    }
}

/// Replays one scenario; `Err` describes the first divergence.
fn replay(scenario: &Scenario) -> Result<(), String> {
    let config = scenario.flags.config();
    check_bits("epsilon", config.epsilon, &scenario.derived.epsilon_bits)?;
    let mut rec = EmaRecorder::new(config).map_err(|e| format!("config rejected: {e}"))?;
    check_bits(
        "config.long_smooth()",
        config.long_smooth(),
        &scenario.derived.long_smooth_bits,
    )?;
    check_bits(
        "config.short_smooth()",
        config.short_smooth(),
        &scenario.derived.short_smooth_bits,
    )?;

    let mut clock_ms: u64 = 0; // brpc's fake clock reads 0 at construction
    for (i, step) in scenario.steps.iter().enumerate() {
        let now = Duration::from_millis(clock_ms);
        let at = |e: String| format!("step {i} ({step:?}): {e}");
        match step {
            Step::AdvanceMs { ms } => clock_ms += ms,
            Step::Call {
                error,
                latency_us,
                expect_healthy,
                expect_isolation_ms,
                expect_isolated_times,
            } => {
                let healthy =
                    rec.on_call_end(error.outcome(), Duration::from_micros(*latency_us), now);
                if healthy != *expect_healthy {
                    return Err(at(format!("healthy = {healthy}, brpc {expect_healthy}")));
                }
                match (expect_healthy, expect_isolation_ms, expect_isolated_times) {
                    (false, Some(iso), Some(times)) => {
                        check_getters(&rec, *iso, *times).map_err(at)?
                    }
                    (false, _, _) => return Err(at("vector lacks the getters".into())),
                    (true, _, _) => {}
                }
            }
            Step::MarkBroken {
                expect_isolation_ms,
                expect_isolated_times,
            } => {
                rec.mark_as_broken(now);
                check_getters(&rec, *expect_isolation_ms, *expect_isolated_times).map_err(at)?;
                if !rec.is_broken() {
                    return Err(at("not broken after mark_as_broken".into()));
                }
            }
            Step::Reset => rec.reset(now),
            Step::Inspect(want) => check_inspect(&rec, clock_ms, want).map_err(at)?,
        }
    }
    Ok(())
}

fn replay_file(file: &str, expected_scenarios: usize) {
    support::replay_suite("brpc", file, expected_scenarios, |s: &Scenario| {
        replay(s).map_err(|e| format!("{}: {e}", s.name))
    });
}

#[test]
fn handwritten() {
    replay_file("handwritten.json", 34);
}

#[test]
fn random_a() {
    replay_file("random_a.json.gz", 300);
}
