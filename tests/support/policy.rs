//! Policies for tests: [`Recorded`], a wrapper that writes down what its policy is told, and
//! the policies that trip on the first failure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lazybreaker::policy::{CallResult, Capabilities, ConsecutiveFailures, Outcome, TripPolicy};
use lazybreaker::{Counts, State};

use super::log::Log;

/// Trips on the first consecutive failure (closed-state successes on the lock-free lane).
pub(crate) fn trips_on_first_failure() -> ConsecutiveFailures {
    ConsecutiveFailures::new(1).unwrap()
}

/// The same rule for [`ready_to_trip`](lazybreaker::Builder::ready_to_trip) (which sees every
/// result under the lock): `.ready_to_trip(ready_on_first_failure as fn(&Counts) -> bool)`.
pub(crate) fn ready_on_first_failure(c: &Counts) -> bool {
    c.consecutive_failures >= 1
}

/// What a [`Recorded`] policy wrote down, shared with the test that keeps this handle.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    /// Every state change the policy was told of, as it happened (under the breaker's lock):
    /// the history that callback and observer deliveries must match.
    pub(crate) happened: Log,
    /// How often `on_result` was called, by outcome: `[success, failure, any other]`.
    pub(crate) consulted: Arc<[AtomicU64; 3]>,
    /// Every hook called, by name, in order; only with [`Recorded::naming_hooks`].
    pub(crate) hooks: Log<&'static str>,
}

impl Record {
    /// How many results with `outcome`'s index (0 success, 1 failure, 2 other) reached the
    /// policy so far.
    pub(crate) fn consulted(&self, index: usize) -> u64 {
        self.consulted[index].load(Ordering::Relaxed)
    }
}

/// Wraps a policy and forwards every hook to it, writing down what it is told (see
/// [`Record`]); optionally overrides its capabilities' `needs_successes`.
#[derive(Debug)]
pub(crate) struct Recorded<P> {
    inner: P,
    record: Record,
    naming: bool,
    needs_successes: Option<bool>,
}

impl<P: TripPolicy> Recorded<P> {
    pub(crate) fn new(inner: P) -> Self {
        Recorded {
            inner,
            record: Record::default(),
            naming: false,
            needs_successes: None,
        }
    }

    /// A handle on what this policy writes down.
    pub(crate) fn record(&self) -> Record {
        self.record.clone()
    }

    /// Also names every hook call in [`Record::hooks`] (a lock per call: not for stress).
    pub(crate) fn naming_hooks(mut self) -> Self {
        self.naming = true;
        self
    }

    /// Answers `needs_successes` with `needs` instead of the policy's capabilities: `true` sends
    /// every closed-state success through the lock, `false` lets them take the lock-free lane.
    pub(crate) fn needs_successes(mut self, needs: bool) -> Self {
        self.needs_successes = Some(needs);
        self
    }

    fn name(&self, hook: &'static str) {
        if self.naming {
            self.record.hooks.push(hook);
        }
    }
}

impl<P: TripPolicy> TripPolicy for Recorded<P> {
    fn on_result(&mut self, result: &CallResult<'_>) -> bool {
        self.name("on_result");
        let i = match result.outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            _ => 2,
        };
        self.record.consulted[i].fetch_add(1, Ordering::Relaxed);
        self.inner.on_result(result)
    }

    fn open_duration(&mut self, timeout: Duration, now: Duration) -> Duration {
        self.name("open_duration");
        self.inner.open_duration(timeout, now)
    }

    fn on_probe_result(&mut self, result: &CallResult<'_>) {
        self.name("on_probe_result");
        self.inner.on_probe_result(result);
    }

    fn half_open_probes(&self, max_requests: u64) -> u64 {
        self.name("half_open_probes");
        self.inner.half_open_probes(max_requests)
    }

    /// Written down before the policy hears of it (so even if it panics).
    fn on_state_change(&mut self, from: State, to: State, now: Duration) {
        self.name("on_state_change");
        self.record.happened.push((from, to));
        self.inner.on_state_change(from, to, now);
    }

    fn capabilities(&self) -> Capabilities {
        self.name("capabilities");
        let caps = self.inner.capabilities();
        match self.needs_successes {
            Some(needs) => caps.needs_successes(needs),
            None => caps,
        }
    }

    fn gauges(&self, report: &mut dyn FnMut(&'static str, f64)) {
        self.name("gauges");
        self.inner.gauges(report);
    }
}

/// `P` with every result under the lock: every success shown to it (none counted on the
/// lock-free lane), the default failure headroom (no failure either) and no quiet successes
/// (a slow-call policy's calls tracked in flight by the machine). The reference a lane is
/// checked against in the differential tests.
#[derive(Debug, Clone)]
pub(crate) struct Locked<P>(pub(crate) P);

impl<P: TripPolicy> TripPolicy for Locked<P> {
    fn on_result(&mut self, r: &CallResult<'_>) -> bool {
        self.0.on_result(r)
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities().needs_successes(true)
    }
}
