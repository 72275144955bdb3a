//! [`Guarded`]: the policy, reachable only through hooks that contain its panics.

use std::time::Duration;

use crate::contain::{self, Payload};
use crate::counts::Counts;
use crate::nanos::{instant, Nanos};
use crate::policy::{CallResult, LaneRoom, TripPolicy};
use crate::state::State;

use super::cold::Cold;
use super::rules::Rules;

/// The policy as the machine holds it: read through [`Policy::get`], changed only through a
/// [`Guarded`] (its field is private to this module).
#[derive(Debug)]
pub(crate) struct Policy<P>(P);

impl<P> Policy<P> {
    pub(super) fn new(policy: P) -> Self {
        Self(policy)
    }

    pub(super) fn get(&self) -> &P {
        &self.0
    }
}

/// The policy, reachable only through hooks that contain its panics: a hook that panics
/// answers a neutral fallback so that the machine can finish its step, and the first panic is
/// kept for the caller to resume once the breaker is consistent. A hook added later goes
/// through [`Guarded::hook`] too, so it cannot forget the containment.
///
/// The panic is kept in the machine's cold part (a panic is rare: an idle machine pays no
/// word for it), built for it if it was not yet: hence the cold part and the rules (a fresh
/// one admits their `max_requests` probes), beside the policy.
pub(super) struct Guarded<'a, P> {
    policy: &'a mut P,
    cold: &'a mut Option<Box<Cold>>,
    rules: &'a Rules,
}

impl<'a, P: TripPolicy> Guarded<'a, P> {
    /// The hooks of `policy`, keeping a panic in `cold` (a fresh one built by `rules`).
    pub(super) fn new(
        policy: &'a mut Policy<P>,
        cold: &'a mut Option<Box<Cold>>,
        rules: &'a Rules,
    ) -> Self {
        Self {
            policy: &mut policy.0,
            cold,
            rules,
        }
    }

    #[inline]
    fn hook<R>(&mut self, fallback: R, f: impl FnOnce(&mut P) -> R) -> R {
        let policy = &mut *self.policy;
        match contain::catch(|| f(policy)) {
            Ok(answer) => answer,
            Err(payload) => {
                self.keep(payload);
                fallback
            }
        }
    }

    /// Keeps `payload` in the cold part, unless a panic is kept already.
    #[cold]
    #[inline(never)]
    fn keep(&mut self, payload: Payload) {
        let probes = self.rules.max_requests;
        (self.cold.get_or_insert_with(|| Box::new(Cold::new(probes))))
            .panic
            .keep(payload);
    }

    /// Whether to trip; no trip if the policy panics.
    pub(super) fn on_result(mut self, result: &CallResult<'_>) -> bool {
        self.hook(false, |p| p.on_result(result))
    }

    /// What the lane may count without the policy; none if it panics.
    pub(super) fn lane_room(mut self, counts: &Counts) -> LaneRoom {
        self.hook(LaneRoom::NONE, |p| p.lane_room(counts))
    }

    pub(super) fn on_probe_result(mut self, result: &CallResult<'_>) {
        self.hook((), |p| p.on_probe_result(result));
    }

    /// The open duration; the configured `timeout` if the policy panics.
    pub(super) fn open_duration(mut self, timeout: Duration, now: Nanos) -> Duration {
        self.hook(timeout, |p| p.open_duration(timeout, instant(now)))
    }

    /// Half-open probes; `max_requests` if the policy panics. At least 1.
    pub(super) fn half_open_probes(mut self, max_requests: u64) -> u64 {
        self.hook(max_requests, |p| p.half_open_probes(max_requests))
            .max(1)
    }

    pub(super) fn on_state_change(mut self, from: State, to: State, now: Nanos) {
        self.hook((), |p| p.on_state_change(from, to, instant(now)));
    }

    /// The policy's figures; those reported before a panic, if it panics.
    pub(super) fn gauges(mut self, report: &mut dyn FnMut(&'static str, f64)) {
        self.hook((), |p| p.gauges(report));
    }
}
