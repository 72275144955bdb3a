//! Replays the vectors recorded from the real sony/gobreaker v2 (see
//! `tests/data/gobreaker/README.md`) through the two-step API with a `ManualClock`: every
//! admission, every state and count check, and every state change with the step it fired at
//! must match.
//!
//! gobreaker has no probe timeout: a half-open probe holds its slot until it reports. Its
//! settings therefore translate to `probe_timeout(Duration::MAX)`, and the vectors replay bit
//! for bit. With the crate's default probe timeout (the open `timeout`), some of the random
//! vectors (the test below prints how many) hold every probe slot longer than the timeout
//! and then begin another call: gobreaker rejects it, the crate starts a new trial.
//! [`the_default_probe_timeout_departs_only_where_a_probe_was_held_past_it`] replays every
//! vector with the default and checks that each divergence is exactly that.

use crate::support;
use std::collections::HashMap;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{ConsecutiveFailures, FailureRatio, TripPolicy};
use lazybreaker::{Breaker, Counts, ManualClock, Permit, Rejected, State};
use serde::Deserialize;
use support::log::Log;

#[derive(Debug, Deserialize)]
struct Scenario {
    name: String,
    settings: Settings,
    steps: Vec<Step>,
    transitions: Vec<RecordedTransition>,
}

#[derive(Debug, Deserialize)]
struct Settings {
    max_requests: u32,
    interval_ms: u64,
    timeout_ms: u64,
    #[serde(default)]
    bucket_period_ms: u64,
    trip: Trip,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Trip {
    ConsecutiveFailures { threshold: u64 },
    FailureRatio { min_requests: u64, ratio: f64 },
    Default,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Step {
    Advance {
        ms: u64,
    },
    Begin {
        id: u32,
        expect: Admission,
    },
    End {
        id: u32,
        outcome: EndOutcome,
        effect: Effect,
    },
    Check {
        state: RecordedState,
        counts: RecordedCounts,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Admission {
    Ok,
    Open,
    TooManyRequests,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum EndOutcome {
    Success,
    Failure,
    Excluded,
}

/// Whether gobreaker applied a result to its counts (read from its private fields by the
/// recorder; the vectors call it informational). Checked against our lifetime totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Effect {
    Counted,
    Stale,
    OutOfWindow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RecordedState {
    Closed,
    Open,
    HalfOpen,
}

impl From<RecordedState> for State {
    fn from(s: RecordedState) -> Self {
        match s {
            RecordedState::Closed => State::Closed,
            RecordedState::Open => State::Open,
            RecordedState::HalfOpen => State::HalfOpen,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct RecordedCounts {
    requests: u64,
    total_successes: u64,
    total_failures: u64,
    consecutive_successes: u64,
    consecutive_failures: u64,
    total_exclusions: u64,
}

impl From<RecordedCounts> for Counts {
    fn from(c: RecordedCounts) -> Self {
        Counts::default()
            .with_requests(c.requests)
            .with_total_successes(c.total_successes)
            .with_total_failures(c.total_failures)
            .with_total_exclusions(c.total_exclusions)
            .with_consecutive_successes(c.consecutive_successes)
            .with_consecutive_failures(c.consecutive_failures)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
struct RecordedTransition {
    after_step: usize,
    from: RecordedState,
    to: RecordedState,
}

fn policy(trip: &Trip) -> Box<dyn TripPolicy> {
    match *trip {
        // gobreaker trips when `ConsecutiveFailures > threshold`: ours when it reaches ours.
        Trip::ConsecutiveFailures { threshold } => {
            Box::new(ConsecutiveFailures::new(threshold + 1).unwrap())
        }
        Trip::FailureRatio {
            min_requests,
            ratio,
        } => Box::new(FailureRatio::new(ratio, min_requests).unwrap()),
        Trip::Default => Box::new(ConsecutiveFailures::default()),
    }
}

/// The first step at which a replay departed from the vector.
#[derive(Debug)]
struct Divergence {
    what: String,
    /// The step was a call that found every probe slot held past the probe timeout and
    /// started a new trial (`Totals::probes_taken_over` grew).
    took_over: bool,
}

impl From<String> for Divergence {
    fn from(what: String) -> Self {
        Self {
            what,
            took_over: false,
        }
    }
}

/// Replays one scenario with gobreaker's settings (no probe timeout); `Err` describes the
/// first divergence.
fn replay(scenario: &Scenario) -> Result<(), String> {
    replay_with(scenario, Some(Duration::MAX), false).map_err(|d| d.what)
}

/// Replays one scenario with `probe_timeout` (`None`: the breaker's default), successes
/// judged at the latest time the breaker saw if `verdict_at_latest`.
fn replay_with(
    scenario: &Scenario,
    probe_timeout: Option<Duration>,
    verdict_at_latest: bool,
) -> Result<(), Divergence> {
    let s = &scenario.settings;
    let clock = ManualClock::new();
    let step_index = Arc::new(AtomicUsize::new(0));
    let fired = Log::default();
    let breaker = {
        let step_index = Arc::clone(&step_index);
        let fired = fired.clone();
        Breaker::builder()
            .name(scenario.name.clone())
            .max_requests(s.max_requests)
            .interval(Duration::from_millis(s.interval_ms))
            .bucket_period(Duration::from_millis(s.bucket_period_ms))
            .timeout(Duration::from_millis(s.timeout_ms))
            .probe_timeout(probe_timeout.unwrap_or_default())
            .verdict_at_latest(verdict_at_latest)
            .policy(policy(&s.trip))
            .on_state_change(move |_, from, to| {
                fired.push((step_index.load(Ordering::SeqCst), from, to));
            })
            .clock(clock.clone())
            .build()
    };

    let mut in_flight: HashMap<u32, Permit<'_, Box<dyn TripPolicy>>> = HashMap::new();
    for (i, step) in scenario.steps.iter().enumerate() {
        step_index.store(i, Ordering::SeqCst);
        match *step {
            Step::Advance { ms } => clock.advance(Duration::from_millis(ms)),
            Step::Begin { id, expect } => {
                let taken_over = breaker.totals().probes_taken_over;
                let got = match breaker.allow() {
                    Ok(permit) => {
                        in_flight.insert(id, permit);
                        Admission::Ok
                    }
                    Err(Rejected::Open { .. }) => Admission::Open,
                    Err(Rejected::TooManyRequests) => Admission::TooManyRequests,
                    Err(other) => {
                        return Err(format!("step {i}: unknown rejection {other:?}").into())
                    }
                };
                if got != expect {
                    return Err(Divergence {
                        what: format!("step {i}: begin {id}: got {got:?}, want {expect:?}"),
                        took_over: breaker.totals().probes_taken_over > taken_over,
                    });
                }
            }
            Step::End {
                id,
                outcome,
                effect,
            } => {
                let permit = in_flight
                    .remove(&id)
                    .ok_or_else(|| format!("step {i}: end of unknown id {id}"))?;
                let dropped_before = breaker.totals().dropped;
                match outcome {
                    EndOutcome::Success => permit.success(),
                    EndOutcome::Failure => permit.failure(),
                    EndOutcome::Excluded => permit.exclude(),
                }
                let dropped = breaker.totals().dropped > dropped_before;
                if dropped != (effect != Effect::Counted) {
                    return Err(format!(
                        "step {i}: end {id}: dropped = {dropped}, want {effect:?}"
                    )
                    .into());
                }
            }
            Step::Check { state, counts } => {
                let got_state = breaker.state();
                let got_counts = breaker.counts();
                if got_state != State::from(state) {
                    return Err(format!("step {i}: state {got_state}, want {state:?}").into());
                }
                if got_counts != Counts::from(counts) {
                    return Err(format!(
                        "step {i}: counts {got_counts:?}, want {:?}",
                        Counts::from(counts)
                    )
                    .into());
                }
            }
        }
    }

    let want: Vec<_> = scenario
        .transitions
        .iter()
        .map(|t| (t.after_step, State::from(t.from), State::from(t.to)))
        .collect();
    let got = fired.entries();
    if got != want {
        return Err(format!("transitions {got:?}, want {want:?}").into());
    }
    Ok(())
}

fn replay_file(file: &str, expected_scenarios: usize) {
    support::replay_suite("gobreaker", file, expected_scenarios, |s: &Scenario| {
        replay(s).map_err(|e| format!("{}: {e}", s.name))
    });
}

#[test]
fn handwritten() {
    replay_file("handwritten.json", 31);
}

#[test]
fn random_fixed_window() {
    replay_file("random_a.json.gz", 400);
}

#[test]
fn random_rolling_window() {
    replay_file("random_bucket.json.gz", 400);
}

/// The crate's default probe timeout (the open `timeout`) departs from gobreaker only where
/// gobreaker keeps a half-open breaker waiting on probes held longer than the timeout: the
/// first divergence of every diverging vector is a call admitted as a new trial's first
/// probe (the takeover) where gobreaker answered `TooManyRequests`.
#[test]
fn the_default_probe_timeout_departs_only_where_a_probe_was_held_past_it() {
    let mut diverged = 0;
    for file in [
        "handwritten.json",
        "random_a.json.gz",
        "random_bucket.json.gz",
    ] {
        let scenarios: Vec<Scenario> = support::load("gobreaker", file);
        let before = diverged;
        for scenario in &scenarios {
            if let Err(d) = replay_with(scenario, None, false) {
                diverged += 1;
                assert!(
                    d.took_over && d.what.ends_with("got Ok, want TooManyRequests"),
                    "{file} {}: {}",
                    scenario.name,
                    d.what
                );
            }
        }
        println!(
            "gobreaker {file}, default probe timeout: {} of {} take a probe over",
            diverged - before,
            scenarios.len()
        );
    }
    assert!(
        diverged > 0,
        "some vectors hold a probe past the timeout: the takeover is exercised"
    );
}

/// Successes judged at the latest time the breaker saw (`Builder::verdict_at_latest`, one
/// clock read a windowed call) depart from gobreaker only where gobreaker drops a success
/// because its window (or its bucket's) ended while it ran: the first divergence of every
/// diverging vector is such a success, counted. A vector without a window never diverges.
#[test]
fn verdicts_at_the_latest_time_depart_only_on_a_success_whose_window_ended() {
    let mut diverged = 0;
    for file in [
        "handwritten.json",
        "random_a.json.gz",
        "random_bucket.json.gz",
    ] {
        let scenarios: Vec<Scenario> = support::load("gobreaker", file);
        let before = diverged;
        for scenario in &scenarios {
            if let Err(d) = replay_with(scenario, Some(Duration::MAX), true) {
                diverged += 1;
                assert!(
                    scenario.settings.interval_ms > 0
                        && (d.what.ends_with("dropped = false, want Stale")
                            || d.what.ends_with("dropped = false, want OutOfWindow")),
                    "{file} {}: {}",
                    scenario.name,
                    d.what
                );
            }
        }
        println!(
            "gobreaker {file}, verdicts at the latest time: {} of {} count a success gobreaker drops",
            diverged - before,
            scenarios.len()
        );
    }
    assert!(
        diverged > 0,
        "some vectors end a call after its window: exercised"
    );
}
