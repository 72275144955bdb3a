//! Every policy wrapper forwards every hook and every capability of the policy it wraps:
//! `Box<dyn TripPolicy>`, `AnyOf` (on either side), `Backoff`, and wrappers of wrappers.
//!
//! A forwarder that drops a hook falls back to the trait's default silently: a dynamic EMA
//! policy would ignore its `half_open_window_size`, and every breaker built from a file would
//! lose the lock-free lane (`needs_successes` defaults to `true`). This test pins each one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::policy::{AnyOf, CallResult, ConsecutiveFailures, Outcome, TripPolicy};
use lazybreaker::{Counts, State};

/// Answers every hook with a value no default gives, and records each call.
#[derive(Debug, Clone, Default)]
struct Recording(Arc<Mutex<Vec<&'static str>>>);

impl Recording {
    fn calls(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().clone()
    }

    fn note(&self, hook: &'static str) {
        self.0.lock().unwrap().push(hook);
    }
}

const PROBES: u64 = 7;
const OPEN_FOR: Duration = Duration::from_secs(42);

impl TripPolicy for Recording {
    fn on_result(&mut self, _: &CallResult<'_>) -> bool {
        self.note("on_result");
        true
    }

    fn open_duration(&mut self, _timeout: Duration, _now: Duration) -> Duration {
        self.note("open_duration");
        OPEN_FOR
    }

    fn on_probe_result(&mut self, _: &CallResult<'_>) {
        self.note("on_probe_result");
    }

    fn half_open_probes(&self, _max_requests: u64) -> u64 {
        self.note("half_open_probes");
        PROBES
    }

    fn on_state_change(&mut self, _from: State, _to: State, _now: Duration) {
        self.note("on_state_change");
    }

    fn needs_latency(&self) -> bool {
        self.note("needs_latency");
        true
    }

    fn needs_successes(&self) -> bool {
        self.note("needs_successes");
        false
    }
}

/// A policy that never trips and keeps every default except `needs_successes` (so that an
/// `AnyOf` with it says `false` only if the recording policy's `false` arrived).
#[derive(Debug)]
struct Quiet;

impl TripPolicy for Quiet {
    fn on_result(&mut self, _: &CallResult<'_>) -> bool {
        false
    }

    fn needs_successes(&self) -> bool {
        false
    }
}

const EVERY_HOOK: [&str; 7] = [
    "needs_latency",
    "needs_successes",
    "half_open_probes",
    "on_result",
    "open_duration",
    "on_probe_result",
    "on_state_change",
];

/// Calls every hook of `policy` once, in `EVERY_HOOK`'s order, and checks the answers that
/// must come from the recording policy.
fn exercise(name: &str, mut policy: impl TripPolicy, open_for: Duration) {
    let counts = Counts::default();
    let result = CallResult::new(Outcome::Failure, None, &counts, Duration::ZERO);
    assert!(policy.needs_latency(), "{name}: needs_latency");
    assert!(!policy.needs_successes(), "{name}: needs_successes");
    assert_eq!(
        policy.half_open_probes(1),
        PROBES,
        "{name}: half_open_probes"
    );
    assert!(policy.on_result(&result), "{name}: on_result");
    assert_eq!(
        policy.open_duration(Duration::from_secs(1), Duration::ZERO),
        open_for,
        "{name}: open_duration"
    );
    policy.on_probe_result(&result);
    policy.on_state_change(State::Closed, State::Open, Duration::ZERO);
}

fn check(name: &str, wrap: impl FnOnce(Recording) -> Box<dyn TripPolicy>, open_for: Duration) {
    let recording = Recording::default();
    exercise(name, wrap(recording.clone()), open_for);
    assert_eq!(recording.calls(), EVERY_HOOK, "{name}: hooks that arrived");
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
}

#[test]
fn a_composition_keeps_the_lane_only_when_every_member_allows_it() {
    let counting = ConsecutiveFailures::default();
    assert!(!counting.needs_successes());
    let dyn_counting: Box<dyn TripPolicy> = Box::new(counting);
    assert!(
        !dyn_counting.needs_successes(),
        "the boxed policy keeps the lane"
    );
    #[derive(Debug)]
    struct Eager;
    impl TripPolicy for Eager {
        fn on_result(&mut self, _: &CallResult<'_>) -> bool {
            false
        }
    }
    assert!(counting.or(Eager).needs_successes());
    assert!(Eager.or(counting).needs_successes());
    assert!(!counting.or(counting).needs_successes());
}
