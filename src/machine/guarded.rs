//! [`Guarded`]: the policy, reachable only through hooks that contain its panics.

use std::time::Duration;

use crate::contain::FirstPanic;
use crate::counts::Counts;
use crate::nanos::{instant, Nanos};
use crate::policy::{CallResult, LaneRoom, TripPolicy};
use crate::state::State;

/// The policy, reachable only through hooks that contain its panics: a hook that panics
/// answers a neutral fallback so that the machine can finish its step, and the first panic is
/// kept for the caller to resume once the breaker is consistent. A hook added later goes
/// through [`Guarded::hook`] too, so it cannot forget the containment.
#[derive(Debug)]
pub(crate) struct Guarded<P> {
    pub(super) policy: P,
    pub(super) panic: FirstPanic,
}

impl<P: TripPolicy> Guarded<P> {
    pub(super) fn new(policy: P) -> Self {
        Self {
            policy,
            panic: FirstPanic::default(),
        }
    }

    pub(super) fn hook<R>(&mut self, fallback: R, f: impl FnOnce(&mut P) -> R) -> R {
        let policy = &mut self.policy;
        self.panic.catch(fallback, || f(policy))
    }

    /// Whether to trip; no trip if the policy panics.
    pub(super) fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.hook(false, |p| p.on_result(result))
    }

    /// What the lane may count without the policy; none if it panics.
    pub(super) fn lane_room(&mut self, counts: &Counts) -> LaneRoom {
        self.hook(LaneRoom::NONE, |p| p.lane_room(counts))
    }

    pub(super) fn on_probe_result(&mut self, result: &CallResult<'_>) {
        self.hook((), |p| p.on_probe_result(result));
    }

    /// The open duration; the configured `timeout` if the policy panics.
    pub(super) fn open_duration(&mut self, timeout: Duration, now: Nanos) -> Duration {
        self.hook(timeout, |p| p.open_duration(timeout, instant(now)))
    }

    /// Half-open probes; `max_requests` if the policy panics. At least 1.
    pub(super) fn half_open_probes(&mut self, max_requests: u64) -> u64 {
        self.hook(max_requests, |p| p.half_open_probes(max_requests))
            .max(1)
    }

    pub(super) fn on_state_change(&mut self, from: State, to: State, now: Nanos) {
        self.hook((), |p| p.on_state_change(from, to, instant(now)));
    }

    /// The policy's figures; those reported before a panic, if it panics.
    pub(super) fn gauges(&mut self, report: &mut dyn FnMut(&'static str, f64)) {
        let policy = &self.policy;
        self.panic.catch((), || policy.gauges(report));
    }
}
