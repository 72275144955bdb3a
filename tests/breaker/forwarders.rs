//! Every policy wrapper forwards every hook of the policy it wraps, capabilities included:
//! `Box<dyn TripPolicy>`, `AnyOf` (on either side), `Backoff`, and wrappers of wrappers.
//!
//! A forwarder that drops a hook falls back to the trait's default silently: a dynamic EMA
//! policy would ignore its `half_open_window_size`, and every breaker built from a file would
//! lose the lock-free lane (`needs_successes` defaults to `true`). This test pins each one,
//! from the one list of hooks in `support::hooks`.

use crate::support;

use std::time::Duration;

use lazybreaker::policy::{
    AnyOf, CallResult, Capabilities, ConsecutiveFailures, LaneRoom, Outcome, TripPolicy,
};
use lazybreaker::{Counts, State};

use support::hooks::{
    recorded_capabilities, PolicyHook, Recording, GAUGE, OPEN_FOR, POLICY_HOOKS, PROBES, ROOM,
};

/// A policy that never trips and keeps every default but the capabilities, which it makes
/// neutral for [`Capabilities::either`] (so an `AnyOf` with it answers the recording
/// policy's capabilities only if they arrived).
#[derive(Debug)]
struct Quiet;

impl TripPolicy for Quiet {
    fn on_result(&mut self, _: &CallResult<'_>) -> bool {
        false
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
            .needs_successes(false)
            .probes_on_latency_alone(true)
    }

    /// It never trips: any room, so that `AnyOf` answers its other policy's.
    fn lane_room(&self, _: &Counts) -> LaneRoom {
        LaneRoom::NONE.failures(u64::MAX).quiet_successes(true)
    }
}

/// Calls every hook of `policy` once, in `POLICY_HOOKS`'s order, and checks the answers
/// that must come from the recording policy.
fn exercise(name: &str, policy: &mut dyn TripPolicy, open_for: Duration) {
    let counts = Counts::default();
    let result = CallResult::new(Outcome::Failure, None, &counts, Duration::ZERO);
    for hook in POLICY_HOOKS {
        match hook {
            PolicyHook::Capabilities => assert_eq!(
                policy.capabilities(),
                recorded_capabilities(),
                "{name}: capabilities"
            ),
            PolicyHook::HalfOpenProbes => assert_eq!(
                policy.half_open_probes(1),
                PROBES,
                "{name}: half_open_probes"
            ),
            PolicyHook::OnResult => assert!(policy.on_result(&result), "{name}: on_result"),
            PolicyHook::OpenDuration => assert_eq!(
                policy.open_duration(Duration::from_secs(1), Duration::ZERO),
                open_for,
                "{name}: open_duration"
            ),
            PolicyHook::OnProbeResult => policy.on_probe_result(&result),
            PolicyHook::OnStateChange => {
                policy.on_state_change(State::Closed, State::Open, Duration::ZERO)
            }
            PolicyHook::Gauges => {
                let mut reported = Vec::new();
                policy.gauges(&mut |name, value| reported.push((name, value)));
                assert_eq!(reported, [GAUGE], "{name}: gauges");
            }
            PolicyHook::LaneRoom => {
                assert_eq!(policy.lane_room(&counts), ROOM, "{name}: lane_room")
            }
            PolicyHook::SuccessRecorder => {
                let recorder = policy.success_recorder();
                assert!(
                    format!("{recorder:?}").contains("Discard"),
                    "{name}: success_recorder: {recorder:?}"
                );
            }
        }
    }
}

fn check(name: &str, wrap: impl FnOnce(Recording) -> Box<dyn TripPolicy>, open_for: Duration) {
    let recording = Recording::default();
    exercise(name, &mut *wrap(recording.clone()), open_for);
    assert_eq!(
        recording.calls(),
        POLICY_HOOKS,
        "{name}: hooks that arrived"
    );
}

#[test]
fn every_wrapper_forwards_every_hook() {
    check("plain", |r| Box::new(r), OPEN_FOR);
    check(
        "Box<dyn>",
        |r| Box::new(Box::new(r) as Box<dyn TripPolicy>),
        OPEN_FOR,
    );
    check("AnyOf first", |r| Box::new(AnyOf::new(r, Quiet)), OPEN_FOR);
    check("AnyOf second", |r| Box::new(Quiet.or(r)), OPEN_FOR);
    // The backoff replaces the duration, but must still ask the wrapped policy.
    let initial = Duration::from_secs(3);
    check(
        "Backoff",
        |r| Box::new(r.with_backoff(initial, Duration::from_secs(60)).unwrap()),
        initial,
    );
    check(
        "Backoff of a boxed AnyOf",
        |r| {
            let any: Box<dyn TripPolicy> = Box::new(AnyOf::new(Quiet, r));
            Box::new(any.with_backoff(initial, Duration::from_secs(60)).unwrap())
        },
        initial,
    );
    check(
        "AnyOf of a Backoff of a Box",
        |r| {
            let boxed: Box<dyn TripPolicy> = Box::new(r);
            let backoff = boxed
                .with_backoff(initial, Duration::from_secs(60))
                .unwrap();
            Box::new(Quiet.or(backoff))
        },
        initial,
    );
}

#[test]
fn a_composition_keeps_the_lane_only_when_every_member_allows_it() {
    let counting = ConsecutiveFailures::default();
    assert!(!counting.capabilities().needs_successes);
    let dyn_counting: Box<dyn TripPolicy> = Box::new(counting);
    assert!(
        !dyn_counting.capabilities().needs_successes,
        "the boxed policy keeps the lane"
    );
    #[derive(Debug)]
    struct Eager;
    impl TripPolicy for Eager {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            false
        }
    }
    assert!(counting.or(Eager).capabilities().needs_successes);
    assert!(Eager.or(counting).capabilities().needs_successes);
    assert!(!counting.or(counting).capabilities().needs_successes);
}

#[test]
fn a_composition_merges_capabilities_by_one_rule() {
    let slow = |ms: u64, alone: bool| {
        Capabilities::default()
            .needs_latency(true)
            .slow_call_threshold(Duration::from_millis(ms))
            .probes_on_latency_alone(alone)
    };
    // The lower threshold: a call slow for either is slow.
    let both = slow(300, true).either(slow(100, true));
    assert_eq!(both.slow_call_threshold, Some(Duration::from_millis(100)));
    assert!(both.probes_on_latency_alone, "both judge probes on latency");
    // A threshold on one side only is kept; latency alone needs both to agree.
    let one = slow(300, true).either(Capabilities::default());
    assert_eq!(one.slow_call_threshold, Some(Duration::from_millis(300)));
    assert!(one.needs_latency && one.needs_successes);
    assert!(
        !one.probes_on_latency_alone,
        "a failed probe still fails the other"
    );
    let none = Capabilities::default().either(Capabilities::default());
    assert_eq!(none, Capabilities::default());
}
