//! The one list of [`TripPolicy`]'s hooks, shared by the forwarder test (every wrapper
//! forwards every hook) and the panic table (every hook may panic): [`PolicyHook`] and
//! [`POLICY_HOOKS`], and [`Recording`], a policy that overrides every hook.
//!
//! A hook added to the trait without a row here fails CI: [`Recording`]'s impl denies
//! `clippy::missing_trait_methods`, so it must override the new hook, which it can only
//! record as a new [`PolicyHook`]; the matches over `PolicyHook` in the forwarder test and in
//! the panic table are exhaustive, so both then need a row for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lazybreaker::policy::{
    AnyOf, Backoff, CallResult, Capabilities, LaneRoom, SuccessRecorder, TripPolicy,
};
use lazybreaker::{ConfigError, State};

/// Every hook of [`TripPolicy`] (the combinators `or` and `with_backoff` are not hooks: the
/// breaker never calls them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PolicyHook {
    Capabilities,
    HalfOpenProbes,
    OnResult,
    OpenDuration,
    OnProbeResult,
    OnStateChange,
    Gauges,
    SuccessRecorder,
    LaneRoom,
}

/// Every [`PolicyHook`], in the order [`Recording`]'s exercise calls them.
pub(crate) const POLICY_HOOKS: [PolicyHook; 9] = [
    PolicyHook::Capabilities,
    PolicyHook::HalfOpenProbes,
    PolicyHook::OnResult,
    PolicyHook::OpenDuration,
    PolicyHook::OnProbeResult,
    PolicyHook::OnStateChange,
    PolicyHook::Gauges,
    PolicyHook::SuccessRecorder,
    PolicyHook::LaneRoom,
];

/// The answers [`Recording`] gives, none of them a default.
pub(crate) const PROBES: u64 = 7;
pub(crate) const OPEN_FOR: Duration = Duration::from_secs(42);
pub(crate) const THRESHOLD: Duration = Duration::from_millis(250);
pub(crate) const GAUGE: (&str, f64) = ("recording_gauge", 4.5);
/// The room [`Recording`] answers: some failures, quiet successes.
pub(crate) const ROOM: LaneRoom = LaneRoom::NONE.failures(3).quiet_successes(true);

/// The capabilities [`Recording`] answers: every field off its default.
pub(crate) fn recorded_capabilities() -> Capabilities {
    Capabilities::default()
        .needs_latency(true)
        .needs_successes(false)
        .slow_call_threshold(THRESHOLD)
        .probes_on_latency_alone(true)
}

/// Answers every hook with a value no default gives, and records each call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recording(Arc<Mutex<Vec<PolicyHook>>>);

impl Recording {
    pub(crate) fn calls(&self) -> Vec<PolicyHook> {
        self.0.lock().unwrap().clone()
    }

    fn note(&self, hook: PolicyHook) {
        self.0.lock().unwrap().push(hook);
    }
}

#[deny(clippy::missing_trait_methods)]
impl TripPolicy for Recording {
    fn on_result(&mut self, _: &CallResult<'_>) -> bool {
        self.note(PolicyHook::OnResult);
        true
    }

    fn open_duration(&mut self, _timeout: Duration, _now: Duration) -> Duration {
        self.note(PolicyHook::OpenDuration);
        OPEN_FOR
    }

    fn on_probe_result(&mut self, _: &CallResult<'_>) {
        self.note(PolicyHook::OnProbeResult);
    }

    fn half_open_probes(&self, _max_requests: u64) -> u64 {
        self.note(PolicyHook::HalfOpenProbes);
        PROBES
    }

    fn on_state_change(&mut self, _from: State, _to: State, _now: Duration) {
        self.note(PolicyHook::OnStateChange);
    }

    fn capabilities(&self) -> Capabilities {
        self.note(PolicyHook::Capabilities);
        recorded_capabilities()
    }

    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        self.note(PolicyHook::Gauges);
        report(GAUGE.0, GAUGE.1);
    }

    fn success_recorder(&self) -> Option<Arc<dyn SuccessRecorder>> {
        self.note(PolicyHook::SuccessRecorder);
        Some(Arc::new(Discard))
    }

    fn lane_room(&self, _counts: &lazybreaker::Counts) -> LaneRoom {
        self.note(PolicyHook::LaneRoom);
        ROOM
    }

    // Not hooks: spelled out only because the lint above wants every method here.
    fn with_backoff(self, initial: Duration, max: Duration) -> Result<Backoff<Self>, ConfigError> {
        Backoff::new(self, initial, max)
    }

    fn or<Q: TripPolicy>(self, other: Q) -> AnyOf<Self, Q> {
        AnyOf::new(self, other)
    }
}

/// The recorder [`Recording`] answers (the default answers none).
#[derive(Debug)]
pub(crate) struct Discard;

impl SuccessRecorder for Discard {
    fn record_success(&self, _latency: Option<Duration>) {}
}
